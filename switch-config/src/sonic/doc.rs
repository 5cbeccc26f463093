//! config_db JSON read the way `serde_json::Value` would read it — each object's entries
//! in key order, a key given twice keeping its last value, anything that is not an
//! object ignored where an object is looked for — but into sorted vectors instead of
//! maps. A spine's QUEUE and BUFFER_QUEUE tables hold thousands of one-field objects,
//! and as `serde_json::Map`s each was a B-tree node of its own: reading a 500-leaf
//! spine's configuration back took ~6 MB, and apply reads 64 switches at a time.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;

/// A whole config_db: tables of objects of fields.
pub(super) type Doc = Node<Node<Node<Json>>>;

/// An object's fields.
pub(super) type Fields = Sorted<Json>;

/// A JSON object's entries, sorted by key, each key once.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sorted<V>(Vec<(String, V)>);

impl<V> Sorted<V> {
    /// Sorts `entries` by key; of a key given more than once, the last is kept.
    fn from_entries(mut entries: Vec<(String, V)>) -> Sorted<V> {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut kept: Vec<(String, V)> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            match kept.last_mut() {
                Some(last) if last.0 == key => last.1 = value,
                _ => kept.push((key, value)),
            }
        }
        Sorted(kept)
    }

    pub(super) fn get(&self, key: &str) -> Option<&V> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.into_iter()
    }
}

impl Sorted<Json> {
    /// The fields as a `serde_json` map (what a shared entry keeps of them).
    pub(super) fn to_map(&self) -> serde_json::Map<String, Json> {
        self.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

impl<'a, V> IntoIterator for &'a Sorted<V> {
    type Item = (&'a String, &'a V);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (String, V)>, fn(&'a (String, V)) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

/// Any JSON value, of which only an object (of `V`s) is kept.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node<V> {
    Object(Sorted<V>),
    Other,
}

impl<V> Node<V> {
    /// Nothing at all: what an empty running configuration reads as.
    pub(super) fn empty() -> Node<V> {
        Node::Object(Sorted(Vec::new()))
    }

    pub(super) fn as_object(&self) -> Option<&Sorted<V>> {
        match self {
            Node::Object(entries) => Some(entries),
            Node::Other => None,
        }
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Node<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor(PhantomData))
    }
}

struct NodeVisitor<V>(PhantomData<V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for NodeVisitor<V> {
    type Value = Node<V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<V>, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(entry) = map.next_entry::<String, V>()? {
            entries.push(entry);
        }
        Ok(Node::Object(Sorted::from_entries(entries)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<V>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Node::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Node<V>, E> {
        Ok(Node::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Node<V>, E> {
        Ok(Node::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Node<V>, E> {
        Ok(Node::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Node<V>, E> {
        Ok(Node::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Node<V>, E> {
        Ok(Node::Other)
    }

    fn visit_unit<E>(self) -> Result<Node<V>, E> {
        Ok(Node::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read both ways, every lookup the parser makes answers alike.
    #[test]
    fn reads_as_serde_json_maps_do() {
        let text = r#"{
            "QUEUE": {"Ethernet8|3": {"scheduler": "b", "wred_profile": "w"},
                      "Ethernet0|3": {"scheduler": "a", "scheduler": "a2"},
                      "odd": "not an object", "list": [1, {"x": 2}], "n": null},
            "PORT_QOS_MAP": [],
            "STATIC_ROUTE": {"10.0.0.0/8": {"nexthop": "1.1.1.1", "blackhole": true}},
            "SCHEDULER": 3.5
        }"#;
        let compact: Doc = serde_json::from_str(text).unwrap();
        let full: Json = serde_json::from_str(text).unwrap();
        let tables = compact.as_object().unwrap();
        let names: Vec<&String> = tables.iter().map(|(k, _)| k).collect();
        let full_names: Vec<&String> = full.as_object().unwrap().keys().collect();
        assert_eq!(names, full_names);
        for (name, table) in tables {
            let want = full[name].as_object();
            assert_eq!(table.as_object().is_some(), want.is_some(), "{name}");
            let (Some(table), Some(want)) = (table.as_object(), want) else {
                continue;
            };
            let keys: Vec<&String> = table.iter().map(|(k, _)| k).collect();
            assert_eq!(keys, want.keys().collect::<Vec<_>>(), "{name}");
            for (key, object) in table {
                assert_eq!(object.as_object().is_some(), want[key].is_object(), "{key}");
                if let Some(fields) = object.as_object() {
                    assert_eq!(&fields.to_map(), want[key].as_object().unwrap(), "{key}");
                    for (field, value) in fields {
                        assert_eq!(fields.get(field), Some(value));
                        assert!(fields.contains_key(field));
                    }
                    assert_eq!(fields.get("absent"), None);
                }
            }
        }
        assert_eq!(
            tables
                .get("QUEUE")
                .unwrap()
                .as_object()
                .unwrap()
                .get("Ethernet0|3"),
            Some(&Node::Object(Sorted(vec![(
                "scheduler".into(),
                "a2".into()
            )])))
        );
    }

    #[test]
    fn what_is_not_json_is_refused() {
        assert!(serde_json::from_str::<Doc>(r#"{"QUEUE": {"a": }"#).is_err());
        assert!(serde_json::from_str::<Doc>("{} trailing").is_err());
    }
}
