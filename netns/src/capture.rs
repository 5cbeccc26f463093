//! Looking at a namespace from inside: moving a thread into it, and capturing the
//! frames an interface there sees.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Moves the calling thread (only) into the named network namespace `ns`.
pub fn enter(ns: &str) -> io::Result<()> {
    let netns = std::fs::File::open(std::path::Path::new("/run/netns").join(ns))?;
    // SAFETY: setns on this thread only, with a namespace file we hold open.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A capture running on a thread of its own.
pub struct Capture {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<io::Result<Vec<Vec<u8>>>>,
}

impl Capture {
    /// Ends the capture and returns every frame it saw, those still queued included:
    /// the capture lasts as long as the traffic it watches, however slow the machine.
    pub fn finish(self) -> io::Result<Vec<Vec<u8>>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the capture thread panicked")))
    }
}

/// Sets the socket-level `option` to `value` (plain data of the type the option takes).
fn set_option<T>(socket: &OwnedFd, option: libc::c_int, value: &T) {
    // SAFETY: `value` is valid for its size for the call; the caller gives the type the
    // option takes.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
}

/// Captures the frames seen on interface `iface` of namespace `ns` (both directions)
/// until [`Capture::finish`], or for `limit` at most.
pub fn capture(ns: &str, iface: &str, limit: Duration) -> Capture {
    let ns = ns.to_string();
    let iface = iface.to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::spawn(move || {
        enter(&ns)?;
        let protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: creating a raw packet socket; checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol)) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = std::ffi::CString::new(iface.as_str()).map_err(io::Error::other)?;
        // SAFETY: sockaddr_ll is plain data; the index comes from the kernel.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol;
        // SAFETY: a NUL-terminated name.
        addr.sll_ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        if addr.sll_ifindex == 0 {
            return Err(io::Error::other(format!("no interface {iface} in {ns}")));
        }
        // SAFETY: binding our socket to a valid sockaddr_ll.
        let rc = unsafe {
            libc::bind(
                socket.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // Room for every frame of a test's traffic: the default (~100 frames) overflowed
        // while a loaded machine kept this thread from reading, and the kernel drops
        // what does not fit (root may exceed rmem_max).
        let room: libc::c_int = 64 << 20;
        set_option(&socket, libc::SO_RCVBUFFORCE, &room);
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        set_option(&socket, libc::SO_RCVTIMEO, &timeout);
        let mut frames = Vec::new();
        let mut buf = vec![0u8; 65_536];
        let end = std::time::Instant::now() + limit;
        loop {
            // Once stopped, only what is queued: a read that would wait ends it.
            let stopping = stopped.load(Ordering::Relaxed) || std::time::Instant::now() >= end;
            let flags = if stopping { libc::MSG_DONTWAIT } else { 0 };
            // SAFETY: receiving into a buffer of the size given.
            let n = unsafe {
                libc::recv(
                    socket.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    flags,
                )
            };
            if n > 0 {
                frames.push(buf[..n as usize].to_vec());
            } else if stopping {
                return Ok(frames);
            }
        }
    });
    Capture { stop, thread }
}
