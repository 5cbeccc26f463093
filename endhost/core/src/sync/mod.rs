//! Which workers synchronize with which, at run time: the Selective Reduce controller
//! (Luo et al., Selective Reduce: BAG, BPAWR and the main loop of Algorithm 3;
//! docs/src/design/sync.md) and its two baselines, partial reduce (first p ready
//! workers) and all reduce.
//!
//! The policies are sans-IO state machines driven by time and events ([`policy`]); the
//! controller service (`endhost::sync::service`) and the simulator in `mltctl sim` drive
//! the same code. [`protocol`] is what the controller and its workers say.

pub mod bag;
pub mod bpawr;
pub mod cdf;
pub mod policy;
pub mod protocol;
pub mod selective;
pub mod weights;

use serde::{Deserialize, Serialize};

/// A worker's identity: its rank in the job.
pub type WorkerId = u32;

/// One worker as the grouping algorithms see it: its id (`None` for the expected, not yet
/// ready workers BPAWR imagines) and its available bandwidth in bit/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    pub id: Option<WorkerId>,
    pub bandwidth: f64,
}

/// A decision: these workers run a weighted allreduce now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// Numbered from 0 in launch order.
    pub sync: u64,
    pub kind: SyncKind,
    /// Ranks, ascending.
    pub members: Vec<WorkerId>,
    /// Each member's weight (same order); they sum to 1.
    pub weights: Vec<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncKind {
    /// A subset of the workers (partial or selective reduce).
    Partial,
    /// Every worker (all reduce, or Algorithm 3's full round every c rounds).
    Full,
}

/// The approximate ring-allreduce time of Eq. 2 that BPAWR compares groups by:
/// 2v / (the group's smallest bandwidth). `model_bits` is v.
pub fn transfer_bound(model_bits: f64, min_bandwidth: f64) -> f64 {
    2.0 * model_bits / min_bandwidth
}

/// Eq. 2 in full: the time of a ring allreduce over `size` workers with per-hop latency
/// `alpha` seconds whose slowest member has `min_bandwidth` bit/s.
pub fn ring_allreduce_seconds(size: usize, alpha: f64, model_bits: f64, min_bandwidth: f64) -> f64 {
    if size < 2 {
        return 0.0;
    }
    let k = size as f64;
    2.0 * (k - 1.0) * alpha + 2.0 * (k - 1.0) / k * model_bits / min_bandwidth
}
