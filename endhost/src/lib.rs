//! The end-host side of mltctl: the transport's configuration and address types.
//!
//! The transport itself (wire format, bounded-loss delivery, rate control, collectives,
//! datapaths) and the host agent build on these types.

pub mod addr;
pub mod config;

pub use addr::{AddrParseError, MacAddr, PciAddr};
