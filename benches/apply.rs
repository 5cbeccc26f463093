//! `cargo bench --bench apply`: `mltctl apply` to 64 emulated switches, each behind its
//! own real OpenSSH server on loopback, against Ansible pushing the same files.
//!
//! The fabric: 4 spines and 60 leaves, SONiC and Cumulus alternating (the two whose
//! login is a Linux shell, so Ansible's `copy` module runs on them as on the real
//! thing). Every round starts from factory-empty switches, and runs side by side:
//! - `mltctl apply --forks 16`: read, diff, load, commit with a revert timer, read
//!   back, verify and confirm, on every switch;
//! - `mltctl apply --forks 1`: the same, one switch at a time;
//! - `ansible-playbook -f 16` with one `copy` task: each switch's rendered
//!   configuration file (from `mltctl render`) copied to it — moving files only.
//!
//! Prints a table and, last, one JSON line. Optional: `--runs N` (default 3).

#[path = "../tests/apply/fabric.rs"]
mod fabric;

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Scratch, print, row, runs_from_args};
use fabric::{Fabric, empty_config};
use mltctl::generate::{FabricSize, fabric_yaml_with};
use switch_config::Vendor;

const GOAL_RATIO: f64 = 5.0;

fn main() {
    if let Some(why) = fabric::sshd_missing() {
        eprintln!("apply benchmark skipped: {why}");
        return;
    }
    let runs = runs_from_args(3);
    let scratch = Scratch::new("apply");
    let source = scratch.0.join("fabric-64.yaml");
    let size = FabricSize {
        spines: 4,
        leaves: 60,
        hosts_per_leaf: 1,
        layers: 161,
        params_per_layer: 158_000,
    };
    let yaml = fabric_yaml_with(size, &[Vendor::Sonic, Vendor::Cumulus]).expect("generate");
    std::fs::write(&source, yaml).unwrap();
    let vendors: Vec<(String, String)> = mltctl::inventory::load(&source)
        .expect("the generated fabric is valid")
        .switches
        .iter()
        .map(|s| (s.name.clone(), s.vendor.to_string()))
        .collect();
    let initial = |name: &str| {
        let vendor = &vendors.iter().find(|(n, _)| n == name).unwrap().1;
        empty_config(vendor)
    };
    let fabric = Fabric::new("bench", &source, initial, None);
    assert_eq!(fabric.switches.len(), 64);

    let rendered = scratch.0.join("rendered");
    let status = Command::new(env!("CARGO_BIN_EXE_mltctl"))
        .args(["render", "-i"])
        .arg(&fabric.inventory)
        .arg("--out")
        .arg(&rendered)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let (playbook, ansible_inventory, destination) = ansible_files(&scratch.0, &fabric, &rendered);

    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..runs {
        for forks in [16, 1] {
            fabric.reset(initial);
            let took = timed(mltctl_apply(&fabric, forks));
            times[usize::from(forks == 1)].push(took);
            assert_every_switch_changed(&fabric);
        }
        let _ = std::fs::remove_dir_all(&destination);
        std::fs::create_dir_all(&destination).unwrap();
        let mut ansible = Command::new("ansible-playbook");
        ansible
            .args(["-f", "16", "-i"])
            .arg(&ansible_inventory)
            .arg(&playbook)
            .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
            .env("ANSIBLE_NOCOLOR", "1");
        times[2].push(timed(ansible));
        let copied = std::fs::read_dir(&destination).unwrap().count();
        assert_eq!(copied, 64, "Ansible copied every file");
    }
    let [forks16, forks1, ansible] = times;
    let rows = vec![
        row("mltctl apply --forks 16 (64 switches)".into(), forks16),
        row("mltctl apply --forks 1 (64 switches)".into(), forks1),
        row("ansible-playbook -f 16, copy (64 files)".into(), ansible),
    ];
    let parallel = rows[1].median_ms / rows[0].median_ms;
    let versus_ansible = rows[2].median_ms / rows[0].median_ms;
    let title = format!(
        "apply benchmark: 64 emulated switches behind real sshd, {runs} rounds\n\
         --forks 16 is {parallel:.1}x faster than --forks 1 and {versus_ansible:.1}x faster than \
         Ansible copy; goal >= {GOAL_RATIO}x: {}",
        if versus_ansible >= GOAL_RATIO {
            "met"
        } else {
            "NOT met"
        }
    );
    print(
        &title,
        &rows,
        serde_json::json!({
            "benchmark": "apply",
            "switches": 64,
            "forks16_vs_forks1": parallel,
            "forks16_vs_ansible": versus_ansible,
            "goal_met": versus_ansible >= GOAL_RATIO,
        }),
    );
}

fn mltctl_apply(fabric: &Fabric, forks: u16) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mltctl"));
    command
        .args(["apply", "-i"])
        .arg(&fabric.inventory)
        .arg("--known-hosts")
        .arg(&fabric.known_hosts)
        .arg("--journal")
        .arg(&fabric.journal)
        .args(["--forks", &forks.to_string()]);
    command
}

fn timed(mut command: Command) -> Duration {
    let start = Instant::now();
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .expect("the command starts");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    took
}

/// An Ansible inventory naming each switch's endpoint, key and known_hosts, and a
/// playbook copying each switch's rendered file to it.
fn ansible_files(dir: &Path, fabric: &Fabric, rendered: &Path) -> (String, String, String) {
    let destination = dir.join("copied");
    let mut inventory = String::from("[switches]\n");
    for switch in &fabric.switches {
        let extension = if switch.vendor == "sonic" {
            "json"
        } else {
            "nvue"
        };
        inventory.push_str(&format!(
            "{} ansible_host=127.0.0.1 ansible_port={} config_file={}\n",
            switch.name,
            switch.port,
            rendered
                .join(format!("{}.{extension}", switch.name))
                .display()
        ));
    }
    inventory.push_str(&format!(
        "[switches:vars]\nansible_user=root\nansible_ssh_private_key_file={}\n\
         ansible_python_interpreter=/usr/bin/python3\n\
         ansible_ssh_common_args='-o UserKnownHostsFile={} -o StrictHostKeyChecking=yes'\n",
        fabric.key.display(),
        fabric.known_hosts.display()
    ));
    let playbook = format!(
        "- hosts: switches\n  gather_facts: false\n  tasks:\n    - name: push the rendered configuration\n      \
         ansible.builtin.copy:\n        src: \"{{{{ config_file }}}}\"\n        dest: \"{}/{{{{ inventory_hostname }}}}\"\n",
        destination.display()
    );
    let inventory_path = dir.join("ansible-inventory.ini");
    let playbook_path = dir.join("push.yml");
    std::fs::write(&inventory_path, inventory).unwrap();
    std::fs::write(&playbook_path, playbook).unwrap();
    (
        playbook_path.display().to_string(),
        inventory_path.display().to_string(),
        destination.display().to_string(),
    )
}

/// The last run changed every switch: its final entry for each (a commit's `pending`
/// entry comes first) is `changed`.
fn assert_every_switch_changed(fabric: &Fabric) {
    let journal = fabric.journal();
    let run = &journal.last().expect("the run is journalled")["run"];
    let finals: Vec<&serde_json::Value> = journal
        .iter()
        .filter(|e| &e["run"] == run && e["outcome"] != "pending")
        .collect();
    assert_eq!(
        finals.len(),
        fabric.switches.len(),
        "one final entry per switch"
    );
    assert!(
        finals.iter().all(|e| e["outcome"] == "changed"),
        "every switch changed"
    );
}
