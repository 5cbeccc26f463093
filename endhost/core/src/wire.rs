//! The transport's packets: a fixed header in the UDP payload, then the data.
//!
//! Typed zero-copy views over byte buffers, in the manner of smoltcp's `wire`:
//! [`Packet::new_checked`] refuses a buffer too short for its header or for the length
//! the header claims, or one that is not ours (magic, version, kind), so every accessor
//! afterwards is in bounds. Multi-byte fields are big-endian. The same bytes go over
//! kernel sockets and DPDK, so hosts on either datapath interoperate.
//!
//! ```text
//!  0       2     3           4       6       8         12          16        20
//!  +-------+-----+-----------+-------+-------+---------+-----------+---------+
//!  | magic | ver |kind|flags | rank  | layer | job id  | tensor id |  round  |
//!  +-------+-----+-----------+-------+-------+---------+-----------+---------+
//!  20      22       24         28            32               36
//!  +-------+--------+----------+-------------+----------------+------ ... ---+
//!  | step  | length | sequence | byte offset | send time (µs) | payload      |
//!  +-------+--------+----------+-------------+----------------+------ ... ---+
//! ```
//!
//! A *message* is one sender's transfer of one byte range to one receiver, named by
//! (job, tensor, round, step) and the two ranks. `sequence` numbers its packets from 0;
//! `offset` is where the payload goes in the message (its low 32 bits: the sequence
//! says the rest). An acknowledgement (kind [`Kind::Ack`]) has no payload: `sequence`
//! is the data packet that triggered it and `timestamp` echoes that packet's send time.
//! Times are microseconds modulo 2³², so RTTs are differences that wrap.
//!
//! The header is 36 bytes, the fields DESIGN §7 asks for and no more: with a 1,500-byte
//! MTU a packet carries 359 values (1,436 bytes), 97.5% of the datagram.

use std::fmt;

pub const MAGIC: u16 = 0x4d4c; // "ML"
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 36;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    /// Kind in the high four bits, flags in the low four.
    pub const KIND_FLAGS: usize = 3;
    pub const RANK: Range<usize> = 4..6;
    pub const LAYER: Range<usize> = 6..8;
    pub const JOB: Range<usize> = 8..12;
    pub const TENSOR: Range<usize> = 12..16;
    pub const ROUND: Range<usize> = 16..20;
    pub const STEP: Range<usize> = 20..22;
    pub const LENGTH: Range<usize> = 22..24;
    pub const SEQUENCE: Range<usize> = 24..28;
    pub const OFFSET: Range<usize> = 28..32;
    pub const TIMESTAMP: Range<usize> = 32..36;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Data = 1,
    Ack = 2,
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

    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// Why bytes are not one of our packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// Shorter than a header, or than the length the header claims.
    Truncated,
    /// Not our magic number or version.
    Foreign,
    /// An unknown kind, flags we do not know, or a length that is not whole elements.
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
        if self.magic() != MAGIC || data[field::VERSION] != VERSION {
            return Err(WireError::Foreign);
        }
        let kind = self.kind().ok_or(WireError::Malformed)?;
        let known = Flags::LAST | Flags::IMPORTANT | Flags::RETRANSMIT;
        if self.flags().0 & !known != 0 {
            return Err(WireError::Malformed);
        }
        let length = usize::from(self.length());
        match kind {
            Kind::Data if length == 0 || length % 4 != 0 || !self.offset().is_multiple_of(4) => {
                return Err(WireError::Malformed);
            }
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

    pub fn magic(&self) -> u16 {
        self.u16_at(field::MAGIC)
    }

    pub fn kind(&self) -> Option<Kind> {
        match self.buffer.as_ref()[field::KIND_FLAGS] >> 4 {
            1 => Some(Kind::Data),
            2 => Some(Kind::Ack),
            _ => None,
        }
    }

    pub fn flags(&self) -> Flags {
        Flags(self.buffer.as_ref()[field::KIND_FLAGS] & 0x0f)
    }

    pub fn rank(&self) -> u16 {
        self.u16_at(field::RANK)
    }

    pub fn job(&self) -> u32 {
        self.u32_at(field::JOB)
    }

    pub fn tensor(&self) -> u32 {
        self.u32_at(field::TENSOR)
    }

    pub fn round(&self) -> u32 {
        self.u32_at(field::ROUND)
    }

    pub fn step(&self) -> u16 {
        self.u16_at(field::STEP)
    }

    pub fn layer(&self) -> u16 {
        self.u16_at(field::LAYER)
    }

    pub fn sequence(&self) -> u32 {
        self.u32_at(field::SEQUENCE)
    }

    pub fn length(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    pub fn offset(&self) -> u32 {
        self.u32_at(field::OFFSET)
    }

    pub fn timestamp(&self) -> u32 {
        self.u32_at(field::TIMESTAMP)
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
        self.put(field::MAGIC, &MAGIC.to_be_bytes());
        let data = self.buffer.as_mut();
        data[field::VERSION] = VERSION;
        data[field::KIND_FLAGS] = (header.kind as u8) << 4 | header.flags.0 & 0x0f;
        self.put(field::RANK, &header.rank.to_be_bytes());
        self.put(field::JOB, &header.job.to_be_bytes());
        self.put(field::TENSOR, &header.id.tensor.to_be_bytes());
        self.put(field::ROUND, &header.id.round.to_be_bytes());
        self.put(field::STEP, &header.id.step.to_be_bytes());
        self.put(field::LAYER, &header.layer.to_be_bytes());
        self.put(field::SEQUENCE, &header.sequence.to_be_bytes());
        self.put(field::LENGTH, &header.length.to_be_bytes());
        self.put(field::OFFSET, &header.offset.to_be_bytes());
        self.put(field::TIMESTAMP, &header.timestamp.to_be_bytes());
    }
}

/// Names a message between two ranks of a job.
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
    pub rank: u16,
    pub job: u32,
    pub id: MessageId,
    pub layer: u16,
    pub sequence: u32,
    pub length: u16,
    /// The payload's byte offset in the message, modulo 2³².
    pub offset: u32,
    /// Send time in microseconds, modulo 2³².
    pub timestamp: u32,
}

impl Header {
    /// The header fields of `packet`; a kind it does not know is malformed (a packet
    /// from `new_checked` never has one).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Header, WireError> {
        Ok(Header {
            kind: packet.kind().ok_or(WireError::Malformed)?,
            flags: packet.flags(),
            rank: packet.rank(),
            job: packet.job(),
            id: MessageId {
                tensor: packet.tensor(),
                round: packet.round(),
                step: packet.step(),
            },
            layer: packet.layer(),
            sequence: packet.sequence(),
            length: packet.length(),
            offset: packet.offset(),
            timestamp: packet.timestamp(),
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
            rank: 2,
            job: 7,
            id: MessageId {
                tensor: 11,
                round: 5,
                step: 4,
            },
            layer: 9,
            sequence: 1234,
            length: 8,
            offset: 4096,
            timestamp: 0x0102_0304,
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
        assert_eq!(&bytes[..4], &[0x4d, 0x4c, 1, 0x13]);
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
        assert_eq!(edit(2, 2), WireError::Foreign);
        // An unknown kind, an unknown flag.
        assert_eq!(edit(3, 0x93), WireError::Malformed);
        assert_eq!(edit(3, 0x18), WireError::Malformed);
        // A length of part of an element, or an offset inside one.
        assert_eq!(edit(23, 7), WireError::Malformed);
        assert_eq!(edit(31, 2), WireError::Malformed);
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
