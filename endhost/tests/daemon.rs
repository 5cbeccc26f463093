//! A launched transport on loopback: `endhost serve --detach` per rank, `endhost
//! status --wait`, self-checking allreduces through the socket, `endhost stop`.

mod common;
#[path = "common/launched.rs"]
mod launched;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use launched::{Launched, endhost};

const ENDHOST: &str = env!("CARGO_BIN_EXE_endhost");

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn launched_transports_serve_allreduces_and_stop() {
    let world = 3;
    let ranks = Launched::start("daemon", common::configs(world, 23_100));
    for r in 0..world {
        let out = endhost(&[
            "status",
            "--socket",
            &ranks.file(r, "sock"),
            "--pid-file",
            &ranks.file(r, "pid"),
            "--wait",
            "30",
            "--json",
        ]);
        assert!(out.status.success(), "{}\n{}", text(&out), ranks.logs());
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(status["rank"], r);
        assert_eq!(status["world_size"], world);
        // The same, for a person: the datapath as people write it.
        let out = endhost(&["status", "--socket", &ranks.file(r, "sock")]);
        assert!(out.status.success(), "{}", text(&out));
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(line.contains(&format!("rank {r} of {world}")), "{line}");
        assert!(line.contains(", UDP datapath, "), "{line}");
        // Without --socket-group, the socket is its owner's alone.
        let socket = std::fs::metadata(ranks.file(r, "sock")).unwrap();
        assert_eq!(socket.permissions().mode() & 0o777, 0o600);
        let refused = status_as_nobody(&ranks.file(r, "sock"));
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("Permission denied"),
            "the socket refused user nobody: {}",
            text(&refused)
        );
    }
    let clients: Vec<_> = (0..world)
        .map(|r| {
            Command::new(ENDHOST)
                .args(["allreduce", "--socket", &ranks.file(r, "sock")])
                .args(["--size", "1MiB", "--iterations", "3", "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for client in clients {
        let out = client.wait_with_output().unwrap();
        assert!(out.status.success(), "{}\n{}", text(&out), ranks.logs());
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{}", text(&out));
        for line in lines {
            assert_eq!(line["exact"], 1.0, "{line}");
        }
    }
    probes_arrive_with_their_class_dscp(&ranks);
    for r in 0..world {
        let pid_file = ranks.file(r, "pid");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let out = endhost(&["stop", "--pid-file", &pid_file]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("stopped {}", pid)
        );
        assert!(!Path::new(&format!("/proc/{}", pid.trim())).exists() || is_zombie(pid.trim()));
        assert!(!Path::new(&ranks.file(r, "sock")).exists());
        let again = endhost(&["stop", "--pid-file", &pid_file]);
        assert_eq!(String::from_utf8_lossy(&again.stdout), "not running\n");
    }
}

/// Rank 0 probes class 0; rank 1 counts them by the DSCP they came with, apart from
/// the allreduces' data, and the status says what each transport marks with.
fn probes_arrive_with_their_class_dscp(ranks: &Launched) {
    let probe = |rank: u32, args: &[&str]| {
        let socket = ranks.file(rank, "sock");
        let mut all = vec!["probe", "--socket", &socket, "--json"];
        all.extend_from_slice(args);
        endhost(&all)
    };
    let arrivals_of = |reply: &serde_json::Value, dscp: u64| {
        reply["arrivals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["dscp"] == dscp)
            .cloned()
            .unwrap_or_else(|| panic!("nothing with DSCP {dscp}: {reply}"))
    };
    let before = probe(1, &["--class", "0", "--per-path", "0"]);
    assert!(before.status.success(), "{}", text(&before));
    let before: serde_json::Value = serde_json::from_slice(&before.stdout).unwrap();
    let data = arrivals_of(&before, 32);
    assert!(data["packets"].as_u64().unwrap() > 0, "{before}");
    assert_eq!(data["probes"], 0, "{before}");
    let sent = probe(0, &["--class", "0", "--per-path", "8"]);
    assert!(sent.status.success(), "{}", text(&sent));
    let sent: serde_json::Value = serde_json::from_slice(&sent.stdout).unwrap();
    // Two peers, one path each.
    assert_eq!(
        (sent["dscp"].as_u64(), sent["queued"].as_u64()),
        (Some(32), Some(16))
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let now = probe(1, &["--class", "0", "--per-path", "0"]);
        let now: serde_json::Value = serde_json::from_slice(&now.stdout).unwrap();
        let probes = arrivals_of(&now, 32)["probes"].as_u64().unwrap_or(0);
        if probes == 8 {
            // Loopback marks nothing, and no data came meanwhile.
            assert_eq!(arrivals_of(&now, 32)["probes_ce"], 0, "{now}");
            assert_eq!(arrivals_of(&now, 32)["packets"], data["packets"], "{now}");
            break;
        }
        assert!(probes < 8 && std::time::Instant::now() < deadline, "{now}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let unknown = probe(0, &["--class", "9"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", text(&unknown));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("this transport has no class 9"),
        "{}",
        text(&unknown)
    );
    let out = endhost(&["status", "--socket", &ranks.file(0, "sock"), "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["classes"][0]["dscp"], 32, "{status}");
    assert_eq!(status["control_dscp"], 46, "{status}");
    assert_eq!(status["mtu"], 1500, "{status}");
    assert_eq!(status["path_addresses"], serde_json::json!(["127.0.0.1"]));
}

fn is_zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2) == Some("Z"))
        .unwrap_or(true)
}

/// `endhost status` on `socket` as user nobody, group nogroup (no other groups).
fn status_as_nobody(socket: &str) -> Output {
    Command::new("setpriv")
        .args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            ENDHOST,
        ])
        .args(["status", "--socket", socket])
        .output()
        .unwrap()
}

#[test]
fn a_socket_group_lets_its_members_in_and_an_unknown_group_is_refused_before_joining() {
    let ranks = Launched::start_with(
        "daemon-group",
        common::configs(1, 23_150),
        &["--socket-group", "nogroup"],
    );
    let socket = ranks.file(0, "sock");
    let out = endhost(&["status", "--socket", &socket, "--wait", "30"]);
    assert!(out.status.success(), "{}\n{}", text(&out), ranks.logs());
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(meta.gid(), 65534, "nogroup");
    let out = status_as_nobody(&socket);
    assert!(out.status.success(), "{}", text(&out));

    let config = ranks.file(0, "json");
    let started = std::time::Instant::now();
    let out = endhost(&[
        "serve",
        "--config",
        &config,
        "--socket",
        &format!("{socket}.other"),
        "--socket-group",
        "no-such-group-here",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--socket-group no-such-group-here: no such group"),
        "{}",
        text(&out)
    );
    assert!(
        started.elapsed().as_secs() < 5,
        "refused before waiting for peers"
    );
}

/// `serve --metrics`: curl scrapes each transport after an allreduce, and the
/// Prometheus project's own parser (python3-prometheus-client) reads the exposition.
#[test]
fn a_scrape_of_the_metrics_endpoint_is_valid_exposition_with_the_transports_counters() {
    let world = 2;
    let ranks = Launched::start_with(
        "metrics",
        common::configs(world, 23_170),
        &["--metrics", "127.0.0.1:2318{host}"],
    );
    for r in 0..world {
        let out = endhost(&["status", "--socket", &ranks.file(r, "sock"), "--wait", "30"]);
        assert!(out.status.success(), "{}\n{}", text(&out), ranks.logs());
    }
    let reducers: Vec<_> = (0..world)
        .map(|r| {
            Command::new(ENDHOST)
                .args(["allreduce", "--socket", &ranks.file(r, "sock")])
                .args(["--size", "256KiB", "--iterations", "1"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for reducer in reducers {
        let out = reducer.wait_with_output().unwrap();
        assert!(out.status.success(), "{}\n{}", text(&out), ranks.logs());
    }
    let parse = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
seen = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        seen.setdefault(s.name, []).append([s.labels, s.value])
print(json.dumps(seen))
"#;
    for r in 0..world {
        let url = format!("http://127.0.0.1:{}/metrics", 23_180 + r);
        let scrape = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", &url])
            .output()
            .unwrap();
        assert!(scrape.status.success(), "{}", text(&scrape));
        let mut python = Command::new("/usr/bin/python3")
            .args(["-c", parse])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        python
            .stdin
            .take()
            .unwrap()
            .write_all(&scrape.stdout)
            .unwrap();
        let parsed = python.wait_with_output().unwrap();
        assert!(
            parsed.status.success(),
            "the exposition does not parse: {}\n{}",
            text(&parsed),
            String::from_utf8_lossy(&scrape.stdout)
        );
        let seen: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
        let value = |name: &str, labels: serde_json::Value| -> f64 {
            seen[name]
                .as_array()
                .unwrap_or_else(|| panic!("no {name}: {seen}"))
                .iter()
                .find(|s| {
                    labels
                        .as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| &s[0][k] == v)
                })
                .unwrap_or_else(|| panic!("no {name} {labels}: {seen}"))[1]
                .as_f64()
                .unwrap()
        };
        let rank = r.to_string();
        let peer = (1 - r).to_string();
        let labels = serde_json::json!({"rank": rank, "peer": peer});
        for name in [
            "mlt_peer_packets_sent_total",
            "mlt_peer_bytes_sent_total",
            "mlt_peer_packets_received_total",
        ] {
            assert!(value(name, labels.clone()) > 0.0, "{name}: {seen}");
        }
        assert!(value("mlt_peer_rate_mbps", labels.clone()) > 0.0, "{seen}");
        assert!(value("mlt_peer_srtt_us", labels.clone()) > 0.0, "{seen}");
        let class = serde_json::json!({"rank": rank, "class": "0"});
        assert!(value("mlt_class_packets_sent_total", class) > 0.0, "{seen}");
        let data = serde_json::json!({"rank": rank, "dscp": "32", "kind": "data"});
        assert!(
            value("mlt_arrived_packets_total", data.clone()) > 0.0,
            "{seen}"
        );
        assert_eq!(
            value("mlt_arrived_ce_packets_total", data),
            0.0,
            "loopback marks nothing"
        );
        let exact = serde_json::json!({"rank": rank});
        assert_eq!(value("mlt_result_exact_fraction", exact), 1.0, "{seen}");
        // Anything but /metrics is not found.
        let other = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(url.replace("/metrics", "/"))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&other.stdout), "404");
    }
}
