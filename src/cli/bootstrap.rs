//! `mltctl bootstrap`: every host's network made to match the plan, over SSH.

use std::path::PathBuf;

use anyhow::Context;
use mltctl::hosts;

use mltctl::plan::Plan;

use super::hosts::{HostArgs, host_line, host_plan, host_summary, host_targets};
use super::{DatapathArg, Failure, Ran};

/// The largest endhost binary bootstrap uploads (a debug build is about 80 MB).
const MAX_BINARY_BYTES: u64 = 1 << 30;

/// Make every host's network match the plan, over SSH.
///
/// Per host, over one SSH session: upload the endhost binary (unless the host has
/// this very one) and the host's network plan to --remote-dir (atomically), then
/// run `endhost configure` there, which applies only what differs — addresses, path
/// addresses, static neighbours, routes, MTU — verifies it and undoes everything on
/// failure. Entries it made that the plan no longer has are removed; nothing anyone
/// else configured is changed. With the dpdk datapath it also prepares the host
/// (IOMMU, hugepages, NIC binding). --check uploads to a scratch directory, reports
/// and removes it.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub hosts: HostArgs,
    /// Report what would change; change nothing.
    #[arg(long)]
    pub check: bool,
    /// List every change made (or, with --check, to be made) per host.
    #[arg(long)]
    pub diff: bool,
    /// Prepare for this datapath [default: the inventory's].
    #[arg(long, value_enum)]
    pub datapath: Option<DatapathArg>,
    /// The endhost binary to upload [default: the one beside mltctl].
    #[arg(long, value_name = "FILE")]
    pub endhost: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let plan = host_plan(&args.hosts)?;
    run_planned(args, &plan).result
}

/// `bootstrap` with the plan of its inventory already built.
pub fn run_planned(args: Args, plan: &Plan) -> Ran {
    bootstrap(args, plan).unwrap_or_else(Ran::from)
}

fn bootstrap(args: Args, plan: &Plan) -> Result<Ran, Failure> {
    let Args {
        hosts: args,
        check,
        diff,
        datapath,
        endhost,
    } = args;
    let args = &args;
    use mltctl::hosts::bootstrap::{self, Binary};
    let targets = host_targets(args, plan)?;
    let binary_path = match endhost {
        Some(path) => path,
        None => std::env::current_exe()
            .context("cannot find mltctl's own path")?
            .with_file_name("endhost"),
    };
    let bytes =
        mlt_common::input::read_bytes(&binary_path, MAX_BINARY_BYTES).with_context(|| {
            format!(
                "cannot read the endhost binary {} (build it, or give --endhost)",
                binary_path.display()
            )
        })?;
    let options = bootstrap::Options {
        check,
        forks: usize::from(args.forks),
        ssh: args.ssh.options(),
        remote: hosts::Remote::new(&args.remote_dir, plan).map_err(Failure::Usage)?,
        datapath: datapath.map_or(plan.job.datapath.kind, Into::into),
    };
    let started = std::time::Instant::now();
    let results = bootstrap::run_all(plan, &targets, &Binary::new(bytes), &options, &mut |p| {
        if let mltctl::parallel::Progress::Finished(_, result) = p {
            host_line(args.json, bootstrap::render(result, check, diff), result);
        }
    });
    super::say_recorded(&options.ssh);
    let summary = mlt_common::outcome::Summary::of(results.iter().map(|r| &r.status));
    let what = if check {
        "bootstrap (check)"
    } else {
        "bootstrap"
    };
    Ok(Ran {
        devices: results.iter().map(|r| (r.host.clone(), r.status)).collect(),
        result: host_summary(args.json, what, &summary, started.elapsed().as_secs_f64()),
    })
}
