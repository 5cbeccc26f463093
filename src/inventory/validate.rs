//! Semantic checks: raw sections in, a typed [`Inventory`] out, every problem reported.
//!
//! Each check reports at the place the admin has to edit. When an entry failed to
//! deserialize, references to its name are not reported again, so one mistake yields
//! one message.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Display;
use std::hash::Hash;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use endhost_core::config::{
    Collective, Datapath, DatapathKind, DpdkDriver, Importance, Ports, RateControl, Timeouts,
};
use endhost_core::{MacAddr, PciAddr};
use ipnet::Ipv4Net;
use marked_yaml::{Span, Spanned};
use switch_config::Vendor;

use super::addressing::PathLayout;
use super::layers::parse_layer_file;
use super::raw::{Item, Sections};
use super::{
    Downlink, Fabric, Host, Inventory, KeyRef, Layer, Mgmt, Nic, PinnedThreshold, Port, Rack, Role,
    Switch, ThresholdModel, Tolerance, Training, Uplink, gradient_classes, raw,
};
use crate::diag::{Reporter, start_of};
use mlt_common::names::check_name;
use mlt_common::redact::shown;
use mlt_common::units::Rate;
use switch_config::ports::check_port_name;

mod training;

/// The largest switch buffer (1 TiB; real ones hold tens of MB): thresholds and their
/// sums stay far from overflow.
const MAX_BUFFER_BYTES: u64 = 1 << 40;
/// Largest queue count a switch may declare (and so the most priorities a plan uses).
const MAX_QUEUES: u64 = 16;
/// When the inventory does not say, use at most this many queues (the usual 8).
const DEFAULT_PRIORITIES: u8 = 8;
/// Control traffic gets EF, gradient classes 32, 33, … unless the inventory says.
const DEFAULT_CONTROL_DSCP: u8 = 46;
const DEFAULT_GRADIENT_DSCP_BASE: u8 = 32;

pub fn validate(path: &Path, s: Sections, report: &mut Reporter) -> Option<Inventory> {
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut v = Validator {
        report,
        broken: s.broken_names,
        failed: s.malformed,
        base_dir,
        ips: HashMap::new(),
        macs: HashMap::new(),
    };
    let fabric = s.fabric.as_ref().and_then(|f| v.fabric(f));
    let pool_span = s.fabric.as_ref().map(|f| *f.path_pool.span());
    let default_mgmt = s.defaults.mgmt.unwrap_or_default();
    let racks = v.racks(&s.racks, fabric.as_ref());
    let reserved = Reserved::new(
        racks
            .iter()
            .map(|(_, r)| (r.subnet, format!("the subnet of rack {}", r.name)))
            .chain(
                fabric
                    .as_ref()
                    .map(|f| (f.path_pool, "the path pool".to_string())),
            )
            .collect(),
    );
    v.unique_device_names(&s.switches, &s.hosts);
    let switches = v.switches(&s.switches, &racks, &default_mgmt, &reserved);
    let hosts = v.hosts(&s.hosts, &racks, &default_mgmt);
    v.unique_mgmt(&switches, &hosts);
    let rack_leaves = v.rack_leaves(&racks, &switches);
    let (uplinks, downlinks) = v.links(&s.links, &switches, &hosts);
    v.every_host_linked(&hosts, &downlinks, &racks, &switches);
    v.racks_reach_each_other(&racks, &rack_leaves, &switches, &hosts, &uplinks);
    if let (Some(fabric), Some(span)) = (&fabric, pool_span) {
        v.path_pool_fits(fabric, &span, racks.len(), &switches, &hosts);
    }
    let training = s.training.as_ref().and_then(|t| v.training(t, &switches));

    // Assemble only when everything above held; indices between sections are then valid.
    if v.report.has_errors() {
        return None;
    }
    let racks = racks
        .into_iter()
        .zip(rack_leaves)
        .map(|((_, rack), leaf)| leaf.map(|leaf| Rack { leaf, ..rack }))
        .collect::<Option<Vec<_>>>()?;
    Some(Inventory {
        path: path.to_path_buf(),
        fabric: fabric?,
        racks,
        switches: switches.into_iter().map(|(_, s)| s).collect(),
        hosts: hosts.into_iter().map(|(_, h)| h).collect(),
        uplinks,
        downlinks,
        training: training?,
    })
}

/// An entry that validated, with the span of its name for later messages.
type Named<T> = (Span, T);

struct Validator<'r> {
    report: &'r mut Reporter,
    /// Names whose entries failed; references to them are not reported again.
    broken: HashSet<String>,
    /// Kinds of entries of which at least one failed; checks over all entries of such a
    /// kind would only report consequences, so they are skipped.
    failed: HashSet<&'static str>,
    base_dir: PathBuf,
    /// Every address owned by something, with its owner and line.
    ips: HashMap<Ipv4Addr, (String, usize)>,
    macs: HashMap<MacAddr, (String, usize)>,
}

/// What a `node:port` link end names.
#[derive(Clone, Copy)]
enum Device {
    Switch(usize),
    Host(usize),
}

impl Validator<'_> {
    fn error(&mut self, span: &Span, message: impl Into<String>) {
        self.report.error(span, message);
    }

    /// Records that the entry named `name` is unusable.
    fn fail(&mut self, kind: &'static str, name: &str) {
        self.failed.insert(kind);
        self.broken.insert(name.to_string());
    }

    /// True when some entry of one of `kinds` failed, so a check over all of them would
    /// only report consequences of that failure.
    fn any_failed(&self, kinds: &[&str]) -> bool {
        kinds.iter().any(|k| self.failed.contains(k))
    }

    fn parse<T: FromStr>(&mut self, text: &Spanned<String>) -> Option<T>
    where
        T::Err: Display,
    {
        match text.parse::<T>() {
            Ok(value) => Some(value),
            Err(e) => {
                self.error(text.span(), e.to_string());
                None
            }
        }
    }

    fn ipv4(&mut self, text: &Spanned<String>) -> Option<Ipv4Addr> {
        match text.parse::<Ipv4Addr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.error(text.span(), format!("`{}` is not an IPv4 address", **text));
                None
            }
        }
    }

    /// A prefix written without host bits, such as a subnet or a pool.
    fn network(&mut self, text: &Spanned<String>) -> Option<Ipv4Net> {
        let Ok(net) = text.parse::<Ipv4Net>() else {
            self.error(
                text.span(),
                format!("`{}` is not an IPv4 prefix (such as 10.1.1.0/24)", **text),
            );
            return None;
        };
        if net.trunc() != net {
            self.error(
                text.span(),
                format!(
                    "`{}` has host bits set; did you mean {}?",
                    **text,
                    net.trunc()
                ),
            );
            return None;
        }
        Some(net)
    }

    fn int<T: TryFrom<u64>>(
        &mut self,
        value: &Spanned<u64>,
        field: &str,
        range: RangeInclusive<u64>,
    ) -> Option<T> {
        if range.contains(value) {
            T::try_from(**value).ok()
        } else {
            let (lo, hi) = (range.start(), range.end());
            self.error(
                value.span(),
                format!("`{field}` must be between {lo} and {hi}"),
            );
            None
        }
    }

    fn int_or<T: TryFrom<u64>>(
        &mut self,
        value: &Option<Spanned<u64>>,
        field: &str,
        range: RangeInclusive<u64>,
        default: T,
    ) -> Option<T> {
        match value {
            Some(v) => self.int(v, field, range),
            None => Some(default),
        }
    }

    fn float_or(
        &mut self,
        value: &Option<Spanned<f64>>,
        field: &str,
        ok: fn(f64) -> bool,
        expectation: &str,
        default: f64,
    ) -> Option<f64> {
        match value {
            Some(v) if ok(**v) => Some(**v),
            Some(v) => {
                self.error(v.span(), format!("`{field}` must be {expectation}"));
                None
            }
            None => Some(default),
        }
    }

    /// Claims `key` for `owner`; a second claim is reported where it is made.
    fn claim<K: Hash + Eq + Copy + Display>(
        &mut self,
        key: K,
        owner: &str,
        span: &Span,
        what: &str,
        table: fn(&mut Self) -> &mut HashMap<K, (String, usize)>,
    ) {
        let line = start_of(span).line();
        match table(self).get(&key) {
            Some((first, first_line)) => {
                let message =
                    format!("{what} {key} is already used by {first} (line {first_line})");
                self.error(span, message);
            }
            None => {
                table(self).insert(key, (owner.to_string(), line));
            }
        }
    }

    fn claim_ip(&mut self, ip: Ipv4Addr, owner: &str, span: &Span) {
        self.claim(ip, owner, span, "IP address", |v| &mut v.ips);
    }

    fn claim_mac(&mut self, mac: MacAddr, owner: &str, span: &Span) {
        if mac.is_multicast() {
            self.error(span, format!("MAC address {mac} is a multicast address"));
        }
        self.claim(mac, owner, span, "MAC address", |v| &mut v.macs);
    }

    fn fabric(&mut self, f: &raw::Fabric) -> Option<Fabric> {
        if let Err(rule) = check_name(&f.name) {
            let msg = format!("fabric name {} {rule}", shown(&f.name));
            self.error(f.name.span(), msg);
        }
        let path_pool = self.network(&f.path_pool);
        let mtu = self.int_or(&f.mtu, "fabric.mtu", 576..=9216, 1500u16);
        Some(Fabric {
            name: f.name.to_string(),
            path_pool: path_pool?,
            mtu: mtu?,
        })
    }

    fn racks(&mut self, items: &[Item<raw::Rack>], fabric: Option<&Fabric>) -> Vec<Named<Rack>> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut racks: Vec<Named<Rack>> = Vec::new();
        for item in items {
            let r = &item.value;
            if let Some(line) = seen.get(r.name.as_str()) {
                let msg = format!("rack name `{}` is already used (line {line})", *r.name);
                self.error(r.name.span(), msg);
                continue;
            }
            seen.insert(r.name.to_string(), start_of(r.name.span()).line());
            if let Err(rule) = check_name(&r.name) {
                let msg = format!("rack name {} {rule}", shown(&r.name));
                self.error(r.name.span(), msg);
                self.fail("rack", &r.name);
                continue;
            }
            let owner = format!("the gateway of rack {}", *r.name);
            let subnet = self.network(&r.subnet);
            let gateway_ip = self.ipv4(&r.gateway.ip);
            let gateway_mac = self.parse::<MacAddr>(&r.gateway.mac);
            if let Some(mac) = gateway_mac {
                self.claim_mac(mac, &owner, r.gateway.mac.span());
            }
            if let Some(ip) = gateway_ip {
                self.claim_ip(ip, &owner, r.gateway.ip.span());
            }
            let (Some(subnet), Some(gateway_ip), Some(gateway_mac)) =
                (subnet, gateway_ip, gateway_mac)
            else {
                self.fail("rack", &r.name);
                continue;
            };
            if !is_host_address(subnet, gateway_ip) {
                let msg = format!("gateway {gateway_ip} is not a host address of {subnet}");
                self.error(r.gateway.ip.span(), msg);
            }
            if let Some(pool) = fabric.map(|f| f.path_pool)
                && overlaps(subnet, pool)
            {
                let msg = format!("subnet {subnet} overlaps the path pool {pool}");
                self.error(r.subnet.span(), msg);
            }
            if let Some((_, other)) = racks.iter().find(|(_, o)| overlaps(o.subnet, subnet)) {
                let msg = format!(
                    "subnet {subnet} overlaps {} of rack {}",
                    other.subnet, other.name
                );
                self.error(r.subnet.span(), msg);
            }
            racks.push((
                *r.name.span(),
                Rack {
                    name: r.name.to_string(),
                    subnet,
                    gateway_ip,
                    gateway_mac,
                    // Set once leaves are known (`rack_leaves`), when the inventory is assembled.
                    leaf: usize::MAX,
                },
            ));
        }
        racks
    }

    /// Names of switches and hosts share one namespace, since links name either.
    fn unique_device_names(&mut self, switches: &[Item<raw::Switch>], hosts: &[Item<raw::Host>]) {
        let mut lines: HashMap<&str, usize> = HashMap::new();
        let entries = switches
            .iter()
            .map(|s| (&s.value.name, "switch"))
            .chain(hosts.iter().map(|h| (&h.value.name, "host")));
        for (name, kind) in entries {
            if let Err(rule) = check_name(name) {
                let msg = format!("{kind} name {} {rule}", shown(name));
                self.error(name.span(), msg);
                continue;
            }
            match lines.get(name.as_str()) {
                Some(line) => {
                    let msg = format!("name `{}` is already used (line {line})", **name);
                    self.error(name.span(), msg);
                }
                None => {
                    lines.insert(name.as_str(), start_of(name.span()).line());
                }
            }
        }
    }

    fn mgmt(&mut self, own: Option<&raw::Mgmt>, defaults: &raw::Mgmt, at: &Span) -> Option<Mgmt> {
        let own = own.cloned().unwrap_or_default();
        let Some(address) = own.address else {
            self.error(at, "missing required field `mgmt.address`");
            return None;
        };
        if !is_mgmt_address(&address) {
            let msg = format!(
                "{} is not a management address (an IPv4 or IPv6 address, or a host name)",
                shown(&address)
            );
            self.error(address.span(), msg);
        }
        let port = own.port.or(defaults.port.clone());
        let port = self.int_or(&port, "mgmt.port", 1..=65535, 22u16);
        let user = own.user.or(defaults.user.clone());
        let key = own.key.or(defaults.key.clone());
        let (Some(user), Some(key)) = (user, key) else {
            // A malformed `defaults` section was reported; its absence explains this.
            if !self.any_failed(&["defaults"]) {
                self.error(
                    at,
                    "missing `mgmt.user` or `mgmt.key` (give them here or in defaults.mgmt)",
                );
            }
            return None;
        };
        if !is_user_name(&user) {
            let msg = format!(
                "{} is not a user name (up to 32 letters, digits, `_`, `.` or `-`, not starting with `-` or `.`)",
                shown(&user)
            );
            self.error(user.span(), msg);
        }
        let key = self.key(&key);
        Some(Mgmt {
            address: address.to_string(),
            port: port?,
            user: user.to_string(),
            key: key?,
        })
    }

    fn key(&mut self, key: &Spanned<raw::Key>) -> Option<KeyRef> {
        let agent = key.agent.as_ref().filter(|a| ***a);
        let given = [key.file.is_some(), agent.is_some(), key.env.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            self.error(
                key.span(),
                "`key` must be exactly one of {file: PATH}, {agent: true} or {env: VAR}",
            );
            return None;
        }
        for (var, field) in [
            (&key.env, "key.env"),
            (&key.passphrase_env, "passphrase_env"),
        ] {
            // Never quoted back: a key or passphrase pasted here would be printed.
            if let Some(var) = var.as_ref().filter(|v| !is_env_name(v)) {
                let msg = format!(
                    "`{field}` must name an environment variable (letters, digits and `_`), \
                     not hold the secret itself"
                );
                self.error(var.span(), msg);
            }
        }
        if let (Some(p), None) = (&key.passphrase_env, &key.file) {
            self.error(p.span(), "`passphrase_env` only applies to a key `file`");
        }
        Some(if let Some(file) = &key.file {
            KeyRef::File {
                path: PathBuf::from(file.as_str()),
                passphrase_env: key.passphrase_env.as_ref().map(|p| p.to_string()),
            }
        } else if let Some(env) = &key.env {
            KeyRef::Env {
                var: env.to_string(),
            }
        } else {
            KeyRef::Agent
        })
    }

    fn rack_index(&mut self, name: &Spanned<String>, racks: &[Named<Rack>]) -> Option<usize> {
        if let Some(i) = racks.iter().position(|(_, r)| r.name == **name) {
            return Some(i);
        }
        if !self.broken.contains(name.as_str()) {
            self.error(
                name.span(),
                format!("rack `{}` is not defined in `racks`", **name),
            );
        }
        None
    }

    fn switches(
        &mut self,
        items: &[Item<raw::Switch>],
        racks: &[Named<Rack>],
        defaults: &raw::Mgmt,
        reserved: &Reserved,
    ) -> Vec<Named<Switch>> {
        let mut switches = Vec::new();
        for item in items {
            let s = &item.value;
            let role = match s.role.as_str() {
                "leaf" => Some(Role::Leaf),
                "spine" => Some(Role::Spine),
                other => {
                    let msg = format!("unknown role `{other}` (expected leaf or spine)");
                    self.error(s.role.span(), msg);
                    None
                }
            };
            let vendor = self.parse::<Vendor>(&s.vendor);
            let rack = match (role, &s.rack) {
                (Some(Role::Leaf), Some(name)) => self.rack_index(name, racks).map(Some),
                (Some(Role::Leaf), None) => {
                    self.error(s.name.span(), format!("leaf {} needs a `rack`", *s.name));
                    None
                }
                (Some(Role::Spine), Some(name)) => {
                    let msg = "spines serve every rack; remove `rack` from this spine";
                    self.error(name.span(), msg);
                    None
                }
                (_, _) => Some(None),
            };
            let mgmt = self.mgmt(s.mgmt.as_ref(), defaults, s.name.span());
            let buffer_bytes = self.int(&s.buffer_bytes, "buffer_bytes", 1..=MAX_BUFFER_BYTES);
            let queues = self.int(&s.queues, "queues", 1..=MAX_QUEUES);
            let ports = self.ports(&s.name, vendor, &s.ports, reserved);
            let (Some(role), Some(vendor), Some(rack), Some(mgmt), Some(buffer_bytes)) =
                (role, vendor, rack, mgmt, buffer_bytes)
            else {
                self.fail("switch", &s.name);
                continue;
            };
            let (Some(queues), Some(ports)) = (queues, ports) else {
                self.fail("switch", &s.name);
                continue;
            };
            switches.push((
                *s.name.span(),
                Switch {
                    name: s.name.to_string(),
                    role,
                    rack,
                    vendor,
                    mgmt,
                    buffer_bytes,
                    buffer_at: {
                        let at = crate::diag::start_of(s.buffer_bytes.span());
                        (at.line(), at.column())
                    },
                    queues,
                    ports,
                },
            ));
        }
        switches
    }

    fn ports(
        &mut self,
        switch: &Spanned<String>,
        vendor: Option<Vendor>,
        items: &[raw::Port],
        reserved: &Reserved,
    ) -> Option<Vec<Port>> {
        let mut names = HashSet::new();
        let mut ports = Vec::new();
        let mut ok = true;
        for p in items {
            if let Some(Err(rule)) = vendor.map(|v| check_port_name(v, &p.name)) {
                let msg = format!("port {} on {} {rule}", shown(&p.name), **switch);
                self.error(p.name.span(), msg);
                ok = false;
                continue;
            }
            if !names.insert(p.name.as_str()) {
                let msg = format!("port `{}` is defined twice on {}", *p.name, **switch);
                self.error(p.name.span(), msg);
                ok = false;
            }
            let speed = match p.speed.parse::<Rate>() {
                Ok(rate) => Some(rate.mbps()),
                Err(e) => {
                    self.error(p.speed.span(), e.to_string());
                    None
                }
            };
            let ip = match &p.ip {
                Some(text) => match text.parse::<Ipv4Net>() {
                    Ok(net) if is_host_address(net.trunc(), net.addr()) => {
                        let owner = format!("{}:{}", **switch, *p.name);
                        self.claim_ip(net.addr(), &owner, text.span());
                        if let Some((other, what)) = reserved.overlapping(net.trunc()) {
                            let msg = format!("{} overlaps {what} ({other})", net.trunc());
                            self.error(text.span(), msg);
                        }
                        Some(Some(net))
                    }
                    Ok(net) => {
                        let msg =
                            format!("{} is not a host address of {}", net.addr(), net.trunc());
                        self.error(text.span(), msg);
                        None
                    }
                    Err(_) => {
                        let msg = format!(
                            "`{}` is not an interface address with prefix length (such as 172.16.0.1/31)",
                            **text
                        );
                        self.error(text.span(), msg);
                        None
                    }
                },
                None => Some(None),
            };
            match (speed, ip) {
                (Some(speed_mbps), Some(ip)) => ports.push(Port {
                    name: p.name.to_string(),
                    speed_mbps,
                    ip,
                }),
                _ => ok = false,
            }
        }
        ok.then_some(ports)
    }

    fn hosts(
        &mut self,
        items: &[Item<raw::Host>],
        racks: &[Named<Rack>],
        defaults: &raw::Mgmt,
    ) -> Vec<Named<Host>> {
        let mut hosts = Vec::new();
        for item in items {
            let h = &item.value;
            let owner = format!("host {}", *h.name);
            let rack = self.rack_index(&h.rack, racks);
            let mgmt = self.mgmt(h.mgmt.as_ref(), defaults, h.name.span());
            let pci = self.parse::<PciAddr>(&h.nic.pci);
            let mac = self.parse::<MacAddr>(&h.nic.mac);
            if let Some(mac) = mac {
                self.claim_mac(mac, &owner, h.nic.mac.span());
            }
            let ip = self.ipv4(&h.nic.ip);
            if let Some(ip) = ip {
                self.claim_ip(ip, &owner, h.nic.ip.span());
                if let Some((_, rack)) = rack.map(|r| &racks[r])
                    && !is_host_address(rack.subnet, ip)
                {
                    let msg = format!(
                        "{ip} is not a host address of rack {}'s subnet {}",
                        rack.name, rack.subnet
                    );
                    self.error(h.nic.ip.span(), msg);
                }
            }
            let nic_ok = match mlt_common::names::check_ifname(&h.nic.name) {
                Ok(()) => true,
                Err(rule) => {
                    let msg = format!("NIC name {} {rule}", shown(&h.nic.name));
                    self.error(h.nic.name.span(), msg);
                    false
                }
            };
            let cores = self.cores(&h.name, &h.cores);
            let (Some(rack), Some(mgmt), Some(pci), Some(mac), Some(ip), Some(cores), true) =
                (rack, mgmt, pci, mac, ip, cores, nic_ok)
            else {
                self.fail("host", &h.name);
                continue;
            };
            hosts.push((
                *h.name.span(),
                Host {
                    name: h.name.to_string(),
                    rack,
                    mgmt,
                    nic: Nic {
                        name: h.nic.name.to_string(),
                        pci,
                        mac,
                        ip,
                    },
                    cores,
                },
            ));
        }
        hosts
    }

    fn cores(&mut self, host: &Spanned<String>, items: &[Spanned<u64>]) -> Option<Vec<u32>> {
        if items.is_empty() {
            let msg = format!("host {} needs at least one core in `cores`", **host);
            self.error(host.span(), msg);
            return None;
        }
        let mut seen = HashSet::new();
        let mut cores = Vec::with_capacity(items.len());
        for c in items {
            let core: u32 = self.int(c, "cores", 0..=u64::from(u32::MAX))?;
            if !seen.insert(core) {
                self.error(c.span(), format!("core {core} is listed twice"));
                return None;
            }
            cores.push(core);
        }
        Some(cores)
    }

    fn unique_mgmt(&mut self, switches: &[Named<Switch>], hosts: &[Named<Host>]) {
        let mut seen: HashMap<(String, u16), (String, usize)> = HashMap::new();
        let devices = switches
            .iter()
            .map(|(span, s)| (span, &s.name, &s.mgmt))
            .chain(hosts.iter().map(|(span, h)| (span, &h.name, &h.mgmt)));
        for (span, name, mgmt) in devices {
            let key = (mgmt.address.clone(), mgmt.port);
            match seen.get(&key) {
                Some((first, line)) => {
                    let msg = format!(
                        "management address {}:{} is already used by {first} (line {line})",
                        mgmt.address, mgmt.port
                    );
                    self.error(span, msg);
                }
                None => {
                    seen.insert(key, (name.clone(), start_of(span).line()));
                }
            }
        }
    }

    /// The one leaf of each rack.
    fn rack_leaves(
        &mut self,
        racks: &[Named<Rack>],
        switches: &[Named<Switch>],
    ) -> Vec<Option<usize>> {
        let mut leaves: Vec<Option<usize>> = vec![None; racks.len()];
        for (i, (span, s)) in switches.iter().enumerate() {
            let Some(rack) = s.rack else { continue };
            match leaves[rack] {
                Some(first) => {
                    let msg = format!(
                        "rack {} already has leaf {}; mltctl supports one leaf per rack",
                        racks[rack].1.name, switches[first].1.name
                    );
                    self.error(span, msg);
                }
                None => leaves[rack] = Some(i),
            }
        }
        if !self.any_failed(&["switch"]) {
            for (r, (span, rack)) in racks.iter().enumerate() {
                if leaves[r].is_none() {
                    let msg = format!(
                        "rack {} has no leaf switch (give one leaf `rack: {}`)",
                        rack.name, rack.name
                    );
                    self.error(span, msg);
                }
            }
        }
        leaves
    }

    fn links(
        &mut self,
        items: &[Item<raw::Link>],
        switches: &[Named<Switch>],
        hosts: &[Named<Host>],
    ) -> (Vec<Uplink>, Vec<Downlink>) {
        let mut names: HashMap<&str, Device> = HashMap::new();
        for (i, (_, h)) in hosts.iter().enumerate().rev() {
            names.insert(&h.name, Device::Host(i));
        }
        for (i, (_, s)) in switches.iter().enumerate().rev() {
            names.insert(&s.name, Device::Switch(i));
        }
        let mut uplinks = Vec::new();
        let mut downlinks = Vec::new();
        let mut used: HashMap<String, usize> = HashMap::new();
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
    fn link_end(
        &mut self,
        end: &Spanned<String>,
        names: &HashMap<&str, Device>,
        switches: &[Named<Switch>],
        hosts: &[Named<Host>],
        used: &mut HashMap<String, usize>,
    ) -> Option<(Device, usize)> {
        let Some((node, port)) = end.split_once(':') else {
            let msg = format!("link end `{}` must be written node:port", **end);
            self.error(end.span(), msg);
            return None;
        };
        let Some(device) = names.get(node).copied() else {
            if !self.broken.contains(node) {
                let msg = format!("link end `{}`: no switch or host is named `{node}`", **end);
                self.error(end.span(), msg);
            }
            return None;
        };
        let resolved = match device {
            Device::Switch(s) => {
                let sw = &switches[s].1;
                match sw.ports.iter().position(|p| p.name == port) {
                    Some(p) => (Device::Switch(s), p),
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
        if let Some(first) = used.insert(end.to_string(), line) {
            let msg = format!("`{}` is already linked (line {first})", **end);
            self.error(end.span(), msg);
            return None;
        }
        Some(resolved)
    }

    fn uplink(
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

    fn every_host_linked(
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
    fn racks_reach_each_other(
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

    fn path_pool_fits(
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
struct Reserved(Vec<(Ipv4Net, String)>);

impl Reserved {
    fn new(mut prefixes: Vec<(Ipv4Net, String)>) -> Self {
        prefixes.sort_by_key(|(net, _)| net.network());
        Reserved(prefixes)
    }

    /// The reserved prefix `net` overlaps. Reserved prefixes do not overlap each other
    /// (that is checked, and reported, elsewhere), so only the last one starting at or
    /// before `net`'s end can.
    fn overlapping(&self, net: Ipv4Net) -> Option<&(Ipv4Net, String)> {
        let candidates = self
            .0
            .partition_point(|(r, _)| r.network() <= net.broadcast());
        let last = &self.0[candidates.checked_sub(1)?];
        overlaps(last.0, net).then_some(last)
    }
}

fn overlaps(a: Ipv4Net, b: Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// True when `ip` lies in `subnet` and is neither its network nor broadcast address.
fn is_host_address(subnet: Ipv4Net, ip: Ipv4Addr) -> bool {
    subnet.contains(&ip)
        && (subnet.prefix_len() >= 31 || (ip != subnet.network() && ip != subnet.broadcast()))
}

/// An IPv4 or IPv6 address, or a DNS host name (RFC 1123 labels).
fn is_mgmt_address(address: &str) -> bool {
    if address.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    (1..=253).contains(&address.len())
        && address.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A POSIX-portable user name, as `useradd` takes it.
fn is_user_name(user: &str) -> bool {
    (1..=32).contains(&user.len())
        && !user.starts_with(['-', '.'])
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
