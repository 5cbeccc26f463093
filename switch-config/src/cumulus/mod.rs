//! NVIDIA Cumulus Linux with NVUE: `nv set` commands, as `nv config show -o commands`
//! prints them.
//!
//! What the plan owns, all in the `default-global` profile, which applies to every port
//! (so the plan's ports need no binding of their own):
//! - `qos mapping default-global trust l3` (default l2);
//! - `qos mapping default-global dscp D switch-priority P` for all 64 DSCP values
//!   (default P = D/8); the plan's traffic class serves as switch priority;
//! - `qos egress-queue-mapping default-global switch-priority P traffic-class T` for the
//!   plan's classes (default T = P);
//! - `qos egress-scheduler default-global traffic-class Q mode strict` on owned queues
//!   (default DWRR);
//! - `qos congestion-control default-global traffic-class Q` with `min-threshold` =
//!   `max-threshold` = S_i (bytes), `probability 100`, `ecn enable` (ECT packets are
//!   marked) and `red enable` (Not-ECT packets are dropped) on gradient queues: the
//!   step of MLT Appendix B. NVUE documents no rule that min be below max, and the
//!   Spectrum driver takes min = max (it refuses only min > max). None on the control
//!   queue;
//! - `vrf default router static PREFIX via NH` inside the plan's scope; a discard is
//!   `via blackhole`;
//! - on the plan's ports, no profile of their own for what `default-global` sets
//!   (`interface swp31 qos egress-scheduler profile uplinks` overrides it there): such
//!   a binding is unset. Other interface QoS (PFC, shaping, remarking) is left alone.
//!
//! - no `qos roce`: NVUE's RoCE mode (`nv set qos roce [mode …]`) reprograms the
//!   switch's trust, buffers and congestion control for RDMA, ECN-only with its own
//!   thresholds on traffic classes 0 and 3, so Not-ECT packets there are no longer
//!   dropped at S (NVIDIA's *RDMA over Converged Ethernet* page). Running `qos roce`
//!   settings are kept as written (a rollback restores them) and removed with
//!   `nv unset qos roce`.
//!
//! `ecn` and `red` read `enable` (as NVUE prints them), `enabled`, `on` and `true` as
//! on.
//!
//! The queue limit L_i is not configured: NVUE's only per-traffic-class byte bound is
//! `qos advance-buffer-config default-global egress-lossy-buffer traffic-class Q
//! shared-bytes N`, for a buffer region mapped to a *static* egress service pool, and
//! such a pool is carved out of the lossy pool every other traffic class uses
//! (`traffic-pool default-lossy memory-percent`). mltctl does not repartition a
//! switch's buffer; the plan re-solves its model for switches without queue limits
//! ([`crate::Vendor::no_queue_limit`]), and a plan that asks for a limit fails here.
//!
//! A route written with `distance N via …` is another route (a floating one) and is
//! left alone, like routes in other VRFs.
//!
//! Keys sharing a value go in one command (`dscp 0-31,38-45 switch-priority 0`), as
//! NVUE prints them: every `nv` call costs a round trip to the NVUE daemon.
//!
//! Units: bytes, exactly. Running configs may spell the thresholds
//! `min-threshold-bytes`/`max-threshold-bytes` and list classes as `4,5,7` or `0-3`.

mod commands;
pub mod counters;
mod interfaces;
mod patch;
pub(crate) mod push;
mod render;

use std::collections::BTreeSet;
use std::fmt;

use ipnet::Ipv4Net;

use crate::items::{Change, Items};
use crate::text::{
    MAX_CLASS, MAX_DSCP, NextHop, NextHops, add_route, check_eight_queues, check_no_limit,
    default_class, number_list, parse_error, planned_routes,
};
use crate::{Driver, Error, SwitchIntent};
use mlt_common::redact::shown;

pub struct Cumulus;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Trust,
    DscpPriority(u8),
    PriorityClass(u8),
    Scheduler(u8),
    Congestion(u8),
    Route(Ipv4Net),
    /// A plan's port bound to a profile of its own, in place of `default-global`.
    PortProfile(String, Profile),
    /// NVUE's switch-wide RoCE mode.
    Roce,
}

/// The interface QoS bindings that replace what the plan sets in `default-global`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Profile {
    Mapping,
    EgressQueueMapping,
    EgressScheduler,
    CongestionControl,
}

impl Profile {
    fn of(word: &str) -> Option<Profile> {
        Some(match word {
            "mapping" => Profile::Mapping,
            "egress-queue-mapping" => Profile::EgressQueueMapping,
            "egress-scheduler" => Profile::EgressScheduler,
            "congestion-control" => Profile::CongestionControl,
            _ => return None,
        })
    }

    fn word(self) -> &'static str {
        match self {
            Profile::Mapping => "mapping",
            Profile::EgressQueueMapping => "egress-queue-mapping",
            Profile::EgressScheduler => "egress-scheduler",
            Profile::CongestionControl => "congestion-control",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Word(String),
    Number(u8),
    Congestion(Congestion),
    Route(NextHops),
    /// Settings as the running config writes them: the words after the key's.
    Settings(Vec<Vec<String>>),
}

/// One traffic class's congestion control; unset fields are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Congestion {
    min_threshold: Option<u64>,
    max_threshold: Option<u64>,
    probability: Option<u8>,
    ecn: Option<bool>,
    red: Option<bool>,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Trust => f.write_str("qos trust"),
            Key::DscpPriority(d) => write!(f, "DSCP {d} switch-priority"),
            Key::PriorityClass(p) => write!(f, "switch-priority {p} traffic-class"),
            Key::Scheduler(q) => write!(f, "traffic-class {q} scheduler"),
            Key::Congestion(q) => write!(f, "traffic-class {q} congestion-control"),
            Key::Route(prefix) => write!(f, "route {prefix}"),
            Key::PortProfile(port, kind) => write!(f, "{port} qos {} profile", kind.word()),
            Key::Roce => f.write_str("qos roce (switch-wide)"),
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
            Value::Word(w) => f.write_str(w),
            Value::Number(n) => write!(f, "{n}"),
            Value::Congestion(c) => {
                let field = |v: Option<String>| v.unwrap_or_else(|| "unset".into());
                let flag = |v: Option<bool>| {
                    field(v.map(|on| if on { "enable" } else { "disable" }.into()))
                };
                write!(
                    f,
                    "{} to {} bytes, {}%, ecn {}, red {}",
                    field(c.min_threshold.map(|b| b.to_string())),
                    field(c.max_threshold.map(|b| b.to_string())),
                    field(c.probability.map(|p| p.to_string())),
                    flag(c.ecn),
                    flag(c.red)
                )
            }
            Value::Route(hops) => write!(f, "{hops}"),
            Value::Settings(settings) => {
                let lines: Vec<String> = settings.iter().map(|words| words.join(" ")).collect();
                write!(f, "`{}`", lines.join("; "))
            }
        }
    }
}

/// An NVUE on/off value, in any of the spellings NVUE takes.
fn on(value: &str) -> bool {
    matches!(value, "enable" | "enabled" | "on" | "true")
}

impl Driver for Cumulus {
    fn maps_dscp(key: &Key) -> bool {
        matches!(
            key,
            Key::Trust
                | Key::DscpPriority(_)
                | Key::PriorityClass(_)
                | Key::PortProfile(_, Profile::Mapping | Profile::EgressQueueMapping)
        )
    }

    type Key = Key;
    type Value = Value;

    fn expected(intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        check_eight_queues(intent)?;
        let qos = &intent.qos;
        let mut items = Items::new();
        items.insert(Key::Trust, Value::Word("l3".into()));
        for (dscp, &class) in qos.dscp_to_tc.iter().enumerate() {
            items.insert(Key::DscpPriority(dscp as u8), Value::Number(class));
        }
        for (class, &queue) in qos.tc_to_queue.iter().enumerate() {
            items.insert(Key::PriorityClass(class as u8), Value::Number(queue));
        }
        for q in &qos.queues {
            items.insert(Key::Scheduler(q.queue), Value::Word("strict".into()));
            if let Some(ecn) = q.ecn {
                check_no_limit(intent, q.queue, &ecn)?;
                let congestion = Congestion {
                    min_threshold: Some(ecn.mark_bytes),
                    max_threshold: Some(ecn.mark_bytes),
                    probability: Some(100),
                    ecn: Some(true),
                    red: Some(true),
                };
                items.insert(Key::Congestion(q.queue), Value::Congestion(congestion));
            }
        }
        for (prefix, hops) in planned_routes(intent) {
            items.insert(Key::Route(prefix), Value::Route(hops));
        }
        Ok(items)
    }

    fn parse(running: &str, intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        let qos = &intent.qos;
        let queues: BTreeSet<u8> = qos.queues.iter().map(|q| q.queue).collect();
        let classes = qos.tc_to_queue.len() as u8;
        let mut items = Items::new();
        items.insert(Key::Trust, Value::Word("l2".into()));
        for dscp in 0..64u8 {
            items.insert(Key::DscpPriority(dscp), Value::Number(default_class(dscp)));
        }
        for priority in 0..classes {
            items.insert(Key::PriorityClass(priority), Value::Number(priority));
        }
        for &q in &queues {
            items.insert(Key::Scheduler(q), Value::Word("dwrr".into()));
        }
        let mut routes: Items<Key, NextHops> = Items::new();
        let commands = commands::commands(running)
            .map_err(|line| parse_error(intent, line, "a quote that never closes"))?;
        for command in commands {
            let line = command.text.trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            let fail = |message: String| parse_error(intent, command.line, message);
            // `nv config show -o commands` prints nothing but `nv` commands; anything
            // else is another form (the YAML of `nv config show`, JSON) that would
            // otherwise read as an empty switch.
            if !line.is_empty() && !line.starts_with('#') && words.first() != Some(&"nv") {
                return Err(fail(
                    "not an `nv` command: expected `nv config show -o commands` output \
                     (the YAML of `nv config show` cannot be read)"
                        .into(),
                ));
            }
            let list = |text: &str, max: u32| number_list(text, max).map_err(fail);
            let number = |text: &str| {
                text.parse::<u64>()
                    .map_err(|_| fail(format!("{} is not a number", shown(text))))
            };
            // A class, priority or percentage: a small number within its domain.
            let small = |text: &str, max: u8| match text.parse::<u8>() {
                Ok(n) if n <= max => Ok(n),
                _ => Err(fail(format!(
                    "{} is not a number from 0 to {max}",
                    shown(text)
                ))),
            };
            match words.as_slice() {
                [
                    "nv",
                    "set",
                    "qos",
                    "mapping",
                    "default-global",
                    "trust",
                    trust,
                ] => {
                    items.insert(Key::Trust, Value::Word(trust.to_string()));
                }
                [
                    "nv",
                    "set",
                    "qos",
                    "mapping",
                    "default-global",
                    "dscp",
                    dscps,
                    "switch-priority",
                    p,
                ] => {
                    let priority = small(p, MAX_CLASS as u8)?;
                    for dscp in list(dscps, MAX_DSCP)? {
                        items.insert(Key::DscpPriority(dscp as u8), Value::Number(priority));
                    }
                }
                [
                    "nv",
                    "set",
                    "qos",
                    "egress-queue-mapping",
                    "default-global",
                    "switch-priority",
                    ps,
                    "traffic-class",
                    t,
                ] => {
                    let class = small(t, MAX_CLASS as u8)?;
                    for priority in list(ps, MAX_CLASS)?
                        .into_iter()
                        .filter(|p| *p < u32::from(classes))
                    {
                        items.insert(Key::PriorityClass(priority as u8), Value::Number(class));
                    }
                }
                [
                    "nv",
                    "set",
                    "qos",
                    "egress-scheduler",
                    "default-global",
                    "traffic-class",
                    qs,
                    "mode",
                    mode,
                ] => {
                    for q in list(qs, MAX_CLASS)?
                        .into_iter()
                        .map(|q| q as u8)
                        .filter(|q| queues.contains(q))
                    {
                        items.insert(Key::Scheduler(q), Value::Word(mode.to_string()));
                    }
                }
                [
                    "nv",
                    "set",
                    "qos",
                    "congestion-control",
                    "default-global",
                    "traffic-class",
                    qs,
                    field,
                    value,
                ] => {
                    for q in list(qs, MAX_CLASS)?
                        .into_iter()
                        .map(|q| q as u8)
                        .filter(|q| queues.contains(q))
                    {
                        let entry = items
                            .entry(Key::Congestion(q))
                            .or_insert_with(|| Value::Congestion(Congestion::default()));
                        let Value::Congestion(c) = entry else {
                            unreachable!("congestion key")
                        };
                        match *field {
                            "min-threshold" | "min-threshold-bytes" => {
                                c.min_threshold = Some(number(value)?)
                            }
                            "max-threshold" | "max-threshold-bytes" => {
                                c.max_threshold = Some(number(value)?)
                            }
                            "probability" => c.probability = Some(small(value, 100)?),
                            "ecn" => c.ecn = Some(on(value)),
                            "red" => c.red = Some(on(value)),
                            _ => {}
                        }
                    }
                }
                ["nv", "set", "qos", "roce", rest @ ..] => {
                    let entry = items
                        .entry(Key::Roce)
                        .or_insert_with(|| Value::Settings(Vec::new()));
                    if let Value::Settings(settings) = entry {
                        settings.push(rest.iter().map(ToString::to_string).collect());
                    }
                }
                ["nv", "set", "interface", ids, "qos", kind, "profile", name]
                    if *name != "default-global" =>
                {
                    let Some(kind) = Profile::of(kind) else {
                        continue;
                    };
                    for port in intent
                        .qos
                        .ports
                        .iter()
                        .filter(|p| interfaces::covers(ids, p))
                    {
                        items.insert(
                            Key::PortProfile(port.clone(), kind),
                            Value::Word(name.to_string()),
                        );
                    }
                }
                // `nv config show -o commands` prints a next hop with its attributes
                // (`type ipv4-address`, `type blackhole`, `interface …`) and the route's
                // own (`address-family ipv4-unicast`, `distance N`): read the hop, leave
                // the attributes to the switch.
                [
                    "nv",
                    "set",
                    "vrf",
                    "default",
                    "router",
                    "static",
                    prefix,
                    "via",
                    hop,
                    ..,
                ] => {
                    let prefix: Ipv4Net = prefix
                        .parse()
                        .map_err(|_| fail(format!("{} is not a prefix", shown(prefix))))?;
                    if intent.owns_route(&prefix) {
                        add_route(
                            &mut routes,
                            Key::Route(prefix),
                            NextHop::parse(hop, &["blackhole"]),
                        );
                    }
                }
                _ => {}
            }
        }
        items.extend(routes.into_iter().map(|(k, hops)| (k, Value::Route(hops))));
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
