//! SONiC: laying changes out as config_db tables or, for a running switch, as the JSON
//! patch the generic config updater applies. Both are JSON, printed by serde_json (two
//! spaces an indent, tables, objects and fields in the order set here).

use std::collections::BTreeMap;

use serde::ser::{Serialize, SerializeMap, Serializer};
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

/// The tables holding `expected` (in key order, as [`crate::items::Items`] holds
/// them), as config_db JSON.
fn config_db<'a>(
    intent: &SwitchIntent,
    expected: impl Iterator<Item = (&'a Key, &'a Value)>,
) -> Result<String, Error> {
    let mut tables: Vec<TableView> = Vec::new();
    let mut last: Option<&Key> = None;
    for (key, value) in expected {
        debug_assert!(
            last.is_none_or(|last| last < key),
            "items come in key order"
        );
        last = Some(key);
        let fields = match (value, &key.field) {
            (Value::Object(_), None) => Vec::new(),
            (Value::Field(v), Some(field)) => vec![(field.to_string(), Json::String(v.clone()))],
            (Value::Route { hops, .. }, _) => route_fields(hops).into_iter().collect(),
            // Only a configuration read from a switch holds one (the journal's copy).
            (Value::Shared { original, .. }, None) => original.clone().into_iter().collect(),
            _ => continue,
        };
        if tables.last().is_none_or(|t| t.table != key.table) {
            tables.push(TableView {
                table: key.table,
                objects: Vec::new(),
            });
        }
        let objects = &mut tables.last_mut().expect("just pushed").objects;
        match objects.last_mut() {
            Some(object) if *object.key == *key.object => object.fields.extend(fields),
            _ => objects.push(ObjectView {
                key: key.object.to_string(),
                fields,
            }),
        }
    }
    for object in tables.iter_mut().flat_map(|t| &mut t.objects) {
        object.fields.sort_by(|(a, _), (b, _)| field_order(a, b));
        // A field set twice keeps its later value, as a JSON object would.
        object.fields.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
    }
    // JSON escapes every control character, but a value holding one is no value any
    // switch was given: refused as every vendor refuses it.
    for object in tables.iter().flat_map(|t| &t.objects) {
        let names =
            std::iter::once(object.key.as_str()).chain(object.fields.iter().map(|f| f.0.as_str()));
        templates::refuse_control_characters(intent, names)?;
        for (_, value) in &object.fields {
            templates::refuse_control_characters_in(intent, value)?;
        }
    }
    let mut text = serde_json::to_string_pretty(&Tables(&tables)).expect("tables serialize");
    text.push('\n');
    Ok(text)
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
            .entry((key.table, &*key.object))
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
                            Some((field.to_string(), Json::String(v.clone())))
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
fn field_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<u32>(), b.parse::<u32>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

/// A JSON pointer reference token (RFC 6901): `~` and `/` escaped.
fn pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

struct TableView {
    table: Table,
    objects: Vec<ObjectView>,
}

struct ObjectView {
    key: String,
    fields: Vec<(String, Json)>,
}

/// config_db: a map of tables, each a map of objects, each a map of fields, in order.
struct Tables<'a>(&'a [TableView]);

impl Serialize for Tables<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tables = serializer.serialize_map(Some(self.0.len()))?;
        for table in self.0 {
            tables.serialize_entry(table.table.name(), &Objects(&table.objects))?;
        }
        tables.end()
    }
}

struct Objects<'a>(&'a [ObjectView]);

impl Serialize for Objects<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut objects = serializer.serialize_map(Some(self.0.len()))?;
        for object in self.0 {
            objects.serialize_entry(&object.key, &Fields(&object.fields))?;
        }
        objects.end()
    }
}

struct Fields<'a>(&'a [(String, Json)]);

impl Serialize for Fields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            fields.serialize_entry(name, value)?;
        }
        fields.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_paths_escape_slashes() {
        assert_eq!(pointer("default|10.0.0.0/8"), "default|10.0.0.0~18");
    }
}
