//! mltctl's side of the lab (the lab itself is the `mltctl-lab` crate): the inventory
//! `lab up` writes — mltctl's generated fabric, adapted to run on one machine — checked
//! and planned as any inventory, and the topology the lab builds from it.

use std::net::Ipv4Addr;
use std::path::Path;

use ipnet::Ipv4Net;
use mltctl_lab::fabric::{HostSpec, PortSpec, RackSpec, SwitchSpec, Topology};
use switch_config::Vendor;

use crate::generate::{Shape, fabric_yaml_shaped};
use crate::inventory::{self, Inventory};

/// What the lab's fabric is: switches by tier, hosts per leaf, the vendors to rotate
/// through (spines first), every port's rate and, if given, every switch's buffer.
pub struct LabShape {
    pub spines: usize,
    pub leaves: usize,
    pub hosts_per_leaf: usize,
    pub vendors: Vec<Vendor>,
    pub rate_mbps: u64,
    pub buffer_bytes: Option<u64>,
    /// The fabric's MTU: every host NIC's, the transport's packets and the plan's
    /// frames.
    pub mtu: u16,
}

/// Writes the lab's inventory to `dir/inventory.yaml` (logging in as root with the key
/// at `key`), loads and plans it, and gives the topology to build.
pub fn inventory(name: &str, dir: &Path, key: &Path, shape: &LabShape) -> Result<Topology, String> {
    if shape.vendors.is_empty()
        || shape.spines == 0
        || shape.leaves == 0
        || shape.hosts_per_leaf == 0
    {
        return Err("a lab needs a vendor, a spine, a leaf and a host per leaf".into());
    }
    let vendor = |i: usize| shape.vendors[i % shape.vendors.len()];
    let generated = Shape {
        spines: (0..shape.spines).map(vendor).collect(),
        leaves: (0..shape.leaves)
            .map(|l| (vendor(shape.spines + l), shape.hosts_per_leaf))
            .collect(),
        layers: 16,
        params_per_layer: 1_000_000,
        buffer_bytes: shape.buffer_bytes,
    };
    let yaml = fabric_yaml_shaped(&generated).map_err(|e| format!("{e:#}"))?;
    // Every port at the lab's rate; the transport's delay thresholds at the round trip
    // of software forwarding through namespaces (about a millisecond on a busy
    // machine, where a datacenter fabric has microseconds); DPDK (--datapath dpdk) over
    // the hosts' veth NICs.
    let speed = format!("speed: {}M", shape.rate_mbps);
    let mtu = format!("\n  mtu: {}\n", shape.mtu);
    let mut yaml = yaml;
    for (from, to) in [
        ("speed: 100G", speed.as_str()),
        ("speed: 400G", speed.as_str()),
        ("\n  mtu: 1500\n", mtu.as_str()),
        (
            "  collective: ring\n",
            "  collective: ring\n  rate_control: {t_low_us: 2000, t_high_us: 20000}\n  \
             datapath: {driver: af_packet}\n",
        ),
    ] {
        if !yaml.contains(from) {
            return Err(format!(
                "the generated inventory has no `{}` to adapt for the lab",
                from.trim()
            ));
        }
        yaml = yaml.replace(from, to);
    }
    let generated_login = "  mgmt:\n    user: admin\n    key: {agent: true}\n";
    if !yaml.contains(generated_login) {
        return Err("the generated inventory has no login defaults to replace".into());
    }
    let yaml = yaml
        .replace(
            generated_login,
            &format!("  mgmt:\n    user: root\n    key: {{file: {}}}\n", key.display()),
        )
        .replace(
            "# Management addresses are in 10.250.0.0/16 and reach nothing: use it for dry runs and scale tests.",
            &format!(
                "# The lab `{name}`: emulated switches and namespace hosts on this machine (mltctl lab up)."
            ),
        );
    let path = dir.join("inventory.yaml");
    std::fs::write(&path, yaml).map_err(|e| format!("cannot write inventory.yaml: {e}"))?;
    let inv =
        inventory::load(&path).map_err(|e| format!("the lab's inventory is not valid: {e:#}"))?;
    let problems = crate::plan::Plan::build(&inv).problems(&inv);
    if !problems.is_empty() {
        return Err(format!(
            "the lab's inventory cannot be planned (a smaller --buffer than its \
             thresholds need?):\n{problems}"
        ));
    }
    topology(&inv)
}

/// The switches, ports, racks, hosts and cables of `inv`, as the lab builds them.
pub fn topology(inv: &Inventory) -> Result<Topology, String> {
    let address = |name: &str, mgmt: &str| {
        mgmt.parse::<Ipv4Addr>()
            .map_err(|_| format!("{name}: the lab needs an IPv4 management address"))
    };
    let switches = inv
        .switches
        .iter()
        .map(|s| {
            Ok(SwitchSpec {
                name: s.name.clone(),
                vendor: s.vendor,
                mgmt: address(&s.name, &s.mgmt.address)?,
                ports: s
                    .ports
                    .iter()
                    .map(|p| PortSpec {
                        name: p.name.clone(),
                        ip: p.ip,
                    })
                    .collect(),
            })
        })
        .collect::<Result<_, String>>()?;
    let hosts = inv
        .hosts
        .iter()
        .map(|h| {
            Ok(HostSpec {
                name: h.name.clone(),
                mgmt: address(&h.name, &h.mgmt.address)?,
                nic: h.nic.name.clone(),
                mac: h.nic.mac.to_string(),
            })
        })
        .collect::<Result<_, String>>()?;
    let racks = inv
        .racks
        .iter()
        .map(|r| RackSpec {
            leaf: r.leaf,
            gateway: Ipv4Net::new(r.gateway_ip, r.subnet.prefix_len()).expect("a valid prefix"),
            gateway_mac: r.gateway_mac.to_string(),
        })
        .collect();
    Ok(Topology {
        switches,
        hosts,
        racks,
        uplinks: inv
            .uplinks
            .iter()
            .map(|u| (u.leaf, u.leaf_port, u.spine, u.spine_port))
            .collect(),
        downlinks: inv
            .downlinks
            .iter()
            .map(|d| (d.host, d.leaf, d.leaf_port))
            .collect(),
    })
}

/// `lab status --prometheus`: every switch's per-port, per-queue counters since the lab
/// came up, as the forwarder last wrote them (Prometheus counters).
pub fn prometheus(members: &[mltctl_lab::fabric::MemberStatus]) -> String {
    use mltctl_lab::queueing::QueueCounters;
    let ports: Vec<(&str, String, Vec<QueueCounters>)> = members
        .iter()
        .filter_map(|m| Some((m.name.as_str(), m.counters.as_ref()?["ports"].as_object()?)))
        .flat_map(|(switch, ports)| {
            ports.iter().filter_map(move |(port, queues)| {
                Some((
                    switch,
                    port.clone(),
                    serde_json::from_value(queues.clone()).ok()?,
                ))
            })
        })
        .collect();
    let samples: Vec<crate::metrics::QueueSample<'_>> = ports
        .iter()
        .flat_map(|(switch, port, queues)| {
            queues
                .iter()
                .enumerate()
                .map(move |(queue, q)| crate::metrics::QueueSample {
                    switch,
                    port,
                    queue: queue as u8,
                    packets: Some(q.packets),
                    marked: Some(q.marked),
                    dropped: vec![
                        ("not_ect", Some(q.dropped_not_ect)),
                        ("red", Some(q.dropped_red)),
                        ("full", Some(q.dropped_full)),
                    ],
                })
        })
        .collect();
    let mut metrics = crate::metrics::Metrics::default();
    metrics.queues::<prometheus_client::metrics::counter::Counter>(
        "lab_queue",
        "since the lab came up",
        &samples,
    );
    metrics.text()
}
