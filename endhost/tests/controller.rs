//! The controller service over real TCP with worker processes: `endhost controller` and
//! several `endhost worker`s, with and without the transport.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const ENDHOST: &str = env!("CARGO_BIN_EXE_endhost");

/// A child process killed when dropped, whatever the test's outcome.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn controller(args: &[&str]) -> (Process, String) {
    let mut child = Command::new(ENDHOST)
        .args([
            "controller",
            "--listen",
            "127.0.0.1:0",
            "--delta-t-ms",
            "20",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("endhost runs");
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    (Process(child), addr)
}

fn worker(addr: &str, args: &[&str]) -> Process {
    Process(
        Command::new(ENDHOST)
            .args([
                "worker",
                "--controller",
                addr,
                "--json",
                "--launch-timeout",
                "20",
            ])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("endhost runs"),
    )
}

/// Waits for the worker to exit; its exit status and the syncs it printed.
fn finish(mut p: Process, deadline: Instant) -> (bool, Vec<serde_json::Value>, String) {
    loop {
        if let Some(status) = p.0.try_wait().unwrap() {
            let mut out = String::new();
            let mut err = String::new();
            p.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            p.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            let syncs = out
                .lines()
                .map(|l| serde_json::from_str(l).expect("JSON lines"))
                .collect();
            return (status.success(), syncs, err);
        }
        assert!(Instant::now() < deadline, "a worker is stuck");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn first_line(stdout: &mut ChildStdout) -> String {
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    line
}

#[test]
fn a_worker_that_disappears_does_not_stall_the_others() {
    for scheme in ["selective-reduce", "partial-reduce", "all-reduce"] {
        let (_controller, addr) = controller(&["--scheme", scheme, "--min-group", "2"]);
        let rounds = 12;
        let workers: Vec<Process> = (0..4)
            .map(|r| {
                let bandwidth = format!("{}gbit", r + 1);
                worker(
                    &addr,
                    &[
                        "--rank",
                        &r.to_string(),
                        "--bandwidth",
                        &bandwidth,
                        "--compute-ms",
                        "20",
                        "--rounds",
                        &rounds.to_string(),
                    ],
                )
            })
            .collect();
        let mut workers = workers.into_iter();
        let survivors: Vec<Process> = workers.by_ref().take(3).collect();
        let mut doomed = workers.next().unwrap();
        // It synchronized once, then dies mid-training.
        let line = first_line(doomed.0.stdout.as_mut().unwrap());
        assert!(line.contains("\"sync\""), "{scheme}: {line}");
        drop(doomed);
        let deadline = Instant::now() + Duration::from_secs(30);
        for (rank, p) in survivors.into_iter().enumerate() {
            let (ok, syncs, err) = finish(p, deadline);
            assert!(ok, "{scheme}: worker {rank} failed: {err}");
            assert_eq!(syncs.len(), rounds, "{scheme}: worker {rank}");
            // Its last syncs were without the dead worker.
            let last = &syncs[rounds - 1]["members"];
            assert!(
                !last.as_array().unwrap().contains(&serde_json::json!(3)),
                "{scheme}"
            );
        }
    }
}

#[test]
fn launched_groups_run_weighted_allreduces_through_the_transport() {
    let dir = std::env::temp_dir().join(format!("endhost-controller-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_controller, addr) = controller(&["--scheme", "selective-reduce", "--min-group", "2"]);
    let rounds = 6;
    let workers: Vec<Process> = common::configs(4, 23_400)
        .into_iter()
        .map(|config| {
            let path = dir.join(format!("h{}.json", config.rank));
            std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
            let bandwidth = format!("{}gbit", 1 + 3 * config.rank);
            worker(
                &addr,
                &[
                    "--config",
                    path.to_str().unwrap(),
                    "--bandwidth",
                    &bandwidth,
                    "--compute-ms",
                    "50",
                    "--rounds",
                    &rounds.to_string(),
                    "--size",
                    "256KiB",
                ],
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut subsets = 0;
    for (rank, p) in workers.into_iter().enumerate() {
        let (ok, syncs, err) = finish(p, deadline);
        assert!(ok, "worker {rank} failed: {err}");
        assert_eq!(syncs.len(), rounds);
        for s in &syncs {
            assert_eq!(s["outcome"], "ok", "worker {rank}: {s}");
            let members = s["members"].as_array().unwrap();
            assert!(members.contains(&serde_json::json!(rank)));
            subsets += usize::from(members.len() < 4);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    // Selective reduce formed groups smaller than the job (weighted subset allreduces).
    assert!(subsets > 0);
}
