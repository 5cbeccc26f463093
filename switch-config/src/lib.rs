//! Switch configuration: the vendor-neutral intent a plan gives each switch.
//!
//! Rendering, parsing and diffing vendor configurations build on [`intent`].

pub mod intent;

pub use intent::{
    EcnThresholds, QosIntent, QueueIntent, RouteKind, Scheduler, StaticRoute, SwitchIntent,
    UnknownVendor, Vendor,
};
