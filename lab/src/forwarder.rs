//! The lab's forwarder: one process, a thread per switch, each in its switch's network
//! namespace with a raw (AF_PACKET) socket on every data port. It routes IPv4 by the
//! static routes the switch runs and its connected subnets, resolves next hops with
//! ARP of its own, and queues every frame on its egress port as the switch's running
//! configuration says ([`super::queueing`]): DSCP → queue, RED/ECN, strict priority,
//! the port rate. It re-reads a switch's configuration when it changes and writes the
//! queues' counters to `counters/NAME.json` for `lab status`. The kernel of a
//! switch namespace does not forward (ip_forward is off); it still answers ARP and
//! pings for the switch's own addresses.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use endhost_core::frame::Ipv4Packet;
use ipnet::Ipv4Net;

use super::dataplane::running_routes;
use super::emulator::Device;
use super::fabric::{LabError, Member, layout, qos_off_file};
use super::queueing::{Port, QueueCounters};

const ETH_P_ALL: u16 = 0x0003;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
/// Linux's PACKET_IGNORE_OUTGOING: a socket does not see the frames it sends.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const MAX_FRAME: usize = 9216 + 14;
/// Bytes one port's queues may hold together unless `lab up --buffer` says: a
/// generous buffer (the lab does not model how a switch shares its buffer between
/// ports; each port may use all of it).
pub const PORT_BUFFER_BYTES: u64 = 4 << 20;
/// Real-time priority of the switch threads: a switch's port clock must not wait for
/// the senders and receivers this machine also runs (low, so that sshd and the
/// kernel's own real-time threads go first).
const SWITCH_THREAD_PRIORITY: libc::c_int = 10;

/// Runs the forwarder of the lab in `dir` until it is killed.
pub fn run(dir: &Path) -> Result<(), LabError> {
    let layout = layout(dir)?;
    let ports = PortShape {
        rate: layout.rate_mbps.saturating_mul(1_000_000),
        buffer_bytes: layout.buffer_bytes.unwrap_or(PORT_BUFFER_BYTES),
    };
    let threads: Vec<_> = layout
        .switches
        .iter()
        .cloned()
        .map(|member| {
            let device = dir.join("devices").join(&member.name);
            let counters = dir.join("counters").join(format!("{}.json", member.name));
            let qos_off = qos_off_file(dir);
            std::thread::spawn(move || {
                // A switch without its data plane is no lab: the whole forwarder ends,
                // and `lab status` shows it.
                if let Err(e) = switch_loop(&member, &device, &counters, &qos_off, ports) {
                    eprintln!("mltctl lab forward: {}: {e}", member.name);
                    std::process::exit(1);
                }
            })
        })
        .collect();
    for thread in threads {
        if thread.join().is_err() {
            return Err(LabError::Refused("a switch's forwarder panicked".into()));
        }
    }
    Ok(())
}

/// Runs the calling thread under SCHED_FIFO: pacing then follows the port's clock even
/// on a busy machine (without it, a busy sender delayed the forwarder enough to
/// multiply the losses at a port loaded to 0.9 several times over;
/// docs/src/results/lab.md). The kernel's real-time throttling still leaves others 5%
/// of each core. Refused (no CAP_SYS_NICE, a cgroup without real-time budget): it says so and
/// forwards anyway.
fn real_time_priority(switch: &str) {
    let param = libc::sched_param {
        sched_priority: SWITCH_THREAD_PRIORITY,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!(
            "mltctl lab forward: {switch}: no real-time priority ({}); pacing will follow \
             this machine's load",
            std::io::Error::last_os_error()
        );
    }
}

/// What every data port of the lab is: its rate (bits per second) and buffer.
#[derive(Clone, Copy)]
struct PortShape {
    rate: u64,
    buffer_bytes: u64,
}

/// One interface of the switch's namespace.
struct Iface {
    index: i32,
    name: String,
    mac: [u8; 6],
    /// The vendor's port name.
    alias: Option<String>,
    /// The bridge it is a port of.
    master: Option<String>,
    nets: Vec<Ipv4Net>,
}

/// A port frames leave through: an uplink, or a host port of the rack's bridge.
struct Egress {
    iface: usize,
    socket: OwnedFd,
    port: Port,
    /// The vendor's port name: whose queueing it applies.
    qos_port: String,
}

struct Switch {
    device: Device,
    ifaces: Vec<Iface>,
    /// (socket, interface) frames arrive on.
    ingress: Vec<(OwnedFd, usize)>,
    egress: Vec<Egress>,
    routes: Vec<(Ipv4Net, Target)>,
    neighbours: HashMap<Ipv4Addr, [u8; 6]>,
    /// Which egress reaches a host's MAC (learnt from the frames it sends).
    host_ports: HashMap<[u8; 6], usize>,
    /// Where ARP requests for the hosts go out: the bridge (it floods them).
    bridge: Option<(OwnedFd, usize)>,
    asked: HashMap<Ipv4Addr, Instant>,
    running: PathBuf,
    config_stamp: Option<(Option<SystemTime>, bool)>,
    /// While this file exists, the switch's queueing is not enforced.
    qos_off: PathBuf,
    counters: PathBuf,
    /// Where the ports' clocks (nanoseconds) start.
    clock: Instant,
    no_route: u64,
    no_neighbour: u64,
    send_failed: u64,
}

/// Where [`Switch::next_hop`] sends a packet.
enum Hop {
    Out(usize, Ipv4Addr),
    Discard,
    NoRoute,
}

enum Target {
    Discard,
    /// Next hops (several: ECMP).
    Via(Vec<Ipv4Addr>),
    /// On the subnet of this interface.
    Connected(usize),
}

fn switch_loop(
    member: &Member,
    device_dir: &Path,
    counters: &Path,
    qos_off: &Path,
    ports: PortShape,
) -> Result<(), LabError> {
    enter_namespace(&member.namespace)?;
    real_time_priority(&member.name);
    let mut switch = Switch::open(device_dir, counters, qos_off, ports)?;
    let mut buffer = vec![0u8; MAX_FRAME];
    let mut last_check = Instant::now() - Duration::from_secs(1);
    let mut last_stats = Instant::now();
    loop {
        if last_check.elapsed() >= Duration::from_millis(200) {
            switch.reload_if_changed();
            last_check = Instant::now();
        }
        if last_stats.elapsed() >= Duration::from_millis(500) {
            switch.write_counters();
            last_stats = Instant::now();
        }
        let now = switch.now();
        let wait = switch
            .egress
            .iter()
            .filter_map(|e| e.port.next_departure())
            .min()
            .map_or(50_000_000, |at| at.saturating_sub(now).min(50_000_000));
        switch.poll(wait, &mut buffer);
        let now = switch.now();
        for egress in &mut switch.egress {
            while let Some(frame) = egress.port.dequeue(now) {
                if !send(&egress.socket, switch.ifaces[egress.iface].index, &frame) {
                    switch.send_failed += 1;
                }
            }
        }
    }
}

impl Switch {
    fn open(
        device_dir: &Path,
        counters: &Path,
        qos_off: &Path,
        ports: PortShape,
    ) -> Result<Switch, LabError> {
        let ifaces = interfaces()?;
        let device = Device::at(device_dir);
        let qos = device.qos();
        let mut ingress = Vec::new();
        let mut egress = Vec::new();
        let mut bridge = None;
        for (i, iface) in ifaces.iter().enumerate() {
            if iface.name == "lo" || iface.name == "mgmt0" {
                continue;
            }
            if ifaces
                .iter()
                .any(|o| o.master.as_deref() == Some(&iface.name))
            {
                // The rack's bridge: only its ARP replies are read here; its ports
                // carry the frames.
                ingress.push((packet_socket(iface.index, ETH_P_ARP)?, i));
                bridge = Some((packet_socket(iface.index, 0)?, i));
                continue;
            }
            // Only a tap on every protocol sees a bridge port's frames before the
            // bridge takes them.
            ingress.push((packet_socket(iface.index, ETH_P_ALL)?, i));
            let qos_port = iface.alias.clone().unwrap_or_else(|| iface.name.clone());
            let port_qos = qos
                .port(&qos_port)
                .cloned()
                .unwrap_or_else(factory_queueing);
            egress.push(Egress {
                iface: i,
                socket: packet_socket(iface.index, 0)?,
                port: Port::new(port_qos, ports.rate, ports.buffer_bytes, iface.index as u64),
                qos_port,
            });
        }
        let mut switch = Switch {
            running: device.running_file(),
            device,
            ifaces,
            ingress,
            egress,
            routes: Vec::new(),
            neighbours: HashMap::new(),
            host_ports: HashMap::new(),
            bridge,
            asked: HashMap::new(),
            config_stamp: None,
            qos_off: qos_off.to_path_buf(),
            counters: counters.to_path_buf(),
            clock: Instant::now(),
            no_route: 0,
            no_neighbour: 0,
            send_failed: 0,
        };
        switch.reload_if_changed();
        Ok(switch)
    }

    /// The ports' clock: nanoseconds since the switch started.
    fn now(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    /// Routes and queueing again, when the running configuration changed or the lab's
    /// queueing was switched off or on.
    fn reload_if_changed(&mut self) {
        let stamp = (
            fs::metadata(&self.running).and_then(|m| m.modified()).ok(),
            self.qos_off.exists(),
        );
        if Some(stamp) == self.config_stamp {
            return;
        }
        self.config_stamp = Some(stamp);
        let running = self.device.running();
        let mut routes: Vec<(Ipv4Net, Target)> = running_routes(&self.device.vendor, &running)
            .into_iter()
            .map(|r| {
                let target = if r.discard || r.next_hops.is_empty() {
                    Target::Discard
                } else {
                    Target::Via(r.next_hops.into_iter().collect())
                };
                (r.prefix, target)
            })
            .collect();
        for (i, iface) in self.ifaces.iter().enumerate() {
            if iface.name == "lo" || iface.name == "mgmt0" {
                continue;
            }
            for net in &iface.nets {
                routes.push((net.trunc(), Target::Connected(i)));
            }
        }
        // Longest prefix first; a connected subnet before a static route of its length.
        routes.sort_by_key(|(net, target)| {
            (
                std::cmp::Reverse(net.prefix_len()),
                !matches!(target, Target::Connected(_)),
            )
        });
        self.routes = routes;
        // A port the configuration no longer queues goes back to the factory's; with
        // the lab's queueing off, every port does (a baseline to measure against).
        let qos = if stamp.1 {
            super::qos::SwitchQos::default()
        } else {
            self.device.qos()
        };
        for egress in &mut self.egress {
            let port_qos = qos
                .port(&egress.qos_port)
                .cloned()
                .unwrap_or_else(factory_queueing);
            egress.port.set_qos(port_qos);
        }
    }

    fn write_counters(&self) {
        let queues: BTreeMap<&str, &[QueueCounters; 8]> = self
            .egress
            .iter()
            .map(|e| (e.qos_port.as_str(), e.port.counters()))
            .collect();
        let report = serde_json::json!({
            "ports": queues,
            "no_route": self.no_route,
            "no_neighbour": self.no_neighbour,
            "send_failed": self.send_failed,
        });
        let partial = self.counters.with_extension("partial");
        if let Some(dir) = self.counters.parent() {
            let _ = fs::create_dir_all(dir);
        }
        if fs::write(&partial, report.to_string()).is_ok() {
            let _ = fs::rename(&partial, &self.counters);
        }
    }

    fn poll(&mut self, wait_ns: u64, buffer: &mut [u8]) {
        let mut fds: Vec<libc::pollfd> = self
            .ingress
            .iter()
            .map(|(fd, _)| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // To the nanosecond: a frame's time on the wire is microseconds.
        let timeout = libc::timespec {
            tv_sec: (wait_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: fds is a valid array of pollfd for its length; no signal mask.
        let ready = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &timeout,
                std::ptr::null(),
            )
        };
        if ready <= 0 {
            return;
        }
        for (slot, pollfd) in fds.iter().enumerate() {
            if pollfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                // A port went down: reading the error clears it (or poll would report
                // it again at once, forever).
                let mut error: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: SO_ERROR into an int we own.
                unsafe {
                    libc::getsockopt(
                        pollfd.fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut error as *mut libc::c_int).cast(),
                        &mut len,
                    )
                };
            }
            if pollfd.revents & libc::POLLIN == 0 {
                continue;
            }
            // A burst at a time, so that one busy port does not starve the others.
            for _ in 0..64 {
                // SAFETY: reading into a buffer we own, of its length.
                let n = unsafe {
                    libc::recv(
                        pollfd.fd,
                        buffer.as_mut_ptr().cast(),
                        buffer.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                let Ok(n) = usize::try_from(n) else { break };
                let iface = self.ingress[slot].1;
                self.handle(iface, &buffer[..n]);
            }
        }
    }

    fn handle(&mut self, iface: usize, frame: &[u8]) {
        if frame.len() < 14 {
            return;
        }
        if self.ifaces[iface].master.is_some() {
            // A host port: the host behind it is reached through it.
            let source: [u8; 6] = frame[6..12].try_into().expect("six bytes");
            if let Some(e) = self.egress.iter().position(|e| e.iface == iface) {
                self.host_ports.insert(source, e);
            }
        }
        match u16::from_be_bytes([frame[12], frame[13]]) {
            ETH_P_ARP => self.learn(iface, frame),
            ETH_P_IP => self.forward(iface, frame),
            _ => {}
        }
    }

    /// An ARP frame teaches its sender's address, if the sender is on a subnet of the
    /// interface it came in on (a host cannot claim a spine's address).
    fn learn(&mut self, iface: usize, frame: &[u8]) {
        let Some(arp) = frame.get(14..42) else { return };
        // Ethernet, IPv4, 6- and 4-byte addresses.
        if arp[..6] != [0, 1, 8, 0, 6, 4] {
            return;
        }
        let mac: [u8; 6] = arp[8..14].try_into().expect("six bytes");
        let ip = Ipv4Addr::new(arp[14], arp[15], arp[16], arp[17]);
        let here = &self.ifaces[iface];
        let nets = match &here.master {
            Some(bridge) => self
                .ifaces
                .iter()
                .find(|i| &i.name == bridge)
                .map(|i| &i.nets),
            None => Some(&here.nets),
        };
        let on_link =
            nets.is_some_and(|nets| nets.iter().any(|n| n.contains(&ip) && n.addr() != ip));
        if on_link {
            self.neighbours.insert(ip, mac);
        }
    }

    fn forward(&mut self, iface: usize, frame: &[u8]) {
        // Only frames sent to this switch: its port's MAC, or its bridge's for a host port.
        let here = &self.ifaces[iface];
        let own_mac = match &here.master {
            Some(bridge) => self
                .ifaces
                .iter()
                .find(|i| &i.name == bridge)
                .map(|i| i.mac),
            None => Some(here.mac),
        };
        if own_mac.is_none_or(|mac| frame[..6] != mac) {
            return;
        }
        let Ok(ip) = Ipv4Packet::new_checked(&frame[14..]) else {
            return;
        };
        let dst = ip.dst();
        if self
            .ifaces
            .iter()
            .any(|i| i.nets.iter().any(|n| n.addr() == dst))
        {
            return; // the kernel's
        }
        let (out_iface, hop) = match self.next_hop(&ip) {
            Hop::Out(iface, hop) => (iface, hop),
            Hop::Discard => return,
            Hop::NoRoute => {
                self.no_route += 1;
                return;
            }
        };
        let Some(&next_mac) = self.neighbours.get(&hop) else {
            self.no_neighbour += 1;
            self.ask(out_iface, hop);
            return;
        };
        // Through the port itself, or (the rack's bridge) the host port the host is on.
        let egress = match self.egress.iter().position(|e| e.iface == out_iface) {
            Some(e) => e,
            None => match self.host_ports.get(&next_mac) {
                Some(&e) => e,
                None => {
                    self.no_neighbour += 1;
                    return;
                }
            },
        };
        let source_mac = self.ifaces[out_iface].mac;
        let mut copy = frame.to_vec();
        copy[..6].copy_from_slice(&next_mac);
        copy[6..12].copy_from_slice(&source_mac);
        let Ok(mut ip) = Ipv4Packet::new_checked(&mut copy[14..]) else {
            return;
        };
        if !ip.decrement_ttl() {
            return;
        }
        let now = self.now();
        self.egress[egress].port.enqueue(copy, now);
    }

    /// Where a packet goes: by the longest matching route; among ECMP next hops, the
    /// reachable ones by the flow's hash.
    fn next_hop(&self, ip: &Ipv4Packet<&[u8]>) -> Hop {
        let dst = ip.dst();
        let Some((_, target)) = self.routes.iter().find(|(net, _)| net.contains(&dst)) else {
            return Hop::NoRoute;
        };
        let hops = match target {
            Target::Discard => return Hop::Discard,
            Target::Connected(i) => return Hop::Out(*i, dst),
            Target::Via(hops) => hops,
        };
        let reach = |hop: &Ipv4Addr| {
            self.ifaces
                .iter()
                .position(|i| i.nets.iter().any(|n| n.contains(hop)))
                .map(|i| (i, *hop))
        };
        let reachable = hops.iter().filter(|h| reach(h).is_some()).count();
        if reachable == 0 {
            return Hop::NoRoute;
        }
        let pick = flow_hash(ip) as usize % reachable;
        match hops.iter().filter_map(reach).nth(pick) {
            Some((iface, hop)) => Hop::Out(iface, hop),
            None => Hop::NoRoute,
        }
    }

    /// Asks who has `hop` on interface `iface` (a bridge floods it to its ports), at
    /// most every 100 ms.
    fn ask(&mut self, iface: usize, hop: Ipv4Addr) {
        if self
            .asked
            .get(&hop)
            .is_some_and(|at| at.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.asked.insert(hop, Instant::now());
        let out = &self.ifaces[iface];
        let Some(me) = out.nets.iter().find(|n| n.contains(&hop)).map(|n| n.addr()) else {
            return;
        };
        let mut frame = [0u8; 42];
        frame[..6].copy_from_slice(&[0xff; 6]);
        frame[6..12].copy_from_slice(&out.mac);
        frame[12..14].copy_from_slice(&ETH_P_ARP.to_be_bytes());
        // Ethernet, IPv4, 6- and 4-byte addresses, request.
        frame[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        frame[22..28].copy_from_slice(&out.mac);
        frame[28..32].copy_from_slice(&me.octets());
        frame[38..42].copy_from_slice(&hop.octets());
        let socket = match self.egress.iter().find(|e| e.iface == iface) {
            Some(egress) => &egress.socket,
            None => match &self.bridge {
                Some((socket, _)) => socket,
                None => return,
            },
        };
        if !send(socket, out.index, &frame) {
            self.send_failed += 1;
        }
    }
}

/// A flow's hash for ECMP: addresses, protocol and (TCP, UDP) ports.
fn flow_hash(ip: &Ipv4Packet<&[u8]>) -> u32 {
    let ports = match ip.protocol() {
        6 | 17 => ip
            .payload()
            .get(..4)
            .map_or(0, |p| u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
        _ => 0,
    };
    let mut h = u32::from(ip.src()) ^ u32::from(ip.dst()).rotate_left(13);
    h ^= ports.rotate_left(7) ^ u32::from(ip.protocol());
    h ^= h >> 16;
    h.wrapping_mul(0x045d_9f3b)
}

/// A port the configuration does not queue: every packet in queue 0, no RED.
fn factory_queueing() -> super::qos::PortQos {
    super::qos::PortQos::mapped([0; 64])
}

fn enter_namespace(namespace: &str) -> Result<(), LabError> {
    let path = Path::new("/run/netns").join(namespace);
    let file = fs::File::open(&path).map_err(|source| LabError::Io {
        what: format!("cannot open {}", path.display()),
        source,
    })?;
    // SAFETY: setns on a namespace file we hold open; it changes only this thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(LabError::Io {
            what: format!("cannot enter {namespace}"),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// The interfaces of this thread's namespace (`ip` runs in it: a child inherits it).
fn interfaces() -> Result<Vec<Iface>, LabError> {
    let out = std::process::Command::new("ip")
        .args(["-j", "-d", "addr", "show"])
        .output()
        .map_err(|source| LabError::Io {
            what: "cannot run ip".into(),
            source,
        })?;
    let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)
        .map_err(|e| LabError::Refused(format!("ip addr printed no JSON: {e}")))?;
    Ok(list
        .iter()
        .filter_map(|l| {
            let mac: Vec<u8> = l["address"]
                .as_str()?
                .split(':')
                .filter_map(|b| u8::from_str_radix(b, 16).ok())
                .collect();
            Some(Iface {
                index: i32::try_from(l["ifindex"].as_i64()?).ok()?,
                name: l["ifname"].as_str()?.to_string(),
                mac: mac.try_into().ok()?,
                alias: l["ifalias"].as_str().map(str::to_string),
                master: l["master"].as_str().map(str::to_string),
                nets: l["addr_info"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|a| a["family"] == "inet")
                    .filter_map(|a| {
                        let ip: Ipv4Addr = a["local"].as_str()?.parse().ok()?;
                        Ipv4Net::new(ip, u8::try_from(a["prefixlen"].as_u64()?).ok()?).ok()
                    })
                    .collect(),
            })
        })
        .collect())
}

/// A raw socket on interface `index` receiving `protocol`, not its own sends.
fn packet_socket(index: i32, protocol: u16) -> Result<OwnedFd, LabError> {
    let failed = |what: &str| LabError::Io {
        what: format!("{what} (interface {index})"),
        source: std::io::Error::last_os_error(),
    };
    // SAFETY: plain socket calls; the descriptor is owned by the OwnedFd at once.
    unsafe {
        let fd = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            i32::from(protocol.to_be()),
        );
        if fd < 0 {
            return Err(failed("cannot open a packet socket"));
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut address: libc::sockaddr_ll = std::mem::zeroed();
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = protocol.to_be();
        address.sll_ifindex = index;
        if libc::bind(
            fd.as_raw_fd(),
            (&address as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        ) != 0
        {
            return Err(failed("cannot bind a packet socket"));
        }
        let one: libc::c_int = 1;
        if libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        ) != 0
        {
            return Err(failed("cannot ignore a packet socket's own frames"));
        }
        Ok(fd)
    }
}

/// Sends a frame out of interface `index`; false if the kernel refused it.
fn send(socket: &OwnedFd, index: i32, frame: &[u8]) -> bool {
    // SAFETY: sending a buffer we own to an interface of this namespace.
    unsafe {
        let mut address: libc::sockaddr_ll = std::mem::zeroed();
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_ifindex = index;
        address.sll_halen = 6;
        address.sll_addr[..6].copy_from_slice(&frame[..6]);
        libc::sendto(
            socket.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            libc::MSG_DONTWAIT,
            (&address as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        ) == frame.len() as isize
    }
}
