//! What the host commands (bootstrap, launch, stop) share: their arguments, their
//! targets, and their per-host lines and summary.

use mltctl::hosts;
use mltctl::plan::Plan;
use mltctl::select::Selection;
use serde::Serialize;

use super::{Failure, InventoryArg, SshArgs, load, planned};

/// What every command that works on hosts over SSH takes.
#[derive(clap::Args)]
pub struct HostArgs {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Only these hosts: names, globs (h1*), groups (all, hosts, rack:NAME),
    /// comma-separated; &PATTERN narrows, !PATTERN excludes. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Vec<String>,
    /// Hosts handled at once, one SSH session each.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub forks: u16,
    /// Directory on every host for the endhost binary and the host's files.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/lib/mltctl",
        env = "MLTCTL_REMOTE_DIR"
    )]
    pub remote_dir: String,
    /// Print one JSON object per line: {"event":"host"|"summary", ...}; launch adds
    /// {"event":"launched", ...} with what it prints without --json.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ssh: SshArgs,
}

/// The plan of a host command's inventory.
pub fn host_plan(args: &HostArgs) -> Result<Plan, Failure> {
    planned(&load(&args.inventory.inventory)?)
}

/// The hosts a host command works on.
pub fn host_targets(args: &HostArgs, plan: &Plan) -> Result<Vec<usize>, Failure> {
    let selected = Selection::parse(&args.limit)
        .and_then(|s| s.select(plan))
        .map_err(|e| Failure::Usage(e.to_string()))?;
    if selected.hosts.is_empty() {
        return Err(Failure::Usage("--limit selects no host".into()));
    }
    Ok(selected.hosts)
}

/// Prints one host's line as it finishes (JSON Lines with --json), to standard output.
pub fn host_line(json: bool, text: String, value: &impl Serialize) {
    if json {
        println!("{}", event_line("host", value));
    } else {
        print!("{text}");
    }
}

/// One JSON Lines event: `{"event": EVENT}` and `value`'s fields.
pub fn event_line(event: &str, value: &impl Serialize) -> serde_json::Value {
    let mut line = serde_json::json!({ "event": event });
    if let (Some(map), Ok(serde_json::Value::Object(fields))) =
        (line.as_object_mut(), serde_json::to_value(value))
    {
        map.extend(fields);
    }
    line
}

pub fn host_summary(
    json: bool,
    what: &str,
    summary: &mlt_common::outcome::Summary,
    seconds: f64,
) -> Result<(), Failure> {
    if json {
        println!(
            "{}",
            serde_json::json!({"event": "summary", "summary": summary, "seconds": seconds})
        );
    } else {
        print!("{}", hosts::summary_line(what, summary, seconds));
    }
    hosts_outcome(summary)
}

pub fn hosts_outcome(summary: &mlt_common::outcome::Summary) -> Result<(), Failure> {
    if summary.failed > 0 {
        Err(Failure::SwitchesFailed)
    } else if summary.unreachable > 0 {
        Err(Failure::SwitchesUnreachable)
    } else {
        Ok(())
    }
}
