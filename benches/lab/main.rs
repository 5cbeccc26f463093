//! `cargo bench --bench lab`: what the plan's queueing does to traffic, end to end, in
//! a lab (`mltctl lab up`: 2 spines, 2 leaves, 2 hosts behind each, 100 Mbit/s ports)
//! after `mltctl apply` and `mltctl bootstrap`. A host's NIC sends at the port rate, so
//! a port congests when several hosts send into it: h1 and h2 (leaf1's rack) send to h3
//! by its path address through spine1, and meet at leaf1's uplink. One run, side by
//! side:
//! - `QoS enforced`: the forwarder queues as the switches' running configurations say;
//! - `QoS not enforced`: the same switches, the forwarder told to ignore their queueing
//!   (`mltctl lab qos off`: one queue per port, no RED, the same rate and buffer).
//!
//! In each, h1 and h2 send a back-layer bulk flow (the lowest gradient class's DSCP) at
//! 0.75 times the port rate each, 1.5 times the uplink's rate together, half their
//! packets ECN-capable and half not (so the ECN-capable half alone fits the port), and a
//! front-layer probe (the highest gradient class's DSCP) every 10 ms. Reported: the
//! share of ECN-capable and of Not-ECT bulk packets delivered, the share of delivered
//! ECN-capable packets marked CE, and the probes' one-way delay.
//!
//! Then the plan's loss prediction (`plan --explain`, MLT Appendix B's model) against
//! the lab at the model's own load: every class's thresholds pinned small (so losses
//! are measurable in seconds), h1 and h2 each send half the model's traffic — Poisson
//! arrivals at 0.9 of the port rate in all, classes by their share, half the packets
//! unimportant (Not-ECT) — and each class's loss of unimportant and of important packets
//! at leaf1's uplink is printed as the plan predicts it, as the switch's queueing loses
//! it at exact times (`model.rs`: the forwarder's own `Port`, no I/O) and as the lab lost
//! it.
//!
//! And, in a second lab at 1 Gbit/s (2 spines, 2 leaves, 2 hosts each, the default
//! buffer), a 4-host ring allreduce of 4 MiB and of 32 MiB: the transport `mltctl
//! launch` started (kernel UDP, the plan's queueing and thresholds, its own pacing)
//! beside gloo (PyTorch, TCP, the default queue) on the same hosts, as a share of the
//! line rate's optimum; and, per threshold profile and queue, the share of the
//! transport's ECN-capable and Not-ECT packets the switches lost in its 4 MiB ring (`lab
//! status --json`, every port of the profile's switches) beside the plan's prediction,
//! checked with the oracle's tolerance (`tests/thresholds.rs`: a loss above 1.5 times
//! the ECT prediction, or 3 times the Not-ECT one, and 1e-4 above it, is a prediction
//! that was optimistic).
//! Needs root, sshd, python3-torch and endhost built (`cargo build --release -p
//! endhost`: bootstrap uploads it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mltctl_lab::qos::{PortQos, SwitchQos};
use serde_json::Value;

use mltctl_lab::arrivals::{self, Losses, Offered};

const RATE_MBPS: u64 = 100;
const SECONDS: f64 = 2.5;
/// The bulk flow: 1.5 × the port rate from two senders, half of it ECN-capable.
const BULK_MBPS: u64 = RATE_MBPS * 3 / 2;
const SENDERS: [&str; 2] = ["h1", "h2"];
const RECEIVER: &str = "h3";
const PORT: &str = "9000";
/// Hosts of the labs (two per leaf), and the allreduces they run.
const HOSTS: usize = 4;
/// One gloo rank: the script `endhost bench allreduce` runs too.
const GLOO_SCRIPT: &str = "endhost/src/testbed/bench/gloo_allreduce.py";
/// The rings' lab: its ports' rate, and each ring's bytes and iterations.
const RING_RATE_MBPS: u64 = 1000;
const RINGS: [(u64, usize); 2] = [(4 << 20, 12), (32 << 20, 6)];
/// The queueing lab's buffer per switch: the least (in steps of 128 KiB) the plan's
/// thresholds fit in under the transport's bursts (512 KiB is refused, exit 3), about
/// 52 ms at the lab's rate.
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

/// A lab the bench brought up, by its name and directory; down when dropped.
struct Lab {
    name: &'static str,
    dir: PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(mltctl())
            .args(["lab", "down", "--dir"])
            .arg(&self.dir)
            .output();
    }
}

/// Adds each count of `more` (a JSON object of numbers) to `into`'s.
fn add_counts(into: &mut Value, more: &Value) {
    for (key, n) in more.as_object().expect("counts").iter() {
        let sum = into[key].as_f64().unwrap_or(0.0) + n.as_f64().unwrap_or(0.0);
        into[key] = sum.into();
    }
}

impl Lab {
    /// `lab up` of 2 spines and 2 leaves with 2 hosts each, ports at `rate_mbps`, in
    /// `scratch`; `more`: further `lab up` arguments.
    fn up(name: &'static str, scratch: &Path, rate_mbps: u64, more: &[&str]) -> Lab {
        let dir = scratch.join(name);
        checked(
            Command::new(mltctl())
                .args(["lab", "up", "--name", name, "--hosts-per-leaf", "2"])
                .args(["--rate", &format!("{rate_mbps}M")])
                .args(more)
                .arg("--dir")
                .arg(&dir)
                .output()
                .unwrap(),
            "lab up",
        );
        Lab { name, dir }
    }

    fn mltctl(&self, args: &[&str]) -> Output {
        let out = Command::new(mltctl())
            .args(args)
            .env("MLTCTL_INVENTORY", self.dir.join("inventory.yaml"))
            .env("MLTCTL_KNOWN_HOSTS", self.dir.join("known_hosts"))
            .env("MLTCTL_REMOTE_DIR", self.dir.join("remote"))
            .output()
            .unwrap();
        checked(out, &args.join(" "))
    }

    /// `ip netns exec` into `host`'s namespace.
    fn on(&self, host: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &format!("{}-{host}", self.name)]);
        command
    }

    /// benches/lab/recv.py on the receiver, listening a little longer than `seconds` of
    /// traffic and started before it.
    fn receiver(&self, seconds: f64) -> std::process::Child {
        let receiver = self
            .on(RECEIVER)
            .arg("python3")
            .arg(script("recv.py"))
            .args([PORT, &(seconds + 1.5).to_string()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        receiver
    }

    /// Runs `script` with `args` on every sender at once (`per_sender` adds the
    /// sender's own arguments), then the receiver's count: (what was sent, in all,
    /// and what arrived).
    fn send_from_senders(
        &self,
        seconds: f64,
        script_name: &str,
        args: &[String],
        per_sender: impl Fn(usize) -> Vec<String>,
    ) -> (Value, Value) {
        let receiver = self.receiver(seconds);
        let senders: Vec<_> = (SENDERS.iter().enumerate())
            .map(|(i, host)| {
                self.on(host)
                    .arg("python3")
                    .arg(script(script_name))
                    .args(args)
                    .args(per_sender(i))
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut sent = serde_json::json!({});
        for sender in senders {
            let out = checked(sender.wait_with_output().unwrap(), script_name);
            add_counts(&mut sent, &serde_json::from_slice(&out.stdout).unwrap());
        }
        let received = checked(receiver.wait_with_output().unwrap(), "recv.py");
        (sent, serde_json::from_slice(&received.stdout).unwrap())
    }

    /// One run of the traffic to `dst`: (what was sent, what arrived).
    fn traffic(&self, dst: &str, bulk_dscp: u8, probe_dscp: u8) -> (Value, Value) {
        let args = [
            dst.to_string(),
            PORT.to_string(),
            SECONDS.to_string(),
            (BULK_MBPS as f64 / SENDERS.len() as f64).to_string(),
            bulk_dscp.to_string(),
            probe_dscp.to_string(),
        ];
        self.send_from_senders(SECONDS, "send.py", &args, |_| Vec::new())
    }

    /// Pins every class's thresholds (S, L) and applies them.
    fn pin_thresholds(&self, classes: usize) {
        let inventory = self.dir.join("inventory.yaml");
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

    /// The model's traffic to `dst`, half from each sender (its own Poisson times):
    /// (sent, received) per "dscp/ecn".
    fn model_traffic(&self, dst: &str, traffic: &Offered) -> (Value, Value) {
        let classes: Vec<String> = traffic
            .classes
            .iter()
            .map(|(dscp, share)| format!("{dscp}:{share}"))
            .collect();
        let args = [
            dst.to_string(),
            PORT.to_string(),
            MODEL_SECONDS.to_string(),
            (traffic.rate_bps / 1_000_000).to_string(),
            (traffic.load / SENDERS.len() as f64).to_string(),
            traffic.theta.to_string(),
            traffic.frame_bytes.to_string(),
            classes.join(","),
        ];
        let (sent, received) = self.send_from_senders(MODEL_SECONDS, "poisson.py", &args, |i| {
            vec![(18 + i).to_string()]
        });
        (sent, received["dscp"].clone())
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
            &self.dir.to_string_lossy(),
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

    /// Per iteration, the slowest rank's seconds of an allreduce of `bytes` through the
    /// launched transports, and the least fractions any rank had delivered and exact.
    fn endhost_allreduce(&self, bytes: u64, iterations: usize) -> (Vec<f64>, f64, f64) {
        let endhost = mltctl().with_file_name("endhost");
        let clients: Vec<_> = self
            .hosts()
            .iter()
            .map(|host| {
                self.on(host)
                    .arg(&endhost)
                    .args(["allreduce", "--socket"])
                    .arg(self.dir.join("remote").join(format!("{host}.sock")))
                    .args(["--size", &bytes.to_string()])
                    .args(["--iterations", &iterations.to_string(), "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut seconds = vec![0.0f64; iterations];
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

    /// Per iteration, rank 0's seconds of gloo's allreduce of `bytes` between the same
    /// hosts.
    fn gloo_allreduce(&self, master: &str, nic: &str, bytes: u64, iterations: usize) -> Vec<f64> {
        let ranks: Vec<_> = self
            .hosts()
            .iter()
            .enumerate()
            .map(|(rank, host)| {
                self.on(host)
                    // Debian's python3-torch, whatever python3 the PATH has first.
                    .args(["/usr/bin/python3"])
                    .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(GLOO_SCRIPT))
                    .args([rank.to_string(), HOSTS.to_string()])
                    .args([bytes.to_string(), iterations.to_string()])
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

/// A line of the allreduce table (an allreduce of `bytes` on the rings' lab), and its
/// JSON.
fn allreduce_line(
    system: &str,
    bytes: u64,
    mut seconds: Vec<f64>,
    delivered: f64,
    exact: f64,
) -> (String, Value) {
    assert!(!seconds.is_empty(), "{system}: no iteration timed");
    seconds.sort_by(f64::total_cmp);
    let at = |q: f64| seconds[((seconds.len() - 1) as f64 * q).round() as usize];
    let optimum = endhost::testbed::bench::optimum_seconds(HOSTS, bytes, RING_RATE_MBPS);
    let line = format!(
        "| {system:<28} | {:>6} | {:>10.3} | {:>8.3} | {:>10.1}% | {:>9.2}% | {:>8.2}% |",
        format!("{} MiB", bytes >> 20),
        at(0.5),
        at(0.99),
        100.0 * optimum / at(0.5),
        100.0 * delivered,
        100.0 * exact
    );
    let json = serde_json::json!({
        "system": system, "bytes": bytes, "median_s": at(0.5), "p99_s": at(0.99),
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
    let (queueing, queueing_lines) = queueing_lab(scratch.path());
    let (rings, ring_lines) = rings_lab(scratch.path());
    for line in queueing_lines.into_iter().chain(ring_lines) {
        println!("{line}");
    }
    println!(
        "{}",
        serde_json::json!({"bench": "lab", "queueing": queueing, "rings": rings})
    );
}

/// The queueing lab's cases: the overload with and without the plan's queueing, and
/// the model's traffic against the plan's prediction. Its JSON and printed lines.
fn queueing_lab(scratch: &Path) -> (Value, Vec<String>) {
    let vendors = ["--vendors", "eos,onyx,sonic,cumulus"];
    let buffer = format!("{BUFFER_KIB}KiB");
    let more = [vendors[0], vendors[1], "--buffer", &buffer];
    let lab = Lab::up("mltbench", scratch, RATE_MBPS, &more);
    lab.mltctl(&["apply"]);
    lab.mltctl(&["bootstrap"]);
    let dir = lab.dir.to_string_lossy().to_string();
    // The back layers' class (lowest gradient queue) and the front layers' (highest).
    let plan: Value = serde_json::from_slice(&lab.mltctl(&["plan", "--json"]).stdout).unwrap();
    let classes = plan["qos"]["classes"]
        .as_array()
        .expect("the plan lists its gradient classes");
    let dscp = |class: &Value| class["dscp"].as_u64().expect("a class has a DSCP") as u8;
    let front = dscp(classes.first().expect("a gradient class"));
    let back = dscp(classes.last().expect("a gradient class"));
    // The receiver by its path address through spine1: both senders' traffic crosses
    // leaf1's uplink to it.
    let receiver = plan["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == RECEIVER)
        .expect("the receiver is planned");
    let dst = receiver["path_addresses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["spine"] == 0)
        .and_then(|p| p["address"].as_str())
        .expect("a path address through spine1")
        .to_string();
    let mut out = Vec::new();
    let mut cases = Vec::new();
    let mut lines = Vec::new();
    for (case, off) in [("QoS enforced", false), ("QoS not enforced", true)] {
        let state = if off { "off" } else { "on" };
        lab.mltctl(&["lab", "qos", state, "--dir", &dir]);
        std::thread::sleep(std::time::Duration::from_millis(500));
        let (sent, received) = lab.traffic(&dst, back, front);
        let (line, value) = summarise(case, &sent, &received);
        lines.push(line);
        cases.push(value);
    }
    out.push(format!(
        "lab: {} → {RECEIVER} through leaf1's uplink, spine1, leaf2 at {RATE_MBPS} Mbit/s per \
         port; bulk at {} Mbit/s in all (DSCP {back}, half ECT(0), half Not-ECT), a probe \
         every 10 ms from each (DSCP {front})",
        SENDERS.join(" and "),
        BULK_MBPS
    ));
    out.push(
        "| case              | ECT delivered | Not-ECT deliv. | ECT marked | probes in | p50 (ms)  | p99 (ms)  |".into(),
    );
    out.push(
        "| ----------------- | ------------- | -------------- | ---------- | --------- | --------- | --------- |".into(),
    );
    out.extend(lines);

    // The model's case, at its load with small pinned thresholds.
    lab.mltctl(&["lab", "qos", "on", "--dir", &dir]);
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
    let (sent, received) = lab.model_traffic(&dst, &traffic);
    let (model_lines, model_json) = model_table(&plan, &simulated, &sent, &received);
    out.push(String::new());
    out.push(format!(
        "model: {} → {RECEIVER}, Poisson at {} of {RATE_MBPS} Mbit/s in all (half each) in \
         {}-byte frames for {MODEL_SECONDS} s, classes by share, {}% Not-ECT; every class \
         pinned to S = {} KiB, L = {} KiB; loss at {CONGESTED_SWITCH}'s uplink as the plan \
         predicts it, as the same queueing loses it at exact times ({MODEL_ARRIVALS} \
         arrivals), and in the lab",
        SENDERS.join(" and "),
        traffic.load,
        traffic.frame_bytes,
        traffic.theta * 100.0,
        PINNED_MARK_BYTES / 1024,
        PINNED_LIMIT_BYTES / 1024
    ));
    out.push(
        "| queue | DSCP | load  | Not-ECT plan | Not-ECT exact | Not-ECT lab | ECT plan     | ECT exact     | ECT lab     |".into(),
    );
    out.push(
        "| ----- | ---- | ----- | ------------ | ------------- | ----------- | ------------ | ------------- | ----------- |".into(),
    );
    out.extend(model_lines);
    (
        serde_json::json!({"cases": cases, "model": model_json}),
        out,
    )
}

/// The rings' lab at 1 Gbit/s: the launched transport's and gloo's ring allreduces side
/// by side, and the transport's losses per threshold profile and queue against the
/// plan. Its JSON and printed lines.
fn rings_lab(scratch: &Path) -> (Value, Vec<String>) {
    let lab = Lab::up("mltring", scratch, RING_RATE_MBPS, &[]);
    lab.mltctl(&["apply"]);
    lab.mltctl(&["bootstrap"]);
    let plan: Value = serde_json::from_slice(&lab.mltctl(&["plan", "--json"]).stdout).unwrap();
    let master = plan["hosts"][0]["nic"]["ip"]
        .as_str()
        .expect("h1's address");
    let nic = plan["hosts"][0]["nic"]["name"].as_str().expect("h1's NIC");
    let gloo = endhost::testbed::bench::gloo_unavailable();
    if let Some(why) = &gloo {
        eprintln!("{why}: no gloo rows");
    }
    let mut rows = Vec::new();
    let mut losses = None;
    for (bytes, iterations) in RINGS {
        lab.mltctl(&["launch"]);
        // The forwarder writes its counters every half second.
        std::thread::sleep(std::time::Duration::from_secs(1));
        let before = lab.queue_counts();
        let (seconds, delivered, exact) = lab.endhost_allreduce(bytes, iterations);
        std::thread::sleep(std::time::Duration::from_secs(1));
        losses.get_or_insert_with(|| ring_losses(&plan, &before, &lab.queue_counts()));
        lab.mltctl(&["stop"]);
        let system = format!("endhost (p = {})", plan["job"]["loss_bound"]);
        rows.push(allreduce_line(&system, bytes, seconds, delivered, exact));
        if gloo.is_none() {
            let seconds = lab.gloo_allreduce(master, nic, bytes, iterations);
            rows.push(allreduce_line(
                "gloo (torch.distributed)",
                bytes,
                seconds,
                1.0,
                1.0,
            ));
        }
    }
    let (loss_lines, loss_json) = losses.expect("a ring ran");
    let mut out = vec![
        String::new(),
        format!(
            "allreduce: {HOSTS} hosts (two per leaf), ring, {RING_RATE_MBPS} Mbit/s ports, the \
             default buffer, the plan's queueing"
        ),
        "| system                       | size   | median (s) | p99 (s)  | of optimum  | delivered  | exact     |".into(),
        "| ---------------------------- | ------ | ---------- | -------- | ----------- | ---------- | --------- |".into(),
    ];
    out.extend(rows.iter().map(|(line, _)| line.clone()));
    out.push(String::new());
    out.push(
        "the transport's first ring through the switches, per threshold profile and queue: \
         offered, lost in the lab and as the plan predicts (! : optimistic beyond the \
         oracle's tolerance)"
            .into(),
    );
    out.push(
        "| switches       | queue | Not-ECT   | lab       | plan       | ECT       | lab       | plan       |".into(),
    );
    out.push(
        "| -------------- | ----- | --------- | --------- | ---------- | --------- | --------- | ---------- |".into(),
    );
    out.extend(loss_lines);
    let rows: Vec<Value> = rows.into_iter().map(|(_, json)| json).collect();
    (
        serde_json::json!({"allreduce": rows, "ring_losses": loss_json}),
        out,
    )
}
