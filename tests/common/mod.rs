//! Helpers shared by the integration tests.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root; tests run mltctl from here so paths in messages are stable.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture(relative: &str) -> PathBuf {
    root().join(relative)
}

/// Runs the mltctl binary built for this test run.
pub fn mltctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mltctl"))
        .args(args)
        .current_dir(root())
        .env_remove("MLTCTL_INVENTORY")
        .output()
        .expect("mltctl runs")
}

/// Runs mltctl as [`mltctl`] does, but gives up (and kills it) after `limit`: `None`
/// when it was still running then.
pub fn mltctl_within(args: &[&str], limit: std::time::Duration) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mltctl"))
        .args(args)
        .current_dir(root())
        .env_remove("MLTCTL_INVENTORY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mltctl runs");
    // Drained while it runs: output past a pipe's buffer must not stall it.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("a child") {
            return Some(Output {
                status,
                stdout: stdout.join().expect("stdout read"),
                stderr: stderr.join().expect("stderr read"),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

pub mod sonic_yang;

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("output is UTF-8")
}

/// The JSON Lines a command printed, parsed.
pub fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `play --json`'s recap: per switch and host, (ok, changed, unreachable, failed); a
/// step skipped or interrupted for a device fails the test.
pub fn recap(out: &Output) -> std::collections::BTreeMap<String, [u64; 4]> {
    let lines = json_lines(out);
    let recap = lines
        .iter()
        .find(|l| l["event"] == "recap")
        .unwrap_or_else(|| panic!("no recap: {}", text(&out.stdout)));
    recap["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let n = |k: &str| d[k].as_u64().unwrap();
            assert_eq!([n("skipped"), n("interrupted")], [0, 0], "{d}");
            (
                d["device"].as_str().unwrap().to_string(),
                [n("ok"), n("changed"), n("unreachable"), n("failed")],
            )
        })
        .collect()
}
