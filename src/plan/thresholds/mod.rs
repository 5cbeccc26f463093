//! Per-queue RED/ECN thresholds for the queue the switch really runs, under the traffic
//! the transport really sends (design: docs/src/design/plan.md#per-queue-redecn-thresholds).
//!
//! # The queue
//!
//! Every vendor here runs, per egress port, strict priority between the gradient queues
//! (front layers first) and per queue one FIFO with two thresholds: a step at S, where
//! Not-ECT frames are dropped and ECT frames marked, and a limit L, where every frame is
//! dropped (SONiC and EOS hold L; Cumulus and Onyx bound a queue only by the shared
//! buffer, see [`Solved`]). Frames are the fabric's MTU and leave one per frame time.
//!
//! # The traffic
//!
//! The transport paces each flow in batches of [`PACING_BATCH`] frames sent back to
//! back at line rate. At a congested port, bursts arrive at Poisson times at the
//! model's load (`training.model.load`, a fraction of line rate, above 1 an overloaded
//! port); a burst is the pacing batch of each of the collective's fan-in senders at
//! once, so it brings fan-in frames per frame time for a batch's duration. A burst
//! belongs to one gradient class, chosen by the classes' shares of the gradient bytes;
//! each frame is Not-ECT with probability θ (the importance quantile). Not modelled:
//! a sender whose wake-up came late catches up with up to 500 µs more at line rate
//! (`endhost_core::proto::rate`); a flow that paused resumes with one batch.
//!
//! # The method
//!
//! MLT's Appendix B models each queue as two M/M/1 sub-queues of single-packet Poisson
//! arrivals. Checked against an exact-time simulation of the switch's queue, that model
//! is many orders of magnitude optimistic under the transport's bursts (a back queue's
//! ECT loss predicted 1e-9, simulated 9e-2) and cannot see L − S at all, so it is not
//! used. The planner instead simulates the port itself (crate `mlt-queue`): slots of one frame
//! time, the bursts above, the FIFOs with their two thresholds, strict priority —
//! deterministic for its seed. Closed forms exist only without bursts and higher
//! priorities (the two-threshold chain); the simulation is checked against that chain
//! exactly (`mlt-queue`'s tests).
//!
//! 1. *Open queues.* One simulation with no thresholds counts, per queue, the queue
//!    lengths Not-ECT and ECT arrivals find. The fraction that found at least x frames is
//!    an upper bound on what a step (Not-ECT) or a limit (ECT) at x drops, since
//!    dropping only shortens the queue.
//! 2. *Choice.* Each queue gets the least S whose open Not-ECT tail is within half its
//!    tolerance (S ≥ C·RTT/7 on the lowest queue), and the least L whose open ECT tail
//!    is, with L ≥ one burst of the job and L − S ≥ the ECT frames of one burst. The
//!    burst is the fan-in senders' pacing batches plus what the extra senders send at
//!    line rate until rate control slows them: T_high, the RTT at which it starts to
//!    decrease (`training.rate_control.t_high_us`). When the buffer cannot hold the
//!    margin, the tolerances themselves; when it cannot hold those, the least total
//!    excess cost, max(0, r − t)/t summed over the queues, a frame at a time. Buffer
//!    left over raises the limits where it cuts the open ECT tail most relative to its
//!    tolerance, until the tail is cut no more; steps stay as low as their tolerance
//!    allows, since a higher step only delays the marks that slow senders down.
//! 3. *Lower steps.* Dropping shortens a queue, so the open tails overstate what a
//!    step drops: every step is lowered together by bisection (six rounds, each a
//!    simulation of the thresholds at a coarser precision) while its queue's Not-ECT
//!    loss stays within the margin; a step that the final count finds over its
//!    tolerance goes back up, halfway to the open tails' choice at a time (three
//!    rounds at most).
//! 4. *Prediction.* The chosen thresholds are simulated again ([`PREDICTION`]):
//!    independent runs of 2^16 frame times, 8 to 128 of them, until every loss of a
//!    queue carrying at least 1% of the traffic is known to a standard error of 10% of
//!    itself, 2e-5 or 5% of its tolerance, whichever is largest. Each loss is the ratio
//!    of the runs' drops to their arrivals, with the ratio estimator's standard error.
//!    These are the plan's predictions, shown by `plan --explain` with their error, and
//!    a prediction over its tolerance makes the plan invalid, exit 3 (unless
//!    `training.model.accept_over_tolerance`).
//!
//! The open queues run long enough that each kind of frame of every queue carrying at
//! least 1% of the traffic arrives at least 20 bursts' worth over its tolerance (2^19
//! to 2^23 frame times); a queue with less of the traffic is counted from the arrivals
//! that length gives it. All simulations have fixed seeds: a plan is the same every
//! time.
//!
//! # Tolerances
//!
//! The paper measures how much loss training absorbs without extra rounds (§3.3): front
//! layers ~5%, back layers ~0.3%, small gradients ~20%, large ones ~0.4%, against
//! ~2.4% spread over all gradients. A class's layer tolerance is interpolated
//! geometrically between front and back by the position of its middle layer; position
//! and magnitude multiply relative to the random-loss tolerance, so Not-ECT (small)
//! frames tolerate t_layer·t_small/t_random and ECT (large) ones t_layer·t_large/t_random.
//!
//! # The transport's bound
//!
//! Loss within tolerance costs no accuracy, but a message that loses more than its
//! share of the job's loss bound ([`super::ModelSummary::message_bound`]) waits for a
//! recovery round trip. Each profile is first planned as above, with the margin, with
//! every queue's two tolerances cut to that share (at least [`MIN_BOUND`]); only when
//! the buffer cannot hold that for every queue is the profile planned within the
//! tolerances alone, exactly as without the bound ([`Solved::within_bound`] says which).
//!
//! # Validation and error
//!
//! `tests/thresholds.rs` compares the predictions with the lab forwarder's queue
//! (`mltctl_lab::queueing::Port`, an independent implementation at exact times) fed
//! by an independent generator of the same traffic, over loads 0.5–1.5, θ 0.3–0.7,
//! several S and L, single Poisson frames and bursts of 16 frames from one and from
//! three senders: ECT predictions are never more than 1.5× (or 1e-4) optimistic and
//! Not-ECT ones within 3× (or 1e-4). What remains between the two is the slotting (a
//! frame arrives at a slot's start rather than at its exact time) and counting noise.

mod choose;

use std::collections::BTreeMap;

use endhost_core::proto::PACING_BATCH;
use serde::{Deserialize, Serialize};

pub use choose::{Chosen, Floors};
use mlt_queue::{Limits, Loss, Memo, Precision, Tails, Traffic};

use super::{ModelSummary, QosPlan};
use crate::inventory::{Inventory, PinnedThreshold, THRESHOLD_UNIT, Tolerance};

/// Tolerances are kept below this, so no queue is planned to lose everything.
const MAX_TOLERANCE: f64 = 0.999;

/// The transport's bound is planned for down to this loss. Below it (a large job's
/// ring, an exact transport), a 1 MiB piece of a collective (about 700 frames) still
/// gets through without a recovery about half the time, and planning for less costs the
/// planner more simulation than it saves (the 16,384-host fabric: 0.18 s more at 1e-3,
/// 0.28 s at 1e-4).
pub const MIN_BOUND: f64 = 1e-3;

/// Bisection rounds that lower the steps, and rounds that raise a step lowered too far
/// (each a simulation).
const MARK_ROUNDS: u64 = 6;
const REPAIR_ROUNDS: u64 = 3;

/// Seeds of the simulations: fixed, so a plan is the same every time.
const OPEN_SEED: u64 = 0x6d6c_745f_6f70_656e;
const PREDICTION_SEED: u64 = 0x6d6c_745f_7072_6564;

/// How precisely the predictions are simulated: independent runs of 2^16 frame times,
/// at least 8 and at most 128 (2^23 frame times), until every loss of a queue carrying
/// at least 1% of the traffic is known to a standard error of 10% of itself, 2e-5 or 5%
/// of its tolerance, whichever is largest.
pub const PREDICTION: Precision = Precision {
    run_slots: 1 << 16,
    min_runs: 8,
    max_runs: 128,
    relative_error: 0.1,
    absolute_error: 2e-5,
    tolerance_error: 0.05,
    resolved_share: RESOLVED_SHARE,
};

/// The bisection of the steps only compares losses with a margin: a coarser count.
const BISECTION: Precision = Precision {
    max_runs: 32,
    relative_error: 0.25,
    tolerance_error: 0.1,
    ..PREDICTION
};

/// The open queues run long enough that, for every queue carrying at least
/// [`RESOLVED_SHARE`] of the traffic, bursts bring each kind of frame this many times
/// over its tolerance…
const BURSTS_PER_TOLERANCE: f64 = 20.0;
const RESOLVED_SHARE: f64 = 0.01;
/// …within these bounds.
const OPEN_SLOTS: (u64, u64) = (1 << 19, 1 << 23);

/// The most frames the open queues' lengths are told apart up to (94 MiB of 1500-byte
/// frames): thresholds beyond it are not needed to meet any tolerance.
const MOST_FRAMES: u32 = 1 << 16;

/// Loss tolerances (Not-ECT, ECT) of a class whose middle layer sits at `position`
/// (0 = front layer, 1 = back layer).
pub fn class_tolerances(t: &Tolerance, position: f64) -> (f64, f64) {
    let layer = t.front_layers.powf(1.0 - position) * t.back_layers.powf(position);
    let scale = |magnitude: f64| (layer * magnitude / t.random_loss).min(MAX_TOLERANCE);
    (scale(t.small_gradients), scale(t.large_gradients))
}

/// Cost of losing `loss` when `tolerance` is free: max(0, loss − t)/t.
pub fn excess_cost(loss: f64, tolerance: f64) -> f64 {
    (loss - tolerance).max(0.0) / tolerance
}

/// One gradient queue as the planner sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueInput {
    /// Its share of the gradient traffic.
    pub share: f64,
    pub tolerance_not_ect: f64,
    pub tolerance_ect: f64,
    /// Thresholds fixed by hand, in frames; not chosen.
    pub pinned: Option<Limits>,
    /// S may not go below this many frames (DCTCP's C·RTT/7 on the lowest queue).
    pub mark_floor: u32,
    /// The loss the transport leaves unrecovered ([`super::ModelSummary::message_bound`],
    /// at least [`MIN_BOUND`]): where the buffer allows, each kind's loss stays within
    /// it too.
    pub bound: f64,
}

impl QueueInput {
    /// This queue with its tolerances cut to the transport's bound.
    fn within_bound(&self) -> QueueInput {
        QueueInput {
            tolerance_not_ect: self.tolerance_not_ect.min(self.bound),
            tolerance_ect: self.tolerance_ect.min(self.bound),
            ..*self
        }
    }
}

/// What set a threshold where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetBy {
    /// The least room that keeps the loss within tolerance (or, when the buffer cannot,
    /// the best the buffer allows).
    Tolerance,
    /// The least room that keeps the loss within what the transport leaves unrecovered,
    /// which is below the tolerance.
    LossBound,
    /// One burst of the job must fit under L.
    BurstFloor,
    /// The ECT frames of one burst must fit between S and L.
    BurstRoom,
    /// DCTCP's marking guideline, C·RTT/7.
    MarkFloor,
    /// Buffer left over after every tolerance and floor.
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
            SetBy::LossBound => "the transport's loss bound",
            SetBy::BurstFloor => "burst floor",
            SetBy::BurstRoom => "a burst's ECT above S",
            SetBy::MarkFloor => "C·RTT/7",
            SetBy::SpareBuffer => "spare buffer",
            SetBy::Pinned => "pinned",
            SetBy::SharedBuffer => "shared buffer (no queue limit on this OS)",
        }
    }
}

/// A profile's thresholds and what the model predicts they lose.
#[derive(Debug, Clone, PartialEq)]
pub struct Solved {
    pub chosen: Vec<Chosen>,
    /// Per queue, the predicted (Not-ECT, ECT) losses.
    pub losses: Vec<(Loss, Loss)>,
    /// The limits the prediction ran: the chosen ones, or, where the OS holds no
    /// per-queue limit, the room the shared buffer leaves a queue when the others sit at
    /// their steps (one congested queue at a time, an optimistic assumption).
    pub held: Vec<Limits>,
    /// Frames the prediction simulated.
    pub frames: u64,
    /// Whether the thresholds were chosen within the transport's bound (else within the
    /// tolerances alone: the buffer could not hold the bound).
    pub within_bound: bool,
}

/// Thresholds for `queues` under `traffic` within `budget` frames, and their predicted
/// losses (see the module documentation). `memo` holds the simulations of the plan's
/// other profiles, reused where they are exactly what this one's would give.
pub fn solve(
    queues: &[QueueInput],
    traffic: &Traffic,
    floors: Floors,
    budget: u32,
    queue_limits: bool,
    memo: &Memo,
) -> Solved {
    let tolerated = queues;
    let bounded: Vec<QueueInput> = queues.iter().map(QueueInput::within_bound).collect();
    let shares: Vec<f64> = queues.iter().map(|q| q.share).collect();
    let most = budget.clamp(1, MOST_FRAMES);
    let open_limits: Vec<Limits> = queues
        .iter()
        .map(|q| q.pinned.unwrap_or(Limits::open(most)))
        .collect();
    let open_tails = |queues: &[QueueInput]| -> Vec<Tails> {
        let slots = open_slots(queues, traffic);
        let open = memo.simulate(traffic, &shares, &open_limits, slots, OPEN_SEED, Some(most));
        open.iter().map(Tails::of).collect()
    };
    // Losses the transport would recover cost round trips: plan within its bound, with
    // the margin, when the buffer holds that; else exactly as within the tolerances.
    let bounded_tails = open_tails(&bounded);
    let within = choose::within_tolerance(&bounded, &bounded_tails, floors, budget, choose::MARGIN);
    let within_bound = within.is_some();
    let (queues, mut chosen) = match within {
        Some(chosen) => (&bounded[..], chosen),
        None => {
            let own = (bounded != tolerated).then(|| open_tails(tolerated));
            let tails = own.as_ref().unwrap_or(&bounded_tails);
            (tolerated, choose::choose(tolerated, tails, floors, budget))
        }
    };
    let held = |chosen: &[Chosen]| held_limits(chosen, budget, queue_limits);
    // Every prediction below runs on the same random numbers, so that the steps chosen
    // and the losses predicted for them agree.
    let tolerances: Vec<(f64, f64)> = queues
        .iter()
        .map(|q| (q.tolerance_not_ect, q.tolerance_ect))
        .collect();
    let predict = |limits: &[Limits], precision: &Precision| {
        memo.estimate(
            traffic,
            &shares,
            limits,
            &tolerances,
            PREDICTION_SEED,
            precision,
        )
    };
    // Dropping shortens a queue, so the open tails overstate what a step drops: lower
    // every step, together, by bisection while its queue stays within the margin.
    let open_marks: Vec<u32> = chosen.iter().map(|c| c.limits.mark).collect();
    let mut within = open_marks.clone();
    let mut beyond: Vec<u32> = queues.iter().map(|q| q.mark_floor.max(1) - 1).collect();
    for _ in 0..MARK_ROUNDS {
        let mut trial = chosen.clone();
        let mut bisecting = false;
        for (i, c) in trial.iter_mut().enumerate() {
            if queues[i].pinned.is_none() && within[i] > beyond[i] + 1 {
                c.limits.mark = beyond[i] + (within[i] - beyond[i]) / 2;
                bisecting = true;
            }
        }
        if !bisecting {
            break;
        }
        for (i, o) in predict(&held(&trial), &BISECTION).iter().enumerate() {
            let mark = trial[i].limits.mark;
            if mark < within[i] {
                if o.not_ect.fraction <= queues[i].tolerance_not_ect * choose::MARGIN {
                    within[i] = mark;
                } else {
                    beyond[i] = mark;
                }
            }
        }
    }
    for (i, c) in chosen.iter_mut().enumerate() {
        if c.limits.mark > within[i] {
            c.limits.mark = within[i];
            let floor = queues[i].mark_floor;
            c.mark_set_by = if within[i] == floor && floor > 1 {
                SetBy::MarkFloor
            } else {
                SetBy::Tolerance
            };
        }
    }
    // The bisection compared coarser counts than the prediction makes: a step it
    // lowered too far goes back up, halfway to where the open tails put it at a time.
    let mut predicted = predict(&held(&chosen), &PREDICTION);
    for _ in 0..REPAIR_ROUNDS {
        let mut raised = false;
        for (i, c) in chosen.iter_mut().enumerate() {
            let over = predicted[i].not_ect.fraction > queues[i].tolerance_not_ect;
            if over && c.limits.mark < open_marks[i] {
                c.limits.mark += (open_marks[i] - c.limits.mark).div_ceil(2);
                c.mark_set_by = SetBy::Tolerance;
                raised = true;
            }
        }
        if !raised {
            break;
        }
        predicted = predict(&held(&chosen), &PREDICTION);
    }
    if within_bound {
        // The bound put a threshold where it is when the open tails put it higher for
        // the bound than for the tolerance.
        for (((c, q), t), tails) in chosen
            .iter_mut()
            .zip(queues)
            .zip(tolerated)
            .zip(&bounded_tails)
        {
            let least = |q| choose::least_within_tolerance(q, tails, floors, choose::MARGIN).limits;
            let (for_bound, for_tolerance) = (least(q), least(t));
            if c.mark_set_by == SetBy::Tolerance && for_bound.mark > for_tolerance.mark {
                c.mark_set_by = SetBy::LossBound;
            }
            if c.limit_set_by == SetBy::Tolerance && for_bound.limit > for_tolerance.limit {
                c.limit_set_by = SetBy::LossBound;
            }
        }
    }
    let held = held(&chosen);
    if !queue_limits {
        for c in &mut chosen {
            c.limit_set_by = SetBy::SharedBuffer;
        }
    }
    Solved {
        chosen,
        losses: predicted.iter().map(|e| (e.not_ect, e.ect)).collect(),
        held,
        frames: predicted.iter().map(|e| e.offered).sum(),
        within_bound,
    }
}

/// The limits switches hold: the chosen ones, or, where the OS holds none, the room the
/// shared buffer leaves a queue when every other sits at its step.
fn held_limits(chosen: &[Chosen], budget: u32, queue_limits: bool) -> Vec<Limits> {
    if queue_limits {
        return chosen.iter().map(|c| c.limits).collect();
    }
    let steps: u64 = chosen.iter().map(|c| u64::from(c.limits.mark)).sum();
    chosen
        .iter()
        .map(|c| {
            let others = steps - u64::from(c.limits.mark);
            let room = u64::from(budget).saturating_sub(others).max(1);
            Limits {
                mark: c.limits.mark,
                limit: room.min(u64::from(u32::MAX)) as u32,
            }
        })
        .collect()
}

/// Frame times for the open queues: enough bursts of every queue that carries at least
/// [`RESOLVED_SHARE`] of the traffic (see [`BURSTS_PER_TOLERANCE`]).
fn open_slots(queues: &[QueueInput], traffic: &Traffic) -> u64 {
    let total: f64 = queues.iter().map(|q| q.share).sum();
    let burst = f64::from(traffic.burst_frames().max(1));
    let needed = queues
        .iter()
        .filter(|q| q.pinned.is_none() && q.share >= RESOLVED_SHARE * total)
        .flat_map(|q| {
            let rate = traffic.load * q.share / total;
            [
                (rate * traffic.theta, q.tolerance_not_ect),
                (rate * (1.0 - traffic.theta), q.tolerance_ect),
            ]
        })
        .filter(|(rate, _)| *rate > 0.0)
        .map(|(rate, tolerance)| BURSTS_PER_TOLERANCE * burst / (rate * tolerance))
        .fold(0.0, f64::max);
    (needed.ceil() as u64).clamp(OPEN_SLOTS.0, OPEN_SLOTS.1)
}

/// Thresholds for all switches with one buffer size, link speed and queue-limit
/// support.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdProfile {
    pub buffer_bytes: u64,
    /// The switches' fastest port.
    pub link_mbps: u64,
    /// Whether these switches' OS holds L_i for every packet
    /// ([`switch_config::Vendor::no_queue_limit`] says why not). Without it L_i is not
    /// rendered (a pinned one neither), and a queue's ECT frames are dropped only when
    /// the shared buffer is full ([`Solved::held`]).
    pub queue_limits: bool,
    /// Every L_i holds at least this: one burst of the job (see [`burst_bytes`]).
    pub burst_bytes: u64,
    /// Every L_i − S_i holds at least this: the ECT frames of one burst.
    pub ect_room_bytes: u64,
    /// The lowest gradient queue's S_i is at least this: DCTCP's C·RTT/7.
    pub mark_floor_bytes: u64,
    pub switches: Vec<String>,
    /// Buffer the thresholds use together (Σ L_i).
    pub used_bytes: u64,
    /// Frames the prediction simulated.
    pub simulated_frames: u64,
    /// Whether the thresholds keep within what the transport leaves unrecovered
    /// ([`super::ModelSummary::message_bound`], at least [`MIN_BOUND`]) rather than
    /// only within the tolerances: the buffer holds them.
    pub within_bound: bool,
    /// Gradient queues, highest priority first.
    pub queues: Vec<QueueThreshold>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueThreshold {
    pub class: u8,
    pub queue: u8,
    /// S_i: at and above this, ECT frames are marked and Not-ECT frames dropped.
    pub mark_bytes: u64,
    /// L_i: at and above this, every frame is dropped. Where the OS cannot hold it
    /// ([`ThresholdProfile::queue_limits`] false), the room the model counts on for the
    /// queue, not rendered.
    pub limit_bytes: u64,
    /// The queue's share of the gradient traffic.
    pub share: f64,
    pub tolerance_not_ect: f64,
    pub tolerance_ect: f64,
    /// The loss fractions the model predicts for the queue's Not-ECT and ECT frames…
    pub loss_not_ect: f64,
    pub loss_ect: f64,
    /// …and their standard errors (the simulation's counting noise).
    pub loss_not_ect_error: f64,
    pub loss_ect_error: f64,
    pub mark_set_by: SetBy,
    pub limit_set_by: SetBy,
    /// Set by hand in the inventory rather than chosen.
    pub pinned: bool,
}

/// What one burst of the job puts into an egress queue: every fan-in sender's pacing
/// batch at once, plus what the extra senders add at line rate before rate control
/// slows them (it decreases only once the RTT passes T_high).
pub fn burst_bytes(model: &ModelSummary, link_mbps: u64) -> u64 {
    let packet = u64::from(model.packet_bytes);
    let batch = PACING_BATCH as u64 * packet;
    let until_slowed = link_mbps as f64 * 1e6 / 8.0 * model.t_high_us * 1e-6;
    u64::from(model.fan_in) * batch + (f64::from(model.fan_in - 1) * until_slowed).ceil() as u64
}

/// DCTCP's marking guideline K > C·RTT/7, in bytes.
pub fn mark_floor_bytes(model: &ModelSummary, link_mbps: u64) -> u64 {
    (link_mbps as f64 * 1e6 / 8.0 * model.rtt_us * 1e-6 / 7.0).ceil() as u64
}

/// The threshold profiles of the plan: one per buffer size, link speed and queue-limit
/// support among the switches.
pub fn profiles(inv: &Inventory, qos: &QosPlan, model: &ModelSummary) -> Vec<ThresholdProfile> {
    let mut by_kind: BTreeMap<ProfileKey, Vec<String>> = BTreeMap::new();
    for s in &inv.switches {
        by_kind
            .entry((
                s.buffer_bytes,
                super::switch_link_mbps(s),
                s.vendor.no_queue_limit().is_none(),
            ))
            .or_default()
            .push(s.name.clone());
    }
    let packet = u64::from(model.packet_bytes);
    let frames = |bytes: u64| bytes.div_ceil(packet).min(u64::from(u32::MAX)) as u32;
    let pinned: Vec<Option<&PinnedThreshold>> = qos
        .classes
        .iter()
        .map(|c| {
            inv.training
                .pinned_thresholds
                .iter()
                .find(|p| p.class == c.tag.class)
        })
        .collect();
    // Rounding each threshold up to KiB adds under 1 KiB per queue; keep that aside.
    let rounding_slack = THRESHOLD_UNIT * qos.classes.len() as u64;
    let traffic = Traffic {
        load: model.load,
        theta: model.theta,
        batch: PACING_BATCH as u32,
        senders: model.fan_in,
    };
    let lowest = qos.classes.len().saturating_sub(1);
    // One profile after another (each simulation runs its replicas in parallel), so a
    // later profile finds the runs of the earlier ones.
    let memo = Memo::default();
    by_kind
        .into_iter()
        .map(|((buffer_bytes, link_mbps, queue_limits), switches)| {
            let burst = burst_bytes(model, link_mbps);
            let ect_room = (burst as f64 * (1.0 - model.theta)).ceil() as u64;
            let mark_floor = mark_floor_bytes(model, link_mbps);
            let inputs: Vec<QueueInput> = qos
                .classes
                .iter()
                .enumerate()
                .zip(&pinned)
                .map(|((i, class), pinned)| {
                    let (tolerance_not_ect, tolerance_ect) =
                        class_tolerances(&inv.training.model.tolerance, class.position);
                    QueueInput {
                        share: class.share,
                        tolerance_not_ect,
                        tolerance_ect,
                        // Whole frames below the bytes given: what the switch surely holds.
                        pinned: pinned.map(|p| Limits {
                            mark: (p.mark_bytes / packet) as u32,
                            limit: (p.limit_bytes / packet) as u32,
                        }),
                        mark_floor: if i == lowest { frames(mark_floor) } else { 1 },
                        bound: model.message_bound.max(MIN_BOUND),
                    }
                })
                .collect();
            let budget = buffer_bytes.saturating_sub(rounding_slack) / packet;
            let floors = Floors {
                burst: frames(burst),
                ect_room: frames(ect_room),
            };
            let solved = solve(
                &inputs,
                &traffic,
                floors,
                budget.min(u64::from(u32::MAX)) as u32,
                queue_limits,
                &memo,
            );
            // Σ L_i of the chosen partition; the over-commitment check uses it whether
            // or not the switches hold the limits.
            let used_bytes = solved
                .chosen
                .iter()
                .map(|c| whole_units(u64::from(c.limits.limit) * packet))
                .sum();
            let queues = qos
                .classes
                .iter()
                .zip(&inputs)
                .zip(&pinned)
                .enumerate()
                .map(|(i, ((class, input), pinned))| {
                    let (c, held) = (solved.chosen[i], solved.held[i]);
                    let (mark_bytes, limit_bytes) = match pinned {
                        Some(p) if queue_limits => (p.mark_bytes, p.limit_bytes),
                        Some(p) => (p.mark_bytes, u64::from(held.limit) * packet),
                        None => (
                            whole_units(u64::from(c.limits.mark) * packet),
                            whole_units(u64::from(held.limit) * packet),
                        ),
                    };
                    QueueThreshold {
                        class: class.tag.class,
                        queue: class.tag.queue,
                        mark_bytes: mark_bytes.min(limit_bytes),
                        limit_bytes,
                        share: class.share,
                        tolerance_not_ect: input.tolerance_not_ect,
                        tolerance_ect: input.tolerance_ect,
                        loss_not_ect: solved.losses[i].0.fraction,
                        loss_ect: solved.losses[i].1.fraction,
                        loss_not_ect_error: solved.losses[i].0.error,
                        loss_ect_error: solved.losses[i].1.error,
                        mark_set_by: c.mark_set_by,
                        limit_set_by: c.limit_set_by,
                        pinned: pinned.is_some(),
                    }
                })
                .collect();
            ThresholdProfile {
                buffer_bytes,
                link_mbps,
                queue_limits,
                burst_bytes: burst,
                ect_room_bytes: ect_room,
                mark_floor_bytes: mark_floor,
                switches,
                used_bytes,
                simulated_frames: solved.frames,
                within_bound: solved.within_bound,
                queues,
            }
        })
        .collect()
}

/// Switches share a threshold profile when these match: buffer, fastest port, and
/// whether their OS holds queue limits.
type ProfileKey = (u64, u64, bool);

/// `bytes` rounded up to whole [`THRESHOLD_UNIT`]s: the switch holds at least what the
/// model simulated.
fn whole_units(bytes: u64) -> u64 {
    bytes.div_ceil(THRESHOLD_UNIT) * THRESHOLD_UNIT
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn default_tolerances_follow_the_papers_measurements() {
        let t = Tolerance::default();
        let (front_n, front_e) = class_tolerances(&t, 0.0);
        let (back_n, back_e) = class_tolerances(&t, 1.0);
        // Front Not-ECT (small) gradients: 5% · 20% / 2.4%; back ECT (large): 0.3% · 0.4% / 2.4%.
        assert!(close(front_n, 0.05 * 0.2 / 0.024));
        assert!(close(back_e, 0.003 * 0.004 / 0.024));
        assert!(front_n > front_e && back_n > back_e);
        assert!(front_e > back_e && front_n > back_n);
        // Halfway, the layer tolerance is the geometric mean of front and back.
        let (mid_n, _) = class_tolerances(&t, 0.5);
        assert!(close(mid_n, (0.05f64 * 0.003).sqrt() * 0.2 / 0.024));
    }

    fn queues(shares: &[f64], position: impl Fn(usize) -> f64) -> Vec<QueueInput> {
        shares
            .iter()
            .enumerate()
            .map(|(i, &share)| {
                let (tolerance_not_ect, tolerance_ect) =
                    class_tolerances(&Tolerance::default(), position(i));
                QueueInput {
                    share,
                    tolerance_not_ect,
                    tolerance_ect,
                    pinned: None,
                    mark_floor: 1,
                    bound: 1.0,
                }
            })
            .collect()
    }

    fn bounded(queues: &[QueueInput], bound: f64) -> Vec<QueueInput> {
        queues.iter().map(|q| QueueInput { bound, ..*q }).collect()
    }

    const BURSTS: Traffic = Traffic {
        load: 0.9,
        theta: 0.5,
        batch: 16,
        senders: 1,
    };

    const FLOORS: Floors = Floors {
        burst: 16,
        ect_room: 8,
    };

    #[test]
    fn a_roomy_buffer_meets_every_tolerance_above_the_floors() {
        let queues = queues(&[0.2, 0.3, 0.5], |i| i as f64 / 2.0);
        let solved = solve(&queues, &BURSTS, FLOORS, 20_000, true, &Memo::default());
        let used: u32 = solved.chosen.iter().map(|c| c.limits.limit).sum();
        assert!(used <= 20_000);
        for ((q, c), (n, e)) in queues.iter().zip(&solved.chosen).zip(&solved.losses) {
            assert!(c.limits.limit >= FLOORS.burst, "{c:?}");
            assert!(c.limits.limit - c.limits.mark >= FLOORS.ect_room, "{c:?}");
            assert!(n.fraction <= q.tolerance_not_ect, "{q:?} {n:?}");
            assert!(e.fraction <= q.tolerance_ect, "{q:?} {e:?}");
        }
        // Steps stay low: the least that meets the Not-ECT margin, well below the limits.
        assert!(solved.chosen.iter().all(|c| c.limits.mark < c.limits.limit));
    }

    #[test]
    fn a_roomy_buffer_keeps_every_loss_within_the_transports_bound() {
        let tolerated = queues(&[0.2, 0.3, 0.5], |i| i as f64 / 2.0);
        let bound = 2e-3;
        let queues = bounded(&tolerated, bound);
        // The front queue tolerates far more Not-ECT loss than the transport leaves
        // unrecovered: its step is the bound's, higher than the tolerance's.
        assert!(queues[0].tolerance_not_ect > 100.0 * bound);
        let memo = Memo::default();
        let within = solve(&queues, &BURSTS, FLOORS, 20_000, true, &memo);
        let free = solve(&tolerated, &BURSTS, FLOORS, 20_000, true, &memo);
        for (c, (n, e)) in within.chosen.iter().zip(&within.losses) {
            assert!(
                n.fraction <= bound && e.fraction <= bound,
                "{c:?} {n:?} {e:?}"
            );
        }
        assert!(free.losses[0].0.fraction > bound, "{:?}", free.losses[0]);
        assert!(within.chosen[0].limits.mark > free.chosen[0].limits.mark);
        assert_eq!(within.chosen[0].mark_set_by, SetBy::LossBound);
    }

    #[test]
    fn a_buffer_that_cannot_hold_the_bound_is_planned_within_the_tolerances() {
        let tolerated = queues(&[0.2, 0.3, 0.5], |i| i as f64 / 2.0);
        let queues = bounded(&tolerated, MIN_BOUND);
        let memo = Memo::default();
        let budget = 400;
        let free = solve(&tolerated, &BURSTS, FLOORS, budget, true, &memo);
        assert_eq!(solve(&queues, &BURSTS, FLOORS, budget, true, &memo), free);
        for ((q, c), (n, e)) in tolerated.iter().zip(&free.chosen).zip(&free.losses) {
            assert!(n.fraction <= q.tolerance_not_ect, "{c:?} {n:?}");
            assert!(e.fraction <= q.tolerance_ect, "{c:?} {e:?}");
        }
        // With room, the bound moves the thresholds.
        let roomy = solve(&queues, &BURSTS, FLOORS, 20_000, true, &memo);
        assert_ne!(
            roomy.chosen,
            solve(&tolerated, &BURSTS, FLOORS, 20_000, true, &memo).chosen
        );
    }

    #[test]
    fn a_scarce_buffer_is_spent_within_its_size() {
        let queues = queues(&[0.2, 0.3, 0.5], |i| i as f64 / 2.0);
        let solved = solve(&queues, &BURSTS, FLOORS, 90, true, &Memo::default());
        let used: u32 = solved.chosen.iter().map(|c| c.limits.limit).sum();
        assert!(used <= 90, "{:?}", solved.chosen);
        assert!(
            queues
                .iter()
                .zip(&solved.losses)
                .any(|(q, (n, e))| n.fraction > q.tolerance_not_ect || e.fraction > q.tolerance_ect),
            "90 frames cannot hold these tolerances under bursts of 16: {:?}",
            solved.losses
        );
    }

    #[test]
    fn pinned_queues_keep_their_thresholds() {
        let mut queues = queues(&[0.5, 0.5], |i| i as f64);
        queues[0].pinned = Some(Limits { mark: 5, limit: 9 });
        let solved = solve(&queues, &BURSTS, FLOORS, 5_000, true, &Memo::default());
        assert_eq!(solved.chosen[0].limits, Limits { mark: 5, limit: 9 });
        assert_eq!(solved.chosen[0].mark_set_by, SetBy::Pinned);
        assert_ne!(solved.chosen[1].mark_set_by, SetBy::Pinned);
    }

    #[test]
    fn without_queue_limits_a_queue_gets_the_room_the_others_steps_leave() {
        let queues = queues(&[0.4, 0.6], |i| i as f64);
        let solved = solve(&queues, &BURSTS, FLOORS, 1_000, false, &Memo::default());
        let steps: u32 = solved.chosen.iter().map(|c| c.limits.mark).sum();
        for (c, held) in solved.chosen.iter().zip(&solved.held) {
            assert_eq!(c.limit_set_by, SetBy::SharedBuffer);
            assert_eq!(held.limit, 1_000 - (steps - c.limits.mark));
        }
    }
}
