//! The inventory reference against the loader: each documented section lists exactly the
//! fields the loader accepts there (asked by planting an unknown field and reading the
//! "expected one of" it answers), every documented default plans the same as leaving
//! the field out, and the complete example is valid.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use yaml_rust2::yaml::{Hash, Yaml};
use yaml_rust2::{YamlEmitter, YamlLoader};

use crate::book::{Page, Table};
use crate::common::{root, text};

const PAGE: &str = "docs/src/admin/inventory.md";
const PROBE: &str = "zz_probe";

/// The lab inventory, to plant fields in.
fn lab() -> Yaml {
    let text = std::fs::read_to_string(root().join("inventory/lab.yaml")).expect("lab.yaml");
    YamlLoader::load_from_str(&text)
        .expect("lab.yaml is YAML")
        .remove(0)
}

/// The path of a section into the document: keys, and `[]` for the first entry of a
/// list. `mgmt` is documented once for three places; it is asked in `defaults`.
fn steps(section: &str) -> Vec<String> {
    let section = section.trim_matches('`');
    let section = if section.starts_with("mgmt") {
        format!("defaults.{section}")
    } else {
        section.to_string()
    };
    section
        .split('.')
        .flat_map(|part| match part.strip_suffix("[]") {
            Some(key) => vec![key.to_string(), "[]".to_string()],
            None => vec![part.to_string()],
        })
        .collect()
}

/// The mapping at `path` in `doc`, made (as an empty mapping, or a list of one) where
/// the document has none.
fn mapping_at<'a>(doc: &'a mut Yaml, path: &[String]) -> &'a mut Hash {
    let mut here = doc;
    for (i, step) in path.iter().enumerate() {
        let next_is_list = path.get(i + 1).is_some_and(|s| s == "[]");
        here = match (step.as_str(), here) {
            ("[]", Yaml::Array(items)) => {
                if items.is_empty() {
                    items.push(Yaml::Hash(Hash::new()));
                }
                &mut items[0]
            }
            (key, Yaml::Hash(map)) => {
                let empty = if next_is_list {
                    Yaml::Array(vec![Yaml::Hash(Hash::new())])
                } else {
                    Yaml::Hash(Hash::new())
                };
                map.entry(Yaml::String(key.to_string())).or_insert(empty)
            }
            (step, other) => panic!("{path:?}: `{step}` is not in {other:?}"),
        };
    }
    match here {
        Yaml::Hash(map) => map,
        other => panic!("{path:?} is not a mapping: {other:?}"),
    }
}

/// Writes `doc` beside a copy of the lab's layer file and runs mltctl on it.
fn mltctl_on(doc: &Yaml, args: &[&str]) -> std::process::Output {
    let dir = mlt_common::files::scratch_dir("mltctl-docs").expect("a scratch directory");
    let mut yaml = String::new();
    YamlEmitter::new(&mut yaml).dump(doc).expect("emitted");
    std::fs::write(dir.path().join("inventory.yaml"), yaml).expect("written");
    std::fs::copy(
        root().join("inventory/vgg16.layers"),
        dir.path().join("vgg16.layers"),
    )
    .expect("copied");
    run_on(&dir.path().join("inventory.yaml"), args)
}

fn run_on(inventory: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mltctl"))
        .args(args)
        .arg("-i")
        .arg(inventory)
        .env_remove("MLTCTL_INVENTORY")
        .output()
        .expect("mltctl runs")
}

/// The fields the loader expects where `PROBE` was planted.
fn expected_fields(doc: &Yaml, what: &str) -> BTreeSet<String> {
    let out = mltctl_on(doc, &["validate"]);
    let stderr = text(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains(PROBE))
        .unwrap_or_else(|| panic!("{what}: no message names the planted field:\n{stderr}"));
    let list = line
        .split("expected one of: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("{what}: no list of expected fields in {line}"));
    list.split(", ").map(String::from).collect()
}

/// Each field table of the page: its section (`training.ports`) and rows.
fn sections(page: &Page) -> Vec<(String, Table)> {
    page.tables()
        .into_iter()
        .filter(|t| t.heading.starts_with('`') && t.rows.first().is_some_and(|r| r.len() == 4))
        .map(|t| {
            (
                t.heading
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                t,
            )
        })
        .collect()
}

fn field(row: &[String]) -> String {
    row[0].trim_matches('`').to_string()
}

#[test]
fn every_section_documents_exactly_the_fields_the_loader_takes() {
    let page = Page::read(PAGE);
    let documented = sections(&page);
    assert!(documented.len() >= 20, "{} field tables", documented.len());
    let mut problems = Vec::new();

    let top = page
        .tables()
        .into_iter()
        .find(|t| t.heading == "Sections")
        .expect("a Sections table");
    let mut doc = lab();
    mapping_at(&mut doc, &[]).insert(Yaml::String(PROBE.into()), Yaml::Integer(1));
    let want = expected_fields(&doc, "the top level");
    let have: BTreeSet<String> = top.rows.iter().map(|r| field(r)).collect();
    if have != want {
        problems.push(format!(
            "sections: the page has {have:?}, the loader {want:?}"
        ));
    }

    let headings: BTreeSet<String> = documented
        .iter()
        .map(|(s, _)| s.trim_matches('`').to_string())
        .collect();
    for (section, table) in &documented {
        let mut doc = lab();
        mapping_at(&mut doc, &steps(section)).insert(Yaml::String(PROBE.into()), Yaml::Integer(1));
        let want = expected_fields(&doc, section);
        let have: BTreeSet<String> = table.rows.iter().map(|r| field(r)).collect();
        if have != want {
            problems.push(format!(
                "{section}: the page has {have:?}, the loader {want:?}"
            ));
        }
        // A field that is a mapping names its own section, which must be documented.
        for row in &table.rows {
            if let Some(target) = row[1]
                .strip_prefix("mapping (`")
                .or_else(|| row[1].strip_prefix("list (`"))
                .and_then(|r| r.split('`').next())
                && !headings.contains(target)
            {
                problems.push(format!(
                    "{section}.{}: section `{target}` is not documented",
                    field(row)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{PAGE}:\n{}", problems.join("\n"));
}

/// A documented default as YAML, when it is a literal (a number, a boolean or a word).
fn literal(default: &str) -> Option<Yaml> {
    let default = default.trim();
    if default.contains(' ') || default == "—" {
        return None;
    }
    let word = default.trim_matches('`');
    let parsed = YamlLoader::load_from_str(word).ok()?.pop()?;
    match parsed {
        Yaml::Integer(_) | Yaml::Real(_) | Yaml::Boolean(_) => Some(parsed),
        Yaml::String(_) if default.starts_with('`') => Some(parsed),
        _ => None,
    }
}

/// Leaving a field out and giving its documented default plan the same, for every
/// literal default (fields the lab inventory sets are taken out for the comparison).
#[test]
fn every_documented_default_is_the_loaders() {
    let page = Page::read(PAGE);
    let plan = |doc: &Yaml| {
        let out = mltctl_on(doc, &["plan", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let mut checked = 0;
    let mut problems = Vec::new();
    for (section, table) in sections(&page) {
        for row in &table.rows {
            // A mapping's default is another section (`defaults.mgmt`), not a value.
            let nested = row[1].starts_with("mapping") || row[1].starts_with("list");
            let Some(value) = literal(&row[2]).filter(|_| !nested) else {
                continue;
            };
            let key = Yaml::String(field(row));
            let mut without = lab();
            mapping_at(&mut without, &steps(&section)).remove(&key);
            let mut with = without.clone();
            mapping_at(&mut with, &steps(&section)).insert(key, value);
            checked += 1;
            if plan(&with) != plan(&without) {
                problems.push(format!(
                    "{section}.{}: giving the documented default {} plans otherwise than leaving it out",
                    field(row),
                    row[2]
                ));
            }
        }
    }
    assert!(checked >= 30, "only {checked} defaults checked");
    assert!(problems.is_empty(), "{PAGE}:\n{}", problems.join("\n"));
}

#[test]
fn the_complete_example_is_valid() {
    let page = Page::read(PAGE);
    let blocks = page.blocks();
    let example = blocks
        .iter()
        .find(|b| b.lang == "yaml")
        .expect("a YAML example");
    let dir = mlt_common::files::scratch_dir("mltctl-docs").expect("a scratch directory");
    let path = dir.path().join("example.yaml");
    std::fs::write(&path, &example.text).expect("written");
    let out = run_on(&path, &["validate"]);
    assert!(
        out.status.success(),
        "{}: the example is invalid:\n{}",
        page.at(example.offset),
        text(&out.stderr)
    );
}
