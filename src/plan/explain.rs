//! `mltctl plan --explain`: the plan as an admin reviews it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use endhost_core::proto::PACING_BATCH;
use mlt_queue::{Loss, Tally};
use mltctl_lab::arrivals::{self, Offered};
use mltctl_lab::qos::{Curve, PortQos, QueueQos};
use switch_config::{RouteKind, Vendor};

use super::thresholds::MIN_BOUND;
use super::{Plan, ThresholdProfile};

/// What `mltctl plan` prints without options: the summary, queues and thresholds.
pub fn overview(plan: &Plan, layer_names: &[String]) -> String {
    let mut out = String::new();
    summary(&mut out, plan);
    queues(&mut out, plan, layer_names);
    thresholds(&mut out, plan, false);
    out
}

/// The overview with each predicted loss beside the lab switch's simulated one, then
/// what every switch and host would be configured with.
pub fn explain(plan: &Plan, layer_names: &[String]) -> String {
    let mut out = String::new();
    summary(&mut out, plan);
    queues(&mut out, plan, layer_names);
    thresholds(&mut out, plan, true);
    switches(&mut out, plan);
    hosts(&mut out, plan);
    out
}

fn summary(out: &mut String, plan: &Plan) {
    let q = &plan.qos;
    let routes: usize = plan.switches.iter().map(|s| s.intent.routes.len()).sum();
    let _ = writeln!(
        out,
        "Fabric {}: {} switches ({} spines), {} racks, {} hosts; {} layers in {} gradient classes",
        plan.fabric,
        plan.switches.len(),
        plan.spines.len(),
        plan.racks.len(),
        plan.hosts.len(),
        plan.job.tagging.layers,
        q.classes.len()
    );
    let _ = writeln!(
        out,
        "Queues: {} per port = 1 control (queue {}) + {} gradient + 1 default (queue {}); {} static routes in all",
        q.priorities,
        q.control_queue,
        q.classes.len(),
        q.default_queue,
        routes
    );
}

fn queues(out: &mut String, plan: &Plan, layer_names: &[String]) {
    let q = &plan.qos;
    let m = &plan.model;
    let _ = writeln!(
        out,
        "\nDSCP -> queue (the same on every switch and host)\n\
         queue  carries            DSCP   layers                      traffic"
    );
    let _ = writeln!(
        out,
        "{:>5}  {:<17}  {:>4}",
        q.control_queue, "control", q.control_dscp
    );
    for class in &q.classes {
        let t = &class.tag;
        let (first, last) = (t.first_layer as usize, t.last_layer as usize);
        let span = if first == last {
            format!("{first} {}", layer_names[first])
        } else {
            format!(
                "{first}-{last} {}..{}",
                layer_names[first], layer_names[last]
            )
        };
        let _ = writeln!(
            out,
            "{:>5}  {:<17}  {:>4}   {:<26}  {:>6.2}%",
            t.queue,
            format!("gradient class {}", t.class),
            t.dscp,
            truncate(&span, 26),
            class.share * 100.0,
        );
    }
    let _ = writeln!(
        out,
        "{:>5}  {:<17}  {:>4}",
        q.default_queue, "default", "rest"
    );
    let t = &m.tolerance;
    let _ = writeln!(
        out,
        "Model: the switch's queues (strict priority; per queue a step S_i for Not-ECT frames and a limit L_i \
         for all) under the transport's bursts ({} sender(s) x {} frames at line rate, at Poisson times) at a \
         load of {} of line rate; {:.0}% of frames unimportant (Not-ECT); {}-byte frames\n\
         Loss tolerated without extra rounds: random {}, front layers {}, back layers {}, small gradients {}, large gradients {}\n\
         Loss the transport leaves unrecovered: {:.2e} of a message (the loss bound over the collective's depth); \
         a buffer that holds it gets thresholds within it (within {MIN_BOUND:.0e} if it is less) for every queue",
        m.fan_in,
        PACING_BATCH,
        m.load,
        m.theta * 100.0,
        m.packet_bytes,
        t.random_loss,
        t.front_layers,
        t.back_layers,
        t.small_gradients,
        t.large_gradients,
        m.message_bound,
    );
}

fn thresholds(out: &mut String, plan: &Plan, check: bool) {
    let m = &plan.model;
    let frames = |bytes: u64| bytes / u64::from(m.packet_bytes);
    for p in &plan.thresholds {
        let _ = writeln!(
            out,
            "\nRED/ECN thresholds for a {} buffer at {} Gbit/s ({}); {} used\n\
             Floors: every L_i holds one burst, {} ({} sender(s) x {} frames, plus {} extra \
             sender(s) at line rate until rate control slows them at T_high = {} µs); every \
             L_i − S_i holds a burst's ECT frames, {}; the lowest queue marks from C·RTT/7 = {} \
             at the earliest; the rest of the buffer goes to the limits where it cuts ECT loss \
             most\n\
             {}\n\
             Predicted: the model's simulation of these queues ({} frames), ± its standard error",
            bytes(p.buffer_bytes),
            p.link_mbps as f64 / 1000.0,
            p.switches.join(", "),
            bytes(p.used_bytes),
            bytes(p.burst_bytes),
            m.fan_in,
            PACING_BATCH,
            m.fan_in - 1,
            m.t_high_us,
            bytes(p.ect_room_bytes),
            bytes(p.mark_floor_bytes),
            if p.within_bound {
                "Chosen within the loss the transport leaves unrecovered"
            } else {
                "Chosen within the tolerances: this buffer cannot hold thresholds within the loss \
                 the transport leaves unrecovered"
            },
            p.simulated_frames,
        );
        let simulated = check.then(|| lab_check(plan, p));
        if simulated.is_some() {
            let _ = writeln!(
                out,
                "Simulated: the lab switch's queue, an independent emulation at exact times, \
                 offered the same traffic ({CHECK_FRAMES} frames) with these thresholds in bytes"
            );
        }
        if p.queue_limits {
            let _ = writeln!(
                out,
                "Switches step at S_i (min = max, probability 100%) and drop every frame \
                 at and above L_i."
            );
        } else {
            let _ = writeln!(
                out,
                "Switches step at S_i (min = max, probability 100%) but cannot hold L_i: it \
                 is not configured, and a queue's ECT frames are predicted against the room \
                 the shared buffer leaves them when the other queues sit at their steps (the \
                 limit column; one congested queue at a time, an optimistic assumption)."
            );
            let vendors: BTreeSet<Vendor> = plan
                .switches
                .iter()
                .filter(|s| p.switches.contains(&s.intent.name))
                .map(|s| s.intent.vendor)
                .collect();
            for (vendor, why) in vendors
                .into_iter()
                .filter_map(|v| Some((v, v.no_queue_limit()?)))
            {
                let _ = writeln!(out, "  {vendor}: {why}.");
            }
        }
        let (header_n, header_e) = if check {
            (
                "Not-ECT loss: predicted | simulated (tolerance)",
                "ECT loss: predicted | simulated (tolerance)",
            )
        } else {
            ("Not-ECT loss (tolerance)", "ECT loss (tolerance)")
        };
        let width = if check { 50 } else { 27 };
        let _ = writeln!(
            out,
            "queue  mark S_i (frames)      limit L_i (frames)     {header_n:<width$}  \
             {header_e:<width$}  set by (S; L)"
        );
        for (i, q) in p.queues.iter().enumerate() {
            let sim = simulated.as_ref().map(|s| s[i]);
            let _ = writeln!(
                out,
                "{:>5}  {:<21}  {:<21}  {:<width$}  {:<width$}  {}; {}",
                q.queue,
                format!("{} ({})", bytes(q.mark_bytes), frames(q.mark_bytes)),
                format!("{} ({})", bytes(q.limit_bytes), frames(q.limit_bytes)),
                loss(
                    q.loss_not_ect,
                    q.loss_not_ect_error,
                    sim.map(|s| s.0),
                    q.tolerance_not_ect
                ),
                loss(
                    q.loss_ect,
                    q.loss_ect_error,
                    sim.map(|s| s.1),
                    q.tolerance_ect
                ),
                q.mark_set_by.describe(),
                q.limit_set_by.describe(),
            );
        }
    }
}

/// Frames the lab switch's queue is offered to check a profile's predictions, in
/// windows whose spread gives the check's standard error.
const CHECK_FRAMES: usize = 2_000_000;
const CHECK_WINDOWS: usize = 30;

/// Per gradient queue, the (Not-ECT, ECT) losses of the lab switch's queue running the
/// profile's thresholds (in bytes, as rendered) under the model's traffic at exact
/// times: an independent check of the predictions.
fn lab_check(plan: &Plan, p: &ThresholdProfile) -> Vec<(Loss, Loss)> {
    let mut queues: BTreeMap<u8, QueueQos> = BTreeMap::new();
    queues.insert(
        plan.qos.control_queue,
        QueueQos {
            strict: true,
            ..QueueQos::default()
        },
    );
    for q in &p.queues {
        let step = Curve {
            min_bytes: q.mark_bytes,
            max_bytes: q.mark_bytes,
            max_percent: 100,
        };
        queues.insert(
            q.queue,
            QueueQos {
                strict: true,
                mark: Some(step),
                drop_not_ect: Some(step),
                drop_all: None,
                limit_bytes: Some(q.limit_bytes),
            },
        );
    }
    let qos = PortQos {
        queue_of_dscp: plan.qos.dscp_to_queue.clone(),
        queues,
    };
    let offered = Offered {
        classes: plan
            .qos
            .classes
            .iter()
            .map(|c| (c.tag.dscp, c.share))
            .collect(),
        load: plan.model.load,
        theta: plan.model.theta,
        frame_bytes: usize::from(plan.model.packet_bytes),
        rate_bps: p.link_mbps * 1_000_000,
        batch: PACING_BATCH as u32,
        senders: plan.model.fan_in,
    };
    let windows = arrivals::simulate_in_windows(
        qos,
        p.buffer_bytes,
        &offered,
        CHECK_FRAMES,
        CHECK_WINDOWS,
        CHECK_SEED,
    );
    plan.qos
        .classes
        .iter()
        .map(|c| {
            let loss = |ect: bool| {
                let tallies: Vec<Tally> = windows
                    .iter()
                    .map(|w| {
                        let (offered, lost) =
                            w.get(&(c.tag.dscp, ect)).copied().unwrap_or_default();
                        Tally { offered, lost }
                    })
                    .collect();
                Loss::of(&tallies)
            };
            (loss(false), loss(true))
        })
        .collect()
}

const CHECK_SEED: u64 = 0x006d_6c74_5f63_686b;

fn switches(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "\nSwitches: what would be configured");
    for s in &plan.switches {
        let i = &s.intent;
        let rack = s
            .rack
            .as_deref()
            .map_or(String::new(), |r| format!(", rack {r}"));
        let _ = writeln!(
            out,
            "{} ({}, {}{rack}) at {}:{}: {} ports, strict priority on queues {}, ECN on {}",
            i.name,
            i.vendor,
            s.role,
            s.mgmt.address,
            s.mgmt.port,
            i.qos.ports.len(),
            list(i.qos.queues.iter().map(|q| q.queue)),
            list(
                i.qos
                    .queues
                    .iter()
                    .filter(|q| q.ecn.is_some())
                    .map(|q| q.queue)
            ),
        );
        for kind in [
            RouteKind::RackSubnets,
            RouteKind::PathBlock,
            RouteKind::HostPath,
            RouteKind::Discard,
        ] {
            let routes = i.routes.iter().filter(|r| r.kind == kind).map(|r| {
                if r.next_hops.is_empty() {
                    r.prefix.to_string()
                } else {
                    format!("{} via {}", r.prefix, list(r.next_hops.iter()))
                }
            });
            let routes: Vec<String> = routes.collect();
            if !routes.is_empty() {
                let what = match kind {
                    RouteKind::RackSubnets => "rack subnets",
                    RouteKind::PathBlock => "path blocks",
                    RouteKind::HostPath => "host paths",
                    RouteKind::Discard => "discard",
                };
                let _ = writeln!(out, "  {what:<13} {}", routes.join("; "));
            }
        }
    }
}

fn hosts(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "\nHosts: what would be configured");
    // Per rack, the path addresses (of all hosts) on its spines: a host's MAC map holds
    // those of its peers and every peer IP, counted here without building each map.
    let rack_paths: Vec<usize> = plan
        .racks
        .iter()
        .map(|rack| {
            plan.hosts
                .iter()
                .flat_map(|h| &h.path_addresses)
                .filter(|p| rack.spines.contains(&p.spine))
                .count()
        })
        .collect();
    for h in &plan.hosts {
        let paths = h
            .path_addresses
            .iter()
            .map(|p| format!("{} (via {})", p.address, plan.spines[p.spine]));
        let _ = writeln!(
            out,
            "rank {} {} (rack {}) {} {}/{} mac {}: path addresses {}",
            h.rank,
            h.name,
            plan.racks[h.rack].name,
            h.nic.name,
            h.nic.ip,
            h.nic.prefix_len,
            h.nic.mac,
            joined(paths, ", ")
        );
        let routes = h
            .routes
            .iter()
            .map(|r| format!("{} via {}", r.prefix, r.via));
        let peer_addresses = plan.hosts.len() - 1 + rack_paths[h.rack] - h.path_addresses.len();
        let _ = writeln!(
            out,
            "  neighbours gateway {}={} and {peer_addresses} peer addresses (plan --host {} --ipmac)",
            h.gateway.ip, h.gateway.mac, h.name
        );
        let _ = writeln!(out, "  routes     {}", joined(routes, "; "));
    }
}

/// The items separated by `separator`, or "none".
fn joined(items: impl Iterator<Item = String>, separator: &str) -> String {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(separator)
    }
}

fn list<T: std::fmt::Display>(items: impl Iterator<Item = T>) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let cut: String = s.chars().take(width - 1).collect();
        format!("{cut}~")
    }
}

/// A predicted loss (± its standard error), the simulated one when checked, and the
/// tolerance, with whether the prediction is within it.
fn loss(predicted: f64, error: f64, simulated: Option<Loss>, tolerance: f64) -> String {
    let mark = if predicted <= tolerance { "ok" } else { "OVER" };
    let predicted = format!("{predicted:.2e}±{error:.0e}");
    match simulated {
        Some(s) => format!(
            "{predicted} | {:.2e}±{:.0e} ({tolerance:.2e}) {mark}",
            s.fraction, s.error
        ),
        None => format!("{predicted} ({tolerance:.2e}) {mark}"),
    }
}

/// Bytes in the largest binary unit that keeps them readable.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
