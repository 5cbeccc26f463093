//! `cargo bench --bench plan`: planning a large fabric, end to end and by phase.
//!
//! Generates the 16-spine, 64-leaf, 2,048-host fabric, then in one run and side by side:
//! - runs the real `mltctl` binary (`validate`, `plan`, `plan --json`) several times each,
//!   measuring wall time and the peak resident memory of every run (wait4 rusage);
//! - times the phases in this process: parse + validate, plan, JSON.
//!
//! Prints a table and, last, one JSON line. Optional arguments: `--runs N` (default 9).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mltctl::generate::{FabricSize, fabric_yaml};
use mltctl::inventory;
use mltctl::plan::Plan;
use serde::Serialize;

const GOAL_WALL: Duration = Duration::from_secs(1);
const GOAL_PEAK_MIB: f64 = 200.0;

#[derive(Serialize)]
struct Row {
    what: String,
    runs: usize,
    min_ms: f64,
    median_ms: f64,
    max_ms: f64,
    /// Largest peak RSS over the runs, for whole-command rows.
    peak_rss_mib: Option<f64>,
}

fn main() {
    let runs = runs_from_args();
    let dir = std::env::temp_dir().join(format!("mltctl-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let inventory = dir.join("fabric-2048.yaml");
    let size = FabricSize {
        spines: 16,
        leaves: 64,
        hosts_per_leaf: 32,
        layers: 161,
        params_per_layer: 158_000,
    };
    std::fs::write(&inventory, fabric_yaml(size).expect("generate")).expect("write inventory");

    let binary = Path::new(env!("CARGO_BIN_EXE_mltctl"));
    let inv = inventory.to_str().expect("UTF-8 path");
    let mut rows = vec![
        command_row(binary, &["validate", "-i", inv], runs),
        command_row(binary, &["plan", "-i", inv], runs),
        command_row(binary, &["plan", "-i", inv, "--json"], runs),
    ];
    rows.extend(phase_rows(&inventory, runs));
    std::fs::remove_dir_all(&dir).ok();

    println!(
        "plan benchmark: {} spines, {} leaves, {} hosts; {runs} runs each; goal < {} ms and < {GOAL_PEAK_MIB} MiB",
        size.spines,
        size.leaves,
        size.leaves * size.hosts_per_leaf,
        GOAL_WALL.as_millis()
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>10}",
        "what", "min ms", "median ms", "max ms", "peak MiB"
    );
    for r in &rows {
        let peak = r
            .peak_rss_mib
            .map_or("-".to_string(), |m| format!("{m:.1}"));
        println!(
            "{:<44} {:>9.1} {:>9.1} {:>9.1} {:>10}",
            r.what, r.min_ms, r.median_ms, r.max_ms, peak
        );
    }
    let plan = &rows[1];
    let met = plan.median_ms < GOAL_WALL.as_secs_f64() * 1000.0
        && plan.peak_rss_mib.is_some_and(|m| m < GOAL_PEAK_MIB);
    println!("goal for `mltctl plan` met: {met}");
    println!(
        "{}",
        serde_json::json!({"benchmark": "plan", "hosts": size.leaves * size.hosts_per_leaf, "rows": rows, "goal_met": met})
    );
}

fn runs_from_args() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(9)
}

/// Runs `binary args` `runs` times with stdout discarded.
fn command_row(binary: &Path, args: &[&str], runs: usize) -> Row {
    let mut times = Vec::with_capacity(runs);
    let mut peak_kib = 0i64;
    for _ in 0..runs {
        let start = Instant::now();
        #[expect(
            clippy::zombie_processes,
            reason = "reaped by wait4, which also reports its rusage"
        )]
        let child = Command::new(binary)
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("mltctl starts");
        let (status, max_rss_kib) = wait_with_rusage(child.id() as libc::pid_t);
        times.push(start.elapsed());
        assert_eq!(status, 0, "mltctl {args:?} failed");
        peak_kib = peak_kib.max(max_rss_kib);
    }
    let mut row = row(format!("mltctl {}", args_label(args)), times);
    row.peak_rss_mib = Some(peak_kib as f64 / 1024.0);
    row
}

fn args_label(args: &[&str]) -> String {
    args.iter()
        .map(|a| if a.ends_with(".yaml") { "FABRIC" } else { a })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits for `pid`; returns its exit code and peak resident set in KiB.
fn wait_with_rusage(pid: libc::pid_t) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: rusage is plain old data, fully written by wait4 on success.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet waited for; the pointers are valid.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage.ru_maxrss)
}

/// The phases of `mltctl plan`, timed in this process.
fn phase_rows(inventory: &Path, runs: usize) -> Vec<Row> {
    let (mut load, mut build, mut json) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        let inv = inventory::load(inventory).expect("the generated fabric is valid");
        load.push(start.elapsed());
        let start = Instant::now();
        let plan = Plan::build(&inv);
        build.push(start.elapsed());
        let start = Instant::now();
        let bytes = serde_json::to_vec(&plan).expect("serialize");
        json.push(start.elapsed());
        assert!(!bytes.is_empty());
    }
    vec![
        row("  phase: read + validate inventory".into(), load),
        row("  phase: build plan".into(), build),
        row("  phase: plan to JSON".into(), json),
    ]
}

fn row(what: String, mut times: Vec<Duration>) -> Row {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Row {
        what,
        runs: times.len(),
        min_ms: ms(times[0]),
        median_ms: ms(times[times.len() / 2]),
        max_ms: ms(times[times.len() - 1]),
        peak_rss_mib: None,
    }
}
