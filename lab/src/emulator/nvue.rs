//! NVIDIA Cumulus Linux NVUE, as its manuals describe it.
//!
//! - The configuration is a tree of attributes; `nv config show -o commands` prints it
//!   as one `nv set` per leaf. Lists and ranges in keys (`dscp 0-7,9`, `swp1-2`,
//!   `traffic-class 1,2`) set every member.
//! - `nv set`/`nv unset` change a pending revision (made from the applied one on first
//!   use); `nv config diff` compares pending with applied; `nv config detach` drops the
//!   pending revision.
//! - `nv config apply [-y]` makes pending the applied revision. With `--confirm TIME`
//!   it reverts when TIME runs out (`Ns`, `Nm`, `Nh`, bare minutes) unless
//!   `--confirm-yes` comes first; `--confirm-no` reverts at once.
//! - `nv config patch FILE` applies a YAML file to the pending revision, as `nv set`
//!   and `nv unset` would: the file is a list of operations (`- set: TREE`, `- unset:
//!   TREE`, as `startup.yaml` and `nv config diff -o yaml` write them), each tree the
//!   configuration's attributes as nested keys (`qos: {roce: {mode: lossy}}` is `nv set
//!   qos roce mode lossy`; a member of a collection holds `{}`: `via: {10.0.0.1: {}}`).
//!   FILE is named by its full path; an empty file changes nothing; a file that is not
//!   YAML, or not a list of operations, is refused. A patch applies whole or not at all;
//!   injected faults match each of its settings as `set PATH VALUE` (`unset PATH`).
//! - `nv config save` writes the startup configuration.
//! - `nv set qos roce [mode lossless|lossy|lossless-single-ipool]` (NVIDIA's *RDMA
//!   over Converged Ethernet* page) turns RoCE mode on: traffic classes 0 and 3 get
//!   ECN-only congestion control, marking from 150,000 to 1,500,000 bytes at 100% with
//!   no RED, so Not-ECT packets there are not dropped early; `nv unset qos roce` turns
//!   it off.

use std::collections::BTreeMap;

use yaml_rust2::{Yaml, YamlLoader};

use super::{Device, Faults, Reply, duration_seconds, numbers};

const APPLIED: &str = "applied";
const PENDING: &str = "pending";
const PREVIOUS: &str = "confirm-previous";
const TIMER: &str = "nv-confirm";
/// RoCE mode's ECN thresholds (`nv show qos roce`: 146.48 KB and 1.43 MB).
const ROCE_MIN_BYTES: u64 = 150_000;
const ROCE_MAX_BYTES: u64 = 1_500_000;

/// Path words whose next word is a member of a list, not a value.
const LISTS: &[&str] = &[
    "via",
    "address",
    "vlan",
    "neighbor",
    "type",
    "address-family",
];
/// Path words whose next word may be a list or range of keys.
const RANGED: &[&str] = &["dscp", "traffic-class", "switch-priority", "interface"];

/// Leaves of one revision: sort key → words.
type Revision = BTreeMap<Vec<(u64, String)>, Vec<String>>;

pub fn install(device: &Device, initial: &str) {
    let mut revision = Revision::new();
    for line in initial.lines() {
        if let Some(rest) = line.strip_prefix("nv set ") {
            let path: Vec<String> = rest.split_whitespace().map(String::from).collect();
            set(&mut revision, &path).expect("the initial configuration is valid NVUE");
        }
    }
    device.write(APPLIED, &render(&revision));
    device.write("startup", &render(&revision));
}

pub fn running(device: &Device) -> String {
    device.read(APPLIED).unwrap_or_default()
}

pub fn nv(device: &Device, args: &[&str]) -> Reply {
    let faults = device.faults();
    let line = args.join(" ");
    let applied = load(&running(device));
    match args {
        ["set" | "unset", path @ ..] => {
            if faults.rejects(&line) {
                return Reply::fail(1, format!("Error: Invalid config: {line}\n"));
            }
            if faults.ignores(&line) {
                return Reply::default();
            }
            let mut pending = device.read(PENDING).map(|t| load(&t)).unwrap_or(applied);
            let path: Vec<String> = path.iter().map(|w| w.to_string()).collect();
            let result = if args[0] == "set" {
                set(&mut pending, &path)
            } else {
                unset(&mut pending, &path)
            };
            match result {
                Ok(()) => {
                    device.write(PENDING, &render(&pending));
                    Reply::default()
                }
                Err(message) => Reply::fail(1, format!("Error: {message}\n")),
            }
        }
        ["config", "patch", file] => {
            let pending = device.read(PENDING).map(|t| load(&t)).unwrap_or(applied);
            match patch(pending, file, &faults) {
                Ok(pending) => {
                    device.write(PENDING, &render(&pending));
                    Reply::default()
                }
                Err(message) => Reply::fail(1, format!("Error: {message}\n")),
            }
        }
        ["config", "show", "-r", "applied", "-o", "commands"] => Reply::out(render(&applied)),
        ["show", "interface", port, "counters", "qos", "-o", "json"] => {
            match super::counters::nvue(device, port) {
                Some(json) => Reply::out(json),
                None => Reply::fail(1, "Error: The requested item does not exist.\n"),
            }
        }
        ["config", "diff", ..] => match device.read(PENDING) {
            Some(pending) => Reply::out(diff(&applied, &load(&pending))),
            None => Reply::default(),
        },
        ["config", "detach"] => {
            device.remove(PENDING);
            Reply::default()
        }
        ["config", "save"] => {
            device.write("startup", &render(&applied));
            Reply::out("saved\n")
        }
        ["config", "apply", "--confirm-yes"] => {
            if device.cancel_timer(TIMER) && device.remove(PREVIOUS) {
                Reply::out("Confirmed\n")
            } else {
                Reply::fail(
                    1,
                    "Error: no applied configuration is waiting to be confirmed\n",
                )
            }
        }
        ["config", "apply", "--confirm-no"] => match device.read(PREVIOUS) {
            Some(previous) => {
                device.cancel_timer(TIMER);
                device.write(APPLIED, &previous);
                device.remove(PREVIOUS);
                Reply::out("Rolled back\n")
            }
            None => Reply::fail(
                1,
                "Error: no applied configuration is waiting to be confirmed\n",
            ),
        },
        ["config", "apply", options @ ..] => apply(device, options, faults.drop_after_commit),
        _ => Reply::fail(2, format!("Error: unknown command: nv {line}\n")),
    }
}

fn apply(device: &Device, options: &[&str], drop_after: bool) -> Reply {
    let mut confirm = None;
    let mut rest = options;
    while let Some((word, tail)) = rest.split_first() {
        rest = match (*word, tail) {
            ("-y" | "--y" | "--assume-yes", tail) => tail,
            ("--confirm", [time, tail @ ..]) => match duration_seconds(time) {
                Some(seconds) => {
                    confirm = Some(seconds);
                    tail
                }
                None => return Reply::fail(2, format!("Error: bad time {time}\n")),
            },
            _ => return Reply::fail(2, format!("Error: unknown option {word}\n")),
        };
    }
    if device.read(PREVIOUS).is_some() {
        return Reply::fail(
            1,
            "Error: an applied configuration is waiting to be confirmed\n",
        );
    }
    let Some(pending) = device.read(PENDING) else {
        return Reply::out("Warning: no pending changes to apply\n");
    };
    let previous = running(device);
    device.write(APPLIED, &pending);
    device.remove(PENDING);
    if let Some(seconds) = confirm {
        device.write(PREVIOUS, &previous);
        device.arm_timer(TIMER, seconds, &["timer-expired", TIMER]);
    }
    Reply {
        stdout: "applied\n".into(),
        drop_connection: drop_after && confirm.is_some(),
        ..Reply::default()
    }
}

/// `pending` with the operations of the patch file at `file` applied, each setting
/// (and its fault) as its own `nv set`/`nv unset` would be.
fn patch(mut pending: Revision, file: &str, faults: &Faults) -> Result<Revision, String> {
    if !file.starts_with('/') {
        return Err(format!("{file}: give the file's full path"));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let documents =
        YamlLoader::load_from_str(&text).map_err(|e| format!("Failed to parse YAML: {e}"))?;
    let Some(document) = documents.first() else {
        return Ok(pending);
    };
    let not_operations = || "NVUE file must contain a list of operation objects".to_string();
    let operations = document.as_vec().ok_or_else(not_operations)?;
    for operation in operations {
        let entries: Vec<(&Yaml, &Yaml)> = operation.as_hash().into_iter().flatten().collect();
        let [(verb, tree)] = entries.as_slice() else {
            return Err(not_operations());
        };
        let verb = verb.as_str().filter(|v| ["set", "unset"].contains(v));
        let verb = verb.ok_or_else(not_operations)?;
        let mut paths = Vec::new();
        settings(tree, &mut Vec::new(), &mut paths)?;
        for path in paths {
            // Faults match a setting as its command's arguments would read.
            let line = format!("{verb} {}", path.join(" "));
            if faults.rejects(&line) {
                return Err(format!("Invalid config: {line}"));
            }
            if faults.ignores(&line) {
                continue;
            }
            if verb == "set" {
                set(&mut pending, &path)?;
            } else {
                unset(&mut pending, &path)?;
            }
        }
    }
    Ok(pending)
}

/// The path of every setting in `tree` below `above`: a key then its value, or a key
/// holding `{}` (or nothing) on its own.
fn settings(
    tree: &Yaml,
    above: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> Result<(), String> {
    let Some(hash) = tree.as_hash() else {
        return Err(format!("{}: expected attributes", above.join(" ")));
    };
    for (key, value) in hash {
        above
            .push(scalar(key).ok_or_else(|| format!("{}: a key must be a word", above.join(" ")))?);
        match value {
            Yaml::Hash(h) if !h.is_empty() => settings(value, above, out)?,
            Yaml::Hash(_) | Yaml::Null => out.push(above.clone()),
            _ => {
                let word = scalar(value)
                    .ok_or_else(|| format!("{}: a value must be a word", above.join(" ")))?;
                let mut path = above.clone();
                path.push(word);
                out.push(path);
            }
        }
        above.pop();
    }
    Ok(())
}

fn scalar(node: &Yaml) -> Option<String> {
    match node {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The confirm time ran out: back to the revision applied before.
pub fn timer_expired(device: &Device) -> Reply {
    if let Some(previous) = device.read(PREVIOUS) {
        device.write(APPLIED, &previous);
        device.remove(PREVIOUS);
    }
    Reply::default()
}

fn load(text: &str) -> Revision {
    let mut revision = Revision::new();
    for line in text.lines() {
        let words: Vec<String> = line.split_whitespace().skip(2).map(String::from).collect();
        if !words.is_empty() {
            revision.insert(sort_key(&words), words);
        }
    }
    revision
}

fn render(revision: &Revision) -> String {
    revision
        .values()
        .map(|words| format!("nv set {}\n", words.join(" ")))
        .collect()
}

fn diff(applied: &Revision, pending: &Revision) -> String {
    let mut out = String::new();
    for (key, words) in applied {
        if !pending.contains_key(key) {
            out.push_str(&format!("nv unset {}\n", words.join(" ")));
        }
    }
    for (key, words) in pending {
        if !applied.contains_key(key) {
            out.push_str(&format!("nv set {}\n", words.join(" ")));
        }
    }
    out
}

/// Numbers sort by value, so `dscp 9` comes before `dscp 10`.
fn sort_key(words: &[String]) -> Vec<(u64, String)> {
    words
        .iter()
        .map(|w| match w.parse::<u64>() {
            Ok(n) => (n, String::new()),
            Err(_) => (u64::MAX, w.clone()),
        })
        .collect()
}

fn set(revision: &mut Revision, path: &[String]) -> Result<(), String> {
    for leaf in expand(path, false)?.into_iter().flat_map(with_defaults) {
        check(&leaf)?;
        let n = leaf.len();
        if n >= 2 && !LISTS.contains(&leaf[n - 2].as_str()) {
            // An attribute: the new value replaces the old one.
            revision.retain(|_, w| !(w.len() == n && w[..n - 1] == leaf[..n - 1]));
        }
        revision.insert(sort_key(&leaf), leaf);
    }
    Ok(())
}

/// A static route's next hop gets its type, and the route its address family, as NVUE
/// fills them in (and `nv config show -o commands` prints them): `via 10.0.0.1` is
/// `via 10.0.0.1 type ipv4-address`, `via blackhole` is `type blackhole`.
fn with_defaults(leaf: Vec<String>) -> Vec<Vec<String>> {
    let w: Vec<&str> = leaf.iter().map(String::as_str).collect();
    let (hop, attributes) = match w.as_slice() {
        ["vrf", _, "router", "static", _, "via", hop, rest @ ..] => (*hop, !rest.is_empty()),
        _ => return vec![leaf],
    };
    let mut family = leaf[..5].to_vec();
    family.extend(["address-family".into(), "ipv4-unicast".into()]);
    // A hop's attribute given (`type …`) is kept as given, for `check` to judge.
    if attributes {
        return vec![family, leaf];
    }
    let kind = if hop == "blackhole" {
        "blackhole"
    } else {
        "ipv4-address"
    };
    let mut typed = leaf[..5].to_vec();
    typed.extend(["via".into(), hop.into(), "type".into(), kind.into()]);
    vec![family, typed]
}

fn unset(revision: &mut Revision, path: &[String]) -> Result<(), String> {
    for prefix in expand(path, true)? {
        revision.retain(|_, w| !(w.len() >= prefix.len() && w[..prefix.len()] == prefix[..]));
    }
    Ok(())
}

/// Every path a path with lists or ranges in its keys stands for. The last word of a
/// `set` is its value; that of an `unset` may be a key (`traffic-class 1-6`).
fn expand(path: &[String], ends_in_key: bool) -> Result<Vec<Vec<String>>, String> {
    let mut paths = vec![Vec::new()];
    for (i, word) in path.iter().enumerate() {
        let is_key =
            i > 0 && (ends_in_key || i + 1 < path.len()) && RANGED.contains(&path[i - 1].as_str());
        let members = if is_key {
            members(word)?
        } else {
            vec![word.clone()]
        };
        paths = paths
            .into_iter()
            .flat_map(|p| {
                members.iter().map(move |m| {
                    let mut p = p.clone();
                    p.push(m.clone());
                    p
                })
            })
            .collect();
    }
    Ok(paths)
}

/// `0-7,9` → 0…7, 9; `swp1-2` → swp1, swp2; anything else stands for itself.
fn members(word: &str) -> Result<Vec<String>, String> {
    let digits = word
        .find(|c: char| c.is_ascii_digit())
        .unwrap_or(word.len());
    let (stem, list) = word.split_at(digits);
    if list.is_empty()
        || !list
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
    {
        return Ok(vec![word.to_string()]);
    }
    let values = numbers(list).ok_or_else(|| format!("bad list {word}"))?;
    Ok(values.into_iter().map(|v| format!("{stem}{v}")).collect())
}

/// The value checks NVUE's schema makes for what mltctl sets.
fn check(leaf: &[String]) -> Result<(), String> {
    let w: Vec<&str> = leaf.iter().map(String::as_str).collect();
    let number = |text: &str, max: u64| text.parse::<u64>().ok().filter(|n| *n <= max).is_some();
    let ok = match w.as_slice() {
        ["qos", "mapping", _, "trust", t] => ["l2", "l3", "both", "port"].contains(t),
        ["qos", "mapping", _, "dscp", d, "switch-priority", p] => number(d, 63) && number(p, 7),
        [
            "qos",
            "egress-queue-mapping",
            _,
            "switch-priority",
            p,
            "traffic-class",
            t,
        ] => number(p, 7) && number(t, 7),
        [
            "qos",
            "egress-scheduler",
            _,
            "traffic-class",
            t,
            attribute,
            value,
        ] => {
            number(t, 7)
                && match *attribute {
                    "mode" => ["strict", "dwrr"].contains(value),
                    "bw-percent" => number(value, 100),
                    _ => false,
                }
        }
        [
            "qos",
            "congestion-control",
            _,
            "traffic-class",
            t,
            attribute,
            value,
        ] => {
            number(t, 7)
                && match *attribute {
                    "min-threshold"
                    | "max-threshold"
                    | "min-threshold-bytes"
                    | "max-threshold-bytes" => number(value, 1 << 31),
                    "probability" => number(value, 100),
                    "ecn" | "red" => ["enable", "disable"].contains(value),
                    _ => false,
                }
        }
        [
            "vrf",
            _,
            "router",
            "static",
            prefix,
            "via",
            hop,
            "type",
            kind,
        ] => {
            prefix.parse::<ipnet::Ipv4Net>().is_ok()
                && match *kind {
                    "blackhole" => *hop == "blackhole",
                    "ipv4-address" => hop.parse::<std::net::Ipv4Addr>().is_ok(),
                    _ => false,
                }
        }
        [
            "vrf",
            _,
            "router",
            "static",
            prefix,
            "address-family",
            "ipv4-unicast",
        ] => prefix.parse::<ipnet::Ipv4Net>().is_ok(),
        ["qos", "roce"] => true,
        ["qos", "roce", "enable", value] => ["on", "off"].contains(value),
        ["qos", "roce", "mode", mode] => {
            ["lossless", "lossy", "lossless-single-ipool"].contains(mode)
        }
        ["qos", ..] => false,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("Invalid config: {}", leaf.join(" ")))
    }
}

/// The queueing of the applied revision: the `default-global` profiles, which NVUE
/// applies to every port — `mapping` (DSCP → switch priority; unmapped values by their
/// class selector), `egress-queue-mapping` (switch priority → traffic class, the
/// egress queue), `egress-scheduler` (`mode strict`) and `congestion-control` per
/// traffic class: with `ecn enable` the curve marks ECN-capable packets, and with
/// `red enable` it drops the others (all packets, without ECN).
pub fn qos(device: &Device) -> crate::qos::SwitchQos {
    use crate::qos::{Curve, PortQos, QueueQos, SwitchQos};
    let mut priority: [u8; 64] = std::array::from_fn(|d| d as u8 / 8);
    let mut class_of_priority: [u8; 8] = std::array::from_fn(|p| p as u8);
    let mut queues: BTreeMap<u8, QueueQos> = BTreeMap::new();
    let mut control: BTreeMap<u8, Congestion> = BTreeMap::new();
    let each = |list: &str| numbers(list).unwrap_or_default();
    let running = running(device);
    for line in running.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [
                "nv",
                "set",
                "qos",
                "mapping",
                "default-global",
                "dscp",
                list,
                "switch-priority",
                p,
            ] => {
                for d in each(list) {
                    if let (Some(slot), Ok(p)) = (priority.get_mut(d as usize), p.parse()) {
                        *slot = p;
                    }
                }
            }
            [
                "nv",
                "set",
                "qos",
                "egress-queue-mapping",
                "default-global",
                "switch-priority",
                list,
                "traffic-class",
                class,
            ] => {
                for p in each(list) {
                    if let (Some(slot), Ok(c)) =
                        (class_of_priority.get_mut(p as usize), class.parse())
                    {
                        *slot = c;
                    }
                }
            }
            [
                "nv",
                "set",
                "qos",
                "egress-scheduler",
                "default-global",
                "traffic-class",
                list,
                "mode",
                mode,
            ] => {
                for c in each(list) {
                    if let Ok(c) = u8::try_from(c) {
                        queues.entry(c).or_default().strict = *mode == "strict";
                    }
                }
            }
            [
                "nv",
                "set",
                "qos",
                "congestion-control",
                "default-global",
                "traffic-class",
                list,
                attribute,
                value,
            ] => {
                for c in each(list) {
                    let Ok(c) = u8::try_from(c) else { continue };
                    let entry = control.entry(c).or_default();
                    match *attribute {
                        "min-threshold" | "min-threshold-bytes" => entry.min = value.parse().ok(),
                        "max-threshold" | "max-threshold-bytes" => entry.max = value.parse().ok(),
                        "probability" => entry.probability = value.parse().ok(),
                        "ecn" => entry.ecn = *value == "enable",
                        "red" => entry.red = *value == "enable",
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    // RoCE mode's congestion control, in place of the profile's on its classes.
    if running.lines().any(|l| l.starts_with("nv set qos roce")) {
        for class in [0, 3] {
            control.insert(
                class,
                Congestion {
                    min: Some(ROCE_MIN_BYTES),
                    max: Some(ROCE_MAX_BYTES),
                    probability: Some(100),
                    ecn: true,
                    red: false,
                },
            );
        }
    }
    for (class, c) in control {
        let (Some(min_bytes), Some(max_bytes)) = (c.min, c.max) else {
            continue;
        };
        let curve = Curve {
            min_bytes,
            max_bytes,
            max_percent: c.probability.unwrap_or(100),
        };
        let queue = queues.entry(class).or_default();
        match (c.ecn, c.red) {
            (true, true) => {
                queue.mark = Some(curve);
                queue.drop_not_ect = Some(curve);
            }
            (true, false) => queue.mark = Some(curve),
            (false, true) => queue.drop_all = Some(curve),
            (false, false) => {}
        }
    }
    let map: [u8; 64] = std::array::from_fn(|d| class_of_priority[priority[d] as usize & 7]);
    let mut every_port = PortQos::mapped(map);
    every_port.queues = queues;
    // A switch with no QoS setting at all queues as it came.
    let configured = running.lines().any(|l| l.starts_with("nv set qos "));
    SwitchQos {
        default: configured.then_some(every_port),
        ..SwitchQos::default()
    }
}

/// A traffic class's `congestion-control` settings.
#[derive(Default)]
struct Congestion {
    min: Option<u64>,
    max: Option<u64>,
    probability: Option<u8>,
    ecn: bool,
    red: bool,
}
