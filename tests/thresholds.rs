//! The oracle of the planner's loss predictions: over a grid of loads, importance
//! fractions, steps, limits and kinds of traffic, what the planner predicts a switch's
//! queues lose (`mlt_queue`, its slotted model) against what the
//! lab switch's queue loses when an independent generator offers it the same traffic at
//! exact times (`mltctl_lab::arrivals`, `mltctl_lab::queueing::Port`).
//!
//! ECT predictions may never be optimistic by more than 1.5× (or 1e-4 absolute);
//! Not-ECT ones must be within 3× either way (or 1e-4). Both sides are simulations
//! that count drops, and under bursts drops come in clusters: a loss near 1e-4 is a
//! handful of clusters in either count. So each bound is widened by twice the combined
//! standard error of the two estimates (the planner's from its independent runs, the
//! lab's from 30 consecutive windows of its run), and the test reports how often that
//! widening was needed.

use std::collections::BTreeMap;

use mlt_queue::{Limits, Loss, Tally, Traffic, estimate};
use mltctl::plan::thresholds::PREDICTION;
use mltctl_lab::arrivals::{self, Offered};
use mltctl_lab::qos::{Curve, PortQos, QueueQos};
use rayon::prelude::*;

/// Three gradient queues, highest priority first: (DSCP, queue, share).
const CLASSES: [(u8, u8, f64); 3] = [(32, 3, 0.2), (33, 2, 0.3), (34, 1, 0.5)];
const FRAME: u64 = 1500;
const RATE_BPS: u64 = 10_000_000_000;
/// Frames the lab's queue is offered per case.
const ARRIVALS: usize = 1_500_000;

#[derive(Debug, Clone, Copy)]
struct Case {
    load: f64,
    theta: f64,
    limits: Limits,
    batch: u32,
    senders: u32,
}

fn grid() -> Vec<Case> {
    let mut cases = Vec::new();
    for load in [0.5, 0.9, 1.2, 1.5] {
        for theta in [0.3, 0.5, 0.7] {
            for (mark, room) in [(8, 8), (24, 24), (64, 96)] {
                for (batch, senders) in [(1, 1), (16, 1), (16, 3)] {
                    cases.push(Case {
                        load,
                        theta,
                        limits: Limits {
                            mark,
                            limit: mark + room,
                        },
                        batch,
                        senders,
                    });
                }
            }
        }
    }
    cases
}

/// The lab switch's port: the three queues strict, each with a step at S (marking ECT,
/// dropping Not-ECT) and a limit at L, as SONiC and EOS hold them.
fn port_qos(limits: Limits) -> PortQos {
    let mut queue_of_dscp = [0u8; 64];
    let mut queues = BTreeMap::new();
    let step = Curve {
        min_bytes: u64::from(limits.mark) * FRAME,
        max_bytes: u64::from(limits.mark) * FRAME,
        max_percent: 100,
    };
    for (dscp, queue, _) in CLASSES {
        queue_of_dscp[usize::from(dscp)] = queue;
        queues.insert(
            queue,
            QueueQos {
                strict: true,
                mark: Some(step),
                drop_not_ect: Some(step),
                drop_all: None,
                limit_bytes: Some(u64::from(limits.limit) * FRAME),
            },
        );
    }
    PortQos {
        queue_of_dscp: queue_of_dscp.to_vec(),
        queues,
    }
}

/// Per queue (highest priority first): (Not-ECT, ECT) losses.
type Losses = Vec<(Loss, Loss)>;

fn predicted(case: &Case) -> Losses {
    let traffic = Traffic {
        load: case.load,
        theta: case.theta,
        batch: case.batch,
        senders: case.senders,
    };
    let shares: Vec<f64> = CLASSES.iter().map(|c| c.2).collect();
    let limits = [case.limits; 3];
    let tolerances = [(0.0, 0.0); 3];
    estimate(&traffic, &shares, &limits, &tolerances, 11, &PREDICTION)
        .iter()
        .map(|e| (e.not_ect, e.ect))
        .collect()
}

fn simulated(case: &Case) -> Losses {
    let offered = Offered {
        classes: CLASSES.iter().map(|c| (c.0, c.2)).collect(),
        load: case.load,
        theta: case.theta,
        frame_bytes: FRAME as usize,
        rate_bps: RATE_BPS,
        batch: case.batch,
        senders: case.senders,
    };
    let windows =
        arrivals::simulate_in_windows(port_qos(case.limits), u64::MAX, &offered, ARRIVALS, 30, 23);
    let loss = |dscp: u8, ect: bool| {
        let tallies: Vec<Tally> = windows
            .iter()
            .map(|w| {
                let (offered, lost) = w.get(&(dscp, ect)).copied().unwrap_or_default();
                Tally { offered, lost }
            })
            .collect();
        Loss::of(&tallies)
    };
    CLASSES
        .iter()
        .map(|c| (loss(c.0, false), loss(c.0, true)))
        .collect()
}

/// How a prediction compares with the simulation: within the bound outright, only
/// once the counting noise is allowed for, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Within,
    WithinNoise,
    Outside,
}

/// Whether `predicted` is within `factor` of `simulated` (or 1e-4 of it), on the
/// optimistic side only or on both.
fn compare(predicted: Loss, simulated: Loss, factor: f64, both_ways: bool) -> Verdict {
    const ABSOLUTE: f64 = 1e-4;
    let (p, s) = (predicted.fraction, simulated.fraction);
    let noise = 2.0 * (simulated.error.powi(2) + (factor * predicted.error).powi(2)).sqrt();
    let excess = |slack: f64| {
        let optimistic = s - factor * p > ABSOLUTE + slack;
        let pessimistic = both_ways && p - factor * s > ABSOLUTE + slack;
        optimistic || pessimistic
    };
    if !excess(0.0) {
        Verdict::Within
    } else if !excess(noise) {
        Verdict::WithinNoise
    } else {
        Verdict::Outside
    }
}

#[test]
fn predictions_hold_against_the_lab_switch_at_exact_times() {
    let results: Vec<(Case, Losses, Losses)> = grid()
        .into_par_iter()
        .map(|case| (case, predicted(&case), simulated(&case)))
        .collect();
    let mut failures = Vec::new();
    let mut noisy = 0;
    let mut worst = (1.0f64, 1.0f64);
    for (case, predicted, simulated) in &results {
        for (q, (p, s)) in predicted.iter().zip(simulated).enumerate() {
            let ratio = |p: Loss, s: Loss| {
                if p.fraction > 0.0 && s.fraction > 1e-3 {
                    s.fraction / p.fraction
                } else {
                    1.0
                }
            };
            worst.0 = worst.0.max(ratio(p.1, s.1));
            worst.1 = worst.1.max(ratio(p.0, s.0).max(ratio(s.0, p.0)));
            for (what, verdict, p, s) in [
                ("ECT", compare(p.1, s.1, 1.5, false), p.1, s.1),
                ("Not-ECT", compare(p.0, s.0, 3.0, true), p.0, s.0),
            ] {
                match verdict {
                    Verdict::Within => {}
                    Verdict::WithinNoise => {
                        noisy += 1;
                        eprintln!(
                            "within noise: {case:?} queue {q}: {what} predicted {:.3e} ±{:.1e}, simulated {:.3e} ±{:.1e}",
                            p.fraction, p.error, s.fraction, s.error
                        );
                    }
                    Verdict::Outside => failures.push(format!(
                        "{case:?} queue {q}: {what} predicted {:.3e} ±{:.1e}, simulated {:.3e} ±{:.1e}",
                        p.fraction, p.error, s.fraction, s.error
                    )),
                }
            }
        }
    }
    eprintln!(
        "{} cases, {} comparisons: worst ECT optimism {:.2}x and worst Not-ECT ratio {:.2}x \
         among losses above 1e-3; {noisy} within the bounds only once counting noise is allowed for",
        results.len(),
        results.len() * CLASSES.len() * 2,
        worst.0,
        worst.1
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
