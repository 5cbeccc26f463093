//! Timing whole commands and in-process steps, and printing the results.

#![allow(dead_code)] // each benchmark uses its own subset

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

#[derive(Serialize)]
pub struct Row {
    pub what: String,
    pub runs: usize,
    pub min_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
    /// Largest peak RSS over the runs, for whole-command rows.
    pub peak_rss_mib: Option<f64>,
}

/// `--runs N` from the command line, or `default`.
pub fn runs_from_args(default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Runs `binary args` `runs` times with stdout discarded; `label` names the row.
pub fn command_row(label: &str, binary: &Path, args: &[&str], runs: usize) -> Row {
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
            .expect("the command starts");
        let (status, max_rss_kib) = wait_with_rusage(child.id() as libc::pid_t);
        times.push(start.elapsed());
        assert_eq!(status, 0, "{label} failed");
        peak_kib = peak_kib.max(max_rss_kib);
    }
    let mut row = row(label.to_string(), times);
    row.peak_rss_mib = Some(peak_kib as f64 / 1024.0);
    row
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

/// Times `step` `runs` times in this process.
pub fn step_row<T>(label: &str, runs: usize, mut step: impl FnMut() -> T) -> Row {
    let times = (0..runs)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(step());
            start.elapsed()
        })
        .collect();
    row(label.to_string(), times)
}

pub fn row(what: String, mut times: Vec<Duration>) -> Row {
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

/// The table, then the rows as one JSON line.
pub fn print(title: &str, rows: &[Row], extra: serde_json::Value) {
    println!("{title}");
    println!(
        "{:<48} {:>9} {:>9} {:>9} {:>10}",
        "what", "min ms", "median ms", "max ms", "peak MiB"
    );
    for r in rows {
        let peak = r
            .peak_rss_mib
            .map_or("-".to_string(), |m| format!("{m:.1}"));
        println!(
            "{:<48} {:>9.1} {:>9.1} {:>9.1} {:>10}",
            r.what, r.min_ms, r.median_ms, r.max_ms, peak
        );
    }
    let mut json = serde_json::json!({ "rows": rows });
    if let (Some(object), serde_json::Value::Object(more)) = (json.as_object_mut(), extra) {
        object.extend(more);
    }
    println!("{json}");
}

/// The 16-spine, 64-leaf, 2,048-host fabric (a ResNet-152-sized job) written to
/// `dir/fabric-2048.yaml`; returns that path.
pub fn large_fabric(dir: &Path) -> std::path::PathBuf {
    let size = mltctl::generate::FabricSize {
        spines: 16,
        leaves: 64,
        hosts_per_leaf: 32,
        layers: 161,
        params_per_layer: 158_000,
    };
    let file = dir.join("fabric-2048.yaml");
    let yaml = mltctl::generate::fabric_yaml(size).expect("generate");
    std::fs::write(&file, yaml).expect("write inventory");
    file
}

/// A fresh scratch directory (unguessable name, 0700), removed when dropped.
pub struct Scratch(pub std::path::PathBuf, mlt_common::files::TempDir);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = mlt_common::files::scratch_dir(&format!("mltctl-bench-{name}-"))
            .expect("a scratch directory");
        Scratch(dir.path().to_path_buf(), dir)
    }
}
