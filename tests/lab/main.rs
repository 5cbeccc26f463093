//! `mltctl lab`: a small lab (2 spines, 2 leaves, a host behind each) comes up, the site
//! playbook runs on it end to end, an allreduce crosses the switches' data plane, a
//! rollback shows in that data plane, and `lab down` leaves nothing behind. Needs root
//! and sshd; reported as ignored otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/harness.rs"]
mod harness;
mod verify;

use common::json_lines;
use harness::Suite;
use serde_json::Value;
use verify::lab_verify;

const SSHD: &str = "/usr/sbin/sshd";
const NAME: &str = "mltci";

fn main() {
    let skip = if unsafe { libc::geteuid() } != 0 {
        Some("needs root (network namespaces)".to_string())
    } else if !Path::new(SSHD).exists() {
        Some(format!("{SSHD} is missing (Debian package openssh-server)"))
    } else {
        None
    };
    let endhost = Command::new(mltctl().with_file_name("endhost"))
        .arg("--version")
        .output();
    let dpdk = endhost.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("dpdk"));
    let no_dpdk = (!dpdk).then(|| "endhost was built without DPDK (--features dpdk)".to_string());
    let torch = missing_torch();
    let or = |more: &Option<String>| skip.clone().or_else(|| more.clone());
    let (dpdk_skip, torch_skip) = (or(&no_dpdk), or(&torch));
    Suite::new("lab")
        .test(
            "a_lab_comes_up_runs_the_playbook_and_an_allreduce_and_goes_down_without_a_trace",
            lab_end_to_end,
            skip.as_deref(),
        )
        .test(
            "the_dpdk_datapath_launched_on_lab_hosts_allreduces_through_the_switches",
            lab_dpdk,
            dpdk_skip.as_deref(),
        )
        .test(
            "a_4_host_ddp_job_trains_under_torchrun_through_the_launched_transport",
            lab_training,
            torch_skip.as_deref(),
        )
        .test(
            "a_buffer_the_plan_cannot_use_is_refused_before_anything_is_made",
            buffer_too_small_is_refused,
            skip.as_deref(),
        )
        .test(
            "a_directory_another_user_made_or_can_write_is_refused",
            untrusted_directories_are_refused,
            skip.as_deref(),
        )
        .test(
            "an_mltctl_without_the_switch_binary_beside_it_is_refused",
            switch_binary_missing_is_refused,
            skip.as_deref(),
        )
        // One lab at a time: they share the management network.
        .one_at_a_time()
        .run()
}

/// `--buffer 160KiB` cannot hold the default plan's thresholds: refused with the
/// plan's own words, and no directory or namespace is left.
fn buffer_too_small_is_refused() {
    let scratch = mlt_common::files::scratch_dir("mltctl-lab-small-").unwrap();
    let dir = scratch.path().join("lab");
    let out = Command::new(mltctl())
        .args(["lab", "up", "--name", "mltsmall", "--hosts-per-leaf", "1"])
        .args(["--buffer", "160KiB", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be planned"), "{stderr}");
    assert!(stderr.contains("over its tolerance"), "{stderr}");
    assert!(!dir.exists(), "{} was left behind", dir.display());
    let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&namespaces.stdout).contains("mltsmall-"),
        "a namespace was left behind"
    );
}

/// `lab up --dir D` runs the switches' commands as root from D and sshd reads its keys
/// there: an empty D another user made (mode and owner as they left them), or one
/// others can write, is refused before anything is made in it, and left as it was.
fn untrusted_directories_are_refused() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let scratch = mlt_common::files::scratch_dir("mltctl-lab-untrusted-").unwrap();
    let theirs = scratch.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let open = scratch.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    for (dir, says) in [
        (&theirs, "belongs to uid 65534"),
        (&open, "writable by its group or by others"),
    ] {
        let before = std::fs::metadata(dir).unwrap();
        let out = Command::new(mltctl())
            .args([
                "lab",
                "up",
                "--name",
                "mltun",
                "--hosts-per-leaf",
                "1",
                "--dir",
            ])
            .arg(dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(says), "{}", text(&out));
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            0,
            "nothing made in it"
        );
        let after = std::fs::metadata(dir).unwrap();
        assert_eq!(
            (after.uid(), after.gid(), after.mode()),
            (before.uid(), before.gid(), before.mode()),
            "left as it was"
        );
    }
}

/// The emulated switches' commands are `mltctl-lab-switch`, found beside mltctl's own
/// executable: an mltctl copied elsewhere alone is refused with that path, before
/// anything is made.
fn switch_binary_missing_is_refused() {
    let scratch = mlt_common::files::scratch_dir("mltctl-lab-alone-").unwrap();
    let alone = scratch.path().join("mltctl");
    std::fs::copy(mltctl(), &alone).unwrap();
    let dir = scratch.path().join("lab");
    let out = Command::new(&alone)
        .args([
            "lab",
            "up",
            "--name",
            "mltalone",
            "--hosts-per-leaf",
            "1",
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let missing = scratch.path().join("mltctl-lab-switch");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{} is missing", missing.display())),
        "{}",
        text(&out)
    );
    assert!(!dir.exists(), "{} was made", dir.display());
}

fn mltctl() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mltctl"))
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The lab in a scratch directory; dropping it brings the lab down, whatever happened.
struct Lab {
    dir: PathBuf,
    /// Where `dir` is; removed after the lab is down.
    _scratch: mlt_common::files::TempDir,
}

impl Lab {
    fn up() -> Lab {
        Lab::up_with(1, &[])
    }

    /// A lab of 2 spines and 2 leaves with `hosts_per_leaf` hosts behind each, and
    /// `more` of `lab up`'s options.
    fn up_with(hosts_per_leaf: u32, more: &[&str]) -> Lab {
        let scratch = mlt_common::files::scratch_dir("mltctl-lab-").unwrap();
        let lab = Lab {
            dir: scratch.path().join("lab"),
            _scratch: scratch,
        };
        let out = Command::new(mltctl())
            .args([
                "lab",
                "up",
                "--name",
                NAME,
                "--hosts-per-leaf",
                &hosts_per_leaf.to_string(),
            ])
            .args(more)
            .arg("--dir")
            .arg(&lab.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("emulation for rehearsal"),
            "{}",
            text(&out)
        );
        lab
    }

    /// mltctl with the lab's inventory, known_hosts and remote directory, as `lab up`
    /// tells a user to export them.
    fn mltctl(&self, args: &[&str]) -> Output {
        Command::new(mltctl())
            .args(args)
            .env("MLTCTL_INVENTORY", self.dir.join("inventory.yaml"))
            .env("MLTCTL_KNOWN_HOSTS", self.dir.join("known_hosts"))
            .env("MLTCTL_REMOTE_DIR", self.dir.join("remote"))
            .env("MLTCTL_VERIFY_WINDOW", "1")
            .env_remove("MLTCTL_STATE_DIR")
            .env_remove("SSH_AUTH_SOCK")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    }

    /// `lab status --json` of the lab's switches.
    fn switches(&self) -> Vec<Value> {
        let out = self.mltctl(&[
            "lab",
            "status",
            "--json",
            "--dir",
            &self.dir.to_string_lossy(),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let members: Value = serde_json::from_slice(&out.stdout).unwrap();
        members
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["kind"] == "switch")
            .cloned()
            .collect()
    }

    /// The names of the lab's hosts.
    fn hosts(&self) -> Vec<String> {
        let layout: Value =
            serde_json::from_slice(&std::fs::read(self.dir.join("lab.json")).unwrap()).unwrap();
        (layout["hosts"].as_array().unwrap().iter())
            .map(|h| h["name"].as_str().unwrap().to_string())
            .collect()
    }

    fn static_routes(&self) -> Vec<(String, u64)> {
        self.switches()
            .iter()
            .map(|m| {
                assert!(m.get("dataplane_error").is_none(), "{m}");
                (
                    m["name"].as_str().unwrap().to_string(),
                    m["static_routes"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    /// The cable of host `host` in the lab's layout.
    fn cable(&self, host: &str) -> Value {
        let layout: Value =
            serde_json::from_slice(&std::fs::read(self.dir.join("lab.json")).unwrap()).unwrap();
        (layout["hosts"].as_array().unwrap().iter())
            .find(|h| h["name"] == host)
            .map(|h| h["cable"].clone())
            .unwrap()
    }

    /// The leaf host `host` is cabled to.
    fn leaf_of(&self, host: &str) -> String {
        self.cable(host)["leaf"].as_str().unwrap().to_string()
    }

    /// How many of `count` small UDP datagrams host `from` sends (paced, 50 at a time)
    /// reach host `to`'s NIC address (Python's sockets, in the hosts' namespaces; the
    /// receiver's buffer holds them all, so a slow reader loses none).
    fn datagrams(&self, from: &str, to: &str, count: u32) -> u64 {
        let nic = self.cable(to)["nic"].as_str().unwrap().to_string();
        let shown = Command::new("ip")
            .args([
                "-j",
                "-4",
                "-n",
                &format!("{NAME}-{to}"),
                "addr",
                "show",
                "dev",
                &nic,
            ])
            .output()
            .unwrap();
        let addrs: Value = serde_json::from_slice(&shown.stdout).unwrap();
        let address = addrs[0]["addr_info"][0]["local"]
            .as_str()
            .unwrap()
            .to_string();
        // SO_RCVBUFFORCE (33): 4 MiB, past rmem_max (root). The first datagram is
        // waited for up to 30 s (the sender's start); then 1 s of quiet ends the count.
        let receiver = "import socket\n\
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
            s.setsockopt(socket.SOL_SOCKET, 33, 4 << 20)\n\
            s.bind(('0.0.0.0', 9797)); s.settimeout(30.0)\n\
            print('ready', flush=True)\n\
            n = 0\n\
            try:\n    while True: s.recv(2048); n += 1; s.settimeout(1.0)\n\
            except socket.timeout: pass\n\
            print(n)\n";
        let mut listening = Command::new("ip")
            .args([
                "netns",
                "exec",
                &format!("{NAME}-{to}"),
                PYTHON,
                "-c",
                receiver,
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(listening.stdout.take().unwrap()));
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        let sender = format!(
            "import socket, time\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             for i in range({count}):\n    s.sendto(b'x' * 100, ('{address}', 9797))\n    \
             if i % 50 == 49: time.sleep(0.001)\n"
        );
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &format!("{NAME}-{from}"),
                PYTHON,
                "-c",
                &sender,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let arrived = lines.next().unwrap().unwrap().parse().unwrap();
        assert!(listening.wait().unwrap().success());
        arrived
    }

    /// An allreduce on every host, through the transports `launch` started.
    fn allreduce(&self) -> Vec<Value> {
        let endhost = mltctl().with_file_name("endhost");
        let clients: Vec<_> = self
            .hosts()
            .iter()
            .map(|host| {
                Command::new("ip")
                    .args(["netns", "exec", &format!("{NAME}-{host}")])
                    .arg(&endhost)
                    .args(["allreduce", "--socket"])
                    .arg(self.dir.join("remote").join(format!("{host}.sock")))
                    .args(["--size", "4MiB", "--iterations", "2", "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|client| {
                let out = client.wait_with_output().unwrap();
                assert!(out.status.success(), "{}", text(&out));
                json_lines(&out)
            })
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.dir.join("lab.json").exists() {
            let _ = Command::new(mltctl())
                .args(["lab", "down", "--dir"])
                .arg(&self.dir)
                .output();
        }
    }
}

fn lab_end_to_end() {
    // Two hosts a rack: an incast of three senders fills a port (verify --congest).
    let lab = Lab::up_with(2, &[]);
    // The plan keeps the lab's ring within the loss the transport leaves unrecovered, so
    // a 4 MiB ring may pass unmarked. Pinning the front class's step at one frame (what
    // a buffer too small for that bound gets) makes the queueing act on it for sure.
    let inventory = lab.dir.join("inventory.yaml");
    let mut yaml = std::fs::read_to_string(&inventory).unwrap();
    let last_section = yaml
        .lines()
        .rfind(|l| l.starts_with(|c: char| c.is_alphabetic()));
    assert_eq!(
        last_section,
        Some("training:"),
        "appended lines land in `training`"
    );
    yaml.push_str("\n  thresholds:\n    - {class: 0, mark_bytes: 2048, limit_bytes: 86016}\n");
    std::fs::write(&inventory, yaml).unwrap();
    let switches = ["spine1", "spine2", "leaf1", "leaf2"];
    assert!(
        lab.static_routes().iter().all(|(_, n)| *n == 0),
        "factory-empty switches forward by no static route"
    );

    let out = lab.mltctl(&["play", "playbooks/site.yml", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let lines = json_lines(&out);
    // The play's last step verified what it deployed: every switch and host is ok.
    let verified = lines
        .iter()
        .find(|l| l["event"] == "summary" && l.get("unverifiable").is_some())
        .unwrap_or_else(|| panic!("no verify step: {}", text(&out)));
    assert_eq!(verified["ok"], 8, "4 switches, 4 hosts: {verified}");
    let recap = lines.iter().find(|l| l["event"] == "recap").unwrap();
    for device in recap["devices"].as_array().unwrap() {
        assert_eq!(device["failed"], 0, "{device}");
        assert_eq!(device["unreachable"], 0, "{device}");
    }
    assert!(
        lines.iter().any(|l| l["event"] == "launched"),
        "{}",
        text(&out)
    );
    let vendors: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "device" && l["status"] == "changed")
        .filter_map(|l| l["vendor"].as_str())
        .collect();
    for vendor in ["sonic", "eos", "cumulus", "onyx"] {
        assert!(vendors.contains(&vendor), "{vendor} changed: {vendors:?}");
    }
    // Every switch now forwards by the routes apply pushed to it, and runs RED/ECN
    // queues as the lab reads its configuration.
    for (name, routes) in lab.static_routes() {
        assert!(routes >= 4, "{name} forwards by {routes} static route(s)");
    }
    for switch in &lab.switches() {
        let qos = &switch["qos"];
        let ports: Vec<&Value> = qos["ports"]
            .as_object()
            .unwrap()
            .values()
            .chain(qos.get("default").filter(|d| !d.is_null()))
            .collect();
        let marking = ports
            .iter()
            .flat_map(|p| p["queues"].as_object().unwrap().values())
            .filter(|q| !q["mark"].is_null() && !q["drop_not_ect"].is_null())
            .count();
        assert!(marking > 0, "{}: {qos}", switch["name"]);
    }

    let results = lab.allreduce();
    assert_eq!(results.len(), 8, "4 hosts, 2 iterations: {results:?}");
    for r in &results {
        // The lab's job may drop up to its loss bound (1%).
        assert!(r["delivered"].as_f64().unwrap() >= 0.99, "{r}");
    }
    // The allreduce crossed the forwarder: every switch counted it, and the queueing
    // the switches run acted on it — gradients marked (ECT) or dropped (Not-ECT) past
    // their queue's threshold, the control class (strict, highest) never dropped.
    std::thread::sleep(std::time::Duration::from_millis(700));
    let (mut marked, mut dropped_not_ect, mut control_packets) = (0, 0, 0);
    for switch in &lab.switches() {
        let ports = switch["counters"]["ports"].as_object().unwrap();
        let forwarded: u64 = ports
            .values()
            .flat_map(|qs| qs.as_array().unwrap())
            .map(|q| q["packets"].as_u64().unwrap())
            .sum();
        assert!(
            forwarded > 0,
            "{} forwarded nothing: {switch}",
            switch["name"]
        );
        for queues in ports.values() {
            let queues = queues.as_array().unwrap();
            let control = &queues[7];
            let drops = ["dropped_not_ect", "dropped_red", "dropped_full"]
                .map(|f| control[f].as_u64().unwrap());
            assert_eq!(
                drops,
                [0, 0, 0],
                "{}: control queue {control}",
                switch["name"]
            );
            control_packets += control["packets"].as_u64().unwrap();
            for q in queues {
                marked += q["marked"].as_u64().unwrap();
                dropped_not_ect += q["dropped_not_ect"].as_u64().unwrap();
            }
        }
    }
    assert!(control_packets > 0, "the control class carried nothing");
    assert!(
        marked > 0 && dropped_not_ect > 0,
        "marked {marked}, Not-ECT dropped {dropped_not_ect}"
    );

    // With the queueing not enforced (`lab qos off`), the same traffic is neither
    // marked nor dropped for being Not-ECT any more; back on afterwards.
    let dir = lab.dir.to_string_lossy().to_string();
    lab.mltctl(&["lab", "qos", "off", "--dir", &dir]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    lab.allreduce();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let totals = |field: &str| -> u64 {
        lab.switches()
            .iter()
            .flat_map(|s| {
                s["counters"]["ports"]
                    .as_object()
                    .unwrap()
                    .values()
                    .flat_map(|qs| qs.as_array().unwrap().clone())
                    .collect::<Vec<_>>()
            })
            .map(|q| q[field].as_u64().unwrap())
            .sum()
    };
    assert_eq!(totals("marked"), marked, "marked with the queueing off");
    assert_eq!(totals("dropped_not_ect"), dropped_not_ect);
    let out = lab.mltctl(&["lab", "qos", "on", "--dir", &dir]);
    assert!(out.status.success(), "{}", text(&out));

    // `lab loss 10%`: of 2,000 datagrams from one rack's host to the other's, about a
    // tenth is lost (1,800 arrive; 1,700 to 1,900 is over seven standard deviations
    // either way), each counted at the sender's leaf (the few frames the launched
    // transports send meanwhile may be lost too); `off`, none is lost.
    let hosts = lab.hosts();
    let (from, to) = (&hosts[0], &hosts[hosts.len() - 1]);
    let lost_at_leaf = || -> u64 {
        let leaf = lab.leaf_of(from);
        (lab.switches().iter())
            .find(|s| s["name"] == leaf.as_str())
            .map(|s| s["counters"]["lost"].as_u64().unwrap())
            .unwrap()
    };
    let out = lab.mltctl(&["lab", "loss", "10%", "--dir", &dir]);
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let lost_before = lost_at_leaf();
    let arrived = lab.datagrams(from, to, 2000);
    assert!(
        (1700..=1900).contains(&arrived),
        "{arrived} of 2000 arrived"
    );
    std::thread::sleep(std::time::Duration::from_millis(700));
    let lost = lost_at_leaf() - lost_before;
    assert!(
        (2000 - arrived..=2050 - arrived).contains(&lost),
        "{} of 2000 did not arrive; {from}'s leaf counted {lost} frames lost",
        2000 - arrived
    );
    let out = lab.mltctl(&["lab", "loss", "off", "--dir", &dir]);
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let lost_before = lost_at_leaf();
    let arrived = lab.datagrams(from, to, 2000);
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert_eq!(lost_at_leaf(), lost_before, "lost with `lab loss off`");
    assert!(
        arrived >= 1990,
        "{arrived} of 2000 arrived with `lab loss off`"
    );

    lab_verify(&lab);

    // Undo the apply on the leaves: they stop forwarding by its routes at once.
    let history = lab.mltctl(&["history", "--json"]);
    assert!(history.status.success(), "{}", text(&history));
    let runs: Value = serde_json::from_slice(&history.stdout).unwrap();
    let run = runs[0]["run"].as_str().unwrap().to_string();
    let out = lab.mltctl(&["rollback", "--to", &run, "--limit", "leaf*"]);
    assert!(out.status.success(), "{}", text(&out));
    let routes: Vec<(String, u64)> = lab.static_routes();
    for (name, n) in &routes {
        if name.starts_with("leaf") {
            assert_eq!(*n, 0, "{name} still forwards by the rolled-back routes");
        } else {
            assert!(*n >= 4, "{name}");
        }
    }
    assert_eq!(routes.len(), switches.len());

    // A second lab cannot take this one's names or network, nor a directory not its own.
    let scratch = mlt_common::files::scratch_dir("mltctl-lab-other-").unwrap();
    let other = scratch.path().join("lab");
    let out = Command::new(mltctl())
        .args(["lab", "up", "--name", NAME, "--dir"])
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!other.exists());
    let out = Command::new(mltctl())
        .args(["lab", "up", "--name", "mltcj", "--dir"])
        .arg(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not empty"), "{}", text(&out));
    assert_eq!(
        lab.static_routes().len(),
        switches.len(),
        "the lab is untouched"
    );

    let stop = lab.mltctl(&["stop"]);
    assert!(stop.status.success(), "{}", text(&stop));
    lab.down();
}

impl Lab {
    /// `lab down`, and nothing of the lab is left: no process, namespace, cable,
    /// bridge, directory or DPDK runtime directory.
    fn down(&self) {
        let mut pids: Vec<String> = Vec::new();
        for entry in std::fs::read_dir("/run/netns").unwrap().flatten() {
            let ns = entry.file_name().to_string_lossy().to_string();
            if ns.starts_with(&format!("{NAME}-")) {
                let out = Command::new("ip")
                    .args(["netns", "pids", &ns])
                    .output()
                    .unwrap();
                pids.extend(
                    String::from_utf8_lossy(&out.stdout)
                        .split_whitespace()
                        .map(String::from),
                );
            }
        }
        assert!(!pids.is_empty(), "the lab runs its SSH servers");
        let out = Command::new(mltctl())
            .args(["lab", "down", "--dir"])
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let alive: Vec<&String> = pids
            .iter()
            .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        assert!(alive.is_empty(), "processes left: {alive:?}");
        let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let left: Vec<String> = String::from_utf8_lossy(&namespaces.stdout)
            .lines()
            .filter(|l| l.starts_with(&format!("{NAME}-")))
            .map(String::from)
            .collect();
        assert!(left.is_empty(), "namespaces left: {left:?}");
        let links: Vec<String> = std::fs::read_dir("/sys/class/net")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|l| l.starts_with(NAME))
            .collect();
        assert!(links.is_empty(), "interfaces left: {links:?}");
        assert!(!self.dir.exists(), "the lab's directory is left");
        for host in ["h1", "h2", "h3", "h4"] {
            assert!(
                !Path::new("/var/run/dpdk").join(host).exists(),
                "{host}'s DPDK runtime directory is left"
            );
        }
    }
}

/// `bootstrap --datapath dpdk` and `launch --datapath dpdk` on the lab's hosts (DPDK's
/// af_packet device over their veth NICs, as the lab's inventory says): the allreduce
/// crosses the switches on DPDK.
fn lab_dpdk() {
    let lab = Lab::up();
    let out = lab.mltctl(&["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = lab.mltctl(&["bootstrap", "--datapath", "dpdk", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = lab.mltctl(&["launch", "--datapath", "dpdk", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let lines = json_lines(&out);
    let launched = lines.iter().find(|l| l["event"] == "launched").unwrap();
    assert_eq!(launched["datapath"], "dpdk", "{launched}");
    let status = Command::new("ip")
        .args(["netns", "exec", &format!("{NAME}-h1")])
        .arg(mltctl().with_file_name("endhost"))
        .args(["status", "--socket"])
        .arg(lab.dir.join("remote/h1.sock"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("DPDK datapath"),
        "{}",
        text(&status)
    );
    for r in lab.allreduce() {
        assert!(r["delivered"].as_f64().unwrap() >= 0.99, "{r}");
    }
    // One host a rack: an incast of one sender cannot fill the other's port at the
    // same rate, so --congest leaves the leaves unverifiable, naming why (exit 8); the
    // DPDK transports answer the probes.
    let out = lab.mltctl(&["verify", "--congest", "--json"]);
    assert_eq!(out.status.code(), Some(8), "{}", text(&out));
    let lines = json_lines(&out);
    for leaf in ["leaf1", "leaf2"] {
        let check = lines.iter().find(|l| l["device"] == leaf).unwrap();
        assert_eq!(check["verdict"], "unverifiable", "{check}");
        assert!(
            check["unverifiable"].to_string().contains("cannot fill"),
            "{check}"
        );
    }
    let stop = lab.mltctl(&["stop"]);
    assert!(stop.status.success(), "{}", text(&stop));
    assert!(
        Path::new("/var/run/dpdk/h1").exists(),
        "DPDK ran with its file prefix"
    );
    lab.down();
}

/// Why the training test cannot run here: Debian's torch (python3-torch) or
/// scikit-learn (python3-sklearn, the digits) is missing.
fn missing_torch() -> Option<String> {
    let out = Command::new(PYTHON)
        .args(["-c", "import torch.distributed.run, sklearn.datasets"])
        .output();
    match out {
        Ok(out) if out.status.success() => None,
        _ => Some(format!(
            "{PYTHON} cannot import torch and sklearn (Debian packages python3-torch, python3-sklearn)"
        )),
    }
}

const PYTHON: &str = "/usr/bin/python3";

/// The book's training flow (docs/src/training/pytorch.md) on a lab of 4 hosts: the
/// site playbook (which launches the transport), then on every host `torchrun
/// train_digits.py` with nothing but the environment file `launch` wrote. The
/// gradients go through the mlt_transport hook to the launched transports and across
/// the switches.
fn lab_training() {
    // Jumbo frames, as the README's demo runs it: the lab's forwarder costs CPU per
    // frame.
    let lab = Lab::up_with(2, &["--mtu", "9000"]);
    let out = lab.mltctl(&["play", "playbooks/site.yml", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let hosts = ["h1", "h2", "h3", "h4"];
    for host in hosts {
        let link = Command::new("ip")
            .args(["netns", "exec", &format!("{NAME}-{host}")])
            .args(["ip", "-o", "link", "show", "ens1f0"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&link.stdout).contains(" mtu 9000 "),
            "{host}'s NIC: {}",
            text(&link)
        );
    }
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("endhost/python");
    let script = package.join("examples/train_digits.py");
    let trainers: Vec<_> = hosts
        .iter()
        .map(|host| {
            Command::new("ip")
                .args(["netns", "exec", &format!("{NAME}-{host}")])
                .args([
                    "sh",
                    "-c",
                    ". \"$1\" && exec torchrun \"$2\" --epochs 3",
                    "sh",
                ])
                .arg(lab.dir.join("remote").join(format!("{host}.env")))
                .arg(&script)
                // This checkout's package, whatever is installed.
                .env("PYTHONPATH", &package)
                .env("OMP_NUM_THREADS", "1")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = trainers
        .into_iter()
        .map(|t| t.wait_with_output().unwrap())
        .collect();
    for (host, out) in hosts.iter().zip(&outputs) {
        assert!(out.status.success(), "{host}: {}", text(out));
    }
    // Rank 0 (h1) prints an epoch a line: the model learns, and every bucket arrived
    // within the job's loss bound (1%).
    let epochs: Vec<Value> = String::from_utf8_lossy(&outputs[0].stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(epochs.len(), 3, "{}", text(&outputs[0]));
    let last = &epochs[2];
    assert!(last["accuracy"].as_f64().unwrap() > 0.8, "{last}");
    assert!(last["delivered_min"].as_f64().unwrap() >= 0.99, "{last}");
    // Every host's transport served the job's buckets (a few per step).
    for host in hosts {
        let status = Command::new("ip")
            .args(["netns", "exec", &format!("{NAME}-{host}")])
            .arg(mltctl().with_file_name("endhost"))
            .args(["status", "--json", "--socket"])
            .arg(lab.dir.join("remote").join(format!("{host}.sock")))
            .output()
            .unwrap();
        assert!(status.status.success(), "{}", text(&status));
        let status: Value = serde_json::from_slice(&status.stdout).unwrap();
        assert!(
            status["allreduces"].as_u64().unwrap() >= 3 * 11,
            "{host}: {status}"
        );
    }
    let stop = lab.mltctl(&["stop"]);
    assert!(stop.status.success(), "{}", text(&stop));
    lab.down();
}
