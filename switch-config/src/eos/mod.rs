//! Arista EOS: CLI lines, as entered in a configure session.
//!
//! What the plan owns, and how it is written:
//! - `qos map dscp D… to traffic-class T` for all 64 DSCP values. EOS sends a DSCP it
//!   was not told about to class D/8 and leaves such mappings out of its running
//!   config, so a missing line means D/8.
//! - `qos map traffic-class T… to tx-queue Q` for the plan's classes (default Q = T).
//! - `qos profile MLT`: `qos trust dscp`, and per owned queue a `tx-queue Q` with
//!   `priority strict` and, on gradient queues, `random-detect ecn minimum-threshold S
//!   bytes maximum-threshold L bytes max-mark-probability 100`. Strict priority is the
//!   EOS default, so a running config shows only `no priority`; a missing
//!   `max-mark-probability` means 100. Anything else in profile MLT's ECN is stale.
//! - `service-profile MLT` on every port of the plan (and on no other port).
//! - Static routes of the default VRF inside the plan's scope; a discard is `Null0`.
//!
//! Units: thresholds are written in bytes, exactly (EOS accepts 1 to 256,000,000). A
//! running config in kbytes or mbytes is read as 1,024 or 1,048,576 bytes; segments
//! and milliseconds depend on the platform, so they are kept as written and differ.

pub(crate) mod push;
mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use ipnet::Ipv4Net;

use crate::items::{Change, Items};
use crate::redact::shown;
use crate::text::{
    MAX_CLASS, MAX_DSCP, NextHop, NextHops, add_route, check_eight_queues, default_class,
    number_list, parse_error, planned_routes, unexpressible,
};
use crate::{Driver, Error, SwitchIntent};

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
    ServiceProfile(String),
    Route(Ipv4Net),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Number(u8),
    Trust(String),
    Strict(bool),
    Ecn(EcnCurve),
    Applied,
    Route(NextHops),
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
            Key::ServiceProfile(port) => write!(f, "interface {port} service-profile"),
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
            Value::Number(n) => write!(f, "{n}"),
            Value::Trust(t) => f.write_str(t),
            Value::Strict(true) => f.write_str("strict"),
            Value::Strict(false) => f.write_str("round-robin"),
            Value::Ecn(c) => write!(f, "{} to {}, {}%", c.min, c.max, c.probability),
            Value::Applied => f.write_str(PROFILE),
            Value::Route(hops) => write!(f, "{hops}"),
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
    type Key = Key;
    type Value = Value;

    fn expected(intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        check_eight_queues(intent)?;
        let qos = &intent.qos;
        let mut items = Items::new();
        for (dscp, &class) in qos.dscp_to_tc.iter().enumerate() {
            items.insert(Key::DscpClass(dscp as u8), Value::Number(class));
        }
        for (class, &queue) in qos.tc_to_queue.iter().enumerate() {
            items.insert(Key::ClassQueue(class as u8), Value::Number(queue));
        }
        items.insert(Key::ProfileTrust, Value::Trust("dscp".into()));
        for q in &qos.queues {
            items.insert(Key::QueuePriority(q.queue), Value::Strict(true));
            if let Some(ecn) = q.ecn {
                for bytes in [ecn.mark_bytes, ecn.limit_bytes] {
                    if !(1..=MAX_THRESHOLD_BYTES).contains(&bytes) {
                        let item = format!("queue {} ECN threshold {bytes} bytes", q.queue);
                        return Err(unexpressible(
                            intent,
                            item,
                            "EOS takes 1 to 256000000 bytes",
                        ));
                    }
                }
                let curve = EcnCurve {
                    min: Threshold::Bytes(ecn.mark_bytes),
                    max: Threshold::Bytes(ecn.limit_bytes),
                    probability: 100,
                };
                items.insert(Key::QueueEcn(q.queue), Value::Ecn(curve));
            }
        }
        for port in &qos.ports {
            items.insert(Key::ServiceProfile(port.clone()), Value::Applied);
        }
        for (prefix, hops) in planned_routes(intent) {
            items.insert(Key::Route(prefix), Value::Route(hops));
        }
        Ok(items)
    }

    fn parse(running: &str, intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
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
                    ["qos", "map", "traffic-class", rest @ ..] => {
                        let (classes, queue) =
                            map_line(rest, "tx-queue", MAX_CLASS).map_err(|e| {
                                fail(&format!("cannot read the traffic-class map: {e}"))
                            })?;
                        for class in classes {
                            seen.class_queue.insert(class, queue);
                        }
                    }
                    ["ip", "route", rest @ ..] => seen.route(rest, intent),
                    _ => {}
                }
                continue;
            }
            match &section {
                Section::Profile(true) if indent <= 3 => {
                    tx_queue = None;
                    match words.as_slice() {
                        ["qos", "trust", trust] => seen.trust = Some(trust.to_string()),
                        ["tx-queue" | "uc-tx-queue", queue] => {
                            tx_queue =
                                Some(queue.parse().map_err(|_| fail("cannot read tx-queue"))?);
                        }
                        _ => {}
                    }
                }
                Section::Profile(true) => {
                    let Some(queue) = tx_queue else { continue };
                    match words.as_slice() {
                        ["priority", "strict"] => {
                            seen.strict.insert(queue, true);
                        }
                        ["no", "priority"] => {
                            seen.strict.insert(queue, false);
                        }
                        ["random-detect", "ecn", rest @ ..]
                            if !rest.is_empty() && rest[0] != "count" =>
                        {
                            let curve = ecn_curve(rest)
                                .ok_or_else(|| fail("cannot read random-detect ecn"))?;
                            seen.ecn.insert(queue, curve);
                        }
                        _ => {}
                    }
                }
                Section::Interface(name) if words.as_slice() == ["service-profile", PROFILE] => {
                    seen.applied.insert(name.clone());
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

/// What a running config says about the owned parts, before defaults.
struct Running {
    dscp: [u8; 64],
    class_queue: BTreeMap<u32, u8>,
    profile: bool,
    trust: Option<String>,
    strict: BTreeMap<u8, bool>,
    ecn: BTreeMap<u8, EcnCurve>,
    applied: BTreeSet<String>,
    routes: Items<Key, NextHops>,
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
            applied: BTreeSet::new(),
            routes: Items::new(),
        }
    }
}

impl Running {
    /// `ip route [vrf NAME] PREFIX NEXT-HOP …`: default VRF, inside the plan's scope.
    fn route(&mut self, words: &[&str], intent: &SwitchIntent) {
        let words = match words {
            ["vrf", "default", rest @ ..] => rest,
            ["vrf", ..] => return,
            rest => rest,
        };
        let [prefix, hop, ..] = words else { return };
        let Ok(prefix) = prefix.parse::<Ipv4Net>() else {
            return;
        };
        if intent.owns_route(&prefix) {
            add_route(
                &mut self.routes,
                Key::Route(prefix),
                NextHop::parse(hop, &["Null0"]),
            );
        }
    }

    fn items(self, intent: &SwitchIntent) -> Items<Key, Value> {
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
                items.insert(Key::QueueEcn(queue), Value::Ecn(curve));
            }
        }
        for port in self.applied {
            items.insert(Key::ServiceProfile(port), Value::Applied);
        }
        items.extend(
            self.routes
                .into_iter()
                .map(|(k, hops)| (k, Value::Route(hops))),
        );
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
    let [word, target] = &words[to + 1..] else {
        return Err(malformed());
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

/// `minimum-threshold N UNIT maximum-threshold N UNIT [max-mark-probability P] [weight W]`.
fn ecn_curve(words: &[&str]) -> Option<EcnCurve> {
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
            ("max-mark-probability", [p, tail @ ..]) => {
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
