//! NVIDIA Onyx: laying changes out as one-line CLI commands, ports with equal
//! settings folded into ranges (`templates/switch/onyx/`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Ets, Key, Port, Value, cli_port};
use crate::items::Change;
use crate::text::{RouteChange, dscps_by_class, ranges, route_change};
use crate::{Error, SwitchIntent, templates};

/// The commands (or, when `full`, the whole configuration) for `changes`.
pub(super) fn layout(
    intent: &SwitchIntent,
    changes: &[Change<Key, Value>],
    full: bool,
) -> Result<String, Error> {
    templates::render(intent, "onyx/config.tera", &View::of(intent, changes, full))
}

#[derive(Serialize)]
struct View<'a> {
    switch: &'a str,
    /// A whole configuration (with a title), not a list of fixes.
    full: bool,
    /// Why the queues' limits L_i are not configured (said in a whole configuration).
    no_queue_limit: Option<&'static str>,
    ports: Vec<PortView>,
    /// By prefix, in key order: each prefix's removals, then its additions.
    routes: Vec<RouteChange>,
}

/// Settings for one port, or a range of ports that share them.
#[derive(Serialize)]
struct PortView {
    /// `1/5`, or `1/1-1/32` for a range.
    cli: String,
    #[serde(flatten)]
    settings: PortSettings,
}

#[derive(Serialize, Default, PartialEq)]
struct PortSettings {
    trust: Option<String>,
    dscp_maps: Vec<(String, u8)>,
    bindings: Vec<(u8, String)>,
    /// (queue, `strict` or `wrr W`) to set.
    ets: Vec<(u8, String)>,
    /// Queues going back to the default scheduling.
    ets_default: Vec<u8>,
    /// (queue, control, min KB, max KB) to set.
    ecn: Vec<(u8, String, u64, u64)>,
    ecn_off: Vec<u8>,
}

impl<'a> View<'a> {
    fn of(intent: &'a SwitchIntent, changes: &[Change<Key, Value>], full: bool) -> View<'a> {
        let mut ports: BTreeMap<&Port, PortSettings> = BTreeMap::new();
        let mut dscps: BTreeMap<&Port, Vec<(u8, u8)>> = BTreeMap::new();
        let mut routes = Vec::new();
        for change in changes {
            let port = match change.key() {
                Key::Trust(p)
                | Key::DscpPriority(p, _)
                | Key::ClassBinding(p, _)
                | Key::Ets(p, _)
                | Key::Ecn(p, _) => p,
                Key::Route(prefix) => {
                    routes.extend(
                        route_change(
                            *prefix,
                            change.from().and_then(Value::hops),
                            change.to().and_then(Value::hops),
                        )
                        .map(|c| c.written("null0", |hop| hop)),
                    );
                    continue;
                }
            };
            let view = ports.entry(port).or_default();
            match (change.key(), change.to()) {
                (Key::Trust(_), Some(Value::Trust(t))) => view.trust = Some(t.clone()),
                (Key::DscpPriority(_, d), Some(Value::Number(sp))) => {
                    dscps.entry(port).or_default().push((*d, *sp));
                }
                (Key::ClassBinding(_, class), Some(Value::Priorities(set))) if !set.is_empty() => {
                    let list: Vec<String> = set.iter().map(ToString::to_string).collect();
                    view.bindings.push((*class, list.join(" ")));
                }
                (Key::Ets(_, q), Some(Value::Ets(Ets::Default))) => view.ets_default.push(*q),
                (Key::Ets(_, q), Some(ets @ Value::Ets(_))) => view.ets.push((*q, ets.to_string())),
                (
                    Key::Ecn(_, q),
                    Some(Value::Ecn {
                        control,
                        min_kb,
                        max_kb,
                    }),
                ) => {
                    view.ecn.push((*q, control.clone(), *min_kb, *max_kb));
                }
                (Key::Ecn(_, q), None) => view.ecn_off.push(*q),
                _ => {}
            }
        }
        for (port, pairs) in dscps {
            let view = ports
                .get_mut(port)
                .expect("every DSCP change has a port view");
            for (target, values) in dscps_by_class(pairs.into_iter()) {
                view.dscp_maps
                    .extend(ranges(&values).into_iter().map(|r| (r, target)));
            }
        }
        View {
            switch: &intent.name,
            no_queue_limit: intent.vendor.no_queue_limit(),
            full,
            ports: port_ranges(ports),
            routes,
        }
    }
}

/// Neighbouring ports of one module (`1/3` follows `1/2`) with the same settings,
/// merged into ranges, as Onyx itself writes them.
fn port_ranges(ports: BTreeMap<&Port, PortSettings>) -> Vec<PortView> {
    let mut out: Vec<(String, u32, PortView)> = Vec::new();
    for (port, settings) in ports {
        let cli = cli_port(&port.name).unwrap_or_else(|| port.name.to_string());
        let (module, number) = match cli
            .rsplit_once('/')
            .and_then(|(m, n)| Some((m, n.parse::<u32>().ok()?)))
        {
            Some((m, n)) => (m.to_string(), n),
            None => (cli.clone(), 0),
        };
        if let Some((last_module, last_number, view)) = out.last_mut()
            && *last_module == module
            && *last_number + 1 == number
            && view.settings == settings
        {
            let first = view.cli.split('-').next().unwrap_or_default().to_string();
            view.cli = format!("{first}-{cli}");
            *last_number = number;
            continue;
        }
        out.push((module, number, PortView { cli, settings }));
    }
    out.into_iter().map(|(_, _, view)| view).collect()
}
