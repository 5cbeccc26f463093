//! `mltctl generate`: a synthetic leaf-spine inventory of any size, for scale runs.
//!
//! Every leaf links to every spine; vendors rotate (by default through all four, so
//! every renderer is exercised). Addresses: racks 10.R.R.0/24 with the gateway at .1 and hosts from
//! .11, leaf–spine links /31s from 172.16.0.0/12, management addresses from
//! 10.250.0.0/16, path addresses from the smallest 10.128.0.0/N that fits.

use std::net::Ipv4Addr;

use anyhow::{Context, bail};
use ipnet::Ipv4Net;
use serde::Serialize;
use switch_config::Vendor;

use crate::inventory::addressing::PathLayout;

const TEMPLATE: &str = include_str!("../templates/inventory/fabric.yaml.tera");
/// Hosts are numbered from .11 in a /24, so at most 243 fit behind one leaf.
const MAX_HOSTS_PER_LEAF: usize = 243;

#[derive(Debug, Clone, Copy)]
pub struct FabricSize {
    pub spines: usize,
    pub leaves: usize,
    pub hosts_per_leaf: usize,
    pub layers: usize,
    pub params_per_layer: u64,
}

#[derive(Serialize)]
struct FabricView {
    name: String,
    path_pool: Ipv4Net,
    racks: Vec<RackView>,
    spine_count: usize,
    switches: Vec<SwitchView>,
    hosts: Vec<HostView>,
    links: Vec<(String, String)>,
    layers: usize,
    params_each: u64,
}

#[derive(Serialize)]
struct RackView {
    name: String,
    subnet: Ipv4Net,
    gateway_ip: Ipv4Addr,
    gateway_mac: String,
}

#[derive(Serialize)]
struct SwitchView {
    name: String,
    role: &'static str,
    rack: Option<String>,
    vendor: Vendor,
    mgmt: Ipv4Addr,
    buffer_bytes: u64,
    ports: Vec<PortView>,
}

#[derive(Serialize)]
struct PortView {
    name: String,
    speed: &'static str,
    ip: Option<Ipv4Net>,
}

#[derive(Serialize)]
struct HostView {
    name: String,
    rack: String,
    mgmt: Ipv4Addr,
    mac: String,
    ip: Ipv4Addr,
}

/// The inventory YAML for a fabric of `size`, vendors rotating through all four.
pub fn fabric_yaml(size: FabricSize) -> anyhow::Result<String> {
    fabric_yaml_with(size, &Vendor::ALL)
}

/// The inventory YAML for a fabric of `size`, vendors rotating through `vendors`.
pub fn fabric_yaml_with(size: FabricSize, vendors: &[Vendor]) -> anyhow::Result<String> {
    if vendors.is_empty() {
        bail!("a fabric needs at least one vendor");
    }
    let FabricSize {
        spines,
        leaves,
        hosts_per_leaf,
        ..
    } = size;
    if spines == 0 || leaves == 0 || hosts_per_leaf == 0 {
        bail!("a fabric needs at least one spine, one leaf and one host per leaf");
    }
    let shape = Shape {
        spines: (0..spines).map(|s| vendors[s % vendors.len()]).collect(),
        leaves: (0..leaves)
            .map(|l| (vendors[(l + 1) % vendors.len()], hosts_per_leaf))
            .collect(),
        layers: size.layers,
        params_per_layer: size.params_per_layer,
        buffer_bytes: None,
    };
    fabric_yaml_shaped(&shape)
}

/// A fabric switch by switch: each spine's OS, each leaf's OS and host count (every
/// leaf links to every spine).
#[derive(Debug, Clone)]
pub struct Shape {
    pub spines: Vec<Vendor>,
    pub leaves: Vec<(Vendor, usize)>,
    pub layers: usize,
    pub params_per_layer: u64,
    /// Every switch's buffer; None: 64 MiB on a spine, 32 MiB on a leaf.
    pub buffer_bytes: Option<u64>,
}

/// The inventory YAML for a fabric of `shape`.
pub fn fabric_yaml_shaped(shape: &Shape) -> anyhow::Result<String> {
    let (spines, leaves) = (shape.spines.len(), shape.leaves.len());
    let most = shape.leaves.iter().map(|(_, h)| *h).max().unwrap_or(0);
    let total: usize = shape.leaves.iter().map(|(_, h)| *h).sum();
    if spines == 0 || leaves == 0 || total == 0 {
        bail!("a fabric needs at least one spine, one leaf and one host");
    }
    if most > MAX_HOSTS_PER_LEAF {
        bail!("at most {MAX_HOSTS_PER_LEAF} hosts per leaf fit the generator's /24 racks");
    }
    let devices = spines + leaves + total;
    if leaves > 254 * 255 || spines * leaves > 1 << 19 || devices >= 1 << 16 {
        bail!("{leaves} leaves and {spines} spines do not fit the generator's address plan");
    }
    let path_pool = path_pool(spines, leaves, most)?;
    // Management addresses: spines, then leaves, then hosts.
    let mgmt = |n: usize| offset(Ipv4Addr::new(10, 250, 0, 0), 1 + n as u32);
    let mut switches = Vec::with_capacity(spines + leaves);
    for (s, &vendor) in shape.spines.iter().enumerate() {
        let ports = (0..leaves)
            .map(|l| PortView {
                name: port_name(vendor, l),
                speed: "400G",
                ip: Some(p2p(l * spines + s, false)),
            })
            .collect();
        switches.push(SwitchView {
            name: format!("spine{}", s + 1),
            role: "spine",
            rack: None,
            vendor,
            mgmt: mgmt(s),
            buffer_bytes: shape.buffer_bytes.unwrap_or(64 << 20),
            ports,
        });
    }
    let mut racks = Vec::with_capacity(leaves);
    let mut hosts = Vec::with_capacity(total);
    let mut links = Vec::new();
    for (l, &(vendor, rack_hosts)) in shape.leaves.iter().enumerate() {
        let (rack, leaf) = (format!("r{}", l + 1), format!("leaf{}", l + 1));
        let net = Ipv4Addr::new(10, (1 + l / 255) as u8, (l % 255) as u8, 0);
        racks.push(RackView {
            name: rack.clone(),
            subnet: Ipv4Net::new(net, 24).expect("24 is a valid prefix"),
            gateway_ip: offset(net, 1),
            gateway_mac: mac(0x01, l as u32),
        });
        let mut ports: Vec<PortView> = (0..rack_hosts)
            .map(|h| PortView {
                name: port_name(vendor, h),
                speed: "100G",
                ip: None,
            })
            .collect();
        for (s, spine) in switches.iter().enumerate().take(spines) {
            let port = port_name(vendor, rack_hosts + s);
            links.push((
                format!("{leaf}:{port}"),
                format!("{}:{}", spine.name, spine.ports[l].name),
            ));
            ports.push(PortView {
                name: port,
                speed: "400G",
                ip: Some(p2p(l * spines + s, true)),
            });
        }
        for (h, port) in ports.iter().take(rack_hosts).enumerate() {
            let n = hosts.len();
            let name = format!("h{}", n + 1);
            links.push((format!("{name}:ens1f0"), format!("{leaf}:{}", port.name)));
            hosts.push(HostView {
                name,
                rack: rack.clone(),
                mgmt: mgmt(spines + leaves + n),
                mac: mac(0x00, n as u32),
                ip: offset(net, 11 + h as u32),
            });
        }
        switches.push(SwitchView {
            name: leaf,
            role: "leaf",
            rack: Some(rack),
            vendor,
            mgmt: mgmt(spines + l),
            buffer_bytes: shape.buffer_bytes.unwrap_or(32 << 20),
            ports,
        });
    }
    let context = FabricView {
        name: format!("gen-{spines}x{leaves}x{most}"),
        path_pool,
        racks,
        spine_count: spines,
        switches,
        hosts,
        links,
        layers: shape.layers,
        params_each: shape.params_per_layer,
    };
    let context =
        tera::Context::from_serialize(&context).context("building the template context")?;
    tera::Tera::one_off(TEMPLATE, &context, false).context("rendering the inventory template")
}

fn path_pool(spines: usize, leaves: usize, hosts_per_leaf: usize) -> anyhow::Result<Ipv4Net> {
    let base = Ipv4Addr::new(10, 128, 0, 0);
    let probe = PathLayout::new(Ipv4Net::new(base, 9)?, leaves, hosts_per_leaf);
    let len = probe.largest_prefix_len(spines);
    if len < 9 {
        bail!("{spines} spines x {leaves} leaves need more path addresses than 10.128.0.0/9 holds");
    }
    Ok(Ipv4Net::new(base, len)?)
}

/// One end of the `link`th leaf–spine /31 in 172.16.0.0/12; spines take the even address.
fn p2p(link: usize, leaf_side: bool) -> Ipv4Net {
    let base = u32::from(Ipv4Addr::new(172, 16, 0, 0)) + 2 * link as u32 + u32::from(leaf_side);
    Ipv4Net::new(Ipv4Addr::from(base), 31).expect("31 is a valid prefix")
}

fn offset(net: Ipv4Addr, n: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(net) + n)
}

/// A locally administered unicast MAC: 02:kind:nn:nn:nn:nn.
fn mac(kind: u8, n: u32) -> String {
    let b = n.to_be_bytes();
    format!(
        "02:{kind:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0], b[1], b[2], b[3]
    )
}

/// The `index`th front-panel port in each vendor's naming.
fn port_name(vendor: Vendor, index: usize) -> String {
    match vendor {
        Vendor::Sonic => format!("Ethernet{}", index * 4),
        Vendor::Eos => format!("Ethernet{}/1", index + 1),
        Vendor::Cumulus => format!("swp{}", index + 1),
        Vendor::Onyx => format!("Eth1/{}", index + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory;
    use std::path::Path;

    #[test]
    fn generated_fabrics_validate() {
        for (spines, leaves, hosts) in [(1, 1, 1), (2, 3, 2), (4, 8, 16)] {
            let yaml = fabric_yaml(FabricSize {
                spines,
                leaves,
                hosts_per_leaf: hosts,
                layers: 20,
                params_per_layer: 1000,
            })
            .unwrap();
            let inv = match inventory::load_str(Path::new("gen.yaml"), &yaml) {
                Ok(inv) => inv,
                Err(inventory::LoadError::Invalid(d)) => panic!("{d}"),
                Err(e) => panic!("{e}"),
            };
            assert_eq!(inv.hosts.len(), leaves * hosts);
            assert_eq!(inv.uplinks.len(), leaves * spines);
            assert_eq!(inv.switches.len(), leaves + spines);
        }
    }
}
