//! `mltctl apply` against real OpenSSH servers, each in front of an emulated switch
//! (the lab's, `mltctl_lab::emulator`: the switches' commands run `mltctl-lab-switch`).

#[path = "../common/mod.rs"]
mod common;
mod fabric;
#[path = "../common/harness.rs"]
mod harness;
mod workflow;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use fabric::{Fabric, base_config, empty_config};
use harness::Suite;
use mltctl::plan::Plan;
use serde_json::Value;

fn main() {
    let missing = fabric::sshd_missing();
    let tests: &[(&str, fn())] = &[
        (
            "a_full_apply_changes_every_switch_and_a_second_sends_nothing",
            full_apply,
        ),
        (
            "factory_empty_switches_get_the_whole_configuration",
            empty_switches,
        ),
        (
            "check_contacts_every_switch_and_changes_nothing",
            check_changes_nothing,
        ),
        ("json_lines_report_every_switch_and_a_summary", json_lines),
        ("limit_applies_to_the_selected_switches_only", limit),
        (
            "an_unreachable_switch_is_reported_and_the_others_change",
            unreachable,
        ),
        ("a_wrong_key_is_refused_and_nothing_changes", wrong_key),
        (
            "an_unknown_host_key_is_refused_unless_accepted",
            unknown_host_key,
        ),
        ("a_changed_host_key_is_refused", changed_host_key),
        (
            "a_rejected_command_rolls_back_that_switch_only",
            rejected_command,
        ),
        (
            "a_rejected_command_before_commit_activates_nothing",
            rejected_before_commit,
        ),
        (
            "a_connection_lost_after_commit_is_reverted_by_the_switch",
            lost_after_commit,
        ),
        ("a_failed_verify_rolls_back", failed_verify),
        ("no_secret_appears_in_any_output_or_the_journal", no_secrets),
        (
            "device_text_past_its_bounds_fails_that_switch_only",
            unbounded_device_text,
        ),
        (
            "switches_that_print_megabytes_of_warnings_are_read_whole",
            chatty_switches,
        ),
        (
            "a_command_that_answers_while_it_reads_gets_all_of_both",
            answers_while_reading,
        ),
        (
            "a_command_past_its_timeout_is_cut_off_even_while_it_prints",
            command_timeout,
        ),
        (
            "a_command_that_stops_reading_its_input_answers_and_the_session_goes_on",
            stops_reading,
        ),
        (
            "an_interrupted_apply_leaves_switches_confirmed_or_rolled_back",
            interrupted,
        ),
        ("two_applies_on_one_switch_are_refused", concurrent_applies),
        (
            "fetch_saves_what_diff_reads_before_and_after_apply",
            fetch_then_diff,
        ),
        (
            "fabrics_of_other_shapes_check_apply_and_converge",
            other_shapes,
        ),
        (
            "a_manual_confirm_waits_for_confirm_or_rollback",
            workflow::manual_confirm,
        ),
        (
            "a_commit_whose_revert_timer_ran_out_is_not_confirmed",
            workflow::revert_timer_runs_out,
        ),
        (
            "history_lists_runs_and_rollback_puts_the_owned_configuration_back",
            workflow::history_and_rollback,
        ),
        (
            "serial_batches_stop_after_a_failed_canary",
            workflow::rolling_batches,
        ),
        (
            "play_runs_the_steps_on_one_plan_and_recaps_each_switch",
            workflow::play,
        ),
    ];
    Suite::new("apply").tests(tests, missing.as_deref()).run()
}

// ------------------------------------------------------------------------- helpers

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_exit(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", text(out));
}

fn plan(fabric: &Fabric) -> Plan {
    Plan::build(&mltctl::inventory::load(&fabric.inventory).expect("valid inventory"))
}

/// The switch runs what the plan says (by mltctl's diff) and has saved it.
fn assert_as_planned(fabric: &Fabric, plan: &Plan, name: &str) {
    let intent = &plan
        .switches
        .iter()
        .find(|s| s.intent.name == name)
        .unwrap()
        .intent;
    let switch = fabric.switch(name);
    let running = switch.device.running();
    let diff = switch_config::diff(intent, Some(&running)).unwrap();
    assert!(
        diff.changes.is_empty(),
        "{name} differs: {:#?}",
        diff.changes
    );
    assert_eq!(switch.device.startup(), running, "{name}: not saved");
    assert!(
        switch.device.leftovers().is_empty(),
        "{name}: {:?}",
        switch.device.leftovers()
    );
}

/// Each switch's line of a plain-text run: (status, rest).
fn lines_by_switch(out: &Output) -> BTreeMap<String, (String, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (status, rest) = match line.strip_prefix("would change ") {
                Some(rest) => ("would", rest),
                None => line.split_once(char::is_whitespace)?,
            };
            let rest = rest.trim_start();
            let (name, _) = rest.split_once(' ')?;
            [
                "ok",
                "changed",
                "failed",
                "unreachable",
                "interrupted",
                "would",
                "skipped",
                "confirmed",
                "reverted",
            ]
            .contains(&status)
            .then(|| (name.to_string(), (status.to_string(), rest.to_string())))
        })
        .collect()
}

fn status_of(out: &Output, name: &str) -> (String, String) {
    lines_by_switch(out)
        .remove(name)
        .unwrap_or_else(|| panic!("no line for {name}:\n{}", text(out)))
}

/// Waits until `check` holds, for at most `limit`.
fn eventually(limit: Duration, check: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    check()
}

// --------------------------------------------------------------------------- tests

fn full_apply() {
    let fabric = Fabric::lab_base("full");
    let plan = plan(&fabric);
    let out = fabric.apply(&[]);
    assert_exit(&out, 0);
    for switch in &fabric.switches {
        let (status, _) = status_of(&out, &switch.name);
        assert_eq!(status, "changed", "{}", text(&out));
        assert_as_planned(&fabric, &plan, &switch.name);
    }
    assert!(
        text(&out).contains("4 switch(es): 0 ok, 4 changed, 0 failed, 0 unreachable"),
        "{}",
        text(&out)
    );

    let before = fabric.states();
    let again = fabric.apply(&[]);
    assert_exit(&again, 0);
    for switch in &fabric.switches {
        assert_eq!(status_of(&again, &switch.name).0, "ok");
    }
    assert_eq!(fabric.states(), before, "a second apply changed a switch");
    // Each commit of the first run was recorded as pending (the switch reverts it by
    // itself unless confirmed) before its final entry.
    let all = fabric.journal();
    for switch in &fabric.switches {
        let outcomes: Vec<&str> = all
            .iter()
            .filter(|e| e["device"] == switch.name.as_str())
            .map(|e| e["outcome"].as_str().unwrap())
            .collect();
        assert_eq!(outcomes, ["pending", "changed", "ok"], "{}", switch.name);
    }
    let pending = all.iter().find(|e| e["outcome"] == "pending").unwrap();
    assert!(
        pending["message"]
            .as_str()
            .unwrap()
            .starts_with("committed, not confirmed"),
        "{pending}"
    );
    // The second run only read each switch: one command, the read.
    let journal: Vec<_> = all
        .into_iter()
        .filter(|e| e["outcome"] != "pending")
        .collect();
    assert_eq!(journal.len(), 8);
    let reads: BTreeMap<&str, &str> = [
        ("spine1", "sonic-cfggen -d --print-data"),
        ("spine2", "show running-config"),
        ("leaf1", "nv config show -r applied -o commands"),
        ("leaf2", "enable\nshow running-config"),
    ]
    .into();
    for entry in &journal[4..] {
        let device = entry["device"].as_str().unwrap();
        assert_eq!(entry["outcome"], "ok");
        assert_eq!(entry["sent"], serde_json::json!([reads[device]]), "{entry}");
        assert_eq!(entry["before_sha256"], entry["after_sha256"]);
    }
    for entry in &journal[..4] {
        assert_eq!(entry["outcome"], "changed");
        assert_ne!(entry["before_sha256"], entry["after_sha256"]);
        assert!(entry["sent"].as_array().unwrap().len() > 3, "{entry}");
    }
}

fn empty_switches() {
    let lab = fabric::root().join("inventory/lab.yaml");
    let vendor_of = |name: &str| match name {
        "spine1" => "sonic",
        "spine2" => "eos",
        "leaf1" => "cumulus",
        _ => "onyx",
    };
    let fabric = Fabric::new("empty", &lab, |name| empty_config(vendor_of(name)), None);
    let plan = plan(&fabric);
    let out = fabric.apply(&[]);
    assert_exit(&out, 0);
    for switch in &fabric.switches {
        assert_as_planned(&fabric, &plan, &switch.name);
    }
}

fn check_changes_nothing() {
    let fabric = Fabric::lab_base("check");
    let before = fabric.states();
    let out = fabric.apply(&["--check", "--diff", "--exit-code"]);
    assert_exit(&out, 6);
    assert_eq!(fabric.states(), before, "--check changed a switch");
    for switch in &fabric.switches {
        let (status, rest) = status_of(&out, &switch.name);
        assert_eq!(status, "would", "{rest}");
        assert!(rest.contains("change(s) would be made"), "{rest}");
    }
    let all = text(&out);
    // --diff shows the changes (equal ones folded, numbers in numeric order) and the
    // commands, then the switch's own diff of the candidate it loaded and discarded.
    assert!(all.contains("+ WRED_PROFILE|MLT_Q1-6: present"), "{all}");
    assert!(
        all.contains("+ DSCP_TO_TC_MAP|MLT 0-31,38-45,47-63: 0"),
        "{all}"
    );
    assert!(!all.contains("+ WRED_PROFILE|MLT_Q1: present"), "{all}");
    assert_eq!(
        all.matches("  the switch's own diff:\n").count(),
        3,
        "{all}"
    );
    assert!(all.contains("Patch Applier: applying the patch"), "{all}");
    assert!(all.contains("+++ session:/"), "{all}");
    assert!(
        all.contains("the switch's own diff: none (Onyx has no candidate configuration)"),
        "{all}"
    );
    assert!(all.contains("qos profile MLT"), "{all}");
    assert!(
        all.contains("nv set qos mapping default-global trust l3"),
        "{all}"
    );
    assert!(
        all.contains("interface ethernet 1/1-1/2 qos trust L3"),
        "{all}"
    );
    assert!(!fabric.journal.exists(), "--check wrote the journal");
    assert!(!fabric.dir.join("locks").exists(), "--check took locks");
    // --verbose lists every change on its own line.
    let out = fabric.apply(&["--check", "--diff", "--verbose"]);
    assert_exit(&out, 0);
    let all = text(&out);
    assert!(all.contains("+ WRED_PROFILE|MLT_Q1: present"), "{all}");
    assert!(all.contains("+ DSCP_TO_TC_MAP|MLT 9: 0"), "{all}");
    assert_eq!(fabric.states(), before, "--check changed a switch");
}

fn json_lines() {
    let fabric = Fabric::lab_base("json");
    let out = fabric.apply(&["--check", "--json"]);
    assert_exit(&out, 0);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!(
        (count("started"), count("device"), count("summary")),
        (4, 4, 1)
    );
    let summary = events.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["changed"], 4);
    assert_eq!(summary["check"], true);
    for device in events.iter().filter(|e| e["event"] == "device") {
        assert_eq!(device["status"], "changed");
        assert!(!device["changes"].as_array().unwrap().is_empty());
        assert!(device["before_sha256"].as_str().unwrap().len() == 64);
    }
}

fn limit() {
    let fabric = Fabric::lab_base("limit");
    let before = fabric.states();
    let out = fabric.apply(&["--limit", "spine,!sonic"]);
    assert_exit(&out, 0);
    let lines = lines_by_switch(&out);
    assert_eq!(lines.keys().collect::<Vec<_>>(), ["spine2"]);
    let after = fabric.states();
    for name in ["spine1", "leaf1", "leaf2"] {
        assert_eq!(after[name], before[name], "{name} was not selected");
    }
    assert_ne!(after["spine2"], before["spine2"]);

    let out = fabric.apply(&["--limit", "rack:r9"]);
    assert_exit(&out, 2);
    assert!(
        text(&out).contains("`rack:r9` matches no switch"),
        "{}",
        text(&out)
    );
}

fn unreachable() {
    let mut fabric = Fabric::lab_base("unreachable");
    let plan = plan(&fabric);
    let before = fabric.states();
    fabric.stop("leaf2");
    let out = fabric.apply(&["--connect-timeout", "2"]);
    assert_exit(&out, 5);
    let (status, rest) = status_of(&out, "leaf2");
    assert_eq!(status, "unreachable");
    assert!(rest.contains("cannot connect"), "{rest}");
    for name in ["spine1", "spine2", "leaf1"] {
        assert_eq!(status_of(&out, name).0, "changed");
        assert_as_planned(&fabric, &plan, name);
    }
    assert_eq!(fabric.states()["leaf2"], before["leaf2"]);
}

fn wrong_key() {
    let fabric = Fabric::lab_base("wrong-key");
    let before = fabric.states();
    let stranger = fabric.dir.join("stranger");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&stranger)
        .status()
        .unwrap();
    assert!(status.success());
    let inventory = std::fs::read_to_string(&fabric.inventory)
        .unwrap()
        .replace(fabric.key.to_str().unwrap(), stranger.to_str().unwrap());
    std::fs::write(&fabric.inventory, inventory).unwrap();
    let out = fabric.apply(&[]);
    assert_exit(&out, 5);
    for switch in &fabric.switches {
        let (status, rest) = status_of(&out, &switch.name);
        assert_eq!(status, "unreachable");
        assert!(rest.contains("authentication as root"), "{rest}");
        assert!(rest.contains("was refused"), "{rest}");
    }
    assert_eq!(fabric.states(), before);
}

fn unknown_host_key() {
    let fabric = Fabric::lab_base("unknown-host-key");
    let before = fabric.states();
    std::fs::write(&fabric.known_hosts, "").unwrap();
    let out = fabric.apply(&[]);
    assert_exit(&out, 5);
    // The fingerprint each switch's host key has, as OpenSSH prints it.
    let fingerprints: BTreeMap<String, String> = fabric
        .switches
        .iter()
        .map(|switch| {
            let public = switch.device.dir.join("ssh_host_ed25519_key.pub");
            let out = std::process::Command::new("ssh-keygen")
                .arg("-lf")
                .arg(&public)
                .output()
                .unwrap();
            let line = String::from_utf8_lossy(&out.stdout).to_string();
            let fingerprint = line.split_whitespace().nth(1).unwrap().to_string();
            assert!(fingerprint.starts_with("SHA256:"), "{line}");
            (switch.name.clone(), fingerprint)
        })
        .collect();
    for switch in &fabric.switches {
        let (status, rest) = status_of(&out, &switch.name);
        assert_eq!(status, "unreachable");
        assert!(rest.contains("is not in"), "{rest}");
        assert!(
            rest.contains(&format!("(ED25519 {})", fingerprints[&switch.name])),
            "{rest}"
        );
        assert!(rest.contains("--accept-new-host-keys"), "{rest}");
        let keyscan = format!("`ssh-keyscan -p {} -t ed25519 127.0.0.1 >> ", switch.port);
        assert!(rest.contains(&keyscan), "{rest}");
    }
    assert_eq!(fabric.states(), before);

    let out = fabric.apply(&["--accept-new-host-keys"]);
    assert_exit(&out, 0);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    for switch in &fabric.switches {
        let line = format!(
            "mltctl: recorded the host key of 127.0.0.1:{} (ED25519 {}) in {}",
            switch.port,
            fingerprints[&switch.name],
            fabric.known_hosts.display()
        );
        assert!(said.contains(&line), "{said}");
    }
    let recorded = std::fs::read_to_string(&fabric.known_hosts).unwrap();
    for switch in &fabric.switches {
        let entry = format!("[127.0.0.1]:{} ssh-ed25519 ", switch.port);
        assert!(recorded.contains(&entry), "{recorded}");
    }
    assert_eq!(recorded.lines().count(), 4);
    // The recorded keys are now trusted without the flag.
    assert_exit(&fabric.apply(&[]), 0);
}

fn changed_host_key() {
    let fabric = Fabric::lab_base("changed-host-key");
    let before = fabric.states();
    let impostor = fabric.dir.join("impostor");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&impostor)
        .status()
        .unwrap();
    assert!(status.success());
    let impostor_key: Vec<String> = std::fs::read_to_string(impostor.with_extension("pub"))
        .unwrap()
        .split_whitespace()
        .take(2)
        .map(String::from)
        .collect();
    let port = fabric.switch("spine1").port;
    let known: String = std::fs::read_to_string(&fabric.known_hosts)
        .unwrap()
        .lines()
        .map(|line| {
            if line.starts_with(&format!("[127.0.0.1]:{port} ")) {
                format!("[127.0.0.1]:{port} {}\n", impostor_key.join(" "))
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    std::fs::write(&fabric.known_hosts, known).unwrap();
    let out = fabric.apply(&["--accept-new-host-keys"]);
    assert_exit(&out, 5);
    let (status, rest) = status_of(&out, "spine1");
    assert_eq!(status, "unreachable");
    assert!(rest.contains("does not match"), "{rest}");
    assert_eq!(fabric.states()["spine1"], before["spine1"]);
    for name in ["spine2", "leaf1", "leaf2"] {
        assert_eq!(status_of(&out, name).0, "changed");
    }
}

/// Injects one fault into each of two switches and applies: those two fail with
/// `messages` and run exactly what they ran before; the other two change. The run's
/// output is returned.
fn two_fail(test: &str, faults: [(&str, &str); 2], messages: &[&str]) -> Output {
    let fabric = Fabric::lab_base(test);
    let plan = plan(&fabric);
    let before = fabric.states();
    for (name, fault) in faults {
        fabric.switch(name).device.set_faults(&[fault]);
    }
    let out = fabric.apply(&[]);
    assert_exit(&out, 4);
    let after = fabric.states();
    for switch in &fabric.switches {
        let (status, rest) = status_of(&out, &switch.name);
        if faults.iter().any(|(name, _)| *name == switch.name) {
            assert_eq!(status, "failed");
            for message in messages {
                assert!(rest.contains(message), "{rest}");
            }
            assert_eq!(after[&switch.name], before[&switch.name]);
        } else {
            assert_eq!(status, "changed");
            assert_as_planned(&fabric, &plan, &switch.name);
        }
    }
    out
}

/// Switches whose commit fails part-way are rolled back to exactly what they ran.
fn rejected_command() {
    let _ = two_fail(
        "rejected",
        [
            // SONiC: one patch operation fails after earlier ones applied.
            ("spine1", "reject: MLT_Q3"),
            // Onyx: a command fails after earlier commands took effect.
            ("leaf2", "reject: traffic-class 3 congestion-control"),
        ],
        &[
            "commit failed",
            "rolled back: the switch runs what it ran before",
        ],
    );
}

/// Switches with a candidate (EOS sessions, NVUE pending revisions) drop it. EOS's
/// rejection quotes the line it rejected, not the session header.
fn rejected_before_commit() {
    let out = two_fail(
        "rejected-candidate",
        [
            ("spine2", "reject: random-detect ecn"),
            ("leaf1", "reject: min-threshold"),
        ],
        &["loading the change failed", "nothing was activated"],
    );
    let (_, rest) = status_of(&out, "spine2");
    assert!(
        rest.contains("rejected `random-detect ecn minimum-threshold "),
        "{rest}"
    );
    assert_eq!(rest.matches("(at token 1: 'ecn')").count(), 1, "{rest}");
}

fn lost_after_commit() {
    let fabric = Fabric::lab_base("lost");
    let before: BTreeMap<String, String> = fabric
        .switches
        .iter()
        .map(|s| (s.name.clone(), s.device.running()))
        .collect();
    for switch in &fabric.switches {
        switch.device.set_faults(&["drop-after-commit"]);
    }
    let started = Instant::now();
    let out = fabric.apply(&["--confirm-timeout", "3", "--connect-timeout", "2"]);
    assert_exit(&out, 4);
    for name in ["spine1", "spine2", "leaf1"] {
        let (status, rest) = status_of(&out, name);
        assert_eq!(status, "failed");
        assert!(rest.contains("connection lost"), "{rest}");
        assert!(rest.contains("cannot reconnect to roll back"), "{rest}");
        assert!(
            rest.contains("reverts the change by itself within 3 s"),
            "{rest}"
        );
    }
    // Onyx has no revert timer: the change stays active, unsaved, and that is said.
    let (status, rest) = status_of(&out, "leaf2");
    assert_eq!(status, "failed");
    assert!(
        rest.contains("the change is active but not saved"),
        "{rest}"
    );
    let leaf2 = &fabric.switch("leaf2").device;
    assert_ne!(leaf2.running(), before["leaf2"]);
    assert_eq!(leaf2.startup(), before["leaf2"]);
    // Each switch runs the change until its timer runs out, then what it ran before.
    for name in ["spine1", "spine2", "leaf1"] {
        let device = &fabric.switch(name).device;
        let reverted = eventually(Duration::from_secs(10), || device.running() == before[name]);
        assert!(reverted, "{name} did not revert by itself");
    }
    assert!(started.elapsed() >= Duration::from_secs(3));
}

fn failed_verify() {
    let fabric = Fabric::lab_base("verify");
    let before = fabric.states();
    // Each switch accepts one setting and silently does not apply it.
    fabric
        .switch("spine1")
        .device
        .set_faults(&["ignore: MLT_Q2"]);
    fabric
        .switch("spine2")
        .device
        .set_faults(&["ignore: tx-queue 5"]);
    fabric
        .switch("leaf1")
        .device
        .set_faults(&["ignore: traffic-class 2 max-threshold"]);
    fabric
        .switch("leaf2")
        .device
        .set_faults(&["ignore: qos trust"]);
    let out = fabric.apply(&[]);
    assert_exit(&out, 4);
    for switch in &fabric.switches {
        let (status, rest) = status_of(&out, &switch.name);
        assert_eq!(status, "failed", "{rest}");
        assert!(rest.contains("verify failed"), "{rest}");
        assert!(
            rest.contains("rolled back: the switch runs what it ran before"),
            "{rest}"
        );
    }
    let after = fabric.states();
    for switch in &fabric.switches {
        assert_eq!(after[&switch.name], before[&switch.name], "{}", switch.name);
    }
}

fn no_secrets() {
    let passphrase = "correct-horse-battery-staple-7431";
    let lab = fabric::root().join("inventory/lab.yaml");
    let fabric = Fabric::new("secrets", &lab, base_config, Some(passphrase));
    let env = [("MLTCTL_TEST_PASSPHRASE", passphrase)];
    let mut outputs = Vec::new();
    for args in [
        &["--check", "--diff"][..],
        &["--check", "--json"],
        &["--diff"],
        &["--diff", "--json"],
    ] {
        let out = fabric.apply_with(args, &env);
        assert!(out.status.success(), "{}", text(&out));
        outputs.push(text(&out));
    }
    // Without the passphrase, the key cannot be used: that is said, the value is not.
    let out = fabric.apply_with(
        &["--check"],
        &[("MLTCTL_TEST_PASSPHRASE", "wrong-guess-2291")],
    );
    assert_exit(&out, 5);
    for switch in &fabric.switches {
        let (_, rest) = status_of(&out, &switch.name);
        assert!(
            rest.contains("the passphrase in MLTCTL_TEST_PASSPHRASE does not decrypt key"),
            "{rest}"
        );
    }
    outputs.push(text(&out));
    outputs.push(std::fs::read_to_string(&fabric.journal).unwrap());

    let key = std::fs::read_to_string(&fabric.key).unwrap();
    let mut secrets: Vec<String> = key
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(String::from)
        .collect();
    secrets.push(passphrase.into());
    secrets.push("wrong-guess-2291".into());
    // Password hashes and SNMP communities in the switches' own configurations.
    for name in ["spine2", "leaf1", "leaf2"] {
        for line in base_config(name).lines() {
            for marker in ["secret sha512 ", "password 7 ", "hashed-password "] {
                if let Some((_, value)) = line.split_once(marker) {
                    secrets.push(value.trim().trim_matches('\'').to_string());
                }
            }
        }
    }
    secrets.push("community public".into());
    assert!(secrets.len() > 6);
    for output in &outputs {
        for secret in &secrets {
            assert!(
                !output.contains(secret.as_str()),
                "a secret was printed: {secret}"
            );
        }
    }
    assert!(Path::new(&fabric.journal).exists());
}

/// A switch that answers with a range no DSCP map can hold fails on its own: the others
/// are changed, and the journal has every switch's entry.
fn unbounded_device_text() {
    let fabric = Fabric::lab_base("unbounded");
    fabric
        .switch("spine2")
        .device
        .set_faults(&["print: qos map dscp 0-4294967295 to traffic-class 1\\n"]);
    let out = fabric.apply(&[]);
    assert_exit(&out, 4);
    let (status, rest) = status_of(&out, "spine2");
    assert_eq!(status, "failed");
    assert!(
        rest.contains("`0-4294967295` goes beyond 63, the largest value this list may hold"),
        "{rest}"
    );
    for name in ["spine1", "leaf1", "leaf2"] {
        assert_eq!(status_of(&out, name).0, "changed", "{}", text(&out));
    }
    let finals: Vec<String> = fabric
        .journal()
        .iter()
        .filter(|e| e["outcome"] != "pending")
        .map(|e| e["device"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(finals.len(), 4, "{finals:?}");
}

/// Switches that answer every command with 4 MB of warnings on standard error (twice
/// an SSH window) are changed like quiet ones, within a short command timeout: both
/// streams are read as they come, neither waits for the other's end.
fn chatty_switches() {
    let fabric = Fabric::lab_base("chatty");
    let plan = plan(&fabric);
    for switch in &fabric.switches {
        switch.device.set_faults(&["stderr: 4000000"]);
    }
    let out = fabric.apply(&["--command-timeout", "20"]);
    assert_exit(&out, 0);
    for switch in &fabric.switches {
        assert_eq!(status_of(&out, &switch.name).0, "changed", "{}", text(&out));
        assert_as_planned(&fabric, &plan, &switch.name);
    }
}

/// A session to `fabric`'s SONiC switch (a real shell behind a real sshd), each
/// command allowed `command_timeout`.
fn sonic_session(fabric: &Fabric, command_timeout: Duration) -> mltctl::ssh::SshSession {
    let inventory = mltctl::inventory::load(&fabric.inventory).unwrap();
    let spine1 = inventory.switches.iter().find(|s| s.name == "spine1");
    let options = mltctl::ssh::SshOptions {
        known_hosts: fabric.known_hosts.clone(),
        accept_new_host_keys: false,
        connect_timeout: Duration::from_secs(10),
        command_timeout,
        recorded: Default::default(),
    };
    mltctl::ssh::SshSession::open(&spine1.unwrap().mgmt, &options).unwrap()
}

/// `cat` of 8 MB answers as it reads: its output fills the SSH window long before its
/// input is all sent. Both go through, whole and in order.
fn answers_while_reading() {
    use switch_config::push::Session;
    let fabric = Fabric::lab_base("echo");
    let mut session = sonic_session(&fabric, Duration::from_secs(30));
    let input: String = (0..200_000).map(|i| format!("line {i:>34}\n")).collect();
    assert_eq!(input.len(), 8_000_000);
    let cat = mlt_common::shell::ShellCommand::new("cat");
    let out = Session::exec(&mut session, &cat, &input).unwrap();
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout == input, "cat's output differs from its input");
}

/// A command that exits having read little of 8 MB of input answers with what it
/// printed, at once, and the session carries the next command: no packet is left half
/// sent on it.
fn stops_reading() {
    use switch_config::push::Session;
    let fabric = Fabric::lab_base("stops-reading");
    let mut session = sonic_session(&fabric, Duration::from_secs(20));
    let input = "x".repeat(8_000_000);
    for _ in 0..3 {
        let start = Instant::now();
        let head = mlt_common::shell::ShellCommand::new("head -c 10");
        let out = Session::exec(&mut session, &head, &input).unwrap();
        assert_eq!((out.status, out.stdout.as_str()), (0, "xxxxxxxxxx"));
        let echo = mlt_common::shell::ShellCommand::new("echo still here");
        let out = Session::exec(&mut session, &echo, "").unwrap();
        assert_eq!(out.stdout, "still here\n");
        let took = start.elapsed();
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }
}

/// `--command-timeout` bounds a command from start to end: one that never ends is
/// cut off at the timeout whether it is silent or keeps printing.
fn command_timeout() {
    use switch_config::push::Session;
    let fabric = Fabric::lab_base("timeout");
    let mut session = sonic_session(&fabric, Duration::from_secs(2));
    for script in ["sleep 60", "while :; do echo still here; sleep 0.1; done"] {
        let start = Instant::now();
        let command = mlt_common::shell::ShellCommand::new("sh -c").arg(script);
        let err = Session::exec(&mut session, &command, "").unwrap_err();
        let took = start.elapsed();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{script}: {err}");
        assert!(err.to_string().contains("did not end within 2s"), "{err}");
        assert!(
            took < Duration::from_secs(10),
            "{script}: cut off after {took:?}"
        );
    }
}

/// Runs `mltctl apply` on `fabric` in the background.
fn apply_in_background(fabric: &Fabric, args: &[&str]) -> std::process::Child {
    fabric
        .apply_command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mltctl runs")
}

/// Waits until the switch `name` reached its `pause` fault.
fn wait_paused(fabric: &Fabric, name: &str) {
    let paused = fabric.switch(name).device.dir.join("paused");
    assert!(
        eventually(Duration::from_secs(30), || paused.exists()),
        "{name} never reached its pause"
    );
}

fn resume(fabric: &Fabric, name: &str) {
    std::fs::write(fabric.switch(name).device.dir.join("resume"), "").unwrap();
}

/// SIGINT while spine2's commit is in flight: spine1 (done before) stays changed,
/// spine2's commit is rolled back, the leaves are never contacted; the journal says
/// which, and mltctl exits with 130.
fn interrupted() {
    let fabric = Fabric::lab_base("interrupted");
    let before = fabric.states();
    fabric
        .switch("spine2")
        .device
        .set_faults(&["pause: commit timer"]);
    let child = apply_in_background(&fabric, &["--forks", "1"]);
    wait_paused(&fabric, "spine2");
    // SAFETY: kill(2) on our own child.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    resume(&fabric, "spine2");
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 130);
    assert_eq!(status_of(&out, "spine1").0, "changed");
    let (status, rest) = status_of(&out, "spine2");
    assert_eq!(status, "interrupted", "{}", text(&out));
    assert!(
        rest.contains(
            "interrupted before confirm; rolled back: the switch runs what it ran before"
        ),
        "{rest}"
    );
    for name in ["leaf1", "leaf2"] {
        let (status, rest) = status_of(&out, name);
        assert_eq!(status, "interrupted");
        assert!(rest.contains("not contacted"), "{rest}");
    }
    let after = fabric.states();
    for name in ["spine2", "leaf1", "leaf2"] {
        assert_eq!(after[name], before[name], "{name} changed");
    }
    let journal: Vec<(String, String)> = fabric
        .journal()
        .iter()
        .map(|e| {
            let device = e["device"].as_str().unwrap().to_string();
            (device, e["outcome"].as_str().unwrap().to_string())
        })
        .collect();
    let outcomes = |name: &str| -> Vec<&str> {
        journal
            .iter()
            .filter(|(d, _)| d == name)
            .map(|(_, o)| o.as_str())
            .collect()
    };
    assert_eq!(outcomes("spine1"), ["pending", "changed"]);
    assert_eq!(outcomes("spine2"), ["pending", "interrupted"]);
    assert_eq!(outcomes("leaf1"), ["interrupted"]);
}

/// While one apply is changing spine2, another is refused on spine2 (and sends it
/// nothing); the first then finishes as if alone.
fn concurrent_applies() {
    let fabric = Fabric::lab_base("concurrent");
    fabric
        .switch("spine2")
        .device
        .set_faults(&["pause: commit timer"]);
    let first = apply_in_background(&fabric, &["--limit", "spine2"]);
    wait_paused(&fabric, "spine2");
    let second = fabric.apply(&["--limit", "spine2"]);
    assert_exit(&second, 4);
    let (status, rest) = status_of(&second, "spine2");
    assert_eq!(status, "failed");
    assert!(
        rest.contains("another mltctl apply is changing this switch"),
        "{rest}"
    );
    resume(&fabric, "spine2");
    let first = first.wait_with_output().unwrap();
    assert_exit(&first, 0);
    assert_eq!(status_of(&first, "spine2").0, "changed");
}

/// `fetch` saves every switch's running configuration under the names `diff` reads:
/// before apply the diff shows the plan's changes (exactly what apply then makes), after
/// apply it shows none.
fn fetch_then_diff() {
    let fabric = Fabric::lab_base("fetch");
    let before = fabric.states();
    let dir = fabric.dir.join("fetched");
    let fetch = |fabric: &Fabric| {
        let out = fabric
            .mltctl("fetch")
            .arg("--out")
            .arg(&dir)
            .output()
            .unwrap();
        assert_exit(&out, 0);
        assert!(
            text(&out).contains("4 switch(es): 4 saved, 0 failed, 0 unreachable"),
            "{}",
            text(&out)
        );
    };
    let diff = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mltctl"))
            .args(["diff", "-i"])
            .arg(&fabric.inventory)
            .arg("--running")
            .arg(&dir)
            .arg("--json")
            .output()
            .unwrap();
        assert_exit(&out, 0);
        assert!(out.stderr.is_empty(), "{}", text(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    fetch(&fabric);
    assert_eq!(fabric.states(), before, "fetch changed a switch");
    for (name, file) in [
        ("spine1", "spine1.json"),
        ("spine2", "spine2.cfg"),
        ("leaf1", "leaf1.nvue"),
        ("leaf2", "leaf2.cfg"),
    ] {
        // What the switch prints (a CLI may add a header line of its own).
        let saved = std::fs::read_to_string(dir.join(file)).unwrap();
        let running = fabric.switch(name).device.running();
        assert!(saved.contains(running.trim_end()), "{name}: {saved}");
    }
    let report = diff();
    assert_eq!(report["differing"], 4);
    let out = fabric.apply(&["--check", "--json"]);
    let planned: BTreeMap<String, usize> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "device")
        .map(|e| {
            (
                e["device"].as_str().unwrap().to_string(),
                e["changes"].as_array().unwrap().len(),
            )
        })
        .collect();
    for switch in report["switches"].as_array().unwrap() {
        let name = switch["switch"].as_str().unwrap();
        assert_eq!(
            switch["changes"].as_array().unwrap().len(),
            planned[name],
            "{name}"
        );
    }
    assert_exit(&fabric.apply(&[]), 0);
    fetch(&fabric);
    assert_eq!(diff()["differing"], 0);
    // Each switch printed the plan back in its own forms, and diff read them.
    let saved = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
    for (file, form) in [
        (
            "leaf2.cfg",
            "\n   interface ethernet 1/1-1/2 qos trust L3\n",
        ),
        (
            "leaf2.cfg",
            "\n   ip route vrf default 10.1.1.0/24 172.16.0.4\n",
        ),
        (
            "leaf1.nvue",
            "\nnv set vrf default router static 10.1.2.0/24 via 172.16.0.0 type ipv4-address\n",
        ),
        (
            "leaf1.nvue",
            "\nnv set vrf default router static 10.1.2.0/24 address-family ipv4-unicast\n",
        ),
        (
            "spine2.cfg",
            "\n   tx-queue 1\n      random-detect ecn minimum-threshold",
        ),
        ("spine1.json", "\"green_min_threshold\": \""),
    ] {
        assert!(saved(file).contains(form), "{file} lacks {form:?}");
    }
}

/// Fabrics of other shapes than the lab — one spine and one rack (where a leaf's own
/// block is the whole path pool), four spines and six racks, racks without hosts —
/// with every vendor as spine and as leaf, on factory-empty emulated switches:
/// `apply --check` proposes changes, `apply` makes them, and a second check finds
/// nothing left to do.
fn other_shapes() {
    use switch_config::Vendor::{Cumulus, Eos, Onyx, Sonic};
    let shapes = [
        (vec![Sonic], vec![(Onyx, 1)]),
        (
            vec![Eos, Cumulus, Onyx, Sonic],
            vec![
                (Sonic, 2),
                (Eos, 0),
                (Cumulus, 4),
                (Onyx, 1),
                (Sonic, 3),
                (Eos, 1),
            ],
        ),
        (vec![Cumulus, Onyx], vec![(Eos, 1), (Cumulus, 0), (Onyx, 2)]),
    ];
    for (index, (spines, leaves)) in shapes.into_iter().enumerate() {
        let shape = mltctl::generate::Shape {
            spines,
            leaves,
            layers: 12,
            params_per_layer: 5000,
            buffer_bytes: None,
        };
        let scratch = mlt_common::files::scratch_dir(&format!("mltctl-shape-{index}-")).unwrap();
        let dir = scratch.path();
        let source = dir.join("shaped.yaml");
        std::fs::write(
            &source,
            mltctl::generate::fabric_yaml_shaped(&shape).unwrap(),
        )
        .unwrap();
        let inventory = mltctl::inventory::load(&source).unwrap();
        let vendors: BTreeMap<String, String> = inventory
            .switches
            .iter()
            .map(|s| (s.name.clone(), s.vendor.to_string()))
            .collect();
        let fabric = Fabric::new(
            &format!("shape{index}"),
            &source,
            |name| empty_config(&vendors[name]),
            None,
        );
        let count = fabric.switches.len();
        let check = fabric.apply(&["--check", "--exit-code"]);
        assert_exit(&check, 6);
        assert!(!text(&check).contains("panicked"), "{}", text(&check));
        let applied = fabric.apply(&[]);
        assert_exit(&applied, 0);
        assert!(
            text(&applied).contains(&format!(
                "{count} switch(es): 0 ok, {count} changed, 0 failed"
            )),
            "shape {index}: {}",
            text(&applied)
        );
        assert_exit(&fabric.apply(&["--check", "--exit-code"]), 0);
    }
}
