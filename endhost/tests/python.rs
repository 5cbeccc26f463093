//! The Python package (endhost/python, `mlt_transport`) against launched transports on
//! loopback: one `endhost serve` per host, one Python process per training rank
//! running a scenario of endhost/python/tests/scenarios.py with Debian's torch.

mod common;
#[path = "common/launched.rs"]
mod launched;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use launched::{Launched, endhost};
use serde_json::Value;

/// Debian's python3-torch is installed for this interpreter.
const PYTHON: &str = "/usr/bin/python3";

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

/// A job's transports, one per host.
struct Job {
    launched: Launched,
    hosts: u32,
}

impl Job {
    /// Starts `hosts` transports (data port `port`, control `port + 1`) serving
    /// `local_ranks` processes each, and waits until they answer.
    fn start(name: &str, hosts: u32, local_ranks: u32, loss_bound: f64, port: u16) -> Job {
        let mut configs = common::configs(hosts, port);
        for config in &mut configs {
            config.job.local_ranks = local_ranks;
            config.job.loss_bound = loss_bound;
        }
        let job = Job {
            launched: Launched::start(&format!("python-{name}"), configs),
            hosts,
        };
        for h in 0..hosts {
            let out = endhost(&[
                "status",
                "--socket",
                &job.file(h, "sock"),
                "--pid-file",
                &job.file(h, "pid"),
                "--wait",
                "30",
            ]);
            assert!(out.status.success(), "{out:?}\n{}", job.logs());
        }
        job
    }

    fn file(&self, host: u32, ext: &str) -> String {
        self.launched.file(host, ext)
    }

    fn logs(&self) -> String {
        self.launched.logs()
    }

    /// Runs `scenario` as `per_host` processes on each of `hosts` (the first hosts of
    /// the job; fewer than all leaves the others' transports unasked) and returns each
    /// rank's JSON line, in rank order.
    fn run(&self, scenario: &str, hosts: u32, per_host: u32, master_port: u16) -> Vec<Value> {
        let world = hosts * per_host;
        let sockets: Vec<String> = (0..self.hosts).map(|h| self.file(h, "sock")).collect();
        let children: Vec<_> = (0..world)
            .map(|rank| {
                Command::new(PYTHON)
                    .arg(package_dir().join("tests/scenarios.py"))
                    .arg(scenario)
                    .env("PYTHONPATH", package_dir())
                    .env("MLT_SOCKET", self.file(rank / per_host, "sock"))
                    // Every host's, for scenarios that play several hosts' processes.
                    .env("MLT_TEST_SOCKETS", sockets.join(","))
                    .env("MLT_TIMEOUT", "60")
                    .env("RANK", rank.to_string())
                    .env("LOCAL_RANK", (rank % per_host).to_string())
                    .env("WORLD_SIZE", world.to_string())
                    .env("MASTER_ADDR", "127.0.0.1")
                    .env("MASTER_PORT", master_port.to_string())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .process_group(0)
                    .spawn()
                    .unwrap()
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(180);
        // Every rank ends (or is killed) before any is judged: a failed assertion
        // leaves no process behind.
        let outputs: Vec<Output> = children.into_iter().map(|c| wait(c, deadline)).collect();
        outputs
            .into_iter()
            .enumerate()
            .map(|(rank, out)| {
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "rank {rank} of {scenario}: {}\n{stdout}\n{}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr),
                    self.logs()
                );
                serde_json::from_str(stdout.lines().last().unwrap_or_default())
                    .unwrap_or_else(|e| panic!("rank {rank}: {e}: {stdout}"))
            })
            .collect()
    }
}

impl Job {
    /// Runs `scenario` under torchrun, one torchrun per host with nothing but the
    /// variables `mltctl env` gives it (`PET_*`, `MLT_SOCKET`), `per_host` processes
    /// each; returns every rank's JSON line, in rank order.
    fn torchrun(&self, scenario: &str, per_host: u32, master_port: u16) -> Vec<Value> {
        let launchers: Vec<_> = (0..self.hosts)
            .map(|host| {
                Command::new(PYTHON)
                    .args(["-m", "torch.distributed.run"])
                    .arg(package_dir().join("tests/scenarios.py"))
                    .arg(scenario)
                    .env("PYTHONPATH", package_dir())
                    .env("MLT_SOCKET", self.file(host, "sock"))
                    .env("MLT_TIMEOUT", "60")
                    .env("PET_NNODES", self.hosts.to_string())
                    .env("PET_NPROC_PER_NODE", per_host.to_string())
                    .env("PET_NODE_RANK", host.to_string())
                    .env("PET_MASTER_ADDR", "127.0.0.1")
                    .env("PET_MASTER_PORT", master_port.to_string())
                    // As `mltctl env` sets them (Debian's torchrun fails on its defaults).
                    .env("PET_REDIRECTS", format!("{per_host}:0"))
                    .env("PET_TEE", format!("{per_host}:0"))
                    .env("OMP_NUM_THREADS", "1")
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .process_group(0)
                    .spawn()
                    .unwrap()
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(180);
        let outputs: Vec<Output> = launchers.into_iter().map(|l| wait(l, deadline)).collect();
        let mut ranks = Vec::new();
        for (host, out) in outputs.into_iter().enumerate() {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "torchrun on host {host}: {}\n{stdout}\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr),
                self.logs()
            );
            for line in stdout.lines().filter(|l| l.starts_with('{')) {
                ranks.push(
                    serde_json::from_str::<Value>(line)
                        .unwrap_or_else(|e| panic!("host {host}: {e}: {stdout}")),
                );
            }
        }
        ranks.sort_by_key(|r| r["rank"].as_u64());
        ranks
    }
}

/// The child's output once it ends, killing it and its process group (a torchrun's
/// workers) at `deadline`. Its pipes are read while it runs: a child blocked on a full
/// pipe would stall its peers' collectives too.
fn wait(child: std::process::Child, deadline: Instant) -> Output {
    let pid = child.id();
    let (done, ended) = std::sync::mpsc::channel();
    let killer = std::thread::spawn(move || {
        if ended
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_err()
        {
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{pid}")])
                .status();
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    killer.join().unwrap();
    out
}

#[test]
fn the_hook_equals_gloo_bit_for_bit_at_loss_bound_zero() {
    let job = Job::start("gloo", 2, 1, 0.0, 23_600);
    for (rank, seen) in job.run("gloo", 2, 1, 29_601).iter().enumerate() {
        // Two steps, a bucket or more each (DDP rebuilds its buckets after the first).
        assert!(
            seen["buckets"].as_u64().unwrap() >= 2,
            "rank {rank}: {seen}"
        );
        assert_eq!(seen["bits_equal"], true, "rank {rank}: {seen}");
        assert_eq!(seen["max_diff"], 0.0, "rank {rank}: {seen}");
        assert_eq!(seen["ranks_equal"], true, "rank {rank}: {seen}");
        // The plan's two layers: the front parameters' buckets carry layer 0, the
        // back ones' layer 1.
        let layers: Vec<u64> = seen["layers"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|bucket| {
                bucket
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p[1].as_u64().unwrap())
            })
            .collect();
        assert!(
            layers.contains(&0) && layers.contains(&1),
            "rank {rank}: {seen}"
        );
    }
    for (rank, seen) in job.run("half", 2, 1, 29_602).iter().enumerate() {
        for dtype in ["torch.float16", "torch.bfloat16"] {
            assert_eq!(seen[dtype]["dtype_kept"], true, "rank {rank}: {seen}");
            assert_eq!(seen[dtype]["bits_equal"], true, "rank {rank}: {seen}");
        }
    }
}

#[test]
fn a_resync_makes_replicas_equal_under_a_loss_bound() {
    let job = Job::start("resync", 2, 1, 0.05, 23_610);
    let seen = job.run("resync", 2, 1, 29_611);
    for (rank, seen) in seen.iter().enumerate() {
        assert_eq!(seen["loss_bound"], 0.05, "rank {rank}: {seen}");
        // The transport's own account of the last bucket: within the bound.
        let exact = seen["exact"].as_f64().unwrap();
        assert!((0.95..=1.0).contains(&exact), "rank {rank}: {seen}");
        let drifts = seen["drifts"].as_array().unwrap();
        // Every third step: after step 1 the ranks moved their parameters by 0.01 and
        // 0.02; the re-sync at step 3 (index 2) corrects half the difference.
        assert!(
            drifts[0].is_null() && drifts[1].is_null(),
            "rank {rank}: {seen}"
        );
        let corrected = drifts[2].as_f64().unwrap();
        assert!((0.004..0.02).contains(&corrected), "rank {rank}: {seen}");
        assert_eq!(seen["replicas_equal"], true, "rank {rank}: {seen}");
    }
}

#[test]
fn two_ranks_on_one_host_share_its_transport_under_torchrun() {
    let job = Job::start("local", 2, 2, 0.0, 23_620);
    let ranks = job.torchrun("gloo", 2, 29_621);
    assert_eq!(ranks.len(), 4, "{ranks:?}");
    for (rank, seen) in ranks.iter().enumerate() {
        assert_eq!(seen["rank"], rank, "{seen}");
        assert_eq!(seen["world_size"], 4, "{seen}");
        // The host sums its two ranks first, so the order of the additions is not
        // gloo's ring: equal to rounding, and every rank holds the same bits.
        assert!(
            seen["max_diff"].as_f64().unwrap() < 1e-6,
            "rank {rank}: {seen}"
        );
        assert_eq!(seen["ranks_equal"], true, "rank {rank}: {seen}");
        assert!(
            seen["buckets"].as_u64().unwrap() >= 2,
            "rank {rank}: {seen}"
        );
    }
}

#[test]
fn the_package_says_what_is_wrong_and_never_hangs() {
    let job = Job::start("errors", 2, 1, 0.0, 23_630);
    // Only host 0's process: host 1's transport is never asked.
    let seen = &job.run("errors", 1, 1, 29_631)[0];
    let said = |key: &str| {
        seen[key]
            .as_str()
            .unwrap_or_else(|| panic!("{key}: {seen}"))
    };
    assert!(said("unset").contains("$MLT_SOCKET is not set"), "{seen}");
    assert!(said("absent").contains("no transport answers on"), "{seen}");
    assert!(said("absent").contains("mltctl launch"), "{seen}");
    assert!(
        said("local_rank").contains("local rank 3 is not one of this host's 1"),
        "{seen}"
    );
    assert!(
        said("world").contains("the process group has 1 ranks"),
        "{seen}"
    );
    assert!(
        said("duplicate").contains("local rank 0 is attached already"),
        "{seen}"
    );
    assert!(
        said("timeout").contains("no reply from the transport"),
        "{seen}"
    );
    let waited = seen["waited"].as_f64().unwrap();
    assert!((1.5..10.0).contains(&waited), "{seen}");
}

#[test]
fn a_local_rank_that_leaves_fails_its_hosts_rounds_at_once_and_a_new_one_rejoins() {
    let job = Job::start("departure", 2, 2, 0.0, 23_640);
    // One process plays both hosts' two local ranks (threads), without torch.distributed.
    let seen = &job.run("departure", 1, 1, 29_641)[0];
    assert_eq!(
        seen["first"],
        serde_json::json!([10.0, 10.0, 10.0, 10.0]),
        "{seen}"
    );
    // Host 0's rank 1 left: host 0's rank 0 is told at once, not after its timeout,
    // and host 0 still takes part (with zeros), so host 1 gets its own sum.
    let error = seen["left_error"]
        .as_str()
        .unwrap_or_else(|| panic!("{seen}"));
    assert!(error.contains("local rank 1's process left"), "{seen}");
    assert!(seen["left_waited"].as_f64().unwrap() < 5.0, "{seen}");
    assert_eq!(seen["others"], serde_json::json!([7.0, 7.0]), "{seen}");
    // A new process as local rank 1 joins the host's next round, in step with host 1.
    assert_eq!(
        seen["rejoined"],
        serde_json::json!([10.0, 10.0, 10.0, 10.0]),
        "{seen}"
    );
}

/// `init_process_group("mlt")`: what one rank saw of the backend, checked. Sums are
/// gloo's bit for bit with two ranks; with more, the transport adds a host's ranks
/// first, so floats agree to rounding and integers exactly.
fn backend_ran(seen: &Value, rank: usize, world: usize) {
    assert_eq!(seen["rank"], rank, "{seen}");
    assert_eq!(seen["world_size"], world, "{seen}");
    assert_eq!(seen["backend"], "mlt", "{seen}");
    for (name, sum) in seen["all_reduce"].as_object().unwrap() {
        if world == 2 || name.starts_with("i64") {
            assert_eq!(sum["bits_equal"], true, "all_reduce {name}: {seen}");
        } else {
            // Half precision rounds at 2^-8 (bfloat16) of the largest value.
            let rel = sum["max_rel"].as_f64().unwrap();
            assert!(rel < 1e-2, "all_reduce {name}: {seen}");
        }
    }
    for (dtype, moved) in seen["moved"].as_object().unwrap() {
        assert_eq!(moved["broadcast"], true, "broadcast {dtype}: {seen}");
        assert_eq!(moved["all_gather"], true, "all_gather {dtype}: {seen}");
    }
    let gathered: Vec<f64> = (0..world).flat_map(|r| [r as f64; 3]).collect();
    assert_eq!(
        seen["all_gather_base"],
        serde_json::json!(gathered),
        "{seen}"
    );
    // Rank r receives Σ over ranks q of (10 q + r).
    let expected = (0..world).map(|q| (10 * q + rank) as f64).sum::<f64>();
    let scattered = serde_json::json!(vec![expected; 4]);
    assert_eq!(seen["reduce_scatter"], scattered, "{seen}");
    assert_eq!(seen["reduce_scatter_tensor"], scattered, "{seen}");
    if rank == 0 {
        let total = (1..=world).sum::<usize>() as f64;
        assert_eq!(
            seen["reduce_at_root"],
            serde_json::json!(vec![total; 2]),
            "{seen}"
        );
    }
    assert!(
        seen["f64"]
            .as_str()
            .unwrap()
            .contains("would round torch.float64"),
        "{seen}"
    );
    assert!(
        seen["all_to_all"]
            .as_str()
            .unwrap()
            .contains("does not offer all_to_all"),
        "{seen}"
    );
    if world == 2 {
        assert_eq!(seen["ddp_equals_gloo"], true, "{seen}");
    } else {
        assert!(seen["ddp_max_diff"].as_f64().unwrap() < 1e-6, "{seen}");
    }
    assert_eq!(seen["hook_shares_the_group"], true, "{seen}");
    assert_eq!(seen["hook_delivered"], 1.0, "{seen}");
}

#[test]
fn the_mlt_backend_runs_every_collective_it_offers_as_gloo_does() {
    let job = Job::start("backend", 2, 1, 0.0, 23_650);
    for (rank, seen) in job.run("backend", 2, 1, 29_651).iter().enumerate() {
        backend_ran(seen, rank, 2);
    }
}

#[test]
fn the_mlt_backend_runs_under_torchrun_with_two_ranks_a_host() {
    let job = Job::start("backend-local", 2, 2, 0.0, 23_660);
    let ranks = job.torchrun("backend", 2, 29_661);
    assert_eq!(ranks.len(), 4, "{ranks:?}");
    for (rank, seen) in ranks.iter().enumerate() {
        backend_ran(seen, rank, 4);
    }
}
