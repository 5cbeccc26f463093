//! The plan, checked against what the fabric must do with it.

mod common;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;

use common::fixture;
use endhost_core::config::{DatapathKind, TransportConfig};
use mltctl::generate::{FabricSize, fabric_yaml};
use mltctl::inventory::{self, Inventory, LoadError};
use mltctl::plan::thresholds::SetBy;
use mltctl::plan::{Plan, ThresholdProfile, hosts};
use switch_config::StaticRoute;

fn load(relative: &str) -> Inventory {
    let path = fixture(relative);
    let text = std::fs::read_to_string(&path).expect("fixture exists");
    load_text(&path, &text)
}

fn load_text(path: &Path, text: &str) -> Inventory {
    match inventory::load_str(path, text) {
        Ok(inv) => inv,
        Err(LoadError::Invalid(problems)) => panic!("{problems}"),
        Err(e) => panic!("{e}"),
    }
}

/// The small test fabric with extra lines appended to its `training` section.
fn small_with(training_lines: &str) -> Inventory {
    let path = fixture("tests/inventories/valid/small.yaml");
    let base = std::fs::read_to_string(&path).expect("fixture exists");
    load_text(&path, &format!("{base}{training_lines}"))
}

fn generated(spines: usize, leaves: usize, hosts_per_leaf: usize) -> Inventory {
    let yaml = fabric_yaml(FabricSize {
        spines,
        leaves,
        hosts_per_leaf,
        layers: 30,
        params_per_layer: 10_000,
    })
    .expect("generator accepts the size");
    load_text(Path::new("generated.yaml"), &yaml)
}

// ---------------------------------------------------------------- routing walker

/// How a walk ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// At the host with this rank, which owns the address.
    Delivered(usize),
    /// On a discard route.
    Discarded,
}

/// Who answers for an address: a switch or a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Switch(usize),
    Host(usize),
}

/// Follows packets hop by hop through the plan's routing tables.
struct Walker<'a> {
    inv: &'a Inventory,
    plan: &'a Plan,
    /// Interface addresses of switches and hosts (hosts by rank).
    owner: HashMap<Ipv4Addr, Node>,
    /// Switch index in the plan for each switch name.
    switch_index: HashMap<&'a str, usize>,
}

impl<'a> Walker<'a> {
    fn new(inv: &'a Inventory, plan: &'a Plan) -> Self {
        let mut owner = HashMap::new();
        for (i, s) in inv.switches.iter().enumerate() {
            for p in &s.ports {
                if let Some(ip) = p.ip {
                    owner.insert(ip.addr(), Node::Switch(i));
                }
            }
        }
        for r in &inv.racks {
            owner.insert(r.gateway_ip, Node::Switch(r.leaf));
        }
        for (rank, h) in plan.hosts.iter().enumerate() {
            owner.insert(h.nic.ip, Node::Host(rank));
            for p in &h.path_addresses {
                assert!(
                    owner.insert(p.address, Node::Host(rank)).is_none(),
                    "{} twice",
                    p.address
                );
            }
        }
        let switch_index = plan
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| (s.intent.name.as_str(), i))
            .collect();
        Walker {
            inv,
            plan,
            owner,
            switch_index,
        }
    }

    /// Every switch path a packet from host `src` to `dst` may take (one per ECMP
    /// choice) and how it ends; panics on a loop, a missing route or misdelivery.
    fn walk(&self, src: usize, dst: Ipv4Addr) -> Vec<(Vec<String>, End)> {
        let host = &self.plan.hosts[src];
        let rack = &self.plan.racks[host.rack];
        let first = if rack.subnet.contains(&dst) {
            dst
        } else {
            let route = host
                .routes
                .iter()
                .filter(|r| r.prefix.contains(&dst))
                .max_by_key(|r| r.prefix.prefix_len())
                .unwrap_or_else(|| panic!("{}: no route to {dst}", host.name));
            route.via
        };
        let mut done = Vec::new();
        self.hop(self.owner[&first], dst, Vec::new(), &mut done);
        done
    }

    fn hop(
        &self,
        at: Node,
        dst: Ipv4Addr,
        mut path: Vec<String>,
        done: &mut Vec<(Vec<String>, End)>,
    ) {
        let s = match at {
            Node::Host(rank) => {
                let h = &self.plan.hosts[rank];
                let owns = h.nic.ip == dst || h.path_addresses.iter().any(|p| p.address == dst);
                assert!(
                    owns,
                    "{dst} delivered to {}, which does not own it (path {path:?})",
                    h.name
                );
                done.push((path, End::Delivered(rank)));
                return;
            }
            Node::Switch(s) => s,
        };
        let name = &self.inv.switches[s].name;
        assert!(path.len() < 6, "loop towards {dst}: {path:?}");
        path.push(name.clone());
        // A leaf delivers its own rack's subnet directly.
        if let Some(r) = self.inv.switches[s].rack
            && self.inv.racks[r].subnet.contains(&dst)
        {
            return self.hop(self.owner[&dst], dst, path, done);
        }
        let routes = &self.plan.switches[self.switch_index[name.as_str()]]
            .intent
            .routes;
        let route: &StaticRoute = routes
            .iter()
            .filter(|r| r.prefix.contains(&dst))
            .max_by_key(|r| r.prefix.prefix_len())
            .unwrap_or_else(|| panic!("{name}: no route to {dst} (path {path:?})"));
        if route.next_hops.is_empty() {
            done.push((path, End::Discarded));
            return;
        }
        for next in &route.next_hops {
            let node = *self
                .owner
                .get(next)
                .unwrap_or_else(|| panic!("{name}: next hop {next} is nobody's address"));
            self.hop(node, dst, path.clone(), done);
        }
    }
}

/// For every ordered pair of hosts in different racks and every spine the two racks
/// share, the destination's path address for that spine leads through that spine only.
fn every_path_address_steers_through_its_spine(inv: &Inventory) -> usize {
    let plan = Plan::build(inv);
    let walker = Walker::new(inv, &plan);
    let leaf_of = |rack: usize| plan.racks[rack].leaf.clone();
    let mut walks = 0;
    for (src, a) in plan.hosts.iter().enumerate() {
        for (dst, b) in plan.hosts.iter().enumerate() {
            if a.rack == b.rack {
                continue;
            }
            let a_spines = &plan.racks[a.rack].spines;
            let shared: Vec<usize> = plan.racks[b.rack]
                .spines
                .iter()
                .copied()
                .filter(|s| a_spines.contains(s))
                .collect();
            assert!(
                !shared.is_empty(),
                "{} and {} share no spine",
                a.name,
                b.name
            );
            for spine in shared {
                let address = b
                    .path_addresses
                    .iter()
                    .find(|p| p.spine == spine)
                    .unwrap_or_else(|| panic!("{} has no address via spine {spine}", b.name))
                    .address;
                let expected = vec![leaf_of(a.rack), plan.spines[spine].clone(), leaf_of(b.rack)];
                for (path, reached) in walker.walk(src, address) {
                    assert_eq!(reached, End::Delivered(dst), "{} -> {address}", a.name);
                    assert_eq!(
                        path, expected,
                        "{} -> {} via {}",
                        a.name, b.name, plan.spines[spine]
                    );
                    walks += 1;
                }
            }
            // Control traffic to the plain address takes any shared spine, and arrives.
            for (path, reached) in walker.walk(src, b.nic.ip) {
                assert_eq!(reached, End::Delivered(dst));
                assert_eq!(path.len(), 3, "{path:?}");
            }
        }
    }
    unused_path_addresses_are_discarded_without_looping(&plan, &walker);
    walks
}

/// A packet to a path address no host owns crosses its spine and is dropped at the
/// destination rack's leaf, instead of bouncing between that leaf and the spine.
fn unused_path_addresses_are_discarded_without_looping(plan: &Plan, walker: &Walker) {
    for (r, rack) in plan.racks.iter().enumerate() {
        let leaf = plan
            .switches
            .iter()
            .find(|s| s.intent.name == rack.leaf)
            .unwrap();
        let blocks = leaf
            .intent
            .routes
            .iter()
            .filter(|route| route.next_hops.is_empty());
        for block in blocks.map(|route| route.prefix) {
            // Offset 0 of every block is left unused.
            let unused = block.network();
            // The block's spine is the one routing it; only racks reaching it can send.
            let spine = plan
                .spines
                .iter()
                .position(|name| {
                    let spine = plan
                        .switches
                        .iter()
                        .find(|s| &s.intent.name == name)
                        .unwrap();
                    spine
                        .intent
                        .routes
                        .iter()
                        .any(|route| route.prefix == block)
                })
                .unwrap_or_else(|| panic!("no spine routes {block}"));
            let sources = plan
                .hosts
                .iter()
                .enumerate()
                .filter(|(_, h)| h.rack != r && plan.racks[h.rack].spines.contains(&spine));
            for (src, _) in sources {
                for (path, end) in walker.walk(src, unused) {
                    assert_eq!(end, End::Discarded, "{unused}: {path:?}");
                    assert_eq!(path.len(), 3, "{unused}: {path:?}");
                    assert_eq!(path.last(), Some(&rack.leaf));
                    assert_eq!(path[1], plan.spines[spine]);
                }
            }
        }
    }
}

#[test]
fn lab_path_addresses_steer_through_each_spine() {
    let walks = every_path_address_steers_through_its_spine(&load("inventory/lab.yaml"));
    // 4 hosts, each with 2 peers in the other rack, 2 spines.
    assert_eq!(walks, 4 * 2 * 2);
}

#[test]
fn partial_mesh_uses_only_shared_spines() {
    let inv = load("tests/inventories/valid/partial-mesh.yaml");
    let walks = every_path_address_steers_through_its_spine(&inv);
    // r1<->r2 share 2 spines; r3 shares only spine2 with each, over 2 parallel links.
    assert_eq!(walks, 2 * 4 * 2 + 4 * 4 * 2);
    let plan = Plan::build(&inv);
    let c1 = &plan.hosts[plan.host_rank("c1").unwrap()];
    assert_eq!(c1.path_addresses.len(), 1, "r3 reaches spine2 only");
    assert_eq!(plan.spines[c1.path_addresses[0].spine], "spine2");
}

#[test]
fn generated_fabric_path_addresses_steer_through_each_spine() {
    let walks = every_path_address_steers_through_its_spine(&generated(3, 5, 3));
    assert_eq!(walks, 15 * 12 * 3);
}

// ---------------------------------------------------------------- hosts and MAC maps

#[test]
fn ranks_follow_racks_and_mac_maps_pick_the_next_hop() {
    let inv = load("tests/inventories/valid/partial-mesh.yaml");
    let plan = Plan::build(&inv);
    let names: Vec<&str> = plan.hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["a1", "a2", "b1", "b2", "c1", "c2"]);
    for rank in 0..plan.hosts.len() {
        let me = &plan.hosts[rank];
        let config: TransportConfig = plan.transport_config(rank);
        assert_eq!(config.rank as usize, rank);
        assert_eq!(config.peers.len(), plan.hosts.len() - 1);
        let my_spines = &plan.racks[me.rack].spines;
        for peer in &config.peers {
            let other = &plan.hosts[peer.rank as usize];
            if other.rack == me.rack {
                assert_eq!(
                    peer.next_hop_mac, other.nic.mac,
                    "{} -> {}",
                    me.name, other.name
                );
                assert_eq!(peer.paths, vec![other.nic.ip]);
            } else {
                assert_eq!(peer.next_hop_mac, plan.racks[me.rack].gateway_mac);
                let expected: Vec<Ipv4Addr> = other
                    .path_addresses
                    .iter()
                    .filter(|p| my_spines.contains(&p.spine))
                    .map(|p| p.address)
                    .collect();
                assert_eq!(peer.paths, expected, "{} -> {}", me.name, other.name);
                assert!(!peer.paths.is_empty());
            }
        }
        // The MAC map: every peer IP with the transport's next hop, every reachable
        // path address of a peer (in the rack too) with the gateway's MAC.
        let mut expected = Vec::new();
        for peer in &config.peers {
            let other = &plan.hosts[peer.rank as usize];
            expected.push((peer.ip, peer.next_hop_mac));
            for p in other
                .path_addresses
                .iter()
                .filter(|p| my_spines.contains(&p.spine))
            {
                expected.push((p.address, me.gateway.mac));
            }
        }
        let map: Vec<_> = hosts::mac_map(&plan, rank)
            .iter()
            .map(|n| (n.ip, n.mac))
            .collect();
        assert_eq!(map, expected, "{}", me.name);
        let network = hosts::network_plan(&plan, rank, DatapathKind::Udp);
        let neighbours: Vec<_> = network.neighbours.iter().map(|n| (n.ip, n.mac)).collect();
        assert_eq!(neighbours[0], (me.gateway.ip, me.gateway.mac));
        assert_eq!(neighbours[1..], expected[..], "{}", me.name);
    }
    // --explain counts each host's map without building it; the counts must agree.
    let layer_names: Vec<String> = (0..plan.job.tagging.layers)
        .map(|l| format!("layer{l}"))
        .collect();
    let explained = mltctl::plan::explain::explain(&plan, &layer_names);
    for (rank, me) in plan.hosts.iter().enumerate() {
        let count = format!(
            "and {} peer addresses (plan --host {} --ipmac)",
            hosts::mac_map(&plan, rank).len(),
            me.name
        );
        assert!(explained.contains(&count), "{count}\n{explained}");
    }
    // The 25G leaf ports set the line rate of rack r2's hosts.
    let b1 = plan.transport_config(plan.host_rank("b1").unwrap());
    assert_eq!(b1.local.line_rate_mbps, 25_000);
}

// ---------------------------------------------------------------- classes and DSCP

#[test]
fn every_switch_and_host_agrees_on_dscp_and_queues() {
    let inv = load("inventory/lab.yaml");
    let plan = Plan::build(&inv);
    let q = &plan.qos;
    assert_eq!((q.priorities, q.control_queue, q.default_queue), (8, 7, 0));
    // Front layers in higher queues: queue numbers fall as classes go back.
    let queues: Vec<u8> = q.classes.iter().map(|c| c.tag.queue).collect();
    assert_eq!(queues, [6, 5, 4, 3, 2, 1]);
    assert_eq!(q.classes.first().unwrap().tag.first_layer, 0);
    assert_eq!(q.classes.last().unwrap().tag.last_layer, 15);
    for s in &plan.switches {
        assert_eq!(
            s.intent.qos.dscp_to_tc, q.dscp_to_queue,
            "{}",
            s.intent.name
        );
        assert_eq!(s.intent.qos.dscp_to_tc.len(), 64);
    }
    for class in &plan.job.tagging.classes {
        assert_eq!(q.dscp_to_queue[usize::from(class.dscp)], class.queue);
    }
    assert_eq!(
        q.dscp_to_queue[usize::from(plan.job.tagging.control_dscp)],
        7
    );
    let others = q.dscp_to_queue.iter().filter(|&&queue| queue == 0).count();
    assert_eq!(others, 64 - 7, "every other DSCP goes to the default queue");
}

// ---------------------------------------------------------------- thresholds

#[test]
fn thresholds_stay_within_every_buffer() {
    let fabrics = [
        load("inventory/lab.yaml"),
        load("tests/inventories/valid/partial-mesh.yaml"),
        small_with("  model: {load: 1.0}\n"),
    ];
    for inv in &fabrics {
        let plan = Plan::build(inv);
        for p in &plan.thresholds {
            assert!(
                p.used_bytes <= p.buffer_bytes,
                "{}: {} > {}",
                plan.fabric,
                p.used_bytes,
                p.buffer_bytes
            );
            for q in &p.queues {
                assert!(q.mark_bytes <= q.limit_bytes, "{q:?}");
                assert_eq!((q.mark_bytes % 1024, q.limit_bytes % 1024), (0, 0), "{q:?}");
            }
        }
        for s in &plan.switches {
            let buffer = inv
                .switches
                .iter()
                .find(|w| w.name == s.intent.name)
                .unwrap()
                .buffer_bytes;
            let sum: u64 = s
                .intent
                .qos
                .queues
                .iter()
                .filter_map(|q| q.ecn)
                .filter_map(|e| e.limit_bytes)
                .sum();
            assert!(sum <= buffer, "{}", s.intent.name);
        }
    }
}

/// The thresholds of the switches whose OS holds queue limits (SONiC, EOS).
fn held(plan: &Plan) -> &ThresholdProfile {
    plan.thresholds
        .iter()
        .find(|p| p.queue_limits)
        .expect("a switch that holds queue limits")
}

/// Cumulus and Onyx cannot hold L_i: the plan leaves it out of their intents, and
/// predicts ECT loss against the room the shared buffer leaves a queue when every other
/// queue sits at its step, B − Σ_{k≠i} S_k frames.
#[test]
fn switches_without_queue_limits_are_solved_for_the_shared_buffer() {
    let plan = Plan::build(&load("inventory/lab.yaml"));
    let shared = plan
        .thresholds
        .iter()
        .find(|p| !p.queue_limits)
        .expect("leaf1 (cumulus) and leaf2 (onyx)");
    assert_eq!(shared.switches, ["leaf1", "leaf2"]);
    let packet = u64::from(plan.model.packet_bytes);
    let budget = (shared.buffer_bytes - 1024 * shared.queues.len() as u64) / packet;
    let frames = |bytes: u64| bytes / packet;
    let steps: u64 = shared.queues.iter().map(|q| frames(q.mark_bytes)).sum();
    for q in &shared.queues {
        assert_eq!(q.limit_set_by, SetBy::SharedBuffer, "{q:?}");
        let room = budget - (steps - frames(q.mark_bytes));
        // The room, rounded up to whole KiB as every threshold is.
        assert_eq!(
            q.limit_bytes,
            (room * packet).div_ceil(1024) * 1024,
            "{q:?}"
        );
        assert!(q.loss_ect <= q.tolerance_ect, "{q:?}");
    }
    for s in plan.switches.iter().filter(|s| s.rack.is_some()) {
        for q in s.intent.qos.queues.iter().filter_map(|q| q.ecn) {
            assert_eq!(q.limit_bytes, None, "{}", s.intent.name);
        }
    }
    // The switches that hold limits get them.
    let limited = held(&plan);
    for q in &limited.queues {
        assert_ne!(q.limit_set_by, SetBy::SharedBuffer);
    }
    for s in plan.switches.iter().filter(|s| s.rack.is_none()) {
        assert!(
            s.intent
                .qos
                .queues
                .iter()
                .filter_map(|q| q.ecn)
                .all(|e| e.limit_bytes.is_some())
        );
    }
}

#[test]
fn front_layer_queues_get_lower_thresholds_than_back_layer_queues() {
    // Equal layers: every class carries the same traffic, so position alone decides.
    let path = fixture("tests/inventories/valid/small.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "layers: {sizes: [1000, 2000, 3000, 4000]}",
        "layers: {count: 48, params_each: 1000000}",
    );
    let plan = Plan::build(&load_text(&path, &text));
    let queues = &held(&plan).queues;
    assert_eq!(queues.len(), 6);
    for pair in queues.windows(2) {
        assert!(pair[0].mark_bytes <= pair[1].mark_bytes, "{:?}", pair);
        assert!(pair[0].limit_bytes <= pair[1].limit_bytes, "{:?}", pair);
    }
    let (front, back) = (&queues[0], &queues[5]);
    assert!(front.mark_bytes < back.mark_bytes && front.limit_bytes < back.limit_bytes);

    // VGG16: the back classes carry most traffic and are the most sensitive.
    let lab = Plan::build(&load("inventory/lab.yaml"));
    for p in &lab.thresholds {
        let (front, back) = (p.queues.first().unwrap(), p.queues.last().unwrap());
        assert!(front.mark_bytes < back.mark_bytes, "{front:?} vs {back:?}");
        assert!(
            front.limit_bytes < back.limit_bytes,
            "{front:?} vs {back:?}"
        );
    }
}

#[test]
fn sensitivities_move_thresholds_the_expected_way() {
    let base = Plan::build(&small_with(""));
    // 1 MiB cannot hold thresholds within the transport's bound: the tolerances decide.
    assert!(!held(&base).within_bound);
    let q = |plan: &Plan, i: usize| held(plan).queues[i].clone();
    let last = held(&base).queues.len() - 1;
    let within = |plan: &Plan| {
        held(plan)
            .queues
            .iter()
            .all(|q| q.loss_not_ect <= q.tolerance_not_ect && q.loss_ect <= q.tolerance_ect)
    };

    // Back layers less tolerant of loss: the back queue drops Not-ECT frames later.
    let strict_back = Plan::build(&small_with("  model: {tolerance: {back_layers: 0.0003}}\n"));
    assert!(q(&strict_back, last).mark_bytes > q(&base, last).mark_bytes);
    assert!(within(&strict_back));
    // Front layers more tolerant: the front queues step no later than before.
    let lax_front = Plan::build(&small_with("  model: {tolerance: {front_layers: 0.3}}\n"));
    assert!(q(&lax_front, 1).mark_bytes <= q(&base, 1).mark_bytes);
    // Large (ECT) gradients ten times less tolerant: still met, by the limits.
    let strict_large = Plan::build(&small_with(
        "  model: {tolerance: {large_gradients: 0.0004}}\n",
    ));
    assert!(within(&strict_large));
    // Small (Not-ECT) gradients more tolerant: steps (where they drop) come earlier.
    let lax_small = Plan::build(&small_with(
        "  model: {tolerance: {small_gradients: 0.6}}\n",
    ));
    assert!((0..=last).all(|i| q(&lax_small, i).mark_bytes <= q(&base, i).mark_bytes));
    assert!((0..=last).any(|i| q(&lax_small, i).mark_bytes < q(&base, i).mark_bytes));
}

#[test]
fn the_labs_thresholds_keep_within_what_the_transport_leaves_unrecovered() {
    let plan = Plan::build(&load("inventory/lab.yaml"));
    // A ring of four hosts at p = 0.01: each of its six messages may lose a sixth of it.
    let bound = 0.01 / 6.0;
    assert!((plan.model.message_bound - bound).abs() < 1e-12);
    for p in &plan.thresholds {
        assert!(p.within_bound, "{p:?}");
        for q in &p.queues {
            assert!(q.loss_not_ect <= bound && q.loss_ect <= bound, "{q:?}");
            // Far below what training tolerates: without the bound the front queues
            // would be planned to lose more.
            assert!(q.tolerance_not_ect > 10.0 * bound, "{q:?}");
        }
    }
}

/// A buffer too small for the floors (one burst per queue) is a problem of the plan,
/// named with the switch and where its buffer is set; so is a predicted loss over its
/// tolerance, unless the inventory accepts it.
#[test]
fn an_over_committed_buffer_or_a_loss_over_tolerance_is_a_problem() {
    let path = fixture("tests/inventories/valid/small.yaml");
    let tiny = std::fs::read_to_string(&path)
        .unwrap()
        .replace("buffer_bytes: 1048576", "buffer_bytes: 32768");
    let inv = load_text(&path, &tiny);
    let problems = Plan::build(&inv).problems(&inv).to_string();
    assert!(problems.contains("the thresholds need"), "{problems}");
    assert!(
        problems.contains("but the buffer holds 32768 B"),
        "{problems}"
    );
    assert!(
        problems.contains("predicted loss of Not-ECT frames"),
        "{problems}"
    );
    assert!(
        problems.contains("small.yaml:22:19: "),
        "points at buffer_bytes: {problems}"
    );
    let accepted = load_text(
        &path,
        &format!("{tiny}  model: {{accept_over_tolerance: true}}\n"),
    );
    let problems = Plan::build(&accepted).problems(&accepted).to_string();
    assert!(problems.contains("the thresholds need"), "{problems}");
    assert!(!problems.contains("predicted loss"), "{problems}");
    // A buffer that holds the floors and every tolerance has no problem.
    let inv = load("tests/inventories/valid/small.yaml");
    assert!(Plan::build(&inv).problems(&inv).is_empty());
}

#[test]
fn a_scarce_buffer_goes_to_the_more_sensitive_queue() {
    let path = fixture("tests/inventories/valid/small.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    // The floors (one burst per queue, C·RTT/7 on the lowest) and 150,000 B to share.
    let roomy = Plan::build(&load_text(&path, &text));
    let p = held(&roomy);
    let floors = p.burst_bytes * p.queues.len() as u64 + p.mark_floor_bytes;
    let buffer = floors + 150_000;
    let scarce = text.replace("buffer_bytes: 1048576", &format!("buffer_bytes: {buffer}"));
    let plan_for = |extra: &str| Plan::build(&load_text(&path, &format!("{scarce}{extra}")));
    let base = plan_for("");
    let strict_back = plan_for("  model: {tolerance: {back_layers: 0.0003}}\n");
    let (b, s) = (held(&base), held(&strict_back));
    assert!(b.used_bytes <= buffer && s.used_bytes <= buffer);
    let last = b.queues.len() - 1;
    assert!(s.queues[last].limit_bytes > b.queues[last].limit_bytes);
    // The buffer is fully contended, so the room came from the other queues.
    let others = |p: &ThresholdProfile| p.queues[..last].iter().map(|q| q.limit_bytes).sum::<u64>();
    assert!(others(s) < others(b), "{} !< {}", others(s), others(b));
}

/// Every predicted loss is within its tolerance when the plan has no problem, and a
/// pinned queue keeps what was pinned.
#[test]
fn predictions_meet_the_tolerances_and_pins_hold() {
    let path = fixture("tests/inventories/valid/small.yaml");
    let text = std::fs::read_to_string(&path).unwrap()
        + "  priorities: 3\n  thresholds:\n    - {class: 0, mark_bytes: 20480, limit_bytes: 40960}\n";
    let inv = load_text(&path, &text);
    let plan = Plan::build(&inv);
    let q = &held(&plan).queues[0];
    assert!(q.pinned);
    assert_eq!((q.mark_bytes, q.limit_bytes), (20480, 40960));
    assert_eq!(
        (q.mark_set_by, q.limit_set_by),
        (SetBy::Pinned, SetBy::Pinned)
    );
    let lab = load("inventory/lab.yaml");
    let plan = Plan::build(&lab);
    assert!(plan.problems(&lab).is_empty());
    for q in plan.thresholds.iter().flat_map(|p| &p.queues) {
        assert!(q.loss_not_ect <= q.tolerance_not_ect, "{q:?}");
        assert!(q.loss_ect <= q.tolerance_ect, "{q:?}");
    }
}

// ---------------------------------------------------------------- the plan as data

#[test]
fn plan_round_trips_through_json() {
    let plan = Plan::build(&load("tests/inventories/valid/partial-mesh.yaml"));
    let json = serde_json::to_string(&plan).unwrap();
    let back: Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn planning_is_deterministic() {
    let inv = generated(2, 4, 4);
    let a = serde_json::to_string(&Plan::build(&inv)).unwrap();
    let b = serde_json::to_string(&Plan::build(&inv)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_single_rack_needs_no_spines_routes_or_path_addresses() {
    let plan = Plan::build(&load("tests/inventories/valid/one-rack.yaml"));
    assert!(plan.spines.is_empty());
    assert!(plan.switches.iter().all(|s| s.intent.routes.is_empty()));
    // Four queues: control, default and the rest (here one layer, so one class).
    assert_eq!(plan.qos.classes.len(), 1);
    assert_eq!(plan.qos.classes[0].tag.queue, 2);
    for h in &plan.hosts {
        assert!(
            h.path_addresses.is_empty() && h.routes.is_empty(),
            "{}",
            h.name
        );
    }
    let config = plan.transport_config(0);
    assert_eq!(config.peers[0].paths, vec![plan.hosts[1].nic.ip]);
    assert_eq!(config.peers[0].next_hop_mac, plan.hosts[1].nic.mac);
}
