//! A launched transport on loopback: `endhost serve --detach` per rank, `endhost
//! status --wait`, self-checking allreduces through the socket, `endhost stop`.

mod common;
#[path = "common/launched.rs"]
mod launched;

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

fn is_zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2) == Some("Z"))
        .unwrap_or(true)
}
