//! A switch's egress port as mltctl's planner models it, simulated in time slots of one
//! frame: strict priority between the gradient queues, one FIFO per queue that admits
//! a Not-ECT frame below its step S and an ECT frame below its limit L (marking it at
//! or above S), one frame sent per slot, and arrivals as the transport sends them
//! (bursts of pacing batches at line rate). Deterministic for a seed. The planner runs
//! it on frame counts only; `docs/src/design/plan.md` says how it was validated
//! (tests/thresholds.rs, against the lab switch's queue at exact times).

mod memo;

use rayon::prelude::*;
use std::collections::VecDeque;

pub use memo::Memo;

/// What arrives at a congested port.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// Frames offered per slot on average: the load as a fraction of line rate (it may
    /// exceed 1, an overloaded port).
    pub load: f64,
    /// Fraction of frames sent Not-ECT (the importance quantile θ).
    pub theta: f64,
    /// Frames each sender sends back to back at line rate: its pacing batch.
    pub batch: u32,
    /// Senders whose batches arrive together, one frame each per slot: the
    /// collective's fan-in.
    pub senders: u32,
}

impl Traffic {
    /// Single frames at Poisson times: Appendix B's arrivals, for comparison.
    pub fn poisson_frames(load: f64, theta: f64) -> Traffic {
        Traffic {
            load,
            theta,
            batch: 1,
            senders: 1,
        }
    }

    /// Frames one burst brings: every sender's batch.
    pub fn burst_frames(&self) -> u32 {
        self.batch * self.senders
    }
}

/// One gradient queue's thresholds, in frames: Not-ECT frames are admitted while the
/// queue holds fewer than `mark`, ECT frames while it holds fewer than `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub mark: u32,
    pub limit: u32,
}

impl Limits {
    /// No thresholds below `cap` frames: how long the queue grows when nothing drops.
    pub fn open(cap: u32) -> Limits {
        Limits {
            mark: cap,
            limit: cap,
        }
    }
}

/// Frames of one kind offered to a queue, and how many it dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub offered: u64,
    pub lost: u64,
}

impl Tally {
    pub fn fraction(&self) -> f64 {
        if self.offered == 0 {
            0.0
        } else {
            self.lost as f64 / self.offered as f64
        }
    }
}

/// What one queue saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueOutcome {
    pub not_ect: Tally,
    pub ect: Tally,
    /// When asked for: how many Not-ECT and ECT arrivals found the queue holding each
    /// number of frames (the last entry: that many or more).
    pub seen_not_ect: Vec<u64>,
    pub seen_ect: Vec<u64>,
    /// The most frames any Not-ECT (index 0) and any ECT (index 1) arrival found queued.
    pub longest: [u32; 2],
}

/// How many arrivals found at least each number of frames queued, as fractions: what
/// a step (Not-ECT) or limit (ECT) there would drop if dropping did not shorten the
/// queue, an upper bound on what it drops.
#[derive(Debug, Clone, PartialEq)]
pub struct Tails {
    not_ect: Vec<f64>,
    ect: Vec<f64>,
}

impl Tails {
    pub fn of(outcome: &QueueOutcome) -> Tails {
        Tails {
            not_ect: suffix_fractions(&outcome.seen_not_ect),
            ect: suffix_fractions(&outcome.seen_ect),
        }
    }

    pub fn not_ect(&self, frames: u32) -> f64 {
        self.not_ect.get(frames as usize).copied().unwrap_or(0.0)
    }

    pub fn ect(&self, frames: u32) -> f64 {
        self.ect.get(frames as usize).copied().unwrap_or(0.0)
    }

    /// The most frames the counts told apart; tails there are "this many or more".
    pub fn cap(&self) -> u32 {
        self.ect.len().saturating_sub(1) as u32
    }
}

fn suffix_fractions(seen: &[u64]) -> Vec<f64> {
    let total: u64 = seen.iter().sum();
    let mut above = 0u64;
    let mut out: Vec<f64> = seen
        .iter()
        .rev()
        .map(|n| {
            above += n;
            if total == 0 {
                0.0
            } else {
                above as f64 / total as f64
            }
        })
        .collect();
    out.reverse();
    out
}

/// Independent runs a simulation is split into, run in parallel and added up: a fixed
/// number, so the outcome does not depend on the machine's cores.
const REPLICAS: u64 = 4;

/// Simulates `slots` slots of a port whose gradient queues (highest priority first)
/// carry `shares` of the traffic and hold `limits`. With `seen_up_to`, also counts the
/// queue lengths arrivals find, up to that many frames.
pub fn simulate(
    traffic: &Traffic,
    shares: &[f64],
    limits: &[Limits],
    slots: u64,
    seed: u64,
    seen_up_to: Option<u32>,
) -> Vec<QueueOutcome> {
    let parts = replicas(
        traffic,
        shares,
        limits,
        slots.div_ceil(REPLICAS),
        seed,
        0,
        seen_up_to,
    );
    total(&parts)
}

/// How long [`estimate`] runs, and how precisely.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precision {
    /// Frame times of each independent run.
    pub run_slots: u64,
    /// Runs at least, and at most.
    pub min_runs: u64,
    pub max_runs: u64,
    /// Every loss fraction is known to a standard error (from the spread between runs)
    /// of at most this fraction of itself…
    pub relative_error: f64,
    /// …or this much, or this fraction of the loss's tolerance, whichever is largest…
    pub absolute_error: f64,
    pub tolerance_error: f64,
    /// …for every queue carrying at least this share of the traffic; smaller queues are
    /// counted from what that length gives them.
    pub resolved_share: f64,
}

/// A loss fraction as a simulation knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Loss {
    pub fraction: f64,
    /// Its standard error, from the spread between independent runs (or windows).
    pub error: f64,
}

impl Loss {
    /// The loss of tallies from independent runs: the ratio of their totals, and the
    /// ratio estimator's standard error, each run weighted by what it saw. Bursts make
    /// drops come in clusters, so the spread between runs, not the count of drops,
    /// says how well a loss is known.
    pub fn of(runs: &[Tally]) -> Loss {
        let offered: u64 = runs.iter().map(|t| t.offered).sum();
        let lost: u64 = runs.iter().map(|t| t.lost).sum();
        if offered == 0 || runs.len() < 2 {
            let fraction = if offered == 0 {
                0.0
            } else {
                lost as f64 / offered as f64
            };
            return Loss {
                fraction,
                error: 0.0,
            };
        }
        let fraction = lost as f64 / offered as f64;
        let n = runs.len() as f64;
        let per_run = offered as f64 / n;
        let spread: f64 = runs
            .iter()
            .map(|t| (t.lost as f64 - fraction * t.offered as f64).powi(2))
            .sum::<f64>()
            / (n - 1.0);
        Loss {
            fraction,
            error: spread.sqrt() / per_run / n.sqrt(),
        }
    }
}

/// What [`estimate`] knows of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimated {
    pub not_ect: Loss,
    pub ect: Loss,
    /// Frames offered to the queue.
    pub offered: u64,
}

/// Simulates, as [`simulate`], in independent runs of the same length until every loss
/// is known as precisely as `precision` asks (or its most runs are spent).
pub fn estimate(
    traffic: &Traffic,
    shares: &[f64],
    limits: &[Limits],
    tolerances: &[(f64, f64)],
    seed: u64,
    precision: &Precision,
) -> Vec<Estimated> {
    estimate_seeing(traffic, shares, limits, tolerances, seed, precision).0
}

/// [`estimate`], and per queue the most frames any arrival of each kind found queued.
fn estimate_seeing(
    traffic: &Traffic,
    shares: &[f64],
    limits: &[Limits],
    tolerances: &[(f64, f64)],
    seed: u64,
    precision: &Precision,
) -> (Vec<Estimated>, Vec<[u32; 2]>) {
    let traffic_total: f64 = shares.iter().sum();
    let resolved: Vec<bool> = shares
        .iter()
        .map(|s| *s >= precision.resolved_share * traffic_total)
        .collect();
    let mut parts: Vec<Vec<QueueOutcome>> = Vec::new();
    loop {
        let first = parts.len() as u64;
        parts.extend(replicas(
            traffic,
            shares,
            limits,
            precision.run_slots,
            seed,
            first,
            None,
        ));
        let runs = parts.len() as u64;
        let estimated = estimated(&parts);
        let precise = estimated
            .iter()
            .zip(tolerances)
            .zip(&resolved)
            .filter(|(_, resolved)| **resolved)
            .all(|((e, tolerance), _)| {
                [(e.not_ect, tolerance.0), (e.ect, tolerance.1)]
                    .iter()
                    .all(|(loss, tolerance)| {
                        loss.error
                            <= (precision.relative_error * loss.fraction)
                                .max(precision.absolute_error)
                                .max(precision.tolerance_error * tolerance)
                    })
            });
        if runs >= precision.max_runs || (runs >= precision.min_runs && precise) {
            return (estimated, total(&parts).iter().map(|o| o.longest).collect());
        }
    }
}

fn estimated(parts: &[Vec<QueueOutcome>]) -> Vec<Estimated> {
    (0..parts[0].len())
        .map(|q| {
            let not_ect: Vec<Tally> = parts.iter().map(|p| p[q].not_ect).collect();
            let ect: Vec<Tally> = parts.iter().map(|p| p[q].ect).collect();
            Estimated {
                not_ect: Loss::of(&not_ect),
                ect: Loss::of(&ect),
                offered: not_ect.iter().chain(&ect).map(|t| t.offered).sum(),
            }
        })
        .collect()
}

/// `REPLICAS` runs of `slots` slots each, numbered from `first`, in parallel.
fn replicas(
    traffic: &Traffic,
    shares: &[f64],
    limits: &[Limits],
    slots: u64,
    seed: u64,
    first: u64,
    seen_up_to: Option<u32>,
) -> Vec<Vec<QueueOutcome>> {
    (first..first + REPLICAS)
        .into_par_iter()
        .map(|r| {
            let seed = seed ^ (r + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            run(traffic, shares, limits, slots, seed, seen_up_to)
        })
        .collect()
}

fn total(parts: &[Vec<QueueOutcome>]) -> Vec<QueueOutcome> {
    let mut sum = parts[0].clone();
    for part in &parts[1..] {
        for (a, b) in sum.iter_mut().zip(part) {
            a.add(b);
        }
    }
    sum
}

impl QueueOutcome {
    fn add(&mut self, other: &QueueOutcome) {
        for (a, b) in [
            (&mut self.not_ect, other.not_ect),
            (&mut self.ect, other.ect),
        ] {
            a.offered += b.offered;
            a.lost += b.lost;
        }
        for (a, b) in self.seen_not_ect.iter_mut().zip(&other.seen_not_ect) {
            *a += b;
        }
        for (a, b) in self.seen_ect.iter_mut().zip(&other.seen_ect) {
            *a += b;
        }
        for (a, b) in self.longest.iter_mut().zip(other.longest) {
            *a = (*a).max(b);
        }
    }
}

fn run(
    traffic: &Traffic,
    shares: &[f64],
    limits: &[Limits],
    slots: u64,
    seed: u64,
    seen_up_to: Option<u32>,
) -> Vec<QueueOutcome> {
    match seen_up_to {
        Some(most) => run_counting::<true>(traffic, shares, limits, slots, seed, most as usize + 1),
        None => run_counting::<false>(traffic, shares, limits, slots, seed, 0),
    }
}

/// [`run`], with the queue lengths arrivals find counted when `SEEN` (a constant, so
/// the loop that does not count carries no test for it).
fn run_counting<const SEEN: bool>(
    traffic: &Traffic,
    shares: &[f64],
    limits: &[Limits],
    slots: u64,
    seed: u64,
    histogram: usize,
) -> Vec<QueueOutcome> {
    let queues = shares.len();
    assert_eq!(queues, limits.len(), "a limit per queue");
    assert!(queues <= 64, "queues fit a bit mask");
    let mut rng = SplitMix(seed);
    let total: f64 = shares.iter().sum();
    let cumulative: Vec<f64> = shares
        .iter()
        .scan(0.0, |sum, s| {
            *sum += s / total;
            Some(*sum)
        })
        .collect();
    let batch = u64::from(traffic.batch.max(1));
    let senders = traffic.senders.max(1);
    let bursts_per_slot = traffic.load / f64::from(traffic.burst_frames().max(1));
    let ect_below = ((1.0 - traffic.theta).clamp(0.0, 1.0) * u64::MAX as f64) as u64;
    let mut counts = Counts::new(limits, histogram);
    let mut port = Queues {
        length: vec![0; queues],
        busy: 0,
    };
    // Bursts arriving now, oldest first: (queue, the slot after their last frame). Every
    // burst lasts `batch` slots, so they end in the order they began.
    let mut active: VecDeque<(usize, u64)> = VecDeque::new();
    let mut next_burst = rng.exponential(bursts_per_slot);
    let mut slot = 0u64;
    while slot < slots {
        while active.front().is_some_and(|(_, end)| *end <= slot) {
            active.pop_front();
        }
        // The first slot the next burst arrives in (`as` saturates an infinite time).
        let next_slot = |next_burst: f64| next_burst as u64;
        if active.is_empty() && next_burst >= (slot + 1) as f64 {
            // Nothing arrives until the next burst: the queues only drain.
            let idle = next_slot(next_burst).min(slots) - slot;
            port.drain(idle);
            slot += idle;
            continue;
        }
        while next_burst < (slot + 1) as f64 {
            let u = rng.unit();
            let q = cumulative.partition_point(|c| *c <= u).min(queues - 1);
            active.push_back((q, slot + batch));
            next_burst += rng.exponential(bursts_per_slot);
        }
        // The same bursts arrive in every slot until one ends or another begins.
        let until = (active.front().map_or(u64::MAX, |(_, end)| *end))
            .min(next_slot(next_burst))
            .min(slots);
        for _ in slot..until {
            for &(q, _) in &active {
                let mut held = port.length[q];
                for _ in 0..senders {
                    let kind = usize::from(rng.next() < ect_below);
                    held += counts.arrive::<SEEN>(q, kind, held);
                }
                port.hold(q, held);
            }
            port.drain(1);
        }
        slot = until;
    }
    counts.outcomes()
}

/// What arrivals saw, per queue and kind of frame (index 0 Not-ECT, 1 ECT): the kind
/// picks a row rather than a branch, since it is a coin toss the CPU cannot predict.
struct Counts {
    /// Per queue, the room each kind finds: S for Not-ECT, L for ECT.
    room: Vec<[u32; 2]>,
    offered: Vec<[u64; 2]>,
    lost: Vec<[u64; 2]>,
    longest: Vec<[u32; 2]>,
    /// Per kind, `histogram` counters a queue, queue after queue.
    seen: [Vec<u64>; 2],
    histogram: usize,
}

impl Counts {
    fn new(limits: &[Limits], histogram: usize) -> Counts {
        let queues = limits.len();
        Counts {
            room: limits.iter().map(|l| [l.mark, l.limit]).collect(),
            offered: vec![[0; 2]; queues],
            lost: vec![[0; 2]; queues],
            longest: vec![[0; 2]; queues],
            seen: [vec![0; queues * histogram], vec![0; queues * histogram]],
            histogram,
        }
    }

    /// A frame of `kind` arrives at queue `q` holding `held` frames: 1 if admitted.
    #[inline(always)]
    fn arrive<const SEEN: bool>(&mut self, q: usize, kind: usize, held: u32) -> u32 {
        if SEEN {
            let at = (held as usize).min(self.histogram - 1);
            self.seen[kind][q * self.histogram + at] += 1;
        }
        let longest = &mut self.longest[q][kind];
        *longest = (*longest).max(held);
        let admitted = held < self.room[q][kind];
        self.offered[q][kind] += 1;
        self.lost[q][kind] += u64::from(!admitted);
        u32::from(admitted)
    }

    fn outcomes(self) -> Vec<QueueOutcome> {
        let seen = |kind: usize, q: usize| {
            let row = &self.seen[kind];
            row[q * self.histogram..(q + 1) * self.histogram].to_vec()
        };
        (0..self.room.len())
            .map(|q| {
                let tally = |kind: usize| Tally {
                    offered: self.offered[q][kind],
                    lost: self.lost[q][kind],
                };
                QueueOutcome {
                    not_ect: tally(0),
                    ect: tally(1),
                    seen_not_ect: seen(0, q),
                    seen_ect: seen(1, q),
                    longest: self.longest[q],
                }
            })
            .collect()
    }
}

/// The frames each queue holds, and which queues hold any.
struct Queues {
    length: Vec<u32>,
    busy: u64,
}

impl Queues {
    /// Queue `q` now holds `frames` (never fewer than before: arrivals only add).
    fn hold(&mut self, q: usize, frames: u32) {
        self.length[q] = frames;
        if frames > 0 {
            self.busy |= 1 << q;
        }
    }

    /// `slots` frame times of sending, highest priority first.
    fn drain(&mut self, mut slots: u64) {
        while slots > 0 && self.busy != 0 {
            let q = self.busy.trailing_zeros() as usize;
            let sent = u64::from(self.length[q]).min(slots);
            self.length[q] -= sent as u32;
            slots -= sent;
            if self.length[q] == 0 {
                self.busy &= !(1 << q);
            }
        }
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a small, fast generator whose sequence is
/// fixed by its seed, so a plan is the same every time.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponentially distributed with `rate` per slot (infinite at rate 0).
    fn exponential(&mut self, rate: f64) -> f64 {
        if rate <= 0.0 {
            return f64::INFINITY;
        }
        -(1.0 - self.unit()).ln() / rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sender_at_line_rate_never_queues() {
        // A burst at line rate into a port of the same rate leaves as fast as it comes;
        // bursts that overlap do not exist at a load of 1/1000.
        let t = Traffic {
            load: 0.001,
            theta: 0.5,
            batch: 16,
            senders: 1,
        };
        let out = simulate(
            &t,
            &[1.0],
            &[Limits { mark: 1, limit: 2 }],
            1_000_000,
            1,
            None,
        );
        assert!(out[0].ect.offered > 0);
        assert_eq!(out[0].not_ect.lost + out[0].ect.lost, 0, "{out:?}");
    }

    #[test]
    fn an_overloaded_port_loses_what_it_cannot_send() {
        // At 1.5 times line rate, a third of the frames cannot leave.
        let t = Traffic::poisson_frames(1.5, 0.5);
        let out = simulate(
            &t,
            &[1.0],
            &[Limits {
                mark: 20,
                limit: 40,
            }],
            400_000,
            7,
            None,
        );
        let lost = out[0].not_ect.lost + out[0].ect.lost;
        let offered = out[0].not_ect.offered + out[0].ect.offered;
        let fraction = lost as f64 / offered as f64;
        assert!((fraction - 1.0 / 3.0).abs() < 0.01, "{fraction}");
        // Not-ECT frames go first: they lose far more than ECT ones.
        assert!(out[0].not_ect.fraction() > 5.0 * out[0].ect.fraction());
    }

    #[test]
    fn strict_priority_starves_the_lower_queue_first() {
        let t = Traffic::poisson_frames(1.2, 0.5);
        let limits = [Limits {
            mark: 10,
            limit: 20,
        }; 2];
        let out = simulate(&t, &[0.5, 0.5], &limits, 400_000, 3, None);
        // The higher queue takes 0.6 of the line and loses almost nothing; the lower is
        // offered 0.6 and left 0.4, so it loses a third of its frames, Not-ECT first.
        let lost = |o: &QueueOutcome| {
            (o.not_ect.lost + o.ect.lost) as f64 / (o.not_ect.offered + o.ect.offered) as f64
        };
        assert!(lost(&out[0]) < 1e-3, "{out:?}");
        assert!((lost(&out[1]) - 1.0 / 3.0).abs() < 0.01, "{out:?}");
        assert!(
            out[1].not_ect.fraction() > 10.0 * out[1].ect.fraction(),
            "{out:?}"
        );
    }

    /// The exact losses of one queue with Poisson(ρ) frames per slot: the chain of its
    /// length at slot starts, each slot's frames admitted one by one (below S any
    /// frame, below L an ECT one), then one sent.
    fn exact(load: f64, theta: f64, limits: Limits) -> (f64, f64) {
        let (s, l) = (limits.mark as usize, limits.limit as usize);
        let most = 40;
        let poisson: Vec<f64> = (0..most)
            .scan(1.0, |p, k| {
                let here = if k == 0 { 1.0 } else { *p * load / k as f64 };
                *p = here;
                Some(here * (-load).exp())
            })
            .collect();
        // The length after k frames from n, and the expected Not-ECT and ECT losses.
        let admit = |n: usize, k: usize| {
            let mut dist = vec![0.0; l + 1];
            dist[n.min(l)] = 1.0;
            let (mut lost_n, mut lost_e) = (0.0, 0.0);
            for _ in 0..k {
                let mut next = vec![0.0; l + 1];
                for (m, p) in dist.iter().enumerate().filter(|(_, p)| **p > 0.0) {
                    if m < s {
                        next[m + 1] += p;
                    } else if m < l {
                        next[m + 1] += p * (1.0 - theta);
                        next[m] += p * theta;
                        lost_n += p * theta;
                    } else {
                        next[m] += p;
                        lost_n += p * theta;
                        lost_e += p * (1.0 - theta);
                    }
                }
                dist = next;
            }
            (dist, lost_n, lost_e)
        };
        // One slot from each length: where it goes, and the losses on the way.
        let mut step = vec![vec![0.0; l + 1]; l + 1];
        let mut losses = vec![(0.0, 0.0); l + 1];
        for n in 0..=l {
            for (k, a) in poisson.iter().enumerate() {
                let (dist, ln, le) = admit(n, k);
                for (m, q) in dist.iter().enumerate() {
                    step[n][m.saturating_sub(1)] += a * q;
                }
                losses[n].0 += a * ln;
                losses[n].1 += a * le;
            }
        }
        let mut pi = vec![1.0 / (l + 1) as f64; l + 1];
        for _ in 0..100_000 {
            let mut next = vec![0.0; l + 1];
            for (n, p) in pi.iter().enumerate() {
                for (m, q) in step[n].iter().enumerate() {
                    next[m] += p * q;
                }
            }
            let change: f64 = next.iter().zip(&pi).map(|(a, b)| (a - b).abs()).sum();
            pi = next;
            if change < 1e-14 {
                break;
            }
        }
        let lost_n: f64 = pi.iter().zip(&losses).map(|(p, l)| p * l.0).sum();
        let lost_e: f64 = pi.iter().zip(&losses).map(|(p, l)| p * l.1).sum();
        (lost_n / (load * theta), lost_e / (load * (1.0 - theta)))
    }

    #[test]
    fn the_simulation_matches_the_exact_chain_for_single_frames() {
        for (load, theta, limits) in [
            (0.9, 0.5, Limits { mark: 6, limit: 10 }),
            (1.2, 0.3, Limits { mark: 8, limit: 12 }),
            (0.7, 0.7, Limits { mark: 3, limit: 6 }),
        ] {
            let (not_ect, ect) = exact(load, theta, limits);
            let t = Traffic::poisson_frames(load, theta);
            let out = &simulate(&t, &[1.0], &[limits], 2_000_000, 5, None)[0];
            for (what, sim, exact, offered) in [
                (
                    "Not-ECT",
                    out.not_ect.fraction(),
                    not_ect,
                    out.not_ect.offered,
                ),
                ("ECT", out.ect.fraction(), ect, out.ect.offered),
            ] {
                // Four standard deviations of a binomial estimate, at least 1e-5.
                let sd = (exact * (1.0 - exact) / offered as f64).sqrt();
                assert!(
                    (sim - exact).abs() <= (4.0 * sd).max(1e-5),
                    "load {load} θ {theta} {limits:?} {what}: simulated {sim:.4e}, exact {exact:.4e}"
                );
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_outcome() {
        let t = Traffic {
            load: 0.9,
            theta: 0.5,
            batch: 16,
            senders: 2,
        };
        let limits = [Limits {
            mark: 30,
            limit: 50,
        }; 3];
        let run = |seed| simulate(&t, &[0.2, 0.3, 0.5], &limits, 100_000, seed, Some(64));
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
    }
}
