//! Each host's part of the plan: addresses, neighbours, routes and transport settings
//! (docs/src/design/plan.md#hosts-addresses-mac-maps-transport-configuration).
//!
//! A host reaches peers in its rack directly and everything else through its rack's
//! gateway, so its MAC map is: peer IP → peer MAC inside the rack, any other peer IP or
//! path address → gateway MAC. The map grows with hosts × spines per host, so it is not
//! stored in the plan but expanded for one host at a time ([`mac_map`]); the kernel's
//! static neighbours ([`network_plan`]) and the transport's IP=MAC file ([`ip_mac`]) are
//! both that one map.

use std::net::Ipv4Addr;

use endhost_core::config::{
    DatapathKind, DpdkDriver, DpdkOptions, JobConfig, LocalConfig, PeerConfig, TransportConfig,
};
use endhost_core::host::HostNetworkPlan;
use endhost_core::host::plan::{self, DpdkPrep};
use endhost_core::vdev::{Vdev, VdevDriver};
use endhost_core::{MacAddr, PciAddr};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::Plan;
use super::routing::Topology;
use crate::inventory::{Inventory, Mgmt};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostPlan {
    pub name: String,
    /// Index into [`Plan::racks`].
    pub rack: usize,
    /// Ranks follow rack order, then inventory order, so ring neighbours share racks.
    pub rank: u32,
    pub mgmt: Mgmt,
    pub nic: NicPlan,
    pub gateway: Neighbour,
    /// One address per spine the rack reaches, to be added to the data NIC as /32.
    pub path_addresses: Vec<PathAddress>,
    pub routes: Vec<HostRoute>,
    pub cores: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicPlan {
    pub name: String,
    pub pci: PciAddr,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    pub mtu: u16,
    /// Speed of the leaf port the NIC is cabled to.
    pub line_rate_mbps: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Neighbour {
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathAddress {
    /// Index into [`Plan::spines`] of the spine this address steers through.
    pub spine: usize,
    pub address: Ipv4Addr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRoute {
    pub prefix: Ipv4Net,
    pub via: Ipv4Addr,
}

/// Host plans in rank order.
pub fn plan_hosts(inv: &Inventory, topo: &Topology) -> Vec<HostPlan> {
    let mut line_rate = vec![0; inv.hosts.len()];
    for d in &inv.downlinks {
        line_rate[d.host] = inv.switches[d.leaf].ports[d.leaf_port].speed_mbps;
    }
    let mut plans = Vec::with_capacity(inv.hosts.len());
    for (r, rack) in inv.racks.iter().enumerate() {
        let gateway = Neighbour {
            ip: rack.gateway_ip,
            mac: rack.gateway_mac,
        };
        // Remote racks' subnets (aggregated with the host's own, which is connected),
        // and the path pool when any remote rack is reachable.
        let remote: Vec<Ipv4Net> = topo.remote_subnets[r].values().flatten().copied().collect();
        let mut routes = Vec::new();
        if !remote.is_empty() {
            let prefixes = std::iter::once(inv.fabric.path_pool).chain(Ipv4Net::aggregate(&remote));
            routes.extend(prefixes.map(|prefix| HostRoute {
                prefix,
                via: rack.gateway_ip,
            }));
        }
        for &h in &topo.rack_hosts[r] {
            let host = &inv.hosts[h];
            plans.push(HostPlan {
                name: host.name.clone(),
                rack: r,
                rank: plans.len() as u32,
                mgmt: host.mgmt.clone(),
                nic: NicPlan {
                    name: host.nic.name.clone(),
                    pci: host.nic.pci,
                    mac: host.nic.mac,
                    ip: host.nic.ip,
                    prefix_len: rack.subnet.prefix_len(),
                    mtu: inv.fabric.mtu,
                    line_rate_mbps: line_rate[h],
                },
                gateway,
                path_addresses: topo
                    .path_addresses(h, r)
                    .into_iter()
                    .map(|(spine, address)| PathAddress { spine, address })
                    .collect(),
                routes: routes.clone(),
                cores: host.cores.clone(),
            });
        }
    }
    plans
}

/// The transport configuration of the host with rank `rank`, with every peer's
/// next-hop MAC and the path addresses it may spray over.
pub fn transport_config(plan: &Plan, rank: usize) -> TransportConfig {
    let me = &plan.hosts[rank];
    let my_spines = &plan.racks[me.rack].spines;
    let peers = plan
        .hosts
        .iter()
        .filter(|peer| peer.rank != me.rank)
        .map(|peer| {
            let (next_hop_mac, paths) = if peer.rack == me.rack {
                (peer.nic.mac, vec![peer.nic.ip])
            } else {
                let paths = peer
                    .path_addresses
                    .iter()
                    .filter(|p| my_spines.contains(&p.spine))
                    .map(|p| p.address)
                    .collect();
                (me.gateway.mac, paths)
            };
            PeerConfig {
                rank: peer.rank,
                name: peer.name.clone(),
                ip: peer.nic.ip,
                next_hop_mac,
                paths,
            }
        })
        .collect();
    TransportConfig {
        job: JobConfig::clone(&plan.job),
        rank: me.rank,
        local: LocalConfig {
            name: me.name.clone(),
            nic: me.nic.name.clone(),
            pci: me.nic.pci,
            mac: me.nic.mac,
            ip: me.nic.ip,
            prefix_len: me.nic.prefix_len,
            line_rate_mbps: me.nic.line_rate_mbps,
            path_addresses: me.path_addresses.iter().map(|p| p.address).collect(),
            cores: me.cores.clone(),
        },
        peers,
        dpdk: dpdk_options(plan, me),
        key_file: None,
    }
}

/// How the host starts DPDK, where the plan decides it: over the kernel interface
/// (`af_packet`, `af_xdp`), a virtual device in ordinary memory whose queues the
/// datapath thread polls itself, sleeping when idle (the kernel already does the
/// device's work; an lcore per queue, or busy polling, would only take the host's
/// cores).
fn dpdk_options(plan: &Plan, me: &HostPlan) -> DpdkOptions {
    let queues = plan.job.datapath.rx_queues;
    // The NIC name keeps to the interface grammar (validation), so building the device
    // from it cannot fail.
    let over = |driver, arguments: &[(&str, String)]| {
        let vdev = arguments
            .iter()
            .try_fold(Vdev::new(driver, 0), |vdev, (key, value)| {
                vdev.with(key, value)
            })
            .expect("a validated NIC name and numbers keep to the vdev grammar");
        over_the_kernel(vdev)
    };
    match plan.job.datapath.driver {
        // One AF_XDP socket per RX queue, on the NIC's first queues; the datapath adds
        // its XDP program (`xdp_prog=`).
        DpdkDriver::AfXdp => over(
            VdevDriver::AfXdp,
            &[
                ("iface", me.nic.name.clone()),
                ("start_queue", "0".into()),
                ("queue_count", queues.to_string()),
            ],
        ),
        DpdkDriver::AfPacket => over(
            VdevDriver::AfPacket,
            &[
                ("iface", me.nic.name.clone()),
                ("qpairs", queues.to_string()),
            ],
        ),
        // The kernel keeps the NIC (flow bifurcation): the PMD claims the data port only.
        DpdkDriver::Mlx5 => DpdkOptions {
            isolate: true,
            ..DpdkOptions::default()
        },
        DpdkDriver::VfioPci => DpdkOptions::default(),
    }
}

/// A virtual device over the NIC's kernel interface: ordinary memory, the datapath
/// thread polling the queues, sleeping when idle.
fn over_the_kernel(vdev: Vdev) -> DpdkOptions {
    DpdkOptions {
        vdev: Some(vdev),
        no_huge: true,
        rx_idle_sleep_us: 50,
        inline_rx: true,
        ..DpdkOptions::default()
    }
}

/// The kernel state host `rank` must have (what `endhost configure` applies), with the
/// DPDK host preparation when `datapath` is DPDK.
pub fn network_plan(plan: &Plan, rank: usize, datapath: DatapathKind) -> HostNetworkPlan {
    let me = &plan.hosts[rank];
    let own = Ipv4Net::new(me.nic.ip, me.nic.prefix_len).expect("prefix length checked");
    let paths = me.path_addresses.iter().map(|p| Ipv4Net::from(p.address));
    HostNetworkPlan {
        host: me.name.clone(),
        nic: me.nic.name.clone(),
        mac: me.nic.mac,
        mtu: me.nic.mtu,
        addresses: std::iter::once(own).chain(paths).collect(),
        neighbours: std::iter::once(me.gateway)
            .chain(mac_map(plan, rank))
            .map(|n| plan::Neighbour {
                ip: n.ip,
                mac: n.mac,
            })
            .collect(),
        routes: me
            .routes
            .iter()
            .map(|r| plan::Route {
                prefix: r.prefix,
                via: r.via,
            })
            .collect(),
        // A virtual device over the kernel interface needs no preparation.
        dpdk: match (datapath, plan.job.datapath.driver.kernel_driver()) {
            (DatapathKind::Dpdk, Some(driver)) => Some(DpdkPrep {
                pci: me.nic.pci,
                hugepages_2m: plan.job.datapath.hugepages_2m(),
                driver: driver.into(),
            }),
            _ => None,
        },
        af_xdp_queues: (datapath == DatapathKind::Dpdk
            && plan.job.datapath.driver == DpdkDriver::AfXdp)
            .then_some(plan.job.datapath.rx_queues),
        no_gro: datapath == DatapathKind::Dpdk
            && matches!(
                plan.job.datapath.driver,
                DpdkDriver::AfXdp | DpdkDriver::AfPacket
            ),
    }
}

/// Host `rank`'s MAC map: every peer IP, and every path address of a peer on a spine
/// this host's rack reaches, with the MAC of the next hop — the peer itself for the IP
/// of a peer in the rack, the rack's gateway for everything else (a path address is
/// routed through the leaf even when its host shares the rack).
pub fn mac_map(plan: &Plan, rank: usize) -> Vec<Neighbour> {
    let me = &plan.hosts[rank];
    let my_spines = &plan.racks[me.rack].spines;
    let mut map = Vec::new();
    for peer in plan.hosts.iter().filter(|peer| peer.rank != me.rank) {
        let mac = if peer.rack == me.rack {
            peer.nic.mac
        } else {
            me.gateway.mac
        };
        map.push(Neighbour {
            ip: peer.nic.ip,
            mac,
        });
        map.extend(
            peer.path_addresses
                .iter()
                .filter(|p| my_spines.contains(&p.spine))
                .map(|p| Neighbour {
                    ip: p.address,
                    mac: me.gateway.mac,
                }),
        );
    }
    map
}

/// The transport's `IP=MAC` file (OptiReduce's format): host `rank`'s MAC map, a line
/// per address.
pub fn ip_mac(plan: &Plan, rank: usize) -> String {
    mac_map(plan, rank)
        .iter()
        .map(|n| format!("{}={}\n", n.ip, n.mac))
        .collect()
}
