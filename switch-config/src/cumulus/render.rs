//! NVIDIA Cumulus NVUE: laying changes out as `nv set`/`nv unset` commands
//! (`templates/switch/cumulus/`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Congestion, Key, Value};
use crate::items::Change;
use crate::text::{RouteChange, ranges, route_change};
use crate::{Error, SwitchIntent, templates};

/// The commands (or, when `full`, the whole configuration) for `changes`.
pub(super) fn layout(
    intent: &SwitchIntent,
    changes: &[Change<Key, Value>],
    full: bool,
) -> Result<String, Error> {
    templates::render(
        intent,
        "cumulus/config.tera",
        &View::of(intent, changes, full),
    )
}

#[derive(Serialize)]
struct View<'a> {
    switch: &'a str,
    /// A whole configuration (with a title), not a list of fixes.
    full: bool,
    /// Why the queues' limits L_i are not configured (said in a whole configuration).
    no_queue_limit: Option<&'static str>,
    trust: Option<String>,
    /// (DSCP values, switch priority).
    dscp: Vec<(String, u8)>,
    /// (switch priorities, traffic class).
    priorities: Vec<(String, u8)>,
    /// (traffic classes, mode).
    schedulers: Vec<(String, String)>,
    /// (traffic classes, attribute, value).
    congestion: Vec<(String, &'static str, String)>,
    /// Traffic classes whose congestion control goes.
    congestion_off: Option<String>,
    /// By prefix, in key order: each prefix's removals, then its additions.
    routes: Vec<RouteChange>,
    /// (port, binding) pairs to unset.
    port_profiles: Vec<(String, &'static str)>,
    /// `qos roce` settings to set (shell words), or to unset.
    roce: Vec<String>,
    roce_off: bool,
}

impl<'a> View<'a> {
    fn of(intent: &'a SwitchIntent, changes: &[Change<Key, Value>], full: bool) -> View<'a> {
        let mut trust = None;
        let mut dscp = Vec::new();
        let mut priorities = Vec::new();
        let mut schedulers = Vec::new();
        let mut congestion = Vec::new();
        let mut congestion_off = Vec::new();
        let mut routes = Vec::new();
        let mut port_profiles = Vec::new();
        let mut roce = Vec::new();
        let mut roce_off = false;
        for change in changes {
            match (change.key(), change.to()) {
                (Key::Trust, Some(Value::Word(t))) => trust = Some(t.clone()),
                (Key::DscpPriority(d), Some(Value::Number(p))) => dscp.push((*d, *p)),
                (Key::PriorityClass(p), Some(Value::Number(t))) => priorities.push((*p, *t)),
                (Key::Scheduler(q), Some(Value::Word(mode))) => schedulers.push((*q, mode.clone())),
                (Key::Congestion(q), Some(Value::Congestion(c))) => {
                    congestion.extend(c.attributes().into_iter().map(|a| (*q, a)));
                }
                (Key::Congestion(q), None) => congestion_off.push(*q),
                (Key::PortProfile(port, kind), None) => {
                    port_profiles.push((port.clone(), kind.word()));
                }
                (Key::Roce, None) => roce_off = true,
                (Key::Roce, Some(Value::Settings(settings))) => {
                    roce.extend(settings.iter().map(|words| {
                        let words: Vec<String> =
                            words.iter().map(|w| mlt_common::shell::quote(w)).collect();
                        words.join(" ")
                    }));
                }
                (Key::Route(prefix), _) => {
                    routes.extend(
                        route_change(
                            *prefix,
                            change.from().and_then(Value::hops),
                            change.to().and_then(Value::hops),
                        )
                        .map(|c| c.written("blackhole", |hop| mlt_common::shell::quote(&hop))),
                    );
                }
                _ => {}
            }
        }
        View {
            switch: &intent.name,
            no_queue_limit: intent.vendor.no_queue_limit(),
            full,
            trust,
            dscp: grouped(dscp),
            priorities: grouped(priorities),
            schedulers: grouped(schedulers),
            congestion: grouped(congestion)
                .into_iter()
                .map(|(classes, (_, _, name, value))| (classes, name, value))
                .collect(),
            congestion_off: (!congestion_off.is_empty()).then(|| ranges(&congestion_off).join(",")),
            routes,
            port_profiles,
            roce,
            roce_off,
        }
    }
}

impl Congestion {
    /// Each attribute that is set: (order, number to sort by, name, value).
    fn attributes(&self) -> Vec<(u8, u64, &'static str, String)> {
        let switch = |on: bool| if on { "enable" } else { "disable" }.to_string();
        let number = |order, name, n: u64| (order, n, name, n.to_string());
        [
            self.min_threshold.map(|b| number(0, "min-threshold", b)),
            self.max_threshold.map(|b| number(1, "max-threshold", b)),
            self.probability.map(|p| number(2, "probability", p.into())),
            self.ecn.map(|on| (3, 0, "ecn", switch(on))),
            self.red.map(|on| (4, 0, "red", switch(on))),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// Keys that share a value, as one NVUE list (`0-7,9`) per value, in value order.
fn grouped<V: Ord>(pairs: Vec<(u8, V)>) -> Vec<(String, V)> {
    let mut groups: BTreeMap<V, Vec<u8>> = BTreeMap::new();
    for (key, value) in pairs {
        groups.entry(value).or_default().push(key);
    }
    groups
        .into_iter()
        .map(|(value, keys)| (ranges(&keys).join(","), value))
        .collect()
}
