//! Datapaths: how datagrams leave and enter the host. The protocol core is the same
//! over each; the driver only needs these few calls.

#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod frame;
pub mod ipmac;
pub mod udp;

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::RawFd;
use std::time::Duration;

pub trait Datapath {
    /// Hands every datagram that has arrived (its UDP payload) to `deliver`, without
    /// waiting; returns how many there were.
    fn receive(&mut self, deliver: &mut dyn FnMut(&[u8])) -> io::Result<usize>;

    /// Queues one datagram; it leaves at the next [`Datapath::flush`] or when a batch
    /// is full.
    fn queue(&mut self, to: SocketAddrV4, tos: u8, datagram: &[u8]) -> io::Result<()>;

    /// Sends everything queued.
    fn flush(&mut self) -> io::Result<()>;

    /// Blocks until datagrams may have arrived, `wake` became readable, or `timeout`
    /// passed (`None`: no limit).
    fn wait(&mut self, wake: RawFd, timeout: Option<Duration>) -> io::Result<()>;
}
