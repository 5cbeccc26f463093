//! `endhost stop`: stop a launched transport.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use endhost::daemon;

/// Stop a launched transport (SIGTERM, then SIGKILL after --grace seconds).
/// Stopping one that is not running succeeds.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// The running transport's pid file (`serve --pid-file`).
    #[arg(long, value_name = "FILE")]
    pub pid_file: PathBuf,
    /// Seconds to wait after SIGTERM before SIGKILL.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = mlt_common::units::seconds)]
    pub grace: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let stopped = daemon::stop(&args.pid_file, Duration::from_secs(args.grace))
        .with_context(|| format!("cannot stop the transport in {}", args.pid_file.display()))?;
    match stopped {
        Some(pid) => println!("stopped {pid}"),
        None => println!("not running"),
    }
    Ok(())
}
