//! A change's `nv set` commands as one document for `nv config patch`.
//!
//! Every `nv` command is a request to NVUE's daemon, about a second on a switch, so a
//! spine's ~1,000 static routes took a quarter of an hour command by command. NVUE's
//! CLI is its object model spelled out as words: `nv set qos congestion-control
//! default-global traffic-class 2 min-threshold 150000` is, in the YAML that `nv config
//! patch` reads (a list of operations, as in `startup.yaml`), the attribute
//! `min-threshold: 150000` under `qos`, `congestion-control`, `default-global`,
//! `traffic-class`, `'2'`; a list or range of keys (`traffic-class 1-3,5`) is each key.
//! A static route's next hop is written as NVUE writes it in `startup.yaml`, with the
//! attributes NVUE fills in for the command: `nv set vrf default router static P via
//! 10.0.0.1` is P's `address-family: ipv4-unicast` and `via: {10.0.0.1: {type:
//! ipv4-address}}` (`type: blackhole` for `via blackhole`).
//!
//! Only what that reading places for certain goes into the patch: a command of at least
//! three plain words (no quotes or escapes) whose last word is a value, or a static
//! route to an IPv4 next hop or `blackhole`; not RoCE mode (`nv set qos roce mode M`
//! may turn RoCE on as well, which a patch naming `mode` alone might not).
//! `nv unset` commands stay commands, run before the patch, which is their order in a
//! change unless a set comes first on an overlapping path; then, or when any `nv set`
//! cannot be placed, the change is loaded command by command as written.

use std::collections::BTreeMap;

use yaml_rust2::yaml::{Hash, Yaml};
use yaml_rust2::{YamlEmitter, emitter::EmitError};

use crate::text::number_list;

/// Path words whose next word may list several keys (`0-7,9`).
const RANGED: &[&str] = &["dscp", "switch-priority", "traffic-class"];
/// The largest key a ranged word's list may hold (DSCP values go to 63).
const MAX_KEY: u32 = 63;

/// How a change is loaded: `nv unset` commands, then one patch with every `nv set`.
#[derive(Debug, PartialEq)]
pub(super) struct Load<'a> {
    pub unsets: Vec<&'a str>,
    /// The YAML for `nv config patch`; None when the change sets nothing.
    pub patch: Option<String>,
}

/// How `commands` (each one `nv` command) load with one patch, or None when they must
/// run one by one as written.
pub(super) fn load<'a>(commands: &[&'a str]) -> Option<Load<'a>> {
    let mut tree = Tree::new();
    let mut unsets = Vec::new();
    let mut set_paths: Vec<Vec<&str>> = Vec::new();
    for command in commands {
        let words = plain_words(command)?;
        match words.as_slice() {
            ["nv", "unset", path @ ..] if !path.is_empty() => {
                if set_paths.iter().any(|set| overlap(set, path)) {
                    return None;
                }
                unsets.push(*command);
            }
            ["nv", "set", path @ ..] => {
                for setting in settings(path)? {
                    place(&mut tree, &setting)?;
                }
                set_paths.push(path.to_vec());
            }
            _ => return None,
        }
    }
    let patch = if tree.is_empty() {
        None
    } else {
        Some(document(tree).ok()?)
    };
    Some(Load { unsets, patch })
}

/// The words of `command`, if none is quoted or escaped.
fn plain_words(command: &str) -> Option<Vec<&str>> {
    let plain = !command.contains(['\'', '"', '\\', '\n']);
    plain.then(|| command.split_whitespace().collect())
}

/// Whether two paths may name the same setting: one is a prefix of the other, word by
/// word the same or lists of keys (`1-3`, `2`) that share one.
fn overlap(a: &[&str], b: &[&str]) -> bool {
    let shared = |x: &str, y: &str| match (number_list(x, MAX_KEY), number_list(y, MAX_KEY)) {
        (Ok(xs), Ok(ys)) => xs.iter().any(|k| ys.contains(k)),
        _ => false,
    };
    a.iter().zip(b).all(|(x, y)| x == y || shared(x, y))
}

#[derive(Debug)]
enum Node {
    Tree(Tree),
    Value(String),
}

type Tree = BTreeMap<String, Node>;

/// The attributes `nv set` then `path` sets, as NVUE writes them: a static route's next
/// hop with its type and the route's address family. None for a next hop of another
/// form, or RoCE mode (the CLI may turn it on beside what it names).
fn settings<'a>(path: &[&'a str]) -> Option<Vec<Vec<&'a str>>> {
    match path {
        ["qos", "roce", ..] => None,
        ["vrf", _, "router", "static", _, "via", hop] => {
            let kind = match *hop {
                "blackhole" => "blackhole",
                hop if hop.parse::<std::net::Ipv4Addr>().is_ok() => "ipv4-address",
                _ => return None,
            };
            let route = &path[..5];
            let family = [route, &["address-family", "ipv4-unicast"]].concat();
            let typed = [path, &["type", kind]].concat();
            Some(vec![family, typed])
        }
        [.., "via", _] => None,
        _ => Some(vec![path.to_vec()]),
    }
}

/// Adds the attribute `path` sets (its last word the value) to `tree`; None if its
/// reading is not certain or it contradicts one already placed.
fn place(tree: &mut Tree, path: &[&str]) -> Option<()> {
    let n = path.len();
    if n < 3 {
        return None;
    }
    let (keys, value) = (&path[..n - 1], path[n - 1]);
    let mut levels: Vec<Vec<String>> = Vec::with_capacity(keys.len());
    for (i, word) in keys.iter().enumerate() {
        let listed = i > 0 && RANGED.contains(&keys[i - 1]) && i + 1 < keys.len();
        levels.push(if listed {
            let numbers = number_list(word, MAX_KEY).ok()?;
            numbers.iter().map(u32::to_string).collect()
        } else {
            vec![(*word).to_string()]
        });
    }
    insert(tree, &levels, value)
}

fn insert(tree: &mut Tree, levels: &[Vec<String>], value: &str) -> Option<()> {
    let (keys, rest) = levels.split_first()?;
    for key in keys {
        if rest.is_empty() {
            match tree.get(key) {
                None => {
                    tree.insert(key.clone(), Node::Value(value.to_string()));
                }
                Some(Node::Value(old)) if old == value => {}
                _ => return None,
            }
        } else {
            let below = tree
                .entry(key.clone())
                .or_insert_with(|| Node::Tree(Tree::new()));
            let Node::Tree(below) = below else {
                return None;
            };
            insert(below, rest, value)?;
        }
    }
    Some(())
}

/// `tree` as one `set` operation: `- set:` and the tree below it.
fn document(tree: Tree) -> Result<String, EmitError> {
    let mut operation = Hash::new();
    operation.insert(Yaml::String("set".into()), yaml(Node::Tree(tree)));
    let mut out = String::new();
    YamlEmitter::new(&mut out).dump(&Yaml::Array(vec![Yaml::Hash(operation)]))?;
    out.push('\n');
    Ok(out)
}

/// Keys are strings (`'2'`, as NVUE writes them); a value of digits is a number.
fn yaml(node: Node) -> Yaml {
    match node {
        Node::Tree(tree) => Yaml::Hash(
            tree.into_iter()
                .map(|(key, node)| (Yaml::String(key), yaml(node)))
                .collect(),
        ),
        Node::Value(v) => match v.parse::<i64>() {
            Ok(n) if n.to_string() == v => Yaml::Integer(n),
            _ => Yaml::String(v),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(commands: &str) -> Option<Load<'_>> {
        load(&commands.lines().collect::<Vec<_>>())
    }

    #[test]
    fn sets_become_one_tree_with_lists_of_keys_spelled_out() {
        let load = patch(
            "nv unset vrf default router static 10.9.0.0/24 via 10.0.0.9\n\
             nv set qos mapping default-global trust l3\n\
             nv set qos mapping default-global dscp 0-1,9 switch-priority 3\n\
             nv set qos congestion-control default-global traffic-class 2 min-threshold 150000\n\
             nv set qos congestion-control default-global traffic-class 2 ecn enable\n\
             nv set vrf default router static 10.1.0.0/24 via 10.0.0.1\n\
             nv set vrf default router static 10.1.0.0/24 via 10.0.0.2\n\
             nv set vrf default router static 10.2.0.0/24 via blackhole",
        )
        .expect("all placed");
        assert_eq!(
            load.unsets,
            ["nv unset vrf default router static 10.9.0.0/24 via 10.0.0.9"]
        );
        assert_eq!(
            load.patch.unwrap(),
            "---
- set:
    qos:
      congestion-control:
        default-global:
          traffic-class:
            \"2\":
              ecn: enable
              min-threshold: 150000
      mapping:
        default-global:
          dscp:
            \"0\":
              switch-priority: 3
            \"1\":
              switch-priority: 3
            \"9\":
              switch-priority: 3
          trust: l3
    vrf:
      default:
        router:
          static:
            10.1.0.0/24:
              address-family: ipv4-unicast
              via:
                10.0.0.1:
                  type: ipv4-address
                10.0.0.2:
                  type: ipv4-address
            10.2.0.0/24:
              address-family: ipv4-unicast
              via:
                blackhole:
                  type: blackhole
"
        );
    }

    #[test]
    fn values_that_yaml_would_read_otherwise_are_quoted() {
        let load = patch("nv set system global enable on\nnv set a b c 007").unwrap();
        let text = load.patch.unwrap();
        assert!(text.contains("enable: \"on\""), "{text}");
        assert!(text.contains("c: \"007\""), "{text}");
    }

    #[test]
    fn only_unsets_make_no_patch() {
        let load = patch("nv unset qos roce").unwrap();
        assert_eq!(load.unsets, ["nv unset qos roce"]);
        assert_eq!(load.patch, None);
    }

    #[test]
    fn what_cannot_be_placed_for_certain_runs_as_written() {
        // An object set without a value; RoCE mode, which the CLI may turn on besides.
        assert_eq!(patch("nv set qos roce"), None);
        assert_eq!(patch("nv set qos roce mode lossy"), None);
        // A next hop of a form whose type is not certain.
        assert_eq!(
            patch("nv set vrf default router static 10.1.0.0/24 via swp1"),
            None
        );
        // A quoted word.
        assert_eq!(patch("nv set interface 'swp 1' link mtu 9000"), None);
        // Not an `nv set`/`nv unset`.
        assert_eq!(patch("nv config apply"), None);
        // One attribute given two values.
        assert_eq!(patch("nv set a b c 1\nnv set a b c 2"), None);
        // A key that is also a value.
        assert_eq!(patch("nv set a b c\nnv set a b c d 1"), None);
        // A list of keys that is not one.
        assert_eq!(
            patch("nv set qos mapping default-global dscp 0-99 switch-priority 1"),
            None
        );
    }

    #[test]
    fn an_unset_after_an_overlapping_set_keeps_the_written_order() {
        let order = "nv set qos congestion-control default-global traffic-class 1-3 ecn enable\n\
                     nv unset qos congestion-control default-global traffic-class 2";
        assert_eq!(patch(order), None);
        let apart = "nv set qos congestion-control default-global traffic-class 1 ecn enable\n\
                     nv unset qos congestion-control default-global traffic-class 2";
        assert!(patch(apart).is_some());
        let listed_apart = "nv set qos congestion-control default-global traffic-class 1-2 ecn enable\n\
                            nv unset qos congestion-control default-global traffic-class 5";
        assert!(patch(listed_apart).is_some());
    }
}
