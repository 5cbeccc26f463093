//! endhost's commands, one file each: its arguments, its run, its output.

pub mod allreduce;
#[cfg(feature = "testbed")]
pub mod bench;
pub mod configure;
pub mod controller;
pub mod probe;
pub mod run;
pub mod serve;
pub mod status;
pub mod stop;
pub mod worker;

use anyhow::Context;
use clap::ValueEnum;
use endhost_core::config::{Collective, TransportConfig};

pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file, the fabric, a peer or a collective failed (the message says which)
  2  the command line is wrong
  3  (configure) the plan file is invalid; nothing was changed";

/// `--version`: the version and the datapaths this build has.
#[cfg(feature = "dpdk")]
const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (datapaths: udp, dpdk)");
#[cfg(not(feature = "dpdk"))]
const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (datapaths: udp)");

/// The end-host transport of mltctl: bounded-loss collectives over UDP, with per-packet
/// DSCP/ECN tagging, TIMELY-like rate control and path spraying (MLT).
#[derive(clap::Parser)]
#[command(name = "endhost", version, long_version = LONG_VERSION, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand)]
pub enum Command {
    Serve(serve::Args),
    Status(status::Args),
    Probe(probe::Args),
    Stop(stop::Args),
    Allreduce(allreduce::Args),
    Configure(configure::Args),
    Run(run::Args),
    Controller(controller::Args),
    Worker(worker::Args),
    #[cfg(feature = "testbed")]
    #[command(subcommand, after_help = EXIT_CODES)]
    Bench(bench::Command),
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CollectiveArg {
    Ring,
    Transpose,
    Ps,
}

impl From<CollectiveArg> for Collective {
    fn from(c: CollectiveArg) -> Self {
        match c {
            CollectiveArg::Ring => Collective::Ring,
            CollectiveArg::Transpose => Collective::Transpose,
            CollectiveArg::Ps => Collective::Ps,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Baseline {
    Gloo,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DatapathArg {
    Udp,
    Dpdk,
}

/// Who polls DPDK's RX queues (`dpdk.inline_rx`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RxPollingArg {
    /// An lcore per queue, handing frames over to the datapath thread.
    Lcores,
    /// The datapath thread itself, run to completion.
    Inline,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BlastRole {
    Send,
    Receive,
}

/// A size of f32 values (`64MiB`, `4096`, …; see `mlt_common::units`): positive and a
/// multiple of 4 bytes.
pub fn tensor_bytes(text: &str) -> Result<u64, String> {
    let bytes = mlt_common::units::bytes(text).map_err(|e| e.to_string())?;
    if bytes == 0 || !bytes.is_multiple_of(4) {
        return Err(format!(
            "`{text}` is not a positive multiple of 4 bytes (f32 values)"
        ));
    }
    Ok(bytes)
}

/// A host's transport configuration, as `mltctl plan --host NAME` writes it.
pub fn read_config(path: &std::path::Path) -> anyhow::Result<TransportConfig> {
    let text = mlt_common::input::read_text(path, mlt_common::input::MAX_FILE_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a host configuration", path.display()))
}

/// The controller's shared token: from `file`, else MLT_CONTROLLER_TOKEN, else none.
pub fn controller_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let token = match file {
        Some(path) => mlt_common::input::read_text(path, 4096)
            .with_context(|| format!("cannot read the token file {}", path.display()))?
            .trim()
            .to_string(),
        None => match std::env::var("MLT_CONTROLLER_TOKEN") {
            Ok(token) => token.trim().to_string(),
            Err(_) => return Ok(None),
        },
    };
    anyhow::ensure!(!token.is_empty(), "the controller token is empty");
    Ok(Some(token))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command and every option says what it is for in `--help`.
    #[test]
    fn every_command_and_option_has_help() {
        let missing = endhost::help::missing_help(&super::Cli::command());
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
