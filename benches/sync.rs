//! `cargo bench --bench sync`: how long the controller takes to decide, and the
//! simulator's full sweep.
//!
//! - One decision (Algorithm 3's step: BAG over the ready queue, BPAWR for every group)
//!   with n = 10,000 workers, half ready and half computing, bandwidths as in the
//!   Selective Reduce evaluation, the runtime CDF known; beside it, partial reduce's
//!   decision on the same state. Goal: selective reduce under 1 ms.
//! - `mltctl sim`'s default sweep (2 traces × n = 40…200 × 3 schemes × 20 trials of
//!   100 s), in-process on all cores.
//!
//! Prints a table and, last, one JSON line. Optional: `--runs N` (default 31).

mod common;

use std::time::{Duration, Instant};

use common::{print, row, runs_from_args};
use endhost_core::sync::bpawr::Knobs;
use endhost_core::sync::cdf::RuntimeCdf;
use endhost_core::sync::policy::{PartialReduce, Policy};
use endhost_core::sync::selective::SelectiveReduce;
use mltctl::sim::{Setup, Trace, bandwidths, report};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const WORKERS: usize = 10_000;
const GOAL_MS: f64 = 1.0;

/// A controller with every worker joined at 0 and the even ones ready at 1 s.
fn prepared(mut policy: Box<dyn Policy>, bandwidth: &[f64]) -> Box<dyn Policy> {
    for (w, &b) in bandwidth.iter().enumerate() {
        policy.join(w as u32, b, 0.0);
    }
    for (w, &b) in bandwidth.iter().enumerate().step_by(2) {
        policy.ready(w as u32, b, 1.0);
    }
    policy
}

fn decision_times(runs: usize, make: impl Fn() -> Box<dyn Policy>) -> (Vec<Duration>, usize) {
    let mut launched = 0;
    let times = (0..runs)
        .map(|_| {
            let mut policy = make();
            let start = Instant::now();
            let launches = std::hint::black_box(policy.decide(1.0));
            let took = start.elapsed();
            launched = launches.len();
            took
        })
        .collect();
    (times, launched)
}

fn main() {
    let runs = runs_from_args(31);
    let bandwidth = bandwidths(WORKERS, 0.05, &mut ChaCha8Rng::seed_from_u64(1));
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let cdf = RuntimeCdf::from_samples(
        (0..RuntimeCdf::DEFAULT_CAPACITY).map(|_| Trace::Transformer.sample(&mut rng)),
        RuntimeCdf::DEFAULT_CAPACITY,
    );
    let knobs = Knobs {
        min_group: (0.3 * WORKERS as f64) as usize,
        eta: 0.3,
        theta: 1.0,
        delta_t: 0.05,
        model_bits: 4e9,
    };
    let (selective, selective_groups) = decision_times(runs, || {
        prepared(
            Box::new(SelectiveReduce::new(knobs, None, cdf.clone(), false)),
            &bandwidth,
        )
    });
    let (partial, partial_groups) = decision_times(runs, || {
        prepared(Box::new(PartialReduce::new(knobs.min_group)), &bandwidth)
    });
    let selective = row(
        format!("selective reduce decision, n = {WORKERS}"),
        selective,
    );
    let partial = row(format!("partial reduce decision, n = {WORKERS}"), partial);

    let template = Setup::paper(40, Trace::Cnn);
    let sweep_runs = (runs / 10).max(3);
    let sweeps = (0..sweep_runs)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(report::sweep(
                &template,
                &[Trace::Cnn, Trace::Transformer],
                &[40, 80, 120, 160, 200],
                20,
                1,
                || {},
            ));
            start.elapsed()
        })
        .collect();
    let sweep = row("mltctl sim: full sweep (600 runs of 100 s)".into(), sweeps);

    println!(
        "decisions with p = {}: selective reduce median {:.0} µs ({} launches), partial \
         reduce median {:.0} µs ({} launches)",
        knobs.min_group,
        selective.median_ms * 1e3,
        selective_groups,
        partial.median_ms * 1e3,
        partial_groups,
    );
    let met = selective.median_ms < GOAL_MS;
    println!(
        "goal: selective reduce decides in under {GOAL_MS} ms for n = {WORKERS}: {}",
        if met { "met" } else { "MISSED" }
    );
    print(
        "controller decisions and the simulator",
        &[selective, partial, sweep],
        serde_json::json!({ "bench": "sync", "workers": WORKERS, "goal_met": met }),
    );
}
