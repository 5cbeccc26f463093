//! A launched transport on loopback: `endhost serve --detach` per rank, `endhost
//! status --wait`, self-checking allreduces through the socket, `endhost stop`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ENDHOST: &str = env!("CARGO_BIN_EXE_endhost");

fn endhost(args: &[&str]) -> Output {
    Command::new(ENDHOST).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The ranks' files in one scratch directory; stops every transport when dropped.
struct Ranks {
    dir: PathBuf,
    world: u32,
}

impl Ranks {
    fn file(&self, rank: u32, ext: &str) -> String {
        self.dir
            .join(format!("r{rank}.{ext}"))
            .display()
            .to_string()
    }

    /// Every rank's log, for a failure message: why a transport stopped or stalled.
    fn logs(&self) -> String {
        (0..self.world)
            .map(|r| {
                let log = std::fs::read_to_string(self.file(r, "log")).unwrap_or_default();
                format!("--- rank {r} log:\n{log}")
            })
            .collect()
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        for r in 0..self.world {
            let _ = endhost(&["stop", "--pid-file", &self.file(r, "pid"), "--grace", "2"]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn launched_transports_serve_allreduces_and_stop() {
    let world = 3;
    let dir = std::env::temp_dir().join(format!("endhost-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ranks = Ranks { dir, world };
    for (r, config) in common::configs(world, 23_100).into_iter().enumerate() {
        let r = r as u32;
        std::fs::write(
            ranks.file(r, "json"),
            serde_json::to_string(&config).unwrap(),
        )
        .unwrap();
        let out = endhost(&[
            "serve",
            "--config",
            &ranks.file(r, "json"),
            "--socket",
            &ranks.file(r, "sock"),
            "--pid-file",
            &ranks.file(r, "pid"),
            "--log",
            &ranks.file(r, "log"),
            "--connect-timeout",
            "20",
            "--detach",
        ]);
        assert!(out.status.success(), "{}", text(&out));
    }
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
