//! Owned configuration as a sorted map, and the semantic difference between two of them.
//!
//! Every vendor turns both the plan and a running configuration into the same typed
//! keys and normalised values (units converted, defaults filled in, references
//! resolved), so comparing them shows only what really differs: ordering, spacing and
//! spelling cannot produce a change.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// What a switch holds of the parts the plan owns.
pub type Items<K, V> = BTreeMap<K, V>;

/// One difference between what a switch runs and what the plan wants.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<K, V> {
    Add { key: K, to: V },
    Remove { key: K, from: V },
    Modify { key: K, from: V, to: V },
}

impl<K, V> Change<K, V> {
    pub fn key(&self) -> &K {
        match self {
            Change::Add { key, .. } | Change::Remove { key, .. } | Change::Modify { key, .. } => {
                key
            }
        }
    }

    /// The value the plan wants, if it wants the key at all.
    pub fn to(&self) -> Option<&V> {
        match self {
            Change::Add { to, .. } | Change::Modify { to, .. } => Some(to),
            Change::Remove { .. } => None,
        }
    }

    /// The value the switch has, if it has the key at all.
    pub fn from(&self) -> Option<&V> {
        match self {
            Change::Remove { from, .. } | Change::Modify { from, .. } => Some(from),
            Change::Add { .. } => None,
        }
    }
}

/// The changes that turn `running` into `expected`, in key order.
pub fn changes<K: Ord + Clone, V: PartialEq + Clone>(
    expected: &Items<K, V>,
    running: &Items<K, V>,
) -> Vec<Change<K, V>> {
    let mut out = Vec::new();
    for (key, to) in expected {
        match running.get(key) {
            None => out.push(Change::Add {
                key: key.clone(),
                to: to.clone(),
            }),
            Some(from) if from != to => out.push(Change::Modify {
                key: key.clone(),
                from: from.clone(),
                to: to.clone(),
            }),
            Some(_) => {}
        }
    }
    for (key, from) in running {
        if !expected.contains_key(key) {
            out.push(Change::Remove {
                key: key.clone(),
                from: from.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.key().cmp(b.key()));
    out
}

/// A change as people and programs read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeLine {
    /// What changes, in the vendor's terms (for example `queue 6 ECN`).
    pub item: String,
    /// What the switch has now; `None` if it has nothing there.
    pub from: Option<String>,
    /// What the plan wants; `None` if it wants the item gone.
    pub to: Option<String>,
    /// The item decides which queue a DSCP value lands in.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dscp_map: bool,
}

impl<K: fmt::Display, V: fmt::Display> From<&Change<K, V>> for ChangeLine {
    fn from(change: &Change<K, V>) -> Self {
        ChangeLine {
            item: change.key().to_string(),
            from: change.from().map(ToString::to_string),
            to: change.to().map(ToString::to_string),
            dscp_map: false,
        }
    }
}

impl fmt::Display for ChangeLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.from, &self.to) {
            (None, Some(to)) => write!(f, "+ {}: {to}", self.item),
            (Some(from), None) => write!(f, "- {}: {from}", self.item),
            (Some(from), Some(to)) => write!(f, "~ {}: {from} -> {to}", self.item),
            (None, None) => write!(f, "  {}", self.item),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_adds_removes_and_modifications_in_key_order() {
        let expected: Items<u8, &str> = [(1, "a"), (2, "b"), (4, "d")].into();
        let running: Items<u8, &str> = [(2, "b"), (3, "c"), (4, "x")].into();
        let lines: Vec<String> = changes(&expected, &running)
            .iter()
            .map(|c| ChangeLine::from(c).to_string())
            .collect();
        assert_eq!(lines, ["+ 1: a", "- 3: c", "~ 4: x -> d"]);
        assert!(changes(&expected, &expected).is_empty());
    }
}
