//! The sweep over traces, cluster sizes, schemes and trials, and its table.

use std::fmt;

use endhost_core::sync::policy::Scheme;
use rayon::prelude::*;
use serde::Serialize;

use super::{Metrics, Setup, Trace, simulate};

/// Min, median and max of each metric over the trials.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub trace: Trace,
    pub workers: usize,
    pub scheme: Scheme,
    pub min: Metrics,
    pub median: Metrics,
    pub max: Metrics,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    /// The settings every run shares (workers and trace vary).
    pub setup: Setup,
    pub trials: u64,
    pub seed: u64,
    pub rows: Vec<Row>,
    pub headline: Vec<Headline>,
}

/// Selective against partial reduce, from the medians: how much larger the average
/// scale and how much shorter the average sync time, at each n. The ratios depend on
/// Δt, the controller's waiting slot, so each carries it.
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    pub trace: Trace,
    pub workers: usize,
    pub delta_t_ms: f64,
    pub scale_ratio: f64,
    pub sync_time_ratio: f64,
}

/// Runs every (trace, n, scheme, trial) on all cores; `tick` is called after each run.
/// Trial t of every scheme and n uses seed `seed + t`, so the schemes meet the same
/// clusters and the result depends on nothing but the arguments.
pub fn sweep(
    template: &Setup,
    traces: &[Trace],
    workers: &[usize],
    trials: u64,
    seed: u64,
    tick: impl Fn() + Sync,
) -> Sweep {
    let mut cases = Vec::new();
    for &trace in traces {
        for &n in workers {
            for scheme in Scheme::ALL {
                cases.push((trace, n, scheme));
            }
        }
    }
    // A case's trials are consecutive, and `collect` keeps the order.
    let runs: Vec<Metrics> = cases
        .iter()
        .flat_map(|&case| (0..trials).map(move |t| (case, t)))
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|((trace, workers, scheme), trial)| {
            let setup = Setup {
                workers,
                trace,
                ..template.clone()
            };
            let metrics = simulate(&setup, scheme, seed + trial);
            tick();
            metrics
        })
        .collect();
    let rows: Vec<Row> = cases
        .iter()
        .zip(runs.chunks(trials as usize))
        .map(|(&(trace, workers, scheme), trials)| Row {
            trace,
            workers,
            scheme,
            min: summarize(trials, Stat::Min),
            median: summarize(trials, Stat::Median),
            max: summarize(trials, Stat::Max),
        })
        .collect();
    let headline = headline(&rows, template.delta_t);
    Sweep {
        setup: template.clone(),
        trials,
        seed,
        rows,
        headline,
    }
}

#[derive(Clone, Copy)]
enum Stat {
    Min,
    Median,
    Max,
}

fn summarize(trials: &[Metrics], stat: Stat) -> Metrics {
    let of = |get: fn(&Metrics) -> f64| {
        let mut xs: Vec<f64> = trials.iter().map(get).collect();
        xs.sort_by(f64::total_cmp);
        match (stat, xs.len()) {
            (_, 0) => 0.0,
            (Stat::Min, _) => xs[0],
            (Stat::Max, n) => xs[n - 1],
            (Stat::Median, n) if n % 2 == 1 => xs[n / 2],
            (Stat::Median, n) => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
        }
    };
    Metrics {
        avg_sync_time: of(|m| m.avg_sync_time),
        avg_sync_scale: of(|m| m.avg_sync_scale),
        total_sync: of(|m| m.total_sync),
        total_iteration: of(|m| m.total_iteration),
        wasted_wait: of(|m| m.wasted_wait),
    }
}

fn headline(rows: &[Row], delta_t: f64) -> Vec<Headline> {
    let find = |trace, workers, scheme| {
        rows.iter()
            .find(|r| r.trace == trace && r.workers == workers && r.scheme == scheme)
    };
    rows.iter()
        .filter(|r| r.scheme == Scheme::SelectiveReduce)
        .filter_map(|selective| {
            let partial = find(selective.trace, selective.workers, Scheme::PartialReduce)?;
            Some(Headline {
                trace: selective.trace,
                workers: selective.workers,
                delta_t_ms: delta_t * 1e3,
                scale_ratio: selective.median.avg_sync_scale / partial.median.avg_sync_scale,
                sync_time_ratio: partial.median.avg_sync_time / selective.median.avg_sync_time,
            })
        })
        .collect()
}

impl fmt::Display for Sweep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.setup;
        writeln!(
            f,
            "{} s of training; model {} MB; latency {} ms; bandwidth round(20u, 3) Gbit/s, \
             u ~ U[{}, 1]; p = {}·n, η = {}, θ = {}, Δt = {} ms; {} trials from seed {}{}",
            s.duration,
            s.model_bits / 8e6,
            s.latency * 1e3,
            s.lambda,
            s.min_group_fraction,
            s.eta,
            s.theta,
            s.delta_t * 1e3,
            self.trials,
            self.seed,
            if s.cold_start { "; cold start" } else { "" },
        )?;
        let mut traces: Vec<Trace> = self.rows.iter().map(|r| r.trace).collect();
        traces.dedup();
        for trace in traces {
            writeln!(
                f,
                "\n{} trace: median [min, max]\n{:>4}  {:<17}{:>24}{:>24}{:>20}{:>24}{:>22}",
                trace.name(),
                "n",
                "scheme",
                "avg sync time s",
                "avg sync scale",
                "total sync",
                "total iteration",
                "wasted wait ms",
            )?;
            for row in self.rows.iter().filter(|r| r.trace == trace) {
                let cell = |get: fn(&Metrics) -> f64, scale: f64, digits: usize| {
                    format!(
                        "{:.d$} [{:.d$}, {:.d$}]",
                        get(&row.median) * scale,
                        get(&row.min) * scale,
                        get(&row.max) * scale,
                        d = digits
                    )
                };
                writeln!(
                    f,
                    "{:>4}  {:<17}{:>24}{:>24}{:>20}{:>24}{:>22}",
                    row.workers,
                    row.scheme.name(),
                    cell(|m| m.avg_sync_time, 1.0, 2),
                    cell(|m| m.avg_sync_scale, 1.0, 1),
                    cell(|m| m.total_sync, 1.0, 0),
                    cell(|m| m.total_iteration, 1.0, 0),
                    cell(|m| m.wasted_wait, 1e3, 1),
                )?;
            }
            for h in self.headline.iter().filter(|h| h.trace == trace) {
                writeln!(
                    f,
                    "  n = {:>3}, Δt = {} ms: selective against partial reduce: {:.2}× the \
                     scale, {:.2}× shorter syncs",
                    h.workers, h.delta_t_ms, h.scale_ratio, h.sync_time_ratio
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_is_deterministic_and_summarizes_in_order() {
        let template = Setup {
            duration: 10.0,
            ..Setup::paper(40, Trace::Cnn)
        };
        let run = || sweep(&template, &[Trace::Cnn], &[40], 3, 9, || {});
        let a = run();
        let b = run();
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        assert_eq!(a.rows.len(), 3);
        for row in &a.rows {
            assert!(row.min.total_sync <= row.median.total_sync);
            assert!(row.median.total_sync <= row.max.total_sync);
        }
        assert_eq!(a.headline.len(), 1);
        assert_eq!(a.headline[0].delta_t_ms, 50.0);
    }
}
