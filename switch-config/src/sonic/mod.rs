//! SONiC: config_db tables as JSON, and RFC 6902 JSON patches for the generic config
//! updater (`config apply-patch`).
//!
//! What the plan owns:
//! - `DSCP_TO_TC_MAP|MLT` (all 64 DSCP values) and `TC_TO_QUEUE_MAP|MLT`;
//! - `SCHEDULER|MLT_STRICT` (type STRICT), bound to every owned queue;
//! - `WRED_PROFILE|MLT_Q<q>` per gradient queue, the step S_i of MLT Appendix B: green
//!   WRED with `ecn: ecn_green`, `green_min_threshold` = `green_max_threshold` = S_i
//!   (bytes, exactly), `green_drop_probability` 100: above S_i ECT packets are marked
//!   and Not-ECT packets dropped. All traffic of the plan is green. The YANG model
//!   allows max = min (`must "current() >= ../green_min_threshold"`), and orchagent
//!   refuses only min > max.
//! - `BUFFER_PROFILE|MLT_Q<q>_LIMIT` per gradient queue, the limit L_i for every
//!   packet: `pool: egress_lossy_pool` (the name every SONiC buffer template gives the
//!   egress lossy pool; the switch must have it), `size: 0` and `static_th` = L_i. A
//!   static threshold caps the queue's use of the shared pool at that many bytes
//!   (SAI's `SHARED_STATIC_TH`); `size` reserves nothing. The threshold mode of a
//!   buffer profile is fixed when orchagent creates it, hence a profile of the plan's
//!   own rather than an edit of the SKU's dynamic one.
//! - `QUEUE|<port>|<q>` for every port and owned queue (its `scheduler` and
//!   `wred_profile`), and any other `QUEUE` entry naming an `MLT_` object (stale);
//! - `BUFFER_QUEUE|<port>|<q>` (its `profile`) for every port and gradient queue, one
//!   port per key as the YANG model's leafref wants, and any other `BUFFER_QUEUE`
//!   entry naming an `MLT_` profile (stale, removed whole: that queue falls back to
//!   the switch's default buffering; the profile it had before the plan is not
//!   known). The plan's queues are the plan's: a lossless profile the SKU bound to
//!   one of them (PFC queues 3–4 in older templates) is replaced, as its scheduler
//!   and WRED profile already are;
//! - the `dscp_to_tc_map` and `tc_to_queue_map` fields of `PORT_QOS_MAP|<port>` — the
//!   entry's other fields (PFC and the like) are left alone;
//! - `STATIC_ROUTE|default|<prefix>` inside the plan's scope; a discard is
//!   `blackhole: true`.
//!
//! JSON patch cannot add an object to a table that does not exist, so each owned table
//! is also an item: a table the plan needs but the switch lacks is created first.
//!
//! Spelling is not a difference: references written the old way (`[SCHEDULER|x]`) and
//! route keys without `default|` compare equal to the plan's.
//!
//! One entry may set several ports or queues: `QUEUE|Ethernet0|3-4` and
//! `BUFFER_QUEUE|Ethernet0|0-2` (QoS and buffer templates), `Ethernet0,Ethernet4|3` and `PORT_QOS_MAP|Ethernet0,Ethernet4` (SONiC
//! before 2019). When such an entry covers one of the plan's ports or queues, the plan's
//! own entry would compete with it (orchagent applies both, in no set order), so the
//! shared entry is split: removed, and written again for what is not the plan's, with
//! the same fields — a foreign port or queue keeps its settings.

pub mod counters;
mod doc;
pub(crate) mod push;
mod render;

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value as Json};

use self::doc::{Doc, Fields, Node, Sorted};
use crate::items::{Change, Items};
use crate::text::{NextHop, NextHops, add_route, number_list, parse_error, planned_routes, ranges};
use crate::{Driver, Error, SwitchIntent};

pub struct Sonic;

const MAP: &str = "MLT";
const SCHEDULER: &str = "MLT_STRICT";
const OWNED_PREFIX: &str = "MLT_";
/// The highest queue index a QUEUE key may name (unicast and multicast queues).
const MAX_QUEUE: u32 = 63;

const TABLES: [Table; 9] = [
    Table::DscpToTcMap,
    Table::TcToQueueMap,
    Table::Scheduler,
    Table::WredProfile,
    Table::BufferProfile,
    Table::Queue,
    Table::BufferQueue,
    Table::PortQosMap,
    Table::StaticRoute,
];
/// The egress pool of lossy traffic, as every SONiC buffer template names it.
const LOSSY_POOL: &str = "egress_lossy_pool";

/// In the order a patch adds them: a referenced table before the tables that refer
/// to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Table {
    DscpToTcMap,
    TcToQueueMap,
    Scheduler,
    WredProfile,
    BufferProfile,
    Queue,
    BufferQueue,
    PortQosMap,
    StaticRoute,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::DscpToTcMap => "DSCP_TO_TC_MAP",
            Table::TcToQueueMap => "TC_TO_QUEUE_MAP",
            Table::Scheduler => "SCHEDULER",
            Table::WredProfile => "WRED_PROFILE",
            Table::BufferProfile => "BUFFER_PROFILE",
            Table::Queue => "QUEUE",
            Table::BufferQueue => "BUFFER_QUEUE",
            Table::PortQosMap => "PORT_QOS_MAP",
            Table::StaticRoute => "STATIC_ROUTE",
        }
    }
}

/// An object (`field: None`) or one field of it; a whole table when `object` is empty.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    table: Table,
    /// Shared by the object's fields (a 512-port spine has tens of thousands).
    object: Arc<str>,
    field: Option<Cow<'static, str>>,
}

#[derive(Debug, Clone)]
pub enum Value {
    Table(Presence),
    /// The object exists; holds its key as the switch spells it.
    Object(String),
    Field(String),
    /// A static route: where it goes, and its key as the switch spells it.
    Route {
        hops: NextHops,
        key: String,
    },
    /// An entry shared by the plan's ports or queues and others (never planned): its
    /// fields as the switch has them, and the entries that replace it for the others.
    Shared {
        original: Map<String, Json>,
        kept: Vec<(String, Map<String, Json>)>,
    },
}

/// Whether a table exists (running) or must exist (plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Required,
    Optional,
    Present,
    Absent,
}

/// Spellings of keys are not differences (see the module documentation), and a table
/// differs only when the plan requires it and the switch lacks it.
impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Table(a), Value::Table(b)) => !matches!(
                (a, b),
                (Presence::Required, Presence::Absent) | (Presence::Absent, Presence::Required)
            ),
            (Value::Object(_), Value::Object(_)) => true,
            (Value::Field(a), Value::Field(b)) => a == b,
            (Value::Route { hops: a, .. }, Value::Route { hops: b, .. }) => a == b,
            // What a shared entry sets is the switch's, not the plan's: two switches
            // that both have it do not differ in what the plan owns.
            (Value::Shared { .. }, Value::Shared { .. }) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.table.name())?;
        if !self.object.is_empty() {
            write!(f, "|{}", self.object)?;
        }
        match &self.field {
            Some(field) => write!(f, " {field}"),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Table(Presence::Required | Presence::Present) | Value::Object(_) => {
                f.write_str("present")
            }
            Value::Table(Presence::Optional) => f.write_str("not needed"),
            Value::Table(Presence::Absent) => f.write_str("absent"),
            Value::Field(v) => f.write_str(v),
            Value::Route { hops, .. } => write!(f, "{hops}"),
            Value::Shared { kept, .. } if kept.is_empty() => {
                f.write_str("shared with the plan's entries; split, nothing else to keep")
            }
            Value::Shared { kept, .. } => {
                let names: Vec<&str> = kept.iter().map(|(k, _)| k.as_str()).collect();
                write!(
                    f,
                    "shared with the plan's entries; split, keeping {}",
                    names.join(", ")
                )
            }
        }
    }
}

impl Driver for Sonic {
    fn maps_dscp(key: &Key) -> bool {
        matches!(
            key.table,
            Table::DscpToTcMap | Table::TcToQueueMap | Table::PortQosMap
        )
    }

    type Key = Key;
    type Value = Value;

    fn expected(intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        let qos = &intent.qos;
        // Pushed, then sorted once: far cheaper than a tree insert each (a 512-port
        // spine has tens of thousands of items). Every key is pushed once; were one pushed
        // twice, collecting keeps one of them, not an error.
        let mut items = Vec::new();
        let mut object = |table: Table, name: String, fields: Vec<(Cow<'static, str>, String)>| {
            let shared: Arc<str> = name.as_str().into();
            let key = |field: Option<Cow<'static, str>>| Key {
                table,
                object: shared.clone(),
                field,
            };
            items.push((key(None), Value::Object(name)));
            for (field, value) in fields {
                items.push((key(Some(field)), Value::Field(value)));
            }
        };
        let numbered = |values: &[u8]| -> Vec<(Cow<'static, str>, String)> {
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (i.to_string().into(), v.to_string()))
                .collect()
        };
        object(Table::DscpToTcMap, MAP.into(), numbered(&qos.dscp_to_tc));
        object(Table::TcToQueueMap, MAP.into(), numbered(&qos.tc_to_queue));
        object(
            Table::Scheduler,
            SCHEDULER.into(),
            vec![("type".into(), "STRICT".into())],
        );
        for q in &qos.queues {
            if let Some(ecn) = q.ecn {
                let fields = vec![
                    ("ecn".into(), "ecn_green".into()),
                    ("green_drop_probability".into(), "100".into()),
                    ("green_max_threshold".into(), ecn.mark_bytes.to_string()),
                    ("green_min_threshold".into(), ecn.mark_bytes.to_string()),
                    ("wred_green_enable".into(), "true".into()),
                ];
                object(Table::WredProfile, wred_name(q.queue), fields);
                if let Some(limit) = ecn.limit_bytes {
                    let fields = vec![
                        ("pool".into(), LOSSY_POOL.into()),
                        ("size".into(), "0".into()),
                        ("static_th".into(), limit.to_string()),
                    ];
                    object(Table::BufferProfile, limit_name(q.queue), fields);
                }
            }
        }
        for port in &qos.ports {
            for q in &qos.queues {
                let mut fields = vec![("scheduler".into(), SCHEDULER.to_string())];
                if q.ecn.is_some() {
                    fields.push(("wred_profile".into(), wred_name(q.queue)));
                }
                object(Table::Queue, format!("{port}|{}", q.queue), fields);
                if q.ecn.is_some_and(|e| e.limit_bytes.is_some()) {
                    let fields = vec![("profile".into(), limit_name(q.queue))];
                    object(Table::BufferQueue, format!("{port}|{}", q.queue), fields);
                }
            }
            let maps = vec![
                ("dscp_to_tc_map".into(), MAP.to_string()),
                ("tc_to_queue_map".into(), MAP.to_string()),
            ];
            object(Table::PortQosMap, port.clone(), maps);
        }
        for (prefix, hops) in planned_routes(intent) {
            let key = format!("default|{prefix}");
            let route = Key {
                table: Table::StaticRoute,
                object: key.as_str().into(),
                field: None,
            };
            items.push((route, Value::Route { hops, key }));
        }
        for table in TABLES {
            let used = items.iter().any(|(k, _)| k.table == table);
            let presence = if used {
                Presence::Required
            } else {
                Presence::Optional
            };
            items.push((table_key(table), Value::Table(presence)));
        }
        Ok(items.into_iter().collect())
    }

    fn parse(running: &str, intent: &SwitchIntent) -> Result<Items<Key, Value>, Error> {
        let mut items = Items::new();
        let doc: Doc = if running.trim().is_empty() {
            Node::empty()
        } else {
            serde_json::from_str(running).map_err(|e| {
                parse_error(
                    intent,
                    e.line(),
                    format!(
                        "not config_db JSON (as `sonic-cfggen -d --print-data` prints it): {e}"
                    ),
                )
            })?
        };
        let table = |name: &str| {
            doc.as_object()
                .and_then(|tables| tables.get(name))
                .and_then(Node::as_object)
        };
        for kind in TABLES {
            let presence = if table(kind.name()).is_some() {
                Presence::Present
            } else {
                Presence::Absent
            };
            items.insert(table_key(kind), Value::Table(presence));
        }
        for (table_kind, name) in [(Table::DscpToTcMap, MAP), (Table::TcToQueueMap, MAP)] {
            if let Some(object) = table(table_kind.name())
                .and_then(|t| t.get(name))
                .and_then(Node::as_object)
            {
                add_object(&mut items, table_kind, name, object, None);
            }
        }
        for table_kind in [Table::Scheduler, Table::WredProfile, Table::BufferProfile] {
            for (name, object) in table(table_kind.name()).into_iter().flatten() {
                if let (true, Some(object)) = (name.starts_with(OWNED_PREFIX), object.as_object()) {
                    add_object(&mut items, table_kind, name, object, None);
                }
            }
        }
        // A set: a spine's queue tables have an entry per port and queue, each looked up.
        let ports: HashSet<&str> = intent.qos.ports.iter().map(String::as_str).collect();
        let planned_port = |port: &str| ports.contains(port);
        let planned_queue = |port: &str, q: u32| {
            planned_port(port) && intent.qos.queues.iter().any(|o| u32::from(o.queue) == q)
        };
        let queue_fields: &[&str] = &["scheduler", "wred_profile"];
        add_queue_entries(
            &mut items,
            Table::Queue,
            queue_fields,
            table(Table::Queue.name()),
            &planned_queue,
        );
        // Only queues with a limit have a BUFFER_QUEUE entry of the plan's.
        let limited_queue = |port: &str, q: u32| {
            planned_port(port)
                && intent.qos.queues.iter().any(|o| {
                    u32::from(o.queue) == q && o.ecn.is_some_and(|e| e.limit_bytes.is_some())
                })
        };
        add_queue_entries(
            &mut items,
            Table::BufferQueue,
            &["profile"],
            table(Table::BufferQueue.name()),
            &limited_queue,
        );
        let map_fields = ["dscp_to_tc_map", "tc_to_queue_map"];
        let map_table = table(Table::PortQosMap.name());
        for (name, object) in map_table.into_iter().flatten() {
            let Some(object) = object.as_object() else {
                continue;
            };
            if planned_port(name) {
                add_object(
                    &mut items,
                    Table::PortQosMap,
                    name,
                    object,
                    Some(&map_fields),
                );
                continue;
            }
            // `global` is the switch-wide default binding (sonic-port-qos-map.yang), not a
            // port: whatever it binds is the switch's, never the plan's to remove.
            if name == "global" {
                continue;
            }
            let members: Vec<&str> = name.split(',').collect();
            if members.iter().any(|p| planned_port(p)) {
                let mut kept = Vec::new();
                for port in members {
                    if map_table.is_some_and(|t| t.contains_key(port)) {
                        continue;
                    }
                    let ours = planned_port(port);
                    // A plan's port keeps its other fields (PFC and the like) and gets
                    // the plan's maps on top; another port loses only the plan's maps.
                    let fields: Map<String, Json> = object
                        .iter()
                        .filter(|(field, value)| {
                            !map_fields.contains(&field.as_str())
                                || (!ours && normalise(value) != MAP)
                        })
                        .map(|(f, v)| (f.clone(), v.clone()))
                        .collect();
                    if ours {
                        if fields.is_empty() {
                            continue;
                        }
                        items.insert(
                            object_key(Table::PortQosMap, port),
                            Value::Object(port.to_string()),
                        );
                    }
                    kept.push((port.to_string(), fields));
                }
                let original = object.to_map();
                items.insert(
                    object_key(Table::PortQosMap, name),
                    Value::Shared { original, kept },
                );
                continue;
            }
            // Another port bound to the plan's maps: those fields are stale.
            for field in map_fields {
                if let Some(value) = object.get(field).map(normalise).filter(|v| v == MAP) {
                    let key = Key {
                        table: Table::PortQosMap,
                        object: name.as_str().into(),
                        field: Some(field.to_string().into()),
                    };
                    items.insert(key, Value::Field(value));
                }
            }
        }
        let mut routes: Items<(String, String), NextHops> = Items::new();
        for (name, object) in table(Table::StaticRoute.name()).into_iter().flatten() {
            let (vrf, prefix) = name.split_once('|').unwrap_or(("default", name));
            let Ok(prefix) = prefix.parse() else { continue };
            if vrf != "default" || !intent.owns_route(&prefix) {
                continue;
            }
            let field = |f: &str| {
                object
                    .as_object()
                    .and_then(|fields| fields.get(f))
                    .map(normalise)
                    .unwrap_or_default()
            };
            for hop in route_hops(&field) {
                add_route(
                    &mut routes,
                    (format!("default|{prefix}"), name.clone()),
                    hop,
                );
            }
        }
        for ((object, key), hops) in routes {
            let route = Key {
                table: Table::StaticRoute,
                object: object.into(),
                field: None,
            };
            items.insert(route, Value::Route { hops, key });
        }
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

/// Entries of a per-port queue table (`QUEUE`, `BUFFER_QUEUE`; keys `PORTS|QUEUES`):
/// the plan's own entries with their owned `fields`, entries shared by the plan's
/// queues and others (split), and other entries' stale references to the plan's objects.
fn add_queue_entries(
    items: &mut Items<Key, Value>,
    table_kind: Table,
    queue_fields: &[&str],
    queue_table: Option<&Sorted<Node<Json>>>,
    planned_queue: &dyn Fn(&str, u32) -> bool,
) {
    for (name, object) in queue_table.into_iter().flatten() {
        let (Some((port_list, queue_list)), Some(object)) =
            (name.rsplit_once('|'), object.as_object())
        else {
            continue;
        };
        let Ok(queues) = number_list(queue_list, MAX_QUEUE) else {
            continue;
        };
        let members: Vec<&str> = port_list.split(',').collect();
        if let ([port], [queue]) = (members.as_slice(), queues.as_slice())
            && planned_queue(port, *queue)
            && *name == format!("{port}|{queue}")
        {
            add_object(items, table_kind, name, object, Some(queue_fields));
            continue;
        }
        if members
            .iter()
            .any(|p| queues.iter().any(|q| planned_queue(p, *q)))
        {
            let fields = without_references(object);
            let mut kept = Vec::new();
            for port in &members {
                let rest: Vec<u8> = queues
                    .iter()
                    .filter(|q| !planned_queue(port, **q))
                    .map(|q| *q as u8)
                    .collect();
                for run in ranges(&rest) {
                    let key = format!("{port}|{run}");
                    // An entry of its own already sets it, and stays as it is.
                    if queue_table.is_none_or(|t| !t.contains_key(&key)) {
                        kept.push((key, fields.clone()));
                    }
                }
            }
            let original = object.to_map();
            items.insert(
                object_key(table_kind, name),
                Value::Shared { original, kept },
            );
            continue;
        }
        // Another queue pointing at the plan's scheduler or profiles: those fields
        // are stale (the queue itself is not the plan's, so it stays). A buffer
        // binding has no other field, so its entry goes whole.
        let stale = |field: &&str| {
            object
                .get(field)
                .is_some_and(|v| normalise(v).starts_with(OWNED_PREFIX))
        };
        if table_kind == Table::BufferQueue && queue_fields.iter().any(stale) {
            items.insert(object_key(table_kind, name), Value::Object(name.clone()));
            continue;
        }
        for field in queue_fields {
            if let Some(value) = object
                .get(field)
                .map(normalise)
                .filter(|v| v.starts_with(OWNED_PREFIX))
            {
                let key = Key {
                    table: table_kind,
                    object: name.as_str().into(),
                    field: Some(field.to_string().into()),
                };
                items.insert(key, Value::Field(value));
            }
        }
    }
}

/// Records a running object and its fields (only `fields`, when given).
fn add_object(
    items: &mut Items<Key, Value>,
    table: Table,
    name: &str,
    object: &Fields,
    fields: Option<&[&str]>,
) {
    let shared: Arc<str> = name.into();
    let key = |field: Option<&str>| Key {
        table,
        object: shared.clone(),
        field: field.map(|f| Cow::Owned(f.to_string())),
    };
    items.insert(key(None), Value::Object(name.to_string()));
    for (field, value) in object {
        if fields.is_none_or(|owned| owned.contains(&field.as_str())) {
            items.insert(key(Some(field)), Value::Field(normalise(value)));
        }
    }
}

/// The next hops of one STATIC_ROUTE entry. Its fields are comma lists aligned by
/// position (sonic-static-route.yang; `config route add` writes all of them, `","`
/// when two hops have no interface): hop i is `nexthop[i]` out of `ifname[i]`, or a
/// discard when `blackhole[i]` is true (the CLI's discard also says `ifname: null`).
/// A hop with an interface, a distance or another VRF is not a form the plan writes.
fn route_hops(field: &dyn Fn(&str) -> String) -> Vec<NextHop> {
    let lists: Vec<Vec<String>> = ["nexthop", "ifname", "blackhole", "distance", "nexthop-vrf"]
        .iter()
        .map(|f| field(f).split(',').map(|v| v.trim().to_string()).collect())
        .collect();
    let count = lists.iter().map(Vec::len).max().unwrap_or(0);
    let at = |list: usize, i: usize| lists[list].get(i).map_or("", String::as_str);
    (0..count)
        .filter_map(|i| {
            let (address, interface, blackhole) = (at(0, i), at(1, i), at(2, i));
            let (distance, vrf) = (at(3, i), at(4, i));
            if blackhole == "true" {
                return Some(NextHop::Discard);
            }
            let mut form: Vec<String> = Vec::new();
            if !address.is_empty() {
                form.push(address.into());
            }
            if !interface.is_empty() && interface != "null" {
                form.push(format!("dev {interface}"));
            }
            if form.is_empty() {
                return None;
            }
            if !matches!(distance, "" | "0") {
                form.push(format!("distance {distance}"));
            }
            if !matches!(vrf, "" | "default") {
                form.push(format!("nexthop-vrf {vrf}"));
            }
            Some(NextHop::parse(&form.join(" "), &[]))
        })
        .collect()
}

/// An entry's fields without its references to the plan's objects.
fn without_references(object: &Fields) -> Map<String, Json> {
    object
        .iter()
        .filter(|(_, value)| !normalise(value).starts_with(OWNED_PREFIX))
        .map(|(f, v)| (f.clone(), v.clone()))
        .collect()
}

fn object_key(table: Table, name: &str) -> Key {
    Key {
        table,
        object: name.into(),
        field: None,
    }
}

fn table_key(table: Table) -> Key {
    Key {
        table,
        object: "".into(),
        field: None,
    }
}

fn wred_name(queue: u8) -> String {
    format!("{OWNED_PREFIX}Q{queue}")
}

fn limit_name(queue: u8) -> String {
    format!("{OWNED_PREFIX}Q{queue}_LIMIT")
}

/// A field value as text, with references and booleans in one spelling.
fn normalise(value: &Json) -> String {
    let text = match value {
        Json::String(s) => s.trim().to_string(),
        other => other.to_string(),
    };
    // Old reference form: [TABLE|name].
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']'))
        && let Some((_, name)) = inner.split_once('|')
    {
        return name.to_string();
    }
    match text.as_str() {
        "True" | "TRUE" => "true".into(),
        "False" | "FALSE" => "false".into(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hops(fields: &[(&str, &str)]) -> Vec<String> {
        let field = |f: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == f)
                .map_or(String::new(), |(_, v)| v.to_string())
        };
        route_hops(&field).iter().map(|h| h.to_string()).collect()
    }

    #[test]
    fn static_route_fields_are_read_by_position() {
        // As `config route add` writes them (sonic-utilities:tests/static_routes_test.py).
        let ecmp = [
            ("nexthop", "10.0.0.1,10.0.0.3"),
            ("ifname", ","),
            ("blackhole", "false,false"),
            ("distance", "0,0"),
            ("nexthop-vrf", ","),
        ];
        assert_eq!(hops(&ecmp), ["10.0.0.1", "10.0.0.3"]);
        let discard = [("nexthop", ""), ("ifname", "null"), ("blackhole", "true")];
        assert_eq!(hops(&discard), ["discard"]);
        let bound = [("nexthop", "10.0.0.1,10.0.0.3"), ("ifname", "Ethernet0,")];
        assert_eq!(hops(&bound), ["10.0.0.1 dev Ethernet0", "10.0.0.3"]);
        assert_eq!(hops(&[("ifname", "Ethernet4")]), ["dev Ethernet4"]);
        let floating = [("nexthop", "10.0.0.1"), ("distance", "200")];
        assert_eq!(hops(&floating), ["10.0.0.1 distance 200"]);
    }

    #[test]
    fn references_and_booleans_have_one_spelling() {
        assert_eq!(normalise(&json!("[SCHEDULER|MLT_STRICT]")), "MLT_STRICT");
        assert_eq!(normalise(&json!("MLT_STRICT")), "MLT_STRICT");
        assert_eq!(normalise(&json!("True")), "true");
        assert_eq!(normalise(&json!(100)), "100");
    }
}
