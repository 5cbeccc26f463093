//! Reading an inventory file into raw sections, reporting every structural problem.

use std::collections::HashSet;
use std::num::IntErrorKind;
use std::path::{Path, PathBuf};

use marked_yaml::types::{MarkedMappingNode, MarkedSequenceNode};
use marked_yaml::{Error as SerdeError, FromNodeError, Marker, Node, Span};
use rayon::prelude::*;
use serde::de::{DeserializeOwned, IntoDeserializer};

use mlt_common::input::{InputError, read_text};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::Marker as YamlMarker;

use super::raw::{self, Item, Sections};
use super::{Inventory, events, parts, validate};
use crate::diag::{Diagnostics, Reporter, start_of};

/// The largest inventory (or file it names) read; a 2,048-host fabric is about 1 MB.
pub const MAX_INPUT_BYTES: u64 = 32 << 20;

/// Why an inventory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: InputError,
    },
    #[error("the inventory has {} problem(s)", .0.len())]
    Invalid(Diagnostics),
}

/// Reads and validates the inventory at `path`.
pub fn load(path: &Path) -> Result<Inventory, LoadError> {
    let text = match read_text(path, MAX_INPUT_BYTES) {
        Ok(text) => text,
        Err(InputError::NotUtf8 { line, column }) => {
            let mut report = Reporter::default();
            let source = report.add_source(path);
            let mark = marked_yaml::Marker::new(source, 0, line, column);
            report.error_at(mark, "not UTF-8 text; an inventory must be UTF-8");
            return Err(LoadError::Invalid(report.finish()));
        }
        Err(source) => {
            return Err(LoadError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    load_str(path, &text)
}

/// Validates inventory `text` as if read from `path` (files it names are relative to it).
pub fn load_str(path: &Path, text: &str) -> Result<Inventory, LoadError> {
    load_in_parts(path, text, parts::default_parts())
}

/// [`load_str`], the YAML read in about `parts` parts.
fn load_in_parts(path: &Path, text: &str, parts: usize) -> Result<Inventory, LoadError> {
    let mut report = Reporter::default();
    let source = report.add_source(path);
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let read = match parts::read_each(source, text, parts, &read_part, Some(&read_lists)) {
        Ok(read) => read,
        Err(e) => {
            report_syntax_error(&mut report, &e);
            return Err(LoadError::Invalid(report.finish()));
        }
    };
    if let Some(second) = second_document(text) {
        report.error_at(
            marked_yaml::Marker::new(source, second.index(), second.line(), second.col() + 1),
            "a second YAML document starts here; an inventory is one document",
        );
    }
    let sections = join_parts(read, &mut report);
    match validate::validate(path, sections, &mut report) {
        Some(inventory) if !report.has_errors() => Ok(inventory),
        None if !report.has_errors() => unreachable!("validation failed without a problem"),
        _ => Err(LoadError::Invalid(report.finish())),
    }
}

/// Where a second document starts, if `text` holds more than one (the YAML loader
/// reads only the first and would ignore the rest without a word).
fn second_document(text: &str) -> Option<YamlMarker> {
    // Documents are separated by `---` or `...` at the start of a line.
    let separated = text
        .lines()
        .any(|l| l.starts_with("---") || l.starts_with("..."));
    if !separated {
        return None;
    }
    let mut parser = Parser::new(text.chars());
    let mut documents = 0;
    loop {
        match parser.next_token() {
            Ok((Event::DocumentStart, mark)) => {
                documents += 1;
                if documents == 2 {
                    return Some(mark);
                }
            }
            Ok((Event::StreamEnd, _)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

fn report_syntax_error(report: &mut Reporter, error: &marked_yaml::LoadError) {
    use marked_yaml::LoadError as E;
    let (mark, message) = match error {
        E::TopLevelMustBeMapping(m) => (*m, "the inventory must be a mapping of sections".into()),
        E::TopLevelMustBeSequence(m) => (*m, "expected a list".into()),
        E::UnexpectedAnchor(m) => (*m, "YAML anchors and aliases are not supported".into()),
        E::MappingKeyMustBeScalar(m) => (*m, "mapping keys must be plain names".into()),
        E::UnexpectedTag(m) => (*m, "YAML tags are not supported".into()),
        E::ScanError(m, e) => (*m, format!("YAML syntax error: {}", e.info())),
        E::DuplicateKey(key) => {
            let first = key.prev_key.span().start().copied();
            let mark = start_of(key.key.span());
            let also = first.map_or(String::new(), |f| format!(" (first at line {})", f.line()));
            (mark, format!("duplicate key `{}`{also}", key.key.as_str()))
        }
    };
    report.error_at(mark, message);
}

const SECTIONS: [&str; 7] = [
    "fabric", "defaults", "racks", "switches", "hosts", "links", "training",
];
const REQUIRED: [&str; 6] = ["fabric", "racks", "switches", "hosts", "links", "training"];

/// What one part of the text (or the whole) holds, read on the pool: its problems are
/// kept with their places for the report.
#[derive(Default)]
struct PartRead {
    /// The span of the part's top-level mapping (None: the text is not a mapping).
    top: Option<Span>,
    keys: Vec<String>,
    problems: Vec<(Marker, String)>,
    fabric: Option<raw::Fabric>,
    defaults: Option<raw::Defaults>,
    training: Option<raw::Training>,
    racks: Entries<raw::Rack>,
    switches: Entries<raw::Switch>,
    hosts: Entries<raw::Host>,
    links: Entries<raw::Link>,
    failed: Failed,
}

/// A part's entries of one list: those read, those that were not (named by their place
/// in the part until the parts before are counted), and how many there were.
struct Entries<T> {
    items: Vec<Item<T>>,
    unread: Vec<Unread>,
    count: usize,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries {
            items: Vec::new(),
            unread: Vec::new(),
            count: 0,
        }
    }
}

impl<T> Entries<T> {
    /// Entries that all deserialized.
    fn read(items: Vec<Item<T>>) -> Self {
        Entries {
            count: items.len(),
            items,
            unread: Vec::new(),
        }
    }
}

/// An entry that did not deserialize.
struct Unread {
    mark: Marker,
    /// `switch spine1`, or None for an entry without a name.
    named: Option<String>,
    /// Its index in the part's piece of the list.
    index: usize,
    message: String,
}

/// Reads a part's tree: `continues` when its first key continues the list the part
/// before ended with.
fn read_part(root: &Node, continues: bool) -> PartRead {
    let mut part = PartRead::default();
    let Some(top) = root.as_mapping() else {
        part.problems.push((
            start_of(root.span()),
            "the inventory must be a mapping of sections".into(),
        ));
        return part;
    };
    part.top = Some(*top.span());
    for (i, key) in top.keys().enumerate() {
        if continues && i == 0 {
            continue;
        }
        part.keys.push(key.as_str().to_owned());
        if !SECTIONS.contains(&key.as_str()) {
            part.problems.push((
                start_of(key.span()),
                format!(
                    "unknown section `{}` (expected one of: {})",
                    key.as_str(),
                    SECTIONS.join(", ")
                ),
            ));
        }
    }
    // A single section written as a list continued here was read (and reported) where
    // it starts.
    let continued = top.keys().next().filter(|_| continues).map(|k| k.as_str());
    let own = |section: &str| continued != Some(section);
    if own("fabric") {
        part.fabric = read_single(top, "fabric", &mut part.problems, &mut part.failed);
    }
    if own("defaults") {
        part.defaults = read_single(top, "defaults", &mut part.problems, &mut part.failed);
    }
    if own("training") {
        part.training = read_single(top, "training", &mut part.problems, &mut part.failed);
    }
    part.racks = read_list(top, "racks", "rack", &mut part.problems, &mut part.failed);
    part.switches = read_list(
        top,
        "switches",
        "switch",
        &mut part.problems,
        &mut part.failed,
    );
    part.hosts = read_list(top, "hosts", "host", &mut part.problems, &mut part.failed);
    part.links = read_list(top, "links", "link", &mut part.problems, &mut part.failed);
    if let Some(hosts) = top.get_node("hosts")
        && hosts.as_sequence().is_some_and(|h| h.is_empty())
    {
        part.problems.push((
            start_of(hosts.span()),
            "`hosts` is empty; a job needs at least one host".into(),
        ));
    }
    part
}

/// Reads a part of list entries only from its events ([`events`]), as [`read_part`]
/// would read its tree: its top-level keys, and what it holds.
fn read_lists(
    source: usize,
    text: &str,
    continues: Option<&str>,
) -> Option<(Vec<String>, PartRead)> {
    let lists = events::read_lists(source, text, continues)?;
    let own = lists.keys[usize::from(continues.is_some())..].to_vec();
    let part = PartRead {
        top: Some(lists.top),
        keys: own,
        racks: Entries::read(lists.racks),
        switches: Entries::read(lists.switches),
        hosts: Entries::read(lists.hosts),
        links: Entries::read(lists.links),
        ..PartRead::default()
    };
    Some((lists.keys, part))
}

/// The parts' sections as one, every problem reported.
fn join_parts(parts: Vec<PartRead>, report: &mut Reporter) -> Sections {
    let mut sections = Sections::default();
    let mut failed = Failed::default();
    let mut keys = HashSet::new();
    let top = parts.first().and_then(|p| p.top);
    let mut offsets = [0usize; 4];
    // Room for every part's entries at once: no list is copied as it grows (16,384
    // hosts are several MB).
    sections
        .hosts
        .reserve(parts.iter().map(|p| p.hosts.items.len()).sum());
    sections
        .links
        .reserve(parts.iter().map(|p| p.links.items.len()).sum());
    for part in parts {
        for (mark, message) in part.problems {
            report.error_at(mark, message);
        }
        keys.extend(part.keys);
        sections.fabric = sections.fabric.or(part.fabric);
        sections.defaults = part.defaults.unwrap_or(sections.defaults);
        sections.training = sections.training.or(part.training);
        join_list(
            &mut sections.racks,
            part.racks,
            "racks",
            &mut offsets[0],
            report,
        );
        join_list(
            &mut sections.switches,
            part.switches,
            "switches",
            &mut offsets[1],
            report,
        );
        join_list(
            &mut sections.hosts,
            part.hosts,
            "hosts",
            &mut offsets[2],
            report,
        );
        join_list(
            &mut sections.links,
            part.links,
            "links",
            &mut offsets[3],
            report,
        );
        failed.names.extend(part.failed.names);
        failed.kinds.extend(part.failed.kinds);
    }
    if let Some(top) = top {
        for name in REQUIRED {
            if !keys.contains(name) {
                report.error(&top, format!("missing required section `{name}`"));
            }
        }
    }
    sections.broken_names = failed.names;
    sections.malformed = failed.kinds;
    sections
}

/// Appends a part's entries of `section`, its unread ones reported by their place in
/// the whole list when they have no name; `offset` counts the entries before.
fn join_list<T>(
    list: &mut Vec<Item<T>>,
    entries: Entries<T>,
    section: &str,
    offset: &mut usize,
    report: &mut Reporter,
) {
    list.extend(entries.items);
    for unread in entries.unread {
        let what = unread
            .named
            .unwrap_or_else(|| format!("{section}[{}]", *offset + unread.index));
        report.error_at(unread.mark, format!("{what}: {}", unread.message));
    }
    *offset += entries.count;
}

#[derive(Default)]
struct Failed {
    names: HashSet<String>,
    kinds: HashSet<&'static str>,
}

fn read_single<T: DeserializeOwned>(
    top: &MarkedMappingNode,
    section: &'static str,
    problems: &mut Vec<(Marker, String)>,
    failed: &mut Failed,
) -> Option<T> {
    let node = top.get_node(section)?;
    let result = match node.as_mapping() {
        None => {
            problems.push((
                start_of(node.span()),
                format!("`{section}` must be a mapping"),
            ));
            None
        }
        Some(_) => match read_node(node) {
            Ok(value) => Some(value),
            Err(e) => {
                problems.push((error_mark(&e, node), describe(&e, Some(section))));
                None
            }
        },
    };
    if result.is_none() {
        failed.kinds.insert(section);
    }
    result
}

fn read_list<T: DeserializeOwned + Send>(
    top: &MarkedMappingNode,
    section: &str,
    kind: &'static str,
    problems: &mut Vec<(Marker, String)>,
    failed: &mut Failed,
) -> Entries<T> {
    let Some(node) = top.get_node(section) else {
        return Entries::default();
    };
    let Some(entries) = node.as_sequence() else {
        problems.push((start_of(node.span()), format!("`{section}` must be a list")));
        return Entries::default();
    };
    read_entries(entries, kind, failed)
}

fn read_entries<T: DeserializeOwned + Send>(
    entries: &MarkedSequenceNode,
    kind: &'static str,
    failed: &mut Failed,
) -> Entries<T> {
    // Entries are read on every core (16,384 hosts: 0.17 → 0.09 s on two).
    let read: Vec<Result<T, FromNodeError>> = entries.par_iter().map(read_node::<T>).collect();
    let mut out = Entries {
        items: Vec::with_capacity(entries.len()),
        unread: Vec::new(),
        count: entries.len(),
    };
    for ((index, entry), read) in entries.iter().enumerate().zip(read) {
        match read {
            Ok(value) => out.items.push(Item {
                span: *entry.span(),
                value,
            }),
            Err(e) => {
                let name = entry_name(entry);
                out.unread.push(Unread {
                    mark: error_mark(&e, entry),
                    named: name.as_ref().map(|name| format!("{kind} {name}")),
                    index,
                    message: describe(&e, None),
                });
                failed.names.extend(name);
                failed.kinds.insert(kind);
            }
        }
    }
    out
}

/// `node` as a `T`. The path serde walks only places an error, and tracking it is
/// costly on a large inventory (validate of 16,384 hosts: 2.34 → 2.11 s without), so
/// a node is read again with it only when there is an error to report.
fn read_node<T: DeserializeOwned>(node: &Node) -> Result<T, FromNodeError> {
    T::deserialize(node.into_deserializer()).or_else(|_| marked_yaml::from_node::<T>(node))
}

fn entry_name(entry: &Node) -> Option<String> {
    let name = entry.as_mapping()?.get_scalar("name")?;
    Some(name.as_str().to_string())
}

/// Where to point for `e`, found while reading `entry`.
///
/// A missing field is reported at the first key of the mapping that lacks it: the
/// parser marks a block mapping at its first `:`, which reads as a wrong column.
fn error_mark(e: &FromNodeError, entry: &Node) -> marked_yaml::Marker {
    if let SerdeError::Other(message, _) = &**e
        && missing_field(message).is_some()
        && let Some(first_key) = node_at(entry, e.path())
            .and_then(Node::as_mapping)
            .and_then(|m| m.keys().next())
    {
        return start_of(first_key.span());
    }
    e.start_mark().unwrap_or_else(|| start_of(entry.span()))
}

/// The node at a serde path such as `nic` or `ports[2]` below `node`.
fn node_at<'n>(node: &'n Node, path: Option<&str>) -> Option<&'n Node> {
    let Some(path) = path else {
        return Some(node);
    };
    let mut here = node;
    for part in path.split('.') {
        let (key, indices) = part.split_once('[').unwrap_or((part, ""));
        if !key.is_empty() {
            here = here.as_mapping()?.get_node(key)?;
        }
        for index in indices.split('[').filter(|i| !i.is_empty()) {
            let index: usize = index.trim_end_matches(']').parse().ok()?;
            here = here.as_sequence()?.get(index)?;
        }
    }
    Some(here)
}

/// The expected name a misspelled `name` most likely meant: at most two edits away
/// (one for names of three letters or fewer), the nearest first.
fn closest<'a>(name: &str, expected: &[&'a str]) -> Option<&'a str> {
    let allowed = if name.chars().count() <= 3 { 1 } else { 2 };
    expected
        .iter()
        .map(|candidate| (strsim::damerau_levenshtein(name, candidate), *candidate))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Turns a serde error into a message that names the field the way it is written.
fn describe(e: &FromNodeError, section: Option<&str>) -> String {
    let path = |tail: Option<&str>| {
        let parts = [section, e.path(), tail];
        parts.into_iter().flatten().collect::<Vec<_>>().join(".")
    };
    let field = path(None);
    match &**e {
        SerdeError::UnknownFieldError(name, _, _) if is_secret(name) => format!(
            "`{field}`: passwords and other secrets are not accepted in an inventory; \
             reference a key instead (key: {{file: PATH}}, key: {{agent: true}} or key: {{env: VAR}})"
        ),
        SerdeError::UnknownFieldError(name, expected, _) => match closest(name, expected) {
            Some(near) => format!(
                "unknown field `{field}`: did you mean `{near}`? (expected one of: {})",
                expected.join(", ")
            ),
            None => format!(
                "unknown field `{field}` (expected one of: {})",
                expected.join(", ")
            ),
        },
        SerdeError::IntegerParseFailure(err, _) => match err.kind() {
            IntErrorKind::PosOverflow => format!("`{field}` is too large"),
            _ => format!("`{field}` must be a whole number"),
        },
        SerdeError::FloatParseFailure(..) => format!("`{field}` must be a number"),
        SerdeError::NotBoolean(_) => format!("`{field}` must be true or false"),
        SerdeError::Other(message, _) => match missing_field(message) {
            Some(missing) => format!("missing required field `{}`", path(Some(missing))),
            None if field.is_empty() => message.clone(),
            None => format!("`{field}`: {message}"),
        },
    }
}

fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.strip_suffix('`')
}

fn is_secret(field: &str) -> bool {
    let f = field.to_ascii_lowercase();
    f.contains("password") || f.contains("secret") || f == "passphrase"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::{FabricSize, fabric_yaml};
    use crate::plan::Plan;

    /// A generated fabric large enough (~620 KB) to be read in parts.
    fn large_fabric() -> String {
        let size = FabricSize {
            spines: 4,
            leaves: 128,
            hosts_per_leaf: 16,
            layers: 8,
            params_per_layer: 1000,
        };
        fabric_yaml(size).unwrap()
    }

    fn problems(text: &str, parts: usize) -> Diagnostics {
        match load_in_parts(Path::new("fabric.yaml"), text, parts) {
            Err(LoadError::Invalid(found)) => found,
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("the inventory has problems"),
        }
    }

    #[test]
    fn an_inventory_read_in_parts_is_the_inventory_read_whole() {
        let text = large_fabric();
        let path = Path::new("fabric.yaml");
        let counted = parts::read_each(0, &text, 16, &|_, _| (), None).unwrap();
        assert!(counted.len() >= 8, "{} parts", counted.len());
        let plan = |parts| {
            serde_json::to_string(&Plan::build(&load_in_parts(path, &text, parts).unwrap()))
                .unwrap()
        };
        let whole = plan(1);
        for parts in [2, 5, 16] {
            assert!(plan(parts) == whole, "{parts} parts");
        }
    }

    #[test]
    fn problems_anywhere_are_reported_alike_whole_or_in_parts() {
        let last_link = {
            let text = large_fabric();
            let at = text.rfind("\n  - [leaf128:").unwrap();
            text[at..].lines().nth(1).unwrap().to_string()
        };
        let text = large_fabric()
            // An entry without a name, early, and others deep in lists cut into parts.
            .replacen("  - {name: r2,", "  - {nam: r2,", 1)
            .replacen("  - name: h1500\n", "  - {rack: r1}\n  - name: h1500\n", 1)
            .replacen(
                "  - name: h1700\n",
                "  - name: h1700\n    colour: blue\n",
                1,
            )
            .replacen(&last_link, &format!("  - 5\n{last_link}"), 1)
            + "extra: 1\n";
        let whole = problems(&text, 1);
        let shown: Vec<String> = whole
            .0
            .iter()
            .map(|d| format!("{}:{} {}", d.line, d.column, d.message))
            .collect();
        for expected in [
            "racks[1]: unknown field `nam`",
            "hosts[1499]: missing required field `name`",
            "host h1700: unknown field `colour`",
            "unknown section `extra`",
        ] {
            assert!(
                shown.iter().any(|d| d.contains(expected)),
                "{expected}: {shown:#?}"
            );
        }
        assert!(
            shown
                .iter()
                .any(|d| d.contains("links[") && d.contains("]: ")),
            "{shown:#?}"
        );
        for parts in [2, 5, 16] {
            assert_eq!(problems(&text, parts), whole, "{parts} parts");
        }
    }

    /// Every list entry with its span, as the reading of `text` in `parts` parts gives
    /// them, and how many parts were read from their events.
    fn entries_read(text: &str, parts: usize, events: bool) -> (String, usize) {
        let from_events = std::sync::atomic::AtomicUsize::new(0);
        let counted = |source: usize, part: &str, continues: Option<&str>| {
            let read = read_lists(source, part, continues)?;
            from_events.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some(read)
        };
        let lists: Option<parts::ReadLists<PartRead>> = if events { Some(&counted) } else { None };
        let read = parts::read_each(0, text, parts, &read_part, lists).unwrap();
        let mut report = Reporter::default();
        report.add_source(Path::new("fabric.yaml"));
        let sections = join_parts(read, &mut report);
        assert!(report.finish().is_empty());
        let shown = format!(
            "{:?}\n{:?}\n{:?}\n{:?}",
            sections.racks, sections.switches, sections.hosts, sections.links
        );
        (shown, from_events.into_inner())
    }

    #[test]
    fn parts_of_list_entries_read_from_their_events_as_from_their_trees() {
        let hosts_at = |text: &str, name: &str| text.find(&format!("  - name: {name}\n")).unwrap();
        let mut text = large_fabric();
        // Styles the generator does not write: a comment, quoted and block values, a
        // number quoted or signed, a host whose key is a mapping (a span the events
        // reader leaves to the tree), a link written in block style.
        let at = hosts_at(&text, "h700");
        text.insert_str(at, "  # the next rack\n");
        text = text
            .replacen(
                "    cores: [2, 3, 4, 5, 6]\n  - name: h900\n",
                "    cores:\n      - 2\n      - \"3\"\n  - name: h900\n",
                1,
            )
            .replacen("buffer_bytes: 33554432", "buffer_bytes: \"33554432\"", 1)
            .replacen("queues: 8", "queues: +8", 1)
            .replacen(
                "  - name: h1800\n    rack: r113\n    mgmt: {address: 10.250.",
                "  - name: h1800\n    rack: r113\n    mgmt: {key: {agent: true}, address: 10.250.",
                1,
            );
        let last = text.rfind("\n  - [").unwrap() + 1;
        let line_end = last + text[last..].find('\n').unwrap();
        let ends: Vec<String> = text[last + 5..line_end - 1]
            .split(", ")
            .map(|end| format!("    - '{end}'\n"))
            .collect();
        text.replace_range(last..=line_end, &format!("  -\n{}", ends.concat()));
        for written in [
            "# the next rack",
            "      - \"3\"\n",
            "buffer_bytes: \"33554432\"",
            "queues: +8",
            "mgmt: {key: {agent: true}",
            "  -\n    - '",
        ] {
            assert!(text.contains(written), "{written}");
        }
        for parts in [2, 5, 16] {
            let (from_trees, _) = entries_read(&text, parts, false);
            let (from_events, read) = entries_read(&text, parts, true);
            assert!(
                read >= parts / 2,
                "{parts} parts: {read} read from their events"
            );
            assert!(from_events == from_trees, "{parts} parts");
        }
    }

    /// A part's keys and entries with their spans, as text.
    fn shown(part: &PartRead) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            part.keys,
            part.top,
            part.racks.items,
            part.switches.items,
            part.hosts.items,
            part.links.items
        )
    }

    /// A part read from its tree, as `read_each` reads it.
    fn from_tree(text: &str, continues: bool) -> PartRead {
        let root = marked_yaml::parse_yaml_with_options(0, text, parts::options()).unwrap();
        read_part(&root, continues)
    }

    const HOST: &str = "  - {name: h1, rack: r1, mgmt: {address: 10.250.0.1}, \
        nic: {name: ens1f0, pci: \"0000:3b:00.0\", mac: \"02:00:00:00:00:01\", ip: 10.1.0.11}, \
        cores: [2, 3]}\n";

    #[test]
    fn the_events_reader_reads_each_style_as_the_tree_does() {
        let block_host = "  # a host in block style\n  - name: 'h2'\n    rack: \"r1\"\n    \
            mgmt:\n      address: 10.250.0.2\n      port: +22\n      user: ~\n    nic:\n      \
            name: ens1f0\n      pci: 0000:3b:00.0\n      mac: 02:00:00:00:00:02\n      \
            ip: 10.1.0.12\n    cores:\n      - \"2\"\n      - 3\n";
        let switch = "switches:\n  - name: leaf1\n    role: leaf\n    vendor: sonic\n    \
            rack: r1\n    buffer_bytes: 33554432\n    queues: 8\n    ports:\n      \
            - {name: Ethernet0, speed: 100G}\n      - name: Ethernet4\n        speed: 400G\n        \
            ip: 172.16.0.0/31\n";
        let racks = "racks:\n  - {name: r1, subnet: 10.1.0.0/24, \
            gateway: {ip: 10.1.0.1, mac: \"02:01:00:00:00:00\"}}\n";
        let links = "links:\n  - [h1:ens1f0, leaf1:Ethernet0]\n  -\n    - 'h2:ens1f0'\n    \
            - leaf1:Ethernet4\n";
        let cases = [
            (
                format!("{racks}{switch}hosts:\n{HOST}{block_host}{links}"),
                None,
            ),
            (format!("\n\nhosts:\n{block_host}{HOST}"), Some("hosts")),
            (format!("links:\n  - [a:b, c:d]\n{racks}"), Some("links")),
        ];
        for (text, continues) in cases {
            let events = read_lists(0, &text, continues).map(|(_, part)| part);
            let events = events.unwrap_or_else(|| panic!("left to the tree:\n{text}"));
            let tree = from_tree(&text, continues.is_some());
            let unread = [tree.racks.unread.len(), tree.switches.unread.len()]
                .into_iter()
                .chain([tree.hosts.unread.len(), tree.links.unread.len()])
                .sum::<usize>();
            assert!(tree.problems.is_empty() && unread == 0, "{text}");
            assert_eq!(shown(&events), shown(&tree), "{text}");
        }
    }

    #[test]
    fn what_the_events_reader_is_not_sure_of_is_left_to_the_tree() {
        let host = |with: &str| HOST.replacen("cores: [2, 3]", with, 1);
        let mgmt = |with: &str| HOST.replacen("mgmt: {address: 10.250.0.1}", with, 1);
        for (text, continues) in [
            // A key twice, an anchor, an alias, a tag, a field no entry has.
            (format!("hosts:\n{}", host("cores: [2], rack: r2")), None),
            (format!("hosts:\n{}", host("cores: &c [2]")), None),
            (format!("hosts:\n{HOST}{}", host("cores: *c")), None),
            (format!("hosts:\n{}", host("cores: !!seq [2]")), None),
            (
                format!("hosts:\n{}", host("cores: [2], colour: blue")),
                None,
            ),
            // A mapping in a span, an empty value read as a mapping, a list for text.
            (
                format!("hosts:\n{}", mgmt("mgmt: {key: {agent: true}}")),
                None,
            ),
            (format!("hosts:\n{}", mgmt("mgmt: ")), None),
            (
                format!("hosts:\n{}", HOST.replacen("rack: r1", "rack: [r1]", 1)),
                None,
            ),
            // Another section, a list twice, an empty list, another list continued,
            // an empty mapping, a second document.
            (format!("hosts:\n{HOST}fabric: {{name: x}}\n"), None),
            (format!("hosts:\n{HOST}hosts:\n{HOST}"), None),
            ("hosts: []\n".to_string(), None),
            (format!("hosts:\n{HOST}"), Some("links")),
            ("{}\n".to_string(), Some("hosts")),
            (format!("hosts:\n{HOST}---\nhosts:\n{HOST}"), None),
        ] {
            assert!(read_lists(0, &text, continues).is_none(), "{text}");
        }
    }

    /// Sections whose entries run across cuts but are not lists as a whole parse reads
    /// them: one problem each, as there.
    #[test]
    fn a_section_that_is_not_a_list_is_reported_once_whole_or_in_parts() {
        let fabric = large_fabric();
        let at = fabric.find("\ntraining:").unwrap();
        let as_list = format!("{}\ntraining:\n{}", &fabric[..at], "  - x\n".repeat(60_000));
        let scalar = fabric.replacen("\nlinks:\n", "\nlinks: TBD\n", 1);
        for (text, expected) in [
            (as_list, "`training` must be a mapping"),
            (scalar, "`links` must be a list"),
        ] {
            let whole = problems(&text, 1);
            let found = whole.0.iter().filter(|d| d.message == expected).count();
            assert_eq!(found, 1, "{expected}: {whole:#?}");
            for parts in [2, 5, 16] {
                assert_eq!(problems(&text, parts), whole, "{expected}: {parts} parts");
            }
        }
    }
}
