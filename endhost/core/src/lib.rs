//! The end-host transport's core, sans I/O (in the manner of quinn-proto): everything
//! here is data and state machines driven by calls — received bytes in, bytes to send
//! and events out — so it runs the same over kernel UDP, DPDK or a simulated network,
//! and is tested without sockets. The `endhost` crate puts I/O around it.
//!
//! - [`wire`]: typed, bounds-checked views of the packet header (smoltcp's `wire`);
//! - [`frame`]: the same for the Ethernet, IPv4 and UDP headers around it, for
//!   datapaths (and the lab's forwarder) that see whole frames;
//! - [`proto`]: one endpoint's bounded-loss delivery, tagging, rate control, spraying;
//! - [`collective`]: allreduce schedules (ring, transpose, parameter server) and the
//!   engine that drives them over an endpoint;
//! - [`config`]: a host's transport configuration, as `mltctl plan --host` writes it;
//! - [`host`]: a host's network plan, the diff against what its kernel has, and the
//!   agent's report;
//! - [`sync`]: the Selective Reduce, partial reduce and all reduce policies, and the
//!   controller's messages;
//! - [`daemon`]: the launched transport's socket messages;
//! - [`vdev`]: a DPDK virtual device, built from typed parts;
//! - [`addr`], [`workload`]: MAC and PCI addresses; the self-test workload.

pub mod addr;
pub mod collective;
pub mod config;
pub mod daemon;
pub mod frame;
pub mod host;
pub mod proto;
pub mod sync;
pub mod vdev;
pub mod wire;
pub mod workload;

pub use addr::{AddrParseError, MacAddr, PciAddr};
