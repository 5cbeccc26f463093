//! Arista EOS, as its manuals describe it.
//!
//! - The running-config is a tree of indented lines. `qos map dscp …` keeps one class
//!   per DSCP value and prints only values that differ from the default (D/8);
//!   `qos map traffic-class …` likewise (default: the same queue number). Static routes
//!   print sorted. `priority strict` is a tx-queue's default, so only `no priority`
//!   prints; tx-queues print in ascending order, each nested block after a `!` line of
//!   its indent (as AVD's intended configurations and real dumps show), and a
//!   `tx-queue` with nothing but defaults does not print. An interface's own `tx-queue`
//!   blocks override its service profile's. A tx-queue holds one `random-detect ecn`
//!   curve and one `random-detect drop` curve (AVD's
//!   `qos_profiles.tx_queues[].random_detect`; curves per drop precedence are not
//!   emulated and are refused).
//! - In configuration mode a command not valid in the current mode is tried in the
//!   enclosing modes (so `interface X` after `tx-queue 3` works); an invalid command
//!   prints `% Invalid input`.
//! - `configure session NAME` edits a copy of the running-config;
//!   `show session-config named NAME diffs` shows it; `configure session NAME commit`
//!   makes it the running-config; `… commit timer hh:mm:ss` does so but reverts when
//!   the timer runs out, unless `… commit` confirms first; `… abort` drops the session
//!   or, during a commit timer, reverts at once.
//! - `copy running-config startup-config` saves.
//! - `qos random-detect ecn allow non-ect [chip-based]` (switch-wide; AVD's
//!   `qos.random_detect.ecn.allow_non_ect`) makes every WRED-ECN queue enqueue Not-ECT
//!   packets above its ECN threshold instead of dropping them; `no qos random-detect ecn
//!   allow non-ect` removes it.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::Ipv4Net;

use super::{Device, Reply, duration_seconds};

const RUNNING: &str = "running-config";
const ALLOW_NON_ECT: &str = "qos random-detect ecn allow non-ect";

pub fn install(device: &Device, initial: &str) {
    let text = Config::parse(initial).render();
    device.write(RUNNING, &text);
    device.write("startup-config", &text);
}

pub fn running(device: &Device) -> String {
    device.read(RUNNING).unwrap_or_default()
}

fn session_file(name: &str) -> String {
    format!("sessions/{name}")
}

fn revert_file(name: &str) -> String {
    format!("sessions/{name}.revert")
}

/// Where configuration-mode edits go.
enum Target {
    Running,
    Session(String),
}

struct Edit {
    target: Target,
    config: Config,
    path: Vec<usize>,
}

/// EOS's error for a line it cannot parse names the first word it could not take:
/// `Invalid input (at token 2: 'bogus')`. Here that is the word holding the fault's text.
fn invalid_at(line: &str, faults: &super::Faults) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| faults.rejects(w))
        .or_else(|| (0..words.len()).find(|&i| faults.rejects(&words[..=i].join(" "))))
        .unwrap_or(0);
    format!(
        "Invalid input (at token {at}: '{}')",
        words.get(at).unwrap_or(&"")
    )
}

pub fn cli(device: &Device, script: &str) -> Reply {
    let faults = device.faults();
    let mut reply = Reply::default();
    let mut edit: Option<Edit> = None;
    for raw in script.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('!') {
            continue;
        }
        if let Some(e) = &mut edit {
            match line {
                "end" => {
                    save(device, edit.take().unwrap());
                }
                "exit" if e.path.is_empty() => save(device, edit.take().unwrap()),
                "exit" => {
                    e.path.pop();
                }
                _ if faults.rejects(line) => {
                    reply
                        .stdout
                        .push_str(&format!("% {}\n", invalid_at(line, &faults)));
                }
                _ if faults.ignores(line) => {}
                _ => {
                    if let Err(message) = e.config.apply(&mut e.path, line) {
                        reply.stdout.push_str(&format!("% {message}\n"));
                    }
                }
            }
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let result = match words.as_slice() {
            ["enable"] => Ok(String::new()),
            [
                "show",
                "interfaces",
                "counters",
                "queue",
                "detail",
                "|",
                "json",
            ] => Ok(super::counters::eos_queues(device)),
            [
                "show",
                "qos",
                "interfaces",
                "ecn",
                "counters",
                "queue",
                "|",
                "json",
            ] => Ok(super::counters::eos_ecn(device)),
            ["show", "running-config"] => Ok(format!(
                "! Command: show running-config\n{}",
                running(device)
            )),
            ["show", "session-config", "named", name, "diffs"] => {
                match device.read(&session_file(name)) {
                    Some(session) => Ok(line_diff(&running(device), &session, name)),
                    None => Err(format!("No session {name}")),
                }
            }
            ["configure"] | ["configure", "terminal"] => {
                edit = Some(Edit {
                    target: Target::Running,
                    config: Config::parse(&running(device)),
                    path: Vec::new(),
                });
                Ok(String::new())
            }
            ["configure", "session", name] => {
                if device.read(&revert_file(name)).is_some() {
                    Err(format!("Session {name} is pending commit timer"))
                } else {
                    let text = device
                        .read(&session_file(name))
                        .unwrap_or_else(|| running(device));
                    edit = Some(Edit {
                        target: Target::Session(name.to_string()),
                        config: Config::parse(&text),
                        path: Vec::new(),
                    });
                    Ok(String::new())
                }
            }
            ["configure", "session", name, "commit"] => commit(device, name),
            ["configure", "session", name, "commit", "timer", clock] => {
                let result = commit_timer(device, name, clock);
                if result.is_ok() && faults.drop_after_commit {
                    reply.drop_connection = true;
                }
                result
            }
            ["configure", "session", name, "abort"] => abort(device, name),
            ["copy", "running-config", "startup-config"] | ["write", "memory"] => {
                device.write("startup-config", &running(device));
                Ok("Copy completed successfully.\n".into())
            }
            _ => Err("Invalid input".into()),
        };
        match result {
            Ok(text) => reply.stdout.push_str(&text),
            Err(message) => reply.stdout.push_str(&format!("% {message}\n")),
        }
    }
    if let Some(e) = edit {
        save(device, e);
    }
    reply
}

fn save(device: &Device, edit: Edit) {
    let text = edit.config.render();
    match edit.target {
        Target::Running => device.write(RUNNING, &text),
        Target::Session(name) => device.write(&session_file(&name), &text),
    }
}

fn commit(device: &Device, name: &str) -> Result<String, String> {
    if device.cancel_timer(name) || device.remove(&revert_file(name)) {
        // Confirms a timed commit.
        device.remove(&revert_file(name));
        device.remove(&session_file(name));
        return Ok(String::new());
    }
    let session = device
        .read(&session_file(name))
        .ok_or(format!("No session {name}"))?;
    device.write(RUNNING, &session);
    device.remove(&session_file(name));
    Ok(String::new())
}

fn commit_timer(device: &Device, name: &str, clock: &str) -> Result<String, String> {
    let seconds = duration_seconds(clock).ok_or("Invalid input (timer)")?;
    let session = device
        .read(&session_file(name))
        .ok_or(format!("No session {name}"))?;
    if device.read(&revert_file(name)).is_some() {
        return Err(format!("Session {name} is pending commit timer"));
    }
    device.write(&revert_file(name), &running(device));
    device.write(RUNNING, &session);
    device.arm_timer(name, seconds, &["timer-expired", name]);
    Ok(String::new())
}

fn abort(device: &Device, name: &str) -> Result<String, String> {
    if let Some(previous) = device.read(&revert_file(name)) {
        device.cancel_timer(name);
        device.write(RUNNING, &previous);
        device.remove(&revert_file(name));
    }
    device.remove(&session_file(name));
    Ok(String::new())
}

/// The commit timer of session `name` ran out: back to what ran before.
pub fn timer_expired(device: &Device, name: &str) -> Reply {
    if let Some(previous) = device.read(&revert_file(name)) {
        device.write(RUNNING, &previous);
        device.remove(&revert_file(name));
        device.remove(&session_file(name));
    }
    Reply::default()
}

fn line_diff(running: &str, session: &str, name: &str) -> String {
    let before: BTreeSet<&str> = running.lines().collect();
    let after: BTreeSet<&str> = session.lines().collect();
    let mut out = String::new();
    for line in running.lines().filter(|l| !after.contains(l)) {
        out.push_str(&format!("-{line}\n"));
    }
    for line in session.lines().filter(|l| !before.contains(l)) {
        out.push_str(&format!("+{line}\n"));
    }
    if out.is_empty() {
        return out;
    }
    format!("--- system:/running-config\n+++ session:/{name}-session-config\n{out}")
}

#[derive(Debug, Clone)]
enum Node {
    Line {
        text: String,
        children: Vec<Node>,
    },
    /// Where the qos maps print.
    Maps,
    /// Where the static routes print.
    Routes,
}

impl Node {
    fn line(text: &str) -> Node {
        Node::Line {
            text: text.to_string(),
            children: Vec::new(),
        }
    }

    fn text(&self) -> &str {
        match self {
            Node::Line { text, .. } => text,
            _ => "",
        }
    }

    fn children(&mut self) -> &mut Vec<Node> {
        match self {
            Node::Line { children, .. } => children,
            _ => unreachable!("placeholders have no children"),
        }
    }
}

#[derive(Debug, Clone)]
struct Config {
    nodes: Vec<Node>,
    dscp: [u8; 64],
    class_queue: [u8; 8],
    /// (vrf, prefix, next hop) → the whole line.
    routes: BTreeMap<(String, Ipv4Net, String), String>,
}

impl Config {
    fn parse(text: &str) -> Config {
        let mut config = Config {
            nodes: Vec::new(),
            dscp: std::array::from_fn(|d| d as u8 / 8),
            class_queue: std::array::from_fn(|c| c as u8),
            routes: BTreeMap::new(),
        };
        // (indent, path) of the open blocks.
        let mut open: Vec<(usize, Vec<usize>)> = Vec::new();
        for raw in text.lines() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('!') || line == "end" {
                continue;
            }
            let indent = raw.len() - raw.trim_start().len();
            while open.last().is_some_and(|(i, _)| *i >= indent) {
                open.pop();
            }
            match open.last() {
                None => {
                    let mut path = Vec::new();
                    if config.apply(&mut path, line).is_err() {
                        config.nodes.push(Node::line(line));
                        path = vec![config.nodes.len() - 1];
                    }
                    if !path.is_empty() {
                        open.push((indent, path));
                    }
                }
                Some((_, path)) => {
                    let mut path = path.clone();
                    let parent = config.node(&path);
                    parent.children().push(Node::line(line));
                    path.push(parent.children().len() - 1);
                    open.push((indent, path));
                }
            }
        }
        config
    }

    fn node(&mut self, path: &[usize]) -> &mut Node {
        let mut node = &mut self.nodes[path[0]];
        for &i in &path[1..] {
            node = &mut node.children()[i];
        }
        node
    }

    /// Applies one configuration-mode line in the mode `path` names, climbing to the
    /// enclosing modes when it is not valid there. `path` ends in the mode the line
    /// leaves the session in.
    fn apply(&mut self, path: &mut Vec<usize>, line: &str) -> Result<(), String> {
        loop {
            if let Some(result) = self.apply_here(path, line) {
                return result;
            }
            if path.pop().is_none() {
                return Err("Invalid input".into());
            }
        }
    }

    fn apply_here(&mut self, path: &mut Vec<usize>, line: &str) -> Option<Result<(), String>> {
        let words: Vec<&str> = line.split_whitespace().collect();
        if path.is_empty() {
            return Some(self.apply_top(path, line, &words));
        }
        let mode: Vec<String> = (1..=path.len())
            .map(|n| self.node(&path[..n]).text().to_string())
            .collect();
        let here = mode.last().unwrap().as_str();
        let node = self.node(path);
        if here.starts_with("qos profile ") {
            match words.as_slice() {
                ["qos", "trust", _] => set_child(node, "qos trust ", line),
                ["no", "qos", "trust", ..] => remove_children(node, "qos trust "),
                ["tx-queue" | "uc-tx-queue", queue] => {
                    if let Err(e) = enter_queue(node, path, queue, line) {
                        return Some(Err(e));
                    }
                }
                _ => return None,
            }
            return Some(Ok(()));
        }
        if queue_number(here).is_some() {
            match words.as_slice() {
                ["priority", "strict"] => remove_children(node, "no priority"),
                ["no", "priority"] => set_child(node, "no priority", line),
                ["random-detect", "ecn", rest @ ..] if rest.first() != Some(&"count") => {
                    if let Err(e) = check_curve(rest, "ecn", "max-mark-probability") {
                        return Some(Err(e));
                    }
                    set_child(node, "random-detect ecn ", line);
                }
                ["no", "random-detect", "ecn"] => remove_children(node, "random-detect ecn "),
                // Without a drop precedence: the curve for every packet of the queue.
                ["random-detect", "drop", rest @ ..]
                    if rest.first() != Some(&"drop-precedence") =>
                {
                    if let Err(e) = check_curve(rest, "drop", "drop-probability") {
                        return Some(Err(e));
                    }
                    set_child(node, "random-detect drop minimum-threshold ", line);
                }
                ["no", "random-detect", "drop"] => {
                    remove_children(node, "random-detect drop minimum-threshold ")
                }
                _ => return None,
            }
            return Some(Ok(()));
        }
        if here.starts_with("interface ") {
            match words.as_slice() {
                ["service-profile", _] => set_child(node, "service-profile ", line),
                ["no", "service-profile", ..] => remove_children(node, "service-profile "),
                // An interface's own queue settings override its profile's.
                ["tx-queue" | "uc-tx-queue", queue] => {
                    if let Err(e) = enter_queue(node, path, queue, line) {
                        return Some(Err(e));
                    }
                }
                _ => return None,
            }
            return Some(Ok(()));
        }
        None
    }

    fn apply_top(
        &mut self,
        path: &mut Vec<usize>,
        line: &str,
        words: &[&str],
    ) -> Result<(), String> {
        match words {
            ["qos", "map", "dscp", rest @ ..] => {
                let (values, class) = map_values(rest, "traffic-class", 63)?;
                for d in values {
                    self.dscp[d as usize] = class;
                }
                self.place(Node::Maps);
            }
            ["qos", "map", "traffic-class", rest @ ..] => {
                let (values, queue) = map_values(rest, "tx-queue", 7)?;
                for c in values {
                    self.class_queue[c as usize] = queue;
                }
                self.place(Node::Maps);
            }
            ["ip", "route", rest @ ..] => {
                let key = route_key(rest)?;
                self.routes.insert(key, line.to_string());
                self.place(Node::Routes);
            }
            ["no", "ip", "route", rest @ ..] => {
                let (vrf, words) = match rest {
                    ["vrf", vrf, tail @ ..] => (vrf.to_string(), tail),
                    tail => (String::new(), tail),
                };
                let (prefix, hop) = match words {
                    [prefix] => (prefix_of(prefix)?, None),
                    [prefix, hop, ..] => (prefix_of(prefix)?, Some(hop.to_string())),
                    _ => return Err("Incomplete command".into()),
                };
                self.routes.retain(|(v, p, h), _| {
                    !(v == &vrf && p == &prefix && hop.as_ref().is_none_or(|hop| hop == h))
                });
            }
            ["qos", "random-detect", "ecn", "allow", "non-ect", rest @ ..] => {
                if !matches!(rest, [] | ["chip-based"]) {
                    return Err("Invalid input".into());
                }
                self.nodes.retain(|n| !n.text().starts_with(ALLOW_NON_ECT));
                self.nodes.push(Node::line(&words.join(" ")));
            }
            ["no", "qos", "random-detect", "ecn", "allow", "non-ect", ..] => {
                self.nodes.retain(|n| !n.text().starts_with(ALLOW_NON_ECT));
            }
            ["no", "qos", "profile", name] => {
                let text = format!("qos profile {name}");
                self.nodes.retain(|n| n.text() != text);
            }
            ["qos", "profile", _] | ["interface", _] => {
                let index = match self.nodes.iter().position(|n| n.text() == line) {
                    Some(i) => i,
                    None => {
                        self.nodes.push(Node::line(line));
                        self.nodes.len() - 1
                    }
                };
                path.push(index);
            }
            _ => return Err("Invalid input".into()),
        }
        Ok(())
    }

    /// Makes sure a placeholder is in the tree (new ones go last).
    fn place(&mut self, placeholder: Node) {
        let present = self
            .nodes
            .iter()
            .any(|n| std::mem::discriminant(n) == std::mem::discriminant(&placeholder));
        if !present {
            self.nodes.push(placeholder);
        }
    }

    fn render(&self) -> String {
        let mut blocks: Vec<(bool, String)> = Vec::new();
        for node in &self.nodes {
            match node {
                Node::Line { text, children } => {
                    let mut out = format!("{text}\n");
                    render_children(children, 1, &mut out);
                    blocks.push((!children.is_empty(), out));
                }
                Node::Maps => blocks.push((true, self.render_maps())),
                Node::Routes => {
                    let lines: String = self.routes.values().map(|l| format!("{l}\n")).collect();
                    blocks.push((true, lines));
                }
            }
        }
        let mut out = String::new();
        let mut previous_block = false;
        for (i, (block, text)) in blocks.iter().enumerate() {
            if i > 0 && (*block || previous_block) {
                out.push_str("!\n");
            }
            out.push_str(text);
            previous_block = *block;
        }
        out.push_str("!\nend\n");
        out
    }

    fn render_maps(&self) -> String {
        let mut out = String::new();
        let mut by_class: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
        for (d, &class) in self.dscp.iter().enumerate() {
            if class != d as u8 / 8 {
                by_class.entry(class).or_default().push(d);
            }
        }
        for (class, dscps) in by_class {
            for chunk in dscps.chunks(8) {
                let list: Vec<String> = chunk.iter().map(ToString::to_string).collect();
                out.push_str(&format!(
                    "qos map dscp {} to traffic-class {class}\n",
                    list.join(" ")
                ));
            }
        }
        for (class, &queue) in self.class_queue.iter().enumerate() {
            if queue != class as u8 {
                out.push_str(&format!(
                    "qos map traffic-class {class} to tx-queue {queue}\n"
                ));
            }
        }
        out
    }
}

/// Sub-mode lines, as EOS prints them: a nested block (a `tx-queue`) after a `!` line
/// of its own indent; a `tx-queue` left with only defaults is not printed.
fn render_children(children: &[Node], depth: usize, out: &mut String) {
    let indent = "   ".repeat(depth);
    for child in children {
        if let Node::Line { text, children } = child {
            if queue_number(text).is_some() && children.is_empty() {
                continue;
            }
            if !children.is_empty() {
                out.push_str(&format!("{indent}!\n"));
            }
            out.push_str(&format!("{indent}{text}\n"));
            render_children(children, depth + 1, out);
        }
    }
}

/// Enters (adding it if needed) the `tx-queue` block `line` under `node`; EOS lists
/// tx-queues in ascending order.
fn enter_queue(
    node: &mut Node,
    path: &mut Vec<usize>,
    queue: &str,
    line: &str,
) -> Result<(), String> {
    let queue = match queue.parse::<u8>() {
        Ok(q) if q <= 7 => q,
        _ => return Err("Invalid input (queue)".into()),
    };
    let children = node.children();
    let index = match children.iter().position(|c| c.text() == line) {
        Some(i) => i,
        None => {
            let at = children
                .iter()
                .position(|c| queue_number(c.text()).is_some_and(|q| q > queue))
                .unwrap_or(children.len());
            children.insert(at, Node::line(line));
            at
        }
    };
    path.push(index);
    Ok(())
}

fn queue_number(text: &str) -> Option<u8> {
    match text.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["tx-queue" | "uc-tx-queue", q] => q.parse().ok(),
        _ => None,
    }
}

/// Sets the child line starting with `prefix` to `line`, or adds it.
fn set_child(node: &mut Node, prefix: &str, line: &str) {
    let children = node.children();
    match children.iter().position(|c| c.text().starts_with(prefix)) {
        Some(i) => children[i] = Node::line(line),
        None => children.push(Node::line(line)),
    }
}

fn remove_children(node: &mut Node, prefix: &str) {
    node.children().retain(|c| !c.text().starts_with(prefix));
}

/// `V V … to WORD T`, each V a number or a range `a-b`.
fn map_values(words: &[&str], target: &str, max: u32) -> Result<(Vec<u32>, u8), String> {
    let invalid = || "Invalid input (map)".to_string();
    let to = words.iter().position(|w| *w == "to").ok_or_else(invalid)?;
    let [word, value] = &words[to + 1..] else {
        return Err(invalid());
    };
    if *word != target {
        return Err(invalid());
    }
    let mut values = Vec::new();
    for w in &words[..to] {
        values.extend(super::numbers(w).ok_or_else(invalid)?);
    }
    let value: u8 = value.parse().map_err(|_| invalid())?;
    if values.is_empty() || values.iter().any(|v| *v > max) || value > 7 {
        return Err(invalid());
    }
    Ok((values, value))
}

fn prefix_of(text: &str) -> Result<Ipv4Net, String> {
    text.parse::<Ipv4Net>()
        .map(|p| p.trunc())
        .map_err(|_| format!("Invalid input (prefix {text})"))
}

fn route_key(words: &[&str]) -> Result<(String, Ipv4Net, String), String> {
    let (vrf, words) = match words {
        ["vrf", vrf, tail @ ..] => (vrf.to_string(), tail),
        tail => (String::new(), tail),
    };
    let [prefix, hop, ..] = words else {
        return Err("Incomplete command".into());
    };
    let hop_ok = *hop == "Null0" || hop.parse::<std::net::Ipv4Addr>().is_ok();
    if !hop_ok {
        return Err(format!("Invalid input (next hop {hop})"));
    }
    Ok((vrf, prefix_of(prefix)?, hop.to_string()))
}

/// `minimum-threshold N UNIT maximum-threshold N UNIT [PROBABILITY-WORD P] [weight W]`,
/// as AVD's schema bounds them (`random-detect ecn` or `random-detect drop`).
fn check_curve(words: &[&str], kind: &str, probability_word: &str) -> Result<(), String> {
    let invalid = |why: &str| Err(format!("Invalid input (random-detect {kind}: {why})"));
    let mut rest = words;
    let mut seen = (false, false);
    while let Some((word, tail)) = rest.split_first() {
        rest = match (*word, tail) {
            ("minimum-threshold" | "maximum-threshold", [n, unit, tail @ ..]) => {
                let Ok(n) = n.parse::<u64>() else {
                    return invalid("threshold");
                };
                let range = match *unit {
                    "bytes" => 1..=256_000_000,
                    "kbytes" => 1..=256_000,
                    "mbytes" => 1..=256,
                    "segments" | "milliseconds" => 1..=u64::MAX,
                    _ => return invalid("unit"),
                };
                if !range.contains(&n) {
                    return invalid("threshold out of range");
                }
                if *word == "minimum-threshold" {
                    seen.0 = true;
                } else {
                    seen.1 = true;
                }
                tail
            }
            (word, [p, tail @ ..]) if word == probability_word => match p.parse::<u8>() {
                Ok(1..=100) => tail,
                _ => return invalid("probability"),
            },
            ("weight", [_, tail @ ..]) => tail,
            _ => return invalid("unexpected word"),
        };
    }
    if seen == (true, true) {
        Ok(())
    } else {
        invalid("both thresholds are required")
    }
}

/// The queueing the switch runs: DSCP → traffic class → tx-queue for every port, and
/// the tx-queues of each interface's service profile with its own overrides.
/// `priority strict` is a tx-queue's default; a curve in segments or milliseconds is
/// not enforced (the lab has no segment size or drain rate to convert it with).
pub fn qos(device: &Device) -> crate::qos::SwitchQos {
    use crate::qos::{PortQos, SwitchQos};
    let config = Config::parse(&running(device));
    let map: [u8; 64] = std::array::from_fn(|d| config.class_queue[config.dscp[d] as usize & 7]);
    let profiles: BTreeMap<&str, &Vec<Node>> = config
        .nodes
        .iter()
        .filter_map(|n| match n {
            Node::Line { text, children } => text
                .strip_prefix("qos profile ")
                .map(|name| (name, children)),
            _ => None,
        })
        .collect();
    let allow_non_ect = config
        .nodes
        .iter()
        .any(|n| n.text().starts_with(ALLOW_NON_ECT));
    let mut qos = SwitchQos::default();
    for node in &config.nodes {
        let Node::Line { text, children } = node else {
            continue;
        };
        let Some(port) = text.strip_prefix("interface ") else {
            continue;
        };
        let mut queues = std::collections::BTreeMap::new();
        for q in 0..8 {
            queues.insert(
                q,
                crate::qos::QueueQos {
                    strict: true,
                    ..Default::default()
                },
            );
        }
        let profile = children
            .iter()
            .find_map(|c| c.text().strip_prefix("service-profile "))
            .and_then(|name| profiles.get(name));
        for blocks in profile.into_iter().copied().chain([children]) {
            for block in blocks {
                let (Some(q), Node::Line { children, .. }) = (queue_number(block.text()), block)
                else {
                    continue;
                };
                let queue = queues.entry(q).or_default();
                for line in children.iter().map(Node::text) {
                    let words: Vec<&str> = line.split_whitespace().collect();
                    match words.as_slice() {
                        ["no", "priority"] => queue.strict = false,
                        // ECN-capable packets marked, the others dropped (WRED-ECN),
                        // or enqueued when the switch allows non-ECT.
                        ["random-detect", "ecn", rest @ ..] => {
                            queue.mark = eos_curve(rest, "max-mark-probability");
                            queue.drop_not_ect = queue.mark.filter(|_| !allow_non_ect);
                        }
                        ["random-detect", "drop", rest @ ..] => {
                            queue.drop_all = eos_curve(rest, "drop-probability");
                        }
                        _ => {}
                    }
                }
            }
        }
        let mut port_qos = PortQos::mapped(map);
        port_qos.queues = queues;
        qos.ports.insert(port.to_string(), port_qos);
    }
    qos
}

/// `minimum-threshold N UNIT maximum-threshold N UNIT PROBABILITY_WORD P`.
fn eos_curve(words: &[&str], probability_word: &str) -> Option<crate::qos::Curve> {
    let mut curve = crate::qos::Curve {
        min_bytes: 0,
        max_bytes: 0,
        max_percent: 100,
    };
    let mut rest = words;
    while let Some((word, tail)) = rest.split_first() {
        rest = match (*word, tail) {
            ("minimum-threshold", [n, unit, tail @ ..]) => {
                curve.min_bytes = crate::qos::bytes(n, Some(unit))?;
                tail
            }
            ("maximum-threshold", [n, unit, tail @ ..]) => {
                curve.max_bytes = crate::qos::bytes(n, Some(unit))?;
                tail
            }
            (w, [p, tail @ ..]) if w == probability_word => {
                curve.max_percent = p.parse().ok()?;
                tail
            }
            (_, tail) => tail,
        };
    }
    Some(curve)
}
