//! Ethernet II / IPv4 / UDP framing for datapaths that bypass the kernel: building the
//! headers in front of a UDP payload, and checking a received frame down to its UDP
//! payload. IPv4 and UDP checksums are computed and verified in software, so the
//! frames are valid on any port, whatever offloads it has.
//!
//! Headers are the kernel's for the same datagram: no IP options, DF set, TTL 64, the
//! TOS byte (DSCP and ECN) as given; the payload is untouched, so a host on this
//! datapath and one on kernel sockets exchange the same datagrams.
//!
//! Each header is a typed view over the frame's bytes (smoltcp's `wire` style, as
//! `endhost_core::wire` is for our own header): `new_checked` checks the length once,
//! after which every field accessor is in bounds.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;

use crate::addr::MacAddr;

pub const ETHERNET_LEN: usize = 14;
pub const IPV4_LEN: usize = 20;
pub const UDP_LEN: usize = 8;
/// Bytes in front of the UDP payload.
pub const HEADERS_LEN: usize = ETHERNET_LEN + IPV4_LEN + UDP_LEN;

const ETHERTYPE_IPV4: u16 = 0x0800;
const PROTOCOL_UDP: u8 = 17;
const DONT_FRAGMENT: u16 = 0x4000;
const TTL: u8 = 64;

/// Who a frame goes from and to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
}

fn be16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

fn set_be16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// An Ethernet II header and what follows it.
pub struct EthernetFrame<T>(T);

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    const DST: Range<usize> = 0..6;
    const SRC: Range<usize> = 6..12;
    const ETHERTYPE: usize = 12;

    pub fn new_checked(buffer: T) -> Result<Self, Rejected> {
        if buffer.as_ref().len() < ETHERNET_LEN {
            return Err(Rejected::NotIpv4);
        }
        Ok(EthernetFrame(buffer))
    }

    pub fn dst(&self) -> MacAddr {
        let mut mac = [0; 6];
        mac.copy_from_slice(&self.0.as_ref()[Self::DST]);
        MacAddr(mac)
    }

    pub fn ethertype(&self) -> u16 {
        be16(self.0.as_ref(), Self::ETHERTYPE)
    }

    pub fn payload(&self) -> &[u8] {
        &self.0.as_ref()[ETHERNET_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set(&mut self, dst: MacAddr, src: MacAddr, ethertype: u16) {
        let bytes = self.0.as_mut();
        bytes[Self::DST].copy_from_slice(&dst.0);
        bytes[Self::SRC].copy_from_slice(&src.0);
        set_be16(bytes, Self::ETHERTYPE, ethertype);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.0.as_mut()[ETHERNET_LEN..]
    }
}

/// An IPv4 header (its length checked against the buffer) and what follows it.
pub struct Ipv4Packet<T>(T);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    const TOS: usize = 1;
    const TOTAL_LEN: usize = 2;
    const FLAGS_FRAGMENT: usize = 6;
    const TTL: usize = 8;
    const PROTOCOL: usize = 9;
    const CHECKSUM: usize = 10;
    const SRC: Range<usize> = 12..16;
    const DST: Range<usize> = 16..20;

    /// A view of an IPv4 header whose header and total lengths fit `buffer`.
    pub fn new_checked(buffer: T) -> Result<Self, Rejected> {
        let bytes = buffer.as_ref();
        if bytes.len() < IPV4_LEN || bytes[0] >> 4 != 4 {
            return Err(Rejected::NotIpv4);
        }
        let packet = Ipv4Packet(buffer);
        let (header, total) = (packet.header_len(), packet.total_len());
        if header < IPV4_LEN || total < header || total > packet.0.as_ref().len() {
            return Err(Rejected::Truncated);
        }
        Ok(packet)
    }

    pub fn header_len(&self) -> usize {
        usize::from(self.0.as_ref()[0] & 0x0f) * 4
    }

    pub fn total_len(&self) -> usize {
        usize::from(be16(self.0.as_ref(), Self::TOTAL_LEN))
    }

    pub fn tos(&self) -> u8 {
        self.0.as_ref()[Self::TOS]
    }

    pub fn protocol(&self) -> u8 {
        self.0.as_ref()[Self::PROTOCOL]
    }

    /// More fragments follow, or this is not the first: part of a larger datagram.
    pub fn is_fragment(&self) -> bool {
        be16(self.0.as_ref(), Self::FLAGS_FRAGMENT) & 0x3fff != 0
    }

    pub fn checksum_ok(&self) -> bool {
        fold(sum_words(&self.0.as_ref()[..self.header_len()], 0)) == 0xffff
    }

    pub fn src(&self) -> Ipv4Addr {
        let b = &self.0.as_ref()[Self::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst(&self) -> Ipv4Addr {
        let b = &self.0.as_ref()[Self::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The bytes after the header, up to the total length (Ethernet padding cut off).
    pub fn payload(&self) -> &[u8] {
        &self.0.as_ref()[self.header_len()..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Writes an option-less, unfragmentable header for `payload_len` bytes of UDP,
    /// checksum included. The buffer must hold at least [`IPV4_LEN`] bytes.
    pub fn emit(buffer: T, tos: u8, src: Ipv4Addr, dst: Ipv4Addr, payload_len: usize) -> Self {
        let mut packet = Ipv4Packet(buffer);
        let ip = &mut packet.0.as_mut()[..IPV4_LEN];
        ip[0] = 0x45;
        ip[Self::TOS] = tos;
        set_be16(ip, Self::TOTAL_LEN, (IPV4_LEN + payload_len) as u16);
        // A DF datagram needs no identification (RFC 6864).
        set_be16(ip, 4, 0);
        set_be16(ip, Self::FLAGS_FRAGMENT, DONT_FRAGMENT);
        ip[Self::TTL] = TTL;
        ip[Self::PROTOCOL] = PROTOCOL_UDP;
        set_be16(ip, Self::CHECKSUM, 0);
        ip[Self::SRC].copy_from_slice(&src.octets());
        ip[Self::DST].copy_from_slice(&dst.octets());
        let checksum = !fold(sum_words(ip, 0));
        set_be16(ip, Self::CHECKSUM, checksum);
        packet
    }

    /// Sets the ECN field (the TOS byte's low two bits), as a router marking CE does.
    pub fn set_ecn(&mut self, ecn: u8) {
        let tos = (self.tos() & !0b11) | (ecn & 0b11);
        self.0.as_mut()[Self::TOS] = tos;
        self.fill_checksum();
    }

    /// Counts a hop, as a router forwarding the packet does; false (and nothing
    /// changed) when the TTL is already at 1 or 0: the packet must not be forwarded.
    pub fn decrement_ttl(&mut self) -> bool {
        let ttl = self.0.as_ref()[Self::TTL];
        if ttl <= 1 {
            return false;
        }
        self.0.as_mut()[Self::TTL] = ttl - 1;
        self.fill_checksum();
        true
    }

    fn fill_checksum(&mut self) {
        let header = self.header_len();
        let ip = &mut self.0.as_mut()[..header];
        set_be16(ip, Self::CHECKSUM, 0);
        let checksum = !fold(sum_words(ip, 0));
        set_be16(ip, Self::CHECKSUM, checksum);
    }
}

/// A UDP header (its length checked against the buffer) and its payload.
pub struct UdpDatagram<T>(T);

impl<T: AsRef<[u8]>> UdpDatagram<T> {
    const SRC_PORT: usize = 0;
    const DST_PORT: usize = 2;
    const LENGTH: usize = 4;
    const CHECKSUM: usize = 6;

    /// A view of a UDP datagram whose length field fits `buffer`.
    pub fn new_checked(buffer: T) -> Result<Self, Rejected> {
        let bytes = buffer.as_ref();
        if bytes.len() < UDP_LEN {
            return Err(Rejected::Truncated);
        }
        let len = usize::from(be16(bytes, Self::LENGTH));
        if len < UDP_LEN || len > bytes.len() {
            return Err(Rejected::Truncated);
        }
        Ok(UdpDatagram(buffer))
    }

    /// The length field: header and payload, in bytes.
    pub fn length(&self) -> usize {
        usize::from(be16(self.0.as_ref(), Self::LENGTH))
    }

    pub fn src_port(&self) -> u16 {
        be16(self.0.as_ref(), Self::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.0.as_ref(), Self::DST_PORT)
    }

    /// Whether the checksum verifies (a zero checksum means none was sent).
    pub fn checksum_ok(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let udp = &self.0.as_ref()[..self.length()];
        udp[Self::CHECKSUM..Self::CHECKSUM + 2] == [0, 0]
            || fold(sum_words(udp, pseudo_header(src, dst, udp.len()))) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpDatagram<T> {
    /// Writes the header for the payload that fills the rest of the buffer, checksum
    /// over the payload included.
    pub fn emit(buffer: T, src: SocketAddrV4, dst: SocketAddrV4) -> Self {
        let mut datagram = UdpDatagram(buffer);
        let udp = datagram.0.as_mut();
        let len = udp.len();
        set_be16(udp, Self::SRC_PORT, src.port());
        set_be16(udp, Self::DST_PORT, dst.port());
        set_be16(udp, Self::LENGTH, len as u16);
        set_be16(udp, Self::CHECKSUM, 0);
        let sum = sum_words(udp, pseudo_header(*src.ip(), *dst.ip(), len));
        // A computed zero is sent as all ones: zero means "no checksum" (RFC 768).
        let checksum = match !fold(sum) {
            0 => 0xffff,
            c => c,
        };
        set_be16(udp, Self::CHECKSUM, checksum);
        datagram
    }
}

/// One's-complement sum of `data` as 16-bit big-endian words, added to `sum`.
///
/// The sum does not depend on byte order but for a swap of its result (RFC 1071 §2), so
/// it adds native 32-bit words into 64 bits (half the additions, which the compiler
/// vectorizes) and puts the folded result in network order. An odd last byte
/// is the high byte of a zero-padded word, as RFC 768 pads. Where the CPU has AVX2 the
/// same code runs built for it: twice the bytes per instruction.
fn sum_words(data: &[u8], sum: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, as just checked.
        return unsafe { sum_words_avx2(data, sum) };
    }
    sum_words_portable(data, sum)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum_words_avx2(data: &[u8], sum: u32) -> u32 {
    sum_words_portable(data, sum)
}

#[inline(always)]
fn sum_words_portable(data: &[u8], sum: u32) -> u32 {
    let mut wide = 0u64;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        wide += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut tail = [0u8; 4];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    wide += u64::from(u32::from_ne_bytes(tail));
    let mut folded = (wide & 0xffff_ffff) + (wide >> 32);
    while folded > 0xffff {
        folded = (folded & 0xffff) + (folded >> 16);
    }
    let native = folded as u16;
    let network = if cfg!(target_endian = "little") {
        native.swap_bytes()
    } else {
        native
    };
    sum + u32::from(network)
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The IPv4 pseudo-header's part of the UDP checksum.
fn pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, udp_len: usize) -> u32 {
    let mut sum = sum_words(&src.octets(), 0);
    sum = sum_words(&dst.octets(), sum);
    sum + u32::from(PROTOCOL_UDP) + udp_len as u32
}

/// Writes the Ethernet, IPv4 and UDP headers into `frame[..HEADERS_LEN]` for the
/// payload that fills the rest of `frame`, checksums included. `frame` must be at
/// least [`HEADERS_LEN`] long and at most 65,535 − Ethernet bytes.
pub fn write_headers(frame: &mut [u8], addresses: &Addresses, tos: u8) {
    let mut ethernet = EthernetFrame(&mut *frame);
    ethernet.set(addresses.dst_mac, addresses.src_mac, ETHERTYPE_IPV4);
    let (ip, udp) = ethernet.payload_mut().split_at_mut(IPV4_LEN);
    let (src, dst) = (addresses.src, addresses.dst);
    Ipv4Packet::emit(ip, tos, *src.ip(), *dst.ip(), udp.len());
    UdpDatagram::emit(udp, src, dst);
}

/// Why a received frame is not a UDP datagram for us to deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rejected {
    /// Not Ethernet II carrying IPv4 (ARP, IPv6, VLAN-tagged…).
    NotIpv4,
    /// IPv4, but not UDP.
    NotUdp,
    /// A fragment; datagrams of this transport always fit one packet.
    Fragment,
    /// Shorter than its headers say, or headers that contradict each other.
    Truncated,
    BadIpChecksum,
    BadUdpChecksum,
}

impl Rejected {
    pub const ALL: [Rejected; 6] = [
        Rejected::NotIpv4,
        Rejected::NotUdp,
        Rejected::Fragment,
        Rejected::Truncated,
        Rejected::BadIpChecksum,
        Rejected::BadUdpChecksum,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Rejected::NotIpv4 => "not IPv4",
            Rejected::NotUdp => "not UDP",
            Rejected::Fragment => "fragment",
            Rejected::Truncated => "truncated",
            Rejected::BadIpChecksum => "bad IPv4 checksum",
            Rejected::BadUdpChecksum => "bad UDP checksum",
        }
    }
}

/// A received UDP datagram: its addresses and where its payload is in the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub dst_mac: MacAddr,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub tos: u8,
    pub payload: Range<usize>,
}

/// Checks `frame` down to its UDP payload: Ethernet II, IPv4 without fragmentation,
/// UDP, consistent lengths (Ethernet padding allowed), valid checksums (a UDP
/// checksum of zero means none was sent).
pub fn parse(frame: &[u8]) -> Result<Datagram, Rejected> {
    let ethernet = EthernetFrame::new_checked(frame)?;
    if ethernet.ethertype() != ETHERTYPE_IPV4 {
        return Err(Rejected::NotIpv4);
    }
    let ip = Ipv4Packet::new_checked(ethernet.payload())?;
    if ip.protocol() != PROTOCOL_UDP {
        return Err(Rejected::NotUdp);
    }
    if ip.is_fragment() {
        return Err(Rejected::Fragment);
    }
    if !ip.checksum_ok() {
        return Err(Rejected::BadIpChecksum);
    }
    let (src, dst) = (ip.src(), ip.dst());
    let udp = UdpDatagram::new_checked(ip.payload())?;
    if !udp.checksum_ok(src, dst) {
        return Err(Rejected::BadUdpChecksum);
    }
    let start = ETHERNET_LEN + ip.header_len() + UDP_LEN;
    Ok(Datagram {
        dst_mac: ethernet.dst(),
        src: SocketAddrV4::new(src, udp.src_port()),
        dst: SocketAddrV4::new(dst, udp.dst_port()),
        tos: ip.tos(),
        payload: start..start + udp.length() - UDP_LEN,
    })
}

/// The source, IP TOS byte and payload of a frame [`parse`] accepted and cut at the end
/// of its datagram (the RX lcore did both), read again without the checksums; `None`
/// only if the frame is not one.
pub fn accepted(frame: &[u8]) -> Option<(SocketAddrV4, u8, &[u8])> {
    let ip = frame.get(ETHERNET_LEN..)?;
    let header_len = usize::from(ip.first()? & 0x0f) * 4;
    if header_len < IPV4_LEN {
        return None;
    }
    let udp = ip.get(header_len..)?;
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let port = u16::from_be_bytes([*udp.first()?, *udp.get(1)?]);
    Some((SocketAddrV4::new(src, port), ip[1], udp.get(UDP_LEN..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses() -> Addresses {
        Addresses {
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 0x0a]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0x0b]),
            src: "10.0.0.1:11001".parse().unwrap(),
            dst: "10.0.1.2:11000".parse().unwrap(),
        }
    }

    fn frame(payload: &[u8], tos: u8) -> Vec<u8> {
        let mut frame = vec![0; HEADERS_LEN];
        frame.extend_from_slice(payload);
        write_headers(&mut frame, &addresses(), tos);
        frame
    }

    #[test]
    fn a_built_frame_parses_back_to_its_addresses_tos_and_payload() {
        let payload: Vec<u8> = (0..=255).cycle().take(1001).collect();
        let frame = frame(&payload, (32 << 2) | 0b10);
        let datagram = parse(&frame).unwrap();
        assert_eq!(datagram.src, addresses().src);
        let (source, tos, read_again) = accepted(&frame[..datagram.payload.end]).unwrap();
        assert_eq!(source, addresses().src);
        assert_eq!(tos, 0x82);
        assert_eq!(read_again, &payload[..]);
        assert_eq!(datagram.dst, addresses().dst);
        assert_eq!(datagram.dst_mac, addresses().dst_mac);
        assert_eq!(datagram.tos, 0x82);
        assert_eq!(&frame[datagram.payload], &payload[..]);
        assert_eq!(&frame[6..12], &addresses().src_mac.0);
    }

    #[test]
    fn a_router_marks_ce_and_counts_the_hop_with_a_valid_checksum() {
        let mut frame = [0u8; 14 + IPV4_LEN + 8];
        let mut ip = Ipv4Packet::emit(
            &mut frame[14..],
            (34 << 2) | 0b10,
            Ipv4Addr::new(10, 1, 0, 11),
            Ipv4Addr::new(10, 128, 0, 3),
            8,
        );
        ip.set_ecn(0b11);
        assert!(ip.decrement_ttl());
        assert_eq!(ip.tos(), (34 << 2) | 0b11);
        assert!(ip.checksum_ok());
        let mut last = Ipv4Packet::emit(
            &mut frame[14..],
            0,
            Ipv4Addr::new(10, 1, 0, 11),
            Ipv4Addr::new(10, 128, 0, 3),
            8,
        );
        last.0[8] = 1;
        assert!(!last.decrement_ttl());
    }

    /// UDP 10.0.0.1:11001 → 10.0.1.2:11000, TOS 0x82, DF, TTL 64, ID 0, payload
    /// "mltctl": checksums computed by a separate implementation (Python's struct
    /// over the RFC 791 header and the RFC 768 pseudo-header).
    #[test]
    fn checksums_match_an_independent_computation() {
        let frame = frame(b"mltctl", 0x82);
        assert_eq!(&frame[24..26], &[0x25, 0x47], "IPv4 checksum");
        assert_eq!(&frame[40..42], &[0x3e, 0xa2], "UDP checksum");
    }

    /// RFC 1071's sum as the RFC writes it: 16-bit big-endian words, one at a time.
    fn sum_words_one_at_a_time(data: &[u8], mut sum: u32) -> u32 {
        let mut words = data.chunks_exact(2);
        for w in &mut words {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [last] = words.remainder() {
            sum += u32::from(*last) << 8;
        }
        sum
    }

    proptest::proptest! {
        #[test]
        fn the_wide_sum_folds_to_the_word_by_word_sum(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..2100),
            start in 0u32..0x3_ffff,
        ) {
            let expected = fold(sum_words_one_at_a_time(&data, start));
            proptest::prop_assert_eq!(fold(sum_words(&data, start)), expected);
            proptest::prop_assert_eq!(fold(sum_words_portable(&data, start)), expected);
        }
    }

    #[test]
    fn the_wide_sum_carries_at_every_width() {
        for len in [0, 1, 2, 3, 4, 5, 7, 8, 9, 1500, 9001] {
            let ones = vec![0xff; len];
            let expected = fold(sum_words_one_at_a_time(&ones, 0xffff));
            assert_eq!(fold(sum_words(&ones, 0xffff)), expected, "{len} bytes");
            assert_eq!(
                fold(sum_words_portable(&ones, 0xffff)),
                expected,
                "{len} bytes"
            );
        }
    }

    #[test]
    fn every_flaw_is_rejected_with_its_reason() {
        let good = frame(b"gradient bytes", 0);
        let flawed = |at: usize, value: u8| {
            let mut f = good.clone();
            f[at] = value;
            parse(&f)
        };
        assert_eq!(flawed(12, 0x86), Err(Rejected::NotIpv4));
        assert_eq!(flawed(23, 6), Err(Rejected::NotUdp));
        assert_eq!(flawed(20, 0x20), Err(Rejected::Fragment));
        assert_eq!(flawed(22, 63), Err(Rejected::BadIpChecksum));
        assert_eq!(flawed(50, b'G'), Err(Rejected::BadUdpChecksum));
        assert_eq!(parse(&good[..good.len() - 1]), Err(Rejected::Truncated));
        assert_eq!(parse(&good[..10]), Err(Rejected::NotIpv4));
        // No UDP checksum sent: the payload is not checked.
        let mut unchecked = good.clone();
        unchecked[40..42].copy_from_slice(&[0, 0]);
        unchecked[50] = b'G';
        assert!(parse(&unchecked).is_ok());
        // Ethernet padding after the datagram is ignored.
        let mut padded = good.clone();
        padded.extend_from_slice(&[0; 8]);
        assert_eq!(
            parse(&padded).unwrap().payload,
            parse(&good).unwrap().payload
        );
    }
}
