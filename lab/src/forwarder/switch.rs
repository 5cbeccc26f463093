//! One lab switch's data plane: its ports (a raw socket each), the routes its running
//! configuration holds and its connected subnets, ARP of its own, and a [`Port`] per
//! data port that queues as the configuration says. Routed frames go to the next hop's
//! MAC with the TTL decremented; frames between the hosts of its rack are switched as
//! they are (the kernel's bridge forwards no IPv4: `lab up` tells it so), through the
//! same queues. The kernel of a switch namespace does not forward (ip_forward is off);
//! it still answers ARP and pings for the switch's own addresses.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use endhost_core::frame::Ipv4Packet;
use ipnet::Ipv4Net;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;

use super::sockets::{ETH_P_ALL, ETH_P_ARP, Inbox, packet_socket, send_all};
use super::superframe::{Message, Segment, SuperFrame, VNET_LEN, Vnet};
use crate::dataplane::running_routes;
use crate::emulator::Device;
use crate::fabric::{LabError, Member};
use crate::queueing::{Port, QueueCounters, Queued, wire_ns};
use mlt_netns::Namespace;
use mlt_netns::nic::Nic;

const ETH_P_IP: u16 = 0x0800;
/// How long a busy port holds what left its queues before sending it, at most
/// (nanoseconds), and how much.
const HOLD_NS: u64 = 250_000;
const HOLD_BYTES: u64 = 60_000;
/// How far ahead of now a port's wire may have brought frames that wait to arrive (a
/// sender outrunning its NIC) before it drops them: a NIC's ring and queue.
const BACKLOG_NS: u64 = 100_000_000;

/// What every data port of the lab is: its rate (bits per second) and buffer.
#[derive(Clone, Copy)]
pub struct PortShape {
    pub rate: u64,
    pub buffer_bytes: u64,
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

/// A segment on its way into a port's queues, at the time its last bit arrives.
struct Arrival {
    at: u64,
    order: u64,
    segment: Segment,
}

impl PartialEq for Arrival {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}

impl Eq for Arrival {}

impl PartialOrd for Arrival {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Arrival {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// A data port: frames arrive and leave through its socket.
struct DataPort {
    iface: usize,
    socket: OwnedFd,
    port: Port<Segment>,
    /// The vendor's port name: whose queueing it applies.
    qos_port: String,
    /// Segments received, by when they arrive at the queues (the earliest first).
    arriving: BinaryHeap<Reverse<Arrival>>,
    /// Segments that left the queues since the last transmission, in order, and when
    /// the first of them left.
    left: Vec<Segment>,
    held_since: Option<u64>,
    /// When the last bit of the last frame received on this port arrives: its wire
    /// brings frames one after another at the port rate, as a host's NIC sends them.
    received_until: u64,
}

pub struct Switch {
    device: Device,
    ifaces: Vec<Iface>,
    ports: Vec<DataPort>,
    /// The rack's bridge: (its ARP socket, for replies; its socket for requests,
    /// which it floods; its interface).
    bridge: Option<(OwnedFd, OwnedFd, usize)>,
    routes: Vec<(Ipv4Net, Target)>,
    neighbours: HashMap<Ipv4Addr, [u8; 6]>,
    /// Which port reaches a host's MAC (learnt from the frames it sends).
    host_ports: HashMap<[u8; 6], usize>,
    asked: HashMap<Ipv4Addr, Instant>,
    running: PathBuf,
    config_stamp: Option<(Option<SystemTime>, bool)>,
    /// While this file exists, the switch's queueing is not enforced.
    qos_off: PathBuf,
    counters: PathBuf,
    rate: u64,
    order: u64,
    no_route: u64,
    no_neighbour: u64,
    send_failed: u64,
    overrun: u64,
    /// The hosts cabled to its ports.
    hosts: Vec<HostLink>,
    /// The share of frames a host's cable loses on their way in (`lab loss`), the
    /// dice, and the frames lost so far.
    loss: f64,
    dice: ChaCha8Rng,
    lost: u64,
}

/// A host's NIC at the end of a port's cable, and the port's end of it. A NIC that
/// merges what it receives (GRO) is handed GSO super-frames as they are; one that does
/// not (a host whose DPDK reads the NIC's frames) is handed the wire's frames, the
/// kernel segmenting and checksumming at the port (its offloads off).
struct HostLink {
    host: Nic,
    port_end: Nic,
    merges: Option<bool>,
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

impl DataPort {
    /// The next frame leaves the queues at `at`.
    fn depart(&mut self, at: u64) {
        if let Some(segment) = self.port.dequeue(at) {
            self.held_since.get_or_insert(at);
            self.left.push(segment);
        }
    }
}

impl Switch {
    /// The switch whose namespace the calling thread is in.
    pub fn open(
        device_dir: &Path,
        counters: &Path,
        qos_off: &Path,
        shape: PortShape,
    ) -> Result<Switch, LabError> {
        let ifaces = interfaces()?;
        let device = Device::at(device_dir);
        let qos = device.qos();
        let mut ports = Vec::new();
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
                bridge = Some((
                    packet_socket(iface.index, ETH_P_ARP, false)?,
                    packet_socket(iface.index, 0, false)?,
                    i,
                ));
                continue;
            }
            // Only a tap on every protocol sees a bridge port's frames before the
            // bridge takes them.
            let qos_port = iface.alias.clone().unwrap_or_else(|| iface.name.clone());
            let port_qos = qos
                .port(&qos_port)
                .cloned()
                .unwrap_or_else(factory_queueing);
            ports.push(DataPort {
                iface: i,
                socket: packet_socket(iface.index, ETH_P_ALL, true)?,
                port: Port::new(port_qos, shape.rate, shape.buffer_bytes, iface.index as u64),
                qos_port,
                arriving: BinaryHeap::new(),
                left: Vec::new(),
                held_since: None,
                received_until: 0,
            });
        }
        let mut switch = Switch {
            running: device.running_file(),
            device,
            ifaces,
            ports,
            bridge,
            routes: Vec::new(),
            neighbours: HashMap::new(),
            host_ports: HashMap::new(),
            asked: HashMap::new(),
            config_stamp: None,
            qos_off: qos_off.to_path_buf(),
            counters: counters.to_path_buf(),
            rate: shape.rate,
            order: 0,
            no_route: 0,
            no_neighbour: 0,
            send_failed: 0,
            overrun: 0,
            hosts: Vec::new(),
            loss: 0.0,
            dice: ChaCha8Rng::from_os_rng(),
            lost: 0,
        };
        switch.reload_if_changed();
        Ok(switch)
    }

    /// Every socket frames arrive on, to wait on.
    pub fn sockets(&self) -> impl Iterator<Item = libc::c_int> + '_ {
        let ports = self.ports.iter().map(|p| p.socket.as_raw_fd());
        ports.chain(self.bridge.iter().map(|(arp, _, _)| arp.as_raw_fd()))
    }

    /// Watches the NICs of `hosts` (cabled to ports of this switch, whose namespace is
    /// `namespace`).
    pub fn watch_hosts(&mut self, namespace: &str, hosts: &[&Member]) -> Result<(), LabError> {
        for host in hosts {
            let Some(cable) = &host.cable else { continue };
            self.hosts.push(HostLink {
                host: Nic::open(&Namespace::named(&host.namespace), &cable.nic)?,
                port_end: Nic::open(&Namespace::named(namespace), &cable.port)?,
                merges: None,
            });
        }
        self.follow_host_nics();
        Ok(())
    }

    /// Sets each host port's segmentation to what its host's NIC takes, where that
    /// changed.
    pub fn follow_host_nics(&mut self) {
        for link in &mut self.hosts {
            let Ok(merges) = link.host.gro() else {
                continue;
            };
            if link.merges != Some(merges) && link.port_end.set_segmentation(merges).is_ok() {
                link.merges = Some(merges);
            }
        }
    }

    /// Routes and queueing again, when the running configuration changed or the lab's
    /// queueing was switched off or on.
    pub fn reload_if_changed(&mut self) {
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
            crate::qos::SwitchQos::default()
        } else {
            self.device.qos()
        };
        for data in &mut self.ports {
            let port_qos = qos
                .port(&data.qos_port)
                .cloned()
                .unwrap_or_else(factory_queueing);
            data.port.set_qos(port_qos);
        }
    }

    /// The share of frames each host's cable loses from now on (0: none).
    pub fn set_loss(&mut self, loss: f64) {
        self.loss = loss;
    }

    pub fn write_counters(&self) {
        let queues: BTreeMap<&str, &[QueueCounters; 8]> = self
            .ports
            .iter()
            .map(|p| (p.qos_port.as_str(), p.port.counters()))
            .collect();
        let report = serde_json::json!({
            "ports": queues,
            "no_route": self.no_route,
            "no_neighbour": self.no_neighbour,
            "send_failed": self.send_failed,
            "overrun": self.overrun,
            "lost": self.lost,
        });
        let partial = self.counters.with_extension("partial");
        if let Some(dir) = self.counters.parent() {
            let _ = fs::create_dir_all(dir);
        }
        if fs::write(&partial, report.to_string()).is_ok() {
            let _ = fs::rename(&partial, &self.counters);
        }
    }

    /// Reads what the ports and the bridge hold (a batch each) and routes it: those
    /// `ready` says have something (one entry per [`Switch::sockets`], in order).
    pub fn receive(&mut self, inbox: &mut Inbox, now: u64, ready: &[bool]) {
        for p in (0..self.ports.len()).filter(|&p| ready[p]) {
            let frames: Vec<SuperFrame> = inbox
                .receive(&self.ports[p].socket, true)
                .into_iter()
                .filter_map(|(vnet, frame)| SuperFrame::new(Vnet::parse(&vnet)?, frame))
                .collect();
            for frame in frames {
                self.handle(p, frame, now);
            }
        }
        let replies: Vec<(usize, Vec<u8>)> = match &self.bridge {
            Some((arp, _, iface)) if ready[self.ports.len()] => (inbox.receive(arp, false))
                .into_iter()
                .map(|(_, frame)| (*iface, frame))
                .collect(),
            _ => Vec::new(),
        };
        for (iface, reply) in replies {
            self.learn(iface, &reply);
        }
    }

    /// Whether data port `p` is a host's: a port of the rack's bridge.
    fn host_port(&self, p: usize) -> bool {
        self.ifaces[self.ports[p].iface].master.is_some()
    }

    fn handle(&mut self, p: usize, frame: SuperFrame, now: u64) {
        let iface = self.ports[p].iface;
        let bytes = &frame.frame;
        if self.host_port(p) {
            // A host port: the host behind it is reached through it.
            let source: [u8; 6] = bytes[6..12].try_into().expect("six bytes");
            self.host_ports.insert(source, p);
        }
        match u16::from_be_bytes([bytes[12], bytes[13]]) {
            ETH_P_ARP => {
                let arp = bytes.to_vec();
                self.learn(iface, &arp);
            }
            ETH_P_IP => self.forward(p, frame, now),
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
        let on_link = self
            .subnets(iface)
            .is_some_and(|nets| nets.iter().any(|n| n.contains(&ip) && n.addr() != ip));
        if on_link {
            self.neighbours.insert(ip, mac);
        }
    }

    /// The subnets of an interface, or of its bridge for a bridge port.
    fn subnets(&self, iface: usize) -> Option<&[Ipv4Net]> {
        match &self.ifaces[iface].master {
            Some(bridge) => self
                .ifaces
                .iter()
                .find(|i| &i.name == bridge)
                .map(|i| &i.nets[..]),
            None => Some(&self.ifaces[iface].nets),
        }
    }

    /// The MAC frames to this switch carry on an interface: its own, or its bridge's.
    fn own_mac(&self, iface: usize) -> Option<[u8; 6]> {
        match &self.ifaces[iface].master {
            Some(bridge) => self
                .ifaces
                .iter()
                .find(|i| &i.name == bridge)
                .map(|i| i.mac),
            None => Some(self.ifaces[iface].mac),
        }
    }

    /// Routes (or, between the hosts of the rack, switches) a frame that came in on
    /// port `p` into the queues of the port it leaves by.
    fn forward(&mut self, p: usize, mut frame: SuperFrame, now: u64) {
        let iface = self.ports[p].iface;
        let destination: [u8; 6] = frame.frame[..6].try_into().expect("six bytes");
        if self.own_mac(iface) != Some(destination) {
            if self.host_port(p) && destination[0] & 1 == 0 {
                let out = self.host_ports.get(&destination).copied();
                self.queue_to_hosts(out, p, frame, now);
            }
            return;
        }
        let Ok(ip) = Ipv4Packet::new_checked(&frame.frame[14..]) else {
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
        let source_mac = self.ifaces[out_iface].mac;
        frame.frame[..6].copy_from_slice(&next_mac);
        frame.frame[6..12].copy_from_slice(&source_mac);
        let Ok(mut ip) = Ipv4Packet::new_checked(&mut frame.frame[14..]) else {
            return;
        };
        if !ip.decrement_ttl() {
            return;
        }
        // Through the port itself, or (the rack's bridge) the host port the host is on.
        match self.ports.iter().position(|d| d.iface == out_iface) {
            Some(out) => self.queue(out, p, frame, now),
            None => {
                let out = self.host_ports.get(&next_mac).copied();
                self.queue_to_hosts(out, p, frame, now);
            }
        }
    }

    /// Into the queues of host port `out`, or, for a host not heard from yet, of every
    /// host port but the one it came in on (as a switch floods an unknown unicast).
    fn queue_to_hosts(&mut self, out: Option<usize>, came_in: usize, frame: SuperFrame, now: u64) {
        match out {
            Some(out) if out != came_in => self.queue(out, came_in, frame, now),
            Some(_) => {}
            None => {
                let hosts: Vec<usize> = (0..self.ports.len())
                    .filter(|&q| q != came_in && self.host_port(q))
                    .collect();
                if hosts.is_empty() {
                    self.no_neighbour += 1;
                } else {
                    self.arrive(&hosts, came_in, &Rc::new(frame), now);
                }
            }
        }
    }

    fn queue(&mut self, out: usize, came_in: usize, frame: SuperFrame, now: u64) {
        self.arrive(&[out], came_in, &Rc::new(frame), now);
    }

    /// The frame's segments arrive at the queues of ports `outs` as the wire of port
    /// `came_in` brings them: one after another at the port rate, after what it
    /// brought before (a GSO super-frame leaves its host back to back, at the NIC's
    /// rate), the first one's last bit now at the earliest. A frame that would arrive
    /// more than [`BACKLOG_NS`] from now is dropped as an overrun. From a host's cable,
    /// each of the wire's frames is lost with the probability `lab loss` set: it took
    /// its time on the wire, and never reaches a queue.
    fn arrive(&mut self, outs: &[usize], came_in: usize, frame: &Rc<SuperFrame>, now: u64) {
        let first = wire_ns(frame.segment_bytes(0), self.rate);
        let mut at = now.max(self.ports[came_in].received_until + first);
        if at > now + BACKLOG_NS {
            self.overrun += frame.segments() as u64;
            return;
        }
        let lossy = self.loss > 0.0 && self.host_port(came_in);
        for index in 0..frame.segments() {
            if index > 0 {
                at += wire_ns(frame.segment_bytes(index), self.rate);
            }
            if lossy && self.dice.random::<f64>() < self.loss {
                self.lost += 1;
                continue;
            }
            for &out in outs {
                self.order += 1;
                self.ports[out].arriving.push(Reverse(Arrival {
                    at,
                    order: self.order,
                    segment: Segment {
                        frame: frame.clone(),
                        index: index as u16,
                        ce: false,
                    },
                }));
            }
        }
        self.ports[came_in].received_until = at;
    }

    /// Runs every port's queues up to `now`: arrivals and departures in the order of
    /// their times, exactly as the port's model says.
    pub fn advance(&mut self, now: u64) {
        for data in &mut self.ports {
            loop {
                let arrival = data.arriving.peek().map(|a| a.0.at).filter(|at| *at <= now);
                let departure = data.port.next_departure().filter(|at| *at <= now);
                match (arrival, departure) {
                    (Some(a), Some(d)) if d <= a => data.depart(d),
                    (Some(a), _) => {
                        let Reverse(arrival) = data.arriving.pop().expect("peeked");
                        data.port.enqueue(arrival.segment, a);
                    }
                    (None, Some(d)) => data.depart(d),
                    (None, None) => break,
                }
            }
        }
    }

    /// Sends what left each port's queues, as few frames as GRO would have made of
    /// them: a port holds what left while its queues are busy, up to [`HOLD_NS`] or
    /// [`HOLD_BYTES`], so that a flow crosses the next hop in large frames (each frame
    /// costs the kernel about as much as its bytes); an idle port sends at once.
    pub fn transmit(&mut self, now: u64) {
        for data in &mut self.ports {
            let Some(since) = data.held_since else {
                continue;
            };
            let bytes: u64 = data.left.iter().map(Queued::bytes).sum();
            let idle = data.port.next_departure().is_none() && data.arriving.is_empty();
            if !idle && now < since + HOLD_NS && bytes < HOLD_BYTES {
                continue;
            }
            data.held_since = None;
            let messages = Message::group(data.left.drain(..));
            let heads: Vec<Vec<u8>> = messages.iter().map(Message::head).collect();
            let frames: Vec<Vec<&[u8]>> = heads
                .iter()
                .zip(&messages)
                .map(|(head, message)| {
                    std::iter::once(&head[..])
                        .chain(message.payloads())
                        .collect()
                })
                .collect();
            let index = self.ifaces[data.iface].index;
            self.send_failed += send_all(&data.socket, index, &frames);
        }
    }

    /// When a port next has something to do: an arrival, a departure, or sending what
    /// it holds.
    pub fn next_event(&self) -> Option<u64> {
        self.ports
            .iter()
            .flat_map(|d| {
                [
                    d.arriving.peek().map(|a| a.0.at),
                    d.port.next_departure(),
                    d.held_since.map(|at| at + HOLD_NS),
                ]
            })
            .flatten()
            .min()
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
        // A port's socket takes a vnet header first (no offload asked); the bridge's
        // takes the frame alone.
        let refused = match self.ports.iter().find(|d| d.iface == iface) {
            Some(data) => send_all(&data.socket, out.index, &[vec![&[0u8; VNET_LEN], &frame]]),
            None => match &self.bridge {
                Some((_, socket, _)) => send_all(socket, out.index, &[vec![&frame]]),
                None => return,
            },
        };
        self.send_failed += refused;
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
fn factory_queueing() -> crate::qos::PortQos {
    crate::qos::PortQos::mapped([0; 64])
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
