//! NVIDIA Onyx (MLNX-OS): one-line CLI commands, as `show running-config` prints them.
//!
//! What the plan owns, on each port of the plan (`Eth1/5` in the inventory is
//! `ethernet 1/5` on the CLI):
//! - `qos trust L3` (default L2);
//! - `qos map dscp D to switch-priority P` for all 64 DSCP values (default P = D/8, left
//!   out of the running config); the plan's traffic class serves as switch priority;
//! - `traffic-class T bind switch-priority T` for each of the plan's classes (default:
//!   each switch priority in the class of the same number);
//! - `traffic-class Q dcb ets strict` on owned queues (default: WRR, which
//!   `no traffic-class Q dcb ets` returns to);
//! - `traffic-class Q congestion-control both minimum-absolute S maximum-absolute S` on
//!   gradient queues, and none on the control queue: the step of MLT Appendix B, with
//!   `both` so that ECT packets are marked (ECN) and Not-ECT packets dropped (RED) at
//!   S_i. Onyx documents no rule that min be below max; the Spectrum ASIC takes
//!   min = max (the Linux mlxsw driver refuses only min > max);
//!
//! and the static routes of the default VRF inside the plan's scope, written
//! `ip route N /LEN NH`; a discard is `null0`.
//!
//! The queue limit L_i is not configured: Onyx documents no per-queue byte limit (its
//! traffic pools bound priorities switch-wide, as a percentage of memory), and a
//! traffic class has one congestion-control curve, which holds the step. The plan
//! re-solves its model for switches without queue limits
//! ([`crate::Vendor::no_queue_limit`]), and a plan that asks for a limit fails here.
//!
//! Units: congestion-control thresholds are in KB, taken as 1,024 bytes; the plan's
//! thresholds are whole KiB, so the conversion is exact. A running config may also
//! write `K` or `M` after the number. Port ranges such as `ethernet 1/1-1/32` apply to
//! each port of the plan inside them; a range is never expanded.

pub mod counters;
pub(crate) mod push;
mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::sync::Arc;

use ipnet::Ipv4Net;

use crate::items::{Change, Items};
use crate::text::{
    MAX_CLASS, MAX_DSCP, NextHop, NextHops, add_route, check_eight_queues, check_no_limit,
    default_class, expect_cli_text, number_list, parse_error, planned_routes, unexpressible,
};
use crate::{Driver, Error, SwitchIntent};
use mlt_common::redact::shown;

pub struct Onyx;

const KB: u64 = 1024;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Trust(Port),
    DscpPriority(Port, u8),
    ClassBinding(Port, u8),
    Ets(Port, u8),
    Ecn(Port, u8),
    Route(Ipv4Net),
}

/// A port of the plan: ordered by its place in the plan (cheap to compare and copy
/// where a switch has hundreds of ports), shown by its name.
#[derive(Debug, Clone)]
pub struct Port {
    index: usize,
    name: Arc<str>,
}

impl PartialEq for Port {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}

impl Eq for Port {}

impl PartialOrd for Port {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Port {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.index.cmp(&other.index)
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// The plan's ports, numbered in its order.
fn plan_ports(intent: &SwitchIntent) -> impl Iterator<Item = Port> + '_ {
    intent
        .qos
        .ports
        .iter()
        .enumerate()
        .map(|(index, name)| Port {
            index,
            name: name.as_str().into(),
        })
}

/// How a traffic class is scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ets {
    Strict,
    Wrr(u32),
    /// Nothing configured: Onyx's default WRR weights.
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Trust(String),
    Number(u8),
    Priorities(BTreeSet<u8>),
    Ets(Ets),
    /// Control type (`ecn`, `red`, `both`) and absolute thresholds in KB.
    Ecn {
        control: String,
        min_kb: u64,
        max_kb: u64,
    },
    /// A curve in percent of the queue's buffer, as the switch wrote it.
    RelativeEcn(String),
    Route(NextHops),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Trust(p) => write!(f, "{p} qos trust"),
            Key::DscpPriority(p, d) => write!(f, "{p} DSCP {d} switch-priority"),
            Key::ClassBinding(p, t) => write!(f, "{p} traffic-class {t} switch-priorities"),
            Key::Ets(p, q) => write!(f, "{p} traffic-class {q} ETS"),
            Key::Ecn(p, q) => write!(f, "{p} traffic-class {q} congestion-control"),
            Key::Route(prefix) => write!(f, "route {prefix}"),
        }
    }
}

impl Value {
    fn hops(&self) -> Option<&NextHops> {
        match self {
            Value::Route(hops) => Some(hops),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Trust(t) => f.write_str(t),
            Value::Number(n) => write!(f, "{n}"),
            Value::Priorities(set) => {
                let list: Vec<String> = set.iter().map(ToString::to_string).collect();
                f.write_str(&list.join(","))
            }
            Value::Ets(Ets::Strict) => f.write_str("strict"),
            Value::Ets(Ets::Wrr(weight)) => write!(f, "wrr {weight}"),
            Value::Ets(Ets::Default) => f.write_str("wrr (default)"),
            Value::Ecn {
                control,
                min_kb,
                max_kb,
            } => write!(f, "{control} {min_kb} KB to {max_kb} KB"),
            Value::RelativeEcn(curve) => f.write_str(curve),
            Value::Route(hops) => write!(f, "{hops}"),
        }
    }
}

impl Driver for Onyx {
    fn maps_dscp(key: &Key) -> bool {
        matches!(
            key,
            Key::Trust(_) | Key::DscpPriority(..) | Key::ClassBinding(..)
        )
    }

    type Key = Key;
    type Value = Value;

    fn expected(intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        check_eight_queues(intent)?;
        let qos = &intent.qos;
        // Pushed, then sorted once: far cheaper than a tree insert each (a 512-port
        // spine has tens of thousands of items). Every key is pushed once; were one pushed
        // twice, collecting keeps one of them, not an error.
        let mut items = Vec::new();
        for port in plan_ports(intent) {
            cli_port(&port.name).ok_or_else(|| {
                unexpressible(
                    intent,
                    format!("port {port}"),
                    "Onyx ports are named EthS/P (or EthS/P/N)",
                )
            })?;
            let p = || port.clone();
            items.push((Key::Trust(p()), Value::Trust("L3".into())));
            for (dscp, &class) in qos.dscp_to_tc.iter().enumerate() {
                items.push((Key::DscpPriority(p(), dscp as u8), Value::Number(class)));
            }
            for (class, &queue) in qos.tc_to_queue.iter().enumerate() {
                // Switch priority = traffic class, bound to the class's queue.
                let priorities = Value::Priorities([class as u8].into());
                items.push((Key::ClassBinding(p(), queue), priorities));
            }
            for q in &qos.queues {
                items.push((Key::Ets(p(), q.queue), Value::Ets(Ets::Strict)));
                if let Some(ecn) = q.ecn {
                    check_no_limit(intent, q.queue, &ecn)?;
                    let kb = |bytes: u64| {
                        if bytes.is_multiple_of(KB) {
                            Ok(bytes / KB)
                        } else {
                            let item = format!("queue {} ECN threshold {bytes} bytes", q.queue);
                            Err(unexpressible(
                                intent,
                                item,
                                "Onyx sets thresholds in whole KB",
                            ))
                        }
                    };
                    let step = kb(ecn.mark_bytes)?;
                    let value = Value::Ecn {
                        control: "both".into(),
                        min_kb: step,
                        max_kb: step,
                    };
                    items.push((Key::Ecn(p(), q.queue), value));
                }
            }
        }
        for (prefix, hops) in planned_routes(intent) {
            items.push((Key::Route(prefix), Value::Route(hops)));
        }
        Ok(items.into_iter().collect())
    }

    fn parse(running: &str, intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        expect_cli_text(intent, running, "`show running-config` text")?;
        let qos = &intent.qos;
        // By (slot path, last number): a range is a lookup, never an expansion.
        let owned: BTreeMap<(String, u32), Port> = plan_ports(intent)
            .filter_map(|p| {
                let cli = cli_port(&p.name)?;
                let (slot, number) = cli.rsplit_once('/')?;
                Some(((slot.to_string(), number.parse().ok()?), p))
            })
            .collect();
        let queues: BTreeSet<u8> = qos.queues.iter().map(|q| q.queue).collect();
        let classes = qos.tc_to_queue.len() as u8;
        // Start from Onyx's defaults, then apply what the running config says.
        let mut items = Items::new();
        for port in owned.values() {
            let p = || port.clone();
            items.insert(Key::Trust(p()), Value::Trust("L2".into()));
            for dscp in 0..64u8 {
                items.insert(
                    Key::DscpPriority(p(), dscp),
                    Value::Number(default_class(dscp)),
                );
            }
            for class in 0..classes.max(queues.iter().max().map_or(0, |q| q + 1)) {
                items.insert(
                    Key::ClassBinding(p(), class),
                    Value::Priorities([class].into()),
                );
            }
            for &q in &queues {
                items.insert(Key::Ets(p(), q), Value::Ets(Ets::Default));
            }
        }
        let mut routes: Items<Key, NextHops> = Items::new();
        for (index, raw) in running.lines().enumerate() {
            let line = raw.trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            let fail = |message: String| parse_error(intent, index + 1, message);
            match words.as_slice() {
                ["interface", "ethernet", spec, rest @ ..] => {
                    let (slot, numbers) = port_range(spec).map_err(fail)?;
                    let first = (slot.to_string(), *numbers.start());
                    let last = (slot.to_string(), *numbers.end());
                    for port in owned.range(first..=last).map(|(_, port)| port) {
                        interface_line(&mut items, port, rest, &queues).map_err(fail)?;
                    }
                }
                ["ip", "route", rest @ ..] => {
                    if let Some((prefix, hop)) = route_words(rest)
                        && intent.owns_route(&prefix)
                    {
                        add_route(&mut routes, Key::Route(prefix), hop);
                    }
                }
                _ => {}
            }
        }
        items.extend(routes.into_iter().map(|(k, hops)| (k, Value::Route(hops))));
        // The binding of classes the plan does not use is not its business.
        items.retain(
            |k, _| !matches!(k, Key::ClassBinding(_, c) if *c >= classes && !queues.contains(c)),
        );
        Ok(items)
    }

    fn layout(
        intent: &SwitchIntent,
        changes: &[Change<Key, Value>],
        full: bool,
    ) -> Result<String, Error> {
        render::layout(intent, changes, full)
    }
}

/// Applies one `interface ethernet … REST` line to a port of the plan; an error when a
/// statement the plan owns is malformed.
fn interface_line(
    items: &mut Items<Key, Value>,
    port: &Port,
    rest: &[&str],
    queues: &BTreeSet<u8>,
) -> Result<(), String> {
    let p = || port.clone();
    let small = |text: &str, max: u8| match text.parse::<u8>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("{} is not a number from 0 to {max}", shown(text))),
    };
    let class = |text: &str| small(text, MAX_CLASS as u8);
    match rest {
        ["qos", "trust", trust] => {
            items.insert(Key::Trust(p()), Value::Trust(trust.to_string()));
        }
        [
            "qos",
            "map",
            "dscp",
            list,
            "to",
            "switch-priority",
            priority,
        ] => {
            let priority = class(priority)?;
            for dscp in number_list(list, MAX_DSCP)? {
                items.insert(Key::DscpPriority(p(), dscp as u8), Value::Number(priority));
            }
        }
        [
            "traffic-class",
            tc,
            "bind",
            "switch-priority",
            priorities @ ..,
        ] => {
            let mut set = BTreeSet::new();
            for word in priorities {
                set.extend(number_list(word, MAX_CLASS)?.into_iter().map(|v| v as u8));
            }
            // A priority belongs to one class: binding it here unbinds it from the
            // port's other classes.
            let port_classes = Key::ClassBinding(p(), 0)..=Key::ClassBinding(p(), u8::MAX);
            for (_, value) in items.range_mut(port_classes) {
                if let Value::Priorities(other) = value {
                    other.retain(|sp| !set.contains(sp));
                }
            }
            items.insert(Key::ClassBinding(p(), class(tc)?), Value::Priorities(set));
        }
        ["traffic-class", queue, "dcb", "ets", mode @ ..] => {
            let queue = class(queue)?;
            let ets = match mode {
                ["strict", ..] => Ets::Strict,
                ["wrr", weight, ..] => Ets::Wrr(
                    weight
                        .parse()
                        .map_err(|_| format!("{} is not a WRR weight", shown(weight)))?,
                ),
                _ => return Err("expected `dcb ets strict` or `dcb ets wrr WEIGHT`".into()),
            };
            if queues.contains(&queue) {
                items.insert(Key::Ets(p(), queue), Value::Ets(ets));
            }
        }
        [
            "traffic-class",
            queue,
            "congestion-control",
            control,
            "minimum-absolute",
            min,
            "maximum-absolute",
            max,
        ] => {
            let queue = class(queue)?;
            if queues.contains(&queue) {
                let kb = |text: &str| {
                    kilobytes(text).ok_or_else(|| format!("{} is not a size in KB", shown(text)))
                };
                let value = Value::Ecn {
                    control: control.to_string(),
                    min_kb: kb(min)?,
                    max_kb: kb(max)?,
                };
                items.insert(Key::Ecn(p(), queue), value);
            }
        }
        // A curve relative to the queue's buffer share: no byte count, so it differs
        // from any the plan sets (and an absolute curve replaces it).
        [
            "traffic-class",
            queue,
            "congestion-control",
            control,
            "minimum-relative",
            min,
            "maximum-relative",
            max,
        ] => {
            let queue = class(queue)?;
            if queues.contains(&queue) {
                let value = Value::RelativeEcn(format!("{control} {min}% to {max}%"));
                items.insert(Key::Ecn(p(), queue), value);
            }
        }
        _ => {}
    }
    Ok(())
}

/// `150`, `150K` or `2M`, in KB.
fn kilobytes(text: &str) -> Option<u64> {
    let upper = text.to_ascii_uppercase();
    let (number, scale) = match upper.strip_suffix('M') {
        Some(n) => (n, 1024),
        None => (upper.strip_suffix('K').unwrap_or(&upper), 1),
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

/// `[vrf NAME] PREFIX [/LEN | MASK] NEXT-HOP …` in the default VRF.
fn route_words(words: &[&str]) -> Option<(Ipv4Net, NextHop)> {
    let words = match words {
        ["vrf", "default", rest @ ..] => rest,
        ["vrf", ..] => return None,
        rest => rest,
    };
    let (prefix, rest) = match words {
        [cidr, rest @ ..] if cidr.contains('/') => (cidr.parse().ok()?, rest),
        [network, len, rest @ ..] if len.starts_with('/') => (
            Ipv4Net::new(network.parse().ok()?, len[1..].parse().ok()?).ok()?,
            rest,
        ),
        [network, mask, rest @ ..] => {
            let mask: Ipv4Addr = mask.parse().ok()?;
            (
                Ipv4Net::with_netmask(network.parse().ok()?, mask).ok()?,
                rest,
            )
        }
        _ => return None,
    };
    let hop = rest.first()?;
    Some((prefix, NextHop::parse(hop, &["null0"])))
}

/// `Eth1/5` → `1/5` (what follows `ethernet` on the CLI).
fn cli_port(port: &str) -> Option<String> {
    let rest = port
        .strip_prefix("Eth")
        .or_else(|| port.strip_prefix("eth"))?;
    let parts: Vec<&str> = rest.split('/').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (numeric && (2..=3).contains(&parts.len())).then(|| rest.to_string())
}

/// `1/5`, `1/1-1/32` or `1/1/1-1/1/4` → the slot path (`1`, `1/1`) and the numbers
/// named in it. Checked against the plan's ports, never expanded: a range in a running
/// configuration may claim any width without costing memory.
fn port_range(spec: &str) -> Result<(&str, RangeInclusive<u32>), String> {
    let malformed = || {
        format!(
            "{} is not a port or port range (such as 1/1-1/32)",
            shown(spec)
        )
    };
    let (first, last) = spec.split_once('-').unwrap_or((spec, spec));
    let (slot, start) = first.rsplit_once('/').ok_or_else(malformed)?;
    let (last_slot, end) = last.rsplit_once('/').ok_or_else(malformed)?;
    match (start.parse::<u32>(), end.parse::<u32>()) {
        (Ok(start), Ok(end)) if slot == last_slot && start <= end => Ok((slot, start..=end)),
        _ => Err(malformed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_and_ranges() {
        assert_eq!(cli_port("Eth1/5").as_deref(), Some("1/5"));
        assert_eq!(cli_port("Eth1/5/2").as_deref(), Some("1/5/2"));
        assert_eq!(cli_port("swp1"), None);
        assert_eq!(cli_port("Eth1"), None);
        assert_eq!(port_range("1/1-1/3").unwrap(), ("1", 1..=3));
        assert_eq!(port_range("1/7").unwrap(), ("1", 7..=7));
        assert_eq!(port_range("1/1/1-1/1/4").unwrap(), ("1/1", 1..=4));
        assert!(port_range("1/1-2/3").is_err());
        assert!(port_range("1/3-1/1").is_err());
        assert_eq!(port_range("1/1-1/4294967295").unwrap(), ("1", 1..=u32::MAX));
    }

    #[test]
    fn route_forms() {
        let (p, hop) = route_words(&["10.2.2.0", "/24", "10.3.3.3"]).unwrap();
        assert_eq!(
            (p.to_string(), hop.to_string()),
            ("10.2.2.0/24".into(), "10.3.3.3".into())
        );
        let (p, _) = route_words(&["vrf", "default", "0.0.0.0/0", "10.102.255.13"]).unwrap();
        assert_eq!(p.to_string(), "0.0.0.0/0");
        let (p, hop) = route_words(&["10.0.0.0", "255.0.0.0", "null0"]).unwrap();
        assert_eq!(
            (p.to_string(), hop),
            ("10.0.0.0/8".into(), NextHop::Discard)
        );
        assert_eq!(route_words(&["vrf", "mgmt", "0.0.0.0/0", "1.1.1.1"]), None);
    }

    #[test]
    fn kilobyte_forms() {
        assert_eq!(kilobytes("150"), Some(150));
        assert_eq!(kilobytes("150K"), Some(150));
        assert_eq!(kilobytes("2M"), Some(2048));
        assert_eq!(kilobytes("x"), None);
    }
}
