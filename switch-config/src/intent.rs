//! What one switch must run, independent of vendor syntax.
//!
//! `mltctl plan` decides every value here; renderers only translate it. A renderer
//! that cannot express an item must fail naming the switch, the item and the vendor.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

/// Switch operating systems mltctl can configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// SONiC (config_db tables, generic config updater).
    Sonic,
    /// Arista EOS (CLI, configure sessions).
    Eos,
    /// NVIDIA Cumulus Linux (NVUE).
    Cumulus,
    /// NVIDIA Onyx (CLI).
    Onyx,
}

impl Vendor {
    pub const ALL: [Vendor; 4] = [Vendor::Sonic, Vendor::Eos, Vendor::Cumulus, Vendor::Onyx];

    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Sonic => "sonic",
            Vendor::Eos => "eos",
            Vendor::Cumulus => "cumulus",
            Vendor::Onyx => "onyx",
        }
    }
}

impl Vendor {
    /// Why this OS cannot hold a byte limit per egress queue for every packet
    /// (L_i of MLT Appendix B), or `None` when it can. The plan re-solves the model for
    /// switches that cannot (see `mltctl plan --explain`).
    pub fn no_queue_limit(self) -> Option<&'static str> {
        match self {
            Vendor::Sonic | Vendor::Eos => None,
            Vendor::Cumulus => Some(
                "NVUE bounds a traffic class only through advanced buffer regions on a \
                 static service pool carved out of the lossy pool all other traffic uses; \
                 mltctl does not repartition the buffer of a switch",
            ),
            Vendor::Onyx => Some(
                "Onyx documents no per-queue byte limit (only switch-wide pools, as a \
                 percentage of memory), and a traffic class has one congestion-control \
                 curve, which holds the step",
            ),
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Vendor {
    type Err = UnknownVendor;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Vendor::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownVendor(s.to_string()))
    }
}

/// A vendor name that is not one of [`Vendor::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVendor(pub String);

impl fmt::Display for UnknownVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Vendor::ALL.iter().map(|v| v.as_str()).collect();
        write!(
            f,
            "unknown vendor `{}` (expected one of: {})",
            self.0,
            known.join(", ")
        )
    }
}

impl std::error::Error for UnknownVendor {}

/// The QoS and routing intent for one switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchIntent {
    pub name: String,
    pub vendor: Vendor,
    pub qos: QosIntent,
    pub routes: Vec<StaticRoute>,
    /// Static routes inside these prefixes belong to the plan: ones it does not list are
    /// removed. Routes elsewhere (management, defaults) are never touched.
    pub route_scope: Vec<Ipv4Net>,
}

impl SwitchIntent {
    /// Whether a static route for `prefix` is the plan's to manage.
    pub fn owns_route(&self, prefix: &Ipv4Net) -> bool {
        self.route_scope.iter().any(|scope| scope.contains(prefix))
    }
}

/// Classification, scheduling and RED/ECN for the queues the plan owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QosIntent {
    /// Traffic class of every DSCP value, indexed by DSCP (always 64 entries).
    pub dscp_to_tc: Vec<u8>,
    /// Egress queue of each traffic class the plan uses, indexed by traffic class.
    pub tc_to_queue: Vec<u8>,
    /// Ports the maps and queue settings are bound to.
    pub ports: Vec<String>,
    /// Settings of the queues the plan owns; queues not listed keep their configuration.
    pub queues: Vec<QueueIntent>,
}

/// One egress queue, applied on every port in [`QosIntent::ports`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueIntent {
    pub queue: u8,
    pub scheduler: Scheduler,
    /// Selective dropping; `None` means no RED/ECN profile on this queue.
    pub ecn: Option<EcnThresholds>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// Served before every lower queue; among strict queues the higher index wins.
    Strict,
}

/// Per-queue selective dropping (MLT §5.2, Appendix B), as a step and a limit.
///
/// Up to `mark_bytes` (S_i) nothing happens; above it every ECN-capable (important)
/// packet is marked and every Not-ECT (unimportant) packet dropped: a step, where the
/// OS allows min = max with probability 100%. Above `limit_bytes` (L_i) every packet is
/// dropped; `None` when the switch's OS cannot hold a per-queue limit (then only the
/// shared buffer bounds the queue). `mark_bytes <= limit_bytes`, both whole KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcnThresholds {
    pub mark_bytes: u64,
    pub limit_bytes: Option<u64>,
}

/// A static IPv4 route; several next hops mean ECMP, none means discard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticRoute {
    pub prefix: Ipv4Net,
    pub next_hops: Vec<Ipv4Addr>,
    pub kind: RouteKind,
}

/// Why a route exists; lets reviewers and renderers group routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteKind {
    /// Rack subnets, aggregated where they are contiguous (control traffic).
    RackSubnets,
    /// Path addresses steered through one spine (source routing).
    PathBlock,
    /// One local host's path address, delivered to the host.
    HostPath,
    /// A local block of path addresses with no host behind it, dropped so that
    /// packets to unused addresses cannot loop between leaf and spine.
    Discard,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_names_round_trip() {
        for v in Vendor::ALL {
            assert_eq!(v.as_str().parse::<Vendor>(), Ok(v));
        }
        let err = "junos".parse::<Vendor>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown vendor `junos` (expected one of: sonic, eos, cumulus, onyx)"
        );
    }
}
