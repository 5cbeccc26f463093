//! `endhost controller`: the Selective Reduce controller.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use endhost::sync::service;
use endhost_core::sync::bpawr::Knobs;
use endhost_core::sync::cdf::RuntimeCdf;
use endhost_core::sync::policy::{AllReduce, PartialReduce, Policy, Scheme};
use endhost_core::sync::selective::SelectiveReduce;

/// Run the synchronization controller: workers connect, it decides who syncs.
///
/// Workers (`endhost worker`, or a launcher speaking the same JSON lines) report
/// ready after each round with their computation time and bandwidth; the controller
/// answers with launches (members, staleness weights) by the --scheme rule: Selective
/// Reduce (BAG + BPAWR, Algorithm 3; the runtime distribution is learned from the
/// reports), partial reduce or all reduce. It decides after every ready report and
/// every Δt without one. A worker whose connection closes is dropped from every
/// decision. Prints `listening on ADDR`, then one JSON line per launch.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// Where workers connect. A non-loopback address needs a token (--token-file
    /// or MLT_CONTROLLER_TOKEN), so that only the job's workers can join.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7700")]
    pub listen: std::net::SocketAddr,
    /// A file holding the shared token workers must present (or set
    /// MLT_CONTROLLER_TOKEN; never on the command line, where `ps` shows it).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// How ready workers are grouped: selective-reduce, partial-reduce or all-reduce.
    #[arg(long, default_value = "selective-reduce")]
    pub scheme: Scheme,
    /// p: the smallest group that may synchronize.
    #[arg(long, default_value_t = 2)]
    pub min_group: usize,
    /// η: BAG extends a group down to (1 − η) of its p-th bandwidth.
    #[arg(long, default_value_t = 0.3)]
    pub eta: f64,
    /// θ: a replacement must save more than θ·Δt to be worth waiting for.
    #[arg(long, default_value_t = 1.0)]
    pub theta: f64,
    /// Δt, the waiting slot.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    pub delta_t_ms: u64,
    /// The model's size (what one synchronization moves per worker).
    #[arg(long, default_value = "500MB", value_parser = super::tensor_bytes)]
    pub model: u64,
    /// c: every c-th synchronization is a full allreduce of all workers.
    #[arg(long, value_name = "C")]
    pub full_every: Option<u64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let token = super::controller_token(args.token_file.as_deref())?;
    let (listen, scheme, full_every) = (args.listen, args.scheme, args.full_every);
    let knobs = Knobs {
        min_group: args.min_group,
        eta: args.eta,
        theta: args.theta,
        delta_t: Duration::from_millis(args.delta_t_ms).as_secs_f64(),
        model_bits: args.model as f64 * 8.0,
    };
    anyhow::ensure!(knobs.min_group >= 1, "--min-group must be at least 1");
    anyhow::ensure!((0.0..1.0).contains(&knobs.eta), "--eta must be in [0, 1)");
    anyhow::ensure!(knobs.delta_t > 0.0, "--delta-t-ms must be positive");
    anyhow::ensure!(
        token.is_some() || listen.ip().is_loopback(),
        "listening on {listen} without a token would let anyone on the network join the job: \
         give --token-file FILE or set MLT_CONTROLLER_TOKEN (workers present the same token)"
    );
    let policy: Box<dyn Policy> = match scheme {
        Scheme::AllReduce => Box::new(AllReduce::default()),
        Scheme::PartialReduce => Box::new(PartialReduce::new(knobs.min_group)),
        Scheme::SelectiveReduce => Box::new(SelectiveReduce::new(
            knobs,
            full_every,
            RuntimeCdf::new(RuntimeCdf::DEFAULT_CAPACITY),
            true,
        )),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        println!("listening on {}", listener.local_addr()?);
        let delta_t = Duration::from_secs_f64(knobs.delta_t);
        let access = service::Access { token };
        service::serve(listener, access, policy, delta_t, |at, launch| {
            let line = serde_json::to_string(&service::Logged {
                at_seconds: at,
                launch,
            })
            .expect("serializable");
            println!("{line}");
        })
        .await?;
        Ok(())
    })
}
