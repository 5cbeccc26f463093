//! The transport's packets: a fixed header in the UDP payload, then the data.
//!
//! Typed zero-copy views over byte buffers, in the manner of smoltcp's `wire`:
//! [`Packet::new_checked`] refuses a buffer too short for its header or for the length
//! the header claims, or one that is not ours (magic, version, kind), so every accessor
//! afterwards is in bounds. Multi-byte fields are big-endian. The same bytes go over
//! kernel sockets and DPDK, so hosts on either datapath interoperate.
//!
//! ```text
//!  0       1       2            3         4        6        8           12         16
//!  +-------+-------+------------+---------+--------+--------+-----------+----------+---- ... ---+
//!  | magic |  ver  | kind|flags | job tag |  rank  | length |  message  | sequence | payload    |
//!  +-------+-------+------------+---------+--------+--------+-----------+----------+---- ... ---+
//! ```
//!
//! A packet carries only what its receiver needs for that packet. *message* is the
//! receiver's own handle for the message, which it gave the sender in its READY over
//! the control channel (with what the handle stands for: tensor, round and step, the
//! job and the two ranks); `sequence` numbers the message's packets from 0, and the
//! payload goes at `sequence` × the values per packet (both ends size packets by the
//! job's MTU). *rank* is the sender's, checked against the handle and against the
//! address the datagram came from; *job tag* is the low
//! byte of the job id, so a stray datagram of another job is told apart without a
//! lookup. The layer decides the packet's DSCP and is not needed past the sender.
//!
//! An acknowledgement (kind [`Kind::Ack`]) has no payload and echoes the message and
//! sequence of a data packet that asked for one ([`Flags::ACK_REQUEST`]); the sender
//! kept that packet's send time, so the RTT needs no timestamp on the wire.
//!
//! A class probe (kind [`Kind::ClassProbe`]) carries padding only: `mltctl verify` has
//! the transports send bursts of them with a class's DSCP over every path, and the
//! receiver counts what arrived per DSCP and with CE; no message is involved.
//!
//! Version 3 changed the control channel's HELLO (a nonce, and the job key's proof);
//! version 4 narrowed the kind to three bits for a fifth flag, [`Flags::INEXACT`], which
//! carries a loss on towards the result, so a receiver knows which values are exact.
//!
//! The header is 16 bytes (version 1 had 36): with a 1,500-byte MTU a packet carries
//! 364 values (1,456 bytes), 98.9% of the datagram.

use std::fmt;

pub const MAGIC: u8 = 0x4d; // "M"
pub const VERSION: u8 = 4;
pub const HEADER_LEN: usize = 16;

/// Bits of the kind-and-flags byte that hold flags (the low ones).
const FLAG_BITS: u8 = 5;
const FLAG_MASK: u8 = (1 << FLAG_BITS) - 1;

mod field {
    use std::ops::Range;
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 1;
    /// Kind in the high three bits, flags in the low five.
    pub const KIND_FLAGS: usize = 2;
    pub const JOB_TAG: usize = 3;
    pub const RANK: Range<usize> = 4..6;
    pub const LENGTH: Range<usize> = 6..8;
    pub const MESSAGE: Range<usize> = 8..12;
    pub const SEQUENCE: Range<usize> = 12..16;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Data = 1,
    Ack = 2,
    ClassProbe = 3,
}

/// Header flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flags(pub u8);

impl Flags {
    /// The message's last packet (by sequence).
    pub const LAST: u8 = 0x01;
    /// Sent ECN-capable: above the importance threshold.
    pub const IMPORTANT: u8 = 0x02;
    /// A retransmission after a bitmap.
    pub const RETRANSMIT: u8 = 0x04;
    /// The sender asks for an acknowledgement of this packet (rate control's RTT).
    pub const ACK_REQUEST: u8 = 0x08;
    /// A loss reached some of the packet's values on their way to the sender (a packet
    /// missing from a step before, or one itself so marked): the receiver's result
    /// there is not exact.
    pub const INEXACT: u8 = 0x10;

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// The job tag a job's packets carry: the low byte of its id.
pub fn job_tag(job: u32) -> u8 {
    job as u8
}

/// Why bytes are not one of our packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// Shorter than a header, or than the length the header claims.
    Truncated,
    /// Not our magic number or version.
    Foreign,
    /// An unknown kind, or a length that is not whole elements.
    Malformed,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireError::Truncated => "truncated",
            WireError::Foreign => "not a transport packet",
            WireError::Malformed => "malformed",
        })
    }
}

impl std::error::Error for WireError {}

/// A packet view over a buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks; use on buffers about to be written.
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view of a received buffer, checked so that every accessor is in bounds and
    /// the header is ours and well formed.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Packet::new_unchecked(buffer);
        packet.check()?;
        Ok(packet)
    }

    fn check(&self) -> Result<(), WireError> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if data[field::MAGIC] != MAGIC || data[field::VERSION] != VERSION {
            return Err(WireError::Foreign);
        }
        let kind = self.kind().ok_or(WireError::Malformed)?;
        let length = usize::from(self.length());
        match kind {
            Kind::Data if length == 0 || length % 4 != 0 => return Err(WireError::Malformed),
            Kind::Ack if length != 0 => return Err(WireError::Malformed),
            _ => {}
        }
        if data.len() < HEADER_LEN + length {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    fn u16_at(&self, range: std::ops::Range<usize>) -> u16 {
        u16::from_be_bytes(self.buffer.as_ref()[range].try_into().expect("2 bytes"))
    }

    fn u32_at(&self, range: std::ops::Range<usize>) -> u32 {
        u32::from_be_bytes(self.buffer.as_ref()[range].try_into().expect("4 bytes"))
    }

    pub fn kind(&self) -> Option<Kind> {
        match self.buffer.as_ref()[field::KIND_FLAGS] >> FLAG_BITS {
            1 => Some(Kind::Data),
            2 => Some(Kind::Ack),
            3 => Some(Kind::ClassProbe),
            _ => None,
        }
    }

    pub fn flags(&self) -> Flags {
        Flags(self.buffer.as_ref()[field::KIND_FLAGS] & FLAG_MASK)
    }

    pub fn job_tag(&self) -> u8 {
        self.buffer.as_ref()[field::JOB_TAG]
    }

    pub fn rank(&self) -> u16 {
        self.u16_at(field::RANK)
    }

    pub fn length(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    pub fn message(&self) -> u32 {
        self.u32_at(field::MESSAGE)
    }

    pub fn sequence(&self) -> u32 {
        self.u32_at(field::SEQUENCE)
    }

    /// The payload the header announces (checked views only: in bounds).
    pub fn payload(&self) -> &[u8] {
        let length = usize::from(self.length());
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + length]
    }

    /// Bytes the packet occupies: header and payload.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.length())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put(&mut self, range: std::ops::Range<usize>, bytes: &[u8]) {
        self.buffer.as_mut()[range].copy_from_slice(bytes);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let length = usize::from(self.length());
        &mut self.buffer.as_mut()[HEADER_LEN..HEADER_LEN + length]
    }

    /// Writes `header`; the payload is written separately.
    pub fn emit(&mut self, header: &Header) {
        let data = self.buffer.as_mut();
        data[field::MAGIC] = MAGIC;
        data[field::VERSION] = VERSION;
        data[field::KIND_FLAGS] = (header.kind as u8) << FLAG_BITS | header.flags.0 & FLAG_MASK;
        data[field::JOB_TAG] = header.job_tag;
        self.put(field::RANK, &header.rank.to_be_bytes());
        self.put(field::LENGTH, &header.length.to_be_bytes());
        self.put(field::MESSAGE, &header.message.to_be_bytes());
        self.put(field::SEQUENCE, &header.sequence.to_be_bytes());
    }
}

/// Names a message between two ranks of a job; it travels in the control channel's
/// READY, beside the receiver's handle for it, and never in a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId {
    pub tensor: u32,
    pub round: u32,
    pub step: u16,
}

/// A header, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub flags: Flags,
    /// The low byte of the job id.
    pub job_tag: u8,
    /// The sender's rank.
    pub rank: u16,
    pub length: u16,
    /// The receiver's handle for the message.
    pub message: u32,
    pub sequence: u32,
}

impl Header {
    /// The header fields of `packet`; a kind it does not know is malformed (a packet
    /// from `new_checked` never has one).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Header, WireError> {
        Ok(Header {
            kind: packet.kind().ok_or(WireError::Malformed)?,
            flags: packet.flags(),
            job_tag: packet.job_tag(),
            rank: packet.rank(),
            length: packet.length(),
            message: packet.message(),
            sequence: packet.sequence(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            kind: Kind::Data,
            flags: Flags(Flags::LAST | Flags::IMPORTANT),
            job_tag: 7,
            rank: 2,
            length: 8,
            message: 0x0a0b_0c0d,
            sequence: 1234,
        }
    }

    fn emitted(h: &Header) -> Vec<u8> {
        let mut bytes = vec![0u8; HEADER_LEN + usize::from(h.length)];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.emit(h);
        packet
            .payload_mut()
            .copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8][..usize::from(h.length)]);
        bytes
    }

    #[test]
    fn emit_then_parse_gives_the_same_header_and_payload() {
        let h = header();
        let bytes = emitted(&h);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Header::parse(&packet), Ok(h));
        assert_eq!(packet.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            &bytes[..HEADER_LEN],
            &[
                0x4d, VERSION, 0x23, 7, 0, 2, 0, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0x04, 0xd2
            ]
        );
    }

    #[test]
    fn every_flag_has_a_meaning() {
        let mut h = header();
        h.flags = Flags(0x1f);
        let bytes = emitted(&h);
        assert_eq!(
            Packet::new_checked(&bytes[..]).unwrap().flags(),
            Flags(0x1f)
        );
    }

    #[test]
    fn short_foreign_and_malformed_buffers_are_refused() {
        let bytes = emitted(&header());
        for cut in [0, 1, HEADER_LEN - 1, HEADER_LEN, bytes.len() - 1] {
            assert_eq!(
                Packet::new_checked(&bytes[..cut]).unwrap_err(),
                WireError::Truncated,
                "cut at {cut}"
            );
        }
        let edit = |at: usize, value: u8| {
            let mut b = bytes.clone();
            b[at] = value;
            Packet::new_checked(b).map(drop).unwrap_err()
        };
        assert_eq!(edit(0, 0x00), WireError::Foreign);
        // Earlier versions' packets are foreign (version 1 had 36-byte headers, versions
        // 2 and 3 a four-bit kind).
        for version in 1..VERSION {
            assert_eq!(edit(1, version), WireError::Foreign);
        }
        // An unknown kind.
        assert_eq!(edit(2, 0x93), WireError::Malformed);
        // A length of part of an element.
        assert_eq!(edit(7, 7), WireError::Malformed);
        // An ACK with a payload.
        let mut ack = header();
        ack.kind = Kind::Ack;
        assert_eq!(
            Packet::new_checked(emitted(&ack)).map(drop).unwrap_err(),
            WireError::Malformed
        );
        ack.length = 0;
        assert!(Packet::new_checked(emitted(&ack)).is_ok());
    }
}
