//! The plan: every decision mltctl makes, as one serializable value.
//!
//! [`Plan::build`] is a pure function of a validated [`Inventory`]. Rendering, pushing
//! and the host agent consume it and never decide again what it decided.

pub mod classes;
pub mod explain;
pub mod groups;
pub mod hosts;
pub mod routing;
pub mod thresholds;

use std::net::Ipv4Addr;

use endhost_core::MacAddr;
use endhost_core::collective::{Algorithm, message_bound};
use endhost_core::config::{Collective, JobConfig, Tagging, TransportConfig};
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use switch_config::{EcnThresholds, QosIntent, QueueIntent, Scheduler, SwitchIntent};

use crate::inventory::{Inventory, Launcher, Mgmt, Role, Tolerance};
pub use classes::{GradientClass, QosPlan};
pub use hosts::HostPlan;
pub use thresholds::{QueueThreshold, ThresholdProfile};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub fabric: String,
    pub qos: QosPlan,
    pub model: ModelSummary,
    /// Thresholds per distinct switch buffer size, smallest buffer first.
    pub thresholds: Vec<ThresholdProfile>,
    /// Spine names; hosts' path addresses refer to spines by index here.
    pub spines: Vec<String>,
    pub racks: Vec<RackPlan>,
    pub switches: Vec<SwitchPlan>,
    /// In rank order.
    pub hosts: Vec<HostPlan>,
    /// Settings every host's transport shares.
    pub job: JobConfig,
    /// How training processes start.
    pub launcher: Launcher,
}

/// The inputs of the threshold model, as used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub load: f64,
    /// Fraction of packets sent Not-ECT (unimportant): the importance quantile.
    pub theta: f64,
    /// Packet size the model counts buffer in: the fabric MTU.
    pub packet_bytes: u16,
    pub tolerance: Tolerance,
    /// Fabric round-trip time (µs): DCTCP's C·RTT/7 for the lowest queue's step.
    pub rtt_us: f64,
    /// The RTT (µs) at which the transport's rate control starts to slow a sender: what
    /// extra senders put on the wire before they slow down.
    pub t_high_us: f64,
    /// Most senders one receiver hears from at once in the job's collective.
    pub fan_in: u32,
    /// What one message of the job's collective may lose before the transport asks
    /// for it again: the loss bound over the collective's depth
    /// ([`endhost_core::collective::message_bound`]).
    pub message_bound: f64,
    /// Plan even when a predicted loss is over its tolerance.
    pub accept_over_tolerance: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RackPlan {
    pub name: String,
    pub subnet: Ipv4Net,
    pub gateway_ip: Ipv4Addr,
    pub gateway_mac: MacAddr,
    pub leaf: String,
    /// Indices into [`Plan::spines`] of the spines the rack's leaf links to.
    pub spines: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchPlan {
    pub role: Role,
    pub rack: Option<String>,
    pub mgmt: Mgmt,
    #[serde(flatten)]
    pub intent: SwitchIntent,
}

impl Plan {
    pub fn build(inv: &Inventory) -> Plan {
        let qos = classes::plan_classes(inv);
        let topo = routing::Topology::new(inv);
        let model = ModelSummary {
            load: inv.training.model.load,
            theta: inv.training.importance.quantile,
            packet_bytes: inv.fabric.mtu,
            tolerance: inv.training.model.tolerance,
            rtt_us: inv.training.model.rtt_us,
            t_high_us: inv.training.rate_control.t_high_us,
            fan_in: fan_in(inv.training.collective, inv.hosts.len()),
            message_bound: job_message_bound(inv),
            accept_over_tolerance: inv.training.model.accept_over_tolerance,
        };
        let thresholds = thresholds::profiles(inv, &qos, &model);
        let mut routes = routing::switch_routes(inv, &topo);
        let route_scope = route_scope(inv);
        let switches = inv
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let link_mbps = switch_link_mbps(s);
                let profile = thresholds
                    .iter()
                    .find(|p| {
                        (p.buffer_bytes, p.link_mbps, p.queue_limits)
                            == (
                                s.buffer_bytes,
                                link_mbps,
                                s.vendor.no_queue_limit().is_none(),
                            )
                    })
                    .expect("every switch has a threshold profile");
                SwitchPlan {
                    role: s.role,
                    rack: s.rack.map(|r| inv.racks[r].name.clone()),
                    mgmt: s.mgmt.clone(),
                    intent: SwitchIntent {
                        name: s.name.clone(),
                        vendor: s.vendor,
                        qos: switch_qos(&qos, profile, s.ports.iter().map(|p| p.name.clone())),
                        routes: std::mem::take(&mut routes[i]),
                        route_scope: route_scope.clone(),
                    },
                }
            })
            .collect();
        let racks = inv
            .racks
            .iter()
            .zip(&topo.rack_spines)
            .map(|(r, spines)| RackPlan {
                name: r.name.clone(),
                subnet: r.subnet,
                gateway_ip: r.gateway_ip,
                gateway_mac: r.gateway_mac,
                leaf: inv.switches[r.leaf].name.clone(),
                spines: spines.clone(),
            })
            .collect();
        let t = &inv.training;
        let job = JobConfig {
            job_id: t.job_id,
            world_size: inv.hosts.len() as u32,
            loss_bound: t.loss_bound,
            collective: t.collective,
            tagging: Tagging {
                control_dscp: qos.control_dscp,
                layers: t.layers.len() as u32,
                classes: qos.classes.iter().map(|c| c.tag).collect(),
                importance: t.importance,
            },
            rate_control: t.rate_control,
            timeouts: t.timeouts,
            ports: t.ports,
            datapath: t.datapath,
            mtu: inv.fabric.mtu,
            local_ranks: t.launcher.procs_per_host,
        };
        Plan {
            fabric: inv.fabric.name.clone(),
            spines: topo
                .spines
                .iter()
                .map(|&s| inv.switches[s].name.clone())
                .collect(),
            hosts: hosts::plan_hosts(inv, &topo),
            qos,
            model,
            thresholds,
            racks,
            switches,
            job,
            launcher: inv.training.launcher.clone(),
        }
    }

    /// Rank of the host named `name`.
    pub fn host_rank(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// What makes the plan unusable, each with where the inventory sets it: a buffer
    /// that cannot hold the floors, and (unless the inventory accepts them) predicted
    /// losses over their tolerance.
    pub fn problems(&self, inv: &Inventory) -> crate::diag::Diagnostics {
        let mut found = Vec::new();
        for p in &self.thresholds {
            let first = inv
                .switches
                .iter()
                .find(|s| p.switches.first() == Some(&s.name))
                .expect("a profile has switches");
            let mut problem = |message: String| {
                found.push(crate::diag::Diagnostic {
                    file: inv.path.clone(),
                    line: first.buffer_at.0,
                    column: first.buffer_at.1,
                    message,
                })
            };
            let names = p.switches.join(", ");
            if p.used_bytes > p.buffer_bytes {
                problem(format!(
                    "switch(es) {names}: the thresholds need {} B but the buffer holds {} B: \
                     every gradient queue must hold one burst of the job ({} B: {} sender(s) \
                     at {} Mbit/s, the extra ones for T_high = {} µs) and the lowest must \
                     mark no earlier than C·RTT/7 ({} B); give more buffer or fewer priorities",
                    p.used_bytes,
                    p.buffer_bytes,
                    p.burst_bytes,
                    self.model.fan_in,
                    p.link_mbps,
                    self.model.t_high_us,
                    p.mark_floor_bytes
                ));
            }
            if self.model.accept_over_tolerance {
                continue;
            }
            for q in &p.queues {
                for (what, loss, tolerance) in [
                    ("Not-ECT", q.loss_not_ect, q.tolerance_not_ect),
                    ("ECT", q.loss_ect, q.tolerance_ect),
                ] {
                    if loss > tolerance {
                        problem(format!(
                            "switch(es) {names}, queue {} (gradient class {}): predicted loss \
                             of {what} frames {loss:.2e} under the transport's bursts is over \
                             its tolerance {tolerance:.2e}; give more buffer, or set \
                             training.model.accept_over_tolerance: true to plan anyway",
                            q.queue, q.class
                        ));
                    }
                }
            }
        }
        crate::diag::Diagnostics(found)
    }

    /// The full transport configuration of the host with rank `rank`.
    pub fn transport_config(&self, rank: usize) -> TransportConfig {
        hosts::transport_config(self, rank)
    }
}

/// The prefixes the plan's static routes live in: the path pool and the rack subnets.
fn route_scope(inv: &Inventory) -> Vec<Ipv4Net> {
    let mut scope: Vec<Ipv4Net> = inv.racks.iter().map(|r| r.subnet).collect();
    scope.push(inv.fabric.path_pool);
    Ipv4Net::aggregate(&scope)
}

/// A switch's fastest port: the line rate its bursts arrive at.
fn switch_link_mbps(s: &crate::inventory::Switch) -> u64 {
    s.ports.iter().map(|p| p.speed_mbps).max().unwrap_or(0)
}

/// Most senders one receiver hears from at once: a ring's neighbour; everyone else
/// in an all-to-all round or at a parameter server.
fn fan_in(collective: Collective, hosts: usize) -> u32 {
    match collective {
        Collective::Ring => 1,
        Collective::Transpose | Collective::Ps => hosts.saturating_sub(1).max(1) as u32,
    }
}

/// [`ModelSummary::message_bound`]: an allreduce over every host, as the transport runs
/// the job's collective.
fn job_message_bound(inv: &Inventory) -> f64 {
    let ranks = u16::try_from(inv.hosts.len()).unwrap_or(u16::MAX);
    let algorithm = Algorithm::of_job(inv.training.collective, ranks);
    message_bound(inv.training.loss_bound, &algorithm, inv.hosts.len())
}

fn switch_qos(
    qos: &QosPlan,
    profile: &ThresholdProfile,
    ports: impl Iterator<Item = String>,
) -> QosIntent {
    // Traffic class n is queue n, so the TC map is the queue map.
    let mut queues = vec![QueueIntent {
        queue: qos.control_queue,
        scheduler: Scheduler::Strict,
        ecn: None,
    }];
    let holds_limit = profile.queue_limits;
    queues.extend(profile.queues.iter().map(|q| QueueIntent {
        queue: q.queue,
        scheduler: Scheduler::Strict,
        ecn: Some(EcnThresholds {
            mark_bytes: q.mark_bytes,
            limit_bytes: holds_limit.then_some(q.limit_bytes),
        }),
    }));
    QosIntent {
        dscp_to_tc: qos.dscp_to_queue.clone(),
        tc_to_queue: (0..qos.priorities).collect(),
        ports: ports.collect(),
        queues,
    }
}
