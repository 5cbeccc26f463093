//! Control messages: the reliable channel's vocabulary (MLT §4.2.3, §5.1), and their
//! framing on a byte stream.
//!
//! Frames are `u32 length` (big-endian, of what follows) then a type byte and fields.
//! A frame longer than [`MAX_FRAME`], of an unknown type, or with fields that do not
//! add up is an error: the connection is not trusted any further.

use crate::wire::MessageId;

pub const MAX_FRAME: usize = 1 << 20;
/// Missing ranges one bitmap frame carries at most; the sender probes again for more.
pub const MAX_RANGES: usize = 8192;
/// Bytes of a HELLO's nonce and of an AUTH's MAC.
pub const NONCE_LEN: usize = 16;
pub const MAC_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// First frame on a connection: who is speaking, the wire version it speaks
    /// (version 1's HELLO had none: read as 1), a fresh nonce, and whether it proves
    /// the job's key (then an [`Control::Auth`] follows each side's HELLO).
    Hello {
        version: u8,
        job: u32,
        rank: u16,
        nonce: [u8; NONCE_LEN],
        authenticated: bool,
    },
    /// Proof of the job's key: a MAC over both HELLOs (see `endhost::mesh`).
    Auth { mac: [u8; MAC_LEN] },
    /// The receiver has a buffer for the message: send (the rendezvous). Its data
    /// packets carry `handle`, the receiver's name for the message.
    Ready { id: MessageId, handle: u32 },
    /// Enough of the message has arrived: stop sending it.
    Stop(MessageId),
    /// The sender has sent every packet once: which are missing?
    Probe(MessageId),
    /// Missing packets, as (first sequence, count) ranges.
    Bitmap {
        id: MessageId,
        missing: Vec<(u32, u32)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    TooLong,
    UnknownType(u8),
    BadLength,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLong => write!(f, "control frame longer than {MAX_FRAME} bytes"),
            FrameError::UnknownType(t) => write!(f, "unknown control frame type {t}"),
            FrameError::BadLength => f.write_str("control frame fields do not match its length"),
        }
    }
}

impl std::error::Error for FrameError {}

const HELLO: u8 = 1;
const READY: u8 = 2;
const STOP: u8 = 3;
const PROBE: u8 = 4;
const BITMAP: u8 = 5;
const AUTH: u8 = 6;
/// A HELLO's flags: bit 0, it proves the job's key.
const AUTHENTICATED: u8 = 1;

fn put_id(out: &mut Vec<u8>, id: &MessageId) {
    out.extend_from_slice(&id.tensor.to_be_bytes());
    out.extend_from_slice(&id.round.to_be_bytes());
    out.extend_from_slice(&id.step.to_be_bytes());
}

impl Control {
    /// The frame's kind, as an error message names it.
    pub fn name(&self) -> &'static str {
        match self {
            Control::Hello { .. } => "HELLO",
            Control::Auth { .. } => "AUTH",
            Control::Ready { .. } => "READY",
            Control::Stop(_) => "STOP",
            Control::Probe(_) => "PROBE",
            Control::Bitmap { .. } => "BITMAP",
        }
    }

    /// Appends the frame (length prefix included) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            Control::Hello {
                version,
                job,
                rank,
                nonce,
                authenticated,
            } => {
                out.push(HELLO);
                out.push(*version);
                out.extend_from_slice(&job.to_be_bytes());
                out.extend_from_slice(&rank.to_be_bytes());
                out.push(if *authenticated { AUTHENTICATED } else { 0 });
                out.extend_from_slice(nonce);
            }
            Control::Auth { mac } => {
                out.push(AUTH);
                out.extend_from_slice(mac);
            }
            Control::Ready { id, handle } => {
                out.push(READY);
                put_id(out, id);
                out.extend_from_slice(&handle.to_be_bytes());
            }
            Control::Stop(id) | Control::Probe(id) => {
                out.push(if matches!(self, Control::Stop(_)) {
                    STOP
                } else {
                    PROBE
                });
                put_id(out, id);
            }
            Control::Bitmap { id, missing } => {
                out.push(BITMAP);
                put_id(out, id);
                let count = missing.len().min(MAX_RANGES);
                out.extend_from_slice(&(count as u32).to_be_bytes());
                for (first, n) in &missing[..count] {
                    out.extend_from_slice(&first.to_be_bytes());
                    out.extend_from_slice(&n.to_be_bytes());
                }
            }
        }
        let length = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&length.to_be_bytes());
    }

    /// Takes one whole frame off the front of `buf`, if there is one.
    pub fn decode(buf: &mut Vec<u8>) -> Result<Option<Control>, FrameError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let length = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize;
        if length > MAX_FRAME {
            return Err(FrameError::TooLong);
        }
        if buf.len() < 4 + length {
            return Ok(None);
        }
        let frame = parse(&buf[4..4 + length])?;
        buf.drain(..4 + length);
        Ok(Some(frame))
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        if self.0.len() < N {
            return Err(FrameError::BadLength);
        }
        let (head, tail) = self.0.split_at(N);
        self.0 = tail;
        Ok(head.try_into().expect("N bytes"))
    }

    fn u16(&mut self) -> Result<u16, FrameError> {
        self.take().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Result<u32, FrameError> {
        self.take().map(u32::from_be_bytes)
    }

    fn id(&mut self) -> Result<MessageId, FrameError> {
        Ok(MessageId {
            tensor: self.u32()?,
            round: self.u32()?,
            step: self.u16()?,
        })
    }
}

fn parse(frame: &[u8]) -> Result<Control, FrameError> {
    let (&kind, rest) = frame.split_first().ok_or(FrameError::BadLength)?;
    let mut r = Reader(rest);
    let control = match kind {
        // Versions 1 and 2 said no more than who is speaking: read so that the version
        // can be named.
        HELLO if r.0.len() <= 7 => Control::Hello {
            version: if r.0.len() == 6 { 1 } else { r.take::<1>()?[0] },
            job: r.u32()?,
            rank: r.u16()?,
            nonce: [0; NONCE_LEN],
            authenticated: false,
        },
        HELLO => Control::Hello {
            version: r.take::<1>()?[0],
            job: r.u32()?,
            rank: r.u16()?,
            authenticated: match r.take::<1>()?[0] {
                0 => false,
                AUTHENTICATED => true,
                _ => return Err(FrameError::BadLength),
            },
            nonce: r.take()?,
        },
        AUTH => Control::Auth { mac: r.take()? },
        READY => Control::Ready {
            id: r.id()?,
            handle: r.u32()?,
        },
        STOP => Control::Stop(r.id()?),
        PROBE => Control::Probe(r.id()?),
        BITMAP => {
            let id = r.id()?;
            let count = r.u32()? as usize;
            if count > MAX_RANGES || r.0.len() != count * 8 {
                return Err(FrameError::BadLength);
            }
            let mut missing = Vec::with_capacity(count);
            for _ in 0..count {
                missing.push((r.u32()?, r.u32()?));
            }
            Control::Bitmap { id, missing }
        }
        other => return Err(FrameError::UnknownType(other)),
    };
    if !r.0.is_empty() {
        return Err(FrameError::BadLength);
    }
    Ok(control)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> MessageId {
        MessageId {
            tensor: 3,
            round: 9,
            step: 2,
        }
    }

    #[test]
    fn frames_round_trip_and_split_anywhere() {
        let messages = [
            Control::Hello {
                version: 3,
                job: 7,
                rank: 3,
                nonce: [9; NONCE_LEN],
                authenticated: true,
            },
            Control::Auth { mac: [7; MAC_LEN] },
            Control::Ready {
                id: id(),
                handle: 0xdead_beef,
            },
            Control::Stop(id()),
            Control::Probe(id()),
            Control::Bitmap {
                id: id(),
                missing: vec![(0, 3), (100, 1)],
            },
        ];
        let mut stream = Vec::new();
        for m in &messages {
            m.encode(&mut stream);
        }
        // Fed one byte at a time, the same frames come out.
        let mut buf = Vec::new();
        let mut out = Vec::new();
        for byte in stream {
            buf.push(byte);
            while let Some(m) = Control::decode(&mut buf).unwrap() {
                out.push(m);
            }
        }
        assert_eq!(out, messages);
        assert!(buf.is_empty());
    }

    #[test]
    fn a_version_1_hello_reads_as_version_1() {
        let mut frame = vec![0, 0, 0, 7, HELLO, 0, 0, 0, 7, 0, 3];
        assert_eq!(
            Control::decode(&mut frame),
            Ok(Some(Control::Hello {
                version: 1,
                job: 7,
                rank: 3,
                nonce: [0; NONCE_LEN],
                authenticated: false,
            }))
        );
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut long = (MAX_FRAME as u32 + 1).to_be_bytes().to_vec();
        assert_eq!(Control::decode(&mut long), Err(FrameError::TooLong));
        let mut unknown = vec![0, 0, 0, 1, 99];
        assert_eq!(
            Control::decode(&mut unknown),
            Err(FrameError::UnknownType(99))
        );
        let mut short = vec![0, 0, 0, 3, STOP, 0, 0];
        assert_eq!(Control::decode(&mut short), Err(FrameError::BadLength));
        // A bitmap claiming more ranges than it holds.
        let mut frame = Vec::new();
        Control::Bitmap {
            id: id(),
            missing: vec![(1, 1)],
        }
        .encode(&mut frame);
        frame[4 + 1 + 10 + 3] = 2;
        assert_eq!(Control::decode(&mut frame), Err(FrameError::BadLength));
    }
}
