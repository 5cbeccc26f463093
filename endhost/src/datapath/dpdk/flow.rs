//! Flow isolation for a NIC the kernel and DPDK share (mlx5's flow bifurcation, as
//! OptiReduce runs ConnectX NICs): in isolated mode (`rte_flow_isolate`) the PMD
//! receives only what an `rte_flow` rule claims, and everything else — ARP, the TCP
//! control channel, SSH — stays with the kernel's interface. The rules claim the job's
//! data traffic alone: UDP to the data port at one of this host's addresses, each
//! sender lane (the UDP source port, data port + lane) on its own RX queue, and any
//! other source port on queue 0 at a lower priority.
//!
//! Built and checked here; installed through the shim (`shim_flow_*`). Untested on
//! hardware: no ConnectX NIC was at hand.

use std::net::Ipv4Addr;

/// One rule: UDP to `dst`:`dst_port` (from `src_port`, or any source port) → `queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpToQueue {
    pub dst: Ipv4Addr,
    pub dst_port: u16,
    pub src_port: Option<u16>,
    pub queue: u16,
    /// rte_flow priority: 0 is matched first.
    pub priority: u32,
}

/// The rules that give the data port's traffic to `queues` RX queues: per address,
/// one rule per lane and one catch-all.
pub fn data_rules(addresses: &[Ipv4Addr], data_port: u16, queues: u16) -> Vec<UdpToQueue> {
    let mut rules = Vec::new();
    for &dst in addresses {
        for lane in 0..queues.max(1) {
            rules.push(UdpToQueue {
                dst,
                dst_port: data_port,
                src_port: Some(data_port.wrapping_add(lane)),
                queue: lane,
                priority: 0,
            });
        }
        rules.push(UdpToQueue {
            dst,
            dst_port: data_port,
            src_port: None,
            queue: 0,
            priority: 1,
        });
    }
    rules
}

/// The queue a datagram to the data port lands on under `rules`, as the NIC matches
/// them (lowest priority number first); `None`: it stays with the kernel.
pub fn queue_of(rules: &[UdpToQueue], dst: Ipv4Addr, src_port: u16, dst_port: u16) -> Option<u16> {
    rules
        .iter()
        .filter(|r| r.dst == dst && r.dst_port == dst_port)
        .filter(|r| r.src_port.is_none_or(|p| p == src_port))
        .min_by_key(|r| r.priority)
        .map(|r| r.queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses() -> Vec<Ipv4Addr> {
        vec![
            Ipv4Addr::new(10, 1, 0, 11),
            Ipv4Addr::new(10, 128, 0, 1),
            Ipv4Addr::new(10, 128, 0, 9),
        ]
    }

    #[test]
    fn every_lane_of_every_address_has_its_queue_and_a_catch_all() {
        let rules = data_rules(&addresses(), 11000, 4);
        assert_eq!(rules.len(), 3 * (4 + 1));
        for dst in addresses() {
            for lane in 0..4 {
                assert_eq!(queue_of(&rules, dst, 11000 + lane, 11000), Some(lane));
            }
            // A sender with more lanes than this host has queues still reaches it.
            assert_eq!(queue_of(&rules, dst, 11007, 11000), Some(0));
        }
    }

    #[test]
    fn nothing_else_is_claimed_so_the_kernel_keeps_it() {
        let rules = data_rules(&addresses(), 11000, 4);
        let me = addresses()[0];
        // The TCP control channel's port, SSH, another host's address.
        assert_eq!(queue_of(&rules, me, 40000, 11100), None);
        assert_eq!(queue_of(&rules, me, 40000, 22), None);
        assert_eq!(
            queue_of(&rules, Ipv4Addr::new(10, 1, 0, 12), 11000, 11000),
            None
        );
    }

    #[test]
    fn one_queue_still_has_a_rule() {
        let rules = data_rules(&addresses()[..1], 11000, 0);
        assert_eq!(rules.len(), 2);
        assert_eq!(queue_of(&rules, addresses()[0], 11000, 11000), Some(0));
    }
}
