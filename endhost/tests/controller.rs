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

/// `endhost controller` on a free loopback port, deciding every 20 ms.
fn controller_command(args: &[&str]) -> Command {
    let mut command = Command::new(ENDHOST);
    command
        .args([
            "controller",
            "--listen",
            "127.0.0.1:0",
            "--delta-t-ms",
            "20",
        ])
        .args(args)
        .stdout(Stdio::piped());
    command
}

fn controller(args: &[&str]) -> (Process, String) {
    let mut child = controller_command(args).spawn().expect("endhost runs");
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
    let scratch = mlt_common::files::scratch_dir("endhost-controller-").unwrap();
    let dir = scratch.path();
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
    // Selective reduce formed groups smaller than the job (weighted subset allreduces).
    assert!(subsets > 0);
}

/// Raw connections to the controller at `addr`: what it answers before it closes, and
/// whether it closed within `within`.
fn answer_and_close(mut stream: std::net::TcpStream, within: Duration) -> (String, bool) {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut answer = Vec::new();
    let closed = stream.read_to_end(&mut answer).is_ok();
    (String::from_utf8_lossy(&answer).into_owned(), closed)
}

#[test]
fn connections_that_do_not_say_hello_are_closed() {
    use std::io::Write;
    let (_controller, addr) = controller(&[]);
    let connect = || std::net::TcpStream::connect(&addr).unwrap();
    let mut not_utf8 = connect();
    not_utf8.write_all(b"\xff\xfe{}\n").unwrap();
    let mut early = connect();
    early
        .write_all(b"{\"ready\":{\"compute_seconds\":1,\"bandwidth_bps\":1}}\n")
        .unwrap();
    let silent = connect();
    let started = Instant::now();
    let (answer, closed) = answer_and_close(not_utf8, Duration::from_secs(10));
    assert!(closed, "a non-UTF-8 line left the connection open");
    assert_eq!(
        answer,
        "{\"error\":\"bad message: a line that is not UTF-8\"}\n"
    );
    let (answer, closed) = answer_and_close(early, Duration::from_secs(10));
    assert!(closed);
    assert_eq!(answer, "{\"error\":\"say hello first\"}\n");
    let (answer, closed) = answer_and_close(silent, Duration::from_secs(10));
    assert!(closed, "a silent connection was kept");
    assert_eq!(answer, "{\"error\":\"no hello within 5 s\"}\n");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

/// The controller's peak resident memory, from /proc.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn an_endless_line_is_cut_off_and_memory_stays_bounded() {
    use std::io::Write;
    let (controller, addr) = controller(&[]);
    let mut flood = std::net::TcpStream::connect(&addr).unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..256 {
            if flood.write_all(&chunk).is_err() {
                return true;
            }
        }
        false
    });
    assert!(
        writer.join().unwrap(),
        "the controller took a 256 MiB line without closing the connection"
    );
    let peak = peak_rss_kib(controller.0.id());
    assert!(peak < 64 * 1024, "peak resident memory {peak} KiB");
    // And it still serves workers.
    let p = worker(
        &addr,
        &["--rank", "0", "--rounds", "1", "--compute-ms", "1"],
    );
    let w1 = worker(
        &addr,
        &["--rank", "1", "--rounds", "1", "--compute-ms", "1"],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    for w in [p, w1] {
        let (ok, syncs, err) = finish(w, deadline);
        assert!(ok, "{err}");
        assert_eq!(syncs.len(), 1);
    }
}

#[test]
fn the_controller_keeps_accepting_through_a_full_file_table() {
    use std::os::unix::process::CommandExt;
    let mut command = controller_command(&[]);
    command.stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; the child has not started yet.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 48,
                rlim_max: 48,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = Process(command.spawn().unwrap());
    let first = first_line(child.0.stdout.as_mut().unwrap());
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    // More silent connections than the controller has descriptors for.
    let crowd: Vec<std::net::TcpStream> = (0..80)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    drop(crowd);
    let deadline = Instant::now() + Duration::from_secs(30);
    let workers = [0, 1].map(|r| {
        worker(
            &addr,
            &[
                "--rank",
                &r.to_string(),
                "--rounds",
                "2",
                "--compute-ms",
                "1",
            ],
        )
    });
    for w in workers {
        let (ok, syncs, err) = finish(w, deadline);
        assert!(ok, "a worker could not join after EMFILE: {err}");
        assert_eq!(syncs.len(), 2);
    }
    let _ = child.0.kill();
    let mut log = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("cannot accept a connection"), "{log}");
}

#[test]
fn only_workers_with_the_token_join() {
    let scratch = mlt_common::files::scratch_dir("endhost-token-").unwrap();
    let dir = scratch.path();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "s3cr3t-shared-token\n").unwrap();
    let token = token_file.to_str().unwrap();

    // Off loopback, a token is required: the controller refuses to start.
    let mut open = Process(
        Command::new(ENDHOST)
            .args(["controller", "--listen", "0.0.0.0:0"])
            .env_remove("MLT_CONTROLLER_TOKEN")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = open.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "it listens on 0.0.0.0 without a token"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    open.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("without a token"), "{stderr}");

    let (_controller, addr) = controller(&["--token-file", token]);
    let stranger = worker(&addr, &["--rank", "0", "--rounds", "1"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let (ok, _, err) = finish(stranger, deadline);
    assert!(!ok);
    assert!(err.contains("wrong or missing token"), "{err}");
    let members = [0, 1].map(|r| {
        worker(
            &addr,
            &[
                "--rank",
                &r.to_string(),
                "--rounds",
                "1",
                "--token-file",
                token,
            ],
        )
    });
    for w in members {
        let (ok, syncs, err) = finish(w, deadline);
        assert!(ok, "{err}");
        assert_eq!(syncs.len(), 1);
    }
}
