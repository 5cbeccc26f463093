//! The admin's workflow around apply: a change left for the admin to confirm, the
//! history of runs, rollback to before a run, and rolling changes in batches — on the
//! emulated switches of every vendor.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::common::{json_lines as events, recap};
use crate::fabric::{Fabric, base_config, root};
use crate::{assert_as_planned, assert_exit, plan, status_of, text};

/// The ids of the runs `history` lists, oldest first.
fn run_ids(fabric: &Fabric) -> Vec<String> {
    history(fabric)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap().to_string())
        .collect()
}

fn history(fabric: &Fabric) -> Value {
    let out = state_command(fabric, "history", &["--json"]);
    assert_exit(&out, 0);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn outcomes(run: &Value) -> Vec<(String, String)> {
    run["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["device"].as_str().unwrap().to_string(),
                d["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `mltctl SUBCOMMAND` with this fabric's journal (`history` contacts no switch).
fn state_command(fabric: &Fabric, subcommand: &str, args: &[&str]) -> Output {
    let mut command = if subcommand == "history" {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_mltctl"));
        command.arg("history").arg("-i").arg(&fabric.inventory);
        command
    } else {
        fabric.mltctl(subcommand)
    };
    command
        .arg("--journal")
        .arg(&fabric.journal)
        .args(args)
        .output()
        .unwrap()
}

/// `apply --confirm manual` changes and verifies every switch but saves nothing; a new
/// apply is refused; `confirm --limit` keeps two; `rollback --to` undoes the other two
/// exactly; afterwards nothing waits.
pub fn manual_confirm() {
    let fabric = Fabric::lab_base("manual-confirm");
    let plan = plan(&fabric);
    let before = fabric.states();
    let out = fabric.apply(&["--confirm", "manual"]);
    assert_exit(&out, 0);
    let all = text(&out);
    for switch in &fabric.switches {
        let (status, rest) = status_of(&out, &switch.name);
        assert_eq!(status, "changed", "{rest}");
        assert!(rest.contains("NOT confirmed"), "{rest}");
        let running = switch.device.running();
        let intent = &plan
            .switches
            .iter()
            .find(|s| s.intent.name == switch.name)
            .unwrap()
            .intent;
        assert!(
            switch_config::diff(intent, Some(&running))
                .unwrap()
                .changes
                .is_empty()
        );
        assert_eq!(
            switch.device.startup(),
            before[&switch.name]
                .iter()
                .find(|(f, _)| f.starts_with("startup"))
                .map(|(_, t)| t.clone())
                .unwrap_or_default(),
            "{}: saved before the confirm",
            switch.name
        );
    }
    assert!(all.contains("4 change(s) of run mltctl-"), "{all}");
    let [run] = run_ids(&fabric).try_into().expect("one run");
    assert!(
        all.contains(&format!("mltctl rollback --to {run}")),
        "{all}"
    );

    let refused = fabric.apply(&[]);
    assert_exit(&refused, 1);
    assert!(
        text(&refused).contains("still wait for a confirm"),
        "{}",
        text(&refused)
    );

    let out = state_command(&fabric, "confirm", &["--limit", "spine*"]);
    assert_exit(&out, 0);
    for name in ["spine1", "spine2"] {
        assert_eq!(status_of(&out, name).0, "confirmed", "{}", text(&out));
        assert_as_planned(&fabric, &plan, name);
    }
    let out = state_command(&fabric, "rollback", &["--to", &run, "--limit", "leaf*"]);
    assert_exit(&out, 0);
    let after = fabric.states();
    for name in ["leaf1", "leaf2"] {
        assert_eq!(status_of(&out, name).0, "reverted", "{}", text(&out));
        assert_eq!(after[name], before[name], "{name} is not as before");
    }
    let runs = history(&fabric);
    assert_eq!(
        outcomes(&runs[0]),
        [
            ("leaf1".into(), "reverted".into()),
            ("leaf2".into(), "reverted".into()),
            ("spine1".into(), "confirmed".into()),
            ("spine2".into(), "confirmed".into()),
        ]
    );
    // A confirmed run rolls back to what the switch ran before it, not before the confirm.
    let out = state_command(&fabric, "rollback", &["--to", &run, "--limit", "spine2"]);
    assert_exit(&out, 0);
    assert_eq!(status_of(&out, "spine2").0, "changed", "{}", text(&out));
    let intent = &plan
        .switches
        .iter()
        .find(|s| s.intent.name == "spine2")
        .unwrap()
        .intent;
    let base = switch_config::owned(intent, &base_config("spine2")).unwrap();
    let running = fabric.switch("spine2").device.running();
    assert!(
        switch_config::revert(intent, &base, &running)
            .unwrap()
            .changes
            .is_empty()
    );
    let out = state_command(&fabric, "confirm", &[]);
    assert_exit(&out, 0);
    assert!(
        text(&out).contains("no selected switch waits for a confirm"),
        "{}",
        text(&out)
    );
}

/// A switch whose revert timer ran out is not confirmed: it runs what it ran before.
pub fn revert_timer_runs_out() {
    let fabric = Fabric::lab_base("timer-runs-out");
    let running =
        || -> Vec<String> { fabric.switches.iter().map(|s| s.device.running()).collect() };
    let before = running();
    let limit = "spine1,spine2,leaf1";
    let out = fabric.apply(&[
        "--confirm",
        "manual",
        "--confirm-timeout",
        "1",
        "--limit",
        limit,
    ]);
    assert_exit(&out, 0);
    assert_ne!(running(), before);
    let reverted = crate::eventually(Duration::from_secs(20), || running() == before);
    assert!(reverted, "the switches did not revert by themselves");
    let out = state_command(&fabric, "confirm", &[]);
    assert_exit(&out, 4);
    for name in ["spine1", "spine2", "leaf1"] {
        let (status, rest) = status_of(&out, name);
        assert_eq!(status, "failed", "{rest}");
        assert!(rest.contains("no longer runs what run"), "{rest}");
    }
    assert_eq!(running(), before);
    // A SONiC checkpoint outlives its rollback, as on the real switch; nothing else
    // (sessions, timers, pending revisions) is left.
    for switch in &fabric.switches {
        let left: Vec<String> = switch
            .device
            .leftovers()
            .into_iter()
            .filter(|l| !l.starts_with("checkpoints/"))
            .collect();
        assert!(left.is_empty(), "{}: {left:?}", switch.name);
    }
}

/// history lists apply and rollback runs; rollback --check changes nothing; rollback
/// puts every vendor's owned configuration back as it was, and apply converges again.
/// The journal keeps owned configuration only: no secret of any switch is in it.
pub fn history_and_rollback() {
    let planted = "planted-community-4711";
    let lab = root().join("inventory/lab.yaml");
    let fabric = Fabric::new(
        "rollback",
        &lab,
        |name| {
            let base = base_config(name);
            if name == "spine1" {
                let mut db: Value = serde_json::from_str(&base).unwrap();
                db["SNMP_COMMUNITY"] = serde_json::json!({planted: {"TYPE": "RO"}});
                serde_json::to_string_pretty(&db).unwrap()
            } else {
                base
            }
        },
        None,
    );
    let plan = plan(&fabric);
    let owned_before: Vec<(String, String)> = fabric
        .switches
        .iter()
        .map(|s| {
            let intent = &plan
                .switches
                .iter()
                .find(|p| p.intent.name == s.name)
                .unwrap()
                .intent;
            (
                s.name.clone(),
                switch_config::owned(intent, &s.device.running()).unwrap(),
            )
        })
        .collect();
    assert_exit(&fabric.apply(&[]), 0);
    let [run] = run_ids(&fabric).try_into().expect("one run");
    let applied = fabric.states();

    let out = state_command(&fabric, "rollback", &["--to", &run, "--check", "--diff"]);
    assert_exit(&out, 0);
    assert_eq!(
        fabric.states(),
        applied,
        "rollback --check changed a switch"
    );
    for switch in &fabric.switches {
        assert_eq!(status_of(&out, &switch.name).0, "would", "{}", text(&out));
    }
    assert!(
        text(&out).contains("- WRED_PROFILE|MLT_Q1-6: present"),
        "{}",
        text(&out)
    );

    let out = state_command(&fabric, "rollback", &["--to", &run]);
    assert_exit(&out, 0);
    for (name, owned) in &owned_before {
        assert_eq!(status_of(&out, name).0, "changed", "{}", text(&out));
        let switch = fabric.switch(name);
        let intent = &plan
            .switches
            .iter()
            .find(|p| p.intent.name == *name)
            .unwrap()
            .intent;
        let running = switch.device.running();
        let left = switch_config::revert(intent, owned, &running).unwrap();
        assert!(left.changes.is_empty(), "{name}: {:#?}", left.changes);
        assert_eq!(
            switch.device.startup(),
            running,
            "{name}: rollback not saved"
        );
        assert!(switch.device.leftovers().is_empty(), "{name}");
    }
    // Back as before, the plan is a full change again.
    let out = fabric.apply(&[]);
    assert_exit(&out, 0);
    for switch in &fabric.switches {
        assert_eq!(status_of(&out, &switch.name).0, "changed");
        assert_as_planned(&fabric, &plan, &switch.name);
    }
    let runs = history(&fabric);
    let kinds: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["apply", "rollback", "apply"]);
    assert_eq!(runs[1]["of"], run.as_str());
    let out = state_command(&fabric, "history", &["--limit", "leaf1", "--verbose"]);
    assert_exit(&out, 0);
    assert_eq!(
        text(&out).matches("leaf1 (cumulus)").count(),
        3,
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("spine1"), "{}", text(&out));

    let out = state_command(&fabric, "rollback", &["--to", "mltctl-0-0"]);
    assert_exit(&out, 2);
    assert!(text(&out).contains("mltctl history"), "{}", text(&out));

    let journal = std::fs::read_to_string(&fabric.journal).unwrap();
    assert!(
        journal.contains("owned_before"),
        "the journal keeps owned configuration"
    );
    let mut secrets = vec![planted.to_string(), "community public".to_string()];
    for name in ["spine2", "leaf1", "leaf2"] {
        for line in base_config(name).lines() {
            for marker in ["secret sha512 ", "password 7 ", "hashed-password "] {
                if let Some((_, value)) = line.split_once(marker) {
                    secrets.push(value.trim().trim_matches('\'').to_string());
                }
            }
        }
    }
    assert!(secrets.len() > 5);
    for secret in &secrets {
        assert!(
            !journal.contains(secret.as_str()),
            "the journal holds a secret: {secret}"
        );
    }
}

/// `--serial 1`: the first switch is a canary; it fails, and nothing else is contacted.
/// `--serial 2` goes in two batches of two.
pub fn rolling_batches() {
    let fabric = Fabric::lab_base("serial");
    let before = fabric.states();
    let first = fabric.switches[0].name.clone();
    fabric.switch(&first).device.set_faults(&["reject: MLT_Q3"]);
    let out = fabric.apply(&["--serial", "1"]);
    assert_exit(&out, 4);
    assert_eq!(status_of(&out, &first).0, "failed");
    for switch in &fabric.switches[1..] {
        let (status, rest) = status_of(&out, &switch.name);
        assert_eq!(status, "skipped", "{rest}");
        assert!(rest.contains("batch 1 had more than 0%"), "{rest}");
    }
    assert_eq!(fabric.states(), before);

    fabric.switch(&first).device.set_faults(&[]);
    let out = fabric.apply(&["--serial", "2", "--json"]);
    assert_exit(&out, 0);
    let events: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let third_start = events
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == "started")
        .nth(2)
        .unwrap()
        .0;
    let done_before = events[..third_start]
        .iter()
        .filter(|e| *e == "device")
        .count();
    assert_eq!(done_before, 2, "{events:?}");

    let out = fabric.apply(&["--serial", "0"]);
    assert_exit(&out, 2);
}

/// `play` runs the site playbook's switch steps in one process on one plan, passes on
/// its options, and recaps per switch; with --check it goes on past an unreachable
/// switch so every step's check is seen, and changes and writes nothing.
pub fn play() {
    let mut fabric = Fabric::lab_base("play");
    let plan = plan(&fabric);
    let site = root().join("playbooks/site.yml");
    let play = |fabric: &Fabric, args: &[&str]| {
        fabric
            .mltctl("play")
            .arg(&site)
            .args(["--limit", "spine*,leaf*", "--journal"])
            .arg(&fabric.journal)
            .args(args)
            .output()
            .unwrap()
    };
    let names: Vec<String> = fabric.switches.iter().map(|s| s.name.clone()).collect();

    let out = play(&fabric, &["--confirm-timeout", "120"]);
    assert_exit(&out, 0);
    let all = text(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        all.contains("PLAY RECAP (3 step(s) ran, 3 skipped)"),
        "{all}"
    );
    assert!(
        all.contains("bootstrap: skipped (--limit selects no host)"),
        "{all}"
    );
    assert!(
        all.contains("== step 3/6 apply: mltctl apply") && all.contains("--confirm-timeout 120"),
        "{all}"
    );
    for name in &names {
        assert_as_planned(&fabric, &plan, name);
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")) && l.contains(" : ok="))
            .unwrap_or_else(|| panic!("no recap line for {name}: {all}"));
        // diff would change it, apply changed it.
        assert!(
            line.ends_with(": ok=0 changed=2 unreachable=0 failed=0 skipped=0"),
            "{line}"
        );
    }
    assert_eq!(run_ids(&fabric).len(), 1, "one apply run in the journal");

    let out = play(&fabric, &["--json"]);
    assert_exit(&out, 0);
    let steps: Vec<(String, bool)> = events(&out)
        .iter()
        .filter(|e| e["event"] == "step")
        .map(|e| {
            (
                e["step"].as_str().unwrap().to_string(),
                e.get("skipped").is_some(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("validate".to_string(), false),
            ("diff".to_string(), false),
            ("apply".to_string(), false),
            ("bootstrap".to_string(), true),
            ("launch".to_string(), true),
            ("verify".to_string(), true),
        ]
    );
    assert!(events(&out).iter().any(|e| e["event"] == "device"));
    for (name, counts) in recap(&out) {
        assert_eq!(counts, [2, 0, 0, 0], "{name}: nothing left to change");
    }

    // A step that fails stops the play there, says so beside it, and the recap says
    // where it stopped.
    fabric.reset(base_config);
    fabric
        .switch("spine1")
        .device
        .set_faults(&["reject: MLT_Q3"]);
    let three = fabric.dir.join("three.yml");
    std::fs::write(&three, "steps: [diff, apply, diff]\n").unwrap();
    let out = fabric
        .mltctl("play")
        .arg(&three)
        .arg("--journal")
        .arg(&fabric.journal)
        .output()
        .unwrap();
    assert_exit(&out, 4);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("== step 2/3 apply failed (exit 4); the remaining 1 step(s) did not run"),
        "{stderr}"
    );
    assert!(!stderr.contains("== step 3/3"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("PLAY RECAP (2 step(s) ran, 0 skipped, stopped at apply)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("spine1 : ok=0 changed=1 unreachable=0 failed=1 skipped=0"),
        "{stdout}"
    );
    fabric.switch("spine1").device.set_faults(&[]);

    // A step's own arguments win over the play's.
    let manual = fabric.dir.join("manual.yml");
    std::fs::write(
        &manual,
        "steps:\n  - step: apply\n    args: [--confirm, manual, --confirm-timeout, \"600\"]\n",
    )
    .unwrap();
    let out = fabric
        .mltctl("play")
        .arg(&manual)
        .args(["--json", "--confirm-timeout", "3000", "--journal"])
        .arg(&fabric.journal)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let unconfirmed: Vec<String> = events(&out)
        .iter()
        .filter(|e| e["event"] == "device" && e["status"] == "changed")
        .map(|e| e["unconfirmed"].as_str().unwrap().to_string())
        .collect();
    assert!(!unconfirmed.is_empty(), "{}", text(&out));
    for note in &unconfirmed {
        let at = note
            .rsplit_once(" at ")
            .unwrap()
            .1
            .split_whitespace()
            .next()
            .unwrap();
        let at = humantime::parse_rfc3339(at).unwrap();
        let secs = at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default()
            .as_secs();
        assert!((500..=600).contains(&secs), "reverts in {secs} s: {note}");
    }
    assert_exit(&state_command(&fabric, "confirm", &[]), 0);

    fabric.reset(base_config);
    fabric.stop("leaf2");
    let before = fabric.states();
    let journal_before = std::fs::read_to_string(&fabric.journal).unwrap();
    let out = play(&fabric, &["--check", "--json", "--connect-timeout", "2"]);
    assert_exit(&out, 5);
    let counts = recap(&out);
    assert_eq!(
        counts["leaf2"],
        [0, 0, 2, 0],
        "unreachable in diff and apply"
    );
    for name in ["spine1", "spine2", "leaf1"] {
        assert_eq!(counts[name], [0, 2, 0, 0], "{name} would change twice");
    }
    assert_eq!(fabric.states(), before, "--check changed a switch");
    assert_eq!(
        std::fs::read_to_string(&fabric.journal).unwrap(),
        journal_before,
        "--check wrote to the journal"
    );
}
