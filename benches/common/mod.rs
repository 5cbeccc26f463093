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
    /// Median CPU time of the command (and descendants it reaped), where measured.
    pub own_cpu_ms: Option<f64>,
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
    command_row_each(label, binary, runs, |_| {
        args.iter().map(|a| a.to_string()).collect()
    })
}

/// As [`command_row`], with the arguments of run `i` (from 0) given by `args_of(i)`.
pub fn command_row_each(
    label: &str,
    binary: &Path,
    runs: usize,
    mut args_of: impl FnMut(usize) -> Vec<String>,
) -> Row {
    let mut times = Vec::with_capacity(runs);
    let mut peak_kib = 0i64;
    for run in 0..runs {
        let args = args_of(run);
        let start = Instant::now();
        #[expect(
            clippy::zombie_processes,
            reason = "reaped by wait4, which also reports its rusage"
        )]
        let child = Command::new(binary)
            .args(&args)
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
    let (code, usage) = wait_for(pid);
    (code, usage.peak_kib)
}

/// What a finished command cost.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub wall: Duration,
    /// Its CPU time, user and system (wait4 adds descendants it reaped; mltctl has none).
    pub cpu: Duration,
    pub peak_kib: i64,
}

/// Runs `command` to the end, its stdout written to `log`; panics with the log's end
/// unless it succeeds. Returns its wall time, CPU time and peak RSS.
pub fn run_measured(command: &mut Command, log: &Path) -> Usage {
    let out = std::fs::File::create(log).expect("the log file");
    let start = Instant::now();
    #[expect(
        clippy::zombie_processes,
        reason = "reaped by wait4, which also reports its rusage"
    )]
    let child = command.stdout(out).spawn().expect("the command starts");
    let (code, mut usage) = wait_for(child.id() as libc::pid_t);
    usage.wall = start.elapsed();
    if code != 0 {
        // What went wrong, without the lines of what went well.
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let wrong: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("changed ") && !l.starts_with("ok "))
            .take(60)
            .collect();
        panic!("{command:?} exited with {code}:\n{}", wrong.join("\n"));
    }
    usage
}

fn wait_for(pid: libc::pid_t) -> (i32, Usage) {
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
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let usage = Usage {
        wall: Duration::ZERO,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        peak_kib: usage.ru_maxrss,
    };
    (code, usage)
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
        own_cpu_ms: None,
    }
}

/// A row of commands run with [`run_measured`]: wall times, median own CPU, peak RSS.
pub fn usage_row(what: String, usages: &[Usage]) -> Row {
    let mut cpu: Vec<Duration> = usages.iter().map(|u| u.cpu).collect();
    cpu.sort();
    let peak = usages.iter().map(|u| u.peak_kib).max().unwrap_or(0);
    let mut row = row(what, usages.iter().map(|u| u.wall).collect());
    row.peak_rss_mib = Some(peak as f64 / 1024.0);
    row.own_cpu_ms = Some(cpu[cpu.len() / 2].as_secs_f64() * 1000.0);
    row
}

/// The table, then the rows as one JSON line.
pub fn print(title: &str, rows: &[Row], extra: serde_json::Value) {
    println!("{title}");
    println!(
        "{:<48} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "what", "min ms", "median ms", "max ms", "peak MiB", "own CPU ms"
    );
    let shown = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for r in rows {
        println!(
            "{:<48} {:>9.1} {:>9.1} {:>9.1} {:>10} {:>10}",
            r.what,
            r.min_ms,
            r.median_ms,
            r.max_ms,
            shown(r.peak_rss_mib),
            shown(r.own_cpu_ms)
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
