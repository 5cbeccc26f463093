//! Rate control (MLT §4.2.3, TIMELY-like) and the pacer that enforces the rate.
//!
//! A flow starts at line rate. Every acknowledgement answers a packet whose departure
//! from the host's NIC the sender kept; its RTT and the RTT gradient (the change from
//! the previous sample) update the rate:
//! - RTT above `t_high`: multiplicative decrease, `rate · (1 − β·(1 − t_high/rtt))`;
//! - otherwise, RTT below `t_low` or a negative gradient: additive increase, `rate + α`.
//!
//! MLT lists the two rules without an order; the decrease is checked first, as in
//! TIMELY, so a queue above `t_high` always shrinks the rate even while it drains. The
//! rate stays between a floor and the line rate.

use crate::config::RateControl;

/// The smallest rate a flow is slowed to: a floor keeps probing for recovery.
const MIN_RATE_BPS: f64 = 10e6;

/// The rate of one destination.
#[derive(Debug, Clone)]
pub struct Timely {
    config: RateControl,
    line_bps: f64,
    rate_bps: f64,
    previous_rtt_us: Option<f64>,
    /// Smoothed RTT and its variation (RFC 6298 style), for retransmission timers.
    srtt_us: Option<f64>,
    rttvar_us: f64,
}

impl Timely {
    pub fn new(config: RateControl, line_bps: f64) -> Timely {
        Timely {
            config,
            line_bps,
            rate_bps: line_bps,
            previous_rtt_us: None,
            srtt_us: None,
            rttvar_us: 0.0,
        }
    }

    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    pub fn srtt_us(&self) -> Option<f64> {
        self.srtt_us
    }

    /// A retransmission timeout from the RTT samples: srtt + 4·rttvar, at least
    /// `floor_us` (and `floor_us` before any sample).
    pub fn rto_us(&self, floor_us: f64) -> f64 {
        match self.srtt_us {
            Some(srtt) => (srtt + 4.0 * self.rttvar_us).max(floor_us),
            None => floor_us,
        }
    }

    /// One RTT sample, in microseconds.
    pub fn on_rtt(&mut self, rtt_us: f64) {
        let gradient = self.previous_rtt_us.map(|prev| rtt_us - prev);
        self.previous_rtt_us = Some(rtt_us);
        match self.srtt_us {
            None => {
                self.srtt_us = Some(rtt_us);
                self.rttvar_us = rtt_us / 2.0;
            }
            Some(srtt) => {
                self.rttvar_us = 0.75 * self.rttvar_us + 0.25 * (srtt - rtt_us).abs();
                self.srtt_us = Some(0.875 * srtt + 0.125 * rtt_us);
            }
        }
        let c = &self.config;
        if rtt_us > c.t_high_us {
            self.rate_bps *= 1.0 - c.beta * (1.0 - c.t_high_us / rtt_us);
        } else if rtt_us < c.t_low_us || gradient.is_some_and(|g| g < 0.0) {
            self.rate_bps += c.alpha_mbps * 1e6;
        }
        self.rate_bps = self
            .rate_bps
            .clamp(MIN_RATE_BPS.min(self.line_bps), self.line_bps);
    }
}

/// A token bucket of bytes refilled at the flow's rate.
#[derive(Debug, Clone)]
pub struct Pacer {
    tokens: f64,
    updated_ns: u64,
    /// Bytes of rate the full bucket could not hold since the last look: sending time
    /// lost if data was waiting (a late wake-up).
    spilled: f64,
}

/// How late the driver may wake for a batch without losing sending time: the bucket
/// holds a batch plus what the rate brings in this long, and a late wake-up sends what
/// it missed. What it sends beyond the line rate waits in the host's NIC
/// ([`NicQueue`]), as Linux's TCP small queues let a flow keep about 1 ms at its pacing
/// rate below the socket (at most 1 MiB). With a
/// bucket of 250 µs in all (at 1 Gbit/s 4.6 frames more than a batch), a 4-host ring
/// on 2 cores lost 12–27% of its busy time on shaped namespaces and 40–60% in the lab
/// to late wake-ups; 500 µs beat both that and 1 ms there (at 1 ms the standing
/// queue it leaves in a NIC held the ring's rate down at 64 MiB).
const LATE_WAKE_NS: f64 = 500_000.0;

impl Pacer {
    pub fn new(now_ns: u64) -> Pacer {
        Pacer {
            tokens: 0.0,
            updated_ns: now_ns,
            spilled: 0.0,
        }
    }

    /// Bytes the bucket holds: one batch of `packet`-byte frames (what the driver waits
    /// for, [`super::PACING_BATCH`]) plus [`LATE_WAKE_NS`] at the rate.
    fn capacity(rate_bps: f64, packet: usize) -> f64 {
        (super::PACING_BATCH * packet) as f64 + rate_bps / 8.0 * LATE_WAKE_NS / 1e9
    }

    /// The most a pacer at `rate_bps` hands over beyond its rate at once, in time at
    /// that rate: a full bucket.
    pub fn bucket_ns(rate_bps: f64, packet: usize) -> u64 {
        (Self::capacity(rate_bps, packet) * 8e9 / rate_bps) as u64
    }

    fn refill(&mut self, now_ns: u64, rate_bps: f64, packet: usize) {
        let elapsed = now_ns.saturating_sub(self.updated_ns) as f64;
        let filled = self.tokens + elapsed * rate_bps / 8e9;
        let capacity = Self::capacity(rate_bps, packet);
        self.spilled += (filled - capacity).max(0.0);
        self.tokens = filled.min(capacity);
        self.updated_ns = now_ns;
    }

    /// After a time with nothing to send: what the bucket gathered meanwhile is kept up
    /// to one batch and nothing counts as spilled, so sending resumes with a batch at
    /// most (the burst the plan models), not with a late wake-up's allowance.
    pub fn rest(&mut self, now_ns: u64, rate_bps: f64, packet: usize) {
        self.refill(now_ns, rate_bps, packet);
        self.tokens = self.tokens.min((super::PACING_BATCH * packet) as f64);
        self.spilled = 0.0;
    }

    /// The bytes spilled since the last call (see `spilled`).
    pub fn take_spilled(&mut self) -> f64 {
        std::mem::take(&mut self.spilled)
    }

    /// Whether the bucket holds `bytes`.
    pub fn has(&mut self, now_ns: u64, rate_bps: f64, bytes: usize) -> bool {
        self.refill(now_ns, rate_bps, bytes);
        self.tokens >= bytes as f64
    }

    /// Takes `bytes` if the bucket holds them.
    pub fn take(&mut self, now_ns: u64, rate_bps: f64, bytes: usize) -> bool {
        self.refill(now_ns, rate_bps, bytes);
        if self.tokens >= bytes as f64 {
            self.tokens -= bytes as f64;
            true
        } else {
            false
        }
    }

    /// When `bytes` will be available.
    pub fn ready_at(&self, rate_bps: f64, bytes: usize) -> u64 {
        let missing = (bytes as f64 - self.tokens).max(0.0);
        self.updated_ns + (missing * 8e9 / rate_bps).ceil() as u64
    }
}

/// The host's own NIC queue as the sender can know it: everything handed over leaves
/// at line rate, one datagram after another. A late wake-up's catch-up waits here (up
/// to a full link bucket); an RTT sample timed from when a datagram starts to leave,
/// not from when it was handed over, is the network's, so rate control does not slow a
/// flow for its own host's queue. The estimate never runs further ahead than the link
/// pacer lets data wait: ACKs and class probes skip the pacer, and a burst of probes
/// must not make every later sample look like no time at all.
#[derive(Debug, Clone)]
pub struct NicQueue {
    clear_ns: u64,
    most_ns: u64,
}

impl NicQueue {
    /// A NIC that holds at most `most_ns` of sending.
    pub fn new(most_ns: u64) -> NicQueue {
        NicQueue {
            clear_ns: 0,
            most_ns,
        }
    }

    /// When a datagram handed over `now` starts to leave.
    pub fn departs_at(&self, now_ns: u64) -> u64 {
        self.clear_ns.clamp(now_ns, now_ns + self.most_ns)
    }

    /// When the NIC has sent everything handed over so far.
    pub fn clear_at(&self) -> u64 {
        self.clear_ns
    }

    /// A datagram of `wire_bytes` handed over `now`.
    pub fn hand_over(&mut self, now_ns: u64, wire_bytes: usize, line_bps: f64) {
        self.clear_ns = self.departs_at(now_ns) + (wire_bytes as f64 * 8e9 / line_bps) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timely() -> Timely {
        Timely::new(RateControl::default(), 100e9)
    }

    #[test]
    fn a_flow_starts_at_line_rate_and_follows_the_two_rules() {
        let mut t = Timely::new(RateControl::default(), 10e9);
        assert_eq!(t.rate_bps(), 10e9);
        // Above T_high (125 µs): rate · (1 − 0.8 · (1 − 125/250)) = 0.6 · rate.
        t.on_rtt(250.0);
        assert!((t.rate_bps() - 6e9).abs() < 1.0);
        // Below T_low (12.5 µs): + 40 Mbit/s.
        t.on_rtt(10.0);
        assert!((t.rate_bps() - 6.04e9).abs() < 1.0);
        // Between the thresholds, falling RTT: + α; rising: unchanged.
        t.on_rtt(100.0);
        let before = t.rate_bps();
        t.on_rtt(50.0);
        assert!((t.rate_bps() - before - 40e6).abs() < 1.0);
        let before = t.rate_bps();
        t.on_rtt(60.0);
        assert_eq!(t.rate_bps(), before);
    }

    #[test]
    fn the_rate_stays_between_the_floor_and_line_rate() {
        let mut t = timely();
        for _ in 0..10 {
            t.on_rtt(1.0);
        }
        assert_eq!(t.rate_bps(), 100e9);
        for _ in 0..1000 {
            t.on_rtt(1e6);
        }
        assert_eq!(t.rate_bps(), MIN_RATE_BPS);
    }

    #[test]
    fn the_pacer_releases_bytes_at_the_rate() {
        let mut p = Pacer::new(0);
        let rate = 8e9; // 1 byte per ns
        assert!(!p.take(0, rate, 1000));
        assert_eq!(p.ready_at(rate, 1000), 1000);
        assert!(p.take(1000, rate, 1000));
        assert!(!p.take(1000, rate, 1));
        // A late wake-up finds a batch (16 × 1000 bytes) plus 500 µs at the rate, no
        // more; what the full bucket could not hold is counted as spilled.
        let mut taken = 0;
        while p.take(10_000_000, rate, 1000) {
            taken += 1000;
        }
        assert_eq!(taken, 16_000 + 500_000);
        assert_eq!(p.take_spilled(), 10_000_000.0 - 1000.0 - 516_000.0);
    }

    #[test]
    fn a_pacer_that_rested_resumes_with_one_batch() {
        let mut p = Pacer::new(0);
        let rate = 8e9;
        p.rest(10_000_000, rate, 1000);
        assert_eq!(p.take_spilled(), 0.0);
        let mut taken = 0;
        while p.take(10_000_000, rate, 1000) {
            taken += 1000;
        }
        assert_eq!(taken, 16_000);
        // Resting keeps less than a batch as it is.
        p.rest(10_005_000, rate, 1000);
        assert!(p.take(10_005_000, rate, 5000));
        assert!(!p.take(10_005_000, rate, 1));
    }

    #[test]
    fn the_nic_sends_what_it_was_handed_one_after_another_at_line_rate() {
        let mut nic = NicQueue::new(10_000);
        let rate = 8e9; // 1 byte per ns
        nic.hand_over(1000, 500, rate);
        assert_eq!(nic.departs_at(1000), 1500);
        nic.hand_over(1000, 500, rate);
        assert_eq!(nic.departs_at(1200), 2000);
        // Once it has sent everything, a datagram leaves when it is handed over.
        assert_eq!(nic.departs_at(5000), 5000);
        // A flood of datagrams that skip the pacer: the estimate stops at its bound.
        for _ in 0..1000 {
            nic.hand_over(5000, 500, rate);
        }
        assert_eq!(nic.departs_at(5000), 15_000);
    }
}
