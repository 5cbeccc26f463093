//! `endhost bench allreduce`: the transport and, side by side, gloo (PyTorch's
//! torch.distributed) on the same namespace fabric, against the link-rate optimum
//! 2(n−1)/n · S/B of an allreduce of S bytes over n hosts with links of rate B.

pub mod datapath;
pub mod train;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::testbed::netns::{Fabric, FabricSpec};
use crate::testbed::{PYTHON, isolated_python};
use endhost_core::config::{
    ClassTag, Collective, Datapath, Importance, JobConfig, LocalConfig, PeerConfig, Ports,
    RateControl, Tagging, Timeouts, TransportConfig,
};

/// Rate-control thresholds for namespace fabrics. MLT's defaults (12.5 and 125 µs)
/// fit a 24 µs-RTT datacenter; veths on a shared CPU see RTTs of a millisecond.
pub const T_LOW_US: f64 = 500.0;
pub const T_HIGH_US: f64 = 5_000.0;

#[derive(Debug, Clone)]
pub struct BenchSpec {
    pub fabric: FabricSpec,
    pub size_bytes: u64,
    pub iterations: u32,
    pub collective: Collective,
    pub loss_bound: f64,
    pub rate_control: RateControl,
    pub phase_ms: u32,
    pub gloo: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemResult {
    pub system: String,
    pub iterations: usize,
    pub median_s: f64,
    pub p99_s: f64,
    pub min_s: f64,
    /// Optimum time over the median time.
    pub of_optimum: f64,
    /// The smallest fraction delivered in any iteration (1 for gloo).
    pub delivered_min: f64,
    /// Every iteration's time, in the order they ran.
    pub seconds: Vec<f64>,
    /// Where the time went (the transport's own account, rank 0's median iteration).
    pub split: Option<TimeSplit>,
}

/// Where an iteration's time went on rank 0's link, as fractions of the iteration
/// (the transport's [`endhost_core::proto::LinkTime`]), and what the busy time
/// carried.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct TimeSplit {
    /// Sending (the NIC still sending what it was handed included), or waiting for the
    /// line rate's next tokens.
    pub busy: f64,
    /// Data held back by every destination's rate control.
    pub rate_limited: f64,
    /// Nothing to send: the rendezvous (READY), STOP and probe round trips, waiting
    /// for a peer's data for the next step.
    pub idle: f64,
    /// Of the busy time, line time lost because the datapath thread polled later than
    /// the pacer's burst allows (a late timer, or no CPU free for it).
    pub late: f64,
    /// The optimum over the busy time: the share of the link's busy time that was
    /// payload; the wire's ceiling (headers) is [`wire_ceiling`].
    pub payload_of_busy: f64,
    /// Packets sent again, of all sent.
    pub retransmitted: f64,
}

/// The share of a full data frame (Ethernet, IPv4, UDP, our header) that is payload at
/// MTU `mtu`: what the transport can reach of the link-rate optimum.
pub fn wire_ceiling(mtu: usize) -> f64 {
    let payload = (mtu - 28 - endhost_core::wire::HEADER_LEN) / 4 * 4;
    payload as f64 / (mtu + 14) as f64
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub hosts: usize,
    pub size_bytes: u64,
    pub rate_mbit: u64,
    pub loss_percent: f64,
    pub switch_buffer_ms: u32,
    /// The hosts' NIC queue, ms; 0: hosts not shaped.
    pub host_buffer_ms: u32,
    pub collective: Collective,
    pub loss_bound: f64,
    pub optimum_s: f64,
    pub results: Vec<SystemResult>,
    /// Why a system did not run, if one did not.
    pub skipped: Vec<String>,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "allreduce of {} bytes over {} hosts, links {} Mbit/s, switch buffer {} ms, {}, loss {}%, {:?}, p = {}: optimum {:.3} s",
            self.size_bytes,
            self.hosts,
            self.rate_mbit,
            self.switch_buffer_ms,
            match self.host_buffer_ms {
                0 => "hosts not shaped".to_string(),
                ms => format!("host NICs shaped ({ms} ms queue)"),
            },
            self.loss_percent,
            self.collective,
            self.loss_bound,
            self.optimum_s
        )?;
        writeln!(
            f,
            "{:<26} {:>10} {:>10} {:>12} {:>10}",
            "system", "median s", "p99 s", "of optimum", "delivered"
        )?;
        for r in &self.results {
            writeln!(
                f,
                "{:<26} {:>10.3} {:>10.3} {:>11.1}% {:>9.2}%",
                r.system,
                r.median_s,
                r.p99_s,
                r.of_optimum * 100.0,
                r.delivered_min * 100.0
            )?;
        }
        for r in &self.results {
            if let Some(s) = &r.split {
                writeln!(
                    f,
                    "  {} time (rank 0, median iteration): link busy {:.1}% (of it lost to \
                     polling late, the thread waiting for a CPU or its timer, {:.1}%), held \
                     by rate control {:.1}%, idle {:.1}% \
                     (rendezvous, STOP and probe round trips, waiting for a step's data); \
                     payload {:.1}% of the busy time (wire ceiling {:.1}%); {:.2}% of \
                     packets resent",
                    r.system,
                    s.busy * 100.0,
                    s.late * 100.0,
                    s.rate_limited * 100.0,
                    s.idle * 100.0,
                    s.payload_of_busy * 100.0,
                    wire_ceiling(1500) * 100.0,
                    s.retransmitted * 100.0
                )?;
            }
        }
        for why in &self.skipped {
            writeln!(f, "skipped: {why}")?;
        }
        Ok(())
    }
}

/// The link-rate optimum of an allreduce: every host sends and receives 2(n−1)/n · S.
pub fn optimum_seconds(hosts: usize, size_bytes: u64, rate_mbit: u64) -> f64 {
    let n = hosts as f64;
    2.0 * (n - 1.0) / n * size_bytes as f64 * 8.0 / (rate_mbit as f64 * 1e6)
}

/// One host's configuration on the fabric.
pub fn host_config(spec: &BenchSpec, rank: usize) -> TransportConfig {
    let hosts = spec.fabric.hosts;
    let job = JobConfig {
        job_id: 1,
        world_size: hosts as u32,
        loss_bound: spec.loss_bound,
        collective: spec.collective,
        tagging: Tagging {
            control_dscp: 46,
            layers: 1,
            classes: vec![ClassTag {
                class: 0,
                dscp: 32,
                queue: 6,
                first_layer: 0,
                last_layer: 0,
            }],
            importance: Importance::default(),
        },
        rate_control: spec.rate_control,
        timeouts: Timeouts {
            phase_ms: spec.phase_ms,
            early_exit: false,
        },
        ports: Ports::default(),
        datapath: Datapath::default(),
        mtu: 1500,
        local_ranks: 1,
    };
    let ip = |r: usize| Fabric::ip(r);
    TransportConfig {
        job,
        rank: rank as u32,
        local: LocalConfig {
            name: format!("h{rank}"),
            nic: "eth0".into(),
            pci: "0000:00:00.0".parse().expect("a valid PCI address"),
            mac: "02:00:00:00:00:01".parse().expect("a valid MAC"),
            ip: ip(rank),
            prefix_len: 24,
            line_rate_mbps: spec.fabric.rate_mbit,
            path_addresses: vec![ip(rank)],
            cores: Vec::new(),
        },
        peers: (0..hosts)
            .filter(|&p| p != rank)
            .map(|p| PeerConfig {
                rank: p as u32,
                name: format!("h{p}"),
                ip: ip(p),
                next_hop_mac: "02:00:00:00:00:02".parse().expect("a valid MAC"),
                paths: vec![ip(p)],
            })
            .collect(),
        dpdk: Default::default(),
        key_file: None,
    }
}

/// Waits for every child, killing them all at `deadline`; returns rank 0's output.
pub(crate) fn collect(children: Vec<Child>, deadline: Instant) -> Result<String, String> {
    let mut outputs = Vec::new();
    for (rank, mut child) in children.into_iter().enumerate() {
        let stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        outputs.push((rank, child, reader));
    }
    let mut first = String::new();
    let mut failure = None;
    for (rank, mut child, reader) in outputs {
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let text = reader.join().unwrap_or_default();
        match status {
            Some(s) if s.success() => {}
            Some(s) => failure = failure.or(Some(format!("rank {rank} exited with {s}"))),
            None => failure = failure.or(Some(format!("rank {rank} did not finish in time"))),
        }
        if rank == 0 {
            first = text;
        }
    }
    match failure {
        Some(why) => Err(why),
        None => Ok(first),
    }
}

/// Per-iteration times from JSON lines `{"seconds": …, "delivered": …}`.
pub(crate) fn times(output: &str) -> (Vec<f64>, f64) {
    let mut times = Vec::new();
    let mut delivered = 1.0f64;
    for line in output.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(s) = value.get("seconds").and_then(serde_json::Value::as_f64) {
            times.push(s);
            if let Some(d) = value.get("delivered").and_then(serde_json::Value::as_f64) {
                delivered = delivered.min(d);
            }
        }
    }
    (times, delivered)
}

/// Rank 0's account of each iteration (`endhost run --json`): the median iteration's
/// split, if the lines carry one.
pub(crate) fn split(output: &str, optimum: f64) -> Option<TimeSplit> {
    let mut splits: Vec<(f64, TimeSplit)> = output
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| {
            let seconds = v.get("seconds")?.as_f64()?;
            let link = v.get("link")?;
            let part = |k: &str| link.get(k).and_then(serde_json::Value::as_f64);
            let (busy, limited, idle) = (part("busy_s")?, part("rate_limited_s")?, part("idle_s")?);
            let late = part("late_s").unwrap_or(0.0);
            let total = (busy + limited + idle).max(1e-9);
            let sent = v.get("packets_sent")?.as_f64()?.max(1.0);
            let resent = v.get("packets_retransmitted")?.as_f64()?;
            Some((
                seconds,
                TimeSplit {
                    busy: busy / total,
                    rate_limited: limited / total,
                    idle: idle / total,
                    late: late / total,
                    payload_of_busy: optimum / busy.max(1e-9),
                    retransmitted: resent / sent,
                },
            ))
        })
        .collect();
    splits.sort_by(|a, b| a.0.total_cmp(&b.0));
    splits
        .get(splits.len().checked_sub(1)? / 2)
        .map(|(_, s)| *s)
}

fn summarise(system: &str, seconds: Vec<f64>, delivered: f64, optimum: f64) -> SystemResult {
    let mut times = seconds.clone();
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    SystemResult {
        system: system.into(),
        iterations: times.len(),
        median_s: at(0.5),
        p99_s: at(0.99),
        min_s: times[0],
        of_optimum: optimum / at(0.5),
        delivered_min: delivered,
        seconds,
        split: None,
    }
}

/// One gloo rank (`python3 gloo_allreduce.py RANK WORLD BYTES ITERATIONS MASTER IFNAME`).
const GLOO_SCRIPT: &str = include_str!("gloo_allreduce.py");

/// Whether gloo can run here; the reason if not.
pub fn gloo_unavailable() -> Option<String> {
    let ok = Command::new(PYTHON)
        .args([
            "-I",
            "-c",
            "import torch.distributed as d; assert d.is_gloo_available()",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| "gloo baseline: /usr/bin/python3 cannot import torch.distributed with gloo (Debian package python3-torch)".into())
}

/// Runs the benchmark; `endhost` is the binary to start on each host.
pub fn run(spec: &BenchSpec, endhost: &Path, scratch: &Path) -> Result<BenchReport, String> {
    let fabric =
        Fabric::create(&spec.fabric).map_err(|e| format!("cannot build the fabric: {e}"))?;
    measure(&fabric, spec, endhost, scratch)
}

/// The benchmark at each of `sizes` on one fabric, one size after another (the
/// transport, then gloo, at each).
pub fn sweep(
    spec: &BenchSpec,
    sizes: &[u64],
    endhost: &Path,
    scratch: &Path,
) -> Result<Sweep, String> {
    let fabric =
        Fabric::create(&spec.fabric).map_err(|e| format!("cannot build the fabric: {e}"))?;
    let reports = sizes
        .iter()
        .map(|&size_bytes| {
            let at = BenchSpec {
                size_bytes,
                ..spec.clone()
            };
            measure(&fabric, &at, endhost, scratch)
        })
        .collect::<Result<_, _>>()?;
    Ok(Sweep { reports })
}

/// Reports at several sizes, on one fabric.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct Sweep {
    pub reports: Vec<BenchReport>,
}

impl std::fmt::Display for Sweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for report in &self.reports {
            writeln!(f, "{report}")?;
        }
        writeln!(
            f,
            "{:>12} {:>11} {:>14} {:>10} {:>14} {:>11}",
            "bytes", "optimum s", "endhost s", "of opt.", "gloo s", "gloo/ours"
        )?;
        for r in &self.reports {
            let ours = &r.results[0];
            let gloo = r.results.get(1);
            writeln!(
                f,
                "{:>12} {:>11.4} {:>14.4} {:>9.1}% {:>14} {:>11}",
                r.size_bytes,
                r.optimum_s,
                ours.median_s,
                ours.of_optimum * 100.0,
                gloo.map_or("-".into(), |g| format!("{:.4}", g.median_s)),
                gloo.map_or("-".into(), |g| format!(
                    "{:.2}×",
                    g.median_s / ours.median_s
                )),
            )?;
        }
        Ok(())
    }
}

/// One size's measurement on `fabric`.
fn measure(
    fabric: &Fabric,
    spec: &BenchSpec,
    endhost: &Path,
    scratch: &Path,
) -> Result<BenchReport, String> {
    let hosts = spec.fabric.hosts;
    let optimum = optimum_seconds(hosts, spec.size_bytes, spec.fabric.rate_mbit);
    let deadline = || {
        Instant::now()
            + Duration::from_secs_f64(120.0 + optimum * 20.0 * f64::from(spec.iterations))
    };
    let mut report = BenchReport {
        hosts,
        size_bytes: spec.size_bytes,
        rate_mbit: spec.fabric.rate_mbit,
        loss_percent: spec.fabric.loss_percent,
        switch_buffer_ms: spec.fabric.switch_buffer_ms,
        host_buffer_ms: spec.fabric.host_buffer_ms,
        collective: spec.collective,
        loss_bound: spec.loss_bound,
        optimum_s: optimum,
        results: Vec::new(),
        skipped: Vec::new(),
    };
    let mut children = Vec::new();
    for rank in 0..hosts {
        let path: PathBuf = scratch.join(format!("h{rank}.json"));
        let config = serde_json::to_string(&host_config(spec, rank)).expect("a config serializes");
        std::fs::write(&path, config)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let child = fabric
            .command(rank, endhost.to_str().ok_or("a non-UTF-8 binary path")?)
            .args(["run", "--json", "--config"])
            .arg(&path)
            .args(["--iterations", &spec.iterations.to_string()])
            .args(["--size", &spec.size_bytes.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start endhost: {e}"))?;
        children.push(child);
    }
    let output = collect(children, deadline()).map_err(|e| format!("endhost: {e}"))?;
    let (t, delivered) = times(&output);
    if t.is_empty() {
        return Err(format!("endhost printed no timings:\n{output}"));
    }
    let mut ours = summarise("mltctl endhost", t, delivered, optimum);
    ours.split = split(&output, optimum);
    report.results.push(ours);
    if spec.gloo {
        match gloo_unavailable() {
            Some(why) => report.skipped.push(why),
            None => {
                let script = scratch.join("gloo_allreduce.py");
                std::fs::write(&script, GLOO_SCRIPT).map_err(|e| e.to_string())?;
                let master = Fabric::ip(0).to_string();
                let mut children = Vec::new();
                for rank in 0..hosts {
                    let child = fabric
                        .command(rank, PYTHON)
                        .args(isolated_python(&script, None))
                        .args([
                            rank.to_string(),
                            hosts.to_string(),
                            spec.size_bytes.to_string(),
                            spec.iterations.to_string(),
                            master.clone(),
                            "eth0".into(),
                        ])
                        .stdin(Stdio::null())
                        .stdout(Stdio::piped())
                        .spawn()
                        .map_err(|e| format!("cannot start python3: {e}"))?;
                    children.push(child);
                }
                let output = collect(children, deadline()).map_err(|e| format!("gloo: {e}"))?;
                let (t, _) = times(&output);
                if t.is_empty() {
                    return Err(format!("gloo printed no timings:\n{output}"));
                }
                report
                    .results
                    .push(summarise("gloo (torch.distributed)", t, 1.0, optimum));
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_optimum_is_the_ring_over_the_line_rate() {
        // 4 hosts, 64 MiB, 1 Gbit/s: 1.5 · 67108864 · 8 / 1e9 ≈ 0.805 s.
        assert!((optimum_seconds(4, 64 << 20, 1000) - 0.805).abs() < 0.001);
    }
}
