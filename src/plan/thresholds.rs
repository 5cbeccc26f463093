//! Per-queue RED/ECN thresholds from the queueing model of MLT Appendix B.
//!
//! # The model (as the paper gives it)
//!
//! The gradient queues are served by strict priority, front layers first. Queue i
//! receives the share of traffic its layers carry, λ_i = λ·(size of its layers)/(model
//! size), and is served only when every higher queue is idle:
//! μ_1 = μ and μ_i = μ·Π_{k<i}(1 − ρ_k), with ρ_i = λ_i/μ_i. Only the ratio λ/μ
//! matters; we call it the *load* (`training.model.load`, default 0.9): the gradient
//! load offered to a congested egress port, as a fraction of its line rate.
//!
//! Each queue is split into a sub-queue of unimportant (small) gradients, a fraction θ
//! of the traffic (θ is the importance quantile, 0.5 for the median), and one of
//! important (large) gradients. Both have utilisation ρ_i. A sub-queue that holds m
//! packets is an M/M/1/m queue and loses a fraction
//!
//! ```text
//! r(ρ, m) = (ρ^m − ρ^{m+1}) / (1 − ρ^{m+1})        (1/(m+1) when ρ = 1)
//! ```
//!
//! of its packets. With S'_i and L'_i packets for the two sub-queues, the switch
//! thresholds are S_i = S'_i/θ (where Not-ECT packets start being dropped and ECT ones
//! marked) and L_i = S'_i + L'_i (where every packet is dropped).
//!
//! # What the paper leaves open, and how we close it
//!
//! The paper asks to minimise Σ_i f_i^S(r_i^S) + f_i^L(r_i^L), the extra training rounds
//! that losses cost, but measures f only as tolerances (§3.3): a model converges in the
//! same rounds as long as front layers lose under ~5% and back layers under ~0.3%, small
//! gradients under ~20% and large ones under ~0.4%. We turn those measurements into
//! costs as follows.
//!
//! 1. *Tolerance of a sub-queue.* A class's layer tolerance t_layer is interpolated
//!    geometrically between the front and back tolerances by the position of the class's
//!    middle layer in the model (the measurements differ by an order of magnitude, so a
//!    linear blend would let the front value dominate). Position and magnitude are taken
//!    to act independently and multiply: relative to a loss spread uniformly over all
//!    gradients, which the model tolerates up to t_random (Table 1), a position scales
//!    the tolerance by t_layer/t_random and a magnitude group by t_mag/t_random, so
//!    t^S = t_layer·t_small/t_random and t^L = t_layer·t_large/t_random. Each input then
//!    moves only the sub-queues it describes. Tolerances are capped just below 1.
//! 2. *Cost of a loss.* A loss within tolerance costs no extra rounds (that is what the
//!    measurement says); beyond it, the cost grows linearly, in units of the tolerance:
//!    f(r) = max(0, r − t)/t. A sub-queue that is already within tolerance gains
//!    nothing more by this cost; what buffer is left is spent afterwards by a second
//!    rule (see "Beyond Appendix B" below).
//! 3. *Budget.* Σ_i L_i ≤ B, the switch buffer in packets of the fabric MTU, minus
//!    whatever thresholds an admin pinned by hand. Also S_i ≤ L_i, or the ECN threshold
//!    would never be reached.
//!
//! # The optimiser
//!
//! r(ρ, m) is convex and decreasing in m for 0 < ρ ≤ 1 (its decrements
//! (1−ρ)²ρ^m / ((1−ρ^{m+1})(1−ρ^{m+2})) shrink as m grows), so every f(r(ρ, m)) is convex
//! in m, and the objective is a sum of convex functions of separate integer variables
//! under one budget. For that problem the greedy marginal allocation — give the next
//! packet of buffer to the sub-queue whose cost falls most, stop when no cost falls or
//! the buffer is used up — is exactly optimal (Gross 1956; Ibaraki & Katoh, *Resource
//! Allocation Problems*, 1988). It takes O(B log N) steps.
//!
//! The coupling S_i ≤ L_i is enforced by not giving the small sub-queue a packet that
//! would break it. With θ ≥ ½ and small gradients more tolerant than large ones (the
//! defaults) it never binds at the optimum, and the result is the exact optimum; a test
//! compares it with exhaustive search. Otherwise the result is feasible but may be
//! slightly above the optimum.
//!
//! # Beyond Appendix B: thresholds a switch can hold
//!
//! The least room that meets every tolerance can be a couple of packets (a lightly
//! loaded front queue), which one synchronized burst of the collective overflows at
//! once. So, on top of the model (issue 16):
//!
//! - *Floors.* Every L_i holds at least one burst of the job: each of the fan-in
//!   senders' pacing batch at once, plus what the extra senders add at line rate in one
//!   RTT before rate control reacts (the plan's `burst_bytes`). The lowest gradient
//!   queue marks no earlier than DCTCP's guideline C·RTT/7. The optimiser starts from
//!   the floors; floors over the buffer make the plan invalid (over-committed).
//! - *Spare buffer.* After the tolerances are met, the buffer left goes packet by packet
//!   where it cuts a predicted loss most relative to its tolerance, until one more
//!   packet would cut it by less than a millionth of the tolerance: buffer past that
//!   only adds queueing delay. The excess cost stays at its optimum (losses only fall).
//! - Each threshold records what set it ([`SetBy`]), shown by `plan --explain`.
//! - *Switches that cannot hold L_i* (no per-queue limit in their OS): the model is
//!   re-solved for what they do, [`without_queue_limits`]. Without L_i a queue's
//!   important packets are dropped only when the shared buffer is full. The model
//!   *assumes* one congested queue at a time, every other queue at its step S_k;
//!   queue i's important packets then have (1 − θ)·S_i + (B − Σ_k S_k) packets of
//!   room, and their predicted loss is computed for that room. This is optimistic:
//!   other queues' important packets may grow past their steps, and an ASIC's own
//!   per-queue share of the buffer (a dynamic threshold) may stop a queue earlier.
//!   Whether the buffer is over-committed is still judged on the partition Σ L_i the
//!   model solved for.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::inventory::Tolerance;

/// Tolerances are kept below this, so a sub-queue never gets zero buffer (r(ρ, 0) = 1).
const MAX_TOLERANCE: f64 = 0.999;

/// Fraction of packets an M/M/1/m queue with utilisation `rho` and room for `m` packets
/// loses: (ρ^m − ρ^{m+1})/(1 − ρ^{m+1}).
pub fn mm1m_loss(rho: f64, m: f64) -> f64 {
    if rho <= 0.0 {
        return if m <= 0.0 { 1.0 } else { 0.0 };
    }
    if (rho - 1.0).abs() < 1e-12 {
        return 1.0 / (m + 1.0);
    }
    if rho > 1.0 {
        // Same value, rewritten in σ = 1/ρ so ρ^m cannot overflow.
        let sigma = 1.0 / rho;
        return (1.0 - sigma) / (1.0 - sigma.powf(m + 1.0));
    }
    // (1−ρ)ρ^m / (1−ρ^{m+1}) with expm1 to keep precision when ρ is close to 1.
    let ln = rho.ln();
    (-ln.exp_m1()) * (m * ln).exp() / (-((m + 1.0) * ln).exp_m1())
}

/// Utilisation of each priority queue, highest priority first, for traffic `shares`
/// (summing to 1) at `load` = λ/μ: ρ_i = λ_i / (μ·Π_{k<i}(1 − ρ_k)).
pub fn utilisations(load: f64, shares: &[f64]) -> Vec<f64> {
    let mut idle = 1.0;
    shares
        .iter()
        .map(|share| {
            let rho = if idle > 0.0 {
                load * share / idle
            } else {
                f64::INFINITY
            };
            idle *= 1.0 - rho.min(1.0);
            rho
        })
        .collect()
}

/// Loss tolerances (small, large) of a class whose middle layer sits at `position`
/// (0 = front layer, 1 = back layer).
pub fn class_tolerances(t: &Tolerance, position: f64) -> (f64, f64) {
    let layer = t.front_layers.powf(1.0 - position) * t.back_layers.powf(position);
    let scale = |magnitude: f64| (layer * magnitude / t.random_loss).min(MAX_TOLERANCE);
    (scale(t.small_gradients), scale(t.large_gradients))
}

/// One gradient queue as the optimiser sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueInput {
    pub rho: f64,
    pub tolerance_small: f64,
    pub tolerance_large: f64,
    /// Packets fixed by hand for (small, large) sub-queues; not optimised.
    pub pinned: Option<(f64, f64)>,
    /// L_i may not go below this many packets: one burst of the job (see the plan).
    pub limit_floor: u32,
    /// S_i may not go below this many packets (DCTCP's C·RTT/7 on the lowest queue).
    pub mark_floor: u32,
}

/// What set a threshold where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetBy {
    /// The least room that keeps the predicted loss within tolerance (or, when the
    /// buffer cannot, the best the buffer allows).
    Tolerance,
    /// One burst of the job must fit.
    BurstFloor,
    /// DCTCP's marking guideline, C·RTT/7.
    MarkFloor,
    /// Buffer left over after every tolerance and floor, spent where it cuts the
    /// predicted loss most.
    SpareBuffer,
    /// Set by hand in the inventory.
    Pinned,
    /// The OS holds no per-queue limit: the shared buffer bounds the queue.
    SharedBuffer,
}

impl SetBy {
    pub fn describe(self) -> &'static str {
        match self {
            SetBy::Tolerance => "tolerance",
            SetBy::BurstFloor => "burst floor",
            SetBy::MarkFloor => "C·RTT/7",
            SetBy::SpareBuffer => "spare buffer",
            SetBy::Pinned => "pinned",
            SetBy::SharedBuffer => "shared buffer (no queue limit on this OS)",
        }
    }
}

/// Packets given to one queue's sub-queues, and the losses the model predicts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// S'_i: room of the small-gradient sub-queue, in packets.
    pub small_packets: f64,
    /// L'_i: room of the large-gradient sub-queue, in packets.
    pub large_packets: f64,
    pub loss_small: f64,
    pub loss_large: f64,
    pub mark_set_by: SetBy,
    pub limit_set_by: SetBy,
}

impl Allocation {
    fn new(rho: f64, small_packets: f64, large_packets: f64, set_by: (SetBy, SetBy)) -> Self {
        Allocation {
            small_packets,
            large_packets,
            loss_small: mm1m_loss(rho, small_packets),
            loss_large: mm1m_loss(rho, large_packets),
            mark_set_by: set_by.0,
            limit_set_by: set_by.1,
        }
    }

    /// S_i in packets: queue length where Not-ECT packets start being dropped.
    pub fn mark_packets(&self, theta: f64) -> f64 {
        self.small_packets / theta
    }

    /// L_i in packets: queue length where every packet is dropped.
    pub fn limit_packets(&self) -> f64 {
        self.small_packets + self.large_packets
    }
}

/// Cost of losing `loss` when `tolerance` is free: max(0, loss − t)/t.
pub fn excess_cost(loss: f64, tolerance: f64) -> f64 {
    (loss - tolerance).max(0.0) / tolerance
}

/// Spare buffer stops going to a queue once one more packet would cut its predicted
/// loss by less than this fraction of its tolerance: past that, buffer only adds delay.
const SPARE_GAIN_FLOOR: f64 = 1e-6;

/// The allocation within `budget` packets (see module docs): each queue starts at its
/// floors; then the least-cost allocation of tolerances; then the buffer left over goes,
/// packet by packet, where it cuts a predicted loss most relative to its tolerance.
/// Floors are kept even past the budget (the plan reports that as over-committed).
pub fn optimise(queues: &[QueueInput], theta: f64, budget: u64) -> Vec<Allocation> {
    let pinned: f64 = queues
        .iter()
        .filter_map(|q| q.pinned)
        .map(|(s, l)| s + l)
        .sum();
    // Packets per queue, indexed [SMALL] and [LARGE].
    let floors: Vec<[u32; 2]> = queues
        .iter()
        .map(|q| {
            if q.pinned.is_some() {
                return [0, 0];
            }
            let small = (theta * f64::from(q.mark_floor)).ceil() as u32;
            let coupled = (f64::from(small) * (1.0 - theta) / theta).ceil() as u32;
            [small, q.limit_floor.saturating_sub(small).max(coupled)]
        })
        .collect();
    let floor_total: u64 = floors.iter().flatten().map(|&p| u64::from(p)).sum();
    let mut left = ((budget as f64 - pinned).max(0.0).floor() as u64).saturating_sub(floor_total);
    let mut room = floors.clone();
    let excess = |q: &QueueInput, side: usize, m: u32| {
        let t = [q.tolerance_small, q.tolerance_large][side];
        let m = f64::from(m);
        excess_cost(mm1m_loss(q.rho, m), t) - excess_cost(mm1m_loss(q.rho, m + 1.0), t)
    };
    greedy(queues, theta, &mut room, &mut left, excess, 0.0);
    let tolerance_room = room.clone();
    let relative = |q: &QueueInput, side: usize, m: u32| {
        let t = [q.tolerance_small, q.tolerance_large][side];
        let m = f64::from(m);
        (mm1m_loss(q.rho, m) - mm1m_loss(q.rho, m + 1.0)) / t
    };
    greedy(
        queues,
        theta,
        &mut room,
        &mut left,
        relative,
        SPARE_GAIN_FLOOR,
    );
    queues
        .iter()
        .enumerate()
        .map(|(i, q)| match q.pinned {
            Some((s, l)) => Allocation::new(q.rho, s, l, (SetBy::Pinned, SetBy::Pinned)),
            None => {
                let [small, large] = room[i];
                let set_by = |before: u32, after: u32, floor: u32, floor_kind: SetBy| {
                    if after > before {
                        SetBy::SpareBuffer
                    } else if floor > 0 && before == floor {
                        floor_kind
                    } else {
                        SetBy::Tolerance
                    }
                };
                let limit = |r: [u32; 2]| r[SMALL] + r[LARGE];
                let set = (
                    set_by(
                        tolerance_room[i][SMALL],
                        small,
                        floors[i][SMALL],
                        SetBy::MarkFloor,
                    ),
                    set_by(
                        limit(tolerance_room[i]),
                        limit(room[i]),
                        limit(floors[i]),
                        SetBy::BurstFloor,
                    ),
                );
                Allocation::new(q.rho, f64::from(small), f64::from(large), set)
            }
        })
        .collect()
}

/// Re-solves `allocations` (from [`optimise`]) for switches that cannot hold L_i:
/// each queue's important packets get the room (1 − θ)·S_i + (B − Σ_k S_k) of the
/// shared buffer (see module docs), and their loss is predicted for it. A pinned
/// limit cannot be held either, so pinned queues are re-solved too.
pub fn without_queue_limits(
    queues: &[QueueInput],
    theta: f64,
    budget: u64,
    allocations: &mut [Allocation],
) {
    let steps: f64 = allocations.iter().map(|a| a.mark_packets(theta)).sum();
    let shared = (budget as f64 - steps).max(0.0);
    for (q, a) in queues.iter().zip(allocations.iter_mut()) {
        let room = ((1.0 - theta) * a.mark_packets(theta) + shared).floor();
        *a = Allocation::new(
            q.rho,
            a.small_packets,
            room,
            (a.mark_set_by, SetBy::SharedBuffer),
        );
    }
}

/// Gives packets one at a time to the sub-queue with the largest `gain` until none
/// gains more than `min_gain` or `left` is spent. The small sub-queue may take one more
/// packet only while S ≤ L still holds, i.e. (S' + 1)(1 − θ) ≤ θ·L'.
fn greedy(
    queues: &[QueueInput],
    theta: f64,
    room: &mut [[u32; 2]],
    left: &mut u64,
    gain: impl Fn(&QueueInput, usize, u32) -> f64,
    min_gain: f64,
) {
    let mut heap = BinaryHeap::new();
    let offer_small = |heap: &mut BinaryHeap<Candidate>, i: usize, [small, large]: [u32; 2]| {
        let fits = f64::from(small + 1) * (1.0 - theta) <= theta * f64::from(large);
        if fits {
            heap.push(Candidate::new(gain(&queues[i], SMALL, small), i, SMALL));
        }
        fits
    };
    let mut small_waits = vec![false; queues.len()];
    for (i, q) in queues.iter().enumerate() {
        if q.pinned.is_none() {
            heap.push(Candidate::new(gain(q, LARGE, room[i][LARGE]), i, LARGE));
            small_waits[i] = !offer_small(&mut heap, i, room[i]);
        }
    }
    while *left > 0 {
        let Some(best) = heap.pop() else { break };
        if best.gain <= min_gain {
            break;
        }
        let (i, side) = (best.queue, best.side);
        room[i][side] += 1;
        *left -= 1;
        if side == LARGE {
            heap.push(Candidate::new(
                gain(&queues[i], LARGE, room[i][LARGE]),
                i,
                LARGE,
            ));
            if small_waits[i] {
                small_waits[i] = !offer_small(&mut heap, i, room[i]);
            }
        } else {
            small_waits[i] = !offer_small(&mut heap, i, room[i]);
        }
    }
}

const SMALL: usize = 0;
const LARGE: usize = 1;

/// A possible next packet: which queue and sub-queue (SMALL or LARGE), and its gain.
#[derive(Debug)]
struct Candidate {
    gain: f64,
    queue: usize,
    side: usize,
}

impl Candidate {
    fn new(gain: f64, queue: usize, side: usize) -> Self {
        Candidate { gain, queue, side }
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    /// Largest gain first; on a tie the higher-priority queue, then the large side.
    fn cmp(&self, other: &Self) -> Ordering {
        self.gain
            .total_cmp(&other.gain)
            .then_with(|| other.queue.cmp(&self.queue))
            .then_with(|| self.side.cmp(&other.side))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn loss_matches_hand_computed_cases() {
        // ρ = 0.5, m = 2: (0.25 − 0.125)/(1 − 0.125) = 1/7.
        assert!(close(mm1m_loss(0.5, 2.0), 1.0 / 7.0));
        // ρ = 0.9, m = 10: (0.9^10 − 0.9^11)/(1 − 0.9^11).
        let hand = (0.348_678_440_1 - 0.313_810_596_09) / (1.0 - 0.313_810_596_09);
        assert!(
            close(mm1m_loss(0.9, 10.0), hand),
            "{}",
            mm1m_loss(0.9, 10.0)
        );
        // ρ = 1: 1/(m+1).
        assert!(close(mm1m_loss(1.0, 4.0), 0.2));
        // ρ = 2, m = 3: (8 − 16)/(1 − 16) = 8/15.
        assert!(close(mm1m_loss(2.0, 3.0), 8.0 / 15.0));
        // No room loses everything; ρ → 0 loses nothing.
        assert!(close(mm1m_loss(0.3, 0.0), 1.0));
        assert_eq!(mm1m_loss(0.0, 5.0), 0.0);
        // Close to 1 the formula stays accurate (plain evaluation loses digits there).
        let rho = 1.0 - 1e-9;
        assert!((mm1m_loss(rho, 9.0) - 0.1).abs() < 1e-8);
    }

    #[test]
    fn loss_is_convex_and_decreasing_in_room() {
        for rho in [0.05, 0.5, 0.9, 0.999, 1.0] {
            let r: Vec<f64> = (0..200).map(|m| mm1m_loss(rho, f64::from(m))).collect();
            for m in 1..199 {
                assert!(r[m] < r[m - 1] || r[m] == 0.0, "ρ={rho} m={m}");
                let (d1, d2) = (r[m - 1] - r[m], r[m] - r[m + 1]);
                assert!(d2 <= d1 + 1e-15, "not convex at ρ={rho} m={m}");
            }
        }
    }

    #[test]
    fn utilisation_follows_strict_priority() {
        // λ/μ = 0.9, shares 1/3 each: ρ1 = 0.3, ρ2 = 0.3/0.7, ρ3 = 0.3/(0.7·(1−3/7)) = 0.75.
        let rho = utilisations(0.9, &[1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
        assert!(close(rho[0], 0.3));
        assert!(close(rho[1], 0.3 / 0.7));
        assert!(close(rho[2], 0.75));
        // μ_i = μ − Σ_{k<i} λ_k, so at full load the last queue is exactly saturated.
        let rho = utilisations(1.0, &[0.2, 0.3, 0.5]);
        assert!(close(rho[2], 1.0));
    }

    #[test]
    fn default_tolerances_follow_the_papers_measurements() {
        let t = Tolerance::default();
        let (front_s, front_l) = class_tolerances(&t, 0.0);
        let (back_s, back_l) = class_tolerances(&t, 1.0);
        // Front small gradients: 5% · 20% / 2.4%; back large ones: 0.3% · 0.4% / 2.4%.
        assert!(close(front_s, 0.05 * 0.2 / 0.024));
        assert!(close(back_l, 0.003 * 0.004 / 0.024));
        assert!(front_s > front_l && back_s > back_l);
        assert!(front_l > back_l && front_s > back_s);
        // Halfway, the layer tolerance is the geometric mean of front and back.
        let (mid_s, _) = class_tolerances(&t, 0.5);
        assert!(close(mid_s, (0.05f64 * 0.003).sqrt() * 0.2 / 0.024));
        // A magnitude input moves only its own sub-queues.
        let stricter = Tolerance {
            large_gradients: 0.001,
            ..t
        };
        assert_eq!(
            class_tolerances(&stricter, 0.3).0,
            class_tolerances(&t, 0.3).0
        );
    }

    fn queue(rho: f64, position: f64) -> QueueInput {
        let (s, l) = class_tolerances(&Tolerance::default(), position);
        QueueInput {
            rho,
            tolerance_small: s,
            tolerance_large: l,
            pinned: None,
            limit_floor: 0,
            mark_floor: 0,
        }
    }

    fn total_cost(queues: &[QueueInput], a: &[Allocation]) -> f64 {
        queues
            .iter()
            .zip(a)
            .map(|(q, a)| {
                excess_cost(a.loss_small, q.tolerance_small)
                    + excess_cost(a.loss_large, q.tolerance_large)
            })
            .sum()
    }

    /// Best cost over every feasible integer allocation (S'_i ≤ θ/(1−θ)·L'_i).
    fn exhaustive(queues: &[QueueInput], theta: f64, budget: u64) -> f64 {
        fn go(q: &[QueueInput], theta: f64, left: u64) -> f64 {
            let Some((first, rest)) = q.split_first() else {
                return 0.0;
            };
            let mut best = f64::INFINITY;
            for l in 0..=left {
                for s in 0..=left - l {
                    if s as f64 * (1.0 - theta) > theta * l as f64 {
                        break;
                    }
                    let here = excess_cost(mm1m_loss(first.rho, s as f64), first.tolerance_small)
                        + excess_cost(mm1m_loss(first.rho, l as f64), first.tolerance_large);
                    best = best.min(here + go(rest, theta, left - l - s));
                }
            }
            best
        }
        go(queues, theta, budget)
    }

    #[test]
    fn greedy_matches_exhaustive_search_on_small_buffers() {
        let load = 0.95;
        let rho = utilisations(load, &[0.1, 0.3, 0.6]);
        let queues: Vec<QueueInput> = rho
            .iter()
            .zip([0.0, 0.5, 1.0])
            .map(|(r, p)| queue(*r, p))
            .collect();
        for budget in [0, 3, 8, 15, 24, 40] {
            let a = optimise(&queues, 0.5, budget);
            let used: f64 = a.iter().map(Allocation::limit_packets).sum();
            assert!(used <= budget as f64);
            let best = exhaustive(&queues, 0.5, budget);
            let got = total_cost(&queues, &a);
            assert!(
                (got - best).abs() <= 1e-9 * best.max(1.0),
                "budget {budget}: greedy {got} vs exhaustive {best}"
            );
        }
    }

    #[test]
    fn plentiful_buffer_meets_every_tolerance_then_spends_what_still_helps() {
        let rho = utilisations(0.9, &[0.05, 0.15, 0.8]);
        let queues: Vec<QueueInput> = rho
            .iter()
            .zip([0.0, 0.5, 1.0])
            .map(|(r, p)| queue(*r, p))
            .collect();
        let a = optimise(&queues, 0.5, 100_000);
        assert_eq!(total_cost(&queues, &a), 0.0);
        let used: f64 = a.iter().map(Allocation::limit_packets).sum();
        assert!(
            used < 100_000.0,
            "spare buffer is spent only while it helps"
        );
        for (q, a) in queues.iter().zip(&a) {
            // Spare buffer went on until one more packet cut the loss by less than a
            // millionth of the tolerance; one packet less would have cut more.
            for (m, t) in [
                (a.small_packets, q.tolerance_small),
                (a.large_packets, q.tolerance_large),
            ] {
                let next = (mm1m_loss(q.rho, m) - mm1m_loss(q.rho, m + 1.0)) / t;
                let last = (mm1m_loss(q.rho, m - 1.0) - mm1m_loss(q.rho, m)) / t;
                assert!(next <= SPARE_GAIN_FLOOR && last > SPARE_GAIN_FLOOR * 0.999);
            }
            assert_eq!(a.limit_set_by, SetBy::SpareBuffer);
        }
    }

    #[test]
    fn floors_hold_even_when_tolerances_need_less() {
        // ρ tiny: one packet would do, but a burst needs 16 and the mark 12.
        let q = QueueInput {
            limit_floor: 16,
            mark_floor: 12,
            ..queue(0.001, 0.5)
        };
        let a = optimise(&[q], 0.5, 16 + 12);
        assert!(a[0].limit_packets() >= 16.0, "{a:?}");
        assert!(a[0].mark_packets(0.5) >= 12.0, "{a:?}");
        assert_eq!(a[0].limit_set_by, SetBy::BurstFloor);
        assert_eq!(a[0].mark_set_by, SetBy::MarkFloor);
        // A budget below the floors keeps them: the plan reports it over-committed.
        let a = optimise(&[q], 0.5, 4);
        assert!(a[0].limit_packets() >= 16.0);
    }

    #[test]
    fn coupling_keeps_the_mark_threshold_below_the_limit() {
        // θ = 0.2 needs L' ≥ 4·S'; make small gradients the sensitive ones to push on it.
        let q = QueueInput {
            rho: 0.9,
            tolerance_small: 0.001,
            tolerance_large: 0.2,
            pinned: None,
            limit_floor: 0,
            mark_floor: 0,
        };
        for budget in [5, 50, 500] {
            let a = optimise(&[q], 0.2, budget);
            assert!(
                a[0].mark_packets(0.2) <= a[0].limit_packets() + 1e-9,
                "{a:?}"
            );
            assert!(a[0].limit_packets() <= budget as f64);
        }
    }

    #[test]
    fn pinned_queues_keep_their_room_and_shrink_the_budget() {
        let rho = utilisations(0.9, &[0.5, 0.5]);
        let mut queues = vec![queue(rho[0], 0.0), queue(rho[1], 1.0)];
        queues[0].pinned = Some((4.0, 6.0));
        let a = optimise(&queues, 0.5, 12);
        assert_eq!((a[0].small_packets, a[0].large_packets), (4.0, 6.0));
        assert!(a[1].limit_packets() <= 2.0);
    }
}
