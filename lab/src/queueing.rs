//! One egress port of a lab switch, sans I/O: frames enter its queues by their DSCP
//! as the running configuration maps it, RED/ECN decides at enqueue (mark CE, drop the
//! packet that is not ECN-capable, drop any, or the queue is full), and frames leave by
//! strict priority (the highest strict queue first, then the others in turn) at the
//! port's rate. The forwarder around it owns the sockets and the clock; what it queues
//! is anything [`Queued`]: whole frames here and in the exact-time simulation, the
//! segments of a GSO super-frame in the forwarder.

use std::collections::VecDeque;

use endhost_core::frame::Ipv4Packet;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use serde::{Deserialize, Serialize};

use super::qos::{Curve, PortQos, QueueQos};

const QUEUES: usize = 8;
const ETHERNET_HEADER: usize = 14;
/// Bytes a frame occupies on the wire beyond its own: preamble, start and gap (the
/// FCS is not in the frame the kernel hands over either).
pub const WIRE_OVERHEAD: u64 = 24;
/// How far the wire's clock may lag the forwarder's (a late wake-up) before the lost
/// time counts as idle.
const CATCH_UP_NS: u64 = 1_000_000;
/// The ECN codepoints (RFC 3168).
const NOT_ECT: u8 = 0b00;
const CE: u8 = 0b11;

/// What happened to a frame offered to the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Queued(u8),
    /// Queued with CE set.
    Marked(u8),
    Dropped(u8, DropReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Not ECN-capable, on the ECN curve.
    NotEct,
    /// On the curve that drops every packet.
    Red,
    /// Past the queue's limit (or the port's buffer).
    Full,
}

/// One queue's counters, as `show queue counters` gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounters {
    pub packets: u64,
    pub bytes: u64,
    pub marked: u64,
    pub dropped_not_ect: u64,
    pub dropped_red: u64,
    pub dropped_full: u64,
    pub peak_bytes: u64,
    /// ECN-capable packets offered to the queue, and of those dropped (any reason): the
    /// loss of important packets, apart from the unimportant ones'.
    pub ect_offered: u64,
    pub ect_dropped: u64,
}

/// What a port queues: a frame as it will cross the wire.
pub trait Queued {
    /// Its bytes (without preamble, FCS and gap).
    fn bytes(&self) -> u64;
    /// Its IPv4 TOS; None: not IPv4 (queue 0, no RED).
    fn tos(&self) -> Option<u8>;
    /// Sets its ECN field to CE.
    fn set_ce(&mut self);
}

impl Queued for Vec<u8> {
    fn bytes(&self) -> u64 {
        self.len() as u64
    }

    fn tos(&self) -> Option<u8> {
        let is_ipv4 = self.get(12..14) == Some(&[0x08, 0x00][..]);
        let ip = Ipv4Packet::new_checked(self.get(ETHERNET_HEADER..)?).ok()?;
        is_ipv4.then(|| ip.tos())
    }

    fn set_ce(&mut self) {
        if let Some(Ok(mut ip)) = self.get_mut(ETHERNET_HEADER..).map(Ipv4Packet::new_checked) {
            ip.set_ecn(CE);
        }
    }
}

pub struct Port<F = Vec<u8>> {
    qos: PortQos,
    /// Each queue's settings, from `qos` (looked up for every frame).
    settings: [QueueQos; QUEUES],
    /// Bits per second.
    rate: u64,
    /// Bytes every queue together may hold (the port's share of the buffer).
    buffer_bytes: u64,
    queues: [VecDeque<F>; QUEUES],
    depth: [u64; QUEUES],
    counters: [QueueCounters; QUEUES],
    /// When the wire is free again, in nanoseconds of the forwarder's clock.
    wire_free_at: u64,
    /// The next non-strict queue to look at first (round robin).
    turn: usize,
    rng: ChaCha8Rng,
}

impl<F: Queued> Port<F> {
    pub fn new(qos: PortQos, rate: u64, buffer_bytes: u64, seed: u64) -> Port<F> {
        Port {
            settings: settings_of(&qos),
            qos,
            rate: rate.max(1),
            buffer_bytes,
            queues: Default::default(),
            depth: [0; QUEUES],
            counters: Default::default(),
            wire_free_at: 0,
            turn: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The configuration changed: queued frames stay, new ones follow the new rules.
    pub fn set_qos(&mut self, qos: PortQos) {
        self.settings = settings_of(&qos);
        self.qos = qos;
    }

    pub fn counters(&self) -> &[QueueCounters; QUEUES] {
        &self.counters
    }

    /// Offers a frame to the port at `now` (nanoseconds).
    pub fn enqueue(&mut self, frame: F, now: u64) -> Verdict {
        if self.depth.iter().all(|d| *d == 0) {
            // An idle wire banks no time: the frame cannot leave before it came.
            self.wire_free_at = self.wire_free_at.max(now);
        }
        let Some((dscp, ecn)) = frame.tos().map(|tos| (tos >> 2, tos & 0b11)) else {
            return self.admit(0, frame, false);
        };
        let queue = self
            .qos
            .queue_of_dscp
            .get(usize::from(dscp))
            .copied()
            .unwrap_or(0);
        let q = usize::from(queue) % QUEUES;
        let ect = ecn != NOT_ECT;
        self.counters[q].ect_offered += u64::from(ect);
        let verdict = self.enqueue_ip(frame, q, ecn);
        if ect && matches!(verdict, Verdict::Dropped(..)) {
            self.counters[q].ect_dropped += 1;
        }
        verdict
    }

    /// Offers a frame of queue `q` with ECN field `ecn`.
    fn enqueue_ip(&mut self, mut frame: F, q: usize, ecn: u8) -> Verdict {
        let settings = self.settings[q];
        let depth = self.depth[q];
        let len = frame.bytes();
        if settings
            .limit_bytes
            .is_some_and(|limit| depth + len > limit)
            || self.depth.iter().sum::<u64>() + len > self.buffer_bytes
        {
            return self.drop(q, DropReason::Full);
        }
        if self.hit(settings.drop_all, depth) {
            return self.drop(q, DropReason::Red);
        }
        let mut marked = false;
        if ecn == NOT_ECT {
            if self.hit(settings.drop_not_ect, depth) {
                return self.drop(q, DropReason::NotEct);
            }
        } else if ecn != CE && self.hit(settings.mark, depth) {
            frame.set_ce();
            marked = true;
        }
        self.admit(q, frame, marked)
    }

    /// The next frame to send at `now` (nanoseconds), if the wire is free and a queue
    /// holds one.
    pub fn dequeue(&mut self, now: u64) -> Option<F> {
        if now < self.wire_free_at {
            return None;
        }
        let q = self.pick()?;
        let frame = self.queues[q].pop_front()?;
        self.depth[q] -= frame.bytes();
        // A late wake-up (up to CATCH_UP) does not cost the wire that time.
        let start = self.wire_free_at.max(now.saturating_sub(CATCH_UP_NS));
        self.wire_free_at = start + wire_ns(frame.bytes(), self.rate);
        Some(frame)
    }

    /// When a queued frame may leave next (None: nothing is queued).
    pub fn next_departure(&self) -> Option<u64> {
        self.depth
            .iter()
            .any(|d| *d > 0)
            .then_some(self.wire_free_at)
    }

    fn pick(&mut self) -> Option<usize> {
        let strict = |q: usize| self.settings[q].strict;
        if let Some(q) = (0..QUEUES)
            .rev()
            .find(|&q| strict(q) && !self.queues[q].is_empty())
        {
            return Some(q);
        }
        let q = (0..QUEUES)
            .map(|i| (self.turn + i) % QUEUES)
            .find(|&q| !strict(q) && !self.queues[q].is_empty())?;
        self.turn = (q + 1) % QUEUES;
        Some(q)
    }

    /// Whether RED along `curve` hits a packet arriving at a queue of `depth` bytes.
    fn hit(&mut self, curve: Option<Curve>, depth: u64) -> bool {
        let Some(curve) = curve else {
            return false;
        };
        if depth < curve.min_bytes {
            return false;
        }
        if depth >= curve.max_bytes {
            return true;
        }
        let span = (curve.max_bytes - curve.min_bytes) as f64;
        let p = f64::from(curve.max_percent) / 100.0 * (depth - curve.min_bytes) as f64 / span;
        self.rng.random::<f64>() < p
    }

    fn admit(&mut self, q: usize, frame: F, marked: bool) -> Verdict {
        let len = frame.bytes();
        self.depth[q] += len;
        let counters = &mut self.counters[q];
        counters.packets += 1;
        counters.bytes += len;
        counters.marked += u64::from(marked);
        counters.peak_bytes = counters.peak_bytes.max(self.depth[q]);
        self.queues[q].push_back(frame);
        if marked {
            Verdict::Marked(q as u8)
        } else {
            Verdict::Queued(q as u8)
        }
    }

    fn drop(&mut self, q: usize, reason: DropReason) -> Verdict {
        let counters = &mut self.counters[q];
        match reason {
            DropReason::NotEct => counters.dropped_not_ect += 1,
            DropReason::Red => counters.dropped_red += 1,
            DropReason::Full => counters.dropped_full += 1,
        }
        Verdict::Dropped(q as u8, reason)
    }
}

fn settings_of(qos: &PortQos) -> [QueueQos; QUEUES] {
    std::array::from_fn(|q| qos.queues.get(&(q as u8)).copied().unwrap_or_default())
}

/// Nanoseconds a frame of `bytes` takes on a wire of `rate` bits per second.
pub fn wire_ns(bytes: u64, rate: u64) -> u64 {
    ((bytes + WIRE_OVERHEAD) * 8).saturating_mul(1_000_000_000) / rate.max(1)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    use super::*;

    /// An Ethernet frame of `len` bytes carrying IPv4 with this DSCP and ECN.
    fn frame(dscp: u8, ecn: u8, len: usize) -> Vec<u8> {
        let mut frame = vec![0u8; len];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        let payload = len - ETHERNET_HEADER - 20;
        Ipv4Packet::emit(
            &mut frame[ETHERNET_HEADER..],
            (dscp << 2) | ecn,
            Ipv4Addr::new(10, 1, 0, 11),
            Ipv4Addr::new(10, 1, 1, 11),
            payload,
        );
        frame
    }

    fn step(bytes: u64) -> Option<Curve> {
        Some(Curve {
            min_bytes: bytes,
            max_bytes: bytes,
            max_percent: 100,
        })
    }

    /// DSCP 46 → queue 7, 10 → queue 1, the rest queue 0; queue 1 marks ECT and drops
    /// Not-ECT from 3000 bytes and drops all from 6000 bytes; 1, 7 strict.
    fn port(rate: u64) -> Port<Vec<u8>> {
        let mut map = [0u8; 64];
        map[46] = 7;
        map[10] = 1;
        let mut queues = BTreeMap::new();
        queues.insert(
            1,
            QueueQos {
                strict: true,
                mark: step(3000),
                drop_not_ect: step(3000),
                drop_all: step(6000),
                limit_bytes: None,
            },
        );
        queues.insert(
            7,
            QueueQos {
                strict: true,
                ..QueueQos::default()
            },
        );
        Port::new(
            PortQos {
                queue_of_dscp: map.to_vec(),
                queues,
            },
            rate,
            1 << 20,
            7,
        )
    }

    #[test]
    fn a_red_ecn_step_marks_ect_drops_not_ect_then_drops_everything() {
        let mut port = port(1_000_000_000);
        // 3 × 1000 bytes: below the step, queued unmarked.
        for _ in 0..3 {
            assert_eq!(port.enqueue(frame(10, 0b10, 1000), 0), Verdict::Queued(1));
        }
        assert_eq!(port.enqueue(frame(10, 0b10, 1000), 0), Verdict::Marked(1));
        assert_eq!(
            port.enqueue(frame(10, NOT_ECT, 1000), 0),
            Verdict::Dropped(1, DropReason::NotEct)
        );
        for _ in 0..2 {
            assert_eq!(port.enqueue(frame(10, 0b01, 1000), 0), Verdict::Marked(1));
        }
        assert_eq!(
            port.enqueue(frame(10, 0b10, 1000), 0),
            Verdict::Dropped(1, DropReason::Red)
        );
        let c = &port.counters()[1];
        assert_eq!(
            (c.packets, c.marked, c.dropped_not_ect, c.dropped_red),
            (6, 3, 1, 1)
        );
        // Seven ECN-capable frames offered (ECT(0) and ECT(1)), one of them dropped.
        assert_eq!((c.ect_offered, c.ect_dropped), (7, 1));
        assert_eq!(c.peak_bytes, 6000);
        // The marked frames left with CE and a valid header.
        let mut seen_ce = 0;
        let mut now = 0;
        while let Some(f) = port.dequeue(now) {
            let ip = Ipv4Packet::new_checked(&f[ETHERNET_HEADER..]).unwrap();
            assert!(ip.checksum_ok());
            seen_ce += usize::from(ip.tos() & 0b11 == CE);
            now = port.next_departure().unwrap_or(now);
        }
        assert_eq!(seen_ce, 3);
    }

    #[test]
    fn strict_priority_serves_the_highest_queue_first_at_the_port_rate() {
        let mut port = port(8_000_000); // 1 byte per microsecond
        assert_eq!(port.enqueue(frame(0, 0b10, 976), 0), Verdict::Queued(0));
        assert_eq!(port.enqueue(frame(10, 0b10, 976), 0), Verdict::Queued(1));
        assert_eq!(port.enqueue(frame(46, 0b10, 976), 0), Verdict::Queued(7));
        let order: Vec<u8> = (0..3)
            .map(|_| {
                let now = port.next_departure().unwrap();
                let f = port.dequeue(now).unwrap();
                Ipv4Packet::new_checked(&f[ETHERNET_HEADER..])
                    .unwrap()
                    .tos()
                    >> 2
            })
            .collect();
        assert_eq!(order, [46, 10, 0]);
        // 3 frames of 1000 bytes on the wire at 1 byte/µs: the wire is busy for 3 ms.
        assert_eq!(port.wire_free_at, 3_000_000);
        assert!(port.dequeue(u64::MAX / 2).is_none(), "nothing queued");
    }

    #[test]
    fn an_idle_wire_banks_no_time() {
        let mut port = port(8_000_000); // 1 byte per microsecond
        // Idle until 10 ms; then two frames of 976 bytes (1000 on the wire) arrive.
        let arrival = 10_000_000;
        port.enqueue(frame(0, 0b10, 976), arrival);
        port.enqueue(frame(0, 0b10, 976), arrival);
        assert_eq!(port.next_departure(), Some(arrival));
        assert!(port.dequeue(arrival).is_some());
        // The second waits for the first to be on the wire, not for time idled away.
        assert_eq!(port.next_departure(), Some(arrival + 1_000_000));
        assert!(port.dequeue(arrival + 999_999).is_none());
        assert!(port.dequeue(arrival + 1_000_000).is_some());
    }

    #[test]
    fn a_queue_past_its_limit_or_the_buffer_drops() {
        let mut port = port(1_000_000_000);
        port.buffer_bytes = 2500;
        assert_eq!(port.enqueue(frame(0, 0b10, 1000), 0), Verdict::Queued(0));
        assert_eq!(port.enqueue(frame(0, 0b10, 1000), 0), Verdict::Queued(0));
        assert_eq!(
            port.enqueue(frame(0, 0b10, 1000), 0),
            Verdict::Dropped(0, DropReason::Full)
        );
        assert_eq!(port.counters()[0].dropped_full, 1);
    }
}
