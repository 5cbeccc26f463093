//! `cargo bench --bench lab`: what the plan's queueing does to traffic, end to end, in
//! a lab (`mltctl lab up`: 2 spines, 2 leaves, a host behind each, 100 Mbit/s ports)
//! after `mltctl apply` and `mltctl bootstrap`. One run, side by side:
//! - `QoS enforced`: the forwarder queues as the switches' running configurations say;
//! - `QoS not enforced`: the same switches, the forwarder told to ignore their queueing
//!   (`mltctl lab qos off`: one queue per port, no RED, the same rate and buffer).
//!
//! In each, h1 sends h2 a back-layer bulk flow (the lowest gradient class's DSCP) at
//! twice the port rate, half its packets ECN-capable and half not, and a front-layer
//! probe (the highest gradient class's DSCP) every 10 ms. Reported: the share of
//! ECN-capable and of Not-ECT bulk packets delivered, the share of delivered
//! ECN-capable packets marked CE, and the probes' one-way delay. Needs root and sshd.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const RATE_MBPS: u64 = 100;
const SECONDS: f64 = 2.5;
const PORT: &str = "9000";

fn mltctl() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mltctl"))
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/lab")
        .join(name)
}

fn checked(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

struct Lab(PathBuf);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(mltctl())
            .args(["lab", "down", "--dir"])
            .arg(&self.0)
            .output();
    }
}

impl Lab {
    fn mltctl(&self, args: &[&str]) -> Output {
        let out = Command::new(mltctl())
            .args(args)
            .env("MLTCTL_INVENTORY", self.0.join("inventory.yaml"))
            .env("MLTCTL_KNOWN_HOSTS", self.0.join("known_hosts"))
            .env("MLTCTL_REMOTE_DIR", self.0.join("remote"))
            .output()
            .unwrap();
        checked(out, &args.join(" "))
    }

    /// One run of the traffic: (what was sent, what arrived).
    fn traffic(&self, bulk_dscp: u8, probe_dscp: u8) -> (Value, Value) {
        let receiver = Command::new("ip")
            .args(["netns", "exec", "mltbench-h2", "python3"])
            .arg(script("recv.py"))
            .args([PORT, &(SECONDS + 1.5).to_string()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let sent = checked(
            Command::new("ip")
                .args(["netns", "exec", "mltbench-h1", "python3"])
                .arg(script("send.py"))
                .args([
                    "10.1.1.11",
                    PORT,
                    &SECONDS.to_string(),
                    &(2 * RATE_MBPS).to_string(),
                    &bulk_dscp.to_string(),
                    &probe_dscp.to_string(),
                ])
                .output()
                .unwrap(),
            "send.py",
        );
        let received = checked(receiver.wait_with_output().unwrap(), "recv.py");
        (
            serde_json::from_slice(&sent.stdout).unwrap(),
            serde_json::from_slice(&received.stdout).unwrap(),
        )
    }
}

/// One line of the table, and its JSON.
fn summarise(case: &str, sent: &Value, received: &Value) -> (String, Value) {
    let count = |v: &Value, key: &str| v[key].as_f64().unwrap_or(0.0);
    let counts = &received["counts"];
    let ect_in = count(counts, "bulk/2") + count(counts, "bulk/3") + count(counts, "bulk/1");
    let ect_delivered = ect_in / count(sent, "bulk/2").max(1.0);
    let not_ect_delivered = count(counts, "bulk/0") / count(sent, "bulk/0").max(1.0);
    let marked = count(counts, "bulk/3") / ect_in.max(1.0);
    let mut delays: Vec<f64> = received["delays"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    delays.sort_by(f64::total_cmp);
    let at = |q: f64| {
        delays
            .get(((delays.len() as f64 - 1.0) * q) as usize)
            .copied()
    };
    let (p50, p99) = (at(0.5).unwrap_or(f64::NAN), at(0.99).unwrap_or(f64::NAN));
    let probes = delays.len() as f64 / count(sent, "probe/2").max(1.0);
    let line = format!(
        "| {case:<17} | {:>12.1}% | {:>13.1}% | {:>9.1}% | {:>8.1}% | {:>9.2} | {:>9.2} |",
        100.0 * ect_delivered,
        100.0 * not_ect_delivered,
        100.0 * marked,
        100.0 * probes,
        p50 * 1e3,
        p99 * 1e3
    );
    let json = serde_json::json!({
        "case": case,
        "ect_delivered": ect_delivered,
        "not_ect_delivered": not_ect_delivered,
        "ect_marked_ce": marked,
        "probes_delivered": probes,
        "probe_delay_ms_p50": p50 * 1e3,
        "probe_delay_ms_p99": p99 * 1e3,
    });
    (line, json)
}

fn main() {
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/sbin/sshd").exists() {
        eprintln!("lab benchmark skipped: it needs root and sshd (openssh-server)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("mltctl-lab-bench-{}", std::process::id()));
    checked(
        Command::new(mltctl())
            .args(["lab", "up", "--name", "mltbench", "--hosts-per-leaf", "1"])
            .args(["--rate-mbps", &RATE_MBPS.to_string(), "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
        "lab up",
    );
    let lab = Lab(dir);
    lab.mltctl(&["apply"]);
    lab.mltctl(&["bootstrap"]);
    // The back layers' class (lowest gradient queue) and the front layers' (highest).
    let plan: Value = serde_json::from_slice(&lab.mltctl(&["plan", "--json"]).stdout).unwrap();
    let classes = plan["qos"]["classes"]
        .as_array()
        .expect("the plan lists its gradient classes");
    let dscp = |class: &Value| class["dscp"].as_u64().expect("a class has a DSCP") as u8;
    let front = dscp(classes.first().expect("a gradient class"));
    let back = dscp(classes.last().expect("a gradient class"));
    let mut lines = Vec::new();
    let mut json = Vec::new();
    for (case, off) in [("QoS enforced", false), ("QoS not enforced", true)] {
        let state = if off { "off" } else { "on" };
        lab.mltctl(&["lab", "qos", state, "--dir", &lab.0.to_string_lossy()]);
        std::thread::sleep(std::time::Duration::from_millis(500));
        let (sent, received) = lab.traffic(back, front);
        let (line, value) = summarise(case, &sent, &received);
        lines.push(line);
        json.push(value);
    }
    println!(
        "lab: h1 → h2 through leaf1, a spine, leaf2 at {RATE_MBPS} Mbit/s per port; bulk at \
         {} Mbit/s (DSCP {back}, half ECT(0), half Not-ECT), a probe every 10 ms (DSCP {front})",
        2 * RATE_MBPS
    );
    println!(
        "| case              | ECT delivered | Not-ECT deliv. | ECT marked | probes in | p50 (ms)  | p99 (ms)  |"
    );
    println!(
        "| ----------------- | ------------- | -------------- | ---------- | --------- | --------- | --------- |"
    );
    for line in lines {
        println!("{line}");
    }
    println!("{}", serde_json::json!({ "bench": "lab", "cases": json }));
}
