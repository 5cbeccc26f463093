//! The transport's traffic offered to one lab switch port ([`Port`]) at exact times,
//! with no I/O: what the switch's queueing itself loses, apart from the lab's
//! scheduling on a shared machine. It is generated here independently of the planner's
//! own model, so that `plan --explain` and the tests can check the planner's
//! predictions against it.
//!
//! Bursts start at Poisson times; in a burst each of `senders` sends `batch` frames back
//! to back at the port's line rate (a pacing batch), all of one class chosen by its
//! share; each frame is Not-ECT with probability θ. A batch of 1 from 1 sender is
//! single frames at Poisson times.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::Ipv4Addr;

use endhost_core::frame::Ipv4Packet;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;

use crate::qos::PortQos;
use crate::queueing::{Port, Verdict};

/// What is offered to the port.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    /// (DSCP, share of the traffic) per gradient class.
    pub classes: Vec<(u8, f64)>,
    /// Frames offered as a fraction of the port's line rate.
    pub load: f64,
    /// Fraction of frames that are Not-ECT.
    pub theta: f64,
    /// Ethernet frame bytes (without preamble, FCS and gap).
    pub frame_bytes: usize,
    pub rate_bps: u64,
    /// Frames each sender sends back to back in a burst.
    pub batch: u32,
    /// Senders whose batches start together.
    pub senders: u32,
}

pub use crate::queueing::WIRE_OVERHEAD;

/// Per (DSCP, ECN-capable): frames offered and frames the port dropped.
pub type Losses = BTreeMap<(u8, bool), (u64, u64)>;

/// `arrivals` frames (about) offered to a port that queues as `qos` says and holds at
/// most `buffer_bytes`; the same `seed` gives the same losses.
pub fn simulate(
    qos: PortQos,
    buffer_bytes: u64,
    offered: &Offered,
    arrivals: usize,
    seed: u64,
) -> Losses {
    let mut total = Losses::new();
    for window in simulate_in_windows(qos, buffer_bytes, offered, arrivals, 1, seed) {
        for (key, (offered, lost)) in window {
            let entry = total.entry(key).or_default();
            entry.0 += offered;
            entry.1 += lost;
        }
    }
    total
}

/// As [`simulate`], the losses of each of `windows` consecutive stretches of equal
/// arrivals: how much they vary says how well the whole is known.
pub fn simulate_in_windows(
    qos: PortQos,
    buffer_bytes: u64,
    offered: &Offered,
    arrivals: usize,
    windows: usize,
    seed: u64,
) -> Vec<Losses> {
    let mut port = Port::new(qos, offered.rate_bps, buffer_bytes, seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let frame_ns =
        ((offered.frame_bytes as u64 + WIRE_OVERHEAD) * 8) as f64 * 1e9 / offered.rate_bps as f64;
    let per_burst = f64::from(offered.batch.max(1) * offered.senders.max(1));
    let bursts_per_ns = offered.load / frame_ns / per_burst;
    let total: f64 = offered.classes.iter().map(|(_, share)| share).sum();
    let windows = windows.max(1);
    let per_window = arrivals.div_ceil(windows);
    let mut losses = vec![Losses::new(); windows];
    // Frames yet to arrive: (time in ns, order of generation, DSCP).
    let mut pending: BinaryHeap<Reverse<(u64, u64, u8)>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut next_burst = 0.0f64;
    let mut offered_frames = 0usize;
    while offered_frames < arrivals {
        next_burst += -(1.0 - rng.random::<f64>()).ln() / bursts_per_ns;
        let start = next_burst as u64;
        // Frames due before this burst arrive first.
        while let Some(Reverse((at, _, dscp))) = pending.peek().copied() {
            if at > start {
                break;
            }
            pending.pop();
            let window = (offered_frames / per_window).min(windows - 1);
            offer(&mut port, &mut rng, offered, &mut losses[window], dscp, at);
            offered_frames += 1;
        }
        let dscp = pick(&offered.classes, rng.random::<f64>() * total);
        for k in 0..offered.batch.max(1) {
            let at = start + (f64::from(k) * frame_ns) as u64;
            for _ in 0..offered.senders.max(1) {
                pending.push(Reverse((at, order, dscp)));
                order += 1;
            }
        }
    }
    losses
}

fn pick(classes: &[(u8, f64)], mut at: f64) -> u8 {
    classes
        .iter()
        .find(|(_, share)| {
            at -= share;
            at < 0.0
        })
        .map_or(classes[classes.len() - 1].0, |(dscp, _)| *dscp)
}

fn offer(
    port: &mut Port,
    rng: &mut ChaCha8Rng,
    offered: &Offered,
    losses: &mut Losses,
    dscp: u8,
    now: u64,
) {
    while let Some(at) = port.next_departure().filter(|at| *at <= now) {
        port.dequeue(at);
    }
    let ect = rng.random::<f64>() >= offered.theta;
    let verdict = port.enqueue(frame(dscp, ect, offered.frame_bytes), now);
    let entry = losses.entry((dscp, ect)).or_default();
    entry.0 += 1;
    entry.1 += u64::from(matches!(verdict, Verdict::Dropped(..)));
}

fn frame(dscp: u8, ect: bool, len: usize) -> Vec<u8> {
    let mut frame = vec![0u8; len];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    Ipv4Packet::emit(
        &mut frame[14..],
        (dscp << 2) | if ect { 0b10 } else { 0b00 },
        Ipv4Addr::new(10, 1, 0, 11),
        Ipv4Addr::new(10, 1, 1, 11),
        len - 14 - 20,
    );
    frame
}
