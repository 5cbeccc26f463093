//! `cargo bench --bench lab`: what the plan's queueing does to traffic, end to end, in
//! a lab (`mltctl lab up`: 2 spines, 2 leaves, a host behind each, 100 Mbit/s ports)
//! after `mltctl apply` and `mltctl bootstrap`. One run, side by side:
//! - `QoS enforced`: the forwarder queues as the switches' running configurations say;
//! - `QoS not enforced`: the same switches, the forwarder told to ignore their queueing
//!   (`mltctl lab qos off`: one queue per port, no RED, the same rate and buffer).
//!
//! In each, h1 sends h2 a back-layer bulk flow (the lowest gradient class's DSCP) at
//! 1.5 times the port rate, half its packets ECN-capable and half not (so the
//! ECN-capable half alone fits the port), and a front-layer
//! probe (the highest gradient class's DSCP) every 10 ms. Reported: the share of
//! ECN-capable and of Not-ECT bulk packets delivered, the share of delivered
//! ECN-capable packets marked CE, and the probes' one-way delay.
//!
//! Then the plan's loss prediction (`plan --explain`, MLT Appendix B's model) against
//! the lab at the model's own load: every class's thresholds pinned small (so losses
//! are measurable in seconds), h1 sends the model's traffic — Poisson arrivals at 0.9
//! of the port rate, classes by their share, half the packets unimportant (Not-ECT) —
//! and each class's loss of unimportant and of important packets is printed as the plan
//! predicts it, as the switch's queueing loses it at exact times (`model.rs`: the
//! forwarder's own `Port`, no I/O) and as the lab lost it.
//!
//! And a 4-host ring allreduce through the same data plane with shallow switch
//! buffers (`--buffer`): the transport `mltctl launch` started (kernel UDP, the
//! plan's queueing and thresholds, its own pacing) beside gloo (PyTorch, TCP, the
//! default queue) on the same hosts; per threshold profile and queue, the share of
//! the transport's ECN-capable and Not-ECT packets the switches lost in the ring
//! (`lab status --json`, every port of the profile's switches) beside the plan's
//! prediction, checked with the oracle's tolerance (`tests/thresholds.rs`: a loss
//! above 1.5 times the ECT prediction, or 3 times the Not-ECT one, and 1e-4 above
//! it, is a prediction that was optimistic).
//! Needs root, sshd, python3-torch and endhost built (`cargo build --release -p
//! endhost`: bootstrap uploads it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mltctl_lab::qos::{PortQos, SwitchQos};
use serde_json::Value;

use mltctl_lab::arrivals::{self, Losses, Offered};

const RATE_MBPS: u64 = 100;
const SECONDS: f64 = 2.5;
/// The bulk flow: 1.5 × the port rate, half of it ECN-capable.
const BULK_MBPS: u64 = RATE_MBPS * 3 / 2;
const PORT: &str = "9000";
/// Hosts of the lab (one per leaf), and the allreduce they run.
const HOSTS: usize = 4;
/// One gloo rank: the script `endhost bench allreduce` runs too.
const GLOO_SCRIPT: &str = "endhost/src/testbed/bench/gloo_allreduce.py";
const ALLREDUCE_BYTES: u64 = 4 << 20;
const ALLREDUCE_ITERATIONS: usize = 8;
/// Every switch's buffer, and what each port may queue: the least (in steps of 128
/// KiB) the plan's thresholds fit in under the transport's bursts (512 KiB is refused,
/// exit 3), about 52 ms at the lab's rate.
const BUFFER_KIB: u64 = 640;
/// How long the model's traffic runs in the lab, and how many arrivals the exact-time
/// simulation takes.
const MODEL_SECONDS: f64 = 10.0;
const MODEL_ARRIVALS: usize = 2_000_000;
/// Thresholds pinned for the model's case: S = 6 KiB (4 packets), L = 15 KiB (10).
const PINNED_MARK_BYTES: u64 = 6 * 1024;
const PINNED_LIMIT_BYTES: u64 = 15 * 1024;
/// A lab loss follows the plan's prediction when it is at most the prediction plus
/// this (an absolute margin, in loss fraction).
const MODEL_MARGIN: f64 = 0.005;
/// The oracle's tolerance for an optimistic prediction: a measured loss above
/// FACTOR × the prediction and ABSOLUTE above it (ECT, Not-ECT).
const ORACLE_FACTOR: (f64, f64) = (1.5, 3.0);
const ORACLE_ABSOLUTE: f64 = 1e-4;
/// The congested port in the model's case: leaf1's uplink (SONiC: it holds queue
/// limits, so both thresholds are enforced).
const CONGESTED_SWITCH: &str = "leaf1";

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

    /// benches/lab/recv.py on h2, listening a little longer than `seconds` of traffic
    /// and started before it.
    fn receiver(&self, seconds: f64) -> std::process::Child {
        let receiver = Command::new("ip")
            .args(["netns", "exec", "mltbench-h2", "python3"])
            .arg(script("recv.py"))
            .args([PORT, &(seconds + 1.5).to_string()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        receiver
    }

    /// One run of the traffic: (what was sent, what arrived).
    fn traffic(&self, bulk_dscp: u8, probe_dscp: u8) -> (Value, Value) {
        let receiver = self.receiver(SECONDS);
        let sent = checked(
            Command::new("ip")
                .args(["netns", "exec", "mltbench-h1", "python3"])
                .arg(script("send.py"))
                .args([
                    "10.1.1.11",
                    PORT,
                    &SECONDS.to_string(),
                    &BULK_MBPS.to_string(),
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

impl Lab {
    /// Pins every class's thresholds (S, L) and applies them.
    fn pin_thresholds(&self, classes: usize) {
        let inventory = self.0.join("inventory.yaml");
        let mut text = std::fs::read_to_string(&inventory).unwrap();
        assert!(
            text.trim_end().ends_with("af_packet}"),
            "the lab's inventory ends with its training section"
        );
        text.push_str("  model: {accept_over_tolerance: true}\n  thresholds:\n");
        for class in 0..classes {
            text.push_str(&format!(
                "    - {{class: {class}, mark_bytes: {PINNED_MARK_BYTES}, limit_bytes: {PINNED_LIMIT_BYTES}}}\n"
            ));
        }
        std::fs::write(&inventory, text).unwrap();
        self.mltctl(&["apply"]);
    }

    /// The model's traffic from h1 to h2: (sent, received) per "dscp/ecn".
    fn model_traffic(&self, traffic: &Offered) -> (Value, Value) {
        let receiver = self.receiver(MODEL_SECONDS);
        let classes: Vec<String> = traffic
            .classes
            .iter()
            .map(|(dscp, share)| format!("{dscp}:{share}"))
            .collect();
        let sent = checked(
            Command::new("ip")
                .args(["netns", "exec", "mltbench-h1", "python3"])
                .arg(script("poisson.py"))
                .args(["10.1.1.11", PORT, &MODEL_SECONDS.to_string()])
                .arg((traffic.rate_bps / 1_000_000).to_string())
                .args([traffic.load.to_string(), traffic.theta.to_string()])
                .args([traffic.frame_bytes.to_string(), classes.join(",")])
                .output()
                .unwrap(),
            "poisson.py",
        );
        let received = checked(receiver.wait_with_output().unwrap(), "recv.py");
        let received: Value = serde_json::from_slice(&received.stdout).unwrap();
        (
            serde_json::from_slice(&sent.stdout).unwrap(),
            received["dscp"].clone(),
        )
    }

    /// How the congested switch's uplinks queue, as the lab reads its running
    /// configuration.
    fn uplink_qos(&self) -> PortQos {
        let members = self.status();
        let member = members
            .iter()
            .find(|m| m["name"] == CONGESTED_SWITCH)
            .expect("the congested switch is in lab status");
        let qos: SwitchQos = serde_json::from_value(member["qos"].clone()).unwrap();
        qos.ports
            .into_values()
            .chain(qos.default)
            .max_by_key(|port| port.queues.len())
            .expect("the congested switch queues as the plan says")
    }
}

/// The model's case: per class, the loss of unimportant and of important packets as
/// the plan predicts it, as the switch's queueing loses it at exact times, and as the
/// lab lost it. Returns the table's lines and its JSON.
fn model_table(
    plan: &Value,
    simulated: &Losses,
    sent: &Value,
    received: &Value,
) -> (Vec<String>, Value) {
    let group = plan["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| {
            g["switches"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s == CONGESTED_SWITCH)
        })
        .expect("the plan has thresholds for the congested switch");
    let count = |v: &Value, key: String| v[key].as_f64().unwrap_or(0.0);
    let mut lines = Vec::new();
    let mut rows = Vec::new();
    let mut followed = 0;
    let mut cells = 0;
    for q in group["queues"].as_array().unwrap() {
        let class = q["class"].as_u64().unwrap();
        let dscp = plan["qos"]["classes"][class as usize]["dscp"]
            .as_u64()
            .unwrap() as u8;
        // The queue's offered load: its class's share of the model's load.
        let load = q["share"].as_f64().unwrap() * plan["model"]["load"].as_f64().unwrap();
        let mut row = serde_json::json!({
            "queue": q["queue"], "dscp": dscp, "load": load,
        });
        let mut line = format!(
            "| {:>5} | {dscp:>4} | {load:>5.3} |",
            q["queue"].as_u64().unwrap()
        );
        for (ect, predicted_key, kind) in [
            (false, "loss_not_ect", "not_ect"),
            (true, "loss_ect", "ect"),
        ] {
            let predicted = q[predicted_key].as_f64().unwrap();
            let (offered, lost) = simulated.get(&(dscp, ect)).copied().unwrap_or_default();
            let simulated = lost as f64 / offered.max(1) as f64;
            let lab_sent = count(sent, format!("{dscp}/{}", if ect { 2 } else { 0 }));
            let lab_in = if ect {
                count(received, format!("{dscp}/2")) + count(received, format!("{dscp}/3"))
            } else {
                count(received, format!("{dscp}/0"))
            };
            let lab = 1.0 - lab_in / lab_sent.max(1.0);
            let follows = lab <= predicted + MODEL_MARGIN;
            followed += usize::from(follows);
            cells += 1;
            line.push_str(&format!(
                " {predicted:>12.2e} | {simulated:>13.2e} | {lab:>10.2e}{} |",
                if follows { " " } else { "!" }
            ));
            row[kind] = serde_json::json!({
                "predicted": predicted, "simulated": simulated, "lab": lab,
                "lab_packets": lab_sent, "follows_prediction": follows,
            });
        }
        lines.push(line);
        rows.push(row);
    }
    lines.push(format!(
        "{followed} of {cells} lab losses at most the prediction + {} percentage points",
        MODEL_MARGIN * 100.0
    ));
    (
        lines,
        serde_json::json!({ "followed": followed, "of": cells, "queues": rows }),
    )
}

/// Per switch, port and queue, the forwarder's counters (`lab status --json`).
type QueueCounts = std::collections::BTreeMap<(String, String, usize), Value>;

/// The ring's losses per threshold profile and queue: the counters' growth over the
/// ring (`before` → `after`), every port of the profile's switches, against the plan's
/// prediction. Returns the table's lines and its JSON.
fn ring_losses(plan: &Value, before: &QueueCounts, after: &QueueCounts) -> (Vec<String>, Value) {
    let grown = |key: &(String, String, usize), field: &str| {
        let at = |c: &QueueCounts| c.get(key).and_then(|v| v[field].as_u64()).unwrap_or(0);
        at(after).saturating_sub(at(before))
    };
    let mut lines = Vec::new();
    let mut rows = Vec::new();
    let (mut held, mut cells) = (0, 0);
    for group in plan["thresholds"].as_array().unwrap() {
        let switches: Vec<&str> = group["switches"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for q in group["queues"].as_array().unwrap() {
            let queue = q["queue"].as_u64().unwrap() as usize;
            let (mut ect, mut ect_lost, mut all, mut all_lost) = (0, 0, 0, 0);
            for key in after
                .keys()
                .filter(|k| k.2 == queue && switches.contains(&k.0.as_str()))
            {
                let dropped = grown(key, "dropped_not_ect")
                    + grown(key, "dropped_red")
                    + grown(key, "dropped_full");
                all += grown(key, "packets") + dropped;
                all_lost += dropped;
                ect += grown(key, "ect_offered");
                ect_lost += grown(key, "ect_dropped");
            }
            let (not_ect, not_ect_lost) = (all - ect, all_lost - ect_lost);
            let mut line = format!("| {:<14} | {queue:>5} |", switches.join(","));
            let mut row = serde_json::json!({"switches": switches, "queue": queue});
            for (kind, offered, lost, key, factor) in [
                (
                    "not_ect",
                    not_ect,
                    not_ect_lost,
                    "loss_not_ect",
                    ORACLE_FACTOR.1,
                ),
                ("ect", ect, ect_lost, "loss_ect", ORACLE_FACTOR.0),
            ] {
                let predicted = q[key].as_f64().unwrap();
                let lab = lost as f64 / offered.max(1) as f64;
                let holds = lab <= predicted * factor || lab - predicted <= ORACLE_ABSOLUTE;
                held += usize::from(holds);
                cells += 1;
                line.push_str(&format!(
                    " {offered:>9} | {lab:>9.2e} | {predicted:>9.2e}{} |",
                    if holds { " " } else { "!" }
                ));
                row[kind] = serde_json::json!({"offered": offered, "lost": lost, "lab": lab,
                    "predicted": predicted, "holds": holds});
            }
            lines.push(line);
            rows.push(row);
        }
    }
    lines.push(format!(
        "{held} of {cells} lab losses within the oracle's tolerance of the prediction"
    ));
    (
        lines,
        serde_json::json!({"held": held, "of": cells, "queues": rows}),
    )
}

impl Lab {
    /// Every member's `lab status --json`.
    fn status(&self) -> Vec<Value> {
        let out = self.mltctl(&[
            "lab",
            "status",
            "--json",
            "--dir",
            &self.0.to_string_lossy(),
        ]);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Every switch's queue counters now.
    fn queue_counts(&self) -> QueueCounts {
        let mut counts = QueueCounts::new();
        for member in self.status() {
            let Some(ports) = member["counters"]["ports"].as_object() else {
                continue;
            };
            for (port, queues) in ports {
                for (queue, c) in queues.as_array().unwrap().iter().enumerate() {
                    let name = member["name"].as_str().unwrap().to_string();
                    counts.insert((name, port.clone(), queue), c.clone());
                }
            }
        }
        counts
    }

    fn hosts(&self) -> Vec<String> {
        (1..=HOSTS).map(|i| format!("h{i}")).collect()
    }

    /// Per iteration, the slowest rank's seconds of an allreduce through the launched
    /// transports, and the least fractions any rank had delivered and exact.
    fn endhost_allreduce(&self) -> (Vec<f64>, f64, f64) {
        let endhost = mltctl().with_file_name("endhost");
        let clients: Vec<_> = self
            .hosts()
            .iter()
            .map(|host| {
                Command::new("ip")
                    .args(["netns", "exec", &format!("mltbench-{host}")])
                    .arg(&endhost)
                    .args(["allreduce", "--socket"])
                    .arg(self.0.join("remote").join(format!("{host}.sock")))
                    .args(["--size", &ALLREDUCE_BYTES.to_string()])
                    .args(["--iterations", &ALLREDUCE_ITERATIONS.to_string(), "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut seconds = vec![0.0f64; ALLREDUCE_ITERATIONS];
        let mut delivered = 1.0f64;
        let mut exact = 1.0f64;
        for client in clients {
            let out = checked(client.wait_with_output().unwrap(), "endhost allreduce");
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                let i = v["iteration"].as_u64().unwrap() as usize;
                seconds[i] = seconds[i].max(v["seconds"].as_f64().unwrap());
                delivered = delivered.min(v["delivered"].as_f64().unwrap());
                exact = exact.min(v["exact"].as_f64().unwrap());
            }
        }
        (seconds, delivered, exact)
    }

    /// Per iteration, rank 0's seconds of gloo's allreduce between the same hosts.
    fn gloo_allreduce(&self, master: &str, nic: &str) -> Vec<f64> {
        let ranks: Vec<_> = self
            .hosts()
            .iter()
            .enumerate()
            .map(|(rank, host)| {
                Command::new("ip")
                    .args(["netns", "exec", &format!("mltbench-{host}")])
                    // Debian's python3-torch, whatever python3 the PATH has first.
                    .args(["/usr/bin/python3"])
                    .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(GLOO_SCRIPT))
                    .args([rank.to_string(), HOSTS.to_string()])
                    .args([
                        ALLREDUCE_BYTES.to_string(),
                        ALLREDUCE_ITERATIONS.to_string(),
                    ])
                    .args([master, nic])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut seconds = Vec::new();
        for rank in ranks {
            let out = checked(rank.wait_with_output().unwrap(), "gloo_allreduce.py");
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                seconds.push(v["seconds"].as_f64().unwrap());
            }
        }
        seconds
    }
}

/// A line of the allreduce table, and its JSON.
fn allreduce_line(
    system: &str,
    mut seconds: Vec<f64>,
    delivered: f64,
    exact: f64,
) -> (String, Value) {
    assert!(!seconds.is_empty(), "{system}: no iteration timed");
    seconds.sort_by(f64::total_cmp);
    let at = |q: f64| seconds[((seconds.len() - 1) as f64 * q).round() as usize];
    let optimum = endhost::testbed::bench::optimum_seconds(HOSTS, ALLREDUCE_BYTES, RATE_MBPS);
    let line = format!(
        "| {system:<28} | {:>10.3} | {:>8.3} | {:>10.1}% | {:>9.2}% | {:>8.2}% |",
        at(0.5),
        at(0.99),
        100.0 * optimum / at(0.5),
        100.0 * delivered,
        100.0 * exact
    );
    let json = serde_json::json!({
        "system": system, "median_s": at(0.5), "p99_s": at(0.99),
        "of_optimum": optimum / at(0.5), "delivered_min": delivered, "exact_min": exact,
        "seconds": seconds,
    });
    (line, json)
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
    let scratch = mlt_common::files::scratch_dir("mltctl-lab-bench-").expect("a scratch directory");
    let dir = scratch.path().join("lab");
    checked(
        Command::new(mltctl())
            .args(["lab", "up", "--name", "mltbench", "--hosts-per-leaf", "1"])
            .args(["--leaves", &HOSTS.to_string()])
            .args(["--vendors", "eos,onyx,sonic,cumulus"])
            .args(["--buffer", &format!("{BUFFER_KIB}KiB")])
            .args(["--rate", &format!("{RATE_MBPS}M"), "--dir"])
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
        BULK_MBPS
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

    // The allreduce: the launched transport, then gloo alone on the same hosts.
    lab.mltctl(&["lab", "qos", "on", "--dir", &lab.0.to_string_lossy()]);
    lab.mltctl(&["launch"]);
    // The forwarder writes its counters every half second.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let before = lab.queue_counts();
    let (endhost_seconds, delivered, exact) = lab.endhost_allreduce();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (ring_lines, ring_json) = ring_losses(&plan, &before, &lab.queue_counts());
    lab.mltctl(&["stop"]);
    let master = plan["hosts"][0]["nic"]["ip"]
        .as_str()
        .expect("h1's address");
    let nic = plan["hosts"][0]["nic"]["name"].as_str().expect("h1's NIC");
    let mut allreduce = vec![allreduce_line(
        &format!("endhost (p = {})", plan["job"]["loss_bound"]),
        endhost_seconds,
        delivered,
        exact,
    )];
    match endhost::testbed::bench::gloo_unavailable() {
        None => allreduce.push(allreduce_line(
            "gloo (torch.distributed)",
            lab.gloo_allreduce(master, nic),
            1.0,
            1.0,
        )),
        Some(why) => eprintln!("{why}: no gloo row"),
    }

    // The model's case, at its load with small pinned thresholds.
    lab.mltctl(&["lab", "qos", "on", "--dir", &lab.0.to_string_lossy()]);
    let traffic = Offered {
        classes: classes
            .iter()
            .map(|c| (dscp(c), c["share"].as_f64().expect("a class has a share")))
            .collect(),
        load: plan["model"]["load"].as_f64().expect("the plan's load"),
        theta: plan["model"]["theta"].as_f64().expect("the plan's θ"),
        frame_bytes: 1500,
        rate_bps: RATE_MBPS * 1_000_000,
        batch: 1,
        senders: 1,
    };
    lab.pin_thresholds(classes.len());
    let plan: Value = serde_json::from_slice(&lab.mltctl(&["plan", "--json"]).stdout).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let simulated = arrivals::simulate(
        lab.uplink_qos(),
        BUFFER_KIB * 1024,
        &traffic,
        MODEL_ARRIVALS,
        18,
    );
    let (sent, received) = lab.model_traffic(&traffic);
    let (model_lines, model_json) = model_table(&plan, &simulated, &sent, &received);
    println!();
    println!(
        "model: h1 → h2, Poisson at {} of {RATE_MBPS} Mbit/s in {}-byte frames for {MODEL_SECONDS} s, \
         classes by share, {}% Not-ECT; every class pinned to S = {} KiB, L = {} KiB; \
         loss at {CONGESTED_SWITCH}'s uplink as the plan predicts it, as the same queueing \
         loses it at exact times ({MODEL_ARRIVALS} arrivals), and in the lab",
        traffic.load,
        traffic.frame_bytes,
        traffic.theta * 100.0,
        PINNED_MARK_BYTES / 1024,
        PINNED_LIMIT_BYTES / 1024
    );
    println!(
        "| queue | DSCP | load  | Not-ECT plan | Not-ECT exact | Not-ECT lab | ECT plan     | ECT exact     | ECT lab     |"
    );
    println!(
        "| ----- | ---- | ----- | ------------ | ------------- | ----------- | ------------ | ------------- | ----------- |"
    );
    for line in model_lines {
        println!("{line}");
    }
    println!();
    println!(
        "allreduce: {HOSTS} hosts (one per leaf), ring, {} MiB, {ALLREDUCE_ITERATIONS} iterations, \
         {RATE_MBPS} Mbit/s ports, {BUFFER_KIB} KiB of buffer per port, the plan's queueing",
        ALLREDUCE_BYTES >> 20
    );
    println!(
        "| system                       | median (s) | p99 (s)  | of optimum  | delivered  | exact     |"
    );
    println!(
        "| ---------------------------- | ---------- | -------- | ----------- | ---------- | --------- |"
    );
    for (line, _) in &allreduce {
        println!("{line}");
    }
    println!();
    println!(
        "the ring's packets through the switches, per threshold profile and queue: offered, \
         lost in the lab and as the plan predicts (! : optimistic beyond the oracle's tolerance)"
    );
    println!(
        "| switches       | queue | Not-ECT   | lab       | plan       | ECT       | lab       | plan       |"
    );
    println!(
        "| -------------- | ----- | --------- | --------- | ---------- | --------- | --------- | ---------- |"
    );
    for line in ring_lines {
        println!("{line}");
    }
    let allreduce: Vec<Value> = allreduce.into_iter().map(|(_, json)| json).collect();
    println!(
        "{}",
        serde_json::json!({
            "bench": "lab", "cases": json, "model": model_json, "allreduce": allreduce,
            "ring_losses": ring_json,
        })
    );
}
