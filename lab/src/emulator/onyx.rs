//! NVIDIA Onyx (MLNX-OS), as its manuals describe it.
//!
//! - Configuration is one line per command; `show running-config` prints what is set
//!   in `##` sections, leaving out settings at their defaults (trust L2, DSCP D in
//!   priority D/8, priority P in class P). A command given for a port range applies to
//!   each port; the print groups lines by command, then folds the ports that share one
//!   into ranges (`interface ethernet 1/1-1/2 qos trust L3`), one DSCP per map line.
//!   Positive commands are indented three spaces, `no …` commands are flush left.
//!   Static routes print with their VRF and the prefix in CIDR form
//!   (`ip route vrf default 10.1.1.0/24 172.16.0.4`), whichever form they were given in.
//! - `enable`, then `configure terminal`; each command takes effect at once — there is
//!   no candidate and no commit timer. `configuration write` saves.
//! - QoS per port: `qos trust L2|L3|both`, `qos map dscp D… to switch-priority P`
//!   (one priority per DSCP), `traffic-class T bind switch-priority P` (one class per
//!   priority), `traffic-class T dcb ets strict|wrr W`, `traffic-class T
//!   congestion-control ecn|red|both minimum-absolute KB maximum-absolute KB`, and
//!   `no traffic-class T congestion-control`; `no traffic-class T dcb ets` returns to
//!   the default scheduling. Static routes: `ip route [vrf V] N /L NH`.
//! - Counters: `show interfaces ethernet S/P congestion-control | json-print` and
//!   `show interfaces ethernet counters tc N` (see `counters.rs`).
//! - Unknown commands print `% Unrecognized command`.

use std::collections::BTreeMap;

use ipnet::Ipv4Net;

use super::{Device, Reply, numbers};

const RUNNING: &str = "running-config";

/// A port, ordered by slot and number.
type Port = (u32, u32);

/// One configuration line, ordered as the running-config prints it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// A line mltctl does not own, by its position in the original configuration.
    Other(usize),
    Trust(Port),
    Dscp(Port, u32),
    Bind(Port, u32),
    Ets(Port, u32),
    Congestion(Port, u32),
    Route(String, Ipv4Net, String),
}

struct Config {
    lines: BTreeMap<Key, String>,
}

pub fn install(device: &Device, initial: &str) {
    let mut config = Config {
        lines: BTreeMap::new(),
    };
    for (index, raw) in initial.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if config.apply(line).is_err() {
            config.lines.insert(Key::Other(index), line.to_string());
        }
    }
    device.write(RUNNING, &config.render());
    device.write("startup-config", &config.render());
}

pub fn running(device: &Device) -> String {
    device.read(RUNNING).unwrap_or_default()
}

pub fn cli(device: &Device, script: &str) -> Reply {
    let faults = device.faults();
    let mut reply = Reply::default();
    let mut config = Config::parse(&running(device));
    let mut configuring = false;
    let mut changed = false;
    for raw in script.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let result = match (configuring, line) {
            (_, "enable") => Ok(String::new()),
            (_, "show running-config") => Ok(config.render()),
            (_, show)
                if show.starts_with("show interfaces ethernet ")
                    && show.ends_with(" congestion-control | json-print") =>
            {
                let number = show["show interfaces ethernet ".len()..]
                    .trim_end_matches(" congestion-control | json-print");
                super::counters::onyx(device, number)
                    .ok_or_else(|| format!("Unrecognized command \"{line}\""))
            }
            (_, show) if show.starts_with("show interfaces ethernet counters tc ") => show
                ["show interfaces ethernet counters tc ".len()..]
                .parse::<usize>()
                .ok()
                .filter(|tc| *tc < 8)
                .map(|tc| super::counters::onyx_class(device, tc))
                .ok_or_else(|| format!("Unrecognized command \"{line}\"")),
            (false, "configure terminal") => {
                configuring = true;
                Ok(String::new())
            }
            (true, "exit") => {
                configuring = false;
                Ok(String::new())
            }
            (true, "configuration write") => {
                device.write("startup-config", &config.render());
                Ok(String::new())
            }
            (true, _) if faults.rejects(line) => Err(format!("Unrecognized command \"{line}\"")),
            (true, _) if faults.ignores(line) => Ok(String::new()),
            (true, _) => {
                let applied = config.apply(line);
                changed = true;
                // Each accepted command is part of the running configuration at once.
                device.write(RUNNING, &config.render());
                applied.map(|()| String::new())
            }
            (false, _) => Err(format!("Unrecognized command \"{line}\"")),
        };
        match result {
            Ok(text) => reply.stdout.push_str(&text),
            Err(message) => reply.stdout.push_str(&format!("% {message}\n")),
        }
    }
    // Onyx has no commit: configuring is committing.
    reply.drop_connection = changed && faults.drop_after_commit;
    reply
}

impl Config {
    /// Reads back a rendered running-config (every line is in canonical form).
    fn parse(text: &str) -> Config {
        let mut config = Config {
            lines: BTreeMap::new(),
        };
        let mut others = 0;
        for raw in text.lines() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if config.apply(line).is_err() {
                config.lines.insert(Key::Other(others), line.to_string());
            }
            others += 1;
        }
        config
    }

    fn render(&self) -> String {
        let print = |line: &str| {
            if line.starts_with("no ") {
                format!("{line}\n")
            } else {
                format!("   {line}\n")
            }
        };
        let section = |title: &str, lines: &[String]| {
            let body: String = lines.iter().map(|l| print(l)).collect();
            format!("##\n## {title}\n##\n{body}\n")
        };
        let mut others = Vec::new();
        let mut routes = Vec::new();
        // (command kind, its number, what follows the port) → ports, in order.
        let mut commands: BTreeMap<(u8, u32, String), Vec<Port>> = BTreeMap::new();
        for (key, line) in &self.lines {
            let (rank, number, port) = match key {
                Key::Other(_) => {
                    others.push(line.clone());
                    continue;
                }
                Key::Route(..) => {
                    routes.push(line.clone());
                    continue;
                }
                Key::Trust(port) => (0, 0, port),
                Key::Dscp(port, d) => (1, *d, port),
                Key::Bind(port, p) => (2, *p, port),
                Key::Ets(port, c) => (3, *c, port),
                Key::Congestion(port, c) => (4, *c, port),
            };
            let command = line.splitn(4, ' ').nth(3).unwrap_or_default().to_string();
            commands
                .entry((rank, number, command))
                .or_default()
                .push(*port);
        }
        let qos: Vec<String> = commands
            .into_iter()
            .flat_map(|((_, _, command), ports)| {
                folded(&ports)
                    .into_iter()
                    .map(move |ports| format!("interface ethernet {ports} {command}"))
            })
            .collect();
        let mut out = String::from("##\n## Running database \"initial\"\n##\n\n");
        out.push_str(&others.iter().map(|l| print(l)).collect::<String>());
        out.push('\n');
        out.push_str(&section("QoS switch configuration", &qos));
        out.push_str(&section("Other IP configuration", &routes));
        out
    }

    fn apply(&mut self, line: &str) -> Result<(), String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let invalid = || format!("Unrecognized command \"{line}\"");
        match words.as_slice() {
            ["interface", "ethernet", ports, rest @ ..] => {
                let ports = port_range(ports).ok_or_else(invalid)?;
                for port in ports {
                    self.apply_port(port, rest).ok_or_else(invalid)?;
                }
                Ok(())
            }
            ["ip", "route", rest @ ..] => {
                let (vrf, prefix, hop) = route(rest).ok_or_else(invalid)?;
                let text = format!("ip route vrf {vrf} {prefix} {hop}");
                self.lines.insert(Key::Route(vrf, prefix, hop), text);
                Ok(())
            }
            ["no", "ip", "route", rest @ ..] => {
                let (vrf, prefix, hop) = route(rest).ok_or_else(invalid)?;
                self.lines.remove(&Key::Route(vrf, prefix, hop));
                Ok(())
            }
            _ => Err(invalid()),
        }
    }

    /// Sets a line, or removes it when the setting is back at its default.
    fn set(&mut self, key: Key, line: String, default: bool) {
        if default {
            self.lines.remove(&key);
        } else {
            self.lines.insert(key, line);
        }
    }

    fn apply_port(&mut self, port: Port, words: &[&str]) -> Option<()> {
        let name = format!("interface ethernet {}/{}", port.0, port.1);
        match words {
            ["qos", "trust", trust @ ("L2" | "L3" | "both" | "port")] => {
                let line = format!("{name} qos trust {trust}");
                self.set(Key::Trust(port), line, *trust == "L2");
            }
            [
                "qos",
                "map",
                "dscp",
                dscps,
                "to",
                "switch-priority",
                priority,
            ] => {
                let priority: u32 = priority.parse().ok().filter(|p| *p < 8)?;
                for d in numbers(dscps)? {
                    if d > 63 {
                        return None;
                    }
                    let line = format!("{name} qos map dscp {d} to switch-priority {priority}");
                    self.set(Key::Dscp(port, d), line, priority == d / 8);
                }
            }
            [
                "traffic-class",
                class,
                "bind",
                "switch-priority",
                priorities,
            ] => {
                let class: u32 = class.parse().ok().filter(|c| *c < 8)?;
                for p in numbers(priorities)? {
                    if p > 7 {
                        return None;
                    }
                    let line = format!("{name} traffic-class {class} bind switch-priority {p}");
                    self.set(Key::Bind(port, p), line, class == p);
                }
            }
            ["traffic-class", class, "dcb", "ets", rest @ ..] => {
                let class: u32 = class.parse().ok().filter(|c| *c < 8)?;
                let ets = match rest {
                    ["strict"] => "strict".to_string(),
                    ["wrr", weight] => format!("wrr {}", weight.parse::<u32>().ok()?),
                    _ => return None,
                };
                self.lines.insert(
                    Key::Ets(port, class),
                    format!("{name} traffic-class {class} dcb ets {ets}"),
                );
            }
            [
                "traffic-class",
                class,
                "congestion-control",
                kind @ ("ecn" | "red" | "both"),
                "minimum-absolute",
                min,
                "maximum-absolute",
                max,
            ] => {
                let class: u32 = class.parse().ok().filter(|c| *c < 8)?;
                let (min, max): (u64, u64) = (min.parse().ok()?, max.parse().ok()?);
                if min == 0 || min > max {
                    return None;
                }
                self.lines.insert(
                    Key::Congestion(port, class),
                    format!(
                        "{name} traffic-class {class} congestion-control {kind} minimum-absolute {min} maximum-absolute {max}"
                    ),
                );
            }
            ["no", "traffic-class", class, "dcb", "ets"] => {
                let class: u32 = class.parse().ok()?;
                self.lines.remove(&Key::Ets(port, class));
            }
            ["no", "traffic-class", class, "congestion-control"] => {
                let class: u32 = class.parse().ok()?;
                self.lines.remove(&Key::Congestion(port, class));
            }
            _ => return None,
        }
        Some(())
    }
}

/// Ports as Onyx prints them: consecutive ports of one slot as one range (`1/1-1/2`).
fn folded(ports: &[Port]) -> Vec<String> {
    let mut sorted = ports.to_vec();
    sorted.sort_unstable();
    let mut runs: Vec<(Port, Port)> = Vec::new();
    for port in sorted {
        match runs.last_mut() {
            Some((_, last)) if last.0 == port.0 && last.1 + 1 == port.1 => *last = port,
            _ => runs.push((port, port)),
        }
    }
    runs.into_iter()
        .map(|(a, b)| {
            if a == b {
                format!("{}/{}", a.0, a.1)
            } else {
                format!("{}/{}-{}/{}", a.0, a.1, b.0, b.1)
            }
        })
        .collect()
}

/// `1/1`, `1/1-1/4`.
fn port_range(text: &str) -> Option<Vec<Port>> {
    let one = |p: &str| -> Option<Port> {
        let (slot, port) = p.split_once('/')?;
        Some((slot.parse().ok()?, port.parse().ok()?))
    };
    match text.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (one(a)?, one(b)?);
            (a.0 == b.0 && a.1 <= b.1).then(|| (a.1..=b.1).map(|p| (a.0, p)).collect())
        }
        None => Some(vec![one(text)?]),
    }
}

/// `[vrf V] N /L NH` or `[vrf V] N/L NH`.
fn route(words: &[&str]) -> Option<(String, Ipv4Net, String)> {
    let (vrf, words) = match words {
        ["vrf", vrf, tail @ ..] => (vrf.to_string(), tail),
        tail => ("default".to_string(), tail),
    };
    let (prefix, hop) = match words {
        [network, len, hop] if len.starts_with('/') => (format!("{network}{len}"), hop),
        [prefix, hop] => (prefix.to_string(), hop),
        _ => return None,
    };
    let prefix: Ipv4Net = prefix.parse().ok()?;
    let hop_ok = *hop == "null0" || hop.parse::<std::net::Ipv4Addr>().is_ok();
    hop_ok.then(|| (vrf, prefix.trunc(), hop.to_string()))
}

/// The queueing each port runs, by its inventory name (`Eth1/1`): with `qos trust L3`
/// or `both` DSCP → switch priority (default D/8), with `L2` or `port` every packet at
/// priority 0 (the lab's hosts do not tag); priority → traffic class (`bind`, default
/// the same number), the traffic class being the egress queue; `dcb ets strict`; and
/// `congestion-control` in KiB: `ecn` marks ECN-capable packets, `red` drops every
/// packet, `both` marks the ECN-capable and drops the others.
pub fn qos(device: &Device) -> crate::qos::SwitchQos {
    use crate::qos::{Curve, PortQos, SwitchQos};
    let config = Config::parse(&running(device));
    // Per port: trust, DSCP → priority, priority → class, and the queues.
    let mut trust: BTreeMap<Port, bool> = BTreeMap::new();
    let mut priority: BTreeMap<Port, [u8; 64]> = BTreeMap::new();
    let mut class: BTreeMap<Port, [u8; 8]> = BTreeMap::new();
    let mut qos = SwitchQos::default();
    let default_priority: [u8; 64] = std::array::from_fn(|d| d as u8 / 8);
    let default_class: [u8; 8] = std::array::from_fn(|p| p as u8);
    let name = |port: &Port| format!("Eth{}/{}", port.0, port.1);
    for (key, line) in &config.lines {
        let tail: Vec<&str> = line.split_whitespace().skip(3).collect();
        match (key, tail.as_slice()) {
            (Key::Trust(port), ["qos", "trust", t]) => {
                trust.insert(*port, matches!(*t, "L3" | "both"));
            }
            (Key::Dscp(port, d), [.., p]) => {
                if let (Some(slot), Ok(p)) = (
                    priority
                        .entry(*port)
                        .or_insert(default_priority)
                        .get_mut(*d as usize),
                    p.parse(),
                ) {
                    *slot = p;
                }
            }
            (Key::Bind(port, p), ["traffic-class", c, ..]) => {
                if let (Some(slot), Ok(c)) = (
                    class
                        .entry(*port)
                        .or_insert(default_class)
                        .get_mut(*p as usize),
                    c.parse(),
                ) {
                    *slot = c;
                }
            }
            (Key::Ets(port, c), ["traffic-class", _, "dcb", "ets", mode, ..]) => {
                let queue = qos
                    .ports
                    .entry(name(port))
                    .or_insert_with(|| PortQos::mapped([0; 64]))
                    .queues
                    .entry(*c as u8)
                    .or_default();
                queue.strict = *mode == "strict";
            }
            (
                Key::Congestion(port, c),
                [
                    ..,
                    "congestion-control",
                    kind,
                    "minimum-absolute",
                    min,
                    "maximum-absolute",
                    max,
                ],
            ) => {
                let (Some(min_bytes), Some(max_bytes)) = (
                    crate::qos::bytes(min, Some("kbytes")),
                    crate::qos::bytes(max, Some("kbytes")),
                ) else {
                    continue;
                };
                let curve = Some(Curve {
                    min_bytes,
                    max_bytes,
                    max_percent: 100,
                });
                let queue = qos
                    .ports
                    .entry(name(port))
                    .or_insert_with(|| PortQos::mapped([0; 64]))
                    .queues
                    .entry(*c as u8)
                    .or_default();
                match *kind {
                    "ecn" => queue.mark = curve,
                    "red" => queue.drop_all = curve,
                    _ => {
                        queue.mark = curve;
                        queue.drop_not_ect = curve;
                    }
                }
            }
            _ => {}
        }
    }
    let ports: std::collections::BTreeSet<Port> = trust
        .keys()
        .chain(priority.keys())
        .chain(class.keys())
        .copied()
        .collect();
    for port in ports {
        let by_dscp = trust.get(&port).copied().unwrap_or(false);
        let priority = priority.get(&port).copied().unwrap_or(default_priority);
        let class = class.get(&port).copied().unwrap_or(default_class);
        let map: [u8; 64] = std::array::from_fn(|d| {
            if by_dscp {
                class[priority[d] as usize & 7]
            } else {
                class[0]
            }
        });
        let entry = qos
            .ports
            .entry(name(&port))
            .or_insert_with(|| PortQos::mapped(map));
        entry.queue_of_dscp = map.to_vec();
    }
    qos
}
