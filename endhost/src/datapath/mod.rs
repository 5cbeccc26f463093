//! Datapaths: how datagrams leave and enter the host. The protocol core is the same
//! over each; the event loop only needs these few calls.

#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod ipmac;
pub mod udp;

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::RawFd;
use std::time::Duration;

use endhost_core::config::{DatapathKind, TransportConfig};

pub trait Datapath {
    /// Hands every datagram that has arrived (its source, the IP TOS byte it came with
    /// and its UDP payload) to `deliver`, without waiting; returns how many there were.
    fn receive(&mut self, deliver: &mut dyn FnMut(SocketAddrV4, u8, &[u8])) -> io::Result<usize>;

    /// Queues one datagram; it leaves at the next [`Datapath::flush`] or when a batch
    /// is full.
    fn queue(&mut self, to: SocketAddrV4, tos: u8, datagram: &[u8]) -> io::Result<()>;

    /// Sends everything queued.
    fn flush(&mut self) -> io::Result<()>;

    /// Blocks until datagrams may have arrived, `wake` became readable, or `timeout`
    /// passed (`None`: no limit).
    fn wait(&mut self, wake: RawFd, timeout: Option<Duration>) -> io::Result<()>;
}

/// Blocks until `first` or `second` is readable or `timeout` passes (`None`: no
/// limit); an interrupted wait just returns.
pub(crate) fn wait_readable(
    first: RawFd,
    second: RawFd,
    timeout: Option<Duration>,
) -> io::Result<()> {
    poll_readable(&[first, second], timeout).map(|_| ())
}

/// Whether `fd` is readable (or a signal came), waiting at most `timeout` (zero: only
/// looking).
#[cfg(feature = "dpdk")]
pub(crate) fn readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    poll_readable(&[fd], Some(timeout))
}

/// Waits until one of `fds` is readable or `timeout` passes (None: no limit); whether
/// one is readable, a signal counting as a wake-up.
fn poll_readable<const N: usize>(fds: &[RawFd; N], timeout: Option<Duration>) -> io::Result<bool> {
    let mut fds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let spec = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let spec_ptr = spec
        .as_ref()
        .map_or(std::ptr::null(), |s| s as *const libc::timespec);
    // SAFETY: N valid pollfds and an optional timespec that outlive the call.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            N as libc::nfds_t,
            spec_ptr,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
        return Ok(true);
    }
    Ok(fds.iter().any(|fd| fd.revents & libc::POLLIN != 0))
}

/// Why a datapath did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("data socket: {0}")]
    Socket(#[source] io::Error),
    #[error("DPDK datapath: {0}")]
    Dpdk(String),
    #[error(
        "this endhost was built without the DPDK datapath (cargo build --features dpdk); use the udp datapath"
    )]
    NotBuilt,
}

/// The datapath a configuration chose.
pub enum AnyDatapath {
    Udp(udp::UdpDatapath),
    #[cfg(feature = "dpdk")]
    Dpdk(dpdk::DpdkDatapath),
}

impl AnyDatapath {
    /// Opens the datapath `config` names; kernel sockets bind `bind`.
    pub fn open(config: &TransportConfig, bind: SocketAddrV4) -> Result<AnyDatapath, OpenError> {
        match config.job.datapath.kind {
            DatapathKind::Udp => Ok(AnyDatapath::Udp(
                udp::UdpDatapath::bind(bind).map_err(OpenError::Socket)?,
            )),
            #[cfg(feature = "dpdk")]
            DatapathKind::Dpdk => Ok(AnyDatapath::Dpdk(
                dpdk::DpdkDatapath::start(config).map_err(|e| OpenError::Dpdk(e.to_string()))?,
            )),
            #[cfg(not(feature = "dpdk"))]
            DatapathKind::Dpdk => Err(OpenError::NotBuilt),
        }
    }

    fn inner(&mut self) -> &mut dyn Datapath {
        match self {
            AnyDatapath::Udp(d) => d,
            #[cfg(feature = "dpdk")]
            AnyDatapath::Dpdk(d) => d,
        }
    }
}

impl Datapath for AnyDatapath {
    fn receive(&mut self, deliver: &mut dyn FnMut(SocketAddrV4, u8, &[u8])) -> io::Result<usize> {
        self.inner().receive(deliver)
    }

    fn queue(&mut self, to: SocketAddrV4, tos: u8, datagram: &[u8]) -> io::Result<()> {
        self.inner().queue(to, tos, datagram)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner().flush()
    }

    fn wait(&mut self, wake: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        self.inner().wait(wake, timeout)
    }
}
