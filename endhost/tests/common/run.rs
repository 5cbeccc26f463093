//! Reading what `endhost run` printed.

use std::process::Output;

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
