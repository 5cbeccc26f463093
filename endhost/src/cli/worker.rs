//! `endhost worker`: a training worker under the controller.

use std::path::PathBuf;
use std::time::Duration;

use endhost::sync::worker::{self, WorkerOptions};
use endhost::{Options, Transport};
use mlt_common::units;

/// A training worker under the controller: compute, report ready, sync, repeat.
///
/// The computation is a sleep (--compute-ms ± --jitter, deterministic per rank and
/// round). With --config, each launch is a real weighted allreduce over exactly the
/// launched group through the transport, checked against the known inputs; without,
/// only the controller protocol runs. Prints one line (JSON with --json) per sync.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// The Selective Reduce controller (`endhost controller`), as ADDR:PORT.
    #[arg(long, value_name = "ADDR")]
    pub controller: std::net::SocketAddr,
    /// A file holding the controller's token (or set MLT_CONTROLLER_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// This worker's rank (the job rank when --config is given).
    #[arg(long)]
    pub rank: Option<u32>,
    /// The bandwidth this worker reports: 10gbit, 800mbit, …
    #[arg(long, default_value = "10gbit", value_parser = units::mbps)]
    pub bandwidth: u64,
    /// Mean computation time of one round, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub compute_ms: u64,
    /// Spread of the computation time: each round takes compute-ms · (1 ± jitter).
    #[arg(long, default_value_t = 0.3)]
    pub jitter: f64,
    /// Rounds to run before leaving.
    #[arg(long, default_value_t = 10)]
    pub rounds: u32,
    /// Synchronize through the transport with this host configuration.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Bytes per synchronization (with --config).
    #[arg(long, default_value = "1MiB", value_parser = super::tensor_bytes)]
    pub size: u64,
    /// Seconds to wait for a launch.
    #[arg(long, default_value_t = 60, value_parser = mlt_common::units::positive_seconds)]
    pub launch_timeout: u64,
    /// One JSON line per synchronization.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut options = WorkerOptions {
        controller: args.controller,
        rank: 0,
        bandwidth_bps: args.bandwidth as f64 * 1e6,
        compute: Duration::from_millis(args.compute_ms),
        jitter: args.jitter,
        rounds: args.rounds,
        values: (args.size / 4) as usize,
        launch_timeout: Duration::from_secs(args.launch_timeout),
        token: super::controller_token(args.token_file.as_deref())?,
    };
    let (rank, json) = (args.rank, args.json);
    let config = args.config.as_deref().map(super::read_config).transpose()?;
    options.rank = match (&config, rank) {
        (Some(c), Some(r)) if c.rank != r => {
            anyhow::bail!("--rank {r} but the configuration is rank {}", c.rank)
        }
        (Some(c), _) => c.rank,
        (None, Some(r)) => r,
        (None, None) => anyhow::bail!("give --rank (or --config)"),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let transport = match config {
            Some(c) => Some(Transport::start(c, Options::default()).await?),
            None => None,
        };
        let print = |s: &worker::Synced| {
            if json {
                println!("{}", serde_json::to_string(s).expect("serializable"));
            } else {
                println!(
                    "round {} sync {} with {:?}: waited {:.3} s, synced {:.3} s, {}",
                    s.round, s.sync, s.members, s.waited_s, s.sync_s, s.outcome
                );
            }
        };
        let result = worker::run(&options, transport.as_ref(), print).await;
        if let Some(t) = transport {
            t.shutdown().await;
        }
        result?;
        Ok(())
    })
}
