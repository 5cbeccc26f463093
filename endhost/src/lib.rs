//! The end-host side of mltctl: the transport (wire format, bounded-loss delivery, rate
//! control, path spraying, collectives, datapaths) and its configuration types.
//!
//! Layers, bottom up: [`wire`] (packet views), [`proto`] (the sans-IO protocol core),
//! [`collective`] (collectives and point-to-point operations, sans I/O), [`datapath`]
//! (kernel UDP), [`mesh`] (the TCP control channel), [`driver`] (the datapath thread)
//! and [`transport`] (the API).

pub mod addr;
pub mod agent;
pub mod bench;
pub mod capi;
pub mod collective;
pub mod config;
pub mod daemon;
pub mod datapath;
pub mod driver;
pub mod input;
pub mod lines;
pub mod mesh;
pub mod netns;
pub mod proto;
mod sockopt;
pub mod sync;
pub mod transport;
pub mod wire;
pub mod workload;

pub use addr::{AddrParseError, MacAddr, PciAddr};
pub use transport::{Options, Transport, TransportError};
