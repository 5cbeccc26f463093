//! `mltctl plan --explain`: the plan as an admin reviews it.

use std::collections::BTreeSet;
use std::fmt::Write;

use switch_config::{RouteKind, Vendor};

use endhost_core::proto::PACING_BATCH;

use super::Plan;

/// What `mltctl plan` prints without options: the summary, queues and thresholds.
pub fn overview(plan: &Plan, layer_names: &[String]) -> String {
    let mut out = String::new();
    summary(&mut out, plan);
    queues(&mut out, plan, layer_names);
    thresholds(&mut out, plan);
    out
}

/// The overview, then what every switch and host would be configured with.
pub fn explain(plan: &Plan, layer_names: &[String]) -> String {
    let mut out = overview(plan, layer_names);
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
         queue  carries            DSCP   layers                      traffic  utilisation"
    );
    let _ = writeln!(
        out,
        "{:>5}  {:<17}  {:>4}",
        q.control_queue, "control", q.control_dscp
    );
    let shared = plan.thresholds.first();
    for (i, class) in q.classes.iter().enumerate() {
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
        let rho = shared.map_or(0.0, |p| p.queues[i].utilisation);
        let _ = writeln!(
            out,
            "{:>5}  {:<17}  {:>4}   {:<26}  {:>6.2}%  {:>10.4}",
            t.queue,
            format!("gradient class {}", t.class),
            t.dscp,
            truncate(&span, 26),
            class.share * 100.0,
            rho
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
        "Model (MLT Appendix B): load {} of line rate at a congested port; {:.0}% of packets unimportant (Not-ECT); \
         buffer counted in {}-byte packets\n\
         Loss tolerated without extra rounds: random {}, front layers {}, back layers {}, small gradients {}, large gradients {}",
        m.load,
        m.theta * 100.0,
        m.packet_bytes,
        t.random_loss,
        t.front_layers,
        t.back_layers,
        t.small_gradients,
        t.large_gradients
    );
}

fn thresholds(out: &mut String, plan: &Plan) {
    let m = &plan.model;
    for p in &plan.thresholds {
        let _ = writeln!(
            out,
            "\nRED/ECN thresholds for a {} buffer at {} Gbit/s ({}); {} used\n\
             Floors: every L_i holds one burst, {} ({} sender(s) x {} packets, plus {} \
             extra sender(s) at line rate for an RTT of {} µs); the lowest queue marks from \
             C·RTT/7 = {} at the earliest; the rest of the buffer goes where it cuts loss most",
            bytes(p.buffer_bytes),
            p.link_mbps as f64 / 1000.0,
            p.switches.join(", "),
            bytes(p.used_bytes),
            bytes(p.burst_bytes),
            m.fan_in,
            PACING_BATCH,
            m.fan_in - 1,
            m.rtt_us,
            bytes(p.mark_floor_bytes),
        );
        if p.queue_limits {
            let _ = writeln!(
                out,
                "Switches step at S_i (min = max, probability 100%) and drop every packet \
                 above L_i."
            );
        } else {
            let _ = writeln!(
                out,
                "Switches step at S_i (min = max, probability 100%) but cannot hold L_i. \
                 Re-solved for that: L_i is not configured, and a queue's large gradients are \
                 predicted against the room the shared buffer leaves them (the limit column)."
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
        let _ = writeln!(
            out,
            "queue  mark S_i (pkts)        limit L_i (pkts)       loss small (tolerance)  \
             loss large (tolerance)  set by (S; L)"
        );
        for q in &p.queues {
            let a = &q.allocation;
            let _ = writeln!(
                out,
                "{:>5}  {:<21}  {:<21}  {:<22}  {:<22}  {}; {}",
                q.queue,
                format!(
                    "{} ({:.0})",
                    bytes(q.mark_bytes),
                    a.mark_packets(plan.model.theta)
                ),
                format!("{} ({:.0})", bytes(q.limit_bytes), a.limit_packets()),
                loss(a.loss_small, q.tolerance_small),
                loss(a.loss_large, q.tolerance_large),
                a.mark_set_by.describe(),
                a.limit_set_by.describe(),
            );
        }
    }
}

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

fn loss(loss: f64, tolerance: f64) -> String {
    let mark = if loss <= tolerance { "ok" } else { "OVER" };
    format!("{loss:.2e} ({tolerance:.2e}) {mark}")
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
