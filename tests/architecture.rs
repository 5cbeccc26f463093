//! The house, checked: the crates depend one way (the vocabulary crate on none of
//! them), data flows one way, no module cycles, the sans-IO core has no I/O, product
//! code uses no test tooling, no source file outgrows 800 lines, and `main.rs` files
//! only parse and dispatch.
//!
//! Modules are read from the source text: a file's `crate::a::b` and `super::…` paths
//! name the modules it uses (test modules left out). Between siblings — two modules
//! with the same parent — uses must not go round in a circle; a module may use its own
//! ancestors and descendants (Rust's `mod` tree is that way by nature).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::fixture;

type ModulePath = Vec<String>;

/// Every module of a crate rooted at `root` (its `src/`), with its file's text.
fn modules(root: &Path) -> BTreeMap<ModulePath, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(root).unwrap().with_extension("");
            let mut module: ModulePath = relative
                .iter()
                .map(|p| p.to_string_lossy().to_string())
                .collect();
            if ["mod", "lib", "main"].contains(&module.last().unwrap().as_str()) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(module, without_tests_and_comments(&text));
        }
    }
    out
}

/// `text` before its test module, without `//` comments.
fn without_tests_and_comments(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The longest prefix of `path` that is a module.
fn resolve(path: &[String], modules: &BTreeMap<ModulePath, String>) -> ModulePath {
    (0..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|p| modules.contains_key(p))
        .unwrap_or_default()
}

/// The paths after each `crate::` or run of `super::` in `text`, relative to `module`.
fn uses(module: &ModulePath, text: &str) -> Vec<ModulePath> {
    let mut found = Vec::new();
    let words = |tail: &str| -> Vec<String> {
        tail.split("::")
            .map(|w| {
                w.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|w| !w.is_empty() && w.chars().all(|c| !c.is_ascii_uppercase()))
            .collect()
    };
    for (at, _) in text.match_indices("crate::") {
        found.push(words(&text[at + 7..]));
    }
    let mut rest = text;
    while let Some(at) = rest.find("super::") {
        let tail = &rest[at..];
        let ups = tail
            .as_bytes()
            .chunks(7)
            .take_while(|c| *c == b"super::")
            .count();
        let base = &module[..module.len().saturating_sub(ups)];
        let mut path = base.to_vec();
        path.extend(words(&tail[ups * 7..]));
        found.push(path);
        rest = &tail[ups * 7..];
    }
    found
}

/// Cycles among siblings, as `scope: a -> b -> … -> a`.
fn sibling_cycles(src: &Path) -> Vec<String> {
    let modules = modules(src);
    // scope (the common parent) -> sibling -> siblings it uses
    let mut graph: BTreeMap<ModulePath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (module, text) in &modules {
        for used in uses(module, text) {
            let target = resolve(&used, &modules);
            let common = module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common == module.len() || common == target.len() {
                continue; // an ancestor or a descendant
            }
            graph
                .entry(module[..common].to_vec())
                .or_default()
                .entry(module[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    let mut cycles = Vec::new();
    for (scope, edges) in &graph {
        for start in edges.keys() {
            // Depth-first from `start`, looking for a way back to it.
            let mut stack = vec![(start.clone(), vec![start.clone()])];
            let mut seen = BTreeSet::new();
            while let Some((node, trail)) = stack.pop() {
                for next in edges.get(&node).into_iter().flatten() {
                    if next == start {
                        let mut trail = trail.clone();
                        trail.push(next.clone());
                        cycles.push(format!("{}: {}", scope.join("::"), trail.join(" -> ")));
                    } else if seen.insert(next.clone()) {
                        let mut trail = trail.clone();
                        trail.push(next.clone());
                        stack.push((next.clone(), trail));
                    }
                }
            }
        }
    }
    cycles
}

const CRATES: [&str; 8] = [
    "src",
    "common/src",
    "netns/src",
    "lab/src",
    "queue/src",
    "switch-config/src",
    "endhost/src",
    "endhost/core/src",
];

/// The workspace's crates by manifest, and the workspace crates each depends on (its
/// path dependencies, optional ones included).
fn crate_graph() -> BTreeMap<String, BTreeSet<String>> {
    let manifests = [
        "Cargo.toml",
        "common/Cargo.toml",
        "netns/Cargo.toml",
        "lab/Cargo.toml",
        "queue/Cargo.toml",
        "switch-config/Cargo.toml",
        "endhost/core/Cargo.toml",
        "endhost/Cargo.toml",
        "endhost/dpdk-sys/Cargo.toml",
    ];
    let mut graph = BTreeMap::new();
    for manifest in manifests {
        let text = std::fs::read_to_string(fixture(manifest)).unwrap();
        let name = text
            .split("[package]")
            .nth(1)
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("name = ")))
            .unwrap()
            .trim_matches('"')
            .to_string();
        let dependencies: BTreeSet<String> = text
            .split("\n[dependencies]")
            .nth(1)
            .unwrap_or_default()
            .split("\n[")
            .next()
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("path = "))
            .filter_map(|l| l.split([' ', '=']).next())
            .map(str::to_string)
            .collect();
        graph.insert(name, dependencies);
    }
    graph
}

/// The dependency graph is: vocabulary ← switch-config, endhost-core ← endhost ←
/// mltctl; the lab crate ← mltctl; the namespace builder serves the lab and endhost's
/// test tooling. Nothing else, and so no cycle.
#[test]
fn the_crates_depend_one_way() {
    let edges = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let expected: BTreeMap<String, BTreeSet<String>> = [
        ("mlt-common", edges(&[])),
        ("mlt-queue", edges(&[])),
        ("mlt-netns", edges(&["mlt-common"])),
        ("switch-config", edges(&["mlt-common"])),
        ("endhost-core", edges(&["mlt-common"])),
        (
            "endhost",
            edges(&["dpdk-sys", "endhost-core", "mlt-common", "mlt-netns"]),
        ),
        (
            "mltctl-lab",
            edges(&["endhost-core", "mlt-common", "mlt-netns", "switch-config"]),
        ),
        (
            "mltctl",
            edges(&[
                "endhost",
                "endhost-core",
                "mlt-common",
                "mlt-queue",
                "mltctl-lab",
                "switch-config",
            ]),
        ),
        ("dpdk-sys", edges(&[])),
    ]
    .into_iter()
    .map(|(name, deps)| (name.to_string(), deps))
    .collect();
    assert_eq!(crate_graph(), expected);
}

/// endhost's namespace builder dependency is its test tooling's alone.
#[test]
fn endhost_needs_the_namespace_builder_only_for_its_testbed() {
    let manifest = std::fs::read_to_string(fixture("endhost/Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.starts_with("mlt-netns"))
        .unwrap();
    assert!(line.contains("optional = true"), "{line}");
    assert!(manifest.contains("testbed = [\"dep:mlt-netns\"]"));
}

/// mltctl's product takes endhost without its testbed; only its tests and benches ask
/// for it.
#[test]
fn mltctl_links_endhost_without_its_testbed() {
    let manifest = std::fs::read_to_string(fixture("Cargo.toml")).unwrap();
    let (product, dev) = manifest
        .split_once("[dev-dependencies]")
        .expect("mltctl has dev-dependencies");
    let line = product
        .lines()
        .find(|l| l.starts_with("endhost ="))
        .expect("mltctl depends on endhost");
    assert!(line.contains("default-features = false"), "{line}");
    assert!(!line.contains("testbed"), "{line}");
    assert!(
        dev.lines()
            .any(|l| l.starts_with("endhost =") && l.contains("testbed"))
    );
}

/// Product code uses no test tooling: outside endhost's `testbed` (and `endhost bench`,
/// which runs it) nothing names the testbed, and no crate's code uses a test framework.
#[test]
fn product_code_uses_no_test_tooling() {
    for src in CRATES {
        for (module, text) in modules(&fixture(src)) {
            let name = format!("{src}/{}", module.join("/"));
            for tool in ["libtest_mimic", "proptest"] {
                assert!(!text.contains(tool), "{name} uses {tool}");
            }
            let tooling =
                module.first().is_some_and(|m| m == "testbed") || module == ["cli", "bench"];
            // Declaring the tooling behind its feature is not using it.
            let code = text.replace("feature = \"testbed\"", "");
            if src == "endhost/src" && !tooling && !module.is_empty() {
                assert!(!code.contains("testbed"), "{name} uses the testbed");
            }
        }
    }
}

/// A file's code (its test module left out) is at most 800 lines, outside tests and
/// the emulators (a vendor's whole CLI is long by nature).
#[test]
fn no_source_file_outgrows_800_lines() {
    for src in CRATES {
        let mut dirs = vec![fixture(src)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    if !path.ends_with("emulator") {
                        dirs.push(path);
                    }
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                let lines = code.lines().count();
                assert!(lines <= 800, "{}: {lines} lines", path.display());
            }
        }
    }
}

#[test]
fn no_module_uses_go_round_in_a_circle() {
    for src in CRATES {
        let cycles = sibling_cycles(&fixture(src));
        assert!(cycles.is_empty(), "{src}: {cycles:#?}");
    }
}

#[test]
fn the_inventory_never_reads_the_plan() {
    let inventory = fixture("src/inventory");
    let modules = modules(&fixture("src"));
    for (module, text) in &modules {
        if module.first().is_some_and(|m| m == "inventory") {
            for used in uses(module, text) {
                assert_ne!(
                    used.first().map(String::as_str),
                    Some("plan"),
                    "{}: inventory::{} uses the plan",
                    inventory.display(),
                    module.join("::")
                );
            }
        }
    }
}

/// The I/O APIs a sans-IO crate never names.
const IO: [&str; 14] = [
    "mlt_common::files",
    "mlt_common::input",
    "std::fs",
    "std::net::TcpStream",
    "std::net::TcpListener",
    "std::net::UdpSocket",
    "std::process",
    "std::thread",
    "std::io::stdin",
    "std::time::Instant",
    "SystemTime",
    "libc::",
    "tokio",
    "std::env",
];

/// A crate's dependencies, as its manifest lists them.
fn dependencies(manifest: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(manifest))
        .unwrap()
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|d| !d.is_empty() && !d.starts_with('#'))
        .map(String::from)
        .collect()
}

fn assert_no_io(src: &str, name: &str) {
    for (module, text) in modules(&fixture(src)) {
        for api in IO {
            assert!(
                !text.contains(api),
                "{name}::{} uses {api}",
                module.join("::")
            );
        }
    }
}

/// endhost-core is sans-IO: only data dependencies (the vocabulary crate for names and
/// outcomes, never its files), and no I/O API in its source.
#[test]
fn the_core_has_no_io() {
    assert_eq!(
        dependencies("endhost/core/Cargo.toml"),
        ["mlt-common", "ipnet", "serde", "thiserror"]
    );
    assert_no_io("endhost/core/src", "endhost-core");
}

/// The planner's queue model is numerics only: rayon to run independent simulations at
/// once, and no I/O.
#[test]
fn the_queue_model_has_no_io() {
    assert_eq!(dependencies("queue/Cargo.toml"), ["rayon"]);
    assert_no_io("queue/src", "mlt-queue");
}

/// `main.rs` parses the command line and dispatches; commands live in `cli/`.
#[test]
fn main_files_only_dispatch() {
    for main in ["src/main.rs", "endhost/src/main.rs"] {
        let lines = std::fs::read_to_string(fixture(main))
            .unwrap()
            .lines()
            .count();
        assert!(lines < 200, "{main} has {lines} lines");
    }
    let commands: Vec<PathBuf> = std::fs::read_dir(fixture("src/cli"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(commands.len() > 10, "{commands:?}");
}

#[test]
fn the_checks_see_a_planted_cycle() {
    let scratch = mlt_common::files::scratch_dir("mltctl-arch-").unwrap();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod x;\n").unwrap();
    std::fs::write(dir.join("a/x.rs"), "use crate::b::Thing;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use super::a::x::Other;\n").unwrap();
    let cycles = sibling_cycles(dir);
    assert_eq!(cycles, [": a -> b -> a", ": b -> a -> b"]);
}
