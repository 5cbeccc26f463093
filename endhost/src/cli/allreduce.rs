//! `endhost allreduce`: a client of a launched transport running self-checking
//! allreduces, as a training process would.

use std::path::PathBuf;

use anyhow::Context;
use endhost::daemon;
use endhost_core::workload;

/// Run self-checking allreduces through a launched transport, as a training
/// process would: every rank must run it with the same --size and --iterations.
/// Rank r sends (r+1)·m(k); each iteration prints the time, the fraction delivered
/// and the fraction of values that are the exact sum.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// The running transport's Unix socket (`serve --socket`).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Bytes per allreduce: 4MiB, 64MiB, …
    #[arg(long, default_value = "4MiB", value_parser = super::tensor_bytes)]
    pub size: u64,
    /// Allreduces to run.
    #[arg(long, default_value_t = 1)]
    pub iterations: u32,
    /// One JSON line per iteration.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        socket,
        size,
        iterations,
        json,
    } = args;
    let mut client = daemon::Client::connect(&socket)
        .with_context(|| format!("no transport answers on {}", socket.display()))?;
    let status = client.status()?;
    let values = (size / 4) as usize;
    for iteration in 0..iterations {
        let mut data = workload::input(status.rank, values);
        let reply = client.allreduce(&mut data, 0)?;
        if let Some(error) = reply.error {
            anyhow::bail!("allreduce {iteration}: {error}");
        }
        let exact = workload::exact_fraction(&data, status.world_size);
        if json {
            println!(
                "{}",
                serde_json::json!({"iteration": iteration, "rank": status.rank,
                    "seconds": reply.seconds, "delivered": reply.delivered, "exact": exact,
                    "reported_exact": reply.exact})
            );
        } else {
            println!(
                "iteration {iteration}: {:.3} s, {:.2}% delivered, {:.2}% exact",
                reply.seconds,
                reply.delivered * 100.0,
                exact * 100.0
            );
        }
    }
    Ok(())
}
