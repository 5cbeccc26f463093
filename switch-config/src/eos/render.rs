//! Arista EOS: laying changes out as configure-session lines (`templates/switch/eos/`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{EcnCurve, Key, MAX_VALUES_PER_MAP_LINE, Threshold, Value};
use crate::items::Change;
use crate::text::{RouteChange, dscps_by_class, route_change, wanted};
use crate::{Error, SwitchIntent, templates};

/// The commands (or, when `full`, the whole configuration) for `changes`.
pub(super) fn layout(
    intent: &SwitchIntent,
    changes: &[Change<Key, Value>],
    full: bool,
) -> Result<String, Error> {
    templates::render(intent, "eos/config.tera", &View::of(intent, changes, full))
}

/// What the template lays out: a full configuration, or the commands for some changes.
#[derive(Serialize)]
struct View<'a> {
    switch: &'a str,
    /// A whole configuration (with a title), not a list of fixes.
    full: bool,
    dscp_maps: Vec<MapLine>,
    class_queues: Vec<MapLine>,
    profile: Option<ProfileView>,
    /// The profile goes whole (`no qos profile MLT`): going back to a switch that had
    /// none, as a rollback does; the plan itself always keeps it.
    remove_profile: bool,
    interfaces: Vec<InterfaceView>,
    /// By prefix, in key order: each prefix's removals, then its additions.
    routes: Vec<RouteChange>,
    /// Switch-wide lines to enter as they are (`no …` to remove one).
    globals: Vec<String>,
}

#[derive(Serialize)]
struct MapLine {
    values: Vec<u8>,
    target: u8,
}

#[derive(Serialize, Default)]
struct ProfileView {
    trust: Option<String>,
    queues: Vec<QueueView>,
}

#[derive(Serialize)]
struct QueueView {
    queue: u8,
    /// `strict`, `round-robin`, or unchanged.
    priority: Option<&'static str>,
    /// The curve to set, or to remove; unchanged if absent.
    ecn: Option<EcnView>,
    /// The WRED drop curve to set, or to remove; unchanged if absent.
    drop: Option<EcnView>,
}

/// `random-detect ecn|drop …` of a tx-queue, or its removal.
#[derive(Serialize)]
#[serde(tag = "set", rename_all = "lowercase")]
enum EcnView {
    On {
        min: ThresholdView,
        max: ThresholdView,
        probability: u8,
    },
    Off,
}

/// A queue length: an amount and EOS's unit for it.
#[derive(Serialize)]
struct ThresholdView {
    amount: u64,
    unit: String,
}

impl From<&EcnCurve> for EcnView {
    fn from(c: &EcnCurve) -> Self {
        EcnView::On {
            min: (&c.min).into(),
            max: (&c.max).into(),
            probability: c.probability,
        }
    }
}

impl From<&Threshold> for ThresholdView {
    fn from(t: &Threshold) -> Self {
        match t {
            Threshold::Bytes(bytes) => ThresholdView {
                amount: *bytes,
                unit: "bytes".into(),
            },
            Threshold::Other { amount, unit } => ThresholdView {
                amount: *amount,
                unit: unit.clone(),
            },
        }
    }
}

/// One interface's changes: its service profile (applied or removed) and the
/// `tx-queue` settings of its own that are cleared.
#[derive(Serialize)]
struct InterfaceView {
    name: String,
    profile: Option<bool>,
    queues: Vec<QueueView>,
}
impl<'a> View<'a> {
    fn of(intent: &'a SwitchIntent, changes: &[Change<Key, Value>], full: bool) -> View<'a> {
        let number = |key: fn(&Key) -> Option<u8>| {
            let pairs = wanted(changes).filter_map(move |(k, v)| match v {
                Value::Number(n) => key(k).map(|x| (x, *n)),
                _ => None,
            });
            map_lines(dscps_by_class(pairs))
        };
        let dscp_maps = number(|k| match k {
            Key::DscpClass(d) => Some(*d),
            _ => None,
        });
        let class_queues = number(|k| match k {
            Key::ClassQueue(t) => Some(*t),
            _ => None,
        });
        let mut profile: Option<ProfileView> = None;
        let mut queues: BTreeMap<u8, QueueView> = BTreeMap::new();
        let mut interfaces: BTreeMap<String, InterfaceView> = BTreeMap::new();
        let mut routes = Vec::new();
        let mut globals = Vec::new();
        let mut remove_profile = false;
        for change in changes {
            match (change.key(), change.to()) {
                // An existing profile reads as trust and priority items: with those gone
                // the switch had no profile.
                (Key::ProfileTrust | Key::QueuePriority(_), None) => remove_profile = true,
                (Key::ProfileTrust, Some(Value::Trust(t))) => {
                    profile.get_or_insert_default().trust = Some(t.clone());
                }
                (Key::QueuePriority(q), Some(Value::Strict(strict))) => {
                    queue_view(&mut queues, *q).priority =
                        Some(if *strict { "strict" } else { "round-robin" });
                }
                (Key::QueueEcn(q), Some(Value::Curve(c))) => {
                    queue_view(&mut queues, *q).ecn = Some(c.into());
                }
                (Key::QueueEcn(q), None) => queue_view(&mut queues, *q).ecn = Some(EcnView::Off),
                (Key::QueueDrop(q), Some(Value::Curve(c))) => {
                    queue_view(&mut queues, *q).drop = Some(c.into());
                }
                (Key::QueueDrop(q), None) => queue_view(&mut queues, *q).drop = Some(EcnView::Off),
                (Key::ServiceProfile(port), to) => {
                    interface(&mut interfaces, port).profile = Some(to.is_some())
                }
                // A whole configuration has no port settings of its own to clear.
                (
                    Key::PortQueuePriority(..) | Key::PortQueueEcn(..) | Key::PortQueueDrop(..),
                    _,
                ) if full => {}
                (Key::PortQueuePriority(port, q), Some(Value::Strict(strict))) => {
                    port_queue(interface(&mut interfaces, port), *q).priority =
                        Some(if *strict { "strict" } else { "round-robin" });
                }
                (Key::PortQueueEcn(port, q), Some(Value::Inherited)) => {
                    port_queue(interface(&mut interfaces, port), *q).ecn = Some(EcnView::Off);
                }
                (Key::PortQueueDrop(port, q), Some(Value::Inherited)) => {
                    port_queue(interface(&mut interfaces, port), *q).drop = Some(EcnView::Off);
                }
                (Key::AllowNonEct, Some(Value::Line(line))) => globals.push(line.clone()),
                (Key::AllowNonEct, None) => {
                    globals.push("no qos random-detect ecn allow non-ect".into())
                }
                (Key::Route(prefix), _) => {
                    routes.extend(
                        route_change(
                            *prefix,
                            change.from().and_then(Value::hops),
                            change.to().and_then(Value::hops),
                        )
                        .map(|c| c.written("Null0", |hop| hop)),
                    );
                }
                _ => {}
            }
        }
        if remove_profile {
            profile = None;
            queues.clear();
        }
        if !queues.is_empty() {
            // In ascending order, as EOS lists them.
            profile.get_or_insert_default().queues = queues.into_values().collect();
        }
        View {
            switch: &intent.name,
            full,
            dscp_maps,
            class_queues,
            profile,
            remove_profile,
            interfaces: interfaces.into_values().collect(),
            routes,
            globals,
        }
    }
}

/// The changes of interface `name`, added on first use.
fn interface<'m>(
    interfaces: &'m mut BTreeMap<String, InterfaceView>,
    name: &str,
) -> &'m mut InterfaceView {
    interfaces
        .entry(name.to_string())
        .or_insert_with(|| InterfaceView {
            name: name.to_string(),
            profile: None,
            queues: Vec::new(),
        })
}

/// The settings of `queue` on `interface`, added on first use.
fn port_queue(interface: &mut InterfaceView, queue: u8) -> &mut QueueView {
    let at = match interface.queues.iter().position(|q| q.queue == queue) {
        Some(at) => at,
        None => {
            interface.queues.push(QueueView {
                queue,
                priority: None,
                ecn: None,
                drop: None,
            });
            interface.queues.len() - 1
        }
    };
    &mut interface.queues[at]
}

fn queue_view(queues: &mut BTreeMap<u8, QueueView>, queue: u8) -> &mut QueueView {
    queues.entry(queue).or_insert(QueueView {
        queue,
        priority: None,
        ecn: None,
        drop: None,
    })
}

fn map_lines(groups: BTreeMap<u8, Vec<u8>>) -> Vec<MapLine> {
    let mut lines = Vec::new();
    for (target, values) in groups {
        for chunk in values.chunks(MAX_VALUES_PER_MAP_LINE) {
            lines.push(MapLine {
                values: chunk.to_vec(),
                target,
            });
        }
    }
    lines
}
