//! Starting `endhost run` in a namespace, and reading what it printed.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// Standard output then standard error, for failure messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The JSON lines of a run: iterations, and the counters last.
pub fn lines(out: &Output) -> (Vec<Value>, Value) {
    let values: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let counters = values.last().expect("a counters line")["counters"].clone();
    let iterations = values
        .into_iter()
        .filter(|v| v.get("iteration").is_some())
        .collect();
    (iterations, counters)
}

/// Starts `endhost run --json` with `config` and `args` through `command` (endhost
/// inside a host's namespace), its output captured.
pub fn spawn(mut command: Command, config: &Path, args: &[&str]) -> Child {
    command
        .args(["run", "--json", "--connect-timeout", "20", "--config"])
        .arg(config)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("endhost starts")
}

/// Waits for every child, in order.
pub fn wait_all(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}
