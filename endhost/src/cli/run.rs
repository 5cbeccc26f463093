//! `endhost run`: join the job and run allreduces that check themselves.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use endhost::{Options, Transport};
use endhost_core::collective::Algorithm;
use endhost_core::proto::counters::PeerCounters;
use endhost_core::proto::{Counters, LinkTime};
use endhost_core::workload;

use super::CollectiveArg;

/// Join the job a host configuration describes and run allreduces that check
/// themselves.
///
/// FILE is what `mltctl plan -i INVENTORY --host NAME` prints. Every rank of the job
/// must run this; each waits for the others to come up (--connect-timeout). Then
/// --iterations allreduces of --size bytes run, each after a barrier. Each rank's
/// input is known to all (rank r sends (r+1)·m(k), magnitudes varying by packet), so
/// each prints the time, the fraction delivered and the fraction of values that are
/// the exact sum (with --json also the fraction the transport itself reports exact,
/// `reported_exact`: at least 1 − the loss bound). Use it to check a fabric before training, or to measure it.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// The host's transport configuration (JSON).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Allreduces to run.
    #[arg(long, default_value_t = 1)]
    pub iterations: u32,
    /// Bytes per allreduce (f32 values): 64MiB, 64MB, 1048576, …
    #[arg(long, default_value = "64MiB", value_parser = super::tensor_bytes)]
    pub size: u64,
    /// Override the job's collective.
    #[arg(long, value_enum)]
    pub collective: Option<CollectiveArg>,
    /// Override the job's loss bound p (0: exact delivery).
    #[arg(long)]
    pub loss_bound: Option<f64>,
    /// Seconds to wait for every peer to come up.
    #[arg(long, default_value_t = 60, value_parser = mlt_common::units::positive_seconds)]
    pub connect_timeout: u64,
    /// Override the job's hard per-phase timeout, ms.
    #[arg(long)]
    pub phase_ms: Option<u32>,
    /// Spread the tensor over this many layers for tagging [default: the job's].
    #[arg(long)]
    pub layers: Option<u16>,
    /// One JSON object per line: each iteration, then the counters.
    #[arg(long)]
    pub json: bool,
}

pub fn run(options: Args) -> anyhow::Result<()> {
    let mut config = super::read_config(&options.config)?;
    if let Some(c) = options.collective {
        config.job.collective = c.into();
    }
    if let Some(p) = options.loss_bound {
        anyhow::ensure!((0.0..1.0).contains(&p), "--loss-bound must be in [0, 1)");
        config.job.loss_bound = p;
    }
    if let Some(ms) = options.phase_ms {
        config.job.timeouts.phase_ms = ms;
    }
    let layers = options
        .layers
        .unwrap_or(u16::try_from(config.job.tagging.layers).unwrap_or(u16::MAX));
    let (rank, world) = (config.rank, config.job.world_size);
    let values = (options.size / 4) as usize;
    let json = options.json;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let start = Options {
            connect_timeout: Duration::from_secs(options.connect_timeout),
            bind: None,
        };
        let transport = Transport::start(config, start).await?;
        let barrier = |t: &Transport| {
            let mut spec = t.allreduce_spec(u32::MAX, vec![0.0], Vec::new(), Some(0.0));
            spec.algorithm = Algorithm::Ring;
            spec
        };
        transport.allreduce(barrier(&transport)).await?;
        let mut data = workload::input(rank, values);
        for iteration in 0..options.iterations {
            transport.allreduce(barrier(&transport)).await?;
            let spec = transport.allreduce_spec(0, data, workload::layer_map(values, layers), None);
            let before = transport.counters().await?;
            let started = Instant::now();
            let done = transport.allreduce(spec).await?;
            let seconds = started.elapsed().as_secs_f64();
            let after = transport.counters().await?;
            // Every rank's allreduce is over before any checks its result: the check
            // would take the CPU from a rank still finishing (hosts share cores here).
            transport.allreduce(barrier(&transport)).await?;
            let exact = workload::exact_fraction(&done.data, world);
            if json {
                let secs = |f: fn(&LinkTime) -> u64| {
                    f(&after.link).saturating_sub(f(&before.link)) as f64 / 1e9
                };
                let packets = |c: &Counters, f: fn(&PeerCounters) -> u64| -> u64 {
                    c.peers.iter().map(f).sum()
                };
                println!(
                    "{}",
                    serde_json::json!({"iteration": iteration, "seconds": seconds,
                        "delivered": done.delivered, "exact": exact,
                        "reported_exact": done.exact,
                        "link": {"busy_s": secs(|l| l.busy_ns),
                            "rate_limited_s": secs(|l| l.rate_limited_ns),
                            "idle_s": secs(|l| l.idle_ns),
                            "late_s": secs(|l| l.late_ns)},
                        "packets_sent": packets(&after, |p| p.packets_sent)
                            - packets(&before, |p| p.packets_sent),
                        "packets_retransmitted": packets(&after, |p| p.packets_retransmitted)
                            - packets(&before, |p| p.packets_retransmitted)})
                );
            } else {
                println!(
                    "iteration {iteration}: {seconds:.3} s, {:.2}% delivered, {:.2}% exact",
                    done.delivered * 100.0,
                    exact * 100.0
                );
            }
            data = done.data;
            data.copy_from_slice(&workload::input(rank, values));
        }
        let counters = transport.counters().await?;
        transport.shutdown().await;
        if json {
            println!("{}", serde_json::json!({ "counters": counters }));
        } else {
            let sent: u64 = counters.peers.iter().map(|p| p.packets_sent).sum();
            let resent: u64 = counters.peers.iter().map(|p| p.packets_retransmitted).sum();
            println!(
                "packets sent {sent}, retransmitted {resent}, dropped as malformed or foreign {}",
                counters.dropped.total()
            );
        }
        anyhow::Ok(())
    })
}
