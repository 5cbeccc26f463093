//! Ethernet II / IPv4 / UDP framing for datapaths that bypass the kernel: building the
//! headers in front of a UDP payload, and checking a received frame down to its UDP
//! payload. IPv4 and UDP checksums are computed and verified in software, so the
//! frames are valid on any port, whatever offloads it has.
//!
//! Headers are the kernel's for the same datagram: no IP options, DF set, TTL 64, the
//! TOS byte (DSCP and ECN) as given; the payload is untouched, so a host on this
//! datapath and one on kernel sockets exchange the same datagrams.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;

use endhost_core::addr::MacAddr;

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

/// One's-complement sum of `data` as 16-bit big-endian words, added to `sum`.
fn sum_words(data: &[u8], mut sum: u32) -> u32 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
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
    let ip_len = frame.len() - ETHERNET_LEN;
    let udp_len = ip_len - IPV4_LEN;
    let (ethernet, rest) = frame.split_at_mut(ETHERNET_LEN);
    ethernet[0..6].copy_from_slice(&addresses.dst_mac.0);
    ethernet[6..12].copy_from_slice(&addresses.src_mac.0);
    ethernet[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());

    let (ip, udp) = rest.split_at_mut(IPV4_LEN);
    ip[0] = 0x45;
    ip[1] = tos;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    // A DF datagram needs no identification (RFC 6864).
    ip[4..6].copy_from_slice(&[0, 0]);
    ip[6..8].copy_from_slice(&DONT_FRAGMENT.to_be_bytes());
    ip[8] = TTL;
    ip[9] = PROTOCOL_UDP;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&addresses.src.ip().octets());
    ip[16..20].copy_from_slice(&addresses.dst.ip().octets());
    let ip_checksum = !fold(sum_words(ip, 0));
    ip[10..12].copy_from_slice(&ip_checksum.to_be_bytes());

    udp[0..2].copy_from_slice(&addresses.src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&addresses.dst.port().to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    let sum = sum_words(
        udp,
        pseudo_header(*addresses.src.ip(), *addresses.dst.ip(), udp_len),
    );
    // A computed zero is sent as all ones: zero means "no checksum" (RFC 768).
    let udp_checksum = match !fold(sum) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&udp_checksum.to_be_bytes());
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
    if frame.len() < ETHERNET_LEN || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4 {
        return Err(Rejected::NotIpv4);
    }
    let ip = &frame[ETHERNET_LEN..];
    if ip.len() < IPV4_LEN || ip[0] >> 4 != 4 {
        return Err(Rejected::NotIpv4);
    }
    let header_len = usize::from(ip[0] & 0x0f) * 4;
    let total_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if header_len < IPV4_LEN || total_len < header_len || total_len > ip.len() {
        return Err(Rejected::Truncated);
    }
    if ip[9] != PROTOCOL_UDP {
        return Err(Rejected::NotUdp);
    }
    // More fragments, or a fragment offset: part of a larger datagram.
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return Err(Rejected::Fragment);
    }
    if fold(sum_words(&ip[..header_len], 0)) != 0xffff {
        return Err(Rejected::BadIpChecksum);
    }
    let src_ip = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst_ip = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let udp = &ip[header_len..total_len];
    if udp.len() < UDP_LEN {
        return Err(Rejected::Truncated);
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_LEN || udp_len > udp.len() {
        return Err(Rejected::Truncated);
    }
    let udp = &udp[..udp_len];
    if udp[6..8] != [0, 0] && fold(sum_words(udp, pseudo_header(src_ip, dst_ip, udp_len))) != 0xffff
    {
        return Err(Rejected::BadUdpChecksum);
    }
    let start = ETHERNET_LEN + header_len + UDP_LEN;
    let mut dst_mac = [0; 6];
    dst_mac.copy_from_slice(&frame[0..6]);
    Ok(Datagram {
        dst_mac: MacAddr(dst_mac),
        src: SocketAddrV4::new(src_ip, u16::from_be_bytes([udp[0], udp[1]])),
        dst: SocketAddrV4::new(dst_ip, u16::from_be_bytes([udp[2], udp[3]])),
        tos: ip[1],
        payload: start..start + udp_len - UDP_LEN,
    })
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
        assert_eq!(datagram.dst, addresses().dst);
        assert_eq!(datagram.dst_mac, addresses().dst_mac);
        assert_eq!(datagram.tos, 0x82);
        assert_eq!(&frame[datagram.payload], &payload[..]);
        assert_eq!(&frame[6..12], &addresses().src_mac.0);
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
