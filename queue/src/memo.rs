//! Simulations already run, reused where they are exactly what a new one would give.
//!
//! A plan solves one threshold profile per buffer size, link speed and queue-limit
//! support, and the profiles often simulate the same traffic with thresholds that
//! differ only where no frame ever reaches them (a limit far above the longest queue).
//! A run is fixed by its seed, and a frame is dropped only when the queue it finds
//! reaches its room (S for Not-ECT, L for ECT), so two runs whose rooms differ only
//! above what every arrival of that kind found make the same decisions, arrival after
//! arrival: the same outcome. The memo answers from a run it holds only then.

use std::sync::Mutex;

use crate::{Estimated, Limits, Precision, QueueOutcome, Traffic, estimate_seeing, simulate};

/// Runs already made, shared by every solve of one plan.
#[derive(Default)]
pub struct Memo {
    simulated: Mutex<Vec<Simulated>>,
    estimated: Mutex<Vec<EstimatedRun>>,
}

struct Simulated {
    traffic: Traffic,
    shares: Vec<f64>,
    limits: Vec<Limits>,
    slots: u64,
    seed: u64,
    seen_up_to: Option<u32>,
    outcome: Vec<QueueOutcome>,
}

struct EstimatedRun {
    traffic: Traffic,
    shares: Vec<f64>,
    limits: Vec<Limits>,
    tolerances: Vec<(f64, f64)>,
    seed: u64,
    precision: Precision,
    estimated: Vec<Estimated>,
    longest: Vec<[u32; 2]>,
}

impl Memo {
    /// Simulations made rather than reused.
    pub fn runs(&self) -> usize {
        self.simulated.lock().expect("memo lock").len()
            + self.estimated.lock().expect("memo lock").len()
    }

    /// [`simulate`], answered from an equivalent run when one was made.
    pub fn simulate(
        &self,
        traffic: &Traffic,
        shares: &[f64],
        limits: &[Limits],
        slots: u64,
        seed: u64,
        seen_up_to: Option<u32>,
    ) -> Vec<QueueOutcome> {
        let held = self.simulated.lock().expect("memo lock");
        let found = held
            .iter()
            .filter(|s| {
                (&s.traffic, &s.shares[..], s.slots, s.seed) == (traffic, shares, slots, seed)
            })
            .find_map(|s| {
                let longest: Vec<[u32; 2]> = s.outcome.iter().map(|o| o.longest).collect();
                same_decisions(&s.limits, limits, &longest)
                    .then(|| resized(&s.outcome, s.seen_up_to, seen_up_to))
                    .flatten()
            });
        drop(held);
        if let Some(outcome) = found {
            return outcome;
        }
        let outcome = simulate(traffic, shares, limits, slots, seed, seen_up_to);
        self.simulated.lock().expect("memo lock").push(Simulated {
            traffic: *traffic,
            shares: shares.to_vec(),
            limits: limits.to_vec(),
            slots,
            seed,
            seen_up_to,
            outcome: outcome.clone(),
        });
        outcome
    }

    /// [`crate::estimate`], answered from an equivalent run when one was made.
    pub fn estimate(
        &self,
        traffic: &Traffic,
        shares: &[f64],
        limits: &[Limits],
        tolerances: &[(f64, f64)],
        seed: u64,
        precision: &Precision,
    ) -> Vec<Estimated> {
        let held = self.estimated.lock().expect("memo lock");
        let found = held.iter().find(|e| {
            (
                &e.traffic,
                &e.shares[..],
                &e.tolerances[..],
                e.seed,
                &e.precision,
            ) == (traffic, shares, tolerances, seed, precision)
                && same_decisions(&e.limits, limits, &e.longest)
        });
        if let Some(run) = found {
            return run.estimated.clone();
        }
        drop(held);
        let (estimated, longest) =
            estimate_seeing(traffic, shares, limits, tolerances, seed, precision);
        self.estimated
            .lock()
            .expect("memo lock")
            .push(EstimatedRun {
                traffic: *traffic,
                shares: shares.to_vec(),
                limits: limits.to_vec(),
                tolerances: tolerances.to_vec(),
                seed,
                precision: *precision,
                estimated: estimated.clone(),
                longest,
            });
        estimated
    }
}

/// Whether a run made with limits `ran` (whose arrivals found at most `longest` frames
/// queued, per queue and kind) decides every arrival as one with limits `asked` would:
/// each room is the same, or above what every arrival of its kind found in both.
fn same_decisions(ran: &[Limits], asked: &[Limits], longest: &[[u32; 2]]) -> bool {
    ran.len() == asked.len()
        && ran.iter().zip(asked).zip(longest).all(|((a, b), seen)| {
            let room = |l: &Limits| [l.mark, l.limit];
            room(a)
                .iter()
                .zip(room(b))
                .zip(seen)
                .all(|((a, b), seen)| *a == b || *seen < (*a).min(b))
        })
}

/// `outcome`, counted up to `ran` frames, as counted up to `asked`: folding the lengths
/// above into the last entry, or (when no arrival reached the last entry) widening it;
/// None when the counts cannot tell.
fn resized(
    outcome: &[QueueOutcome],
    ran: Option<u32>,
    asked: Option<u32>,
) -> Option<Vec<QueueOutcome>> {
    let (ran, asked) = match (ran, asked) {
        (None, None) => return Some(outcome.to_vec()),
        (Some(ran), Some(asked)) => (ran as usize, asked as usize),
        (None, Some(_)) => return None,
        (Some(_), None) => {
            return Some(
                outcome
                    .iter()
                    .map(|o| QueueOutcome {
                        seen_not_ect: Vec::new(),
                        seen_ect: Vec::new(),
                        ..o.clone()
                    })
                    .collect(),
            );
        }
    };
    let resize = |seen: &[u64], longest: u32| -> Option<Vec<u64>> {
        // Entry i counts arrivals that found i frames; the last, that many or more.
        if asked <= ran {
            let mut out = seen[..=asked].to_vec();
            out[asked] += seen[asked + 1..].iter().sum::<u64>();
            Some(out)
        } else if (longest as usize) < ran {
            let mut out = seen.to_vec();
            out.resize(asked + 1, 0);
            Some(out)
        } else {
            None
        }
    };
    outcome
        .iter()
        .map(|o| {
            Some(QueueOutcome {
                seen_not_ect: resize(&o.seen_not_ect, o.longest[0])?,
                seen_ect: resize(&o.seen_ect, o.longest[1])?,
                ..o.clone()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate;

    const TRAFFIC: Traffic = Traffic {
        load: 0.9,
        theta: 0.5,
        batch: 16,
        senders: 2,
    };
    const SHARES: [f64; 2] = [0.4, 0.6];
    const SLOTS: u64 = 200_000;

    fn limits(marks: [u32; 2], limit: u32) -> Vec<Limits> {
        marks.iter().map(|&mark| Limits { mark, limit }).collect()
    }

    #[test]
    fn a_limit_no_arrival_reaches_gives_the_run_already_made() {
        let memo = Memo::default();
        let first = memo.simulate(&TRAFFIC, &SHARES, &limits([4, 8], 5_000), SLOTS, 7, None);
        assert!(
            first
                .iter()
                .all(|o| o.longest[1] < 1_000 && o.ect.lost == 0)
        );
        let higher = limits([4, 8], 9_000);
        let answered = memo.simulate(&TRAFFIC, &SHARES, &higher, SLOTS, 7, None);
        assert_eq!(memo.runs(), 1, "the second run was reused");
        assert_eq!(
            answered,
            simulate(&TRAFFIC, &SHARES, &higher, SLOTS, 7, None)
        );
    }

    #[test]
    fn a_room_some_arrival_reached_is_simulated_anew() {
        let memo = Memo::default();
        memo.simulate(&TRAFFIC, &SHARES, &limits([4, 8], 5_000), SLOTS, 7, None);
        // The Not-ECT step moves where frames are dropped: a different run.
        let lower = limits([3, 8], 5_000);
        let answered = memo.simulate(&TRAFFIC, &SHARES, &lower, SLOTS, 7, None);
        assert_eq!(memo.runs(), 2);
        assert_eq!(
            answered,
            simulate(&TRAFFIC, &SHARES, &lower, SLOTS, 7, None)
        );
        // So does a limit that ECT frames reached, even from above.
        let tight = limits([4, 8], 12);
        memo.simulate(&TRAFFIC, &SHARES, &tight, SLOTS, 7, None);
        let tighter = limits([4, 8], 11);
        let answered = memo.simulate(&TRAFFIC, &SHARES, &tighter, SLOTS, 7, None);
        assert_eq!(memo.runs(), 4);
        assert_eq!(
            answered,
            simulate(&TRAFFIC, &SHARES, &tighter, SLOTS, 7, None)
        );
        // And another seed.
        memo.simulate(&TRAFFIC, &SHARES, &limits([4, 8], 5_000), SLOTS, 8, None);
        assert_eq!(memo.runs(), 5);
    }

    #[test]
    fn counts_of_queue_lengths_fold_and_widen_exactly() {
        let open = |most: u32| limits([most, most], most);
        let memo = Memo::default();
        memo.simulate(&TRAFFIC, &SHARES, &open(4_000), SLOTS, 3, Some(4_000));
        // Counted up to fewer frames: the lengths above fold into the last entry.
        for most in [2_000, 40, 5] {
            let answered = memo.simulate(&TRAFFIC, &SHARES, &open(most), SLOTS, 3, Some(most));
            let direct = simulate(&TRAFFIC, &SHARES, &open(most), SLOTS, 3, Some(most));
            let dropped = direct.iter().any(|o| o.ect.lost + o.not_ect.lost > 0);
            assert_eq!(answered, direct, "up to {most} frames");
            assert_eq!(memo.runs(), if dropped { 2 } else { 1 });
            if dropped {
                break;
            }
        }
        // Counted up to more frames than any arrival found: the same run, widened.
        let answered = memo.simulate(&TRAFFIC, &SHARES, &open(8_000), SLOTS, 3, Some(8_000));
        assert_eq!(
            answered,
            simulate(&TRAFFIC, &SHARES, &open(8_000), SLOTS, 3, Some(8_000))
        );
    }

    #[test]
    fn an_estimate_is_reused_only_where_it_decides_alike() {
        let memo = Memo::default();
        let tolerances = [(0.2, 0.01), (0.1, 0.005)];
        let precision = Precision {
            run_slots: 1 << 14,
            min_runs: 4,
            max_runs: 16,
            relative_error: 0.1,
            absolute_error: 2e-5,
            tolerance_error: 0.05,
            resolved_share: 0.01,
        };
        let run = |l: &[Limits]| memo.estimate(&TRAFFIC, &SHARES, l, &tolerances, 5, &precision);
        let direct = |l: &[Limits]| estimate(&TRAFFIC, &SHARES, l, &tolerances, 5, &precision);
        run(&limits([4, 8], 5_000));
        for (asked, runs) in [
            (limits([4, 8], 6_000), 1),
            (limits([4, 9], 6_000), 2),
            (limits([4, 9], 20), 3),
        ] {
            assert_eq!(run(&asked), direct(&asked));
            assert_eq!(memo.runs(), runs);
        }
    }
}
