//! Settling a commit an earlier run left for the admin (`apply --confirm manual`):
//! `mltctl confirm` keeps it, `mltctl rollback --to RUN` cancels it. Either way the
//! switch is read first, through the same driver and the run's own session, checkpoint
//! or timer names: a switch that no longer runs what the run committed (its revert
//! timer ran out, or someone changed it) is not confirmed, and a switch already back
//! where it was needs nothing.

use std::path::Path;
use std::time::Instant;

use mlt_common::redact::clean;
use switch_config::push::Device;

use super::journal::Entry;
use super::{DeviceResult, Status, lock_switch, sha256};
use crate::plan::SwitchPlan;
use crate::ssh::{SshOptions, SshSession};

/// What to do with an unconfirmed commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Confirm,
    Cancel,
}

/// The journal's word for a settled commit.
pub fn outcome(decision: Decision, result: &DeviceResult) -> &'static str {
    match (decision, result.status) {
        (Decision::Confirm, Status::Changed) => "confirmed",
        (Decision::Cancel, Status::Changed | Status::Ok) => "reverted",
        (_, Status::Unreachable) => "unreachable",
        _ => "failed",
    }
}

/// Confirms or cancels `entry`'s unconfirmed commit on `switch`.
pub fn settle(
    switch: &SwitchPlan,
    entry: &Entry,
    decision: Decision,
    ssh: &SshOptions,
    lock_dir: &Path,
) -> DeviceResult {
    let started = Instant::now();
    let mut result = DeviceResult::new(switch);
    let outcome = (|| {
        let _lock = lock_switch(switch, lock_dir).map_err(|why| (Status::Failed, why))?;
        let mut session = SshSession::open(&switch.mgmt, ssh)
            .map_err(|e| (Status::Unreachable, e.to_string()))?;
        let mut device = switch_config::driver(&switch.intent, &entry.run);
        let settled = match decision {
            Decision::Confirm => confirm(switch, entry, &mut *device, &mut session, &mut result),
            Decision::Cancel => cancel(switch, entry, &mut *device, &mut session, &mut result),
        };
        result.sent = session.sent().to_vec();
        settled
    })();
    match outcome {
        Ok((status, message)) => {
            result.status = status;
            result.message = Some(message);
        }
        Err((status, message)) => {
            result.status = status;
            result.message = Some(clean(&message));
        }
    }
    result.seconds = started.elapsed().as_secs_f64();
    result
}

type Settled = Result<(Status, String), (Status, String)>;

fn read(
    device: &mut dyn Device,
    t: &mut SshSession,
    result: &mut DeviceResult,
) -> Result<String, (Status, String)> {
    let running = device.get_running(t).map_err(|e| {
        (
            Status::Failed,
            format!("cannot read the running configuration: {e}"),
        )
    })?;
    result.before_sha256 = Some(sha256(&running));
    Ok(running)
}

/// The items in which `running` differs from `kept`.
fn differs(switch: &SwitchPlan, kept: &str, running: &str) -> Result<usize, (Status, String)> {
    switch_config::revert(&switch.intent, kept, running)
        .map(|d| d.changes.len())
        .map_err(|e| (Status::Failed, e.to_string()))
}

fn kept<'a>(copy: &'a Option<String>, what: &str, run: &str) -> Result<&'a str, (Status, String)> {
    copy.as_deref().ok_or_else(|| {
        (
            Status::Failed,
            format!(
                "the journal has no copy of what the switch ran {what} run {run}; nothing was sent"
            ),
        )
    })
}

fn confirm(
    switch: &SwitchPlan,
    entry: &Entry,
    device: &mut dyn Device,
    t: &mut SshSession,
    result: &mut DeviceResult,
) -> Settled {
    let committed = kept(&entry.owned_after, "after", &entry.run)?;
    let running = read(device, t, result)?;
    let left = differs(switch, committed, &running)?;
    if left > 0 {
        return Err((
            Status::Failed,
            format!(
                "the switch no longer runs what run {} committed ({left} item(s) differ: its \
                 revert timer may have run out, or it was changed since); nothing was confirmed",
                entry.run
            ),
        ));
    }
    device
        .confirm(t)
        .map_err(|e| (Status::Failed, format!("confirm failed: {e}")))?;
    result.owned_before = Some(committed.to_string());
    result.owned_after = Some(committed.to_string());
    Ok((
        Status::Changed,
        format!("confirmed the change of run {}: kept and saved", entry.run),
    ))
}

fn cancel(
    switch: &SwitchPlan,
    entry: &Entry,
    device: &mut dyn Device,
    t: &mut SshSession,
    result: &mut DeviceResult,
) -> Settled {
    let earlier = kept(&entry.owned_before, "before", &entry.run)?;
    let running = read(device, t, result)?;
    result.owned_before = switch_config::owned(&switch.intent, &running).ok();
    if differs(switch, earlier, &running)? == 0 {
        result.owned_after = Some(earlier.to_string());
        return Ok((
            Status::Ok,
            format!(
                "already back as before run {} (its revert timer ran out); nothing was sent",
                entry.run
            ),
        ));
    }
    device.resume(earlier);
    device
        .rollback(t)
        .map_err(|e| (Status::Failed, format!("rollback failed: {e}")))?;
    let now = read(device, t, result)?;
    let left = differs(switch, earlier, &now)?;
    if left > 0 {
        return Err((
            Status::Failed,
            format!(
                "rolled back, but the switch does NOT run what it ran before run {} ({left} \
                 item(s) differ); check it by hand",
                entry.run
            ),
        ));
    }
    result.owned_after = Some(earlier.to_string());
    Ok((
        Status::Changed,
        format!("rolled back the unconfirmed change of run {}", entry.run),
    ))
}
