//! `endhost status`: who a launched transport is, once it answers.

use std::path::PathBuf;
use std::time::Duration;

use endhost::daemon;

/// Ask a launched transport who it is; with --wait, wait until it answers.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// The running transport's Unix socket (`serve --socket`).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Seconds to wait for the transport to answer (0: ask once).
    #[arg(long, value_name = "SECS", default_value_t = 0, value_parser = mlt_common::units::seconds)]
    pub wait: u64,
    /// Give up early if the process in this file has exited.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let status = daemon::wait_ready(
        &args.socket,
        args.pid_file.as_deref(),
        Duration::from_secs(args.wait),
    )
    .map_err(anyhow::Error::msg)?;
    if args.json {
        println!("{}", serde_json::to_string(&status).expect("serializable"));
    } else {
        println!(
            "{}: rank {} of {}, job {}, {} datapath, pid {}, {} allreduces",
            status.host,
            status.rank,
            status.world_size,
            status.job_id,
            status.datapath.label(),
            status.pid,
            status.allreduces
        );
    }
    Ok(())
}
