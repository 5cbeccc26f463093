//! Arista EOS: CLI lines, as entered in a configure session.
//!
//! What the plan owns, and how it is written:
//! - `qos map dscp D… to traffic-class T` for all 64 DSCP values. EOS sends a DSCP it
//!   was not told about to class D/8 and leaves such mappings out of its running
//!   config, so a missing line means D/8.
//! - `qos map traffic-class T… to tx-queue Q` for the plan's classes (default Q = T).
//! - `qos profile MLT`: `qos trust dscp`, and per owned queue a `tx-queue Q` with
//!   `priority strict` and, on gradient queues, the two curves of MLT Appendix B:
//!   - the step at S_i: `random-detect ecn minimum-threshold S bytes maximum-threshold
//!     S bytes max-mark-probability 100`. Above S, ECT packets are marked and Not-ECT
//!     packets dropped (EOS drops them unless the switch-wide `qos random-detect ecn
//!     allow non-ect [chip-based]` is set, which the plan owns as absent: see below).
//!     min = max is a vertical cut-off,
//!     as OpenConfig's ECN test DP-1.3 configures it (EOS is not among the devices it
//!     marks as refusing equal thresholds);
//!   - the limit L_i: `random-detect drop minimum-threshold L bytes maximum-threshold L
//!     bytes drop-probability 100`, WRED that drops ECT and Not-ECT packets alike above
//!     L (AVD's `qos_profiles.tx_queues[].random_detect.drop`). EOS has no queue-length
//!     command for a tx-queue; this is its per-queue limit for every packet.
//!
//!   Strict priority is the EOS default, so a running config shows only `no
//!   priority`; a missing `max-mark-probability` means 100. Anything else in profile
//!   MLT's ECN or drop curves is stale; drop curves for one drop precedence
//!   (`random-detect drop drop-precedence P …`) are not the plan's.
//! - `service-profile MLT` on every port of the plan (and on no other port).
//! - On the plan's ports, no `tx-queue` setting of their own for the plan's queues:
//!   an interface's `tx-queue Q` block overrides the profile on that port, so a
//!   `no priority`, a `random-detect ecn` or a `random-detect drop` there is drift
//!   (removed with `priority strict`, `no random-detect ecn`, `no random-detect drop`). Settings of other queues or ports are not
//!   the plan's.
//! - `qos map dscp … to traffic-class T [drop-precedence D]` is read for its class;
//!   the drop precedence, and `qos map traffic-class … to dscp|cos …`, are not the
//!   plan's and are left alone.
//! - Static routes of the default VRF inside the plan's scope; a discard is `Null0`.
//! - No `qos random-detect ecn allow non-ect [chip-based]`: with it the switch enqueues
//!   Not-ECT packets above S instead of dropping them, so every queue's step stops
//!   holding back the unimportant packets the plan's model drops there (AVD's
//!   `qos.random_detect.ecn.allow_non_ect`). A running line is kept as written (a
//!   rollback restores it) and removed with `no qos random-detect ecn allow non-ect`.
//!
//! Units: thresholds are written in bytes, exactly (EOS accepts 1 to 256,000,000). A
//! running config in kbytes or mbytes is read as 1,024 or 1,048,576 bytes; segments
//! and milliseconds depend on the platform, so they are kept as written and differ.

pub mod counters;
pub(crate) mod push;
mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use ipnet::Ipv4Net;

use crate::items::{Change, Items};
use crate::text::{
    MAX_CLASS, MAX_DSCP, NextHop, NextHops, add_route, check_eight_queues, default_class,
    expect_cli_text, number_list, parse_error, planned_routes, unexpressible,
};
use crate::{Driver, Error, SwitchIntent};
use mlt_common::redact::shown;

pub struct Eos;

const PROFILE: &str = "MLT";
const MAX_THRESHOLD_BYTES: u64 = 256_000_000;
const MAX_VALUES_PER_MAP_LINE: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    DscpClass(u8),
    ClassQueue(u8),
    ProfileTrust,
    QueuePriority(u8),
    QueueEcn(u8),
    /// The queue's WRED drop curve (no drop precedence): its limit L_i.
    QueueDrop(u8),
    ServiceProfile(String),
    /// An interface's own `tx-queue Q` priority, overriding the profile's.
    PortQueuePriority(String, u8),
    /// An interface's own `tx-queue Q` ECN curve, overriding the profile's.
    PortQueueEcn(String, u8),
    /// An interface's own `tx-queue Q` WRED drop curve, overriding the profile's.
    PortQueueDrop(String, u8),
    Route(Ipv4Net),
    /// The switch-wide `qos random-detect ecn allow non-ect`.
    AllowNonEct,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Number(u8),
    Trust(String),
    Strict(bool),
    Curve(EcnCurve),
    /// No setting of its own: the profile's applies.
    Inherited,
    Applied,
    Route(NextHops),
    /// A switch-wide setting, as the running config writes it.
    Line(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcnCurve {
    min: Threshold,
    max: Threshold,
    probability: u8,
}

/// A queue length as EOS writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Threshold {
    Bytes(u64),
    /// Segments or milliseconds: no exact byte count.
    Other {
        amount: u64,
        unit: String,
    },
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::DscpClass(d) => write!(f, "DSCP {d} traffic class"),
            Key::ClassQueue(t) => write!(f, "traffic class {t} tx-queue"),
            Key::ProfileTrust => write!(f, "qos profile {PROFILE} trust"),
            Key::QueuePriority(q) => write!(f, "tx-queue {q} priority"),
            Key::QueueEcn(q) => write!(f, "tx-queue {q} ECN"),
            Key::QueueDrop(q) => write!(f, "tx-queue {q} WRED drop"),
            Key::ServiceProfile(port) => write!(f, "interface {port} service-profile"),
            Key::PortQueuePriority(port, q) => write!(f, "interface {port} tx-queue {q} priority"),
            Key::PortQueueEcn(port, q) => write!(f, "interface {port} tx-queue {q} ECN"),
            Key::PortQueueDrop(port, q) => {
                write!(f, "interface {port} tx-queue {q} WRED drop")
            }
            Key::Route(prefix) => write!(f, "route {prefix}"),
            Key::AllowNonEct => f.write_str("ECN allow non-ect (switch-wide)"),
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
            Value::Number(n) => write!(f, "{n}"),
            Value::Trust(t) => f.write_str(t),
            Value::Strict(true) => f.write_str("strict"),
            Value::Strict(false) => f.write_str("round-robin"),
            Value::Curve(c) => write!(f, "{} to {}, {}%", c.min, c.max, c.probability),
            Value::Inherited => f.write_str("the profile's"),
            Value::Applied => f.write_str(PROFILE),
            Value::Route(hops) => write!(f, "{hops}"),
            Value::Line(line) => write!(f, "`{line}`"),
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Bytes(b) => write!(f, "{b} bytes"),
            Threshold::Other { amount, unit } => write!(f, "{amount} {unit}"),
        }
    }
}

impl Driver for Eos {
    fn maps_dscp(key: &Key) -> bool {
        matches!(
            key,
            Key::DscpClass(_) | Key::ClassQueue(_) | Key::ProfileTrust
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
        for (dscp, &class) in qos.dscp_to_tc.iter().enumerate() {
            items.push((Key::DscpClass(dscp as u8), Value::Number(class)));
        }
        for (class, &queue) in qos.tc_to_queue.iter().enumerate() {
            items.push((Key::ClassQueue(class as u8), Value::Number(queue)));
        }
        items.push((Key::ProfileTrust, Value::Trust("dscp".into())));
        for q in &qos.queues {
            items.push((Key::QueuePriority(q.queue), Value::Strict(true)));
            if let Some(ecn) = q.ecn {
                let step = |bytes: u64| -> Result<Value, Error> {
                    if !(1..=MAX_THRESHOLD_BYTES).contains(&bytes) {
                        let item = format!("queue {} threshold {bytes} bytes", q.queue);
                        return Err(unexpressible(
                            intent,
                            item,
                            "EOS takes 1 to 256000000 bytes",
                        ));
                    }
                    Ok(Value::Curve(EcnCurve {
                        min: Threshold::Bytes(bytes),
                        max: Threshold::Bytes(bytes),
                        probability: 100,
                    }))
                };
                items.push((Key::QueueEcn(q.queue), step(ecn.mark_bytes)?));
                if let Some(limit) = ecn.limit_bytes {
                    items.push((Key::QueueDrop(q.queue), step(limit)?));
                }
            }
        }
        for port in &qos.ports {
            items.push((Key::ServiceProfile(port.clone()), Value::Applied));
            for q in &qos.queues {
                let (p, q) = (port.clone(), q.queue);
                items.push((Key::PortQueuePriority(p.clone(), q), Value::Strict(true)));
                items.push((Key::PortQueueEcn(p.clone(), q), Value::Inherited));
                items.push((Key::PortQueueDrop(p, q), Value::Inherited));
            }
        }
        for (prefix, hops) in planned_routes(intent) {
            items.push((Key::Route(prefix), Value::Route(hops)));
        }
        Ok(items.into_iter().collect())
    }

    fn parse(running: &str, intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        expect_cli_text(intent, running, "`show running-config` text")?;
        let mut seen = Running::default();
        let mut section = Section::Other;
        let mut tx_queue: Option<u8> = None;
        for (index, raw) in running.lines().enumerate() {
            let line_no = index + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('!') {
                continue;
            }
            let indent = raw.len() - raw.trim_start().len();
            let words: Vec<&str> = line.split_whitespace().collect();
            let fail = |message: &str| parse_error(intent, line_no, message);
            if indent == 0 {
                tx_queue = None;
                section = match words.as_slice() {
                    ["qos", "profile", name] => Section::Profile(*name == PROFILE),
                    ["interface", name] => Section::Interface(name.to_string()),
                    _ => Section::Other,
                };
                match words.as_slice() {
                    ["qos", "profile", PROFILE] => seen.profile = true,
                    ["qos", "map", "dscp", rest @ ..] => {
                        let (dscps, class) = map_line(rest, "traffic-class", MAX_DSCP)
                            .map_err(|e| fail(&format!("cannot read the DSCP map: {e}")))?;
                        for dscp in dscps {
                            seen.dscp[dscp as usize] = class;
                        }
                    }
                    ["qos", "map", "traffic-class", rest @ ..]
                        if rest.windows(2).any(|w| w == ["to", "tx-queue"]) =>
                    {
                        let (classes, queue) =
                            map_line(rest, "tx-queue", MAX_CLASS).map_err(|e| {
                                fail(&format!("cannot read the traffic-class map: {e}"))
                            })?;
                        for class in classes {
                            seen.class_queue.insert(class, queue);
                        }
                    }
                    ["ip", "route", rest @ ..] => seen.route(rest, intent),
                    ["qos", "random-detect", "ecn", "allow", "non-ect", ..] => {
                        seen.allow_non_ect = Some(words.join(" "));
                    }
                    _ => {}
                }
                continue;
            }
            // Both the plan's profile and interfaces hold `tx-queue Q` blocks.
            let owner = match &section {
                Section::Profile(true) => QueueOwner::Profile,
                Section::Interface(name) => QueueOwner::Port(name.clone()),
                _ => continue,
            };
            if indent <= 3 {
                tx_queue = None;
                match words.as_slice() {
                    ["qos", "trust", trust] if owner == QueueOwner::Profile => {
                        seen.trust = Some(trust.to_string())
                    }
                    ["service-profile", PROFILE] => {
                        if let QueueOwner::Port(name) = owner {
                            seen.applied.insert(name);
                        }
                    }
                    ["tx-queue" | "uc-tx-queue", queue] => {
                        tx_queue = Some(queue.parse().map_err(|_| fail("cannot read tx-queue"))?);
                    }
                    _ => {}
                }
                continue;
            }
            let Some(queue) = tx_queue else { continue };
            match words.as_slice() {
                ["priority", "strict"] => seen.set_strict(owner, queue, true),
                ["no", "priority"] => seen.set_strict(owner, queue, false),
                ["random-detect", "ecn", rest @ ..] if !rest.is_empty() && rest[0] != "count" => {
                    let curve = curve(rest, "max-mark-probability")
                        .ok_or_else(|| fail("cannot read random-detect ecn"))?;
                    seen.set_ecn(owner, queue, curve);
                }
                ["random-detect", "drop", rest @ ..]
                    if rest.first() != Some(&"drop-precedence") =>
                {
                    let curve = curve(rest, "drop-probability")
                        .ok_or_else(|| fail("cannot read random-detect drop"))?;
                    seen.set_drop(owner, queue, curve);
                }
                _ => {}
            }
        }
        Ok(seen.items(intent))
    }

    fn layout(
        intent: &SwitchIntent,
        changes: &[Change<Key, Value>],
        full: bool,
    ) -> Result<String, Error> {
        render::layout(intent, changes, full)
    }
}

enum Section {
    /// `qos profile NAME`; true for the plan's profile.
    Profile(bool),
    Interface(String),
    Other,
}

/// Whose `tx-queue` settings a block holds.
#[derive(PartialEq, Eq)]
enum QueueOwner {
    Profile,
    Port(String),
}

/// What a running config says about the owned parts, before defaults.
struct Running {
    dscp: [u8; 64],
    class_queue: BTreeMap<u32, u8>,
    profile: bool,
    trust: Option<String>,
    strict: BTreeMap<u8, bool>,
    ecn: BTreeMap<u8, EcnCurve>,
    drop: BTreeMap<u8, EcnCurve>,
    applied: BTreeSet<String>,
    /// Interfaces' own `tx-queue` settings.
    port_strict: BTreeMap<(String, u8), bool>,
    port_ecn: BTreeMap<(String, u8), EcnCurve>,
    port_drop: BTreeMap<(String, u8), EcnCurve>,
    routes: Items<Key, NextHops>,
    allow_non_ect: Option<String>,
}

impl Default for Running {
    fn default() -> Self {
        Running {
            dscp: std::array::from_fn(|d| default_class(d as u8)),
            class_queue: BTreeMap::new(),
            profile: false,
            trust: None,
            strict: BTreeMap::new(),
            ecn: BTreeMap::new(),
            drop: BTreeMap::new(),
            applied: BTreeSet::new(),
            port_strict: BTreeMap::new(),
            port_ecn: BTreeMap::new(),
            port_drop: BTreeMap::new(),
            routes: Items::new(),
            allow_non_ect: None,
        }
    }
}

impl Running {
    fn set_strict(&mut self, owner: QueueOwner, queue: u8, strict: bool) {
        match owner {
            QueueOwner::Profile => self.strict.insert(queue, strict),
            QueueOwner::Port(port) => self.port_strict.insert((port, queue), strict),
        };
    }

    fn set_ecn(&mut self, owner: QueueOwner, queue: u8, curve: EcnCurve) {
        match owner {
            QueueOwner::Profile => self.ecn.insert(queue, curve),
            QueueOwner::Port(port) => self.port_ecn.insert((port, queue), curve),
        };
    }

    fn set_drop(&mut self, owner: QueueOwner, queue: u8, curve: EcnCurve) {
        match owner {
            QueueOwner::Profile => self.drop.insert(queue, curve),
            QueueOwner::Port(port) => self.port_drop.insert((port, queue), curve),
        };
    }

    /// `ip route [vrf NAME] PREFIX [INTERFACE] [NEXT-HOP] [DISTANCE] [tag N] [name X]
    /// [metric N]`: default VRF, inside the plan's scope. A `name` only labels a route;
    /// beyond it, only a bare next hop or `Null0` is a form the plan writes: anything
    /// more (an interface and an address, a distance, a tag) is kept as written, so it
    /// differs and can be removed exactly.
    fn route(&mut self, words: &[&str], intent: &SwitchIntent) {
        let words = match words {
            ["vrf", "default", rest @ ..] => rest,
            ["vrf", ..] => return,
            rest => rest,
        };
        let [prefix, hop @ ..] = words else { return };
        let Ok(prefix) = prefix.parse::<Ipv4Net>() else {
            return;
        };
        if hop.is_empty() || !intent.owns_route(&prefix) {
            return;
        }
        let hop: Vec<&str> = match hop.iter().position(|w| *w == "name") {
            Some(at) => hop[..at]
                .iter()
                .chain(hop.iter().skip(at + 2))
                .copied()
                .collect(),
            None => hop.to_vec(),
        };
        let hop = match hop.as_slice() {
            [one] => NextHop::parse(one, &["Null0"]),
            more => NextHop::Other(more.join(" ")),
        };
        add_route(&mut self.routes, Key::Route(prefix), hop);
    }

    fn items(mut self, intent: &SwitchIntent) -> Items<Key, Value> {
        let mut items = Items::new();
        for (dscp, class) in self.dscp.into_iter().enumerate() {
            items.insert(Key::DscpClass(dscp as u8), Value::Number(class));
        }
        for class in 0..intent.qos.tc_to_queue.len() as u8 {
            let queue = self
                .class_queue
                .get(&u32::from(class))
                .copied()
                .unwrap_or(class);
            items.insert(Key::ClassQueue(class), Value::Number(queue));
        }
        if self.profile {
            if let Some(trust) = self.trust {
                items.insert(Key::ProfileTrust, Value::Trust(trust));
            }
            for q in &intent.qos.queues {
                let strict = self.strict.get(&q.queue).copied().unwrap_or(true);
                items.insert(Key::QueuePriority(q.queue), Value::Strict(strict));
            }
            for (queue, curve) in self.ecn {
                items.insert(Key::QueueEcn(queue), Value::Curve(curve));
            }
            for (queue, curve) in self.drop {
                items.insert(Key::QueueDrop(queue), Value::Curve(curve));
            }
        }
        for port in self.applied {
            items.insert(Key::ServiceProfile(port), Value::Applied);
        }
        // Only the plan's queues on the plan's ports are the plan's to keep clear.
        for port in &intent.qos.ports {
            for q in &intent.qos.queues {
                let key = (port.clone(), q.queue);
                let strict = self.port_strict.get(&key).copied().unwrap_or(true);
                let ecn = self
                    .port_ecn
                    .remove(&key)
                    .map_or(Value::Inherited, Value::Curve);
                let drop = self
                    .port_drop
                    .remove(&key)
                    .map_or(Value::Inherited, Value::Curve);
                let (port, queue) = key;
                items.insert(
                    Key::PortQueuePriority(port.clone(), queue),
                    Value::Strict(strict),
                );
                items.insert(Key::PortQueueEcn(port.clone(), queue), ecn);
                items.insert(Key::PortQueueDrop(port, queue), drop);
            }
        }
        items.extend(
            self.routes
                .into_iter()
                .map(|(k, hops)| (k, Value::Route(hops))),
        );
        if let Some(line) = self.allow_non_ect {
            items.insert(Key::AllowNonEct, Value::Line(line));
        }
        items
    }
}

/// `V V … to WORD T`: the values (none above `max`) and their target (0–7).
fn map_line(words: &[&str], target_word: &str, max: u32) -> Result<(Vec<u32>, u8), String> {
    let malformed = || format!("expected `VALUES to {target_word} N`");
    let to = words
        .iter()
        .position(|w| *w == "to")
        .ok_or_else(malformed)?;
    // A DSCP map may add `drop-precedence D`: not the plan's, and no other class.
    let (word, target) = match &words[to + 1..] {
        [word, target] | [word, target, "drop-precedence", _] => (word, target),
        _ => return Err(malformed()),
    };
    if *word != target_word {
        return Err(malformed());
    }
    let target = match target.parse::<u8>() {
        Ok(t) if u32::from(t) <= MAX_CLASS => t,
        _ => {
            return Err(format!(
                "{} is not a number from 0 to {MAX_CLASS}",
                shown(target)
            ));
        }
    };
    let mut values = Vec::new();
    for w in &words[..to] {
        values.extend(number_list(w, max)?);
        if values.len() > max as usize + 1 {
            return Err(format!("more than {} values", max + 1));
        }
    }
    Ok((values, target))
}

/// `minimum-threshold N UNIT maximum-threshold N UNIT [PROBABILITY-WORD P] [weight W]`,
/// where the probability is `max-mark-probability` (ECN) or `drop-probability` (drop).
fn curve(words: &[&str], probability_word: &str) -> Option<EcnCurve> {
    let mut min = None;
    let mut max = None;
    let mut probability = 100;
    let mut rest = words;
    while let Some((word, tail)) = rest.split_first() {
        rest = match (*word, tail) {
            ("minimum-threshold", [n, unit, tail @ ..]) => {
                min = Some(threshold(n, unit)?);
                tail
            }
            ("maximum-threshold", [n, unit, tail @ ..]) => {
                max = Some(threshold(n, unit)?);
                tail
            }
            (word, [p, tail @ ..]) if word == probability_word => {
                probability = p.parse().ok()?;
                tail
            }
            ("weight", [_, tail @ ..]) => tail,
            _ => return None,
        };
    }
    Some(EcnCurve {
        min: min?,
        max: max?,
        probability,
    })
}

fn threshold(number: &str, unit: &str) -> Option<Threshold> {
    let n: u64 = number.parse().ok()?;
    let scale = match unit {
        "bytes" => 1,
        "kbytes" => 1 << 10,
        "mbytes" => 1 << 20,
        "segments" | "milliseconds" => {
            return Some(Threshold::Other {
                amount: n,
                unit: unit.to_string(),
            });
        }
        _ => return None,
    };
    n.checked_mul(scale).map(Threshold::Bytes)
}
