//! The launched transport's messages (`endhost serve` and its clients): one JSON request
//! line, then (for an allreduce) `values` f32 in little-endian; the reply is one JSON
//! line, then (for a successful allreduce) the result's f32. Every rank must issue its
//! allreduces in the same order, as with gloo: the n-th allreduce of each rank is one
//! collective.

use serde::{Deserialize, Serialize};

use crate::config::DatapathKind;

/// The largest allreduce the socket accepts (1 GiB of f32), so a bad request cannot
/// make the daemon allocate without bound.
pub const MAX_VALUES: u64 = 1 << 28;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Status,
    Allreduce { values: u64, layer: u16 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub host: String,
    pub rank: u32,
    pub world_size: u32,
    pub job_id: u32,
    pub datapath: DatapathKind,
    pub pid: u32,
    /// Allreduces served so far.
    pub allreduces: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllreduceReply {
    pub error: Option<String>,
    pub delivered: f64,
    pub seconds: f64,
}
