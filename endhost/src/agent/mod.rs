//! The host agent: makes one host's network match its part of the plan (docs/src/design/hosts.md).
//!
//! nmstate's shape: read what the kernel has, compute the difference with the plan,
//! apply only that, read back and verify — and on any failure undo what this run did.
//! Everything the agent adds carries its own protocol number ([`OWNER`]) in the
//! kernel, so a later run can tell its own entries from anyone else's: it removes its
//! entries that the plan no longer has and never changes one it did not create.

pub mod channels;
pub mod dpdk;
pub mod gro;
pub mod netlink;

use std::path::{Path, PathBuf};

use endhost_core::host::{Change, HostNetworkPlan, Report, StepStatus, diff};
use mlt_common::outcome::Status;

/// The kernel protocol number on every address, neighbour and route the agent adds
/// (`ip route show proto 77`). Unassigned in iproute2's `rt_protos`.
pub const OWNER: u8 = 77;

use self::dpdk::Sysfs;
use self::netlink::{NetlinkError, Nic};
use mlt_common::input::{InputError, MAX_FILE_BYTES, read_text};

/// Why a host's network plan file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: InputError,
    },
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Reads and checks the network plan at `path`.
pub fn load_plan(path: &Path) -> Result<HostNetworkPlan, PlanError> {
    let text = read_text(path, MAX_FILE_BYTES).map_err(|source| PlanError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let plan: HostNetworkPlan = serde_json::from_str(&text).map_err(|e| PlanError::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    plan.check().map_err(|message| PlanError::Invalid {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(plan)
}

/// Makes the host's network match `plan` (or, with `check`, reports what that takes).
/// Must run on a thread whose network namespace is the host's, inside a tokio runtime.
pub async fn configure(plan: &HostNetworkPlan, check: bool, sysfs: &Sysfs) -> Report {
    let mut report = Report {
        host: plan.host.clone(),
        nic: plan.nic.clone(),
        check,
        status: Status::Failed,
        changes: Vec::new(),
        conflicts: Vec::new(),
        dpdk: Vec::new(),
        network_skipped: None,
        error: None,
        rolled_back: false,
    };
    // A NIC bound to vfio-pci by an earlier run has no kernel interface left to configure.
    report.network_skipped = plan
        .dpdk
        .as_ref()
        .and_then(|prep| sysfs.owned_by_dpdk(prep));
    if report.network_skipped.is_none()
        && let Err(e) = configure_network(plan, check, &mut report).await
    {
        report.error = Some(e.to_string());
        return report;
    }
    if let Some(queues) = plan.af_xdp_queues {
        report.dpdk.push(channels::step(&plan.nic, queues, check));
    }
    if plan.no_gro {
        report.dpdk.push(gro::step(&plan.nic, check));
    }
    if let Some(prep) = &plan.dpdk {
        report.dpdk.extend(sysfs.prepare(prep, check));
    }
    if let Some(step) = report.dpdk.iter().find(|s| s.status == StepStatus::Failed) {
        report.error = Some(format!(
            "DPDK preparation: {}: {}",
            step.action,
            step.reason.as_deref().unwrap_or("failed")
        ));
        return report;
    }
    let dpdk_changed = report
        .dpdk
        .iter()
        .any(|s| matches!(s.status, StepStatus::Changed | StepStatus::WouldChange));
    report.status = if report.changes.is_empty() && !dpdk_changed {
        Status::Ok
    } else {
        Status::Changed
    };
    report
}

/// Why the network part of a run did not end as planned.
#[derive(Debug, thiserror::Error)]
enum NetworkError {
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    /// Entries someone else configured contradict the plan; nothing was changed.
    #[error("{} configured by someone else {} the plan; nothing was changed",
        if *.0 == 1 { "1 entry".to_string() } else { format!("{} entries", .0) },
        if *.0 == 1 { "contradicts" } else { "contradict" })]
    Conflicts(usize),
    /// A change failed; this run's earlier changes were undone (or not).
    #[error("{source}; {}", undone(*.rolled_back))]
    Apply {
        source: NetlinkError,
        rolled_back: bool,
    },
    /// Applied, but the kernel does not hold the plan when read back.
    #[error("verify after applying: still differs: {left}; {}", undone(*.rolled_back))]
    Verify { left: String, rolled_back: bool },
}

fn undone(rolled_back: bool) -> &'static str {
    if rolled_back {
        "every change of this run was undone"
    } else {
        "undoing this run's changes failed too: the host is partly changed"
    }
}

async fn configure_network(
    plan: &HostNetworkPlan,
    check: bool,
    report: &mut Report,
) -> Result<(), NetworkError> {
    let nic = Nic::open(&plan.nic).await?;
    let observed = nic.observe().await?;
    let changes = match diff(plan, &observed) {
        Ok(changes) => changes,
        Err(conflicts) => {
            let count = conflicts.len();
            report.conflicts = conflicts;
            return Err(NetworkError::Conflicts(count));
        }
    };
    report.changes = changes.clone();
    if check {
        return Ok(());
    }
    for (done, &change) in changes.iter().enumerate() {
        if let Err(source) = nic.apply(change).await {
            report.rolled_back = undo(&nic, &changes[..done]).await;
            return Err(NetworkError::Apply {
                source,
                rolled_back: report.rolled_back,
            });
        }
    }
    let left = match nic.observe().await.map(|now| diff(plan, &now)) {
        Ok(Ok(left)) if left.is_empty() => return Ok(()),
        Ok(Ok(left)) => left
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        Ok(Err(conflicts)) => conflicts
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => e.to_string(),
    };
    report.rolled_back = undo(&nic, &changes).await;
    Err(NetworkError::Verify {
        left,
        rolled_back: report.rolled_back,
    })
}

/// Undoes `applied` in reverse order; true if every step was undone.
async fn undo(nic: &Nic, applied: &[Change]) -> bool {
    let mut all = true;
    for change in applied.iter().rev() {
        all &= nic.apply(change.inverse()).await.is_ok();
    }
    all
}
