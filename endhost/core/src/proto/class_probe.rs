//! Class probes: bursts with one class's DSCP to every peer (or one) over every path, half
//! ECN-capable (ECT(0)) and half not, MTU-sized so a switch queues them as it queues
//! data. `mltctl verify` has every host send them and reads which switch queue counted
//! them, what it marked and what it dropped; the receivers count what arrived per DSCP
//! and with CE ([`super::counters::DscpArrivals`]). They leave before data, unpaced:
//! a burst is the point, and `--congest` asks for one large enough to fill the queue.

use super::counters::DscpArrivals;
use super::{Endpoint, IP_UDP_HEADERS, Transmit, tagging};
use crate::wire::{Flags, HEADER_LEN, Header, Kind, Packet, job_tag};

/// The most probes a burst may ask for per peer and path: a typo cannot flood a fabric.
pub const MAX_PER_PATH: u32 = 100_000;

/// A burst still being sent: the `next`-th of `total` probes comes next, to every
/// peer or to `to` alone.
#[derive(Debug, Clone, Copy)]
pub(super) struct Burst {
    dscp: u8,
    per_path: u32,
    to: Option<u16>,
    next: u64,
    total: u64,
}

/// ECN's CE codepoint in the TOS byte's low two bits.
const CE: u8 = 0b11;

impl Endpoint {
    /// Queues `per_path` probes with `dscp` on each path of every peer, or of peer
    /// `to` alone (an incast, when every other host aims at one), capped at
    /// [`MAX_PER_PATH`]; returns how many will go (none to this host or an unknown
    /// rank).
    pub fn probe_class(&mut self, dscp: u8, per_path: u32, to: Option<u16>) -> u64 {
        let per_path = per_path.min(MAX_PER_PATH);
        let routes: u64 = self.routes(to).map(|(_, paths)| paths as u64).sum();
        let total = routes * u64::from(per_path);
        if total > 0 {
            self.class_probes.push_back(Burst {
                dscp: dscp & 0x3f,
                per_path,
                to,
                next: 0,
                total,
            });
        }
        total
    }

    /// Peers (all, or `to` alone) and their path counts, in rank order (this host left
    /// out).
    fn routes(&self, to: Option<u16>) -> impl Iterator<Item = (u16, usize)> + '_ {
        self.peers
            .iter()
            .enumerate()
            .filter(move |(rank, _)| {
                *rank != usize::from(self.config.rank) && to.is_none_or(|t| usize::from(t) == *rank)
            })
            .map(|(rank, peer)| (rank as u16, peer.paths))
    }

    /// The next probe, written into `buf`: peers and paths take turns, and within each
    /// round every second probe is ECN-capable.
    pub(super) fn poll_class_probe(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let burst = self.class_probes.front_mut()?;
        let index = burst.next;
        burst.next += 1;
        let Burst {
            dscp,
            per_path,
            to,
            next,
            total,
        } = *burst;
        if next == total {
            self.class_probes.pop_front();
        }
        let per_round: u64 = self.routes(to).map(|(_, paths)| paths as u64).sum();
        let (round, mut slot) = (index / per_round, index % per_round);
        let (peer, path) = self
            .routes(to)
            .find_map(|(peer, paths)| {
                if slot < paths as u64 {
                    Some((peer, slot as usize))
                } else {
                    slot -= paths as u64;
                    None
                }
            })
            .expect("the slot is within the round");
        let len = usize::from(self.config.mtu)
            .saturating_sub(IP_UDP_HEADERS)
            .clamp(HEADER_LEN, buf.len());
        let header = Header {
            kind: Kind::ClassProbe,
            flags: Flags::default(),
            job_tag: job_tag(self.config.job),
            rank: self.config.rank,
            length: (len - HEADER_LEN) as u16,
            message: per_path,
            sequence: round as u32,
        };
        buf[HEADER_LEN..len].fill(0);
        Packet::new_unchecked(&mut buf[..len]).emit(&header);
        self.counters.class_probes_sent += 1;
        Some(Transmit {
            peer,
            path,
            tos: tagging::tos(dscp, round % 2 == 0),
            len,
        })
    }

    /// What arrived from peers so far, the DSCPs that saw any, in DSCP order.
    pub fn arrivals(&self) -> Vec<DscpArrivals> {
        self.arrivals
            .iter()
            .filter(|a| a.packets + a.probes > 0)
            .copied()
            .collect()
    }

    /// Counts a datagram from a peer by the DSCP and ECN it arrived with.
    pub(super) fn count_arrival(&mut self, tos: u8, kind: Kind) {
        let arrivals = &mut self.arrivals[usize::from(tos >> 2)];
        let ce = u64::from(tos & CE == CE);
        if kind == Kind::ClassProbe {
            arrivals.probes += 1;
            arrivals.probes_ce += ce;
        } else {
            arrivals.packets += 1;
            arrivals.ce += ce;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{RateControl, Tagging};
    use crate::proto::{Endpoint, EndpointConfig};
    use crate::wire::{Kind, Packet};

    fn endpoint(rank: u16) -> Endpoint {
        Endpoint::new(
            EndpointConfig {
                job: 9,
                rank,
                world: 3,
                mtu: 1500,
                rate: RateControl::default(),
                line_bps: 10e9,
                tagging: Tagging {
                    control_dscp: 46,
                    layers: 1,
                    classes: Vec::new(),
                    importance: crate::config::Importance::default(),
                },
                paths: vec![2, 1, 2],
                early_exit: false,
                handle_seed: 1,
            },
            0,
        )
    }

    #[test]
    fn a_burst_reaches_every_peer_on_every_path_half_ect_and_is_counted_apart() {
        let mut sender = endpoint(0);
        // Rank 1 has one path, rank 2 two: three routes.
        assert_eq!(sender.probe_class(33, 4, None), 12);
        let mut buf = vec![0u8; 2048];
        let mut seen = Vec::new();
        let mut receiver = endpoint(2);
        while let Some(tx) = sender.poll_transmit(0, &mut buf) {
            assert_eq!(tx.len, 1472, "MTU-sized: 1500 less the IP and UDP headers");
            assert_eq!(tx.tos >> 2, 33);
            seen.push((tx.peer, tx.path, tx.tos & 3));
            if tx.peer == 2 {
                let packet = Packet::new_checked(&buf[..tx.len]).unwrap();
                assert_eq!(packet.kind(), Some(Kind::ClassProbe));
                // Every second one arrives marked CE by a switch.
                let tos = if tx.tos & 3 == 2 { tx.tos | 3 } else { tx.tos };
                receiver.handle_datagram(0, Some(0), tos, &buf[..tx.len]);
            }
        }
        assert_eq!(seen.len(), 12);
        for route in [(1, 0), (2, 0), (2, 1)] {
            let ect = seen
                .iter()
                .filter(|s| (s.0, s.1) == route && s.2 == 2)
                .count();
            let not_ect = seen
                .iter()
                .filter(|s| (s.0, s.1) == route && s.2 == 0)
                .count();
            assert_eq!((ect, not_ect), (2, 2), "{route:?}");
        }
        let counters = receiver.counters();
        assert_eq!(counters.arrivals.len(), 1);
        let arrivals = counters.arrivals[0];
        assert_eq!(
            (arrivals.dscp, arrivals.probes, arrivals.probes_ce),
            (33, 8, 4)
        );
        assert_eq!((arrivals.packets, arrivals.ce), (0, 0));
        assert_eq!(sender.counters().class_probes_sent, 12);
        // Probes are no protocol traffic: nothing was acknowledged or refused.
        assert_eq!(counters.dropped.total(), 0);
        assert!(receiver.poll_transmit(0, &mut buf).is_none());
    }

    #[test]
    fn a_burst_is_capped_and_an_empty_one_sends_nothing() {
        let mut sender = endpoint(1);
        assert_eq!(sender.probe_class(32, 0, None), 0);
        assert_eq!(
            sender.probe_class(32, u32::MAX, None),
            4 * u64::from(super::MAX_PER_PATH)
        );
    }

    #[test]
    fn an_incast_burst_goes_to_its_one_peer_on_each_of_its_paths() {
        let mut sender = endpoint(0);
        // Rank 2 has two paths; this host and a rank beyond the job get nothing.
        assert_eq!(sender.probe_class(34, 3, Some(2)), 6);
        assert_eq!(sender.probe_class(34, 3, Some(0)), 0);
        assert_eq!(sender.probe_class(34, 3, Some(7)), 0);
        let mut buf = vec![0u8; 2048];
        let mut seen = Vec::new();
        while let Some(tx) = sender.poll_transmit(0, &mut buf) {
            seen.push((tx.peer, tx.path));
        }
        assert_eq!(seen, [(2, 0), (2, 1)].repeat(3));
    }
}
