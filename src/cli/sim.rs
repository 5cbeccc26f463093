//! `mltctl sim`: all, partial and selective reduce, simulated.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;

use super::{Failure, print, print_json};

/// Simulate training under all reduce, partial reduce and selective reduce.
///
/// A deterministic discrete-event simulation of the Selective Reduce document's
/// evaluation: n workers behind one switch with bandwidths round(20u, 3) Gbit/s,
/// u ~ U[λ, 1]; each computes a round (CNN-like or Transformer-like runtimes),
/// reports to the controller, and synchronizes with a ring allreduce (Eq. 2). For
/// each trace, n and scheme it prints min, median and max over the trials of the
/// average sync time, average sync scale, total syncs, total iterations and wasted
/// wait per worker. The same arguments give the same numbers.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// Runtime traces to simulate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "cnn,transformer")]
    pub trace: Vec<mltctl::sim::Trace>,
    /// Cluster sizes n, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "40,80,120,160,200")]
    pub workers: Vec<usize>,
    /// Runs per (trace, n, scheme); trial t uses seed SEED + t.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub trials: u64,
    /// First random seed; trial t uses SEED + t.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated seconds of training per run.
    #[arg(long, value_name = "SECS", default_value_t = 100.0)]
    pub duration: f64,
    /// p, the smallest group, as a fraction of n.
    #[arg(long, default_value_t = 0.3)]
    pub p_fraction: f64,
    /// η: BAG extends a group with workers down to (1 − η) of its p-th bandwidth.
    #[arg(long, default_value_t = 0.3)]
    pub eta: f64,
    /// θ: a replacement must save more than θ·Δt to be worth waiting for.
    #[arg(long, default_value_t = 1.0)]
    pub theta: f64,
    /// Δt, the waiting slot.
    #[arg(long, value_name = "MS", default_value_t = 50.0)]
    pub delta_t_ms: f64,
    /// Model size in MB (10⁶ bytes).
    #[arg(long, default_value_t = 500.0)]
    pub model_mb: f64,
    /// One-way latency α between workers.
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    pub latency_ms: f64,
    /// λ: the bandwidth skew (u ~ U[λ, 1]); smaller is more skewed.
    #[arg(long, default_value_t = 0.05)]
    pub lambda: f64,
    /// c: selective reduce runs a full weighted allreduce of all workers every c
    /// synchronizations (default: never, like the baselines).
    #[arg(long, value_name = "C")]
    pub full_every: Option<u64>,
    /// The controller learns the runtime distribution from observed rounds instead of
    /// knowing it in advance.
    #[arg(long)]
    pub cold_start: bool,
    /// e: the controller's bandwidth estimates are off by b·e·x, x ~ U[−1, 1].
    #[arg(long, default_value_t = 0.0)]
    pub bandwidth_error: f64,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also draw each metric against n to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    use mltctl::sim::{Setup, report};
    let positive = [
        ("--duration", args.duration),
        ("--delta-t-ms", args.delta_t_ms),
        ("--model-mb", args.model_mb),
    ];
    for (name, value) in positive {
        if !(value.is_finite() && value > 0.0) {
            return Err(Failure::Usage(format!(
                "{name} must be positive, not {value}"
            )));
        }
    }
    let fractions = [
        ("--p-fraction", args.p_fraction, 0.0, 1.0),
        ("--eta", args.eta, 0.0, 1.0),
        ("--lambda", args.lambda, 0.0, 1.0),
        ("--bandwidth-error", args.bandwidth_error, 0.0, 0.99),
    ];
    for (name, value, lo, hi) in fractions {
        if !(lo..=hi).contains(&value) {
            return Err(Failure::Usage(format!(
                "{name} must be between {lo} and {hi}, not {value}"
            )));
        }
    }
    if args.lambda == 0.0 {
        return Err(Failure::Usage(
            "--lambda must be above 0 (a link of 0 Gbit/s)".into(),
        ));
    }
    if !(args.theta >= 0.0 && args.latency_ms >= 0.0) {
        return Err(Failure::Usage(
            "--theta and --latency-ms cannot be negative".into(),
        ));
    }
    if let Some(n) = args.workers.iter().find(|&&n| !(2..=100_000).contains(&n)) {
        return Err(Failure::Usage(format!(
            "--workers: {n} is not between 2 and 100000"
        )));
    }
    let template = Setup {
        duration: args.duration,
        min_group_fraction: args.p_fraction,
        eta: args.eta,
        theta: args.theta,
        delta_t: args.delta_t_ms / 1e3,
        model_bits: args.model_mb * 8e6,
        latency: args.latency_ms / 1e3,
        lambda: args.lambda,
        full_every: args.full_every,
        cold_start: args.cold_start,
        bandwidth_error: args.bandwidth_error,
        ..Setup::paper(args.workers[0], args.trace[0])
    };
    let runs = (args.trace.len() * args.workers.len() * 3) as u64 * args.trials;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(runs);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {eta} left")
                .expect("valid template"),
        );
        bar
    });
    let sweep = report::sweep(
        &template,
        &args.trace,
        &args.workers,
        args.trials,
        args.seed,
        || {
            if let Some(bar) = &bar {
                bar.inc(1);
            }
        },
    );
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, mltctl::sim::plot::svg(&sweep))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        print_json(&sweep)?;
    } else {
        print(&sweep.to_string())?;
    }
    if let Some(path) = &args.plot {
        // On stderr, so that --json output stays one JSON document.
        eprintln!("wrote the plot to {}", path.display());
    }
    Ok(())
}
