//! The inventory: one YAML file describing the fabric, the hosts and the training job.
//!
//! [`load`] reads and validates it; a value of [`Inventory`] exists only when the file
//! had no problem at all, so everything downstream can rely on its invariants:
//! names, addresses and MACs are unique, every link joins a leaf to a spine or a host
//! to its rack's leaf, every pair of racks with hosts shares a spine, and the training
//! profile fits every switch.

pub mod addressing;
mod events;
mod layers;
mod load;
mod parts;
mod raw;
mod validate;

use std::net::Ipv4Addr;
use std::path::PathBuf;

use endhost_core::config::{Collective, Datapath, Importance, Ports, RateControl, Timeouts};
use endhost_core::{MacAddr, PciAddr};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use switch_config::Vendor;

pub use load::{LoadError, load, load_str};

/// Thresholds are whole KiB, so every vendor can configure them exactly (Onyx takes
/// KB): pinned ones must be, and the plan rounds computed ones to it.
pub const THRESHOLD_UNIT: u64 = 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    pub path: PathBuf,
    pub fabric: Fabric,
    pub racks: Vec<Rack>,
    pub switches: Vec<Switch>,
    pub hosts: Vec<Host>,
    pub uplinks: Vec<Uplink>,
    pub downlinks: Vec<Downlink>,
    pub training: Training,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Fabric {
    pub name: String,
    /// Path addresses (one per host per spine) are carved from this prefix.
    pub path_pool: Ipv4Net,
    pub mtu: u16,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rack {
    pub name: String,
    pub subnet: Ipv4Net,
    /// The leaf's address and MAC on the rack subnet.
    pub gateway_ip: Ipv4Addr,
    pub gateway_mac: MacAddr,
    /// Index into [`Inventory::switches`] of the rack's one leaf.
    pub leaf: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leaf,
    Spine,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Leaf => "leaf",
            Role::Spine => "spine",
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    pub name: String,
    pub role: Role,
    /// Index into [`Inventory::racks`]; leaves only.
    pub rack: Option<usize>,
    pub vendor: Vendor,
    pub mgmt: Mgmt,
    pub buffer_bytes: u64,
    /// Where `buffer_bytes` is written (line, column), for problems the plan finds.
    pub buffer_at: (usize, usize),
    pub queues: u8,
    pub ports: Vec<Port>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    pub name: String,
    pub speed_mbps: u64,
    /// Interface address with its prefix length, on routed fabric ports.
    pub ip: Option<Ipv4Net>,
}

/// How to reach a device over SSH. Secrets are never stored, only where to find them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mgmt {
    pub address: String,
    pub port: u16,
    pub user: String,
    pub key: KeyRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyRef {
    /// A private key file, optionally with its passphrase in an environment variable.
    File {
        path: PathBuf,
        passphrase_env: Option<String>,
    },
    /// Whatever identities the running ssh-agent offers.
    Agent,
    /// The private key itself, in an environment variable.
    Env { var: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub name: String,
    /// Index into [`Inventory::racks`].
    pub rack: usize,
    pub mgmt: Mgmt,
    pub nic: Nic,
    pub cores: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Nic {
    pub name: String,
    pub pci: PciAddr,
    pub mac: MacAddr,
    /// Address on the rack subnet.
    pub ip: Ipv4Addr,
}

/// A routed leaf–spine link; both ports carry addresses in one subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uplink {
    pub leaf: usize,
    pub leaf_port: usize,
    pub spine: usize,
    pub spine_port: usize,
}

/// A host's data NIC cabled to a port of its rack's leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Downlink {
    pub host: usize,
    pub leaf: usize,
    pub leaf_port: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Training {
    pub job_id: u32,
    /// Parameters per layer, front layer first.
    pub layers: Vec<Layer>,
    /// Bytes per gradient element (4 for fp32).
    pub element_bytes: u32,
    pub loss_bound: f64,
    pub collective: Collective,
    /// Switch queues the plan uses: one control, one default, the rest for gradients.
    pub priorities: u8,
    pub control_dscp: u8,
    /// One DSCP per gradient class, front layers first; at least as many as classes.
    pub gradient_dscp: Vec<u8>,
    pub importance: Importance,
    pub rate_control: RateControl,
    pub timeouts: Timeouts,
    pub ports: Ports,
    pub datapath: Datapath,
    pub model: ThresholdModel,
    pub pinned_thresholds: Vec<PinnedThreshold>,
    pub launcher: Launcher,
}

/// How training processes start on the hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launcher {
    /// Training processes per host; the host's one transport serves them all.
    pub procs_per_host: u32,
    /// TCP port of the launcher's rendezvous on the first host (torch's MASTER_PORT).
    pub master_port: u16,
    /// The group whose members may use the transport's socket (mode 0660); without
    /// one, only the user that launched it (0600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_group: Option<String>,
}

impl Default for Launcher {
    fn default() -> Self {
        Launcher {
            procs_per_host: 1,
            master_port: 29500,
            socket_group: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub name: String,
    pub params: u64,
}

/// Inputs of the Appendix B model that are not derived from the fabric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdModel {
    /// Offered gradient load at a congested egress port, as a fraction of line rate.
    pub load: f64,
    pub tolerance: Tolerance,
    /// Round-trip time across the fabric, in µs: how long senders keep sending at
    /// their rate before the transport's rate control reacts (sets the burst floor).
    pub rtt_us: f64,
    /// Plan even when a predicted loss is over its tolerance (otherwise an error).
    pub accept_over_tolerance: bool,
}

impl Default for ThresholdModel {
    fn default() -> Self {
        ThresholdModel {
            load: 0.9,
            tolerance: Tolerance::default(),
            rtt_us: 20.0,
            accept_over_tolerance: false,
        }
    }
}

/// Loss fractions a model absorbs without extra rounds; defaults are MLT §3.3's
/// measurements and Table 1's ResNet-50 value (the model §3.3 measured).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Loss spread uniformly over every gradient.
    pub random_loss: f64,
    pub front_layers: f64,
    pub back_layers: f64,
    pub small_gradients: f64,
    pub large_gradients: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            random_loss: 0.024,
            front_layers: 0.05,
            back_layers: 0.003,
            small_gradients: 0.20,
            large_gradients: 0.004,
        }
    }
}

/// Thresholds an admin fixed for one gradient class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedThreshold {
    pub class: u8,
    pub mark_bytes: u64,
    pub limit_bytes: u64,
}

impl Inventory {
    /// Indices of the spines, in inventory order.
    pub fn spines(&self) -> impl Iterator<Item = usize> + '_ {
        self.switches
            .iter()
            .enumerate()
            .filter(|(_, s)| s.role == Role::Spine)
            .map(|(i, _)| i)
    }

    /// Number of gradient classes: the gradient queues, but never more than layers.
    pub fn gradient_classes(&self) -> usize {
        gradient_classes(self.training.priorities, self.training.layers.len())
    }
}

/// Gradient classes for `priorities` switch queues and `layers` layers: two queues are
/// kept for control and default traffic, and a class without layers would waste a queue.
pub fn gradient_classes(priorities: u8, layers: usize) -> usize {
    (usize::from(priorities).saturating_sub(2)).min(layers)
}
