//! One host's network plan: what `mltctl plan --host NAME --network` writes and
//! `endhost configure --plan` reads (`endhost::agent::load_plan`).

use std::collections::HashSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::addr::{MacAddr, PciAddr};

/// The kernel state the agent owns on one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostNetworkPlan {
    pub host: String,
    /// The data NIC, by its kernel name.
    pub nic: String,
    /// The NIC's MAC as the inventory has it: peers' neighbour entries point at it, so
    /// a NIC with another MAC is refused.
    pub mac: MacAddr,
    pub mtu: u16,
    /// The NIC's own address (rack subnet) and its path addresses (/32, one per spine).
    pub addresses: Vec<Ipv4Net>,
    /// Static neighbours: the rack gateway, then the host's MAC map (every peer IP and
    /// peer path address with its next hop's MAC).
    pub neighbours: Vec<Neighbour>,
    /// Remote racks' subnets and the path pool, through the rack gateway.
    pub routes: Vec<Route>,
    /// Host preparation for the DPDK datapath; absent for kernel UDP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpdk: Option<DpdkPrep>,
    /// For DPDK's af_xdp device: the queues (combined channels) the NIC must have, one
    /// AF_XDP socket each; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub af_xdp_queues: Option<u16>,
    /// For DPDK over the kernel interface (af_packet, af_xdp): the NIC must not merge
    /// what it receives (GRO), since the device reads frames as the NIC took them and a
    /// merged one is larger than its buffers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_gro: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neighbour {
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub prefix: Ipv4Net,
    pub via: Ipv4Addr,
}

/// What the DPDK datapath needs from the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpdkPrep {
    pub pci: PciAddr,
    /// 2 MiB hugepages to reserve (at least; more are left alone).
    pub hugepages_2m: u32,
    /// Kernel driver the NIC is bound to for DPDK.
    pub driver: String,
}

impl HostNetworkPlan {
    /// Problems serde cannot see: duplicates, impossible values.
    pub fn check(&self) -> Result<(), String> {
        if let Err(rule) = mlt_common::names::check_ifname(&self.nic) {
            return Err(format!("nic {:?} {rule}", self.nic));
        }
        if self.mtu < 68 {
            return Err(format!("mtu {} is below IPv4's minimum of 68", self.mtu));
        }
        unique(self.addresses.iter().map(|a| a.addr()), "address")?;
        unique(self.neighbours.iter().map(|n| n.ip), "neighbour")?;
        unique(self.routes.iter().map(|r| r.prefix), "route to")?;
        if let Some(route) = self.routes.iter().find(|r| r.prefix != r.prefix.trunc()) {
            return Err(format!(
                "route prefix {} has host bits set (did you mean {}?)",
                route.prefix,
                route.prefix.trunc()
            ));
        }
        if let Some(dpdk) = &self.dpdk
            && dpdk.driver.is_empty()
        {
            return Err("dpdk.driver is empty".into());
        }
        Ok(())
    }
}

fn unique<T: std::fmt::Display>(items: impl Iterator<Item = T>, what: &str) -> Result<(), String> {
    let mut seen = HashSet::new();
    for item in items {
        if !seen.insert(item.to_string()) {
            return Err(format!("{what} {item} is listed twice"));
        }
    }
    Ok(())
}
