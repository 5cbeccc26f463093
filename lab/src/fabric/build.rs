//! Making a lab's parts: namespaces on the management bridge, the cables between
//! switches and hosts, the emulated switches' directories, SSH servers, the forwarder.

use std::fs;
use std::process::Command;
use std::time::Duration;

use mlt_netns::sshd::{Sshd, wait_for};
use mlt_netns::{Namespace, Namespaces, Role, cable, run};
use switch_config::Vendor;

use super::{
    LabError, Layout, MGMT_BRIDGE_ADDRESS, Member, Spec, Topology, forwarder_pid_file, io,
    management_cable,
};
use crate::emulator::Device;

/// Cables between switches (and to hosts) carry jumbo frames.
const SWITCH_MTU: u32 = 9216;

pub(super) fn build(
    spec: &Spec,
    topology: &Topology,
    layout: &Layout,
    say: &mut dyn FnMut(&str),
) -> Result<(), LabError> {
    run("ip", &["link", "add", &layout.bridge, "type", "bridge"])?;
    run(
        "ip",
        &["addr", "add", MGMT_BRIDGE_ADDRESS, "dev", &layout.bridge],
    )?;
    run("ip", &["link", "set", &layout.bridge, "up"])?;
    // The lab keeps its namespaces until `lab down`, which finds them in lab.json.
    let mut namespaces = Namespaces::new();
    let members: Vec<&Member> = layout.switches.iter().chain(&layout.hosts).collect();
    let made = members
        .iter()
        .enumerate()
        .try_for_each(|(index, member)| add_member(&mut namespaces, layout, member, index));
    namespaces.keep();
    made?;
    say(&format!(
        "{} switch and {} host namespaces on the management bridge {}",
        layout.switches.len(),
        layout.hosts.len(),
        layout.bridge
    ));
    cable_fabric(topology, layout)?;
    say("cabled: every leaf to every spine, every host to its leaf");
    let mut known_hosts = String::new();
    for (switch, member) in topology.switches.iter().zip(&layout.switches) {
        let dir = spec.dir.join("devices").join(&switch.name);
        let device = Device::install(
            &dir,
            &switch.vendor.to_string(),
            &empty_config(switch.vendor),
            &spec.switch,
        );
        // Empty, it runs no route yet; its first command that changes one installs it.
        device.enable_dataplane();
        let cli = matches!(switch.vendor, Vendor::Eos | Vendor::Onyx);
        let dev = device.dir.display();
        let mut extra = format!(
            "SetEnv MLT_DEVICE={dev} HOME={dev} PATH={dev}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin\n"
        );
        if cli {
            extra.push_str(&format!("ForceCommand {dev}/bin/cli\n"));
        }
        known_hosts.push_str(&start_sshd(spec, member, &device.dir, extra)?);
    }
    for member in &layout.hosts {
        let dir = spec.dir.join("hosts").join(&member.name);
        fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
        known_hosts.push_str(&start_sshd(spec, member, &dir, String::new())?);
    }
    fs::write(spec.dir.join("known_hosts"), known_hosts).map_err(io("cannot write known_hosts"))?;
    for member in &members {
        let address = member
            .mgmt
            .parse()
            .map_err(|_| LabError::Refused(format!("{}: bad management address", member.name)))?;
        wait_for(None, address, 22, Duration::from_secs(10)).map_err(|_| {
            LabError::Refused(format!(
                "{}'s SSH server does not answer on {}:22",
                member.name, member.mgmt
            ))
        })?;
    }
    say("every switch and host answers SSH on its management address");
    start_forwarder(spec)?;
    say(&format!(
        "the forwarder runs every switch's data plane at {} per port",
        mlt_common::units::Rate::from_mbps(spec.rate_mbps)
    ));
    Ok(())
}

/// A member's namespace, its management cable on the bridge, and its address there.
fn add_member(
    namespaces: &mut Namespaces,
    layout: &Layout,
    member: &Member,
    index: usize,
) -> Result<(), LabError> {
    let ns = namespaces.add(&member.namespace, Role::Host)?;
    let outside = management_cable(&layout.name, index);
    cable((None, &outside), (Some(&ns), "mgmt0"), 1500)?;
    run(
        "ip",
        &["link", "set", &outside, "master", &layout.bridge, "up"],
    )?;
    ns.address("mgmt0", &format!("{}/16", member.mgmt))?;
    Ok(())
}

/// The name of a switch port in its namespace (interface names take no `/`), with the
/// vendor's name as its alias.
pub fn interface_name(port: &str) -> String {
    let name: String = port.replace('/', "_").chars().take(15).collect();
    name
}

/// A cable between switch ports (or a switch port and a host's NIC). Its ends keep
/// the kernel's offloads: a GSO super-frame crosses it whole, and the forwarder queues
/// it segment by segment.
fn switch_cable(a: (&Namespace, &str), b: (&Namespace, &str)) -> Result<(), LabError> {
    cable((Some(a.0), a.1), (Some(b.0), b.1), SWITCH_MTU).map_err(Into::into)
}

fn cable_fabric(topology: &Topology, layout: &Layout) -> Result<(), LabError> {
    let ns = |switch: usize| Namespace::named(&layout.switches[switch].namespace);
    let port = |switch: usize, port: usize| &topology.switches[switch].ports[port];
    let mut wired: Vec<(usize, usize)> = Vec::new();
    for &(leaf, leaf_port, spine, spine_port) in &topology.uplinks {
        switch_cable(
            (&ns(leaf), &interface_name(&port(leaf, leaf_port).name)),
            (&ns(spine), &interface_name(&port(spine, spine_port).name)),
        )?;
        wired.push((leaf, leaf_port));
        wired.push((spine, spine_port));
    }
    for rack in &topology.racks {
        let leaf = ns(rack.leaf);
        leaf.bridge("rack0", SWITCH_MTU, Some(&rack.gateway_mac))?;
        leaf.address("rack0", &rack.gateway.to_string())?;
    }
    for &(host, leaf, leaf_port) in &topology.downlinks {
        let spec = &topology.hosts[host];
        let host_ns = Namespace::named(&layout.hosts[host].namespace);
        let name = interface_name(&port(leaf, leaf_port).name);
        switch_cable((&host_ns, &spec.nic), (&ns(leaf), &name))?;
        // The NIC as the host's installer left it: its MAC, MTU 1500, no addresses.
        host_ns.ip(&[
            "link", "set", &spec.nic, "mtu", "1500", "address", &spec.mac,
        ])?;
        // The NIC merges what it receives (GRO), as a server's NIC does by default;
        // the forwarder hands it frames to match (`forwarder::switch`).
        host_ns.exec("ethtool", &["-K", &spec.nic, "gro", "on"])?;
        ns(leaf).enslave(&name, "rack0")?;
        wired.push((leaf, leaf_port));
    }
    for &(switch, index) in &wired {
        let port = port(switch, index);
        let name = interface_name(&port.name);
        ns(switch).ip(&["link", "set", &name, "alias", &port.name])?;
        if let Some(ip) = port.ip {
            ns(switch).address(&name, &ip.to_string())?;
        }
    }
    // The forwarder routes (and, between a rack's hosts, switches) every IPv4 frame
    // not for the switch itself: the kernel's bridge and IP stack never see them.
    for (s, _) in topology.switches.iter().enumerate() {
        let ports: Vec<String> = (wired.iter())
            .filter(|(switch, _)| *switch == s)
            .map(|&(_, index)| interface_name(&port(s, index).name))
            .collect();
        let own: Vec<std::net::Ipv4Addr> = (wired.iter())
            .filter(|(switch, _)| *switch == s)
            .filter_map(|&(_, index)| port(s, index).ip.map(|ip| ip.addr()))
            .chain(
                topology
                    .racks
                    .iter()
                    .filter(|r| r.leaf == s)
                    .map(|r| r.gateway.addr()),
            )
            .collect();
        let ports: Vec<&str> = ports.iter().map(String::as_str).collect();
        ns(s).hand_ipv4_to_taps(&ports, &own)?;
    }
    Ok(())
}

/// Starts a member's SSH server (daemonised, in its namespace, its files in `dir`);
/// its known_hosts line.
fn start_sshd(
    spec: &Spec,
    member: &Member,
    dir: &std::path::Path,
    extra: String,
) -> Result<String, LabError> {
    let address = member
        .mgmt
        .parse()
        .map_err(|_| LabError::Refused(format!("{}: bad management address", member.name)))?;
    let started = Sshd {
        namespace: &Namespace::named(&member.namespace),
        address,
        dir,
        authorized_keys: &spec.dir.join("authorized_keys"),
        extra,
    }
    .start(false)?;
    Ok(started.known_hosts)
}

/// Starts `mltctl lab forward` in the background, in a process group of its own.
fn start_forwarder(spec: &Spec) -> Result<(), LabError> {
    use std::os::unix::process::CommandExt;
    let log = fs::File::create(spec.dir.join("forwarder.log"))
        .map_err(io("cannot create forwarder.log"))?;
    let mut child = Command::new(&spec.mltctl)
        .args(["lab", "forward", "--dir"])
        .arg(&spec.dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(io("cannot start the forwarder"))?;
    // Every switch's sockets open within moments; a forwarder that cannot says why.
    std::thread::sleep(Duration::from_millis(300));
    if let Ok(Some(status)) = child.try_wait() {
        let log = fs::read_to_string(spec.dir.join("forwarder.log")).unwrap_or_default();
        return Err(LabError::Refused(format!(
            "the forwarder ended ({status}): {}",
            log.trim()
        )));
    }
    fs::write(forwarder_pid_file(&spec.dir), child.id().to_string())
        .map_err(io("cannot write forwarder.pid"))?;
    Ok(())
}

/// A factory-empty switch: nothing of the plan configured.
fn empty_config(vendor: Vendor) -> String {
    match vendor {
        Vendor::Sonic => "{}".into(),
        _ => String::new(),
    }
}
