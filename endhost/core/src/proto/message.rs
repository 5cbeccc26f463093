//! One message's state at each end: what a send has still to send or resend, and what
//! a receive has and is missing; the bounds on what a peer's bitmap may ask.

use std::collections::VecDeque;

use super::inexact::word_spans;
use super::{LayerMap, Place, Region, control};
use crate::wire::MessageId;

/// Probes are repeated after at least this long without an answer, and at most after
/// this long.
pub(super) const PROBE_FLOOR_US: f64 = 1_000.0;
/// The least wait after a round of retransmissions before probing again.
pub(super) const PROBE_SETTLE_US: f64 = 200.0;
/// The longest a receiver holds its answer to a probe that overtook the message's last
/// packet: well inside [`PROBE_FLOOR_US`], so the sender never asks again for it.
pub(super) const PROBE_HOLD_US: f64 = PROBE_FLOOR_US / 2.0;
const _: () = assert!(PROBE_HOLD_US < PROBE_FLOOR_US);
const PROBE_CAP_US: f64 = 200_000.0;

/// Whether a bitmap's missing ranges are what a receiver sends: each non-empty, in
/// order, not overlapping (adjacent is fine), and within the message's `packets`. Anything else is
/// a peer asking for work out of proportion (the same packets many times over).
pub(super) fn ranges_are_sound(missing: &[(u32, u32)], packets: u32) -> bool {
    let mut from = 0u32;
    for &(first, n) in missing {
        let Some(end) = first.checked_add(n) else {
            return false;
        };
        if n == 0 || first < from || end > packets {
            return false;
        }
        from = end;
    }
    true
}

/// How long to wait for an answer to a probe: the RTO, doubled for each probe in a
/// row left unanswered, capped.
pub(super) fn probe_wait_ns(rto_us: f64, unanswered: u32) -> u64 {
    let wait_us = rto_us * f64::from(1u32 << unanswered.min(16));
    (wait_us.min(PROBE_CAP_US) * 1_000.0) as u64
}

#[derive(Debug)]
pub(super) struct Outgoing {
    /// Post order: a peer's older sends go first.
    pub(super) order: u64,
    pub(super) region: Region,
    pub(super) layers: LayerMap,
    pub(super) threshold: f32,
    pub(super) packets: u32,
    pub(super) next: u32,
    pub(super) resend: VecDeque<u32>,
    /// Which packets `resend` holds (one bit each, made at the first bitmap), so a
    /// bitmap naming a packet already queued adds nothing: the queue never holds more
    /// than the message's packets, whatever a peer sends.
    pub(super) queued: Vec<u64>,
    /// The receiver's handle for the message, once it said READY.
    pub(super) handle: Option<u32>,
    /// Waiting for an answer to a probe; when to probe again.
    pub(super) probe_deadline: Option<u64>,
    /// Probes in a row that got no answer (the backoff exponent).
    pub(super) unanswered: u32,
    /// A probe is out; the deadline is for its answer (else: for sending one).
    pub(super) awaiting_answer: bool,
}

impl Outgoing {
    /// Queues the `missing` ranges (sound: in order, apart, inside the message) for
    /// resending, each packet not queued already: a word of the queued bits at a time,
    /// so the work is in the message's words plus the packets added.
    pub(super) fn queue_missing(&mut self, missing: &[(u32, u32)]) {
        if self.queued.is_empty() {
            self.queued = vec![0; (self.packets as usize).div_ceil(64)];
        }
        for &(first, n) in missing {
            for (word, span) in word_spans(first as usize..(first + n) as usize) {
                let mut added = span & !self.queued[word];
                self.queued[word] |= span;
                while added != 0 {
                    self.resend
                        .push_back(word as u32 * 64 + added.trailing_zeros());
                    added &= added - 1;
                }
            }
        }
    }

    pub(super) fn has_data(&self) -> bool {
        self.handle.is_some() && (self.next < self.packets || !self.resend.is_empty())
    }
}

#[derive(Debug)]
pub(super) struct Incoming {
    pub(super) peer: u16,
    pub(super) id: MessageId,
    pub(super) region: Region,
    pub(super) place: Place,
    pub(super) packets: u32,
    pub(super) bitmap: Vec<u64>,
    pub(super) received_elems: usize,
    pub(super) need_elems: usize,
    /// Whether the receive may end short of its bound (its bound is above 0).
    pub(super) may_end_early: bool,
    /// When the sender's first pass was seen to end (its last packet, or a probe).
    pub(super) pass_over_at: Option<u64>,
    /// A probe came before the message's last packet, which is likely still on its way
    /// (the probe takes the control channel's strict-priority queue past the data): it
    /// is answered when that packet lands, or at this deadline.
    pub(super) held_probe: Option<u64>,
    /// A probe was answered: later probes come after the sender's resends have had
    /// time to land, and the last packet may never be asked for again (p > 0), so
    /// they are answered at once.
    pub(super) answered: bool,
    pub(super) done: bool,
}

impl Incoming {
    pub(super) fn has(&self, seq: u32) -> bool {
        self.bitmap[seq as usize / 64] & (1 << (seq % 64)) != 0
    }

    /// Whether the sender's first pass has landed here: its last packet arrived.
    pub(super) fn has_last(&self) -> bool {
        self.has(self.packets - 1)
    }

    /// Marks the values of every packet that has not arrived as inexact: a reduction
    /// lacks their contribution, a copy keeps what the buffer held.
    pub(super) fn mark_missing(&self, payload_elems: usize) {
        let mut inexact = self.region.inexact.borrow_mut();
        for seq in (0..self.packets).filter(|&seq| !self.has(seq)) {
            let first = seq as usize * payload_elems;
            let end = (first + payload_elems).min(self.region.len);
            inexact.mark(self.region.start + first..self.region.start + end);
        }
    }

    /// Missing packets, as (first, count) ranges, the first `wanted` of them.
    pub(super) fn missing(&self, wanted: u32) -> Vec<(u32, u32)> {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        let mut listed = 0;
        for seq in 0..self.packets {
            if listed == wanted {
                break;
            }
            if !self.has(seq) {
                let full = ranges.len() == control::MAX_RANGES;
                match ranges.last_mut() {
                    Some((first, n)) if *first + *n == seq => *n += 1,
                    _ if full => break,
                    _ => ranges.push((seq, 1)),
                }
                listed += 1;
            }
        }
        ranges
    }

    /// How many missing packets to ask for: enough to reach the bound, plus a margin
    /// for retransmissions lost at the rate the first pass lost packets. Asking for
    /// all of them would resend up to p of the message for nothing.
    pub(super) fn wanted(&self, payload_elems: usize) -> u32 {
        let arrived: u32 = self.bitmap.iter().map(|w| w.count_ones()).sum();
        let missing = self.packets - arrived;
        let short = self.need_elems.saturating_sub(self.received_elems);
        let needed = short.div_ceil(payload_elems) as u32;
        let loss = f64::from(missing) / f64::from(self.packets);
        let margin = (2.0 * loss * f64::from(needed)).ceil() as u32 + 1;
        missing.min(needed + margin)
    }
}
