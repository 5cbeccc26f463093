//! Raw (AF_PACKET) sockets on a switch's ports, read and written in batches
//! (`recvmmsg`, `sendmmsg`): a wake-up moves every frame that came or is due, not one.
//! A port's socket carries a `virtio_net_hdr` before every frame (`PACKET_VNET_HDR`)
//! so that GSO super-frames cross whole ([`super::superframe`]).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::superframe::VNET_LEN;
use crate::fabric::LabError;

pub const ETH_P_ALL: u16 = 0x0003;
pub const ETH_P_ARP: u16 = 0x0806;
/// Linux's PACKET_IGNORE_OUTGOING: a socket does not see the frames it sends.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// The largest frame a port hands over: a GSO super-frame of 64 KiB and its Ethernet
/// header.
pub const MAX_FRAME: usize = 65536 + 14 + 4;
/// Frames read from one socket in one call.
pub const BATCH: usize = 32;
/// Socket buffers: a few milliseconds of super-frames at the lab's rates.
const SOCKET_BUFFER: libc::c_int = 16 << 20;

/// A raw socket on interface `index` receiving `protocol` (not its own sends);
/// `vnet`: with a `virtio_net_hdr` before every frame, both ways.
pub fn packet_socket(index: i32, protocol: u16, vnet: bool) -> Result<OwnedFd, LabError> {
    let failed = |what: &str| LabError::Io {
        what: format!("{what} (interface {index})"),
        source: std::io::Error::last_os_error(),
    };
    let on: libc::c_int = 1;
    let set = |fd: &OwnedFd, level, name, value: &libc::c_int| {
        // SAFETY: an int option on a socket we own.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                level,
                name,
                (value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            ) == 0
        }
    };
    // SAFETY: plain socket calls; the descriptor is owned by the OwnedFd at once.
    let fd = unsafe {
        let fd = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            i32::from(protocol.to_be()),
        );
        if fd < 0 {
            return Err(failed("cannot open a packet socket"));
        }
        OwnedFd::from_raw_fd(fd)
    };
    if vnet && !set(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &on) {
        return Err(failed("cannot take vnet headers on a packet socket"));
    }
    // SAFETY: binding to an interface of this namespace.
    let bound = unsafe {
        let mut address: libc::sockaddr_ll = std::mem::zeroed();
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = protocol.to_be();
        address.sll_ifindex = index;
        libc::bind(
            fd.as_raw_fd(),
            (&address as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        ) == 0
    };
    if !bound {
        return Err(failed("cannot bind a packet socket"));
    }
    if !set(&fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &on) {
        return Err(failed("cannot ignore a packet socket's own frames"));
    }
    // Larger buffers are an optimisation (FORCE needs CAP_NET_ADMIN, which the lab has).
    // No PACKET_QDISC_BYPASS: its direct transmit drops a super-frame the port must
    // segment (a host's port) instead of segmenting it.
    for name in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        set(&fd, libc::SOL_SOCKET, name, &SOCKET_BUFFER);
    }
    Ok(fd)
}

/// Buffers a batch of frames is read into: each frame into a buffer of its own,
/// which a large frame keeps (no copy) and a small one leaves for the next.
pub struct Inbox {
    vnets: Vec<[u8; VNET_LEN]>,
    frames: Vec<Vec<u8>>,
}

/// Frames up to this many bytes are copied out of their buffer; larger ones take it.
const COPIED: usize = 16 << 10;

impl Inbox {
    pub fn new() -> Inbox {
        Inbox {
            vnets: vec![[0; VNET_LEN]; BATCH],
            frames: (0..BATCH).map(|_| Vec::with_capacity(MAX_FRAME)).collect(),
        }
    }

    /// Reads what `socket` holds, up to a batch, without waiting: each frame with the
    /// vnet header before it (`vnet`: the socket gives one; else a zeroed one).
    pub fn receive(&mut self, socket: &OwnedFd, vnet: bool) -> Vec<([u8; VNET_LEN], Vec<u8>)> {
        let mut iovecs: Vec<[libc::iovec; 2]> = self
            .vnets
            .iter_mut()
            .zip(&mut self.frames)
            .map(|(header, frame)| {
                [
                    libc::iovec {
                        iov_base: header.as_mut_ptr().cast(),
                        iov_len: if vnet { VNET_LEN } else { 0 },
                    },
                    libc::iovec {
                        iov_base: frame.as_mut_ptr().cast(),
                        iov_len: frame.capacity(),
                    },
                ]
            })
            .collect();
        let mut messages: Vec<libc::mmsghdr> = iovecs.iter_mut().map(|iov| message(iov)).collect();
        // SAFETY: the messages point into buffers that outlive the call.
        let got = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                messages.as_mut_ptr(),
                messages.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let got = usize::try_from(got).unwrap_or(0);
        let mut out = Vec::with_capacity(got);
        for (i, m) in messages.iter().enumerate().take(got) {
            let header = if vnet { VNET_LEN } else { 0 };
            // A frame longer than the buffer was cut (MSG_TRUNC): not forwarded.
            let Some(len) = (m.msg_len as usize).checked_sub(header) else {
                continue;
            };
            if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                continue;
            }
            let frame = &mut self.frames[i];
            // SAFETY: the kernel wrote `len` bytes into the buffer's capacity.
            unsafe { frame.set_len(len) };
            let frame = if len <= COPIED {
                let copy = frame.clone();
                frame.clear();
                copy
            } else {
                std::mem::replace(frame, Vec::with_capacity(MAX_FRAME))
            };
            out.push((self.vnets[i], frame));
        }
        out
    }
}

/// A message of `iovecs` (which must outlive the call it is given to).
fn message(iovecs: &mut [libc::iovec]) -> libc::mmsghdr {
    // SAFETY: a zeroed mmsghdr is valid (no name, no control data).
    let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
    m.msg_hdr.msg_iov = iovecs.as_mut_ptr();
    m.msg_hdr.msg_iovlen = iovecs.len();
    m
}

/// Sends frames out of interface `index`, each given as its parts in order, in
/// batches; how many the kernel refused.
pub fn send_all(socket: &OwnedFd, index: i32, frames: &[Vec<&[u8]>]) -> u64 {
    // SAFETY: a zeroed sockaddr_ll is valid; it names this namespace's interface.
    let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    address.sll_family = libc::AF_PACKET as u16;
    address.sll_ifindex = index;
    let mut refused = 0;
    for chunk in frames.chunks(BATCH) {
        let mut iovecs: Vec<Vec<libc::iovec>> = chunk
            .iter()
            .map(|parts| {
                parts
                    .iter()
                    .map(|p| libc::iovec {
                        iov_base: p.as_ptr().cast_mut().cast(),
                        iov_len: p.len(),
                    })
                    .collect()
            })
            .collect();
        // Each message names the address, which outlives the call.
        let mut messages: Vec<libc::mmsghdr> = iovecs
            .iter_mut()
            .map(|iov| {
                let mut m = message(iov);
                m.msg_hdr.msg_name = (&mut address as *mut libc::sockaddr_ll).cast();
                m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                m
            })
            .collect();
        let mut at = 0;
        while at < messages.len() {
            // SAFETY: the messages from `at` on are valid, as above.
            let sent = unsafe {
                libc::sendmmsg(
                    socket.as_raw_fd(),
                    messages[at..].as_mut_ptr(),
                    (messages.len() - at) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            match usize::try_from(sent) {
                Ok(n) if n > 0 => at += n,
                // The first message of the rest was refused: count it, go on.
                _ => {
                    refused += 1;
                    at += 1;
                }
            }
        }
    }
    refused
}
