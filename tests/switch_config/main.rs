//! Vendor configurations: rendered for the plan, read back, validated, and compared
//! with realistic running configurations.

#[path = "../common/mod.rs"]
mod common;
mod corpus;
mod counters;
mod rendering;
mod running;
mod values;

use std::collections::BTreeMap;
use std::path::Path;

use common::{fixture, mltctl, root, sonic_yang, text};
use mltctl::generate::{FabricSize, fabric_yaml};
use mltctl::inventory::{self, LoadError};
use mltctl::plan::Plan;
use mltctl::switches;
use switch_config::{ChangeLine, SwitchIntent, Vendor};

fn plan_of(relative: &str) -> Plan {
    let path = fixture(relative);
    let text = std::fs::read_to_string(&path).expect("fixture exists");
    plan_of_text(&path, &text)
}

/// The lab inventory's plan with every class's thresholds pinned to the values the
/// running configurations under tests/running/lab were written with: the device texts
/// stay as devices print them, whatever the threshold model decides.
fn lab_plan() -> Plan {
    const PINNED: &str = "  thresholds:
    - {class: 0, mark_bytes: 9216, limit_bytes: 28672}
    - {class: 1, mark_bytes: 12288, limit_bytes: 30720}
    - {class: 2, mark_bytes: 12288, limit_bytes: 30720}
    - {class: 3, mark_bytes: 18432, limit_bytes: 33792}
    - {class: 4, mark_bytes: 147456, limit_bytes: 168960}
    - {class: 5, mark_bytes: 87040, limit_bytes: 98304}
";
    let path = fixture("inventory/lab.yaml");
    let text = std::fs::read_to_string(&path).expect("the lab inventory");
    plan_of_text(&path, &format!("{text}{PINNED}"))
}

fn plan_of_text(path: &Path, text: &str) -> Plan {
    match inventory::load_str(path, text) {
        Ok(inv) => Plan::build(&inv),
        Err(LoadError::Invalid(d)) => panic!("{d}"),
        Err(e) => panic!("{e}"),
    }
}

fn generated(spines: usize, leaves: usize, hosts: usize) -> Plan {
    let yaml = fabric_yaml(FabricSize {
        spines,
        leaves,
        hosts_per_leaf: hosts,
        layers: 20,
        params_per_layer: 1000,
    })
    .unwrap();
    plan_of_text(Path::new("generated.yaml"), &yaml)
}

fn intent<'p>(plan: &'p Plan, name: &str) -> &'p SwitchIntent {
    &plan
        .switches
        .iter()
        .find(|s| s.intent.name == name)
        .expect("a switch of that name")
        .intent
}

fn changes(intent: &SwitchIntent, running: &str) -> Vec<ChangeLine> {
    switch_config::diff(intent, Some(running)).unwrap().changes
}

/// A fresh directory (unguessable name, 0700), removed when dropped.
struct Scratch(mlt_common::files::TempDir);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        self.0.path()
    }
}

fn scratch(name: &str) -> Scratch {
    Scratch(mlt_common::files::scratch_dir(&format!("mltctl-{name}-")).unwrap())
}
