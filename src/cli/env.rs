//! `mltctl env`: the environment a training process on one host runs with.

use mltctl::hosts;

use super::{DatapathArg, Failure, InventoryArg, host_rank, load, planned, print, print_json};

/// Print the environment a training process on one host runs with.
///
/// As `export KEY=value` lines a shell can source, or JSON. The same values
/// `launch` writes to the host's env file.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// The host (its name in the inventory).
    #[arg(long, value_name = "NAME")]
    pub host: String,
    /// Where `bootstrap` installed mltctl's files on the host.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/lib/mltctl",
        env = "MLTCTL_REMOTE_DIR"
    )]
    pub remote_dir: String,
    /// [default: the inventory's]
    #[arg(long, value_enum)]
    pub datapath: Option<DatapathArg>,
    /// Print the environment as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let Args {
        inventory,
        host,
        remote_dir,
        datapath,
        json,
    } = args;
    let plan = planned(&load(&inventory.inventory)?)?;
    let rank = host_rank(&plan, &host)?;
    let datapath = datapath.map_or(plan.job.datapath.kind, Into::into);
    let remote = hosts::Remote::new(&remote_dir, &plan).map_err(Failure::Usage)?;
    let env = hosts::environment(&plan, rank, &remote, datapath);
    if json {
        print_json(&env)?;
    } else {
        print(&hosts::env_file(&env))?;
    }
    Ok(())
}
