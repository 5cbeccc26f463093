//! Choosing each queue's step S and limit L from what the queues do when nothing drops
//! (see the module documentation of `super`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::{QueueInput, SetBy, excess_cost};
use mlt_queue::{Limits, Tails};

/// The floors every queue keeps, in frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floors {
    /// L ≥ one burst of the job.
    pub burst: u32,
    /// L − S ≥ the ECT frames of one burst.
    pub ect_room: u32,
}

/// A queue's thresholds and what set each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen {
    pub limits: Limits,
    pub mark_set_by: SetBy,
    pub limit_set_by: SetBy,
}

/// A threshold is chosen where the open queue's tail is at most this fraction of the
/// tolerance, when the buffer allows: the margin that keeps the verifying simulation,
/// run with another seed, within tolerance.
pub const MARGIN: f64 = 0.5;

/// Thresholds for `queues` within `budget` frames (Σ L), from `open`: each queue's
/// arrivals in a simulation where nothing dropped.
pub fn choose(queues: &[QueueInput], open: &[Tails], floors: Floors, budget: u32) -> Vec<Chosen> {
    [MARGIN, 1.0]
        .into_iter()
        .find_map(|margin| within_tolerance(queues, open, floors, budget, margin))
        .unwrap_or_else(|| least_excess(queues, open, floors, budget_left(queues, budget)))
}

/// [`choose`] when `budget` holds every queue's open tails within `margin` of its
/// tolerance (None: it does not).
pub fn within_tolerance(
    queues: &[QueueInput],
    open: &[Tails],
    floors: Floors,
    budget: u32,
    margin: f64,
) -> Option<Vec<Chosen>> {
    let budget = budget_left(queues, budget);
    let least: Vec<Chosen> = queues
        .iter()
        .zip(open)
        .map(|(q, o)| least_within_tolerance(q, o, floors, margin))
        .collect();
    let used: u64 = least.iter().map(|c| u64::from(c.limits.limit)).sum();
    (used <= budget).then(|| spend_spare(queues, open, least, budget - used))
}

/// The budget the queues not pinned share.
fn budget_left(queues: &[QueueInput], budget: u32) -> u64 {
    let pinned: u64 = queues
        .iter()
        .filter_map(|q| q.pinned)
        .map(|p| u64::from(p.limit))
        .sum();
    u64::from(budget).saturating_sub(pinned)
}

/// The lowest S and L whose open tails are within `margin` of each tolerance, above the
/// floors.
pub fn least_within_tolerance(q: &QueueInput, open: &Tails, floors: Floors, margin: f64) -> Chosen {
    if let Some(limits) = q.pinned {
        return pinned(limits);
    }
    let cap = open.cap();
    let first = |tail: &dyn Fn(u32) -> f64, from: u32, tolerance: f64| {
        (from..=cap.max(from))
            .find(|&x| tail(x) <= tolerance * margin)
            .unwrap_or(cap.max(from))
    };
    let mark = first(
        &|x| open.not_ect(x),
        q.mark_floor.max(1),
        q.tolerance_not_ect,
    );
    let mark_set_by = if mark == q.mark_floor && q.mark_floor > 1 {
        SetBy::MarkFloor
    } else {
        SetBy::Tolerance
    };
    let by_tolerance = first(&|x| open.ect(x), 1, q.tolerance_ect);
    let (limit, limit_set_by) = [
        (by_tolerance, SetBy::Tolerance),
        (floors.burst, SetBy::BurstFloor),
        (mark + floors.ect_room, SetBy::BurstRoom),
    ]
    .into_iter()
    .max_by_key(|(x, _)| *x)
    .expect("three candidates");
    Chosen {
        limits: Limits { mark, limit },
        mark_set_by,
        limit_set_by,
    }
}

fn pinned(limits: Limits) -> Chosen {
    Chosen {
        limits,
        mark_set_by: SetBy::Pinned,
        limit_set_by: SetBy::Pinned,
    }
}

/// Buffer left after every tolerance goes to the limits (room for ECT frames), where it
/// cuts the open queue's ECT tail most relative to its tolerance, until no more of the
/// tail is cut or the buffer is spent. Steps stay where they are: a higher step only
/// delays the marks that slow senders down.
fn spend_spare(
    queues: &[QueueInput],
    open: &[Tails],
    mut chosen: Vec<Chosen>,
    mut spare: u64,
) -> Vec<Chosen> {
    let mut heap = BinaryHeap::new();
    let offer = |heap: &mut BinaryHeap<Step>, i: usize, from: u32| {
        if let Some(step) = next_cut(&open[i], queues[i].tolerance_ect, i, from) {
            heap.push(step);
        }
    };
    for (i, q) in queues.iter().enumerate() {
        if q.pinned.is_none() {
            offer(&mut heap, i, chosen[i].limits.limit);
        }
    }
    while let Some(step) = heap.pop() {
        let grow = step.to - chosen[step.queue].limits.limit;
        if u64::from(grow) > spare {
            continue;
        }
        spare -= u64::from(grow);
        let c = &mut chosen[step.queue];
        c.limits.limit = step.to;
        c.limit_set_by = SetBy::SpareBuffer;
        offer(&mut heap, step.queue, step.to);
    }
    chosen
}

/// From a limit at `from`, the next limit at which the open ECT tail falls, and how
/// much it falls per frame relative to `tolerance`.
fn next_cut(open: &Tails, tolerance: f64, queue: usize, from: u32) -> Option<Step> {
    let now = open.ect(from);
    if now <= 0.0 {
        return None;
    }
    let to = (from + 1..=open.cap() + 1).find(|&x| open.ect(x) < now)?;
    let gain = (now - open.ect(to)) / f64::from(to - from) / tolerance;
    Some(Step { gain, queue, to })
}

/// The least total excess cost within `budget`, from the floors, a frame at a time to
/// the step or limit whose excess falls most (the buffer cannot meet every tolerance).
fn least_excess(queues: &[QueueInput], open: &[Tails], floors: Floors, budget: u64) -> Vec<Chosen> {
    let mut chosen: Vec<Chosen> = queues
        .iter()
        .map(|q| match q.pinned {
            Some(limits) => pinned(limits),
            None => {
                let mark = q.mark_floor.max(1);
                let limit = floors.burst.max(mark + floors.ect_room);
                Chosen {
                    limits: Limits { mark, limit },
                    mark_set_by: if q.mark_floor > 1 {
                        SetBy::MarkFloor
                    } else {
                        SetBy::Tolerance
                    },
                    limit_set_by: SetBy::BurstFloor,
                }
            }
        })
        .collect();
    let mut left = budget.saturating_sub(
        chosen
            .iter()
            .zip(queues)
            .filter(|(_, q)| q.pinned.is_none())
            .map(|(c, _)| u64::from(c.limits.limit))
            .sum(),
    );
    loop {
        let best = queues
            .iter()
            .enumerate()
            .filter(|(_, q)| q.pinned.is_none())
            .flat_map(|(i, q)| {
                let c = chosen[i].limits;
                let cap = open[i].cap() + 1;
                let mark_gain = excess_cost(open[i].not_ect(c.mark), q.tolerance_not_ect)
                    - excess_cost(open[i].not_ect(c.mark + 1), q.tolerance_not_ect);
                let mark_cost = u64::from(c.mark + 1 + floors.ect_room > c.limit);
                let limit_gain = excess_cost(open[i].ect(c.limit), q.tolerance_ect)
                    - excess_cost(open[i].ect(c.limit + 1), q.tolerance_ect);
                [
                    (mark_gain, mark_cost, i, true, c.mark + 1 < cap),
                    (limit_gain, 1, i, false, c.limit < cap),
                ]
            })
            .filter(|(gain, cost, _, _, fits)| *gain > 0.0 && *cost <= left && *fits)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let Some((_, cost, i, mark, _)) = best else {
            break;
        };
        left -= cost;
        let c = &mut chosen[i];
        if mark {
            c.limits.mark += 1;
            c.mark_set_by = SetBy::Tolerance;
            c.limits.limit = c.limits.limit.max(c.limits.mark + floors.ect_room);
        } else {
            c.limits.limit += 1;
            c.limit_set_by = SetBy::Tolerance;
        }
    }
    chosen
}

/// A limit to grow to, and its gain per frame.
#[derive(Debug)]
struct Step {
    gain: f64,
    queue: usize,
    to: u32,
}

impl PartialEq for Step {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Step {}

impl PartialOrd for Step {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Step {
    /// Largest gain first; on a tie the higher-priority queue.
    fn cmp(&self, other: &Self) -> Ordering {
        self.gain
            .total_cmp(&other.gain)
            .then_with(|| other.queue.cmp(&self.queue))
    }
}
