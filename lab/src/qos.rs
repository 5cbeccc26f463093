//! What a switch's queueing is, vendor-neutral: the lab's data plane enforces this, and
//! each emulation reads it from its own running configuration (see `qos` in each
//! module of [`super::emulator`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Per port (by the vendor's port name), how it queues.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchQos {
    pub ports: BTreeMap<String, PortQos>,
    /// How every port without its own entry queues, where the OS has global profiles.
    pub default: Option<PortQos>,
}

impl SwitchQos {
    /// How `port` queues; None: as the switch's factory defaults.
    pub fn port(&self, port: &str) -> Option<&PortQos> {
        self.ports.get(port).or(self.default.as_ref())
    }
}

/// One egress port: which queue each DSCP goes to, and each queue's service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortQos {
    /// DSCP → queue (through the switch's traffic classes).
    pub queue_of_dscp: Vec<u8>,
    /// Queues with anything but the switch's defaults, and the strict ones.
    pub queues: BTreeMap<u8, QueueQos>,
}

impl PortQos {
    /// A port with the given DSCP map and every queue as the switch leaves it.
    pub fn mapped(queue_of_dscp: [u8; 64]) -> PortQos {
        PortQos {
            queue_of_dscp: queue_of_dscp.to_vec(),
            queues: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueQos {
    /// Served before every lower-numbered strict queue, and before any non-strict one.
    pub strict: bool,
    /// Along this curve an ECN-capable packet is marked CE.
    pub mark: Option<Curve>,
    /// Along this curve a packet that is not ECN-capable is dropped.
    pub drop_not_ect: Option<Curve>,
    /// Along this curve every packet is dropped.
    pub drop_all: Option<Curve>,
    /// Bytes the queue may hold; past it every packet is dropped.
    pub limit_bytes: Option<u64>,
}

/// A RED curve: nothing below `min_bytes` of queue, a probability rising linearly
/// towards `max_percent` up to `max_bytes`, every packet from there on (so min = max is
/// a step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Curve {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub max_percent: u8,
}

/// A size as switches write it: `N`, `N bytes`, `N kbytes`, `N mbytes`.
pub fn bytes(number: &str, unit: Option<&str>) -> Option<u64> {
    let n: u64 = number.parse().ok()?;
    let scale = match unit.map(|u| u.to_ascii_lowercase()) {
        None => 1,
        Some(u) if u == "bytes" || u == "b" => 1,
        Some(u) if u == "kbytes" || u == "kb" => 1024,
        Some(u) if u == "mbytes" || u == "mb" => 1024 * 1024,
        Some(_) => return None,
    };
    n.checked_mul(scale)
}
