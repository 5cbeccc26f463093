//! The end host's I/O around the sans-IO core (`endhost-core`): the datapaths (kernel
//! UDP, DPDK), the event loop that drives the protocol core over one ([`event_loop`]), the TCP
//! control channel ([`mesh`]), the async API ([`transport`]) and its C ABI ([`capi`]),
//! the launched transport ([`daemon`]), the host agent's netlink and sysfs work
//! ([`agent`]), the Selective Reduce controller service and workers ([`sync`]), and
//! (feature `testbed`, on by default) the tooling that builds namespace testbeds and
//! benchmarks (`testbed`), which nothing else here uses.

pub mod agent;
pub mod capi;
pub mod daemon;
pub mod datapath;
pub mod event_loop;
pub mod help;
pub mod lines;
pub mod mesh;
mod sockopt;
pub mod sync;
#[cfg(feature = "testbed")]
pub mod testbed;
pub mod transport;

pub use transport::{Options, Transport, TransportError};
