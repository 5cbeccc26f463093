//! Static routes that make path addresses steer packets through a chosen spine.
//!
//! For each rack r and each spine s that r's leaf links to (see [`PathLayout`]):
//! - spine s routes block (s, r) and rack r's subnet to r's leaf;
//! - r's leaf routes spine s's whole part of the pool via s, each of its hosts' path
//!   addresses (/32) to that host, and discards the rest of its own blocks (which would
//!   otherwise bounce between leaf and spine);
//! - every leaf routes the other racks' subnets via the spines it shares with them,
//!   merged into as few prefixes as cover exactly those subnets (its own subnet may be
//!   merged in too: it is connected on the leaf, so the more specific route wins).

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use switch_config::{RouteKind, StaticRoute};

use crate::inventory::Inventory;
use crate::inventory::addressing::PathLayout;

/// The fabric's shape as routing sees it.
pub struct Topology {
    pub layout: PathLayout,
    /// Switch index of each spine, in spine order (the order of the inventory).
    pub spines: Vec<usize>,
    /// Spine numbers each rack's leaf has links to, ascending.
    pub rack_spines: Vec<Vec<usize>>,
    /// (leaf end, spine end) addresses of the links between each rack's leaf and each
    /// spine, indexed `[rack][spine]`; parallel links give several pairs.
    pub link_ends: Vec<Vec<Vec<(Ipv4Addr, Ipv4Addr)>>>,
    /// Hosts of each rack, in inventory order; a host's position is its slot.
    pub rack_hosts: Vec<Vec<usize>>,
    /// Slot of each host within its rack.
    pub host_slot: Vec<usize>,
    /// Per rack: the other racks' subnets, grouped by the spines shared with them and
    /// aggregated (see the module docs).
    pub remote_subnets: Vec<BTreeMap<Vec<usize>, Vec<Ipv4Net>>>,
}

impl Topology {
    pub fn new(inv: &Inventory) -> Self {
        let spines: Vec<usize> = inv.spines().collect();
        let mut rack_hosts = vec![Vec::new(); inv.racks.len()];
        let mut host_slot = vec![0; inv.hosts.len()];
        for (i, h) in inv.hosts.iter().enumerate() {
            host_slot[i] = rack_hosts[h.rack].len();
            rack_hosts[h.rack].push(i);
        }
        let mut spine_number = vec![usize::MAX; inv.switches.len()];
        for (n, &s) in spines.iter().enumerate() {
            spine_number[s] = n;
        }
        let mut link_ends = vec![vec![Vec::new(); spines.len()]; inv.racks.len()];
        for u in &inv.uplinks {
            let rack = inv.switches[u.leaf].rack.expect("leaves have racks");
            let addr = |s: usize, p: usize| {
                let ip = inv.switches[s].ports[p]
                    .ip
                    .expect("uplink ports have addresses");
                ip.addr()
            };
            link_ends[rack][spine_number[u.spine]]
                .push((addr(u.leaf, u.leaf_port), addr(u.spine, u.spine_port)));
        }
        let rack_spines: Vec<Vec<usize>> = link_ends
            .iter()
            .map(|per_spine| {
                (0..spines.len())
                    .filter(|&s| !per_spine[s].is_empty())
                    .collect()
            })
            .collect();
        let most = rack_hosts.iter().map(Vec::len).max().unwrap_or(0);
        let remote_subnets = remote_subnets(inv, &rack_spines);
        Topology {
            layout: PathLayout::new(inv.fabric.path_pool, inv.racks.len(), most),
            spines,
            rack_spines,
            link_ends,
            rack_hosts,
            host_slot,
            remote_subnets,
        }
    }

    /// Spines racks `a` and `b` both reach, ascending.
    pub fn shared_spines(&self, a: usize, b: usize) -> Vec<usize> {
        let other = &self.rack_spines[b];
        self.rack_spines[a]
            .iter()
            .copied()
            .filter(|s| other.contains(s))
            .collect()
    }

    /// Path addresses of host `host` in rack `rack`, with the spine each one steers through.
    pub fn path_addresses(&self, host: usize, rack: usize) -> Vec<(usize, Ipv4Addr)> {
        let slot = self.host_slot[host];
        self.rack_spines[rack]
            .iter()
            .map(|&s| (s, self.layout.address(s, rack, slot)))
            .collect()
    }
}

/// Static routes of every switch, indexed like [`Inventory::switches`].
pub fn switch_routes(inv: &Inventory, topo: &Topology) -> Vec<Vec<StaticRoute>> {
    let mut routes = vec![Vec::new(); inv.switches.len()];
    for (r, rack) in inv.racks.iter().enumerate() {
        let has_hosts = !topo.rack_hosts[r].is_empty();
        let to_leaf = |s: usize| topo.link_ends[r][s].iter().map(|(leaf, _)| *leaf).collect();
        let via_spine = |s: usize| topo.link_ends[r][s].iter().map(|(_, spine)| *spine);
        for &s in &topo.rack_spines[r] {
            let spine_routes = &mut routes[topo.spines[s]];
            spine_routes.push(route(rack.subnet, to_leaf(s), RouteKind::RackSubnets));
            if has_hosts {
                let block = topo.layout.block(s, r);
                spine_routes.push(route(block, to_leaf(s), RouteKind::PathBlock));
            }
        }
        let leaf_routes = &mut routes[rack.leaf];
        for &s in &topo.rack_spines[r] {
            let part = topo.layout.part(s);
            // With one rack, spine s's part is this rack's own block: its addresses are
            // this rack's hosts (routed below) or no one's (discarded below).
            if has_hosts && part == topo.layout.block(s, r) {
                continue;
            }
            leaf_routes.push(route(part, via_spine(s).collect(), RouteKind::PathBlock));
        }
        if has_hosts {
            for &s in &topo.rack_spines[r] {
                let block = topo.layout.block(s, r);
                leaf_routes.push(route(block, Vec::new(), RouteKind::Discard));
            }
            for &h in &topo.rack_hosts[r] {
                let host_ip = inv.hosts[h].nic.ip;
                for (_, addr) in topo.path_addresses(h, r) {
                    leaf_routes.push(route(addr.into(), vec![host_ip], RouteKind::HostPath));
                }
            }
        }
        for (shared, subnets) in &topo.remote_subnets[r] {
            let ecmp: Vec<Ipv4Addr> = shared.iter().flat_map(|&s| via_spine(s)).collect();
            for prefix in subnets {
                leaf_routes.push(route(*prefix, ecmp.clone(), RouteKind::RackSubnets));
            }
        }
    }
    routes
}

/// For each rack, the other racks' subnets grouped by the spines it shares with them,
/// each group aggregated. A rack's own subnet is merged into the group of racks that
/// reach all its spines, where that saves routes, but never routed on its own. The
/// groups depend only on which spines a rack reaches, so racks alike share the work.
fn remote_subnets(
    inv: &Inventory,
    rack_spines: &[Vec<usize>],
) -> Vec<BTreeMap<Vec<usize>, Vec<Ipv4Net>>> {
    let mut by_spine_set: HashMap<&[usize], BTreeMap<Vec<usize>, Vec<Ipv4Net>>> = HashMap::new();
    inv.racks
        .iter()
        .enumerate()
        .map(|(r, rack)| {
            let own = rack_spines[r].as_slice();
            let groups = by_spine_set.entry(own).or_insert_with(|| {
                let mut groups: BTreeMap<Vec<usize>, Vec<Ipv4Net>> = BTreeMap::new();
                for (other, spines) in inv.racks.iter().zip(rack_spines) {
                    let shared: Vec<usize> =
                        own.iter().copied().filter(|s| spines.contains(s)).collect();
                    if !shared.is_empty() {
                        groups.entry(shared).or_default().push(other.subnet);
                    }
                }
                for subnets in groups.values_mut() {
                    *subnets = Ipv4Net::aggregate(subnets);
                }
                groups
            });
            // What covers only the own subnet is the connected route's job.
            groups
                .iter()
                .map(|(shared, subnets)| {
                    let remote = subnets.iter().copied().filter(|p| !rack.subnet.contains(p));
                    (shared.clone(), remote.collect::<Vec<_>>())
                })
                .filter(|(_, subnets)| !subnets.is_empty())
                .collect()
        })
        .collect()
}

fn route(prefix: Ipv4Net, next_hops: Vec<Ipv4Addr>, kind: RouteKind) -> StaticRoute {
    StaticRoute {
        prefix,
        next_hops,
        kind,
    }
}
