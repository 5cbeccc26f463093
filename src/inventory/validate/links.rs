//! The checks of the links: their ends, uplinks between leaves and spines, every host
//! cabled, every rack reaching every other, and the path pool's room.

use super::*;

/// The devices by name and each switch's ports by name (the first of a name, as a
/// duplicate is reported elsewhere): a lookup per link end, not a search.
pub(super) struct Names<'a> {
    devices: HashMap<&'a str, Device>,
    ports: Vec<HashMap<&'a str, usize>>,
}

impl<'a> Names<'a> {
    fn of(switches: &'a [Named<Switch>], hosts: &'a [Named<Host>]) -> Names<'a> {
        let mut devices: HashMap<&str, Device> =
            HashMap::with_capacity(hosts.len() + switches.len());
        for (i, (_, h)) in hosts.iter().enumerate().rev() {
            devices.insert(&h.name, Device::Host(i));
        }
        for (i, (_, s)) in switches.iter().enumerate().rev() {
            devices.insert(&s.name, Device::Switch(i));
        }
        let ports = switches
            .iter()
            .map(|(_, s)| first_index(s.ports.iter().map(|p| p.name.as_str())))
            .collect();
        Names { devices, ports }
    }
}

impl Validator<'_> {
    pub(super) fn links(
        &mut self,
        items: &[Item<raw::Link>],
        switches: &[Named<Switch>],
        hosts: &[Named<Host>],
    ) -> (Vec<Uplink>, Vec<Downlink>) {
        let names = Names::of(switches, hosts);
        let mut uplinks = Vec::new();
        let mut downlinks = Vec::new();
        // Each end linked, by what it resolved to, and the line that linked it.
        let mut used: HashMap<(Device, usize), usize> = HashMap::with_capacity(2 * items.len());
        for item in items {
            let ends = &item.value;
            if ends.len() != 2 {
                self.error(
                    &item.span,
                    "a link must name exactly two ends: [node:port, node:port]",
                );
                self.failed.insert("link");
                continue;
            }
            let a = self.link_end(&ends[0], &names, switches, hosts, &mut used);
            let b = self.link_end(&ends[1], &names, switches, hosts, &mut used);
            let (Some(a), Some(b)) = (a, b) else {
                self.failed.insert("link");
                continue;
            };
            match (a, b) {
                ((Device::Switch(x), xp), (Device::Switch(y), yp)) => {
                    let (sx, sy) = (&switches[x].1, &switches[y].1);
                    let link = match (sx.role, sy.role) {
                        (Role::Leaf, Role::Spine) => (x, xp, y, yp),
                        (Role::Spine, Role::Leaf) => (y, yp, x, xp),
                        _ => {
                            let msg = format!(
                                "link {} – {} joins two {}s; links join a leaf to a spine or a host to its leaf",
                                sx.name, sy.name, sx.role
                            );
                            self.error(&item.span, msg);
                            self.failed.insert("link");
                            continue;
                        }
                    };
                    match self.uplink(link, switches, &item.span) {
                        Some(uplink) => uplinks.push(uplink),
                        None => {
                            self.failed.insert("link");
                        }
                    }
                }
                ((Device::Host(h), _), (Device::Switch(s), port))
                | ((Device::Switch(s), port), (Device::Host(h), _)) => {
                    let (host, switch) = (&hosts[h].1, &switches[s].1);
                    if switch.rack != Some(host.rack) {
                        let msg = format!(
                            "host {} is linked to {}, which is not the leaf of its rack",
                            host.name, switch.name
                        );
                        self.error(&item.span, msg);
                        self.failed.insert("link");
                        continue;
                    }
                    downlinks.push(Downlink {
                        host: h,
                        leaf: s,
                        leaf_port: port,
                    });
                }
                ((Device::Host(x), _), (Device::Host(y), _)) => {
                    let msg = format!(
                        "link {} – {} joins two hosts; hosts link to their rack's leaf",
                        hosts[x].1.name, hosts[y].1.name
                    );
                    self.error(&item.span, msg);
                    self.failed.insert("link");
                }
            }
        }
        (uplinks, downlinks)
    }

    /// Resolves one `node:port` end; `None` when it names nothing valid.
    pub(super) fn link_end(
        &mut self,
        end: &Spanned<String>,
        names: &Names,
        switches: &[Named<Switch>],
        hosts: &[Named<Host>],
        used: &mut HashMap<(Device, usize), usize>,
    ) -> Option<(Device, usize)> {
        let Some((node, port)) = end.split_once(':') else {
            let msg = format!("link end `{}` must be written node:port", **end);
            self.error(end.span(), msg);
            return None;
        };
        let Some(device) = names.devices.get(node).copied() else {
            if !self.broken.contains(node) {
                let msg = format!("link end `{}`: no switch or host is named `{node}`", **end);
                self.error(end.span(), msg);
            }
            return None;
        };
        let resolved = match device {
            Device::Switch(s) => {
                let sw = &switches[s].1;
                match names.ports[s].get(port) {
                    Some(&p) => (Device::Switch(s), p),
                    None => {
                        let defined: Vec<&str> = sw.ports.iter().map(|p| p.name.as_str()).collect();
                        let msg = format!(
                            "link end `{}`: switch {node} has no port `{port}` (its ports: {})",
                            **end,
                            defined.join(", ")
                        );
                        self.error(end.span(), msg);
                        return None;
                    }
                }
            }
            Device::Host(h) => {
                let nic = &hosts[h].1.nic.name;
                if nic != port {
                    let msg = format!(
                        "link end `{}`: host {node} has no NIC `{port}` (its data NIC is {nic})",
                        **end
                    );
                    self.error(end.span(), msg);
                    return None;
                }
                (Device::Host(h), 0)
            }
        };
        let line = start_of(end.span()).line();
        if let Some(first) = used.insert(resolved, line) {
            let msg = format!("`{}` is already linked (line {first})", **end);
            self.error(end.span(), msg);
            return None;
        }
        Some(resolved)
    }

    pub(super) fn uplink(
        &mut self,
        (leaf, leaf_port, spine, spine_port): (usize, usize, usize, usize),
        switches: &[Named<Switch>],
        at: &Span,
    ) -> Option<Uplink> {
        let lp = &switches[leaf].1.ports[leaf_port];
        let sp = &switches[spine].1.ports[spine_port];
        let (lname, sname) = (&switches[leaf].1.name, &switches[spine].1.name);
        match (lp.ip, sp.ip) {
            (Some(a), Some(b)) if a.trunc() == b.trunc() => Some(Uplink {
                leaf,
                leaf_port,
                spine,
                spine_port,
            }),
            (Some(a), Some(b)) => {
                let msg = format!(
                    "link {lname}:{} – {sname}:{}: addresses {a} and {b} are not in one subnet",
                    lp.name, sp.name
                );
                self.error(at, msg);
                None
            }
            _ => {
                let msg = format!(
                    "link {lname}:{} – {sname}:{}: both ports need an `ip` for static routing",
                    lp.name, sp.name
                );
                self.error(at, msg);
                None
            }
        }
    }

    pub(super) fn every_host_linked(
        &mut self,
        hosts: &[Named<Host>],
        downlinks: &[Downlink],
        racks: &[Named<Rack>],
        switches: &[Named<Switch>],
    ) {
        if self.any_failed(&["link", "switch"]) {
            return;
        }
        let mut linked = vec![false; hosts.len()];
        for d in downlinks {
            linked[d.host] = true;
        }
        for ((span, host), linked) in hosts.iter().zip(linked) {
            if linked {
                continue;
            }
            let leaf = switches
                .iter()
                .find(|(_, s)| s.rack == Some(host.rack))
                .map_or("its leaf".to_string(), |(_, s)| format!("leaf {}", s.name));
            let msg = format!(
                "host {} has no link to {leaf} of rack {}, so it cannot reach any other host",
                host.name, racks[host.rack].1.name
            );
            self.error(span, msg);
        }
    }

    /// Every two racks with hosts must share a spine, or their hosts cannot talk.
    pub(super) fn racks_reach_each_other(
        &mut self,
        racks: &[Named<Rack>],
        rack_leaves: &[Option<usize>],
        switches: &[Named<Switch>],
        hosts: &[Named<Host>],
        uplinks: &[Uplink],
    ) {
        let spines_of = |leaf: usize| -> BTreeSet<usize> {
            uplinks
                .iter()
                .filter(|u| u.leaf == leaf)
                .map(|u| u.spine)
                .collect()
        };
        let populated: Vec<(usize, usize, BTreeSet<usize>)> = (0..racks.len())
            .filter(|r| hosts.iter().any(|(_, h)| h.rack == *r))
            .filter_map(|r| rack_leaves[r].map(|leaf| (r, leaf, spines_of(leaf))))
            .collect();
        if populated.len() < 2 || self.any_failed(&["link", "switch"]) {
            return;
        }
        let names = |set: &BTreeSet<usize>| -> String {
            set.iter()
                .map(|s| switches[*s].1.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        for (r, leaf, spines) in &populated {
            if spines.is_empty() {
                let msg = format!(
                    "leaf {} has no link to a spine, so hosts in rack {} cannot reach other racks",
                    switches[*leaf].1.name, racks[*r].1.name
                );
                self.error(&switches[*leaf].0, msg);
            }
        }
        for (i, (r1, _, s1)) in populated.iter().enumerate() {
            for (r2, _, s2) in &populated[i + 1..] {
                if s1.is_empty() || s2.is_empty() || !s1.is_disjoint(s2) {
                    continue;
                }
                let (a, b) = (&racks[*r1].1.name, &racks[*r2].1.name);
                let msg = format!(
                    "racks {a} and {b} share no spine, so their hosts cannot reach each other ({a} uses {}; {b} uses {})",
                    names(s1),
                    names(s2)
                );
                self.error(&racks[*r2].0, msg);
            }
        }
    }

    pub(super) fn path_pool_fits(
        &mut self,
        fabric: &Fabric,
        at: &Span,
        racks: usize,
        switches: &[Named<Switch>],
        hosts: &[Named<Host>],
    ) {
        let spines = switches
            .iter()
            .filter(|(_, s)| s.role == Role::Spine)
            .count();
        let mut per_rack = vec![0usize; racks];
        for (_, h) in hosts {
            per_rack[h.rack] += 1;
        }
        let most = per_rack.iter().copied().max().unwrap_or(0);
        let layout = PathLayout::new(fabric.path_pool, racks, most);
        if layout.needed(spines) > layout.capacity() {
            let msg = format!(
                "path pool {} holds {} addresses but {spines} spine(s) x {racks} rack(s) of up to {most} host(s) need {}; use a /{} or larger",
                fabric.path_pool,
                layout.capacity(),
                layout.needed(spines),
                layout.largest_prefix_len(spines)
            );
            self.error(at, msg);
        }
    }
}

/// Prefixes that fabric port addresses must stay out of, sorted for lookup.
pub(super) struct Reserved(Vec<(Ipv4Net, String)>);

impl Reserved {
    pub(super) fn new(mut prefixes: Vec<(Ipv4Net, String)>) -> Self {
        prefixes.sort_by_key(|(net, _)| net.network());
        Reserved(prefixes)
    }

    /// The reserved prefix `net` overlaps. Reserved prefixes do not overlap each other
    /// (that is checked, and reported, elsewhere), so only the last one starting at or
    /// before `net`'s end can.
    pub(super) fn overlapping(&self, net: Ipv4Net) -> Option<&(Ipv4Net, String)> {
        let candidates = self
            .0
            .partition_point(|(r, _)| r.network() <= net.broadcast());
        let last = &self.0[candidates.checked_sub(1)?];
        overlaps(last.0, net).then_some(last)
    }
}
