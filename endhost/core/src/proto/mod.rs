//! The transport's protocol core, sans I/O (in the manner of quinn-proto): it never
//! touches a socket or a clock. A driver feeds it datagrams, control messages and the
//! time, and takes from it datagrams to send, control messages to send, timers and
//! completions. The kernel-UDP and DPDK datapaths drive the same core.
//!
//! What it does (MLT §4.2):
//! - **Order-free packets.** A message's packets carry the receiver's handle for the
//!   message and their sequence; each is placed on arrival (copied, or added for a
//!   reduction), in any order. Duplicates are recognised by a bitmap and placed once.
//! - **Tagging.** Each data packet's IP TOS holds its layer's DSCP and, when its mean
//!   |gradient| is above its send's threshold (a quantile of the send's own packet
//!   means, taken when the send starts, after any reduction), ECT(0).
//! - **Exactness.** A receive marks the values of packets it never got, and of packets
//!   that came flagged INEXACT, in the buffer's [`Inexact`] mask; a send flags a packet
//!   INEXACT when the mask reaches any of its values. The collective's result so knows
//!   which of its values no loss reached.
//! - **Bounded-loss delivery.** A receiver first tells the sender it is ready (the
//!   rendezvous, over the control channel), with the handle its packets will carry. It
//!   sends STOP once (1 − p) of the message has arrived. After its last packet the
//!   sender PROBEs; the receiver answers with a bitmap of what is missing; the sender
//!   retransmits it and probes again, until STOP.
//!   A probe that gets no answer is repeated after an RTO from the RTT samples. With
//!   p = 0 delivery is exact.
//! - **Early exit** (opt-in, `timeouts.early_exit`; loss bound above 0): once a sender's first
//!   pass is over (its last packet or its probe arrived), its receive waits for the
//!   missing data at most four times the median recovery seen lately (250 ms — a TCP
//!   retransmission of the control channel — to 2 s), then ends short of its bound
//!   rather than hold the collective up (OptiReduce's tail cut; counted in
//!   `bound_missed`). With p = 0 a receive never ends early.
//! - **Rate control.** Per destination, TIMELY-like ([`rate`]); the sender asks for an
//!   acknowledgement of every `ack_every`-th first-pass packet and keeps the time it
//!   starts to leave the host's NIC, so an ACK (message and sequence echoed) gives an
//!   RTT sample.
//! - **Path spraying.** Packets to a peer go round-robin over its path addresses.

pub mod class_probe;
pub mod control;
pub mod counters;
mod inexact;
mod message;
pub mod rate;
pub mod tagging;
mod transmit;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use crate::config::{RateControl, Tagging};
use crate::wire::{Flags, HEADER_LEN, Header, Kind, MessageId, Packet, job_tag};
pub use control::Control;
pub use counters::{Counters, LinkTime};
pub use inexact::{Inexact, InexactMask};
use message::{
    Incoming, Outgoing, PROBE_FLOOR_US, PROBE_HOLD_US, PROBE_SETTLE_US, probe_wait_ns,
    ranges_are_sound,
};
use rate::{NicQueue, Pacer, Timely};
use tagging::Classes;

/// Tensor memory shared by a collective and its messages (one thread owns both).
pub type Buffer = Rc<RefCell<Vec<f32>>>;

/// Bytes of IPv4 and UDP headers in front of ours.
pub const IP_UDP_HEADERS: usize = 28;
/// The Ethernet header, which a link's rate is spent on too.
const ETHERNET_HEADER: usize = 14;

/// Bytes a data packet of `payload_elems` values takes on the link.
fn frame_bytes(payload_elems: usize) -> usize {
    ETHERNET_HEADER + IP_UDP_HEADERS + HEADER_LEN + payload_elems * 4
}

/// A range of elements of a buffer, and the mask of the buffer's values a loss reached.
#[derive(Debug, Clone)]
pub struct Region {
    pub buffer: Buffer,
    pub start: usize,
    pub len: usize,
    pub inexact: Inexact,
}

impl Region {
    /// A range of a buffer no loss has reached yet (a mask of its own).
    pub fn new(buffer: Buffer, start: usize, len: usize) -> Region {
        Region {
            buffer,
            start,
            len,
            inexact: Inexact::default(),
        }
    }
}

/// What a receive does with arriving values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Overwrite: missing ranges keep what the buffer held (parameters).
    Copy,
    /// Add to what the buffer holds: missing ranges add nothing (gradients, as zeros).
    Add,
}

/// Which layer each element belongs to: sorted (first element, layer) breakpoints over
/// the whole buffer.
pub type LayerMap = Rc<Vec<(usize, u16)>>;

/// Settings of an endpoint.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    pub job: u32,
    pub rank: u16,
    pub world: u16,
    /// Largest IP packet; the payload per packet follows from it.
    pub mtu: u16,
    pub rate: RateControl,
    pub line_bps: f64,
    pub tagging: Tagging,
    /// Path addresses of each rank (index = rank; this host's own entry is unused).
    pub paths: Vec<usize>,
    /// End a receive short of its bound when its sender has finished its first pass
    /// and the missing data has not come within an adaptive grace period (off: every
    /// receive gets 1 − p).
    pub early_exit: bool,
    /// Where this endpoint's message handles start. The driver gives a random one, so a
    /// restarted endpoint's handles differ from its predecessor's and a stray packet
    /// from before the restart finds no receive.
    pub handle_seed: u32,
}

impl EndpointConfig {
    /// f32 values per packet: what fits the MTU after the IP, UDP and our headers.
    pub fn payload_elems(&self) -> usize {
        (usize::from(self.mtu).saturating_sub(IP_UDP_HEADERS + HEADER_LEN) / 4).max(1)
    }
}

/// A datagram to send, written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub peer: u16,
    /// Index into the peer's path addresses.
    pub path: usize,
    /// The IP TOS byte: DSCP and ECN.
    pub tos: u8,
    pub len: usize,
}

/// Completions.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The receiver stopped the message (or it was empty).
    SendDone { peer: u16, id: MessageId },
    /// Enough of the message arrived; `delivered` is the fraction of its elements.
    RecvDone {
        peer: u16,
        id: MessageId,
        delivered: f64,
    },
}

/// Recovery times kept for the early-exit grace, and its bounds.
const RECENT_RECOVERIES: usize = 16;
const EARLY_EXIT_FLOOR_NS: u64 = 250_000_000;
const EARLY_EXIT_CAP_NS: u64 = 2_000_000_000;

/// Acknowledgement requests a sender remembers per peer; older ones are forgotten
/// (their ACKs were lost).
const ACK_REQUESTS_KEPT: usize = 256;

/// Packets a paced flow gathers tokens for before the driver wakes to send them.
pub const PACING_BATCH: usize = 16;

#[derive(Debug)]
struct Peer {
    timely: Timely,
    pacer: Pacer,
    next_path: usize,
    paths: usize,
    /// First-pass packets since the last that asked for an acknowledgement.
    since_ack_request: u32,
    /// Packets that asked for an acknowledgement: (message, sequence, time it starts
    /// to leave the host's NIC).
    ack_requests: VecDeque<(u32, u32, u64)>,
    /// Sends to this peer that may have data, oldest first.
    queue: VecDeque<(u64, MessageId)>,
    /// Had nothing to send since its pacer last sent: the pacer rests before the next.
    resting: bool,
}

/// One host's end of the transport.
pub struct Endpoint {
    config: EndpointConfig,
    payload_elems: usize,
    classes: Classes,
    peers: Vec<Peer>,
    sends: HashMap<(u16, MessageId), Outgoing>,
    /// Receives by the handle their packets carry.
    recvs: HashMap<u32, Incoming>,
    recv_handles: HashMap<(u16, MessageId), u32>,
    next_handle: u32,
    /// Peers with sends queued, served round-robin; each peer's sends go oldest first,
    /// so a pipelined collective's early pieces finish early and unlock the next step.
    rotation: VecDeque<u16>,
    /// The host's own link: all peers together never exceed its line rate.
    link: Pacer,
    /// What the host's NIC still has to send of what it was handed.
    nic: NicQueue,
    next_order: u64,
    /// READYs that came before the send was posted, with their handles.
    early_ready: HashMap<(u16, MessageId), u32>,
    /// Acknowledgements to send: (peer, message, sequence).
    acks: VecDeque<(u16, u32, u32)>,
    /// Class probe bursts still to send, first asked first.
    class_probes: VecDeque<class_probe::Burst>,
    /// What arrived from peers, indexed by DSCP: counted per datagram, so one index.
    arrivals: [counters::DscpArrivals; 64],
    control: VecDeque<(u16, Control)>,
    events: VecDeque<Event>,
    counters: Counters,
    /// How long recent receives took from their sender's first pass to done.
    recoveries: VecDeque<u64>,
    /// What the link was doing at the last poll, and since when.
    activity: Activity,
    activity_since: u64,
}

/// What the host's link is doing (see [`LinkTime`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activity {
    Busy,
    RateLimited,
    Idle,
}

impl Endpoint {
    pub fn new(config: EndpointConfig, now: u64) -> Endpoint {
        let peers = (0..config.world)
            .map(|rank| Peer {
                timely: Timely::new(config.rate, config.line_bps),
                pacer: Pacer::new(now),
                next_path: 0,
                paths: config
                    .paths
                    .get(usize::from(rank))
                    .copied()
                    .unwrap_or(1)
                    .max(1),
                since_ack_request: 0,
                ack_requests: VecDeque::new(),
                queue: VecDeque::new(),
                resting: true,
            })
            .collect();
        Endpoint {
            payload_elems: config.payload_elems(),
            classes: Classes::new(&config.tagging),
            counters: Counters::new(config.world),
            peers,
            sends: HashMap::new(),
            recvs: HashMap::new(),
            recv_handles: HashMap::new(),
            next_handle: config.handle_seed,
            rotation: VecDeque::new(),
            link: Pacer::new(now),
            nic: NicQueue::new(Pacer::bucket_ns(
                config.line_bps,
                frame_bytes(config.payload_elems()),
            )),
            next_order: 0,
            early_ready: HashMap::new(),
            acks: VecDeque::new(),
            class_probes: VecDeque::new(),
            arrivals: std::array::from_fn(|dscp| counters::DscpArrivals {
                dscp: dscp as u8,
                ..Default::default()
            }),
            control: VecDeque::new(),
            events: VecDeque::new(),
            recoveries: VecDeque::new(),
            activity: Activity::Idle,
            activity_since: now,
            config,
        }
    }

    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    pub fn counters(&self) -> Counters {
        let mut counters = self.counters.clone();
        for (peer, c) in self.peers.iter().zip(&mut counters.peers) {
            c.rate_mbps = peer.timely.rate_bps() / 1e6;
            c.srtt_us = peer.timely.srtt_us();
        }
        for class in &mut counters.classes {
            class.important_fraction = class.important_sent as f64 / class.packets_sent as f64;
        }
        counters.arrivals = self.arrivals();
        let results = &mut counters.results;
        results.exact_fraction = if results.values == 0 {
            1.0
        } else {
            results.exact_values as f64 / results.values as f64
        };
        counters
    }

    /// Counts a collective's result: `values`, of which `exact` no loss reached.
    pub fn count_result(&mut self, values: u64, exact: u64) {
        self.counters.results.values += values;
        self.counters.results.exact_values += exact;
    }

    fn packets_for(&self, elems: usize) -> u32 {
        elems.div_ceil(self.payload_elems) as u32
    }

    /// Values per data packet.
    pub fn payload_elems(&self) -> usize {
        self.payload_elems
    }

    /// Sends `region` to `peer` as message `id`, once the peer is ready for it; a
    /// packet whose mean |g| is above the send's threshold (see [`tagging`], taken of
    /// the region's values now) goes ECN-capable.
    pub fn post_send(&mut self, peer: u16, id: MessageId, region: Region, layers: LayerMap) {
        let packets = self.packets_for(region.len);
        if packets == 0 {
            self.events.push_back(Event::SendDone { peer, id });
            return;
        }
        let threshold = {
            let buffer = region.buffer.borrow();
            tagging::threshold(
                &buffer[region.start..region.start + region.len],
                self.payload_elems,
                self.config.tagging.importance.quantile,
                self.config.tagging.importance.sample_fraction,
            )
        };
        let handle = self.early_ready.remove(&(peer, id));
        let order = self.next_order;
        self.next_order += 1;
        self.sends.insert(
            (peer, id),
            Outgoing {
                order,
                region,
                layers,
                threshold,
                packets,
                next: 0,
                resend: VecDeque::new(),
                queued: Vec::new(),
                handle,
                probe_deadline: None,
                unanswered: 0,
                awaiting_answer: false,
            },
        );
        if handle.is_some() {
            self.activate(peer, id);
        }
    }

    /// Queues a send that has data again (ready, or missing packets to resend).
    fn activate(&mut self, peer: u16, id: MessageId) {
        let Some(order) = self.sends.get(&(peer, id)).map(|s| s.order) else {
            return;
        };
        let queue = &mut self.peers[usize::from(peer)].queue;
        if let Err(at) = queue.binary_search(&(order, id)) {
            queue.insert(at, (order, id));
        }
        if !self.rotation.contains(&peer) {
            self.rotation.push_back(peer);
        }
    }

    /// Receives message `id` from `peer` into `region`; done once all but `loss_bound`
    /// of it has arrived. Tells the peer to start.
    pub fn post_recv(
        &mut self,
        peer: u16,
        id: MessageId,
        region: Region,
        place: Place,
        loss_bound: f64,
    ) {
        let packets = self.packets_for(region.len);
        let need_elems = ((1.0 - loss_bound.clamp(0.0, 1.0)) * region.len as f64).ceil() as usize;
        if packets == 0 {
            self.events.push_back(Event::RecvDone {
                peer,
                id,
                delivered: 1.0,
            });
            return;
        }
        let handle = self.next_handle;
        self.next_handle = self.next_handle.wrapping_add(1);
        if let Some(old) = self.recv_handles.insert((peer, id), handle) {
            self.recvs.remove(&old);
        }
        self.recvs.insert(
            handle,
            Incoming {
                peer,
                id,
                region,
                place,
                packets,
                bitmap: vec![0; (packets as usize).div_ceil(64)],
                received_elems: 0,
                need_elems,
                may_end_early: loss_bound > 0.0,
                pass_over_at: None,
                held_probe: None,
                answered: false,
                done: false,
            },
        );
        self.control
            .push_back((peer, Control::Ready { id, handle }));
    }

    /// Drops every message of `tensor`/`round` (a failed or abandoned collective).
    pub fn cancel(&mut self, tensor: u32, round: u32) {
        let ours = |id: &MessageId| id.tensor == tensor && id.round == round;
        self.sends.retain(|(_, id), _| !ours(id));
        self.recvs.retain(|_, recv| !ours(&recv.id));
        self.recv_handles.retain(|(_, id), _| !ours(id));
        for peer in &mut self.peers {
            peer.queue.retain(|(_, id)| !ours(id));
        }
        self.early_ready.retain(|(_, id), _| !ours(id));
    }

    /// Forgets a finished receive; later packets for it count as late.
    pub fn release_recv(&mut self, peer: u16, id: MessageId) {
        if let Some(handle) = self.recv_handles.remove(&(peer, id)) {
            self.recvs.remove(&handle);
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub fn poll_control(&mut self) -> Option<(u16, Control)> {
        self.control.pop_front()
    }

    /// A datagram that arrived from the rank `from` (whose address it came from, as
    /// the driver knows the peers' addresses; `None`: from no peer of the job). A
    /// datagram is attributed to the rank it came from, never to the rank it names:
    /// one whose rank field is not its sender's is dropped and counted. `tos` is the
    /// IP TOS byte it arrived with (its DSCP, and CE if a switch marked it).
    pub fn handle_datagram(&mut self, now: u64, from: Option<u16>, tos: u8, bytes: &[u8]) {
        let packet = match Packet::new_checked(bytes) {
            Ok(p) => p,
            Err(e) => return self.counters.dropped.wire(e),
        };
        if packet.job_tag() != job_tag(self.config.job) {
            self.counters.dropped.foreign_job += 1;
            return;
        }
        let peer = packet.rank();
        if peer >= self.config.world || peer == self.config.rank {
            self.counters.dropped.unknown_rank += 1;
            return;
        }
        if from != Some(peer) {
            self.counters.dropped.wrong_source += 1;
            return;
        }
        let header = match Header::parse(&packet) {
            Ok(header) => header,
            Err(e) => return self.counters.dropped.wire(e),
        };
        self.count_arrival(tos, header.kind);
        match header.kind {
            Kind::Ack => self.on_ack(now, peer, &header),
            Kind::Data => self.on_data(now, peer, &header, packet.payload()),
            Kind::ClassProbe => {}
        }
    }

    fn on_ack(&mut self, now: u64, peer: u16, header: &Header) {
        self.counters.peers[usize::from(peer)].acks_received += 1;
        let state = &mut self.peers[usize::from(peer)];
        // Requests before the one acknowledged lost their ACKs: forget them.
        let Some(at) = state
            .ack_requests
            .iter()
            .position(|&(m, seq, _)| (m, seq) == (header.message, header.sequence))
        else {
            return;
        };
        let (_, _, sent) = state.ack_requests[at];
        state.ack_requests.drain(..=at);
        state
            .timely
            .on_rtt(now.saturating_sub(sent) as f64 / 1_000.0);
    }

    fn on_data(&mut self, now: u64, peer: u16, header: &Header, payload: &[u8]) {
        let handle = header.message;
        let payload_elems = self.payload_elems;
        let counters = &mut self.counters.peers[usize::from(peer)];
        let Some(recv) = self.recvs.get_mut(&handle).filter(|r| r.peer == peer) else {
            counters.late += 1;
            return;
        };
        let seq = header.sequence;
        let offset_elems = (seq as usize).saturating_mul(payload_elems);
        let elems = usize::from(header.length) / 4;
        let expected = recv
            .region
            .len
            .saturating_sub(offset_elems)
            .min(payload_elems);
        if seq >= recv.packets || elems != expected {
            self.counters.dropped.out_of_range += 1;
            return;
        }
        counters.packets_received += 1;
        counters.bytes_received += u64::from(header.length);
        if header.flags.has(Flags::ACK_REQUEST) {
            self.acks.push_back((peer, handle, seq));
        }
        if recv.done {
            counters.late += 1;
            return;
        }
        if recv.has(seq) {
            counters.duplicates += 1;
            return;
        }
        recv.bitmap[seq as usize / 64] |= 1 << (seq % 64);
        {
            let mut buffer = recv.region.buffer.borrow_mut();
            let start = recv.region.start + offset_elems;
            let target = &mut buffer[start..start + elems];
            let values = payload
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")));
            match recv.place {
                Place::Copy => target.iter_mut().zip(values).for_each(|(t, v)| *t = v),
                Place::Add => target.iter_mut().zip(values).for_each(|(t, v)| *t += v),
            }
        }
        {
            let values = recv.region.start + offset_elems;
            let mut inexact = recv.region.inexact.borrow_mut();
            if header.flags.has(Flags::INEXACT) {
                inexact.mark(values..values + elems);
            } else if recv.place == Place::Copy {
                inexact.clear(values..values + elems);
            }
        }
        recv.received_elems += elems;
        let last = header.flags.has(Flags::LAST);
        if last && recv.pass_over_at.is_none() {
            recv.pass_over_at = Some(now);
        }
        let probe_waits = last && recv.held_probe.is_some();
        if recv.received_elems >= recv.need_elems {
            self.complete_recv(now, handle);
        } else if probe_waits {
            self.answer_probe(handle);
        }
    }

    /// Answers the sender's probe of a receive with the packets it still misses.
    fn answer_probe(&mut self, handle: u32) {
        let Some(recv) = self.recvs.get_mut(&handle) else {
            return;
        };
        recv.held_probe = None;
        recv.answered = true;
        self.counters.bitmaps_sent += 1;
        let missing = recv.missing(recv.wanted(self.payload_elems));
        self.control.push_back((
            recv.peer,
            Control::Bitmap {
                id: recv.id,
                missing,
            },
        ));
    }

    /// Ends a receive: STOP to its sender, completion to the caller. One that ended
    /// after its sender's first pass tells how long recovery takes.
    fn complete_recv(&mut self, now: u64, handle: u32) {
        let Some(recv) = self.recvs.get_mut(&handle) else {
            return;
        };
        recv.done = true;
        recv.mark_missing(self.payload_elems);
        if let Some(at) = recv.pass_over_at {
            if self.recoveries.len() == RECENT_RECOVERIES {
                self.recoveries.pop_front();
            }
            self.recoveries.push_back(now.saturating_sub(at));
        }
        if recv.received_elems < recv.need_elems {
            self.counters.bound_missed += 1;
        }
        let delivered = recv.received_elems as f64 / recv.region.len as f64;
        let (peer, id) = (recv.peer, recv.id);
        self.control.push_back((peer, Control::Stop(id)));
        self.events.push_back(Event::RecvDone {
            peer,
            id,
            delivered,
        });
    }

    /// How long a receive waits for missing data after its sender's first pass before
    /// it ends short of its bound: four times the median recovery seen, within bounds.
    fn early_exit_grace_ns(&self) -> u64 {
        let mut recent: Vec<u64> = self.recoveries.iter().copied().collect();
        recent.sort_unstable();
        let median = recent.get(recent.len() / 2).copied().unwrap_or(0);
        (median * 4).clamp(EARLY_EXIT_FLOOR_NS, EARLY_EXIT_CAP_NS)
    }

    /// A control message from `peer` (its connection said who it is).
    pub fn handle_control(&mut self, now: u64, peer: u16, message: Control) {
        match message {
            Control::Hello { .. } | Control::Auth { .. } => {}
            Control::Ready { id, handle } => match self.sends.get_mut(&(peer, id)) {
                Some(send) if send.handle.is_none() => {
                    send.handle = Some(handle);
                    self.activate(peer, id);
                }
                Some(_) => {}
                None => {
                    self.early_ready.insert((peer, id), handle);
                }
            },
            Control::Stop(id) => {
                if self.sends.remove(&(peer, id)).is_some() {
                    self.events.push_back(Event::SendDone { peer, id });
                }
            }
            Control::Probe(id) => {
                let live = self
                    .recv_handles
                    .get(&(peer, id))
                    .copied()
                    .filter(|handle| self.recvs.get(handle).is_some_and(|r| !r.done));
                let Some(handle) = live else {
                    self.control.push_back((peer, Control::Stop(id)));
                    return;
                };
                let recv = self.recvs.get_mut(&handle).expect("a live receive");
                recv.pass_over_at.get_or_insert(now);
                if recv.answered || recv.has_last() {
                    self.answer_probe(handle);
                } else if recv.held_probe.is_none() {
                    // Its bitmap now would ask again for the packets still in flight.
                    recv.held_probe = Some(now + (PROBE_HOLD_US * 1_000.0) as u64);
                    self.counters.probes_held += 1;
                }
            }
            Control::Bitmap { id, missing } => {
                let Some(send) = self.sends.get_mut(&(peer, id)) else {
                    return;
                };
                if !ranges_are_sound(&missing, send.packets) {
                    self.counters.bitmaps_rejected += 1;
                    return;
                }
                // A bitmap answers one probe; another (a repeat) adds nothing.
                if !send.awaiting_answer {
                    return;
                }
                send.probe_deadline = None;
                send.unanswered = 0;
                send.awaiting_answer = false;
                send.queue_missing(&missing);
                if send.resend.is_empty() {
                    // Nothing missing yet no STOP: the STOP is on its way; ask again later.
                    let rto = self.peers[usize::from(peer)].timely.rto_us(PROBE_FLOOR_US);
                    send.probe_deadline = Some(now + probe_wait_ns(rto, 0));
                } else {
                    self.activate(peer, id);
                }
            }
        }
    }

    /// When the endpoint next needs [`Endpoint::handle_timeout`] or can send again: a
    /// paced flow waits for [`PACING_BATCH`] packets' worth of tokens, so the driver
    /// wakes for batches rather than for every packet.
    pub fn next_timeout(&self) -> Option<u64> {
        let probes = self.sends.values().filter_map(|s| s.probe_deadline);
        let bytes = self.frame_bytes() * PACING_BATCH;
        let pacing = self
            .rotation
            .iter()
            .filter(|&&rank| {
                self.peers[usize::from(rank)]
                    .queue
                    .iter()
                    .any(|(_, id)| self.sends.get(&(rank, *id)).is_some_and(Outgoing::has_data))
            })
            .map(|&rank| {
                let peer = &self.peers[usize::from(rank)];
                peer.pacer.ready_at(peer.timely.rate_bps(), bytes)
            })
            .min()
            .map(|at| at.max(self.link.ready_at(self.config.line_bps, bytes)));
        let grace = self.early_exit_grace_ns();
        // One pass over the receives (this runs at every poll): an early exit's
        // deadline and a held probe's.
        let receives = self.recvs.values().filter(|r| !r.done).flat_map(|r| {
            let early_exit = (self.config.early_exit && r.may_end_early)
                .then(|| r.pass_over_at.map(|at| at + grace))
                .flatten();
            [early_exit, r.held_probe].into_iter().flatten()
        });
        probes.chain(pacing).chain(receives).min()
    }

    /// Repeats probes that got no answer in time, answers probes held for a last
    /// packet that has not come, and ends receives whose grace after the sender's first
    /// pass is over (with early exit on).
    pub fn handle_timeout(&mut self, now: u64) {
        let held_over: Vec<u32> = self
            .recvs
            .iter()
            .filter(|(_, r)| !r.done && r.held_probe.is_some_and(|at| at <= now))
            .map(|(handle, _)| *handle)
            .collect();
        for handle in held_over {
            self.answer_probe(handle);
        }
        if self.config.early_exit {
            let grace = self.early_exit_grace_ns();
            let overdue: Vec<u32> = self
                .recvs
                .iter()
                .filter(|(_, r)| {
                    r.may_end_early && !r.done && r.pass_over_at.is_some_and(|at| at + grace <= now)
                })
                .map(|(handle, _)| *handle)
                .collect();
            for handle in overdue {
                self.complete_recv(now, handle);
            }
        }
        for ((peer, id), send) in &mut self.sends {
            if send.probe_deadline.is_some_and(|d| d <= now) && send.resend.is_empty() {
                if send.awaiting_answer {
                    send.unanswered += 1;
                }
                send.awaiting_answer = true;
                let rto = self.peers[usize::from(*peer)].timely.rto_us(PROBE_FLOOR_US);
                send.probe_deadline = Some(now + probe_wait_ns(rto, send.unanswered));
                self.control.push_back((*peer, Control::Probe(*id)));
                self.counters.probes_sent += 1;
            }
        }
    }

    /// Whether anything is waiting to go out right now (acknowledgements or control).
    pub fn has_pending_output(&self) -> bool {
        !self.acks.is_empty() || !self.control.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(world: u16, line_bps: f64) -> Endpoint {
        endpoint_of(0, world, line_bps)
    }

    fn endpoint_of(rank: u16, world: u16, line_bps: f64) -> Endpoint {
        let config = EndpointConfig {
            job: 1,
            rank,
            world,
            mtu: 1500,
            rate: RateControl::default(),
            line_bps,
            tagging: Tagging {
                control_dscp: 46,
                layers: 1,
                classes: Vec::new(),
                importance: crate::config::Importance::default(),
            },
            paths: vec![1; usize::from(world)],
            early_exit: false,
            handle_seed: 0,
        };
        Endpoint::new(config, 0)
    }

    fn id(step: u16) -> MessageId {
        MessageId {
            tensor: 1,
            round: 0,
            step,
        }
    }

    /// Posts a send of `packets` full packets to `peer` and lets the peer say READY.
    fn send(endpoint: &mut Endpoint, peer: u16, step: u16, packets: usize) {
        let len = packets * endpoint.payload_elems;
        let region = Region::new(Rc::new(RefCell::new(vec![1.0; len])), 0, len);
        endpoint.post_send(peer, id(step), region, Rc::new(Vec::new()));
        let handle = u32::from(step);
        endpoint.handle_control(
            0,
            peer,
            Control::Ready {
                id: id(step),
                handle,
            },
        );
    }

    /// Everything sent up to `until_ns`, polling every `tick_ns`: (time, peer, step;
    /// `send` makes the step the receiver's handle).
    fn drain(endpoint: &mut Endpoint, until_ns: u64, tick_ns: u64) -> Vec<(u64, u16, u16)> {
        let mut sent = Vec::new();
        let mut buf = [0u8; 2048];
        let mut now = 0;
        while now <= until_ns {
            while let Some(tx) = endpoint.poll_transmit(now, &mut buf) {
                let packet = Packet::new_checked(&buf[..tx.len]).expect("our own packet");
                sent.push((now, tx.peer, packet.message() as u16));
            }
            now += tick_ns;
        }
        sent
    }

    /// A burst handed over at once keeps the link busy for its wire time, though the
    /// endpoint has nothing left to send the moment it is out.
    #[test]
    fn a_burst_counts_as_busy_while_the_nic_sends_it() {
        let mut endpoint = endpoint(2, 10e9);
        send(&mut endpoint, 1, 0, 12);
        // Idle long enough that the pacer resumes with a batch: all 12 at once.
        let (mut buf, at) = ([0u8; 2048], 5_000_000);
        let burst = std::iter::from_fn(|| endpoint.poll_transmit(at, &mut buf)).count();
        assert_eq!(burst, 12);
        endpoint.poll_transmit(at + 1_000_000, &mut buf);
        let link = endpoint.counters().link;
        let wire_ns = 12 * endpoint.frame_bytes() as u64 * 8 / 10;
        assert!(
            link.busy_ns.abs_diff(wire_ns) <= 12,
            "{link:?} vs {wire_ns} ns"
        );
        assert_eq!(link.busy_ns + link.idle_ns, at + 1_000_000, "{link:?}");
        assert_eq!(link.rate_limited_ns, 0);
    }

    #[test]
    fn a_peers_older_sends_go_first_and_peers_take_turns() {
        let mut endpoint = endpoint(3, 10e9);
        send(&mut endpoint, 1, 0, 10);
        send(&mut endpoint, 1, 1, 10);
        send(&mut endpoint, 2, 0, 10);
        let sent = drain(&mut endpoint, 1_000_000, 1_000);
        assert_eq!(sent.len(), 30);
        let to_one: Vec<u16> = sent.iter().filter(|s| s.1 == 1).map(|s| s.2).collect();
        assert_eq!(to_one, [vec![0; 10], vec![1; 10]].concat(), "step 0 first");
        // While both peers have data they alternate.
        let first: Vec<u16> = sent.iter().take(20).map(|s| s.1).collect();
        assert_eq!(first.iter().filter(|&&p| p == 2).count(), 10, "{first:?}");
    }

    #[test]
    fn all_peers_together_keep_to_the_line_rate() {
        let line_bps = 1e9;
        let mut endpoint = endpoint(4, line_bps);
        for peer in 1..4 {
            send(&mut endpoint, peer, 0, 2_000);
        }
        let window_ns = 20_000_000;
        let sent = drain(&mut endpoint, window_ns, 10_000);
        let bytes = (sent.len() * endpoint.frame_bytes()) as f64;
        let line_bytes = line_bps / 8.0 * window_ns as f64 / 1e9;
        // Each peer's own pacer would allow the line rate to each: three times as much.
        assert!(
            bytes <= line_bytes * 1.02,
            "{bytes} bytes in a window of {line_bytes}"
        );
        assert!(
            bytes >= line_bytes * 0.95,
            "{bytes} bytes in a window of {line_bytes}"
        );
        for peer in 1..4 {
            let share = sent.iter().filter(|s| s.1 == peer).count() as f64 / sent.len() as f64;
            assert!((share - 1.0 / 3.0).abs() < 0.02, "peer {peer}: {share}");
        }
    }

    /// A driver that wakes later than a batch takes (400 µs apart; a batch is 194 µs
    /// at 1 Gbit/s) still keeps the line busy: each wake-up sends what it missed.
    #[test]
    fn wake_ups_late_by_less_than_the_allowance_lose_no_line_time() {
        let line_bps = 1e9;
        let mut endpoint = endpoint(2, line_bps);
        send(&mut endpoint, 1, 0, 10_000);
        let window_ns = 20_000_000;
        let sent = drain(&mut endpoint, window_ns, 400_000);
        let bytes = (sent.len() * endpoint.frame_bytes()) as f64;
        let line_bytes = line_bps / 8.0 * window_ns as f64 / 1e9;
        assert!(bytes >= line_bytes * 0.97, "{bytes} of {line_bytes}");
        assert!(bytes <= line_bytes * 1.03, "{bytes} of {line_bytes}");
        assert_eq!(endpoint.counters().link.late_ns, 0);
        // Beyond the allowance the line time is lost, and counted.
        let mut too_late = super::tests::endpoint(2, line_bps);
        send(&mut too_late, 1, 0, 10_000);
        let sent = drain(&mut too_late, window_ns, 2_000_000);
        let bytes = (sent.len() * too_late.frame_bytes()) as f64;
        assert!(bytes < line_bytes * 0.5, "{bytes} of {line_bytes}");
        assert!(too_late.counters().link.late_ns > window_ns / 2);
    }

    /// A flow that had nothing to send starts again with one batch, however long the
    /// pause: the burst the plan's queue model assumes. The link rests when nothing at
    /// all was sent (two peers resuming share one batch), and a peer rests while others
    /// keep the link busy.
    #[test]
    fn a_flow_resumes_after_a_pause_with_one_batch() {
        let burst = |endpoint: &mut Endpoint, now: u64| {
            let mut buf = [0u8; 2048];
            let mut to = [0usize; 3];
            while let Some(tx) = endpoint.poll_transmit(now, &mut buf) {
                to[usize::from(tx.peer)] += 1;
            }
            to
        };
        let mut endpoint = endpoint(3, 1e9);
        send(&mut endpoint, 1, 0, 10);
        assert_eq!(drain(&mut endpoint, 1_000_000, 100_000).len(), 10);
        // A pause of 50 ms, then sends to two peers, polled once: one batch in all.
        send(&mut endpoint, 1, 1, 200);
        send(&mut endpoint, 2, 1, 200);
        assert_eq!(
            burst(&mut endpoint, 51_000_000).iter().sum::<usize>(),
            PACING_BATCH
        );
        assert_eq!(endpoint.counters().link.late_ns, 0);

        // Peer 1 slowed by its rate control keeps data waiting (the link never idles
        // and its bucket fills); peer 2 sends, pauses 50 ms, and resumes with a batch.
        let mut busy = super::tests::endpoint(3, 1e9);
        busy.peers[1].timely = Timely::new(RateControl::default(), 10e6);
        send(&mut busy, 1, 0, 10_000);
        send(&mut busy, 2, 0, 10);
        let mut now = 0;
        while now <= 51_000_000 {
            burst(&mut busy, now);
            now += 1_000_000;
        }
        send(&mut busy, 2, 1, 200);
        assert_eq!(burst(&mut busy, now)[2], PACING_BATCH);
    }

    /// A peer slowed far below the line rate still gets its rate: its bucket holds the
    /// batch the driver waits for (at 250 µs of 100 Mbit/s it held two frames of the
    /// sixteen, and the flow sent an eighth of its rate).
    #[test]
    fn a_slow_peer_is_paced_at_its_rate_by_a_driver_that_wakes_for_batches() {
        let mut endpoint = endpoint(2, 1e9);
        let rate_bps = 100e6;
        endpoint.peers[1].timely = Timely::new(RateControl::default(), rate_bps);
        send(&mut endpoint, 1, 0, 10_000);
        let mut buf = [0u8; 2048];
        let (mut now, mut sent) = (0, 0);
        let window_ns = 100_000_000;
        while now <= window_ns {
            while endpoint.poll_transmit(now, &mut buf).is_some() {
                sent += 1;
            }
            now = endpoint.next_timeout().expect("data waits");
        }
        let bytes = (sent * endpoint.frame_bytes()) as f64;
        let rate_bytes = rate_bps / 8.0 * window_ns as f64 / 1e9;
        assert!(bytes >= rate_bytes * 0.95, "{bytes} of {rate_bytes}");
        assert!(bytes <= rate_bytes * 1.05, "{bytes} of {rate_bytes}");
    }

    /// RTT samples are timed from when a packet starts to leave the NIC: what a late
    /// wake-up hands over at once waits in the host's own queue, and rate control must
    /// not see that as the network's.
    #[test]
    fn the_rtt_excludes_the_hosts_own_nic_queue() {
        let line_bps = 1e9;
        let mut endpoint = endpoint(2, line_bps);
        send(&mut endpoint, 1, 0, 1_000);
        let mut buf = [0u8; 2048];
        // Busy from the start, then a wake-up 400 µs late: one call hands over many
        // frames at once.
        let mut now = 0;
        while now < 1_000_000 {
            while endpoint.poll_transmit(now, &mut buf).is_some() {}
            now += 100_000;
        }
        now += 400_000;
        let mut requested = Vec::new();
        let mut handed = 0;
        while let Some(tx) = endpoint.poll_transmit(now, &mut buf) {
            let packet = Packet::new_checked(&buf[..tx.len]).expect("our own packet");
            if packet.flags().has(Flags::ACK_REQUEST) {
                requested.push((handed, packet.message(), packet.sequence()));
            }
            handed += 1;
        }
        assert!(
            handed > 2 * PACING_BATCH,
            "{handed} frames handed over at once"
        );
        let &(queued_before, message, sequence) = requested.last().expect("an ACK request");
        let frame_ns = endpoint.frame_bytes() as f64 * 8e9 / line_bps;
        let ack_at = now + 1_000_000;
        let header = Header {
            kind: Kind::Ack,
            flags: Flags::default(),
            job_tag: job_tag(1),
            rank: 1,
            length: 0,
            message,
            sequence,
        };
        let mut ack = [0u8; HEADER_LEN];
        Packet::new_unchecked(&mut ack[..]).emit(&header);
        endpoint.handle_datagram(ack_at, Some(1), 0, &ack);
        let srtt_us = endpoint.counters().peers[1].srtt_us.expect("a sample");
        // The frames handed over before it, plus what was still queued from the
        // previous wake-ups (none: those were paced), leave first.
        let expected_us = (1_000_000.0 - queued_before as f64 * frame_ns) / 1_000.0;
        assert!(
            (srtt_us - expected_us).abs() < 1.0,
            "srtt {srtt_us} µs, expected {expected_us}"
        );
    }

    /// A peer that answers a probe with the same ranges over and over, or with ranges
    /// out of order, overlapping or past the message, cannot grow the resend queue
    /// past the message's packets: repeats add nothing and bad frames are refused and
    /// counted.
    #[test]
    fn a_bitmap_flood_never_grows_the_resend_queue_past_the_message() {
        let mut endpoint = endpoint(2, 10e9);
        send(&mut endpoint, 1, 0, 100);
        drain(&mut endpoint, 1_000_000, 1_000);
        let key = (1, id(0));
        let whole = Control::Bitmap {
            id: id(0),
            missing: vec![(0, 60), (60, 40)],
        };
        for _ in 0..1_000 {
            endpoint.handle_control(0, 1, whole.clone());
        }
        assert_eq!(endpoint.sends[&key].resend.len(), 100);
        let hostile = [
            vec![(0, u32::MAX); control::MAX_RANGES],
            vec![(50, 10), (10, 5)],
            vec![(0, 10), (5, 10)],
            vec![(0, 0)],
            vec![(90, 11)],
            vec![(u32::MAX, 2)],
        ];
        for missing in hostile {
            endpoint.handle_control(0, 1, Control::Bitmap { id: id(0), missing });
        }
        assert_eq!(endpoint.counters().bitmaps_rejected, 6);
        assert_eq!(endpoint.sends[&key].resend.len(), 100);
        // Sent again and probed again, a packet may be asked for again.
        let resent = drain(&mut endpoint, 2_000_000, 1_000).len();
        assert_eq!(resent, 100);
        let probe_at = endpoint.next_timeout().expect("a probe is due");
        endpoint.handle_timeout(probe_at);
        endpoint.handle_control(probe_at, 1, whole);
        assert_eq!(endpoint.sends[&key].resend.len(), 100);
    }

    /// A bitmap refused for its ranges leaves the sender waiting for a real answer: its
    /// probe is repeated when the answer does not come.
    #[test]
    fn a_refused_bitmap_does_not_stop_the_probing() {
        let mut endpoint = endpoint(2, 10e9);
        send(&mut endpoint, 1, 0, 10);
        drain(&mut endpoint, 1_000_000, 1_000);
        let probes = |e: &mut Endpoint| {
            let mut n = 0;
            while let Some((_, message)) = e.poll_control() {
                n += usize::from(matches!(message, Control::Probe(_)));
            }
            n
        };
        assert_eq!(probes(&mut endpoint), 1, "the first pass ends with a probe");
        endpoint.handle_control(
            1_000_000,
            1,
            Control::Bitmap {
                id: id(0),
                missing: vec![(5, 3), (0, 2)],
            },
        );
        assert_eq!(endpoint.counters().bitmaps_rejected, 1);
        let later = endpoint
            .next_timeout()
            .expect("the probe's timer still runs");
        endpoint.handle_timeout(later);
        assert_eq!(probes(&mut endpoint), 1, "the probe is repeated");
    }

    /// A receive of `packets` packets from rank 1 (posted at time 0), and the datagrams
    /// its sender's first pass sent, in order, none delivered yet.
    fn first_pass(packets: u32, loss_bound: f64) -> (Endpoint, Vec<Vec<u8>>) {
        let mut sender = endpoint_of(1, 2, 10e9);
        let mut receiver = endpoint_of(0, 2, 10e9);
        let len = packets as usize * sender.payload_elems;
        let region = Region::new(Rc::new(RefCell::new(vec![0.0; len])), 0, len);
        receiver.post_recv(1, id(0), region, Place::Add, loss_bound);
        let Some((1, Control::Ready { handle, .. })) = receiver.poll_control() else {
            panic!("the receive says READY");
        };
        let region = Region::new(Rc::new(RefCell::new(vec![1.0; len])), 0, len);
        sender.post_send(0, id(0), region, Rc::new(Vec::new()));
        sender.handle_control(0, 0, Control::Ready { id: id(0), handle });
        let mut buf = [0u8; 2048];
        let mut datagrams = Vec::new();
        let mut now = 0;
        while datagrams.len() < packets as usize {
            now += 1_000;
            while let Some(tx) = sender.poll_transmit(now, &mut buf) {
                datagrams.push(buf[..tx.len].to_vec());
            }
        }
        (receiver, datagrams)
    }

    /// Hands the receiver the datagrams of `seqs` at time `now`.
    fn deliver(
        receiver: &mut Endpoint,
        datagrams: &[Vec<u8>],
        now: u64,
        seqs: impl Iterator<Item = usize>,
    ) {
        for seq in seqs {
            receiver.handle_datagram(now, Some(1), 0, &datagrams[seq]);
        }
    }

    fn answers(receiver: &mut Endpoint) -> Vec<Control> {
        std::iter::from_fn(|| receiver.poll_control().map(|(_, c)| c)).collect()
    }

    /// The bitmap a receiver of 1,000 packets answers a probe with, after all but
    /// `lost` of them arrived.
    fn bitmap_after(loss_bound: f64, lost: u32) -> u32 {
        let (mut receiver, datagrams) = first_pass(1000, loss_bound);
        // Lose packets spread over the message, as random loss would.
        let arrived = (0..1000).filter(|seq| seq % 50 != 7 || seq / 50 >= lost as usize);
        deliver(&mut receiver, &datagrams, 1_000_000, arrived);
        receiver.handle_control(1_000_000, 1, Control::Probe(id(0)));
        let asked = answers(&mut receiver).into_iter().find_map(|c| match c {
            Control::Bitmap { missing, .. } => Some(missing.iter().map(|&(_, n)| n).sum()),
            _ => None,
        });
        asked.expect("a bitmap")
    }

    /// The probe takes the control channel past the data still queued behind it: a
    /// bitmap sent at once would ask again for every packet in flight. Held until the
    /// last packet lands, it names only what was lost.
    #[test]
    fn a_probe_ahead_of_the_last_packet_is_answered_when_it_lands() {
        let (mut receiver, datagrams) = first_pass(10, 0.0);
        deliver(&mut receiver, &datagrams, 1_000, (0..6).filter(|&s| s != 3));
        receiver.handle_control(2_000, 1, Control::Probe(id(0)));
        assert_eq!(
            answers(&mut receiver),
            [],
            "no answer while the last packet is out"
        );
        deliver(&mut receiver, &datagrams, 30_000, 6..10);
        let lost_only = Control::Bitmap {
            id: id(0),
            missing: vec![(3, 1)],
        };
        assert_eq!(answers(&mut receiver), [lost_only]);
        assert_eq!(receiver.counters().probes_held, 1);
        assert_eq!(receiver.counters().bitmaps_sent, 1);
        // Answered, the hold's deadline is gone.
        assert_eq!(receiver.next_timeout(), None);
    }

    /// A last packet that was lost does not leave the probe unanswered: the answer goes
    /// at the hold's end, before the sender would ask again.
    #[test]
    fn a_held_probe_is_answered_at_its_deadline_when_the_last_packet_was_lost() {
        let (mut receiver, datagrams) = first_pass(10, 0.0);
        deliver(&mut receiver, &datagrams, 1_000, (0..9).filter(|&s| s != 3));
        receiver.handle_control(2_000, 1, Control::Probe(id(0)));
        let deadline = receiver.next_timeout().expect("the hold's deadline");
        assert_eq!(deadline, 2_000 + (PROBE_HOLD_US * 1_000.0) as u64);
        receiver.handle_timeout(deadline - 1);
        assert_eq!(answers(&mut receiver), []);
        receiver.handle_timeout(deadline);
        let both = Control::Bitmap {
            id: id(0),
            missing: vec![(3, 1), (9, 1)],
        };
        assert_eq!(answers(&mut receiver), [both]);
    }

    /// A receive the data in flight completes answers its held probe with STOP alone.
    #[test]
    fn a_receive_completed_while_its_probe_is_held_only_stops() {
        let (mut receiver, datagrams) = first_pass(10, 0.0);
        deliver(&mut receiver, &datagrams, 1_000, 0..6);
        receiver.handle_control(2_000, 1, Control::Probe(id(0)));
        deliver(&mut receiver, &datagrams, 30_000, 6..10);
        assert_eq!(answers(&mut receiver), [Control::Stop(id(0))]);
        receiver.handle_timeout(10_000_000);
        assert_eq!(answers(&mut receiver), []);
        assert_eq!(receiver.counters().bitmaps_sent, 0);
    }

    /// Only the first probe waits for the last packet: by the next, the sender's resends
    /// have had time to land, and a receive with a loss bound may never ask for the
    /// last packet at all.
    #[test]
    fn a_probe_after_an_answer_is_answered_at_once() {
        let (mut receiver, datagrams) = first_pass(10, 0.0);
        deliver(&mut receiver, &datagrams, 1_000, (0..9).filter(|&s| s != 3));
        receiver.handle_control(2_000, 1, Control::Probe(id(0)));
        let deadline = receiver.next_timeout().expect("the hold's deadline");
        receiver.handle_timeout(deadline);
        assert_eq!(answers(&mut receiver).len(), 1);
        receiver.handle_control(deadline + 1_000_000, 1, Control::Probe(id(0)));
        let both = Control::Bitmap {
            id: id(0),
            missing: vec![(3, 1), (9, 1)],
        };
        assert_eq!(answers(&mut receiver), [both]);
        assert_eq!(receiver.counters().probes_held, 1);
    }

    /// A probe after the last packet landed is answered at once.
    #[test]
    fn a_probe_after_the_last_packet_is_answered_at_once() {
        let (mut receiver, datagrams) = first_pass(10, 0.0);
        deliver(
            &mut receiver,
            &datagrams,
            1_000,
            (0..10).filter(|&s| s != 3),
        );
        receiver.handle_control(2_000, 1, Control::Probe(id(0)));
        let lost = Control::Bitmap {
            id: id(0),
            missing: vec![(3, 1)],
        };
        assert_eq!(answers(&mut receiver), [lost]);
        assert_eq!(receiver.counters().probes_held, 0);
    }

    #[test]
    fn a_bitmap_asks_for_what_the_bound_needs_and_a_margin() {
        // Exact delivery: everything missing.
        assert_eq!(bitmap_after(0.0, 20), 20);
        // p = 1%: 10 of the 20 reach the bound; 2% were lost, so a margin of
        // ⌈2 · 0.02 · 10⌉ + 1 = 2.
        assert_eq!(bitmap_after(0.01, 20), 12);
    }
}
