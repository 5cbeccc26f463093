//! `mltctl bootstrap`, `launch` and `stop` against hosts that are network namespaces,
//! each with its own sshd, behind leaf and spine namespaces that forward with the plan's
//! static routes. Needs root; reported as ignored otherwise.

#[path = "../common/mod.rs"]
mod common;
mod fabric;
#[path = "../common/harness.rs"]
mod harness;

use std::collections::BTreeSet;

use common::{json_lines, recap};
use std::path::Path;

use fabric::{Fabric, HOSTS, text};
use harness::Suite;
use serde_json::Value;

fn main() {
    let skip = fabric::unavailable();
    let tests: &[(&str, fn())] = &[
        (
            "bootstrap_makes_hosts_match_the_plan_spines_carry_their_paths_and_launch_serves_allreduces",
            end_to_end,
        ),
        (
            "bad_plans_missing_nics_and_unreachable_hosts_leave_hosts_as_they_were",
            errors,
        ),
    ];
    Suite::new("host").tests(tests, skip.as_deref()).run()
}

/// What the kernel of host i has on its data NIC: addresses, permanent neighbours and
/// the routes through its NIC, as comparable text.
fn host_state(fabric: &Fabric, i: usize) -> BTreeSet<String> {
    let ns = fabric.host_ns(i);
    let mut state = BTreeSet::new();
    let json = |cmd: &str| -> Value { serde_json::from_str(&fabric.sh(&ns, cmd)).unwrap() };
    let link = json("ip -j link show dev eth1");
    state.insert(format!("mtu {}", link[0]["mtu"]));
    let addresses = json("ip -j -4 addr show dev eth1");
    for a in addresses[0]["addr_info"].as_array().into_iter().flatten() {
        state.insert(format!(
            "address {}/{}",
            a["local"].as_str().unwrap(),
            a["prefixlen"]
        ));
    }
    for n in json("ip -j -4 neigh show dev eth1 nud permanent")
        .as_array()
        .unwrap()
    {
        state.insert(format!(
            "neighbour {} {}",
            n["dst"].as_str().unwrap(),
            n["lladdr"].as_str().unwrap()
        ));
    }
    for r in json("ip -j -4 route show dev eth1").as_array().unwrap() {
        if r["protocol"] == "kernel" {
            continue;
        }
        state.insert(format!(
            "route {} via {}",
            r["dst"].as_str().unwrap(),
            r["gateway"].as_str().unwrap_or("-")
        ));
    }
    state
}

/// What the plan says host `name` must have, in [`host_state`]'s terms.
fn planned_state(fabric: &Fabric, inventory: &Path, name: &str) -> BTreeSet<String> {
    let out = fabric.mltctl(&[
        "plan",
        "-i",
        &inventory.display().to_string(),
        "--host",
        name,
        "--network",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut state = BTreeSet::new();
    state.insert(format!("mtu {}", plan["mtu"]));
    for a in plan["addresses"].as_array().unwrap() {
        state.insert(format!("address {}", a.as_str().unwrap()));
    }
    for n in plan["neighbours"].as_array().unwrap() {
        state.insert(format!(
            "neighbour {} {}",
            n["ip"].as_str().unwrap(),
            n["mac"].as_str().unwrap()
        ));
    }
    for r in plan["routes"].as_array().unwrap() {
        state.insert(format!(
            "route {} via {}",
            r["prefix"].as_str().unwrap(),
            r["via"].as_str().unwrap()
        ));
    }
    state
}

/// Each host's status, in host name order.
fn statuses(out: &std::process::Output) -> Vec<(String, String)> {
    let mut statuses: Vec<(String, String)> = json_lines(out)
        .into_iter()
        .filter(|l| l["event"] == "host")
        .map(|l| {
            (
                l["host"].as_str().unwrap().to_string(),
                l["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    statuses.sort();
    statuses
}

/// The run time a JSON Lines report's summary gives, printed for the record.
fn report_seconds(what: &str, out: &std::process::Output) {
    if let Some(summary) = json_lines(out).iter().find(|l| l["event"] == "summary") {
        eprintln!(
            "{what}: {:.2} s",
            summary["seconds"].as_f64().unwrap_or(0.0)
        );
    }
}

fn end_to_end() {
    let fabric = Fabric::new("e2e");
    let inventory = fabric.inventory.clone();
    let before: Vec<_> = (0..HOSTS.len()).map(|i| host_state(&fabric, i)).collect();

    check_play(&fabric, &inventory);
    for (i, state) in before.iter().enumerate() {
        assert_eq!(
            &host_state(&fabric, i),
            state,
            "play --check changed a host"
        );
    }

    // Check mode reports the changes and makes none.
    let check = fabric.host_command("bootstrap", &inventory, &["--check", "--diff"]);
    assert!(check.status.success(), "{}", text(&check));
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("h1 (192.168.77.11:22): changed: would make"),
        "{report}"
    );
    assert!(
        report.contains("+ route 10.200.0.0/16 via 10.1.1.1"),
        "{report}"
    );
    for (i, state) in before.iter().enumerate() {
        assert_eq!(
            &host_state(&fabric, i),
            state,
            "check mode changed {}",
            HOSTS[i].name
        );
    }

    // Bootstrap: every host's kernel state is exactly the plan's.
    let first = fabric.host_command("bootstrap", &inventory, &["--json"]);
    assert!(first.status.success(), "{}", text(&first));
    report_seconds("first bootstrap (uploads endhost)", &first);
    assert!(
        statuses(&first).iter().all(|(_, s)| s == "changed"),
        "{}",
        text(&first)
    );
    for (i, host) in HOSTS.iter().enumerate() {
        assert_eq!(
            host_state(&fabric, i),
            planned_state(&fabric, &inventory, host.name),
            "{}",
            host.name
        );
    }

    // A second bootstrap changes nothing (the binary is already there).
    let second = fabric.host_command("bootstrap", &inventory, &["--json"]);
    assert!(second.status.success(), "{}", text(&second));
    report_seconds("second bootstrap (no change)", &second);
    assert_eq!(
        statuses(&second),
        HOSTS
            .iter()
            .map(|h| (h.name.to_string(), "ok".to_string()))
            .collect::<Vec<_>>()
    );

    bootstrapped_play(&fabric, &inventory);
    spines_carry_their_paths(&fabric);
    launch_serves_allreduces(&fabric, &inventory);

    // h2 leaves the inventory: h1's neighbour entry for it goes, the rest stays.
    let without_h2 = fabric.dir.join("without-h2.yaml");
    let hosts: Vec<(usize, &str)> = [0, 2, 3].iter().map(|&i| (i, HOSTS[i].nic)).collect();
    std::fs::write(&without_h2, fabric::inventory(&fabric.dir, &hosts)).unwrap();
    let out = fabric.host_command("bootstrap", &without_h2, &["--limit", "h1", "--diff"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("- neighbour 10.1.1.12 lladdr 02:00:0a:01:01:0c"),
        "{}",
        text(&out)
    );
    let h1 = host_state(&fabric, 0);
    assert!(
        !h1.iter().any(|e| e.starts_with("neighbour 10.1.1.12")),
        "{h1:?}"
    );
    assert_eq!(h1, planned_state(&fabric, &without_h2, "h1"));
}

/// `mltctl play PLAYBOOK` on this fabric's inventory, hosts and remote directory.
fn play(fabric: &Fabric, playbook: &Path, inventory: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "play".to_string(),
        playbook.display().to_string(),
        "-i".into(),
        inventory.display().to_string(),
        "--known-hosts".into(),
        fabric.known_hosts.display().to_string(),
        "--remote-dir".into(),
        fabric.remote_dir.display().to_string(),
        "--json".into(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    fabric.mltctl(&all.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The site playbook in check mode: nothing answers at the switches' documentation
/// addresses, and the play goes on past them so the hosts' check is seen too.
fn check_play(fabric: &Fabric, inventory: &Path) {
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks/site.yml");
    let out = play(
        fabric,
        &site,
        inventory,
        &["--check", "--connect-timeout", "1"],
    );
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let recap = recap(&out);
    for switch in ["spine1", "spine2", "leaf1", "leaf2"] {
        assert_eq!(recap[switch], [0, 0, 2, 0], "{switch}: diff and apply");
    }
    for host in &HOSTS {
        assert_eq!(
            recap[host.name],
            [0, 1, 0, 0],
            "{}: bootstrap would change",
            host.name
        );
    }
    let skipped: Vec<String> = json_lines(&out)
        .iter()
        .filter(|l| l["event"] == "step" && l.get("skipped").is_some())
        .map(|l| l["step"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(skipped, ["launch", "verify"]);
}

/// A playbook of host steps on bootstrapped hosts: each is ok.
fn bootstrapped_play(fabric: &Fabric, inventory: &Path) {
    let playbook = fabric.dir.join("hosts.yml");
    std::fs::write(&playbook, "steps: [validate, diff, bootstrap]\n").unwrap();
    let out = play(fabric, &playbook, inventory, &["--limit", "hosts"]);
    assert!(out.status.success(), "{}", text(&out));
    let skipped: Vec<(String, String)> = json_lines(&out)
        .iter()
        .filter(|l| l["event"] == "step")
        .map(|l| {
            (
                l["step"].as_str().unwrap().to_string(),
                l["skipped"].as_str().unwrap_or("ran").to_string(),
            )
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ("validate".to_string(), "ran".to_string()),
            ("diff".to_string(), "--limit selects no switch".to_string()),
            ("bootstrap".to_string(), "ran".to_string()),
        ]
    );
    let recap = recap(&out);
    assert_eq!(recap.len(), HOSTS.len(), "{recap:?}");
    for host in &HOSTS {
        assert_eq!(recap[host.name], [1, 0, 0, 0], "{}", host.name);
    }
}

/// Packets to a peer's spine-s path address cross spine s and no other spine.
fn spines_carry_their_paths(fabric: &Fabric) {
    let out = fabric.mltctl(&[
        "plan",
        "-i",
        &fabric.inventory.display().to_string(),
        "--json",
    ]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let h3 = &plan["hosts"][2];
    let paths: Vec<(usize, String)> = h3["path_addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["spine"].as_u64().unwrap() as usize,
                p["address"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    for s in 0..2 {
        let rules: String = paths
            .iter()
            .map(|(_, a)| format!("add rule inet mlt transit ip daddr {a} counter\n"))
            .collect();
        let script = format!(
            "add table inet mlt\nadd chain inet mlt transit {{ type filter hook forward priority 0; }}\n{rules}"
        );
        fabric.sh(&fabric.spine_ns(s), &format!("echo '{script}' | nft -f -"));
    }
    for (_, address) in &paths {
        fabric.sh(
            &fabric.host_ns(0),
            &format!(
                "for i in 1 2 3 4 5 6 7 8 9 10; do printf x > /dev/udp/{address}/9999 || true; done"
            ),
        );
    }
    for s in 0..2 {
        let listing = fabric.sh(&fabric.spine_ns(s), "nft list chain inet mlt transit");
        for (spine, address) in &paths {
            let line = listing
                .lines()
                .find(|l| l.contains(&format!("ip daddr {address} ")))
                .unwrap_or_else(|| panic!("no rule for {address}: {listing}"));
            let packets: u64 = line
                .split_whitespace()
                .skip_while(|w| *w != "packets")
                .nth(1)
                .unwrap()
                .parse()
                .unwrap();
            let expected = if *spine == s { 10 } else { 0 };
            assert_eq!(
                packets,
                expected,
                "spine{} forwarded {packets} packets to {address} (spine{}'s path address)",
                s + 1,
                spine + 1
            );
        }
    }
}

fn launch_serves_allreduces(fabric: &Fabric, inventory: &Path) {
    let out = fabric.host_command("launch", inventory, &["--ready-timeout", "30", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        statuses(&out),
        HOSTS
            .iter()
            .map(|h| (h.name.to_string(), "changed".to_string()))
            .collect::<Vec<_>>()
    );
    let lines = json_lines(&out);
    let launched = lines
        .iter()
        .find(|l| l["event"] == "launched")
        .unwrap_or_else(|| panic!("no launched event: {}", text(&out)));
    assert_eq!(launched["world_size"], 4);
    let ranks = launched["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    assert_eq!(ranks[2]["env"]["RANK"], "2");
    assert_eq!(ranks[2]["env"]["MASTER_ADDR"], "10.1.1.11");
    assert_eq!(ranks[2]["env"]["GLOO_SOCKET_IFNAME"], "eth1");
    assert!(
        launched["groups"]["iterations"]
            .as_array()
            .is_some_and(|i| !i.is_empty())
    );
    // The inventory's socket group may use the transport's socket, nobody else.
    for host in HOSTS {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let socket = fabric.remote_dir.join(format!("{}.sock", host.name));
        let meta = std::fs::metadata(&socket).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o660, "{socket:?}");
        assert_eq!(meta.gid(), 65534, "{socket:?}: group nogroup");
    }
    let ipmac = std::fs::read_to_string(fabric.remote_dir.join("h1.ipmac")).unwrap();
    assert!(ipmac.contains("10.1.1.12=02:00:0a:01:01:0c"), "{ipmac}");
    assert!(ipmac.contains("10.1.2.11=02:00:0a:01:01:01"), "{ipmac}");

    let endhost = Path::new(env!("CARGO_BIN_EXE_mltctl")).with_file_name("endhost");
    let clients: Vec<_> = (0..HOSTS.len())
        .map(|i| {
            std::process::Command::new("ip")
                .args(["netns", "exec", &fabric.host_ns(i)])
                .arg(&endhost)
                .args(["allreduce", "--socket"])
                .arg(fabric.remote_dir.join(format!("{}.sock", HOSTS[i].name)))
                .args(["--size", "1MiB", "--iterations", "2", "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for client in clients {
        let out = client.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let lines = json_lines(&out);
        assert_eq!(lines.len(), 2, "{}", text(&out));
        assert!(lines.iter().all(|l| l["exact"] == 1.0), "{}", text(&out));
    }

    let stop = fabric.host_command("stop", inventory, &["--json"]);
    assert!(stop.status.success(), "{}", text(&stop));
    assert!(
        statuses(&stop).iter().all(|(_, s)| s == "changed"),
        "{}",
        text(&stop)
    );
    let again = fabric.host_command("stop", inventory, &["--json"]);
    assert!(
        statuses(&again).iter().all(|(_, s)| s == "ok"),
        "{}",
        text(&again)
    );
}

fn errors() {
    let mut fabric = Fabric::new("err");
    let inventory = fabric.inventory.clone();
    let before: Vec<_> = (0..HOSTS.len()).map(|i| host_state(&fabric, i)).collect();

    // A bad plan file: the agent names the place and changes nothing.
    let bad = fabric.dir.join("bad-plan.json");
    std::fs::write(
        &bad,
        "{\"host\": \"h1\", \"nic\": \"eth1\",\n \"mtu\": \"big\"}",
    )
    .unwrap();
    let endhost = Path::new(env!("CARGO_BIN_EXE_mltctl")).with_file_name("endhost");
    let out = fabric.sh_output(
        &fabric.host_ns(0),
        &format!("{} configure --plan {}", endhost.display(), bad.display()),
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad-plan.json:2:"), "{stderr}");
    assert_eq!(host_state(&fabric, 0), before[0]);

    // The inventory names a NIC h1 does not have.
    let wrong_nic = fabric.dir.join("wrong-nic.yaml");
    let hosts: Vec<(usize, &str)> = (0..HOSTS.len())
        .map(|i| (i, if i == 0 { "eth9" } else { HOSTS[i].nic }))
        .collect();
    std::fs::write(&wrong_nic, fabric::inventory(&fabric.dir, &hosts)).unwrap();
    let out = fabric.host_command("bootstrap", &wrong_nic, &["--limit", "h1"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this host has no interface eth9"),
        "{}",
        text(&out)
    );
    assert_eq!(host_state(&fabric, 0), before[0]);

    // DPDK preparation in check mode says what it would do, and why this machine
    // (no IOMMU, no such PCI device) cannot; nothing changes, hugepages included.
    let hugepages = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
    let pages_before = std::fs::read_to_string(hugepages).ok();
    let out = fabric.host_command(
        "bootstrap",
        &inventory,
        &["--limit", "h1", "--check", "--datapath", "dpdk", "--json"],
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let line = &json_lines(&out)[0];
    let steps = line["report"]["dpdk"].as_array().unwrap();
    let step = |name: &str| steps.iter().find(|s| s["name"] == name).unwrap().clone();
    assert!(
        step("hugepages")["action"]
            .as_str()
            .unwrap()
            .contains("2 MiB hugepages"),
        "{steps:?}"
    );
    let bind = step("bind");
    assert_eq!(bind["status"], "failed", "{bind}");
    assert!(
        bind["reason"]
            .as_str()
            .unwrap()
            .contains("no PCI device 0000:3b:00.0"),
        "{bind}"
    );
    assert_eq!(std::fs::read_to_string(hugepages).ok(), pages_before);
    assert_eq!(host_state(&fabric, 0), before[0]);

    untrusted_remote_directories_are_refused(&fabric, &inventory);
    what_a_host_prints_is_shown_as_data(&fabric, &inventory);

    // h4 is unreachable: it is reported, the others are configured.
    fabric.stop_sshd(3);
    let out = fabric.host_command(
        "bootstrap",
        &inventory,
        &["--json", "--connect-timeout", "3"],
    );
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let got = statuses(&out);
    assert_eq!(
        got[3],
        ("h4".to_string(), "unreachable".to_string()),
        "{got:?}"
    );
    assert!(got[..3].iter().all(|(_, s)| s == "changed"), "{got:?}");
    assert_eq!(host_state(&fabric, 3), before[3]);

    // Launch without h4: the job cannot form, so the transports that started on the
    // others are stopped again and no launcher output is printed.
    let out = fabric.host_command(
        "launch",
        &inventory,
        &["--connect-timeout", "3", "--ready-timeout", "30"],
    );
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("h4 (192.168.77.14:22): unreachable"),
        "{stderr}"
    );
    for (i, host) in HOSTS.iter().enumerate().take(3) {
        assert!(
            stderr.contains(&format!(
                "{} ({}:22): ok: started, then stopped again: the job cannot form without h4",
                host.name,
                fabric::mgmt_ip(i)
            )),
            "{stderr}"
        );
        let config = fabric
            .remote_dir
            .join(format!("{}.transport.json", host.name));
        let serving = std::process::Command::new("pgrep")
            .args(["-f", &format!("serve --config {}", config.display())])
            .output()
            .unwrap();
        assert!(
            serving.stdout.is_empty(),
            "{} still serves: {}",
            host.name,
            String::from_utf8_lossy(&serving.stdout)
        );
    }
}

/// A remote directory another user owns, or one others can write, could have what
/// mltctl puts there (the binary it runs, the job's key) swapped: bootstrap and launch
/// refuse it, saying why, and put nothing in it.
fn untrusted_remote_directories_are_refused(fabric: &Fabric, inventory: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let theirs = fabric.dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let open = fabric.dir.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    // Ours, below a directory another user owns (who could rename ours away).
    let below = fabric.dir.join("their-parent");
    std::fs::create_dir(&below).unwrap();
    std::os::unix::fs::chown(&below, Some(65534), Some(65534)).unwrap();
    let below = below.join("mltctl");
    std::fs::create_dir(&below).unwrap();
    let their_parent = format!(
        "{} belongs to uid 65534",
        fabric.dir.join("their-parent").display()
    );
    for (dir, says) in [
        (&theirs, "belongs to uid 65534, not to the SSH user"),
        (&open, "writable by its group or others (mode 777"),
        (&below, their_parent.as_str()),
    ] {
        // Launch starts the whole job; bootstrap is asked for one host.
        for (command, args) in [("bootstrap", &["--limit", "h1"][..]), ("launch", &[])] {
            let out = fabric.host_command_in(command, inventory, dir, args);
            assert_eq!(out.status.code(), Some(4), "{command}: {}", text(&out));
            assert!(text(&out).contains(says), "{command}: {}", text(&out));
            assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0, "{command}");
        }
    }
}

/// A host is trusted to run what it is sent, not to be honest in what it prints: a
/// remote `endhost` that answers with terminal escape sequences and a private key
/// reaches the admin's terminal as escaped text, the key redacted.
fn what_a_host_prints_is_shown_as_data(fabric: &Fabric, inventory: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let remote = fabric.dir.join("hostile");
    std::fs::create_dir(&remote).unwrap();
    let script = remote.join("endhost");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '\\033[2J\\033]0;pwned\\007 stopped\\n-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\\n' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for args in [&[][..], &["--json"]] {
        let out = fabric.host_command_in("launch", inventory, &remote, args);
        assert_eq!(out.status.code(), Some(4), "{}", text(&out));
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        assert!(
            !all.contains(&0x1b),
            "an escape reached the terminal: {}",
            text(&out)
        );
        assert!(
            !all.contains(&0x07),
            "a bell reached the terminal: {}",
            text(&out)
        );
        let shown = String::from_utf8_lossy(&all);
        assert!(!shown.contains("b3BlbnNzaC1rZXktdjEAAAAA"), "{shown}");
        assert!(shown.contains("[redacted"), "{shown}");
        assert!(
            shown.contains("stopped"),
            "the host's words are kept: {shown}"
        );
    }
}
