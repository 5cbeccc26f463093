//! The launched transport's messages (`endhost serve` and its clients): one JSON request
//! line, then (for a byte allreduce) `values` f32 in little-endian; the reply is one
//! JSON line, then (for a successful byte allreduce) the result's f32. Every rank must
//! issue its allreduces in the same order, as with gloo: the n-th allreduce of each
//! rank is one collective.
//!
//! A training process attaches first ([`Request::Attach`]): the reply carries a
//! memfd (SCM_RIGHTS) the process maps, and its allreduces then work in that shared
//! memory ([`Request::AllreduceShared`]) instead of sending the values through the
//! socket. When the job runs several processes per host, each attaches with its local
//! rank; the transport sums the host's contributions to the n-th allreduce of every
//! local rank, allreduces the sum across hosts once, and hands every local rank the
//! result.

use serde::{Deserialize, Serialize};

use crate::config::{ClassTag, DatapathKind};
use crate::proto::counters::DscpArrivals;

/// The largest allreduce the socket accepts (1 GiB of f32), so a bad request cannot
/// make the daemon allocate without bound.
pub const MAX_VALUES: u64 = 1 << 28;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Status,
    /// Says which of the host's local ranks this connection is and asks for a shared
    /// region of `bytes`; the reply is [`Attached`], with the region's memfd.
    Attach {
        local_rank: u32,
        bytes: u64,
    },
    /// An allreduce of `values` f32 that follow the line.
    Allreduce {
        values: u64,
        layer: u16,
    },
    /// An allreduce, in place, of the first `values` f32 of the attached region.
    AllreduceShared {
        values: u64,
        /// (first value, layer) breakpoints, ascending; empty: all layer 0.
        #[serde(default)]
        layers: Vec<(u64, u16)>,
        /// This allreduce's loss bound; `None`: the job's.
        #[serde(default)]
        loss_bound: Option<f64>,
    },
    /// Sends `per_path` class probes with `class`'s DSCP (as this transport runs it) to
    /// every peer (or to rank `to` alone) on every path, half ECN-capable; 0 sends
    /// none. The reply, [`ProbeReply`], says what has arrived from peers so far, by DSCP.
    Probe {
        class: u8,
        per_path: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<u16>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReply {
    pub error: Option<String>,
    /// The DSCP the probes carry.
    pub dscp: u8,
    /// Probes queued to send.
    pub queued: u64,
    /// Everything that arrived from peers since the transport started, by DSCP.
    pub arrivals: Vec<DscpArrivals>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportStatus {
    pub host: String,
    pub rank: u32,
    /// Hosts in the job.
    pub world_size: u32,
    /// Training processes per host this transport serves.
    pub local_ranks: u32,
    pub job_id: u32,
    pub datapath: DatapathKind,
    /// The job's loss bound.
    pub loss_bound: f64,
    /// Layers the plan knows (their DSCP and class), front layer 0.
    pub layers: u32,
    pub pid: u32,
    /// Allreduces served so far.
    pub allreduces: u64,
    /// What the transport marks its packets with: the classes' DSCPs and the control
    /// DSCP, and the largest IP packet it sends (what `mltctl verify` checks against
    /// the plan and the switches).
    #[serde(default)]
    pub classes: Vec<ClassTag>,
    #[serde(default)]
    pub control_dscp: u8,
    #[serde(default)]
    pub mtu: u16,
    /// The host's own addresses on each spine's path.
    #[serde(default)]
    pub path_addresses: Vec<std::net::Ipv4Addr>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attached {
    pub error: Option<String>,
    /// The region's size; its memfd comes with this line.
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllreduceReply {
    pub error: Option<String>,
    pub delivered: f64,
    /// The fraction of the result's values no loss reached.
    pub exact: f64,
    /// The collective's time in the transport (on failure: until it failed).
    pub seconds: f64,
}
