//! `endhost run` as separate processes on hosts in network namespaces behind a bridge
//! "switch" namespace (see `endhost::testbed::netns`): every collective, loss by nftables, a dead
//! and a frozen peer, packets captured on the switch port to check DSCP and ECN, and
//! foreign datagrams. Needs root, iproute2, tc and nft; otherwise every test is
//! reported as skipped (ignored), with the reason on standard error.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

#[path = "../../tests/common/harness.rs"]
mod harness;
#[path = "common/run.rs"]
mod run;
#[path = "common/tagging.rs"]
mod tagging;

use endhost::testbed::bench::{BenchSpec, host_config};
use endhost::testbed::netns::{Fabric, FabricSpec, capture};
use endhost_core::config::{Collective, RateControl, TransportConfig};
use harness::Suite;
use run::{lines, text};
use tagging::Tagging;

fn main() {
    let missing = endhost::testbed::netns::unavailable();
    let tests: &[(&str, fn())] = &[
        (
            "every_collective_is_exact_across_namespaces",
            every_collective,
        ),
        ("loss_from_nftables_is_recovered_or_bounded", loss),
        ("a_killed_peer_fails_the_others_at_once", killed_peer),
        (
            "a_frozen_peer_fails_the_others_within_the_phase_timeout",
            frozen_peer,
        ),
        ("dscp_and_ecn_are_set_on_the_wire", dscp_and_ecn),
        (
            "foreign_datagrams_are_dropped_and_counted",
            foreign_datagrams,
        ),
        (
            "the_bench_runs_python_from_a_fresh_directory_in_isolated_mode",
            bench_scratch,
        ),
    ];
    Suite::new("namespace")
        .tests(tests, missing.as_deref())
        .run()
}

/// Hosts of a fabric and their configuration files.
struct Cluster {
    fabric: Fabric,
    dir: PathBuf,
    configs: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn spec(hosts: usize, loss_percent: f64) -> BenchSpec {
    BenchSpec {
        fabric: FabricSpec {
            hosts,
            rate_mbit: 1000,
            host_buffer_ms: 50,
            switch_buffer_ms: 50,
            loss_percent,
        },
        size_bytes: 0,
        iterations: 0,
        collective: Collective::Ring,
        loss_bound: 0.0,
        // Namespaces on a shared CPU: RTTs of milliseconds (see `endhost bench`).
        rate_control: RateControl {
            t_low_us: 500.0,
            t_high_us: 5_000.0,
            ..RateControl::default()
        },
        phase_ms: 20_000,
        gloo: false,
    }
}

fn cluster(name: &str, spec: &BenchSpec, tweak: impl Fn(&mut TransportConfig)) -> Cluster {
    let fabric = Fabric::create(&spec.fabric).expect("the fabric is built");
    // Removed by Drop.
    let dir = mlt_common::files::scratch_dir(&format!("endhost-netns-{name}-"))
        .unwrap()
        .keep();
    let configs = (0..spec.fabric.hosts)
        .map(|rank| {
            let mut config = host_config(spec, rank);
            tweak(&mut config);
            let path = dir.join(format!("h{rank}.json"));
            std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
            path
        })
        .collect();
    Cluster {
        fabric,
        dir,
        configs,
    }
}

impl Cluster {
    fn spawn(&self, rank: usize, args: &[&str]) -> Child {
        let endhost = self.fabric.command(rank, env!("CARGO_BIN_EXE_endhost"));
        run::spawn(endhost, &self.configs[rank], args)
    }

    fn run_all(&self, args: &[&str]) -> Vec<Output> {
        run::wait_all(
            (0..self.configs.len())
                .map(|r| self.spawn(r, args))
                .collect(),
        )
    }
}

fn every_collective() {
    let c = cluster("collectives", &spec(4, 0.0), |_| {});
    for collective in ["ring", "transpose", "ps"] {
        for (rank, out) in c
            .run_all(&[
                "--collective",
                collective,
                "--size",
                "4MiB",
                "--iterations",
                "2",
            ])
            .iter()
            .enumerate()
        {
            assert!(
                out.status.success(),
                "{collective} rank {rank}: {}",
                text(out)
            );
            let (iterations, counters) = lines(out);
            assert_eq!(iterations.len(), 2);
            for i in &iterations {
                assert_eq!(i["exact"], 1.0, "{collective} rank {rank}: {i}");
                assert_eq!(i["delivered"], 1.0);
            }
            assert_eq!(counters["dropped"]["malformed"], 0);
            // Packets are ECN-capable when their mean |g| is above the tensor's median
            // of packet means (importance quantile 0.5): half, within 5 points.
            let classes = counters["classes"].as_array().expect("class counters");
            let count =
                |field: &str| -> f64 { classes.iter().map(|c| c[field].as_f64().unwrap()).sum() };
            let marked = count("important_sent") / count("packets_sent");
            assert!(
                (0.45..=0.55).contains(&marked),
                "{collective} rank {rank}: {marked} of packets marked important: {counters}"
            );
            eprintln!("{collective} rank {rank}: {marked:.3} of packets marked important");
        }
    }
}

fn loss() {
    let c = cluster("loss", &spec(4, 3.0), |_| {});
    // p = 0: every loss is retransmitted; the results are exact.
    let mut retransmitted = 0;
    for (rank, out) in c
        .run_all(&[
            "--collective",
            "ring",
            "--size",
            "4MiB",
            "--iterations",
            "2",
        ])
        .iter()
        .enumerate()
    {
        assert!(out.status.success(), "rank {rank}: {}", text(out));
        let (iterations, counters) = lines(out);
        assert!(
            iterations.iter().all(|i| i["exact"] == 1.0),
            "rank {rank}: {iterations:?} {counters}"
        );
        retransmitted += counters["peers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["packets_retransmitted"].as_u64().unwrap())
            .sum::<u64>();
    }
    assert!(retransmitted > 0, "3% loss caused no retransmission");
    // p = 0.01: at most 1% of each rank's result is not exact (each message may lose
    // a share of that), for every collective; the transport's own count of exact
    // values is the one the check finds.
    for collective in ["ring", "transpose", "ps"] {
        for (rank, out) in c
            .run_all(&[
                "--collective",
                collective,
                "--size",
                "4MiB",
                "--iterations",
                "2",
                "--loss-bound",
                "0.01",
            ])
            .iter()
            .enumerate()
        {
            assert!(out.status.success(), "rank {rank}: {}", text(out));
            for i in lines(out).0 {
                let exact = i["exact"].as_f64().unwrap();
                assert!(exact >= 0.99, "{collective} rank {rank}: {i}");
                assert_eq!(
                    i["reported_exact"], i["exact"],
                    "{collective} rank {rank}: {i}"
                );
                assert!(i["delivered"].as_f64().unwrap() >= 0.99, "rank {rank}: {i}");
            }
        }
    }
}

/// Starts every rank on a long run, lets it get going, then does `what` to rank 3;
/// the others must fail, each with a message containing one of `expected`, within
/// `limit` of it.
fn peer_trouble(name: &str, what: &str, extra: &[&str], limit: Duration, expected: &[&str]) {
    let c = cluster(name, &spec(4, 0.0), |_| {});
    let mut args = vec!["--size", "1MiB", "--iterations", "100000"];
    args.extend_from_slice(extra);
    let mut children: Vec<Child> = (0..4).map(|r| c.spawn(r, &args)).collect();
    std::thread::sleep(Duration::from_secs(3));
    for (rank, child) in children.iter_mut().enumerate() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "rank {rank} stopped early"
        );
    }
    let pid = children[3].id().to_string();
    Command::new("kill")
        .args([what, &pid])
        .status()
        .expect("kill runs");
    let hit = Instant::now();
    for (rank, child) in children.iter_mut().enumerate().take(3) {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                hit.elapsed() < limit,
                "rank {rank} still running after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(!status.success(), "rank {rank}");
        assert!(
            expected.iter().any(|e| stderr.contains(e)),
            "rank {rank}: {stderr}"
        );
    }
    let _ = children[3].kill();
    let _ = children[3].wait();
}

fn killed_peer() {
    peer_trouble(
        "killed",
        "-KILL",
        &[],
        Duration::from_secs(5),
        &["rank 3 is gone", "is gone"],
    );
}

fn frozen_peer() {
    // A frozen process keeps its connections open: only the timeout can tell.
    peer_trouble(
        "frozen",
        "-STOP",
        &["--phase-ms", "2000"],
        Duration::from_secs(8),
        &["no progress for 2000 ms", "is gone"],
    );
}

fn dscp_and_ecn() {
    let c = cluster("dscp", &spec(2, 0.0), tagging::one_class_per_layer);
    let sniffer = capture(
        &c.fabric.switch(),
        &c.fabric.switch_port(0),
        Duration::from_secs(120),
    );
    std::thread::sleep(Duration::from_millis(300));
    // Four iterations: two once left exactly the 500 data packets the check needs more
    // than (when the capture still had a fixed length and a loaded machine outran it).
    for out in c.run_all(&["--size", "2MiB", "--iterations", "4", "--layers", "4"]) {
        assert!(out.status.success(), "{}", text(&out));
    }
    let frames = sniffer.finish().expect("frames are captured");
    let mut tagging = Tagging::default();
    let mut control = 0;
    for frame in &frames {
        if frame.len() < 14 + 20 || frame[12..14] != [0x08, 0x00] {
            continue;
        }
        let ip = &frame[14..];
        let (tos, ihl, protocol) = (ip[1], usize::from(ip[0] & 0x0f) * 4, ip[9]);
        let transport = &ip[ihl..];
        let dst_port = u16::from_be_bytes([transport[2], transport[3]]);
        match (protocol, dst_port) {
            (17, 11000) => tagging.check(tos, &transport[8..]),
            (6, 11100) => {
                control += 1;
                assert_eq!(tos >> 2, 46, "the control channel has the control DSCP");
            }
            _ => {}
        }
    }
    tagging.assert_complete(&format!("in {} frames", frames.len()));
    assert!(control > 0);
}

fn foreign_datagrams() {
    let c = cluster("foreign", &spec(2, 0.0), |_| {});
    let first = c.spawn(0, &["--size", "1MiB", "--iterations", "2"]);
    std::thread::sleep(Duration::from_millis(500));
    // From host 1, before its own endhost starts: datagrams too short for a header,
    // and long ones that are not ours.
    let target = format!("/dev/udp/{}/11000", Fabric::ip(0));
    let script = format!(
        "for i in 1 2 3 4 5; do printf 'ML\\x01' > {target}; printf '%064d' 0 > {target}; done"
    );
    let status = c
        .fabric
        .command(1, "bash")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    let second = c.spawn(1, &["--size", "1MiB", "--iterations", "2"]);
    for (rank, child) in [first, second].into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let (iterations, counters) = lines(&out);
        assert!(iterations.iter().all(|i| i["exact"] == 1.0));
        let dropped = &counters["dropped"];
        let expected = if rank == 0 { 5 } else { 0 };
        assert_eq!(dropped["truncated"], expected, "rank {rank}: {dropped}");
        assert_eq!(dropped["foreign"], expected, "rank {rank}: {dropped}");
    }
}

/// `endhost bench` runs Python as root. A local user who made the directory the bench
/// once used (`$TMPDIR/endhost-bench-<pid>`, here made by the shell whose pid the bench
/// takes over with `exec`) with a `torch.py` in it, and who set PYTHONPATH to another
/// such module, gets neither imported: the bench's scratch directory is a fresh one,
/// and Python runs isolated.
fn bench_scratch() {
    let scratch = mlt_common::files::scratch_dir("endhost-plant-").unwrap();
    let marker = scratch.path().join("imported");
    let planted = format!(
        "open({:?}, 'w').write(__file__)\nraise SystemExit('planted torch imported')\n",
        marker.display().to_string()
    );
    let on_path = scratch.path().join("on-path");
    std::fs::create_dir(&on_path).unwrap();
    std::fs::write(on_path.join("torch.py"), &planted).unwrap();
    let script = "mkdir -p \"$TMPDIR/endhost-bench-$$\" && cp \"$1\" \"$TMPDIR/endhost-bench-$$/torch.py\" \
                  && exec \"$2\" bench allreduce --hosts 2 --size 256KiB --iterations 2 --baseline gloo --json";
    let out = Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(on_path.join("torch.py"))
        .arg(env!("CARGO_BIN_EXE_endhost"))
        .env("TMPDIR", scratch.path())
        .env("PYTHONPATH", &on_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !marker.exists(),
        "a planted torch.py was imported: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["skipped"], serde_json::json!([]), "{report}");
    assert_eq!(
        report["results"].as_array().map(Vec::len),
        Some(2),
        "{report}"
    );
}
