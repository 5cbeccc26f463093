//! The checks of the fabric, its racks, switches and their ports, and hosts: names,
//! management logins, addresses, and one leaf per rack.

use super::*;

impl Validator<'_> {
    pub(super) fn fabric(&mut self, f: &raw::Fabric) -> Option<Fabric> {
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

    pub(super) fn racks(
        &mut self,
        items: &[Item<raw::Rack>],
        fabric: Option<&Fabric>,
    ) -> Vec<Named<Rack>> {
        let mut seen: HashMap<String, usize> = HashMap::with_capacity(items.len());
        let mut racks: Vec<Named<Rack>> = Vec::with_capacity(items.len());
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
    pub(super) fn unique_device_names(
        &mut self,
        switches: &[Item<raw::Switch>],
        hosts: &[Item<raw::Host>],
    ) {
        let mut lines: HashMap<&str, usize> = HashMap::with_capacity(switches.len() + hosts.len());
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

    pub(super) fn mgmt(
        &mut self,
        own: Option<&raw::Mgmt>,
        defaults: &raw::Mgmt,
        at: &Span,
    ) -> Option<Mgmt> {
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

    pub(super) fn key(&mut self, key: &Spanned<raw::Key>) -> Option<KeyRef> {
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

    pub(super) fn rack_index(&mut self, name: &Spanned<String>, racks: &Racks) -> Option<usize> {
        if let Some(&i) = racks.by_name.get(name.as_str()) {
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

    pub(super) fn switches(
        &mut self,
        items: &[Item<raw::Switch>],
        racks: &Racks,
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

    pub(super) fn ports(
        &mut self,
        switch: &Spanned<String>,
        vendor: Option<Vendor>,
        items: &[raw::Port],
        reserved: &Reserved,
    ) -> Option<Vec<Port>> {
        let mut names = HashSet::with_capacity(items.len());
        let mut ports = Vec::with_capacity(items.len());
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

    pub(super) fn hosts(
        &mut self,
        items: &[Item<raw::Host>],
        racks: &Racks,
        defaults: &raw::Mgmt,
    ) -> Vec<Named<Host>> {
        self.host_count(items);
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
                if let Some((_, rack)) = rack.map(|r| &racks.list[r])
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

    /// Refuses the first host over [`MAX_HOSTS`].
    pub(super) fn host_count(&mut self, items: &[Item<raw::Host>]) {
        if let Some(over) = items.get(MAX_HOSTS) {
            let msg = format!(
                "host {} is one too many: a job has at most {MAX_HOSTS} hosts (the transport \
                 carries ranks in 16 bits)",
                *over.value.name
            );
            self.error(over.value.name.span(), msg);
        }
    }

    pub(super) fn cores(
        &mut self,
        host: &Spanned<String>,
        items: &[Spanned<u64>],
    ) -> Option<Vec<u32>> {
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

    pub(super) fn unique_mgmt(&mut self, switches: &[Named<Switch>], hosts: &[Named<Host>]) {
        let mut seen: HashMap<(String, u16), (String, usize)> =
            HashMap::with_capacity(switches.len() + hosts.len());
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
    pub(super) fn rack_leaves(
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
}
