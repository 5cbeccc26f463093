//! SONiC: laying changes out as config_db tables or, for a running switch, as the JSON
//! patch the generic config updater applies. Both are JSON, printed by serde_json (two
//! spaces an indent, tables, objects and fields in the order set here).

use std::collections::BTreeMap;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value as Json};

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
            (Value::Route { hops, .. }, _) => {
                let (name, value) = route_field(hops);
                vec![(name.to_string(), Json::String(value))]
            }
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
                    updates.push(Op::add(path, OpValue::Fields(Vec::new())));
                }
            }
            Some(Change::Add {
                to: Value::Route { hops, .. },
                ..
            }) => {
                updates.push(Op::add(
                    path(object, None),
                    OpValue::Route(route_field(hops)),
                ));
            }
            Some(Change::Modify {
                from: Value::Route { key, .. },
                to: Value::Route { hops, .. },
                ..
            }) => {
                updates.push(Op::replace(
                    path(key, None),
                    OpValue::Route(route_field(hops)),
                ));
            }
            // The shared entry goes, and what it set for others comes back entry by
            // entry before the plan's own fields land on its ports.
            Some(Change::Add {
                to: Value::Shared { original, .. },
                ..
            }) => {
                updates.push(Op::add(path(object, None), OpValue::Json(original)));
            }
            Some(Change::Remove {
                from: Value::Shared { kept, .. },
                ..
            }) => {
                removals.push((table, Op::remove(path(object, None))));
                for (name, fields) in kept {
                    splits.push(Op::add(path(name, None), OpValue::Json(fields)));
                }
            }
            Some(Change::Remove {
                from: Value::Route { key, .. } | Value::Object(key),
                ..
            }) => {
                removals.push((table, Op::remove(path(key, None))));
            }
            Some(Change::Add { .. }) => {
                let mut fields: Vec<(&str, &str)> = changes
                    .iter()
                    .filter_map(|c| match (&c.key().field, c.to()) {
                        (Some(field), Some(Value::Field(v))) => Some((&**field, v.as_str())),
                        _ => None,
                    })
                    .collect();
                // In the order and with the last value a JSON object would keep.
                fields.sort_by_key(|(name, _)| *name);
                fields.reverse();
                fields.dedup_by_key(|(name, _)| *name);
                fields.reverse();
                updates.push(Op::add(path(object, None), OpValue::Fields(fields)));
            }
            _ => {
                for change in changes {
                    let field = change.key().field.as_deref();
                    let op = match change {
                        Change::Add {
                            to: Value::Field(v),
                            ..
                        } => Op::add(path(object, field), OpValue::Text(v)),
                        Change::Modify {
                            to: Value::Field(v),
                            ..
                        } => Op::replace(path(object, field), OpValue::Text(v)),
                        Change::Remove { .. } => {
                            removals.push((table, Op::remove(path(object, field))));
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
    let patch: Vec<Op> = removals
        .into_iter()
        .map(|(_, op)| op)
        .chain(splits)
        .chain(updates)
        .collect();
    let mut text = serde_json::to_string_pretty(&patch).expect("a patch serializes");
    text.push('\n');
    text
}

/// One operation of a JSON patch (RFC 6902), printed as the object `{"op", "path",
/// "value"}` would be. A struct over borrowed values, not a `serde_json` map: a spine's
/// patch holds tens of thousands of them.
#[derive(serde::Serialize)]
struct Op<'a> {
    op: &'static str,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<OpValue<'a>>,
}

impl<'a> Op<'a> {
    fn add(path: String, value: OpValue<'a>) -> Op<'a> {
        Op {
            op: "add",
            path,
            value: Some(value),
        }
    }

    fn replace(path: String, value: OpValue<'a>) -> Op<'a> {
        Op {
            op: "replace",
            path,
            value: Some(value),
        }
    }

    fn remove(path: String) -> Op<'a> {
        Op {
            op: "remove",
            path,
            value: None,
        }
    }
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum OpValue<'a> {
    Text(&'a str),
    /// An object's fields, each once, in key order.
    #[serde(serialize_with = "fields_as_object")]
    Fields(Vec<(&'a str, &'a str)>),
    #[serde(serialize_with = "route_as_object")]
    Route((&'static str, String)),
    Json(&'a Map<String, Json>),
}

fn fields_as_object<S: Serializer>(fields: &[(&str, &str)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(fields.iter().copied())
}

fn route_as_object<S: Serializer>(
    (name, value): &(&'static str, String),
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map([(name, value)])
}

/// A static route's one field as config_db writes it: its name and value.
fn route_field(hops: &NextHops) -> (&'static str, String) {
    match hops {
        NextHops::Discard => ("blackhole", "true".into()),
        other => ("nexthop", other.forms().join(",")),
    }
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
