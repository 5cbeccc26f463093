//! The model's traffic (MLT Appendix B: Poisson arrivals at a load of the port's line
//! rate, classes by their share of the gradient bytes, a fraction θ unimportant) offered
//! to the very `Port` the lab's forwarder runs, at exact times and with no I/O: what the
//! switch's queueing itself loses, apart from the lab's scheduling on a shared machine.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use endhost_core::frame::Ipv4Packet;
use mltctl_lab::qos::PortQos;
use mltctl_lab::queueing::{Port, Verdict};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;

/// What the sender offers (benches/lab/poisson.py sends the same).
pub struct Traffic {
    /// (DSCP, share of the traffic) per gradient class.
    pub classes: Vec<(u8, f64)>,
    pub load: f64,
    /// Fraction of packets that are unimportant (Not-ECT).
    pub theta: f64,
    /// Ethernet frame bytes (without preamble, FCS and gap).
    pub frame_bytes: usize,
    pub rate_bps: u64,
}

/// Bytes a frame takes on the wire beyond itself: preamble, start, FCS, gap.
pub const WIRE_OVERHEAD: usize = 24;

/// Per (DSCP, ECN-capable): packets offered and packets the port dropped.
pub type Losses = BTreeMap<(u8, bool), (u64, u64)>;

/// `arrivals` packets offered to a port that queues as `qos` says and holds at most
/// `buffer_bytes`.
pub fn simulate(
    qos: PortQos,
    buffer_bytes: u64,
    traffic: &Traffic,
    arrivals: usize,
    seed: u64,
) -> Losses {
    let mut port = Port::new(qos, traffic.rate_bps, buffer_bytes, seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let per_second =
        traffic.load * traffic.rate_bps as f64 / ((traffic.frame_bytes + WIRE_OVERHEAD) * 8) as f64;
    let total: f64 = traffic.classes.iter().map(|(_, share)| share).sum();
    let mut losses = Losses::new();
    let mut seconds = 0.0;
    for _ in 0..arrivals {
        seconds += -(1.0 - rng.random::<f64>()).ln() / per_second;
        let now = (seconds * 1e9) as u64;
        while let Some(at) = port.next_departure().filter(|at| *at <= now) {
            port.dequeue(at);
        }
        let mut pick = rng.random::<f64>() * total;
        let dscp = traffic
            .classes
            .iter()
            .find(|(_, share)| {
                pick -= share;
                pick < 0.0
            })
            .map_or(traffic.classes[traffic.classes.len() - 1].0, |(d, _)| *d);
        let ect = rng.random::<f64>() >= traffic.theta;
        let verdict = port.enqueue(frame(dscp, ect, traffic.frame_bytes), now);
        let entry = losses.entry((dscp, ect)).or_default();
        entry.0 += 1;
        entry.1 += u64::from(matches!(verdict, Verdict::Dropped(..)));
    }
    losses
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
