//! Kernel UDP sockets, with the batching the kernel offers: `sendmmsg` of
//! segmentation-offload batches (UDP_SEGMENT: one call carries up to 64 datagrams of
//! one size to one address with one TOS) and `recvmmsg` of receive-offload batches
//! (UDP_GRO: the kernel hands over runs of datagrams at once). Each datagram's TOS (its
//! DSCP and ECN bits) is set per call with an IP_TOS control message, so packets of
//! different classes and importance share the socket. Where offload is refused, every
//! datagram goes on its own.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::Datapath;
use crate::sockopt::set_int;

// linux/udp.h
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Datagrams per receive call, and bytes per receive buffer (a whole GRO run).
const RX_BATCH: usize = 16;
const RX_BUFFER: usize = 65_535;
/// Segments per send call; the kernel accepts at most 64 and 64 KB.
const MAX_SEGMENTS: usize = 64;
const MAX_BATCH_BYTES: usize = 65_000;
/// Send calls gathered before they go out together.
const MAX_BATCHES: usize = 32;

struct Batch {
    to: SocketAddrV4,
    tos: u8,
    segment: usize,
    count: usize,
    /// A shorter datagram ended the batch (only the last segment may be short).
    closed: bool,
    bytes: Vec<u8>,
}

pub struct UdpDatapath {
    socket: UdpSocket,
    gso: bool,
    rx: Vec<Vec<u8>>,
    batches: Vec<Batch>,
    spare: Vec<Vec<u8>>,
}

fn sockaddr(addr: &SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; every field used is set below.
    let mut sa: libc::sockaddr_in = unsafe { zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = addr.port().to_be();
    sa.sin_addr = libc::in_addr {
        s_addr: u32::from(*addr.ip()).to_be(),
    };
    sa
}

impl UdpDatapath {
    /// Binds `local` (usually 0.0.0.0 and the job's data port) with large buffers.
    pub fn bind(local: SocketAddrV4) -> io::Result<UdpDatapath> {
        let socket = UdpSocket::bind(local)?;
        socket.set_nonblocking(true)?;
        let fd = socket.as_raw_fd();
        // Bursts of a whole tensor chunk arrive faster than one thread drains them:
        // ask for a deep receive buffer (the forced variant needs CAP_NET_ADMIN).
        let rcvbuf = 64 << 20;
        if set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcvbuf).is_err() {
            set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf)?;
        }
        // A late wake-up hands over a pacer's full bucket at once (a batch plus 500 µs at
        // line rate: 6 MB at 100 Gbit/s); a smaller send buffer would block the thread.
        let sndbuf = 8 << 20;
        if set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, sndbuf).is_err() {
            set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, sndbuf)?;
        }
        // Receive offload is an optimisation: without it datagrams come one by one.
        let _ = set_int(fd, libc::SOL_UDP, UDP_GRO, 1);
        // Each datagram's TOS (DSCP, and CE where a switch marked it) comes with it. GRO
        // coalesces only datagrams whose TOS is equal, so a run has one.
        set_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
        Ok(UdpDatapath {
            socket,
            gso: true,
            rx: (0..RX_BATCH).map(|_| vec![0u8; RX_BUFFER]).collect(),
            batches: Vec::new(),
            spare: Vec::new(),
        })
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.socket.local_addr()
    }

    fn send_batches(&mut self, batches: &[Batch]) -> io::Result<()> {
        let fd = self.socket.as_raw_fd();
        let mut names: Vec<libc::sockaddr_in> = batches.iter().map(|b| sockaddr(&b.to)).collect();
        let mut iovs: Vec<libc::iovec> = batches
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.bytes.as_ptr() as *mut libc::c_void,
                iov_len: b.bytes.len(),
            })
            .collect();
        // Room for an IP_TOS (int) and a UDP_SEGMENT (u16) control message each.
        // SAFETY: CMSG_SPACE only computes sizes.
        let space = unsafe {
            libc::CMSG_SPACE(size_of::<libc::c_int>() as u32)
                + libc::CMSG_SPACE(size_of::<u16>() as u32)
        } as usize;
        let mut controls = vec![0u8; space * batches.len()];
        // SAFETY: mmsghdr is plain data; each is filled in below.
        let mut msgs: Vec<libc::mmsghdr> =
            (0..batches.len()).map(|_| unsafe { zeroed() }).collect();
        for (i, batch) in batches.iter().enumerate() {
            let hdr = &mut msgs[i].msg_hdr;
            hdr.msg_name = (&mut names[i] as *mut libc::sockaddr_in).cast();
            hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            hdr.msg_iov = &mut iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = controls[i * space..].as_mut_ptr().cast();
            let segmented = self.gso && batch.count > 1;
            // SAFETY: CMSG_* walk the control buffer sized above, which holds both
            // messages; the data written fits each message's declared length.
            unsafe {
                hdr.msg_controllen = if segmented {
                    space
                } else {
                    libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize
                };
                let cmsg = libc::CMSG_FIRSTHDR(hdr);
                (*cmsg).cmsg_level = libc::IPPROTO_IP;
                (*cmsg).cmsg_type = libc::IP_TOS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
                libc::CMSG_DATA(cmsg)
                    .cast::<libc::c_int>()
                    .write_unaligned(libc::c_int::from(batch.tos));
                if segmented {
                    let cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
                    (*cmsg).cmsg_level = libc::SOL_UDP;
                    (*cmsg).cmsg_type = UDP_SEGMENT;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
                    libc::CMSG_DATA(cmsg)
                        .cast::<u16>()
                        .write_unaligned(batch.segment as u16);
                }
            }
        }
        let mut sent = 0;
        while sent < msgs.len() {
            // SAFETY: the headers point at buffers that live until this returns.
            let n = unsafe {
                libc::sendmmsg(fd, msgs[sent..].as_mut_ptr(), (msgs.len() - sent) as u32, 0)
            };
            if n >= 0 {
                sent += n as usize;
                continue;
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EAGAIN) => wait_writable(fd)?,
                Some(libc::EINTR) => {}
                // The device cannot segment: from now on every datagram goes alone.
                Some(libc::EIO | libc::EINVAL) if self.gso => {
                    self.gso = false;
                    return self.send_singly(&batches[sent..]);
                }
                _ => return Err(error),
            }
        }
        Ok(())
    }

    fn send_singly(&mut self, batches: &[Batch]) -> io::Result<()> {
        let mut singles = Vec::new();
        for b in batches {
            for chunk in b.bytes.chunks(b.segment) {
                singles.push(Batch {
                    to: b.to,
                    tos: b.tos,
                    segment: chunk.len(),
                    count: 1,
                    closed: true,
                    bytes: chunk.to_vec(),
                });
            }
        }
        for group in singles.chunks(MAX_BATCHES) {
            self.send_batches(group)?;
        }
        Ok(())
    }
}

fn wait_writable(fd: RawFd) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, 100) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    Ok(())
}

impl Datapath for UdpDatapath {
    fn receive(&mut self, deliver: &mut dyn FnMut(SocketAddrV4, u8, &[u8])) -> io::Result<usize> {
        let fd = self.socket.as_raw_fd();
        // Room for a UDP_GRO (int) and an IP_TOS (byte) control message.
        // SAFETY: CMSG_SPACE only computes sizes.
        let space = unsafe { 2 * libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize;
        let mut total = 0;
        loop {
            let mut iovs: Vec<libc::iovec> = self
                .rx
                .iter_mut()
                .map(|b| libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: b.len(),
                })
                .collect();
            let mut controls = vec![0u8; space * RX_BATCH];
            // SAFETY: plain data, filled in below.
            let mut sources: Vec<libc::sockaddr_in> =
                (0..RX_BATCH).map(|_| unsafe { zeroed() }).collect();
            // SAFETY: plain data, filled in below.
            let mut msgs: Vec<libc::mmsghdr> = (0..RX_BATCH).map(|_| unsafe { zeroed() }).collect();
            for (i, m) in msgs.iter_mut().enumerate() {
                m.msg_hdr.msg_name = (&mut sources[i] as *mut libc::sockaddr_in).cast();
                m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
                m.msg_hdr.msg_iov = &mut iovs[i];
                m.msg_hdr.msg_iovlen = 1;
                m.msg_hdr.msg_control = controls[i * space..].as_mut_ptr().cast();
                m.msg_hdr.msg_controllen = space;
            }
            // SAFETY: every header points at live buffers of the sizes given.
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    msgs.as_mut_ptr(),
                    RX_BATCH as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if n < 0 {
                let error = io::Error::last_os_error();
                return match error.raw_os_error() {
                    Some(libc::EAGAIN) => Ok(total),
                    Some(libc::EINTR) => continue,
                    _ => Err(error),
                };
            }
            for (i, m) in msgs.iter().take(n as usize).enumerate() {
                let len = m.msg_len as usize;
                let mut segment = len;
                let mut tos = 0u8;
                // SAFETY: the kernel filled the control buffer; the walk stays in it.
                unsafe {
                    let mut cmsg = libc::CMSG_FIRSTHDR(&m.msg_hdr);
                    while !cmsg.is_null() {
                        let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
                        if level == libc::SOL_UDP && kind == UDP_GRO {
                            segment = libc::CMSG_DATA(cmsg).cast::<libc::c_int>().read_unaligned()
                                as usize;
                        } else if level == libc::IPPROTO_IP && kind == libc::IP_TOS {
                            tos = *libc::CMSG_DATA(cmsg);
                        }
                        cmsg = libc::CMSG_NXTHDR(&m.msg_hdr, cmsg);
                    }
                }
                let data = &self.rx[i][..len];
                let source = SocketAddrV4::new(
                    u32::from_be(sources[i].sin_addr.s_addr).into(),
                    u16::from_be(sources[i].sin_port),
                );
                if data.is_empty() {
                    // An empty datagram is still one to count (as truncated).
                    deliver(source, tos, data);
                    total += 1;
                }
                for datagram in data.chunks(segment.max(1)) {
                    deliver(source, tos, datagram);
                    total += 1;
                }
            }
            if (n as usize) < RX_BATCH {
                return Ok(total);
            }
        }
    }

    fn queue(&mut self, to: SocketAddrV4, tos: u8, datagram: &[u8]) -> io::Result<()> {
        let len = datagram.len();
        let fits = |b: &Batch| {
            b.to == to
                && b.tos == tos
                && !b.closed
                && len <= b.segment
                && b.count < MAX_SEGMENTS
                && b.bytes.len() + len <= MAX_BATCH_BYTES
        };
        if let Some(batch) = self.batches.iter_mut().find(|b| fits(b)) {
            batch.bytes.extend_from_slice(datagram);
            batch.count += 1;
            batch.closed = len < batch.segment;
            return Ok(());
        }
        if self.batches.len() == MAX_BATCHES {
            self.flush()?;
        }
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(datagram);
        self.batches.push(Batch {
            to,
            tos,
            segment: len,
            count: 1,
            closed: false,
            bytes,
        });
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.batches.is_empty() {
            return Ok(());
        }
        let batches = std::mem::take(&mut self.batches);
        let result = self.send_batches(&batches);
        self.spare.extend(batches.into_iter().map(|b| b.bytes));
        result
    }

    fn wait(&mut self, wake: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        super::wait_readable(self.socket.as_raw_fd(), wake, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty datagram reaches the protocol (which counts it as truncated) instead of
    /// vanishing uncounted; every datagram comes with the TOS it was sent with.
    #[test]
    fn empty_datagrams_are_delivered_to_be_counted() {
        let mut datapath = UdpDatapath::bind(SocketAddrV4::new([127, 0, 0, 1].into(), 0)).unwrap();
        let to = datapath.socket.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_int(sender.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, 0x87).unwrap();
        sender.send_to(&[], to).unwrap();
        sender.send_to(&[1, 2, 3], to).unwrap();
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while seen.len() < 2 && std::time::Instant::now() < deadline {
            datapath
                .receive(&mut |_, tos, d| seen.push((tos, d.len())))
                .unwrap();
        }
        assert_eq!(seen, [(0x87, 0), (0x87, 3)]);
    }
}
