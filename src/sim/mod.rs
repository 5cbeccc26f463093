//! `mltctl sim`: a deterministic, seeded discrete-event simulation of heterogeneous
//! data-parallel training under all reduce, partial reduce and selective reduce, as the
//! Selective Reduce document evaluates them (its §IV-A).
//!
//! n workers behind one non-blocking switch; worker k's up- and downlink carry
//! round(20u, 3) Gbit/s, u ~ U[λ, 1]; one-way latency α. A worker computes a round (time
//! from a [`Trace`]), reports ready to the controller (the same [`Policy`] code the
//! `endhost controller` service runs), waits for a launch, synchronizes, and computes
//! again. Groups are disjoint and each member's ring flow uses only its own links, so
//! max-min fair sharing gives every flow the group's smallest bandwidth and a sync takes
//! exactly Eq. 2: 2(k−1)α + 2(k−1)/k · v / min b.

pub mod plot;
pub mod report;
mod trace;

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use endhost_core::sync::bpawr::Knobs;
use endhost_core::sync::cdf::RuntimeCdf;
use endhost_core::sync::policy::{AllReduce, PartialReduce, Policy, Scheme};
use endhost_core::sync::selective::SelectiveReduce;
use endhost_core::sync::{WorkerId, ring_allreduce_seconds};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

pub use trace::Trace;

/// One simulated training run's settings.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    /// (Not in JSON: a sweep varies it.)
    #[serde(skip)]
    pub workers: usize,
    #[serde(skip)]
    pub trace: Trace,
    /// Simulated seconds of training.
    pub duration: f64,
    /// p as a fraction of n (p = round(fraction · n), at least 2).
    pub min_group_fraction: f64,
    pub eta: f64,
    pub theta: f64,
    /// Δt, seconds.
    pub delta_t: f64,
    /// v, bits (500 MB = 500·10⁶ bytes).
    pub model_bits: f64,
    /// α, seconds.
    pub latency: f64,
    /// λ: bandwidths are round(20u, 3) Gbit/s with u ~ U[λ, 1].
    pub lambda: f64,
    /// c: a full allreduce every c synchronizations (selective reduce only).
    pub full_every: Option<u64>,
    /// Learn the runtime distribution from observed rounds instead of knowing it.
    pub cold_start: bool,
    /// e: the controller sees b·(1 + e·x), x ~ U[−1, 1], instead of b.
    pub bandwidth_error: f64,
}

impl Setup {
    /// The document's defaults for n workers on a trace.
    pub fn paper(workers: usize, trace: Trace) -> Self {
        Self {
            workers,
            trace,
            duration: 100.0,
            min_group_fraction: 0.3,
            eta: 0.3,
            theta: 1.0,
            delta_t: 0.05,
            model_bits: 500e6 * 8.0,
            latency: 1e-3,
            lambda: 0.05,
            full_every: None,
            cold_start: false,
            bandwidth_error: 0.0,
        }
    }

    pub fn min_group(&self) -> usize {
        ((self.min_group_fraction * self.workers as f64).round() as usize).clamp(2, self.workers)
    }
}

/// The document's metrics for one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Mean seconds from a synchronization's launch to its end.
    pub avg_sync_time: f64,
    /// Mean number of workers per synchronization.
    pub avg_sync_scale: f64,
    /// Synchronizations completed within the run.
    pub total_sync: f64,
    /// Rounds completed by all workers (a round ends when its synchronization does).
    pub total_iteration: f64,
    /// Seconds per worker held back for arrivals that did not come.
    pub wasted_wait: f64,
}

impl Metrics {
    pub const NAMES: [&'static str; 5] = [
        "avg_sync_time",
        "avg_sync_scale",
        "total_sync",
        "total_iteration",
        "wasted_wait",
    ];

    pub fn get(&self, name: &str) -> f64 {
        match name {
            "avg_sync_time" => self.avg_sync_time,
            "avg_sync_scale" => self.avg_sync_scale,
            "total_sync" => self.total_sync,
            "total_iteration" => self.total_iteration,
            "wasted_wait" => self.wasted_wait,
            _ => unreachable!("unknown metric {name}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    Computed {
        worker: WorkerId,
        took: f64,
    },
    Synced {
        launch: usize,
    },
    /// Δt without a ready report (Algorithm 3's `GetReadyWorkerID` timing out).
    Tick {
        generation: u64,
    },
}

struct Scheduled {
    at: f64,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Earliest first (BinaryHeap is a max-heap); ties in scheduling order.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .total_cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Scheduled>,
    seq: u64,
}

impl Queue {
    fn push(&mut self, at: f64, event: Event) {
        self.seq += 1;
        self.heap.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }
}

/// Each worker's link bandwidth, bit/s: round(20u, 3) Gbit/s, u ~ U[λ, 1].
pub fn bandwidths(workers: usize, lambda: f64, rng: &mut impl Rng) -> Vec<f64> {
    (0..workers)
        .map(|_| {
            let u: f64 = rng.random_range(lambda..=1.0);
            (20.0 * u * 1000.0).round() / 1000.0 * 1e9
        })
        .collect()
}

/// Runs one training run of `setup` under `scheme`; `seed` fixes the bandwidths, every
/// worker's sequence of round times and the estimation errors, so the three schemes
/// see the same cluster.
pub fn simulate(setup: &Setup, scheme: Scheme, seed: u64) -> Metrics {
    let n = setup.workers;
    let mut cluster_rng = ChaCha8Rng::seed_from_u64(seed);
    let bandwidth = bandwidths(n, setup.lambda, &mut cluster_rng);
    // One stream per worker, so a worker's k-th round takes the same time whatever the
    // scheme does around it.
    let mut rounds: Vec<ChaCha8Rng> = (0..n)
        .map(|w| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(1 + w as u64);
            rng
        })
        .collect();
    let mut estimate_rng = ChaCha8Rng::seed_from_u64(seed);
    estimate_rng.set_stream(u64::MAX);
    let mut estimate = |w: usize| -> f64 {
        if setup.bandwidth_error == 0.0 {
            return bandwidth[w];
        }
        let x: f64 = estimate_rng.random_range(-1.0..=1.0);
        bandwidth[w] * (1.0 + setup.bandwidth_error * x)
    };

    let mut policy = policy(setup, scheme, seed);
    let mut events = Queue::default();
    for (w, stream) in rounds.iter_mut().enumerate() {
        policy.join(w as WorkerId, estimate(w), 0.0);
        let took = setup.trace.sample(stream);
        events.push(
            took,
            Event::Computed {
                worker: w as WorkerId,
                took,
            },
        );
    }
    // Each launch's members and how long its synchronization takes.
    let mut launched: Vec<(Vec<WorkerId>, f64)> = Vec::new();
    let mut generation = 0u64;
    let mut sync_seconds = 0.0;
    let mut metrics = Metrics::default();
    while let Some(Scheduled { at: now, event, .. }) = events.heap.pop() {
        if now > setup.duration {
            break;
        }
        let decide = match event {
            Event::Computed { worker, took } => {
                let estimate = estimate(worker as usize);
                policy.ready(worker, estimate, took);
                true
            }
            Event::Synced { launch } => {
                let (members, seconds) = std::mem::take(&mut launched[launch]);
                sync_seconds += seconds;
                metrics.total_sync += 1.0;
                metrics.total_iteration += members.len() as f64;
                policy.finished(&members, now);
                for &w in &members {
                    let took = setup.trace.sample(&mut rounds[w as usize]);
                    events.push(now + took, Event::Computed { worker: w, took });
                }
                false
            }
            Event::Tick { generation: g } => g == generation,
        };
        if !decide {
            continue;
        }
        for launch in policy.decide(now) {
            let slowest = launch
                .members
                .iter()
                .map(|&w| bandwidth[w as usize])
                .fold(f64::INFINITY, f64::min);
            let seconds = ring_allreduce_seconds(
                launch.members.len(),
                setup.latency,
                setup.model_bits,
                slowest,
            );
            events.push(
                now + seconds,
                Event::Synced {
                    launch: launched.len(),
                },
            );
            launched.push((launch.members, seconds));
        }
        generation += 1;
        if policy.roster().queue().len() > 0 {
            events.push(now + setup.delta_t, Event::Tick { generation });
        }
    }
    if metrics.total_sync > 0.0 {
        metrics.avg_sync_time = sync_seconds / metrics.total_sync;
        metrics.avg_sync_scale = metrics.total_iteration / metrics.total_sync;
    }
    metrics.wasted_wait = policy.wasted_wait_seconds() / n as f64;
    metrics
}

fn policy(setup: &Setup, scheme: Scheme, seed: u64) -> Box<dyn Policy> {
    match scheme {
        Scheme::AllReduce => Box::new(AllReduce::default()),
        Scheme::PartialReduce => Box::new(PartialReduce::new(setup.min_group())),
        Scheme::SelectiveReduce => {
            let knobs = Knobs {
                min_group: setup.min_group(),
                eta: setup.eta,
                theta: setup.theta,
                delta_t: setup.delta_t,
                model_bits: setup.model_bits,
            };
            let cdf = if setup.cold_start {
                RuntimeCdf::new(RuntimeCdf::DEFAULT_CAPACITY)
            } else {
                // Warm start: F from the trace itself, drawn on a stream of its own.
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(u64::MAX - 1);
                RuntimeCdf::from_samples(
                    (0..RuntimeCdf::DEFAULT_CAPACITY).map(|_| setup.trace.sample(&mut rng)),
                    RuntimeCdf::DEFAULT_CAPACITY,
                )
            };
            Box::new(SelectiveReduce::new(
                knobs,
                setup.full_every,
                cdf,
                setup.cold_start,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(workers: usize, trace: Trace) -> Setup {
        Setup {
            duration: 20.0,
            ..Setup::paper(workers, trace)
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        for scheme in Scheme::ALL {
            let setup = short(40, Trace::Transformer);
            assert_eq!(simulate(&setup, scheme, 11), simulate(&setup, scheme, 11));
        }
        let setup = short(40, Trace::Cnn);
        assert_ne!(
            simulate(&setup, Scheme::SelectiveReduce, 11),
            simulate(&setup, Scheme::SelectiveReduce, 12)
        );
    }

    #[test]
    fn schemes_keep_their_group_sizes() {
        let setup = short(40, Trace::Cnn);
        let all = simulate(&setup, Scheme::AllReduce, 3);
        assert_eq!(all.avg_sync_scale, 40.0);
        let partial = simulate(&setup, Scheme::PartialReduce, 3);
        assert_eq!(partial.avg_sync_scale, 12.0);
        let selective = simulate(&setup, Scheme::SelectiveReduce, 3);
        assert!(selective.avg_sync_scale > 12.0, "{selective:?}");
        for m in [all, partial, selective] {
            assert!(m.total_sync > 0.0 && m.avg_sync_time > 0.0, "{m:?}");
            assert_eq!(m.total_iteration, m.avg_sync_scale * m.total_sync);
        }
    }

    #[test]
    fn an_all_reduce_takes_the_slowest_links_time() {
        // Two workers, a fixed cluster: one all reduce costs Eq. 2 with the smaller link.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let b = bandwidths(2, 0.05, &mut rng);
        let setup = Setup::paper(2, Trace::Cnn);
        let m = simulate(&setup, Scheme::AllReduce, 5);
        let expected = ring_allreduce_seconds(2, 1e-3, 4e9, b[0].min(b[1]));
        assert!(
            (m.avg_sync_time - expected).abs() < 1e-9,
            "{m:?} {expected}"
        );
    }

    #[test]
    fn bandwidths_are_rounded_gbits_within_the_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for b in bandwidths(1000, 0.05, &mut rng) {
            assert!((1e9..=20e9).contains(&b), "{b}");
            let gbit = b / 1e9;
            assert!((gbit * 1000.0 - (gbit * 1000.0).round()).abs() < 1e-6);
        }
    }
}
