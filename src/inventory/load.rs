//! Reading an inventory file into raw sections, reporting every structural problem.

use std::collections::HashSet;
use std::num::IntErrorKind;
use std::path::{Path, PathBuf};

use marked_yaml::types::{MarkedMappingNode, MarkedSequenceNode};
use marked_yaml::{Error as SerdeError, FromNodeError, Node};
use rayon::prelude::*;
use serde::de::{DeserializeOwned, IntoDeserializer};

use mlt_common::input::{InputError, read_text};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::Marker as YamlMarker;

use super::raw::{Item, Sections};
use super::{Inventory, parts, validate};
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
    let mut report = Reporter::default();
    let source = report.add_source(path);
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root = match parts::parse(source, text) {
        Ok(root) => root,
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
    let sections = read_sections(&root, &mut report);
    // Freeing the node tree takes a while (16,384 hosts: 0.18 s); the pool's threads are
    // idle while validation runs on this one.
    rayon::spawn(move || drop(root));
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

fn read_sections(root: &Node, report: &mut Reporter) -> Sections {
    let mut sections = Sections::default();
    let Some(top) = root.as_mapping() else {
        report.error(root.span(), "the inventory must be a mapping of sections");
        return sections;
    };
    for (key, _) in top.iter() {
        if !SECTIONS.contains(&key.as_str()) {
            report.error(
                key.span(),
                format!(
                    "unknown section `{}` (expected one of: {})",
                    key.as_str(),
                    SECTIONS.join(", ")
                ),
            );
        }
    }
    for name in REQUIRED {
        if top.get_node(name).is_none() {
            report.error(top.span(), format!("missing required section `{name}`"));
        }
    }
    let mut failed = Failed::default();
    sections.fabric = read_single(top, "fabric", report, &mut failed);
    sections.defaults = read_single(top, "defaults", report, &mut failed).unwrap_or_default();
    sections.training = read_single(top, "training", report, &mut failed);
    sections.racks = read_list(top, "racks", "rack", report, &mut failed);
    sections.switches = read_list(top, "switches", "switch", report, &mut failed);
    sections.hosts = read_list(top, "hosts", "host", report, &mut failed);
    sections.links = read_list(top, "links", "link", report, &mut failed);
    if let Some(hosts) = top.get_node("hosts")
        && hosts.as_sequence().is_some_and(|h| h.is_empty())
    {
        report.error(
            hosts.span(),
            "`hosts` is empty; a job needs at least one host",
        );
    }
    sections.broken_names = failed.names;
    sections.malformed = failed.kinds;
    sections
}

#[derive(Default)]
struct Failed {
    names: HashSet<String>,
    kinds: HashSet<&'static str>,
}

fn read_single<T: DeserializeOwned>(
    top: &MarkedMappingNode,
    section: &'static str,
    report: &mut Reporter,
    failed: &mut Failed,
) -> Option<T> {
    let node = top.get_node(section)?;
    let result = match node.as_mapping() {
        None => {
            report.error(node.span(), format!("`{section}` must be a mapping"));
            None
        }
        Some(_) => match read_node(node) {
            Ok(value) => Some(value),
            Err(e) => {
                report.error_at(error_mark(&e, node), describe(&e, None, Some(section)));
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
    report: &mut Reporter,
    failed: &mut Failed,
) -> Vec<Item<T>> {
    let Some(node) = top.get_node(section) else {
        return Vec::new();
    };
    let Some(entries) = node.as_sequence() else {
        report.error(node.span(), format!("`{section}` must be a list"));
        return Vec::new();
    };
    read_entries(entries, section, kind, report, failed)
}

fn read_entries<T: DeserializeOwned + Send>(
    entries: &MarkedSequenceNode,
    section: &str,
    kind: &'static str,
    report: &mut Reporter,
    failed: &mut Failed,
) -> Vec<Item<T>> {
    // Entries are read on every core (16,384 hosts: 0.17 → 0.09 s on two), reported
    // one after another.
    let read: Vec<Result<T, FromNodeError>> = entries.par_iter().map(read_node::<T>).collect();
    let mut items = Vec::with_capacity(entries.len());
    for ((index, entry), read) in entries.iter().enumerate().zip(read) {
        match read {
            Ok(value) => items.push(Item {
                span: *entry.span(),
                value,
            }),
            Err(e) => {
                let name = entry_name(entry);
                let what = match &name {
                    Some(name) => format!("{kind} {name}"),
                    None => format!("{section}[{index}]"),
                };
                report.error_at(error_mark(&e, entry), describe(&e, Some(&what), None));
                failed.names.extend(name);
                failed.kinds.insert(kind);
            }
        }
    }
    items
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

/// Turns a serde error into a message that names the field the way it is written;
/// `what` names the list entry it happened in, if any.
fn describe(e: &FromNodeError, what: Option<&str>, section: Option<&str>) -> String {
    let path = |tail: Option<&str>| {
        let parts = [section, e.path(), tail];
        parts.into_iter().flatten().collect::<Vec<_>>().join(".")
    };
    let field = path(None);
    let body = match &**e {
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
    };
    match what {
        Some(what) => format!("{what}: {body}"),
        None => body,
    }
}

fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.strip_suffix('`')
}

fn is_secret(field: &str) -> bool {
    let f = field.to_ascii_lowercase();
    f.contains("password") || f.contains("secret") || f == "passphrase"
}
