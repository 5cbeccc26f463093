//! SONiC: laying changes out as config_db tables (`templates/switch/sonic/`) or, for
//! a running switch, as the JSON patch the generic config updater applies.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value as Json, json};

use super::{Key, Presence, Table, Value};
use crate::items::Change;
use crate::text::NextHops;
use crate::{Error, SwitchIntent, templates};

/// The JSON patch for `changes` or, when `full`, the whole configuration.
pub(super) fn layout(
    intent: &SwitchIntent,
    changes: &[Change<Key, Value>],
    full: bool,
) -> Result<String, Error> {
    if full {
        let expected = changes.iter().filter_map(|c| Some((c.key(), c.to()?)));
        config_db(intent, expected)
    } else {
        Ok(patch(changes))
    }
}

/// The tables holding `expected`, as config_db JSON.
fn config_db<'a>(
    intent: &SwitchIntent,
    expected: impl Iterator<Item = (&'a Key, &'a Value)>,
) -> Result<String, Error> {
    let mut tables: BTreeMap<Table, BTreeMap<String, Map<String, Json>>> = BTreeMap::new();
    for (key, value) in expected {
        if let Value::Table(_) = value {
            continue;
        }
        let objects = tables.entry(key.table).or_default();
        match (value, &key.field) {
            (Value::Object(_), None) => {
                objects.entry(key.object.clone()).or_default();
            }
            (Value::Field(v), Some(field)) => {
                let object = objects.entry(key.object.clone()).or_default();
                object.insert(field.clone(), Json::String(v.clone()));
            }
            (Value::Route { hops, .. }, _) => {
                objects.insert(key.object.clone(), route_fields(hops));
            }
            // Only a configuration read from a switch holds one (the journal's copy).
            (Value::Shared { original, .. }, None) => {
                objects.insert(key.object.clone(), original.clone());
            }
            _ => {}
        }
    }
    let view = View {
        switch: &intent.name,
        tables: tables
            .into_iter()
            .map(|(table, objects)| TableView {
                name: table.name(),
                objects: objects
                    .into_iter()
                    .map(|(key, fields)| ObjectView {
                        key,
                        fields: ordered_fields(fields),
                    })
                    .collect(),
            })
            .collect(),
    };
    templates::render(intent, "sonic/config.tera", &view)
}

/// A JSON patch: removals first (referencing tables before referenced ones), then
/// additions and replacements (referenced tables first).
fn patch(changes: &[Change<Key, Value>]) -> String {
    let mut removals = Vec::new();
    let mut splits = Vec::new();
    let mut updates = Vec::new();
    let mut by_object: BTreeMap<(Table, &str), Vec<&Change<Key, Value>>> = BTreeMap::new();
    for change in changes {
        let key = change.key();
        by_object
            .entry((key.table, key.object.as_str()))
            .or_default()
            .push(change);
    }
    for ((table, object), changes) in by_object {
        let path = |name: &str, field: Option<&str>| {
            let mut p = format!("/{}/{}", table.name(), pointer(name));
            if let Some(field) = field {
                p = format!("{p}/{}", pointer(field));
            }
            p
        };
        let whole = changes.iter().find(|c| c.key().field.is_none());
        match whole {
            Some(c) if object.is_empty() => {
                if let Some(Value::Table(Presence::Required)) = c.to() {
                    let path = format!("/{}", table.name());
                    updates.push(json!({"op": "add", "path": path, "value": {}}));
                }
            }
            Some(Change::Add {
                to: Value::Route { hops, .. },
                ..
            }) => {
                updates.push(
                    json!({"op": "add", "path": path(object, None), "value": route_fields(hops)}),
                );
            }
            Some(Change::Modify {
                from: Value::Route { key, .. },
                to: Value::Route { hops, .. },
                ..
            }) => {
                updates.push(
                    json!({"op": "replace", "path": path(key, None), "value": route_fields(hops)}),
                );
            }
            // The shared entry goes, and what it set for others comes back entry by
            // entry before the plan's own fields land on its ports.
            Some(Change::Add {
                to: Value::Shared { original, .. },
                ..
            }) => {
                updates.push(json!({"op": "add", "path": path(object, None), "value": original}));
            }
            Some(Change::Remove {
                from: Value::Shared { kept, .. },
                ..
            }) => {
                removals.push((table, json!({"op": "remove", "path": path(object, None)})));
                for (name, fields) in kept {
                    splits.push(json!({"op": "add", "path": path(name, None), "value": fields}));
                }
            }
            Some(Change::Remove {
                from: Value::Route { key, .. } | Value::Object(key),
                ..
            }) => {
                removals.push((table, json!({"op": "remove", "path": path(key, None)})));
            }
            Some(Change::Add { .. }) => {
                let fields: Map<String, Json> = changes
                    .iter()
                    .filter_map(|c| match (&c.key().field, c.to()) {
                        (Some(field), Some(Value::Field(v))) => {
                            Some((field.clone(), Json::String(v.clone())))
                        }
                        _ => None,
                    })
                    .collect();
                updates.push(json!({"op": "add", "path": path(object, None), "value": fields}));
            }
            _ => {
                for change in changes {
                    let field = change.key().field.as_deref();
                    let op = match change {
                        Change::Add {
                            to: Value::Field(v),
                            ..
                        } => json!({"op": "add", "path": path(object, field), "value": v}),
                        Change::Modify {
                            to: Value::Field(v),
                            ..
                        } => json!({"op": "replace", "path": path(object, field), "value": v}),
                        Change::Remove { .. } => {
                            removals.push((
                                table,
                                json!({"op": "remove", "path": path(object, field)}),
                            ));
                            continue;
                        }
                        _ => continue,
                    };
                    updates.push(op);
                }
            }
        }
    }
    removals.sort_by_key(|(table, _)| std::cmp::Reverse(*table));
    let patch: Vec<Json> = removals
        .into_iter()
        .map(|(_, op)| op)
        .chain(splits)
        .chain(updates)
        .collect();
    let mut text = serde_json::to_string_pretty(&patch).expect("a patch serializes");
    text.push('\n');
    text
}

/// A static route's fields as config_db writes them.
fn route_fields(hops: &NextHops) -> Map<String, Json> {
    let mut fields = Map::new();
    match hops {
        NextHops::Discard => {
            fields.insert("blackhole".into(), "true".into());
        }
        other => {
            fields.insert("nexthop".into(), other.forms().join(",").into());
        }
    }
    fields
}

/// Fields in a stable order: numerically when they are numbers (map entries).
fn ordered_fields(fields: Map<String, Json>) -> Vec<(String, Json)> {
    let mut fields: Vec<(String, Json)> = fields.into_iter().collect();
    fields.sort_by(
        |(a, _), (b, _)| match (a.parse::<u32>(), b.parse::<u32>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.cmp(b),
        },
    );
    fields
}

/// A JSON pointer reference token (RFC 6901): `~` and `/` escaped.
fn pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[derive(Serialize)]
struct View<'a> {
    switch: &'a str,
    tables: Vec<TableView>,
}

#[derive(Serialize)]
struct TableView {
    name: &'static str,
    objects: Vec<ObjectView>,
}

#[derive(Serialize)]
struct ObjectView {
    key: String,
    fields: Vec<(String, Json)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_paths_escape_slashes() {
        assert_eq!(pointer("default|10.0.0.0/8"), "default|10.0.0.0~18");
    }
}
