//! What one `endhost configure` run found and did (`--json` prints it, `mltctl
//! bootstrap` reads it), and the same as text.

use mlt_common::outcome::Status;
use serde::{Deserialize, Serialize};

use super::state::{Change, Conflict};

/// What one `endhost configure` run found and did; `--json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub host: String,
    pub nic: String,
    pub check: bool,
    /// `ok`, `changed`, or `failed`: the network part stopped before changing or undid
    /// its changes (a DPDK step that fails after the network was configured leaves the
    /// network changes, listed, in place).
    pub status: Status,
    /// Made (check mode: would be made), in order.
    pub changes: Vec<Change>,
    /// Entries others configured that contradict the plan.
    pub conflicts: Vec<Conflict>,
    /// DPDK preparation steps, when the plan has them.
    pub dpdk: Vec<Step>,
    /// Why the kernel's part was not configured: the NIC is DPDK's, with no interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_skipped: Option<String>,
    pub error: Option<String>,
    /// The changes were made and then undone after a failure.
    pub rolled_back: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Ok,
    Changed,
    /// Check mode: this step would change the host.
    WouldChange,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub name: String,
    /// What the step found, did, or would do.
    pub action: String,
    pub status: StepStatus,
    /// Why the machine cannot do it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Step {
    pub fn new(name: &str, action: String, status: StepStatus) -> Step {
        Step {
            name: name.into(),
            action,
            status,
            reason: None,
        }
    }

    pub fn failed(name: &str, action: String, reason: impl Into<String>) -> Step {
        Step {
            reason: Some(reason.into()),
            ..Step::new(name, action, StepStatus::Failed)
        }
    }
}

/// The report as text: a status line, then (with `diff`) every change, then conflicts,
/// DPDK steps and the error.
pub fn render(report: &Report, diff: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let status = match (report.status, report.check) {
        (Status::Changed, true) => "would change".to_string(),
        (status, _) => status.to_string(),
    };
    let count = match report.changes.len() {
        0 => String::new(),
        1 => " (1 change)".into(),
        n => format!(" ({n} changes)"),
    };
    let _ = writeln!(out, "{} {}: {status}{count}", report.host, report.nic);
    if diff {
        for change in &report.changes {
            let _ = writeln!(out, "  {change}");
        }
    }
    if let Some(why) = &report.network_skipped {
        let _ = writeln!(out, "  network: skipped: {why}");
    }
    for conflict in &report.conflicts {
        let _ = writeln!(out, "  conflict: {conflict}");
    }
    for step in &report.dpdk {
        let status = match step.status {
            StepStatus::Ok => "ok",
            StepStatus::Changed => "changed",
            StepStatus::WouldChange => "would change",
            StepStatus::Failed => "failed",
        };
        let _ = write!(out, "  dpdk {}: {status}: {}", step.name, step.action);
        match &step.reason {
            Some(reason) => {
                let _ = writeln!(out, ": {reason}");
            }
            None => out.push('\n'),
        }
    }
    if let Some(error) = &report.error {
        let _ = writeln!(out, "  error: {error}");
    }
    out
}
