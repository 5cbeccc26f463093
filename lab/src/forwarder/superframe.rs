//! What a packet socket with `PACKET_VNET_HDR` hands over and takes: a `virtio_net_hdr`
//! and a frame that may be a GSO super-frame (one TCP or UDP header over up to 64 KB
//! of payload that the wire carries as `gso_size` segments). The forwarder queues
//! each segment as the frame the wire would carry ([`Segment`]), and sends runs of
//! segments that leave together as one super-frame again ([`Run::head`]): the kernel
//! then moves tens of frames for the cost of one, and segments them where a port
//! cannot take GSO (a host's).
//!
//! Sans I/O: bytes in, bytes out. Layouts: `include/uapi/linux/virtio_net.h` (the
//! legacy header, native byte order for packet sockets), RFC 791, RFC 793, RFC 768.

use std::ops::Range;
use std::rc::Rc;

use crate::queueing::Queued;

/// Bytes of the legacy `virtio_net_hdr`.
pub const VNET_LEN: usize = 10;
const ETHERNET_HEADER: usize = 14;
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const TCP: u8 = 6;
const UDP: u8 = 17;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the L4 checksum holds the pseudo-header's sum only.
const NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`: the TCP super-frame's first segment carries CWR.
const GSO_ECN: u8 = 0x80;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;
const CE: u8 = 0b11;

/// The `virtio_net_hdr` fields the forwarder reads and writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vnet {
    pub flags: u8,
    pub gso_type: u8,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl Vnet {
    pub fn parse(bytes: &[u8]) -> Option<Vnet> {
        let b = bytes.get(..VNET_LEN)?;
        let u16_at = |at: usize| u16::from_ne_bytes([b[at], b[at + 1]]);
        Some(Vnet {
            flags: b[0],
            gso_type: b[1],
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// The header before a frame whose L2–L4 headers are `header_len` bytes.
    pub fn emit(&self, header_len: usize) -> [u8; VNET_LEN] {
        let mut b = [0u8; VNET_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&(header_len as u16).to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// A frame as it came off a port, owned by the segments queued from it.
#[derive(Debug)]
pub struct SuperFrame {
    pub vnet: Vnet,
    /// The Ethernet frame (after the vnet header).
    pub frame: Vec<u8>,
    /// Ethernet, IPv4 and TCP or UDP headers; the payload follows. The whole frame
    /// for any other frame.
    header_len: usize,
    /// Where the IPv4 packet ends (a frame may carry padding beyond it).
    end: usize,
    /// Payload bytes per segment; the last may be shorter.
    segment_payload: usize,
    segments: usize,
    /// Offset of the protocol (TCP, UDP) header, and the protocol.
    l4: Option<(usize, u8)>,
}

impl SuperFrame {
    /// What a packet socket handed over: the vnet header, then the frame.
    #[cfg(test)]
    pub fn parse(bytes: &[u8]) -> Option<SuperFrame> {
        SuperFrame::new(Vnet::parse(bytes)?, bytes[VNET_LEN..].to_vec())
    }

    /// A frame read with its vnet header.
    pub fn new(vnet: Vnet, frame: Vec<u8>) -> Option<SuperFrame> {
        if frame.len() < ETHERNET_HEADER {
            return None;
        }
        let mut parsed = SuperFrame {
            vnet,
            header_len: frame.len(),
            end: frame.len(),
            segment_payload: 0,
            segments: 1,
            l4: None,
            frame,
        };
        if let Some((l4, protocol, header_len, end)) = parsed.headers() {
            parsed.l4 = Some((l4, protocol));
            parsed.header_len = header_len;
            parsed.end = end;
            let gso = vnet.gso_type & !GSO_ECN;
            let splits =
                (gso == GSO_TCPV4 && protocol == TCP) || (gso == GSO_UDP_L4 && protocol == UDP);
            let payload = end - header_len;
            parsed.segment_payload = payload;
            if splits && vnet.gso_size > 0 && payload > 0 {
                parsed.segment_payload = usize::from(vnet.gso_size);
                parsed.segments = payload.div_ceil(parsed.segment_payload);
            }
        }
        Some(parsed)
    }

    /// (L4 offset, protocol, L2–L4 header length, end of the IPv4 packet) of an IPv4
    /// TCP or UDP frame that is not a fragment.
    fn headers(&self) -> Option<(usize, u8, usize, usize)> {
        let f = &self.frame;
        if f.get(12..14)? != ETHERTYPE_IPV4 {
            return None;
        }
        let ip = f.get(ETHERNET_HEADER..)?;
        let ihl = usize::from(ip.first()? & 0x0f) * 4;
        if ihl < 20 || ip.len() < ihl || u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
            return None;
        }
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let end = if total >= ihl && total <= ip.len() {
            ETHERNET_HEADER + total
        } else {
            f.len()
        };
        let protocol = ip[9];
        let l4 = ETHERNET_HEADER + ihl;
        let l4_len = match protocol {
            TCP => usize::from(f.get(l4 + 12)? >> 4) * 4,
            UDP => 8,
            _ => return None,
        };
        (l4_len >= 8 && end >= l4 + l4_len).then_some((l4, protocol, l4 + l4_len, end))
    }

    pub fn segments(&self) -> usize {
        self.segments
    }

    /// The IPv4 TOS, if the frame is IPv4.
    pub fn tos(&self) -> Option<u8> {
        (self.frame.get(12..14)? == ETHERTYPE_IPV4)
            .then(|| self.frame.get(ETHERNET_HEADER + 1).copied())
            .flatten()
    }

    /// Bytes segment `index` takes as a frame of its own.
    pub fn segment_bytes(&self, index: usize) -> u64 {
        if self.segments == 1 {
            return self.frame.len() as u64;
        }
        let payload = self.end - self.header_len;
        let first = index * self.segment_payload;
        (self.header_len + self.segment_payload.min(payload - first)) as u64
    }

    /// The payload bytes of `segments` in the frame.
    fn payload(&self, segments: &Range<usize>) -> Range<usize> {
        if self.l4.is_none() {
            return self.frame.len()..self.frame.len();
        }
        let start = self.header_len + segments.start * self.segment_payload;
        let end = (self.header_len + segments.end * self.segment_payload).min(self.end);
        start..end
    }

    fn tcp_flags(&self) -> u8 {
        self.l4.map_or(0, |(l4, _)| self.frame[l4 + 13])
    }

    fn tcp_seq(&self) -> u32 {
        let l4 = self.l4.map_or(0, |(l4, _)| l4);
        u32::from_be_bytes(self.frame[l4 + 4..l4 + 8].try_into().expect("four"))
    }
}

/// One segment of a super-frame: a frame on the wire, as a port queues it.
#[derive(Debug, Clone)]
pub struct Segment {
    pub frame: Rc<SuperFrame>,
    pub index: u16,
    pub ce: bool,
}

impl Queued for Segment {
    fn bytes(&self) -> u64 {
        self.frame.segment_bytes(usize::from(self.index))
    }

    fn tos(&self) -> Option<u8> {
        self.frame
            .tos()
            .map(|tos| if self.ce { tos | CE } else { tos })
    }

    fn set_ce(&mut self) {
        self.ce = true;
    }
}

/// Consecutive segments of one super-frame, alike in CE.
#[derive(Debug)]
struct Run {
    frame: Rc<SuperFrame>,
    segments: Range<usize>,
    ce: bool,
}

impl Run {
    fn payload(&self) -> &[u8] {
        &self.frame.frame[self.frame.payload(&self.segments)]
    }

    /// Whether the run ends with its frame's last segment.
    fn ends_frame(&self) -> bool {
        self.segments.end == self.frame.segments
    }

    /// The TCP flags its segments carry together: CWR only with the first, FIN and
    /// PSH only with the last.
    fn tcp_flags(&self) -> u8 {
        let mut flags = self.frame.tcp_flags();
        if self.segments.start > 0 {
            flags &= !TCP_CWR;
        }
        if !self.ends_frame() {
            flags &= !(TCP_FIN | TCP_PSH);
        }
        flags
    }
}

/// What leaves a port as one frame: runs of segments the receiver's GRO could have
/// merged (one flow, headers alike but for sequence and length, every segment but the
/// last full), sent as one super-frame. Merging what a flow sent in several frames
/// keeps a receiver from acknowledging every few segments, which would make its
/// sender send every few segments too.
#[derive(Debug)]
pub struct Message {
    runs: Vec<Run>,
}

/// The most an IPv4 packet holds, and the most segments one frame carries.
const MAX_IP_LEN: usize = 65535;
const MAX_SEGMENTS: usize = 64;

impl Message {
    /// Groups segments, in the order they left, into messages.
    pub fn group(left: impl IntoIterator<Item = Segment>) -> Vec<Message> {
        let mut messages: Vec<Message> = Vec::new();
        for segment in left {
            let index = usize::from(segment.index);
            if let Some(run) = messages.last_mut().and_then(|m| m.runs.last_mut())
                && Rc::ptr_eq(&run.frame, &segment.frame)
                && run.segments.end == index
                && run.ce == segment.ce
            {
                run.segments.end += 1;
                continue;
            }
            let run = Run {
                frame: segment.frame,
                segments: index..index + 1,
                ce: segment.ce,
            };
            match messages.last_mut() {
                Some(message) if message.takes(&run) => message.runs.push(run),
                _ => messages.push(Message { runs: vec![run] }),
            }
        }
        messages
    }

    /// Whether `next` can follow the message's runs in one super-frame, as GRO would
    /// merge it (`tcp_gro_receive`, `udp_gro_receive`).
    fn takes(&self, next: &Run) -> bool {
        let last = self.runs.last().expect("a message has a run");
        let (a, b) = (&*last.frame, &*next.frame);
        let (Some((l4, protocol)), Some(other)) = (a.l4, b.l4) else {
            return false;
        };
        let size = a.segment_payload;
        let full = |f: &SuperFrame, r: &Run| {
            r.payload().len() == size * r.segments.len()
                && (f.segments == 1 || f.segment_payload == size)
        };
        let payload: usize = self.runs.iter().map(|r| r.payload().len()).sum();
        let segments: usize = self.runs.iter().map(|r| r.segments.len()).sum();
        if other != (l4, protocol)
            || a.header_len != b.header_len
            || last.ce != next.ce
            || size == 0
            || !full(a, last)
            || next.payload().is_empty()
            || b.segment_payload > size
            || (b.segments > 1 && b.segment_payload != size)
            || a.header_len + payload + next.payload().len() - ETHERNET_HEADER > MAX_IP_LEN
            || segments + next.segments.len() > MAX_SEGMENTS
        {
            return false;
        }
        let (fa, fb) = (&a.frame, &b.frame);
        let ip = ETHERNET_HEADER;
        // Ethernet; version, length and TOS; flags, TTL, protocol; addresses, options.
        let alike = fa[..ip + 2] == fb[..ip + 2]
            && fa[ip + 6..ip + 10] == fb[ip + 6..ip + 10]
            && fa[ip + 12..l4] == fb[ip + 12..l4];
        if !alike || fa[l4..l4 + 4] != fb[l4..l4 + 4] {
            return false;
        }
        if protocol == UDP {
            return true;
        }
        // TCP: the next sequence number, the same acknowledgement, window and options,
        // and flags but for PSH and FIN (which end a merge) and CWR (only the first).
        let sent =
            self.runs[0].frame.tcp_seq() as usize + self.runs[0].segments.start * size + payload;
        let next_seq = b.tcp_seq() as usize + next.segments.start * size;
        let stops = TCP_FIN | TCP_PSH | 0x02 | 0x04 | 0x20;
        (sent as u32) == (next_seq as u32)
            && fa[l4 + 8..l4 + 12] == fb[l4 + 8..l4 + 12]
            && fa[l4 + 12] == fb[l4 + 12]
            && fa[l4 + 14..l4 + 16] == fb[l4 + 14..l4 + 16]
            && fa[l4 + 18..a.header_len] == fb[l4 + 18..b.header_len]
            && last.tcp_flags() & stops == 0
            && next.tcp_flags() & !(TCP_FIN | TCP_PSH) == last.tcp_flags() & !TCP_CWR
    }

    /// The vnet header and the frame's headers for this message: lengths, sequence
    /// number, flags, CE and checksums as the kernel's segmentation would have left
    /// them for these segments alone. The payloads ([`Message::payloads`]) follow.
    pub fn head(&self) -> Vec<u8> {
        let first = &self.runs[0];
        let last = self.runs.last().expect("a message has a run");
        let sf = &*first.frame;
        let whole = self.runs.len() == 1 && first.segments.start == 0 && first.ends_frame();
        let header_len = sf.header_len;
        let mut head = Vec::with_capacity(VNET_LEN + header_len);
        let mut vnet = sf.vnet;
        head.extend_from_slice(&[0; VNET_LEN]);
        head.extend_from_slice(&sf.frame[..header_len]);
        let frame = &mut head[VNET_LEN..];
        if let (Some((l4, protocol)), false) = (sf.l4, whole) {
            let payload: usize = self.runs.iter().map(|r| r.payload().len()).sum();
            let segments: usize = self.runs.iter().map(|r| r.segments.len()).sum();
            let l4_len = header_len - l4 + payload;
            let ip_len = l4 - ETHERNET_HEADER + l4_len;
            frame[ETHERNET_HEADER + 2..ETHERNET_HEADER + 4]
                .copy_from_slice(&(ip_len as u16).to_be_bytes());
            match protocol {
                TCP => {
                    let at = l4 + 4;
                    let skipped = (first.segments.start * sf.segment_payload) as u32;
                    let seq = sf.tcp_seq().wrapping_add(skipped);
                    frame[at..at + 4].copy_from_slice(&seq.to_be_bytes());
                    let ends = last.tcp_flags() & (TCP_FIN | TCP_PSH);
                    frame[l4 + 13] = (first.tcp_flags() & !(TCP_FIN | TCP_PSH)) | ends;
                    if first.segments.start > 0 {
                        vnet.gso_type &= !GSO_ECN;
                    }
                    vnet.gso_type = (vnet.gso_type & GSO_ECN) | GSO_TCPV4;
                }
                _ => {
                    frame[l4 + 4..l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
                    vnet.gso_type = GSO_UDP_L4;
                }
            }
            vnet.gso_size = sf.segment_payload as u16;
            // The L4 checksum is left to the kernel: the pseudo-header's sum for the
            // new length (RFC 793 §3.1, RFC 768).
            vnet.flags |= NEEDS_CSUM;
            vnet.csum_start = l4 as u16;
            vnet.csum_offset = if protocol == TCP { 16 } else { 6 };
            let pseudo = pseudo_header_sum(&frame[ETHERNET_HEADER..], protocol, l4_len);
            let at = l4 + usize::from(vnet.csum_offset);
            frame[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
            if segments == 1 {
                vnet.gso_type = GSO_NONE;
                vnet.gso_size = 0;
            }
        }
        if frame.get(12..14) == Some(&ETHERTYPE_IPV4[..]) {
            if first.ce {
                frame[ETHERNET_HEADER + 1] |= CE;
            }
            ipv4_checksum(&mut frame[ETHERNET_HEADER..]);
        }
        head[..VNET_LEN].copy_from_slice(&vnet.emit(header_len));
        head
    }

    /// The payloads after [`Message::head`], in order.
    pub fn payloads(&self) -> impl Iterator<Item = &[u8]> {
        self.runs.iter().map(Run::payload)
    }
}

/// Recomputes an IPv4 header's checksum in place.
fn ipv4_checksum(ip: &mut [u8]) {
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ip.len() < ihl || ihl < 20 {
        return;
    }
    ip[10..12].copy_from_slice(&[0, 0]);
    let sum = !fold(sum_words(&ip[..ihl]));
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// The folded (not complemented) sum of the IPv4 pseudo-header, as a partial
/// checksum holds it.
fn pseudo_header_sum(ip: &[u8], protocol: u8, l4_len: usize) -> u16 {
    let mut sum = sum_words(&ip[12..20]);
    sum += u32::from(protocol) + l4_len as u32;
    fold(sum)
}

fn sum_words(bytes: &[u8]) -> u32 {
    bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A super-frame as the kernel hands a TCP GSO skb over: vnet header, Ethernet,
    /// IPv4 (TOS `tos`), TCP with `flags`, `payload` bytes counting up, in segments of
    /// `mss`.
    fn tcp(mss: u16, payload: usize, flags: u8, tos: u8) -> Vec<u8> {
        let mut f = vec![0u8; VNET_LEN + 14 + 20 + 20 + payload];
        let vnet = Vnet {
            flags: NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            gso_size: mss,
            csum_start: 34,
            csum_offset: 16,
        };
        f[..VNET_LEN].copy_from_slice(&vnet.emit(54));
        let e = &mut f[VNET_LEN..];
        e[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        e[14] = 0x45;
        e[15] = tos;
        e[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        e[22] = 64;
        e[23] = TCP;
        e[26..30].copy_from_slice(&[10, 1, 0, 11]);
        e[30..34].copy_from_slice(&[10, 1, 1, 11]);
        e[38..42].copy_from_slice(&1000u32.to_be_bytes());
        e[46] = 5 << 4;
        e[47] = flags;
        for (i, b) in e[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        ipv4_checksum(&mut e[14..34]);
        f
    }

    fn udp(size: u16, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; VNET_LEN + 14 + 20 + 8 + payload];
        let vnet = Vnet {
            flags: NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            gso_size: size,
            csum_start: 34,
            csum_offset: 6,
        };
        f[..VNET_LEN].copy_from_slice(&vnet.emit(42));
        let e = &mut f[VNET_LEN..];
        e[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        e[14] = 0x45;
        e[15] = 32 << 2;
        e[16..18].copy_from_slice(&((28 + payload) as u16).to_be_bytes());
        e[23] = UDP;
        e[26..30].copy_from_slice(&[10, 1, 0, 11]);
        e[30..34].copy_from_slice(&[10, 1, 1, 11]);
        e[38..40].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        for (i, b) in e[42..].iter_mut().enumerate() {
            *b = i as u8;
        }
        ipv4_checksum(&mut e[14..34]);
        f
    }

    fn segments(frame: &Rc<SuperFrame>) -> Vec<Segment> {
        (0..frame.segments())
            .map(|i| Segment {
                frame: frame.clone(),
                index: i as u16,
                ce: false,
            })
            .collect()
    }

    #[test]
    fn a_tcp_super_frame_is_its_segments_on_the_wire() {
        let sf = SuperFrame::parse(&tcp(1448, 3000, TCP_PSH, 0)).unwrap();
        assert_eq!(sf.segments(), 3);
        let bytes: Vec<u64> = (0..3).map(|i| sf.segment_bytes(i)).collect();
        assert_eq!(bytes, [54 + 1448, 54 + 1448, 54 + 104]);
    }

    /// A message's bytes as the socket sends them.
    fn bytes(message: &Message) -> Vec<u8> {
        let mut out = message.head();
        message.payloads().for_each(|p| out.extend_from_slice(p));
        out
    }

    #[test]
    fn a_whole_run_leaves_as_it_came() {
        let raw = tcp(1448, 3000, TCP_PSH | TCP_CWR, 0b10);
        let sf = Rc::new(SuperFrame::parse(&raw).unwrap());
        let messages = Message::group(segments(&sf));
        assert_eq!(messages.len(), 1);
        let out = bytes(&messages[0]);
        assert!(
            out[VNET_LEN..] == raw[VNET_LEN..],
            "headers and payload differ"
        );
        assert_eq!(Vnet::parse(&out), Vnet::parse(&raw));
    }

    #[test]
    fn a_marked_segment_splits_the_run_and_each_part_is_a_valid_frame() {
        let sf = Rc::new(SuperFrame::parse(&tcp(1448, 3000, TCP_PSH | TCP_CWR, 0b10)).unwrap());
        let mut left = segments(&sf);
        left[1].set_ce();
        let messages = Message::group(left);
        assert_eq!(messages.len(), 3);
        for (i, message) in messages.iter().enumerate() {
            let out = bytes(message);
            let vnet = Vnet::parse(&out).unwrap();
            let (head, payload) = (&out[VNET_LEN..VNET_LEN + 54], &out[VNET_LEN + 54..]);
            let ip = &head[14..34];
            assert_eq!(fold(sum_words(ip)), 0xffff, "segment {i}: IPv4 checksum");
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            assert_eq!(total, 40 + payload.len(), "segment {i}");
            let seq = u32::from_be_bytes(head[38..42].try_into().unwrap());
            assert_eq!(seq, 1000 + 1448 * i as u32, "segment {i}");
            assert_eq!(vnet.gso_type, GSO_NONE, "one segment each");
            assert_eq!(payload[0], (1448 * i) as u8, "segment {i}'s own bytes");
            let cwr = head[47] & TCP_CWR != 0;
            let psh = head[47] & TCP_PSH != 0;
            assert_eq!((cwr, psh), (i == 0, i == 2), "segment {i}: flags");
            assert_eq!(ip[1] & CE == CE, i == 1, "segment {i}: CE");
            // The partial checksum is the pseudo-header's, for this length.
            let partial = u16::from_be_bytes([head[50], head[51]]);
            assert_eq!(partial, pseudo_header_sum(ip, TCP, 20 + payload.len()));
        }
    }

    #[test]
    fn udp_datagrams_around_a_drop_leave_as_one_frame_of_their_own_length() {
        let sf = Rc::new(SuperFrame::parse(&udp(1000, 4500)).unwrap());
        assert_eq!(sf.segments(), 5);
        let mut left = segments(&sf);
        left.remove(1); // dropped by the queue
        let messages = Message::group(left);
        assert_eq!(
            messages.len(),
            1,
            "datagrams stand alone: a gap does not matter"
        );
        let out = bytes(&messages[0]);
        let vnet = Vnet::parse(&out).unwrap();
        assert_eq!((vnet.gso_type, vnet.gso_size), (GSO_UDP_L4, 1000));
        assert_eq!(out.len() - VNET_LEN - 42, 3500);
        assert_eq!(
            out[VNET_LEN + 42 + 1000],
            2000u16 as u8,
            "the third follows the first"
        );
        let udp_len = u16::from_be_bytes([out[VNET_LEN + 38], out[VNET_LEN + 39]]);
        assert_eq!(udp_len, 8 + 3500);
        let ip_len = u16::from_be_bytes([out[VNET_LEN + 16], out[VNET_LEN + 17]]);
        assert_eq!(ip_len, 28 + 3500);
        // A CE mark splits them.
        let mut left = segments(&sf);
        left[2].set_ce();
        assert_eq!(Message::group(left).len(), 3);
    }

    /// The same flow's next frame: `sent` payload bytes further on, `flags`.
    fn next_tcp(after: &[u8], sent: u32, segments: usize, flags: u8) -> Vec<u8> {
        let mut next = tcp(1448, 1448 * segments, flags, 0);
        let e = &mut next[VNET_LEN..];
        let seq = u32::from_be_bytes(after[VNET_LEN + 38..VNET_LEN + 42].try_into().unwrap());
        e[38..42].copy_from_slice(&(seq + sent).to_be_bytes());
        ipv4_checksum(&mut e[14..34]);
        next
    }

    #[test]
    fn frames_of_one_flow_that_gro_would_merge_leave_as_one() {
        let a = tcp(1448, 1448 * 2, 0, 0);
        let b = next_tcp(&a, 1448 * 2, 3, TCP_PSH);
        let (fa, fb) = (
            Rc::new(SuperFrame::parse(&a).unwrap()),
            Rc::new(SuperFrame::parse(&b).unwrap()),
        );
        let left: Vec<Segment> = segments(&fa).into_iter().chain(segments(&fb)).collect();
        let messages = Message::group(left);
        assert_eq!(messages.len(), 1);
        let out = bytes(&messages[0]);
        let vnet = Vnet::parse(&out).unwrap();
        assert_eq!((vnet.gso_type, vnet.gso_size), (GSO_TCPV4, 1448));
        let payload = &out[VNET_LEN + 54..];
        assert_eq!(payload.len(), 1448 * 5);
        assert_eq!(payload[1448 * 2], 0, "b's bytes follow a's");
        assert_eq!(out[VNET_LEN + 47], TCP_PSH, "the last frame's PSH");
        let total = u16::from_be_bytes([out[VNET_LEN + 16], out[VNET_LEN + 17]]);
        assert_eq!(usize::from(total), 40 + 1448 * 5);

        // Not merged: a gap in the sequence, another acknowledgement, a PSH before.
        let gap = next_tcp(&a, 1448 * 3, 1, 0);
        let mut other_ack = next_tcp(&a, 1448 * 2, 1, 0);
        other_ack[VNET_LEN + 42] = 9;
        let pushed = tcp(1448, 1448, TCP_PSH, 0);
        let after_push = next_tcp(&pushed, 1448, 1, 0);
        for (first, second) in [(&a, &gap), (&a, &other_ack), (&pushed, &after_push)] {
            let f1 = Rc::new(SuperFrame::parse(first).unwrap());
            let f2 = Rc::new(SuperFrame::parse(second).unwrap());
            let left: Vec<Segment> = segments(&f1).into_iter().chain(segments(&f2)).collect();
            assert_eq!(Message::group(left).len(), 2);
        }
    }

    #[test]
    fn short_or_foreign_frames_are_one_segment_or_refused() {
        assert!(SuperFrame::parse(&[0; 5]).is_none());
        let mut arp = vec![0u8; VNET_LEN + 42];
        arp[VNET_LEN + 12..VNET_LEN + 14].copy_from_slice(&[0x08, 0x06]);
        let sf = SuperFrame::parse(&arp).unwrap();
        assert_eq!(
            (sf.segments(), sf.segment_bytes(0), sf.tos()),
            (1, 42, None)
        );
        let sf = Rc::new(sf);
        let out = bytes(&Message::group(segments(&sf))[0]);
        assert!(
            out[VNET_LEN..] == arp[VNET_LEN..],
            "an ARP frame leaves as it came"
        );
        // A TCP header claiming more than the frame holds: one segment, as it came.
        let mut bad = tcp(1448, 3000, 0, 0);
        bad.truncate(VNET_LEN + 14 + 20 + 8);
        assert_eq!(SuperFrame::parse(&bad).unwrap().segments(), 1);
    }
}
