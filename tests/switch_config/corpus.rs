//! A corpus of real forms: each parses, the change touches only what the plan owns,
//! nothing foreign is removed or modified, and the owned part holds no secret.

use super::*;
use crate::running::{CASES, edited, realistic};

/// What a change to `intent`'s switch may touch, stated independently of the vendor
/// modules: the plan's maps, queues, profile and ports, and routes inside its scope.
struct Owned<'a> {
    intent: &'a SwitchIntent,
}

impl Owned<'_> {
    fn route(&self, prefix: &str) -> bool {
        prefix
            .parse::<ipnet::Ipv4Net>()
            .is_ok_and(|p| self.intent.owns_route(&p))
    }

    fn port(&self, port: &str) -> bool {
        self.intent.qos.ports.iter().any(|p| p == port)
    }

    fn queue(&self, queue: &str) -> bool {
        self.intent
            .qos
            .queues
            .iter()
            .any(|q| q.queue.to_string() == queue)
    }

    /// A queue the plan gives a limit L_i (SONiC: a BUFFER_QUEUE entry of the plan's).
    fn limited_queue(&self, queue: &str) -> bool {
        self.intent
            .qos
            .queues
            .iter()
            .any(|q| q.queue.to_string() == queue && q.ecn.is_some_and(|e| e.limit_bytes.is_some()))
    }

    /// Every class number in an NVUE/Onyx list (`1-3,5`) is one of the plan's queues.
    fn queues(&self, list: &str) -> bool {
        list.split(',').all(|part| {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            match (a.parse::<u8>(), b.parse::<u8>()) {
                (Ok(a), Ok(b)) => (a..=b).all(|q| self.queue(&q.to_string())),
                _ => false,
            }
        })
    }

    /// The lines of `commands` that touch something not the plan's.
    fn foreign(&self, vendor: Vendor, commands: &str, running: &str) -> Vec<String> {
        match vendor {
            Vendor::Sonic => self.foreign_sonic(commands, running),
            Vendor::Eos => self.foreign_eos(commands, running),
            Vendor::Cumulus => commands
                .lines()
                .filter(|l| !self.nvue_line(l))
                .map(String::from)
                .collect(),
            Vendor::Onyx => commands
                .lines()
                .filter(|l| !self.onyx_line(l))
                .map(String::from)
                .collect(),
        }
    }

    /// SONiC: the patch is applied to the running tables, and what each entry sets
    /// for each port and queue (an entry may name several) compared before and after.
    fn foreign_sonic(&self, patch: &str, running: &str) -> Vec<String> {
        let before: serde_json::Value = serde_json::from_str(running).unwrap();
        let mut after = before.clone();
        let ops: Vec<serde_json::Value> = serde_json::from_str(patch).unwrap();
        let mut foreign = Vec::new();
        for op in &ops {
            let (kind, path) = (op["op"].as_str().unwrap(), op["path"].as_str().unwrap());
            // A table is only ever created where it is missing.
            if path.matches('/').count() == 1 && !(kind == "add" && before.pointer(path).is_none())
            {
                foreign.push(format!("{kind} {path}"));
            }
            json_patch_apply(&mut after, op);
        }
        let (was, now) = (self.sonic_effective(&before), self.sonic_effective(&after));
        for (entry, fields) in &was {
            let after_fields = now.get(entry).cloned().unwrap_or_default();
            // A field may only lose a reference to one of the plan's objects.
            let kept: Vec<_> = fields
                .iter()
                .map(|f| {
                    f.iter()
                        .filter(|(_, v)| !v.contains("MLT"))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect::<BTreeMap<_, _>>()
                })
                .collect();
            let trimmed: Vec<_> = after_fields
                .iter()
                .map(|f| {
                    f.iter()
                        .filter(|(_, v)| !v.contains("MLT"))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect::<BTreeMap<_, _>>()
                })
                .collect();
            if !self.sonic_owned(entry) && kept != trimmed {
                foreign.push(format!("{entry}: {fields:?} -> {after_fields:?}"));
            }
        }
        for (entry, sets) in now.iter().filter(|(e, _)| !was.contains_key(*e)) {
            // A plan's port may get a binding entry holding the plan's maps alone.
            let binding = entry
                .strip_prefix("PORT_QOS_MAP|")
                .is_some_and(|port| self.port(port) && sets.iter().all(BTreeMap::is_empty));
            if !self.sonic_owned(entry) && !binding {
                foreign.push(format!("{entry} created"));
            }
        }
        foreign
    }

    /// Entries by what they set: `QUEUE|port|queue` and `PORT_QOS_MAP|port` one by one
    /// (whatever key names them), the plan's fields of the plan's ports left out.
    fn sonic_effective(
        &self,
        db: &serde_json::Value,
    ) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
        let mut out: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
        for (table, objects) in db.as_object().unwrap() {
            let Some(objects) = objects.as_object() else {
                continue;
            };
            for (key, fields) in objects {
                let Some(fields) = fields.as_object() else {
                    continue;
                };
                let members: Vec<String> = match table.as_str() {
                    "QUEUE" | "BUFFER_QUEUE" => {
                        let (ports, queues) = key.rsplit_once('|').unwrap();
                        let queues: Vec<u32> = queues
                            .split(',')
                            .flat_map(|part| {
                                let (a, b) = part.split_once('-').unwrap_or((part, part));
                                a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()
                            })
                            .collect();
                        ports
                            .split(',')
                            .flat_map(|p| queues.iter().map(move |q| format!("{p}|{q}")))
                            .collect()
                    }
                    "PORT_QOS_MAP" if *key != "global" => {
                        key.split(',').map(String::from).collect()
                    }
                    _ => vec![key.clone()],
                };
                for member in members {
                    let entry = format!("{table}|{member}");
                    let fields: BTreeMap<String, String> = fields
                        .iter()
                        .filter(|(f, _)| {
                            !(table == "PORT_QOS_MAP"
                                && self.port(&member)
                                && ["dscp_to_tc_map", "tc_to_queue_map"].contains(&f.as_str()))
                        })
                        .map(|(f, v)| (f.clone(), v.to_string()))
                        .collect();
                    out.entry(entry).or_default().push(fields);
                }
            }
        }
        for sets in out.values_mut() {
            sets.sort();
        }
        out
    }

    fn sonic_owned(&self, entry: &str) -> bool {
        let parts: Vec<&str> = entry.split('|').collect();
        match parts.as_slice() {
            ["DSCP_TO_TC_MAP" | "TC_TO_QUEUE_MAP", "MLT"] => true,
            ["SCHEDULER" | "WRED_PROFILE" | "BUFFER_PROFILE", name] => name.starts_with("MLT_"),
            ["QUEUE", port, queue] => self.port(port) && self.queue(queue),
            ["BUFFER_QUEUE", port, queue] => self.port(port) && self.limited_queue(queue),
            ["STATIC_ROUTE", prefix] | ["STATIC_ROUTE", "default", prefix] => self.route(prefix),
            _ => false,
        }
    }

    fn foreign_eos(&self, commands: &str, running: &str) -> Vec<String> {
        let mut foreign = Vec::new();
        // The mode a line is in: the profile, an interface (its name), a tx-queue in it.
        let mut mode: Option<String> = None;
        let mut queue_of_interface = false;
        for line in commands.lines() {
            let indent = line.len() - line.trim_start().len();
            let words: Vec<&str> = line.split_whitespace().collect();
            let ok = match (indent, words.as_slice()) {
                (_, ["!"]) => true,
                (0, ["qos", "map", "dscp", .., "to", "traffic-class", _]) => true,
                (0, ["qos", "map", "traffic-class", .., "to", "tx-queue", _]) => true,
                (0, ["qos", "profile", "MLT"]) => {
                    mode = Some("profile".into());
                    true
                }
                (0, ["interface", port]) => {
                    mode = Some(port.to_string());
                    // Ours, or a foreign port that carries our profile (to lose it).
                    self.port(port)
                        || running.contains(&format!("interface {port}\n"))
                            && running
                                .split(&format!("interface {port}\n"))
                                .nth(1)
                                .is_some_and(|rest| {
                                    rest.split("\n!")
                                        .next()
                                        .unwrap_or("")
                                        .contains("service-profile MLT")
                                })
                }
                // Switch-wide: Not-ECT is enqueued above S (the plan owns it absent).
                (0, ["no", "qos", "random-detect", "ecn", "allow", "non-ect"]) => true,
                (0, ["ip" | "no", ..]) => {
                    let route = words.iter().skip_while(|w| **w != "route").nth(1);
                    route.is_some_and(|p| self.route(p))
                }
                (3, ["service-profile" | "no", ..]) if mode.as_deref() != Some("profile") => {
                    words.last() == Some(&"MLT")
                }
                (3, ["tx-queue", q]) => {
                    queue_of_interface = mode.as_deref() != Some("profile");
                    self.queue(q)
                        && mode
                            .as_deref()
                            .is_some_and(|m| m == "profile" || self.port(m))
                }
                (3, ["qos", "trust", _]) => mode.as_deref() == Some("profile"),
                (6, _) => {
                    mode.is_some() && (queue_of_interface || mode.as_deref() == Some("profile"))
                }
                _ => false,
            };
            if !ok {
                foreign.push(line.to_string());
            }
        }
        foreign
    }

    fn nvue_line(&self, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [
                "nv",
                "set" | "unset",
                "qos",
                "mapping",
                "default-global",
                "trust" | "dscp",
                ..,
            ] => true,
            [
                "nv",
                "set" | "unset",
                "qos",
                "egress-queue-mapping",
                "default-global",
                ..,
            ] => true,
            [
                "nv",
                "set" | "unset",
                "qos",
                "egress-scheduler" | "congestion-control",
                "default-global",
                "traffic-class",
                classes,
                ..,
            ] => self.queues(classes),
            [
                "nv",
                "set" | "unset",
                "vrf",
                "default",
                "router",
                "static",
                prefix,
                ..,
            ] => self.route(prefix),
            // RoCE mode: ECN-only congestion control of its own (owned absent).
            ["nv", "unset", "qos", "roce"] => true,
            // A plan's port loses a profile of its own that replaces default-global.
            [
                "nv",
                "unset",
                "interface",
                port,
                "qos",
                "mapping" | "egress-queue-mapping" | "egress-scheduler" | "congestion-control",
                "profile",
            ] => self.port(port),
            _ => false,
        }
    }

    fn onyx_line(&self, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        let queue_ok = |rest: &[&str]| match rest {
            ["qos", "trust", _] | ["qos", "map", "dscp", ..] => true,
            ["traffic-class", _, "bind", ..] => true,
            ["traffic-class", q, ..] | ["no", "traffic-class", q, ..] => self.queue(q),
            _ => false,
        };
        match words.as_slice() {
            ["interface", "ethernet", spec, rest @ ..] => {
                let (first, last) = spec.split_once('-').unwrap_or((spec, spec));
                let (slot, a) = first.rsplit_once('/').unwrap();
                let (_, b) = last.rsplit_once('/').unwrap();
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                (a..=b).all(|n| self.port(&format!("Eth{slot}/{n}"))) && queue_ok(rest)
            }
            ["ip" | "no", ..] => {
                let after: Vec<&&str> = words
                    .iter()
                    .skip_while(|w| **w != "route")
                    .skip(1)
                    .collect();
                let after: Vec<&str> = after
                    .iter()
                    .map(|w| **w)
                    .skip_while(|w| *w == "vrf" || *w == "default")
                    .collect();
                match after.as_slice() {
                    [net, len, ..] if len.starts_with('/') => self.route(&format!("{net}{len}")),
                    [cidr, ..] => self.route(cidr),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// Applies one RFC 6902 operation (`add`, `replace`, `remove`) to `doc`.
fn json_patch_apply(doc: &mut serde_json::Value, op: &serde_json::Value) {
    let path = op["path"].as_str().unwrap();
    let (parent, last) = path.rsplit_once('/').unwrap();
    let last = last.replace("~1", "/").replace("~0", "~");
    let parent = doc
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no parent for {path}"));
    let parent = parent.as_object_mut().unwrap();
    match op["op"].as_str().unwrap() {
        "add" | "replace" => {
            parent.insert(last, op["value"].clone());
        }
        "remove" => {
            assert!(
                parent.remove(&last).is_some(),
                "nothing to remove at {path}"
            );
        }
        other => panic!("unexpected op {other}"),
    }
}

/// Running configurations written after public examples of each vendor's own print
/// form (tests/running/real/, sources in each SOURCES.md): each parses; the change the
/// plan proposes touches only what the plan owns (checked by rules written apart from
/// the vendor modules); SONiC's patch, applied, leaves nothing to change.
#[test]
fn the_real_corpus_is_read_and_nothing_foreign_is_touched() {
    let plan = lab_plan();
    let mut read = 0;
    for (vendor, switch) in [
        (Vendor::Sonic, "spine1"),
        (Vendor::Eos, "spine2"),
        (Vendor::Cumulus, "leaf1"),
        (Vendor::Onyx, "leaf2"),
    ] {
        let intent = intent(&plan, switch);
        let dir = fixture(&format!("tests/running/real/{vendor}"));
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e == switch_config::extension(vendor))
            })
            .collect();
        files.sort();
        assert!(files.len() >= 4, "{vendor}: {} samples", files.len());
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().to_string();
            let running = std::fs::read_to_string(&file).unwrap();
            let diff = switch_config::diff(intent, Some(&running))
                .unwrap_or_else(|e| panic!("{vendor} {name}: {e}"));
            let foreign = Owned { intent }.foreign(vendor, &diff.commands, &running);
            assert!(
                foreign.is_empty(),
                "{vendor} {name} touches what is not the plan's: {foreign:#?}"
            );
            // SONiC's patch applies here as the switch would apply it: the result is
            // what the plan wants.
            if vendor == Vendor::Sonic {
                let mut db: serde_json::Value = serde_json::from_str(&running).unwrap();
                let ops: Vec<serde_json::Value> = serde_json::from_str(&diff.commands).unwrap();
                for op in &ops {
                    json_patch_apply(&mut db, op);
                }
                let again = switch_config::diff(intent, Some(&db.to_string())).unwrap();
                assert!(again.changes.is_empty(), "{name}: {:#?}", again.changes);
                // No entry competes with the plan's for one of its ports or queues.
                let owned = Owned { intent };
                for (entry, sets) in owned.sonic_effective(&db) {
                    let planned = match entry.split('|').collect::<Vec<_>>().as_slice() {
                        ["QUEUE", port, queue] => owned.port(port) && owned.queue(queue),
                        ["BUFFER_QUEUE", port, queue] => {
                            owned.port(port) && owned.limited_queue(queue)
                        }
                        ["PORT_QOS_MAP", port] => owned.port(port),
                        _ => false,
                    };
                    assert!(
                        !planned || sets.len() == 1,
                        "{name}: {entry} set by {sets:?}"
                    );
                }
            }
            read += 1;
        }
    }
    assert!(read >= 16, "{read}");
}

/// The journal keeps only the owned part of a switch; putting it back must be exact, for
/// a switch before the plan (vendor defaults and foreign QoS), as planned, and with stale
/// items inside the plan's scope — and none of the switch's secrets may be in it.
#[test]
fn the_owned_part_reads_back_as_the_same_configuration_and_holds_no_secret() {
    for case in CASES {
        let plan = lab_plan();
        let intent = intent(&plan, case.switch);
        let base =
            std::fs::read_to_string(fixture(&format!("tests/running/lab-base/{}", case.file)))
                .unwrap();
        let (_, planned) = realistic(case.switch, case.file);
        let (after, insert, _, _) = case.stale;
        let stale = edited(&planned, after, &format!("{after}{insert}"));
        for running in [&base, &planned, &stale] {
            let owned = switch_config::owned(intent, running).unwrap();
            let back = switch_config::revert(intent, &owned, running).unwrap();
            assert_eq!(back.changes, [], "{}: {owned}", case.switch);
            for marker in [
                "secret sha512",
                "password 7",
                "hashed-password",
                "community",
            ] {
                assert!(!owned.contains(marker), "{}: {owned}", case.switch);
            }
        }
        let from_base = switch_config::owned(intent, &base).unwrap();
        let to_base = switch_config::revert(intent, &from_base, &planned).unwrap();
        assert!(!to_base.changes.is_empty(), "{}", case.switch);
        assert!(!to_base.commands.is_empty(), "{}", case.switch);
    }
}

/// `diff` folds equal changes into number lists in numeric order; `--verbose` lists
/// each; both say the same number of changes.
#[test]
fn diff_folds_equal_changes_and_verbose_lists_each() {
    let running = fixture("tests/running/lab-base");
    let args = [
        "diff",
        "-i",
        "inventory/lab.yaml",
        "--running",
        running.to_str().unwrap(),
    ];
    let folded = text(&mltctl(&args).stdout);
    assert!(
        folded.contains("  ~ DSCP 8-15 traffic class: 1 -> 0\n"),
        "{folded}"
    );
    assert!(
        folded.contains("  + WRED_PROFILE|MLT_Q1-6: present\n"),
        "{folded}"
    );
    assert!(
        folded.contains("  + DSCP_TO_TC_MAP|MLT 0-31,38-45,47-63: 0\n"),
        "{folded}"
    );
    assert!(!folded.contains("  ~ DSCP 9 traffic class"), "{folded}");
    let mut verbose_args = args.to_vec();
    verbose_args.push("--verbose");
    let verbose = text(&mltctl(&verbose_args).stdout);
    assert!(
        verbose.contains("  ~ DSCP 9 traffic class: 1 -> 0\n"),
        "{verbose}"
    );
    assert!(verbose.lines().count() > folded.lines().count() + 100);
    let last = |t: &str| t.lines().last().unwrap_or_default().to_string();
    assert_eq!(last(&folded), last(&verbose));
}
