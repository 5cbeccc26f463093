//! `cargo bench --bench apply`: `mltctl apply` to emulated switches, each behind its own
//! real OpenSSH server on loopback, against Ansible pushing the same files, then at
//! scale.
//!
//! Fabrics: SONiC and Cumulus alternating (the two whose login is a Linux shell, so
//! Ansible's `copy` module runs on them as on the real thing), one host per leaf. Every
//! round starts from factory-empty switches, and runs side by side:
//! - 64 switches (4 spines, 60 leaves): `mltctl apply --forks 16` (read, diff, load,
//!   commit with a revert timer, read back, verify and confirm, on every switch),
//!   `--forks 1` (one switch at a time), `--forks 64`, and `ansible-playbook -f 16` with
//!   one `copy` task: each switch's rendered file (from `mltctl render`) copied to it —
//!   moving files only;
//! - at scale, 512 switches (16 spines, 496 leaves; `--switches N` for another count):
//!   `mltctl apply --forks 64`. Goal: under 30 s, and mltctl's peak memory flat in the
//!   number of switches (at most 1.5 times its peak at 64 switches with the same forks).
//!
//! Each mltctl row gives mltctl's own peak RSS and CPU time (wait4): the emulated
//! switches and their sshd run on the same 2 cores and are not mltctl's cost.
//!
//! Prints a table and, last, one JSON line. Optional: `--runs N` (default 3),
//! `--scale-only` (only the run at scale).

#[path = "../tests/apply/fabric.rs"]
mod fabric;

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Row, Scratch, Usage, print, row, run_measured, runs_from_args, usage_row};
use fabric::{Fabric, empty_config};
use mltctl::generate::{FabricSize, fabric_yaml_with};
use switch_config::Vendor;

const GOAL_RATIO: f64 = 5.0;
const GOAL_SCALE_MS: f64 = 30_000.0;
/// mltctl's peak RSS at scale over its peak at 64 switches, with the same forks.
const GOAL_MEMORY_GROWTH: f64 = 1.5;
const SCALE_FORKS: u16 = 64;

fn main() {
    if let Some(why) = fabric::sshd_missing() {
        eprintln!("apply benchmark skipped: {why}");
        return;
    }
    let runs = runs_from_args(3);
    let scale = number_after("--switches").unwrap_or(512);
    let scratch = Scratch::new("apply");
    if std::env::args().any(|a| a == "--scale-only") {
        let scaled = at_scale(&scratch.0, scale, runs);
        let title =
            format!("apply benchmark: {scale} switches at --forks {SCALE_FORKS}, {runs} rounds");
        let json = serde_json::json!({"benchmark": "apply", "scale_switches": scale});
        print(&title, &[scaled], json);
        return;
    }
    let mut rows = against_ansible(&scratch.0, runs);
    for r in &rows {
        eprintln!("measured: {} median {:.0} ms", r.what, r.median_ms);
    }
    let at_64 = rows[2].peak_rss_mib.expect("measured");
    let scaled = at_scale(&scratch.0, scale, runs);
    let growth = scaled.peak_rss_mib.expect("measured") / at_64;
    let scale_met = scaled.median_ms < GOAL_SCALE_MS && growth <= GOAL_MEMORY_GROWTH;
    let scale_ms = scaled.median_ms;
    rows.push(scaled);
    let parallel = rows[1].median_ms / rows[0].median_ms;
    let versus_ansible = rows[3].median_ms / rows[0].median_ms;
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    let title = format!(
        "apply benchmark: emulated switches behind real sshd, {runs} rounds\n\
         64 switches: --forks 16 is {parallel:.1}x faster than --forks 1 and \
         {versus_ansible:.1}x faster than Ansible copy; goal >= {GOAL_RATIO}x: {}\n\
         {scale} switches at --forks {SCALE_FORKS}: {:.1} s, mltctl's peak memory {growth:.2}x \
         its peak at 64; goal < {:.0} s and <= {GOAL_MEMORY_GROWTH}x: {}",
        verdict(versus_ansible >= GOAL_RATIO),
        scale_ms / 1000.0,
        GOAL_SCALE_MS / 1000.0,
        verdict(scale_met),
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
            "scale_switches": scale,
            "scale_memory_growth": growth,
            "scale_goal_met": scale_met,
        }),
    );
}

/// `--NAME N` from the command line.
fn number_after(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).and_then(|n| n.parse().ok())
}

/// A fabric of `spines` and `leaves` (one host each), SONiC and Cumulus alternating,
/// every switch factory-empty.
fn make_fabric(dir: &Path, name: &str, spines: usize, leaves: usize) -> (Fabric, Initial) {
    let source = dir.join(format!("{name}.yaml"));
    let size = FabricSize {
        spines,
        leaves,
        hosts_per_leaf: 1,
        layers: 161,
        params_per_layer: 158_000,
    };
    let yaml = fabric_yaml_with(size, &[Vendor::Sonic, Vendor::Cumulus]).expect("generate");
    std::fs::write(&source, yaml).unwrap();
    let initial = Initial(
        mltctl::inventory::load(&source)
            .expect("the generated fabric is valid")
            .switches
            .iter()
            .map(|s| (s.name.clone(), s.vendor.to_string()))
            .collect(),
    );
    let fabric = Fabric::new(name, &source, |n| initial.config(n), None);
    assert_eq!(fabric.switches.len(), spines + leaves);
    (fabric, initial)
}

/// Each switch's factory-empty configuration, by name.
struct Initial(Vec<(String, String)>);

impl Initial {
    fn config(&self, name: &str) -> String {
        let vendor = &self.0.iter().find(|(n, _)| n == name).unwrap().1;
        empty_config(vendor)
    }
}

/// 64 switches: mltctl at 16, 1 and 64 forks, and Ansible copying the rendered files.
fn against_ansible(dir: &Path, runs: usize) -> Vec<Row> {
    let (fabric, initial) = make_fabric(dir, "fabric-64", 4, 60);
    let rendered = dir.join("rendered");
    let status = Command::new(env!("CARGO_BIN_EXE_mltctl"))
        .args(["render", "-i"])
        .arg(&fabric.inventory)
        .arg("--out")
        .arg(&rendered)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let (playbook, ansible_inventory, destination) = ansible_files(dir, &fabric, &rendered);
    let forks = [16, 1, SCALE_FORKS];
    let mut usages: [Vec<Usage>; 3] = Default::default();
    let mut ansible_times = Vec::new();
    for _ in 0..runs {
        for (i, forks) in forks.into_iter().enumerate() {
            fabric.reset(|n| initial.config(n));
            let log = dir.join("apply-64.log");
            usages[i].push(run_measured(&mut mltctl_apply(&fabric, forks), &log));
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
        ansible_times.push(timed(ansible));
        let copied = std::fs::read_dir(&destination).unwrap().count();
        assert_eq!(copied, 64, "Ansible copied every file");
    }
    let mut rows: Vec<Row> = forks
        .iter()
        .zip(&usages)
        .map(|(forks, u)| usage_row(format!("mltctl apply --forks {forks} (64 switches)"), u))
        .collect();
    rows.push(row(
        "ansible-playbook -f 16, copy (64 files)".into(),
        ansible_times,
    ));
    rows
}

/// `switches` switches (16 spines, the rest leaves) at [`SCALE_FORKS`].
fn at_scale(dir: &Path, switches: usize, runs: usize) -> Row {
    let spines = 16.min(switches / 2);
    let (fabric, initial) = make_fabric(dir, "fabric-scale", spines, switches - spines);
    let mut busy = Vec::new();
    let usages: Vec<Usage> = (0..runs)
        .map(|_| {
            fabric.reset(|n| initial.config(n));
            let log = dir.join("apply-scale.log");
            let before = machine_busy();
            let usage = run_measured(&mut mltctl_apply(&fabric, SCALE_FORKS), &log);
            busy.push(machine_busy() - before);
            assert_every_switch_changed(&fabric);
            usage
        })
        .collect();
    busy.sort_by(f64::total_cmp);
    eprintln!(
        "at scale: the machine's CPUs were busy {:.0} s (median) during a run; mltctl's own \
         share is in the row, the rest is the emulated switches, their sshd and others",
        busy[busy.len() / 2]
    );
    usage_row(
        format!("mltctl apply --forks {SCALE_FORKS} ({switches} switches)"),
        &usages,
    )
}

/// Seconds all CPUs of the machine have spent busy since boot (`/proc/stat`).
fn machine_busy() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let fields: Vec<f64> = stat
        .lines()
        .next()
        .expect("the cpu line")
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().expect("a number"))
        .collect();
    // user nice system idle iowait irq softirq (steal: another guest's, not ours).
    let busy: f64 = fields.iter().take(7).sum::<f64>() - fields[3] - fields[4];
    // SAFETY: sysconf only reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    busy / ticks as f64
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
