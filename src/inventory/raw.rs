//! The inventory as written: field names and nesting only.
//!
//! Addresses, names and enumerations stay strings here so that validation can parse
//! every one of them and report each problem, instead of serde stopping at the first.
//! Numbers are read wide and range-checked later, for the same reason.

use std::collections::HashSet;

use marked_yaml::{Span, Spanned};
use serde::Deserialize;

pub type Text = Spanned<String>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    pub name: Text,
    pub path_pool: Text,
    pub mtu: Option<Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    pub mgmt: Option<Mgmt>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mgmt {
    pub address: Option<Text>,
    pub port: Option<Spanned<u64>>,
    pub user: Option<Text>,
    pub key: Option<Spanned<Key>>,
}

/// Where the SSH key comes from; exactly one of the three.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    pub file: Option<Text>,
    pub agent: Option<Spanned<bool>>,
    pub env: Option<Text>,
    pub passphrase_env: Option<Text>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rack {
    pub name: Text,
    pub subnet: Text,
    pub gateway: Gateway,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    pub ip: Text,
    pub mac: Text,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Switch {
    pub name: Text,
    pub role: Text,
    pub vendor: Text,
    pub rack: Option<Text>,
    pub mgmt: Option<Mgmt>,
    pub buffer_bytes: Spanned<u64>,
    pub queues: Spanned<u64>,
    pub ports: Vec<Port>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    pub name: Text,
    pub speed: Text,
    pub ip: Option<Text>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub name: Text,
    pub rack: Text,
    pub mgmt: Option<Mgmt>,
    pub nic: Nic,
    pub cores: Vec<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nic {
    pub name: Text,
    pub pci: Text,
    pub mac: Text,
    pub ip: Text,
}

/// `[node:port, node:port]`; a host's port is its NIC name.
pub type Link = Vec<Text>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    pub job_id: Option<Spanned<u64>>,
    pub layers: Spanned<Layers>,
    pub loss_bound: Spanned<f64>,
    pub collective: Option<Text>,
    pub priorities: Option<Spanned<u64>>,
    pub dscp: Option<Dscp>,
    pub importance: Option<Importance>,
    pub rate_control: Option<RateControl>,
    pub timeouts: Option<Timeouts>,
    pub ports: Option<Ports>,
    pub datapath: Option<Datapath>,
    pub model: Option<Model>,
    pub thresholds: Option<Vec<Spanned<Threshold>>>,
    pub launcher: Option<Launcher>,
}

/// What a training launcher (torchrun) needs besides the transport.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launcher {
    pub procs_per_host: Option<Spanned<u64>>,
    pub master_port: Option<Spanned<u64>>,
    pub socket_group: Option<Text>,
}

/// Layer sizes in parameters: a list, a file, or a count of equal layers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layers {
    pub sizes: Option<Vec<Spanned<u64>>>,
    pub file: Option<Text>,
    pub count: Option<Spanned<u64>>,
    pub params_each: Option<Spanned<u64>>,
    pub element_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dscp {
    pub control: Option<Spanned<u64>>,
    pub gradient: Option<Spanned<Vec<Spanned<u64>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Importance {
    pub quantile: Option<Spanned<f64>>,
    pub sample_fraction: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateControl {
    pub t_low_us: Option<Spanned<f64>>,
    pub t_high_us: Option<Spanned<f64>>,
    pub alpha_mbps: Option<Spanned<f64>>,
    pub beta: Option<Spanned<f64>>,
    pub ack_every: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    pub phase_ms: Option<Spanned<u64>>,
    pub early_exit: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ports {
    pub data: Option<Spanned<u64>>,
    pub control: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Datapath {
    pub kind: Option<Text>,
    pub rx_queues: Option<Spanned<u64>>,
    pub rx_ring: Option<Spanned<u64>>,
    pub tx_ring: Option<Spanned<u64>>,
    pub driver: Option<Text>,
}

/// Inputs of the threshold model (MLT Appendix B).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub load: Option<Spanned<f64>>,
    pub tolerance: Option<Tolerance>,
    pub rtt_us: Option<Spanned<f64>>,
    pub accept_over_tolerance: Option<bool>,
}

/// Loss fractions a model tolerates without extra rounds (MLT §3.3).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub random_loss: Option<Spanned<f64>>,
    pub front_layers: Option<Spanned<f64>>,
    pub back_layers: Option<Spanned<f64>>,
    pub small_gradients: Option<Spanned<f64>>,
    pub large_gradients: Option<Spanned<f64>>,
}

/// A threshold fixed by hand for one gradient class instead of computed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    pub class: Spanned<u64>,
    pub mark_bytes: Spanned<u64>,
    pub limit_bytes: Spanned<u64>,
}

/// A list element that deserialized, with the span of its whole entry.
#[derive(Debug)]
pub struct Item<T> {
    pub span: Span,
    pub value: T,
}

/// The sections of an inventory as written, minus entries that failed to deserialize.
#[derive(Default)]
pub struct Sections {
    pub fabric: Option<Fabric>,
    pub defaults: Defaults,
    pub racks: Vec<Item<Rack>>,
    pub switches: Vec<Item<Switch>>,
    pub hosts: Vec<Item<Host>>,
    pub links: Vec<Item<Link>>,
    pub training: Option<Training>,
    /// Names of racks, switches and hosts whose entries were malformed; references to
    /// them are not reported again.
    pub broken_names: HashSet<String>,
    /// Kinds (`rack`, `switch`, `host`, `link`) with at least one malformed entry; checks
    /// that need all entries of a kind stay quiet rather than report follow-on errors.
    pub malformed: HashSet<&'static str>,
}
