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

/// What a command printed: its standard output and standard error.
pub(super) struct Printed {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Writes `input` (then end of file) to `channel`'s command while reading what it
/// prints, until both of its output streams have ended; each at most
/// [`MAX_OUTPUT_BYTES`]. The session's timeout (if it has one) bounds the whole
/// exchange: a device that trickles bytes forever is cut off like a silent one. A
/// command that ends without reading all of its input is not an error: what it
/// printed is its answer.
pub(super) fn exchange(
    session: &Session,
    channel: &mut Channel,
    input: &[u8],
) -> io::Result<Printed> {
    let timeout = match session.timeout() {
        0 => None,
        ms => Some(Duration::from_millis(u64::from(ms))),
    };
    session.set_blocking(false);
    let printed = pump(session, channel, input, timeout);
    session.set_blocking(true);
    printed
}

fn pump(
    session: &Session,
    channel: &mut Channel,
    input: &[u8],
    timeout: Option<Duration>,
) -> io::Result<Printed> {
    let mut written = 0;
    let mut eof_sent = false;
    let mut stdout = Collected::default();
    let mut stderr = Collected::default();
    let mut buf = vec![0u8; 32 << 10];
    let deadline = timeout.map(|timeout| (Instant::now() + timeout, timeout));
    loop {
        let mut progress = false;
        if written < input.len() {
            match channel.write(&input[written..]) {
                Ok(n) => {
                    written += n;
                    progress |= n > 0;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        } else if !eof_sent {
            match channel.send_eof().map_err(io::Error::from) {
                Ok(()) => {
                    eof_sent = true;
                    progress = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        progress |= stdout.read_from(&mut channel.stream(0), &mut buf)?;
        progress |= stderr.read_from(&mut channel.stderr(), &mut buf)?;
        if stdout.ended && stderr.ended {
            return Ok(Printed {
                stdout: stdout.bytes,
                stderr: stderr.bytes,
            });
        }
        let left = match deadline {
            Some((at, timeout)) => at
                .checked_duration_since(Instant::now())
                .filter(|left| !left.is_zero())
                .ok_or_else(|| {
                    io::Error::new(
                        ErrorKind::TimedOut,
                        format!("the command did not end within {timeout:?}"),
                    )
                })?,
            None => Duration::MAX,
        };
        if !progress {
            wait(session, left)?;
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
