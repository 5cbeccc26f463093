//! `endhost configure`: the host agent, applying this host's network plan.

use std::path::PathBuf;
use std::process::ExitCode;

use endhost::agent::{self, dpdk::Sysfs, load_plan};
use endhost_core::host::render;
use mlt_common::outcome::Status;

/// Make this host's network match its part of the plan, through netlink.
///
/// FILE is what `mltctl plan -i INVENTORY --host NAME --network` prints (and what
/// `mltctl bootstrap` uploads): the data NIC's MTU, its address and path addresses,
/// static neighbours (the rack gateway and the rack's other hosts) and routes to the
/// other racks and the path pool through the gateway. Only the difference is
/// applied, then read back and verified; on any failure this run's changes are
/// undone. Everything added carries protocol 77 (`ip route show proto 77`): entries
/// the plan no longer has are removed if they carry it, and entries anyone else made
/// are never changed (one that contradicts the plan stops the run, unchanged). With
/// a `dpdk` section it also checks the IOMMU, reserves hugepages and binds the NIC.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// This host's network plan (`mltctl plan --host NAME --network`).
    #[arg(long, value_name = "FILE")]
    pub plan: PathBuf,
    /// Report what would change; change nothing.
    #[arg(long)]
    pub check: bool,
    /// List every change (made, or with --check to be made).
    #[arg(long)]
    pub diff: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Exit 3 for a bad plan file (nothing changed), 1 when the host could not be
/// configured as planned.
pub fn run(args: Args) -> ExitCode {
    let plan = match load_plan(&args.plan) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("endhost: {e}");
            return ExitCode::from(3);
        }
    };
    let report = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(agent::configure(&plan, args.check, &Sysfs::default())),
        Err(e) => {
            eprintln!("endhost: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&report).expect("serializable"));
    } else {
        print!("{}", render(&report, args.diff));
    }
    if report.status == Status::Failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
