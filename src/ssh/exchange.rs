//! One command's exchange over an SSH channel: its input written while both of its
//! output streams are read, each as data comes. Read one stream to its end before the
//! other, or write all the input before reading, and a device that fills the window
//! of what is not being read (megabytes of warnings on standard error, or output
//! while it still reads its input) waits for mltctl while mltctl waits for it.

use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use ssh2::{BlockDirections, Channel, Session};

use super::MAX_OUTPUT_BYTES;

/// What a command printed, and how it ended.
pub(super) struct Printed {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: i32,
}

/// Writes `input` (then end of file) to `channel`'s command while reading what it
/// prints, until both of its output streams have ended and the channel has closed;
/// each stream at most [`MAX_OUTPUT_BYTES`]. The session's timeout (if it has one)
/// bounds the whole exchange: a device that trickles bytes forever is cut off like a
/// silent one. A command that ends without reading all of its input is not an error:
/// what it printed is its answer.
pub(super) fn exchange(
    session: &Session,
    channel: &mut Channel,
    input: &[u8],
) -> io::Result<Printed> {
    let deadline = Deadline::of(session);
    session.set_blocking(false);
    let mut writer = Writer::default();
    let printed = pump(session, channel, input, &mut writer, &deadline);
    if writer.half_sent {
        // libssh2 sends nothing else (a close included) before that packet's end.
        writer.finish(session, channel, input, &deadline);
    }
    let printed = printed.and_then(|(stdout, stderr)| {
        until_ready(session, &deadline, || channel.wait_close())?;
        let status = channel.exit_status().map_err(io::Error::from)?;
        Ok(Printed {
            stdout,
            stderr,
            status,
        })
    });
    session.set_blocking(true);
    printed
}

fn pump(
    session: &Session,
    channel: &mut Channel,
    input: &[u8],
    writer: &mut Writer,
    deadline: &Deadline,
) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut stdout = Collected::default();
    let mut stderr = Collected::default();
    let mut buf = vec![0u8; 32 << 10];
    let mut looked_again = false;
    loop {
        let mut progress = writer.step(channel, input)?;
        progress |= stdout.read_from(&mut channel.stream(0), &mut buf)?;
        progress |= stderr.read_from(&mut channel.stderr(), &mut buf)?;
        if stdout.ended && stderr.ended {
            return Ok((stdout.bytes, stderr.bytes));
        }
        let left = deadline.left()?;
        // Reading one stream takes in what came for the other: look again (once: data
        // of a stream no one reads would have it look forever) before waiting on a
        // socket that libssh2 may have emptied already.
        if progress {
            looked_again = false;
        } else if channel.read_window().available > 0 && !looked_again {
            looked_again = true;
        } else {
            looked_again = false;
            wait(session, left)?;
        }
    }
}

/// The input's side of an exchange.
#[derive(Default)]
struct Writer {
    written: usize,
    eof_sent: bool,
    /// The last write left a packet partly on the socket: libssh2 finishes it only
    /// when the same write is called again.
    half_sent: bool,
}

impl Writer {
    /// Writes what the channel takes now; whether anything went.
    fn step(&mut self, channel: &mut Channel, input: &[u8]) -> io::Result<bool> {
        if self.written < input.len() {
            match channel.write(&input[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    self.half_sent = false;
                    Ok(n > 0)
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // A full window sends nothing; a full socket leaves a packet begun.
                    self.half_sent = channel.write_window().remaining > 0;
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        } else if !self.eof_sent {
            match channel.send_eof().map_err(io::Error::from) {
                Ok(()) => {
                    self.eof_sent = true;
                    Ok(true)
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(e),
            }
        } else {
            Ok(false)
        }
    }

    /// Sends the rest of a packet begun, within the exchange's time (a second at least:
    /// the socket, not the device, held it).
    fn finish(
        &mut self,
        session: &Session,
        channel: &mut Channel,
        input: &[u8],
        deadline: &Deadline,
    ) {
        let until = deadline
            .at
            .map_or(Instant::now() + Duration::from_secs(1), |at| {
                at.max(Instant::now() + Duration::from_secs(1))
            });
        while self.half_sent && Instant::now() < until {
            if !matches!(self.step(channel, input), Ok(false)) {
                return;
            }
            if self.half_sent {
                let _ = wait(session, until.saturating_duration_since(Instant::now()));
            }
        }
    }
}

/// When the exchange must end, from the session's timeout.
struct Deadline {
    at: Option<Instant>,
    timeout: Duration,
}

impl Deadline {
    fn of(session: &Session) -> Deadline {
        let timeout = Duration::from_millis(u64::from(session.timeout()));
        Deadline {
            at: (!timeout.is_zero()).then(|| Instant::now() + timeout),
            timeout,
        }
    }

    /// The time left, or the error of its end.
    fn left(&self) -> io::Result<Duration> {
        let Some(at) = self.at else {
            return Ok(Duration::MAX);
        };
        at.checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
            .ok_or_else(|| {
                io::Error::new(
                    ErrorKind::TimedOut,
                    format!("the command did not end within {:?}", self.timeout),
                )
            })
    }
}

/// Repeats `call` until it no longer would block, waiting on the socket between tries.
fn until_ready(
    session: &Session,
    deadline: &Deadline,
    mut call: impl FnMut() -> Result<(), ssh2::Error>,
) -> io::Result<()> {
    loop {
        match call().map_err(io::Error::from) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => wait(session, deadline.left()?)?,
            done => return done,
        }
    }
}

/// One output stream, read so far.
#[derive(Default)]
struct Collected {
    bytes: Vec<u8>,
    ended: bool,
}

impl Collected {
    /// Reads what `stream` has now; whether anything came (data, or its end).
    fn read_from(&mut self, stream: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
        let mut progress = false;
        while !self.ended {
            match stream.read(buf) {
                Ok(0) => self.ended = true,
                Ok(n) if (self.bytes.len() + n) as u64 > MAX_OUTPUT_BYTES => {
                    return Err(io::Error::new(
                        ErrorKind::InvalidData,
                        format!(
                            "the device printed more than {MAX_OUTPUT_BYTES} bytes in answer to \
                             one command"
                        ),
                    ));
                }
                Ok(n) => self.bytes.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(progress),
                Err(e) => return Err(e),
            }
            progress = true;
        }
        Ok(progress)
    }
}

/// Waits until the session's socket can go on the way the session is blocked, or `left`
/// has passed.
fn wait(session: &Session, left: Duration) -> io::Result<()> {
    let (events, left) = match session.block_directions() {
        BlockDirections::Inbound => (libc::POLLIN, left),
        BlockDirections::Outbound => (libc::POLLOUT, left),
        BlockDirections::Both => (libc::POLLIN | libc::POLLOUT, left),
        // Not blocked on the socket (a stream had nothing yet): look again soon.
        BlockDirections::None => (libc::POLLIN, left.min(Duration::from_millis(10))),
    };
    let mut socket = libc::pollfd {
        fd: session.as_raw_fd(),
        events,
        revents: 0,
    };
    // poll() takes milliseconds as an int: a longer wait is several.
    let ms = left.as_millis().clamp(1, 60_000) as libc::c_int;
    // SAFETY: one pollfd, valid for the call.
    if unsafe { libc::poll(&mut socket, 1, ms) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
