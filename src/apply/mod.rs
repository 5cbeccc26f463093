//! Applying the plan to switches over SSH, the way a careful network engineer would:
//! read what runs, compare, push only the difference with a revert timer, read back
//! and verify, then confirm — or roll back. Each device is handled on its own; one
//! failing never touches another.
//!
//! Per device (nmstate's apply → verify → commit or roll back, over NAPALM-style
//! drivers from [`switch_config::push`]):
//! 1. open one SSH session (host key checked) and read the running configuration;
//! 2. diff it with the plan; no difference: `ok`, nothing else is sent;
//! 3. `--check`: report what would change and stop;
//! 4. load the change as a candidate and ask the switch for its own diff (a switch
//!    that sees nothing to change has ignored the candidate: discard, fail);
//! 5. commit with a revert timer, read the running configuration back and diff again;
//!    anything left over is a failed verify: roll back;
//! 6. confirm — or, with [`Confirm::Manual`], stop there: the admin tests traffic and
//!    runs `mltctl confirm` (or `mltctl rollback`), or lets the switch revert by itself.
//!
//! A rollback run is the same flow towards a configuration the journal kept (the owned
//! part of what a switch ran before some run) instead of the plan.
//!
//! With a rolling run (`--serial`), devices go in batches; a batch with more failed or
//! unreachable devices than `max_fail_percentage` allows stops the run, and the devices
//! after it are `skipped`.
//!
//! A rollback is checked by reading the switch again: the owned parts must match what
//! it ran before. If the connection dropped, one new session is opened for it; if that
//! fails too, a switch with a revert timer undoes the change by itself.
//!
//! The journal gets a `pending` entry the moment a commit is active and a final entry
//! when the device is done, each on disk before the flow goes on. A lock file per
//! switch (beside the journal) keeps two runs from changing one switch at once, and
//! SIGINT/SIGTERM ([`crate::interrupt`]) stop the run at the next safe point.

pub mod journal;
pub mod report;
pub mod settle;

use std::collections::BTreeMap;
use std::fs::{File, TryLockError};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mlt_common::redact::clean;
use serde::Serialize;
use sha2::{Digest, Sha256};
use switch_config::push::{Device, PushError};
use switch_config::{ChangeLine, Counted, SwitchIntent, Vendor};

use self::journal::{Journal, RunInfo};
use crate::parallel::{self, Progress};
use crate::plan::SwitchPlan;
use crate::ssh::{SshOptions, SshSession};
use crate::{allocator, interrupt};
pub use mlt_common::outcome::Status;

/// How a run behaves.
#[derive(Debug)]
pub struct ApplyOptions {
    /// Contact devices and report what would change, changing nothing.
    pub check: bool,
    /// How long an unconfirmed commit lives before the switch reverts it.
    pub confirm_timeout: Duration,
    /// Devices handled at once (one SSH session each).
    pub forks: usize,
    pub ssh: SshOptions,
    /// Names the session, checkpoint and timer of this run on every switch, and says
    /// in the journal what kind of run it is.
    pub run: RunInfo,
    /// Where the per-switch lock files live (created when needed).
    pub lock_dir: PathBuf,
    /// Whether mltctl confirms after the read-back verifies, or leaves it to the admin.
    pub confirm: Confirm,
    /// Ask the switch for its own diff of the change (with `check`: load the change as
    /// a candidate, read the diff, discard it).
    pub switch_diff: bool,
    /// Keep each device's changes, item by item, and its commands for the report
    /// (`--diff`, `--json`). Without, a result keeps how many items differ and the
    /// commands only until they are sent: a spine's change towards hundreds of leaves
    /// is megabytes, and 64 of them run at once.
    pub keep_detail: bool,
    /// Per device, the owned configuration to put back instead of the plan's (a
    /// rollback run); devices not in it get the plan.
    pub restore: BTreeMap<String, String>,
    /// Batches and how many failures stop the run.
    pub rolling: Rolling,
}

/// Who confirms a commit that verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// mltctl, as soon as the read-back verifies.
    Auto,
    /// The admin, with `mltctl confirm`; until then the switch's revert timer runs.
    Manual,
}

/// One batch's size: a number of devices or a share of all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchSize {
    Devices(usize),
    Percent(u8),
}

/// Ansible-style rolling: batch sizes in order (the last repeats; none: one batch of
/// everything) and the share of a batch that may fail before the run stops.
#[derive(Debug, Clone, Default)]
pub struct Rolling {
    pub serial: Vec<BatchSize>,
    pub max_fail_percentage: u8,
}

impl Rolling {
    /// `targets` cut into batches.
    pub fn batches<T: Clone>(&self, targets: &[T]) -> Vec<Vec<T>> {
        if self.serial.is_empty() {
            return vec![targets.to_vec()];
        }
        let mut out = Vec::new();
        let mut rest = targets;
        let mut sizes = self.serial.iter();
        let mut size = self.serial[0];
        while !rest.is_empty() {
            if let Some(next) = sizes.next() {
                size = *next;
            }
            let n = match size {
                BatchSize::Devices(n) => n,
                BatchSize::Percent(p) => (targets.len() * usize::from(p)).div_ceil(100),
            }
            .clamp(1, rest.len());
            out.push(rest[..n].to_vec());
            rest = &rest[n..];
        }
        out
    }

    /// Whether a batch with these results stops the run.
    fn stops_after(&self, batch: &[Outcome]) -> bool {
        let failed = batch
            .iter()
            .filter(|r| matches!(r.status, Status::Failed | Status::Unreachable))
            .count();
        failed * 100 > batch.len() * usize::from(self.max_fail_percentage)
    }
}

/// What happened on one device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceResult {
    pub device: String,
    pub vendor: Vendor,
    pub endpoint: String,
    pub status: Status,
    /// How many items differ from the plan (for `changed`: how many were changed).
    #[serde(skip)]
    pub change_count: usize,
    /// What differs from the plan, item by item; with [`ApplyOptions::keep_detail`].
    pub changes: Vec<ChangeLine>,
    /// The commands (SONiC: the JSON patch) that make the change; once sent, kept only
    /// with [`ApplyOptions::keep_detail`].
    pub commands: String,
    /// The switch's own account of the change (EOS session diff, `nv config diff`,
    /// SONiC's dry run), when it was asked and has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch_diff: Option<String>,
    /// A commit left for the admin to confirm: what happens if nobody does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
    /// Why it failed or was unreachable, and what the switch runs now.
    pub message: Option<String>,
    /// SHA-256 of the running configuration before and after.
    pub before_sha256: Option<String>,
    pub after_sha256: Option<String>,
    /// The owned part of the running configuration before and after, for the journal.
    #[serde(skip)]
    pub owned_before: Option<String>,
    #[serde(skip)]
    pub owned_after: Option<String>,
    /// Every command and script sent to the device, in order.
    #[serde(skip)]
    pub sent: Vec<String>,
    pub seconds: f64,
}

/// Progress of a run, in the order things happen.
pub enum Event<'a> {
    Started(String),
    Finished(&'a DeviceResult),
}

/// What a run keeps of a device once it is journalled and reported; the rest of its
/// result (configurations, commands, diffs) is dropped then, not held to the run's end.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub device: String,
    pub status: Status,
    /// A commit waits for the admin to confirm it.
    pub unconfirmed: bool,
}

impl Outcome {
    fn of(result: &DeviceResult) -> Outcome {
        Outcome {
            device: result.device.clone(),
            status: result.status,
            unconfirmed: result.unconfirmed.is_some(),
        }
    }
}

/// Applies the plan to `targets` (indices into `switches`), batch by batch and `forks`
/// at a time, records each device in `journal` as it goes, and calls `on_event` on this
/// thread as devices start and finish. Outcomes come back in `targets` order.
pub fn run(
    switches: &[SwitchPlan],
    targets: &[usize],
    options: &ApplyOptions,
    journal: &Mutex<Journal>,
    on_event: &mut dyn FnMut(&Event),
) -> Vec<Outcome> {
    let mut results = Vec::with_capacity(targets.len());
    let mut stopped: Option<String> = None;
    for (number, batch) in options.rolling.batches(targets).iter().enumerate() {
        if let Some(why) = &stopped {
            for &index in batch {
                let mut result = DeviceResult::new(&switches[index]);
                result.status = Status::Skipped;
                result.message = Some(format!("not contacted: {why}"));
                on_event(&Event::Finished(&result));
                results.push(Outcome::of(&result));
            }
            continue;
        }
        // Each result is reported, then dropped: only its outcome is kept (the Option
        // lets the reporter take the result out of the slot parallel::run keeps).
        let done = parallel::run(
            batch,
            options.forks,
            |&index| {
                let mut result = contained(&switches[index], options, journal);
                lock(journal).record(&options.run, &result);
                result.journalled();
                allocator::return_this_threads_free_memory();
                (Outcome::of(&result), Some(result))
            },
            &mut |progress: Progress<'_, (Outcome, Option<DeviceResult>)>| match progress {
                Progress::Started(slot) => {
                    on_event(&Event::Started(switches[batch[slot]].intent.name.clone()))
                }
                Progress::Finished(_, (_, result)) => {
                    if let Some(result) = result.take() {
                        on_event(&Event::Finished(&result));
                    }
                }
            },
        );
        let done: Vec<Outcome> = done.into_iter().map(|(outcome, _)| outcome).collect();
        if !options.rolling.serial.is_empty() && options.rolling.stops_after(&done) {
            stopped = Some(format!(
                "batch {} had more than {}% of its switches failed or unreachable",
                number + 1,
                options.rolling.max_fail_percentage
            ));
        }
        results.extend(done);
    }
    results
}

/// One device's flow, with a bug in it kept to that device: a panic makes the device
/// `failed` (a switch with a revert timer undoes an unconfirmed commit by itself) while
/// the others carry on and the journal records every one.
fn contained(
    switch: &SwitchPlan,
    options: &ApplyOptions,
    journal: &Mutex<Journal>,
) -> DeviceResult {
    let started = Instant::now();
    if interrupt::requested() {
        let mut result = DeviceResult::new(switch);
        result.status = Status::Interrupted;
        result.message = Some("not contacted: the run was interrupted first".into());
        return result;
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        apply_device(switch, options, journal)
    }))
    .unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        let mut result = DeviceResult::new(switch);
        result.status = Status::Failed;
        result.message = Some(clean(&format!(
            "internal error in mltctl ({what}); if a change was committed, the switch's \
             revert timer undoes it"
        )));
        result.seconds = started.elapsed().as_secs_f64();
        result
    })
}

impl DeviceResult {
    /// Drops what only the journal reads (a spine's is megabytes), on the thread that
    /// made it: freed by the thread reporting it, the allocator would keep those pages
    /// until this thread next allocates from them.
    fn journalled(&mut self) {
        self.owned_before = None;
        self.owned_after = None;
        self.sent = Vec::new();
    }

    fn new(switch: &SwitchPlan) -> DeviceResult {
        DeviceResult {
            device: switch.intent.name.clone(),
            vendor: switch.intent.vendor,
            endpoint: format!("{}:{}", switch.mgmt.address, switch.mgmt.port),
            status: Status::Ok,
            change_count: 0,
            changes: Vec::new(),
            commands: String::new(),
            switch_diff: None,
            unconfirmed: None,
            message: None,
            before_sha256: None,
            after_sha256: None,
            owned_before: None,
            owned_after: None,
            sent: Vec::new(),
            seconds: 0.0,
        }
    }
}

/// The lock on `switch` for a run that may change it: taken, or why not.
fn lock_switch(switch: &SwitchPlan, lock_dir: &std::path::Path) -> Result<File, String> {
    let path = crate::switches::inside(lock_dir, &format!("{}.lock", switch.intent.name))
        .map_err(|e| format!("cannot name its lock file: {e}"))?;
    let taken = mlt_common::files::trusted_dir(lock_dir)
        .and_then(|_| mlt_common::files::open_lock(&path))
        .map_err(|e| format!("cannot take the lock: {e}"))?;
    match taken.try_lock() {
        Ok(()) => Ok(taken),
        Err(TryLockError::WouldBlock) => Err(format!(
            "another mltctl apply is changing this switch (it holds {}); nothing was sent",
            path.display()
        )),
        Err(TryLockError::Error(e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// The whole per-device flow; never panics on device trouble, always reports.
pub fn apply_device(
    switch: &SwitchPlan,
    options: &ApplyOptions,
    journal: &Mutex<Journal>,
) -> DeviceResult {
    let started = Instant::now();
    let intent = &switch.intent;
    let mut result = DeviceResult::new(switch);
    // Held until this device is done; the kernel releases it if mltctl dies.
    let _lock = if options.check {
        None
    } else {
        match lock_switch(switch, &options.lock_dir) {
            Ok(lock) => Some(lock),
            Err(why) => {
                result.status = Status::Failed;
                result.message = Some(why);
                result.seconds = started.elapsed().as_secs_f64();
                return result;
            }
        }
    };
    let mut session = match SshSession::open(&switch.mgmt, &options.ssh) {
        Ok(session) => session,
        Err(e) => {
            result.status = Status::Unreachable;
            result.message = Some(clean(&e.to_string()));
            result.seconds = started.elapsed().as_secs_f64();
            return result;
        }
    };
    let mut device = switch_config::driver(intent, &options.run.id);
    let mut change = Change {
        switch,
        options,
        journal,
        device: &mut *device,
        before: String::new(),
    };
    let outcome = change.run(&mut session, &mut result);
    if let Err(failure) = outcome {
        let interrupted = failure.interrupted();
        let (message, undone) = failure.describe(&mut change, &mut session);
        result.status = if interrupted && undone {
            Status::Interrupted
        } else {
            Status::Failed
        };
        result.message = Some(clean(&message));
    }
    result.sent = session.sent().to_vec();
    result.seconds = started.elapsed().as_secs_f64();
    result
}

/// One device's change in progress.
struct Change<'a> {
    switch: &'a SwitchPlan,
    options: &'a ApplyOptions,
    journal: &'a Mutex<Journal>,
    device: &'a mut dyn Device,
    /// The running configuration before the change: the saved copy.
    before: String,
}

/// Where the flow stopped — which says whether the switch may hold part of the change —
/// and why.
enum Failure {
    /// The candidate was never loaded; nothing to undo.
    Read(Cause),
    /// Nothing was activated.
    BeforeCommit(Cause),
    /// The change was (maybe partly) active and must be rolled back.
    AfterCommit(Cause),
}

/// Why one device's flow stopped.
#[derive(Debug, thiserror::Error)]
enum Cause {
    #[error("cannot read the running configuration: {0}")]
    Read(PushError),
    #[error("{0}")]
    Plan(switch_config::Error),
    #[error("loading the change failed: {0}")]
    Load(PushError),
    #[error("the switch could not compare the change: {0}")]
    Compare(PushError),
    #[error("discarding the checked change failed: {0}")]
    Discard(PushError),
    /// The switch took the candidate but sees nothing to change: it ignored it.
    #[error("the switch reports no difference for the loaded change")]
    Ignored,
    #[error("commit failed: {0}")]
    Commit(PushError),
    #[error("cannot write the journal: {0}")]
    Journal(journal::JournalError),
    #[error("cannot read back after commit: {0}")]
    ReadBack(PushError),
    #[error("cannot read back after commit: {0}")]
    ReadBackPlan(switch_config::Error),
    #[error(
        "verify failed: {} item(s) still differ after commit ({}{})",
        .0.len(),
        .0.iter().take(3).map(ToString::to_string).collect::<Vec<_>>().join("; "),
        if .0.len() > 3 { "; …" } else { "" }
    )]
    Verify(Vec<ChangeLine>),
    #[error("confirm failed: {0}")]
    Confirm(PushError),
    /// A signal asked the run to stop; `at` is the step it stopped before.
    #[error("interrupted before {at}")]
    Interrupted { at: &'static str },
}

impl Change<'_> {
    fn intent(&self) -> &SwitchIntent {
        &self.switch.intent
    }

    /// What `running` lacks: the plan, or for a rollback the configuration kept.
    fn wanted(&self, running: &str) -> Result<switch_config::SwitchDiff, switch_config::Error> {
        match self.options.restore.get(&self.intent().name) {
            Some(saved) => switch_config::revert(self.intent(), saved, running),
            None => switch_config::diff(self.intent(), Some(running)),
        }
    }

    /// What `running` lacks, counted, with each change's line when the run reports it.
    fn to_change(&self, running: &str) -> Result<(Counted, Vec<ChangeLine>), switch_config::Error> {
        if self.options.keep_detail {
            let diff = self.wanted(running)?;
            let counted = Counted {
                changes: diff.changes.len(),
                commands: diff.commands,
            };
            return Ok((counted, diff.changes));
        }
        let counted = match self.options.restore.get(&self.intent().name) {
            Some(saved) => switch_config::revert_counted(self.intent(), saved, running),
            None => switch_config::diff_counted(self.intent(), Some(running)),
        }?;
        Ok((counted, Vec::new()))
    }

    fn run(&mut self, t: &mut SshSession, result: &mut DeviceResult) -> Result<(), Failure> {
        let before = self
            .device
            .get_running(t)
            .map_err(|e| Failure::Read(Cause::Read(e)))?;
        result.before_sha256 = Some(sha256(&before));
        let (diff, owned_before) = parallel::on_a_cpu(|| {
            // The owned part is for the journal, which a check run does not write.
            let owned = (!self.options.check)
                .then(|| switch_config::owned(self.intent(), &before).ok())
                .flatten();
            (self.to_change(&before), owned)
        });
        let (counted, lines) = diff.map_err(|e| Failure::Read(Cause::Plan(e)))?;
        result.owned_before = owned_before;
        self.before = before;
        result.change_count = counted.changes;
        result.changes = lines;
        result.commands = counted.commands;
        if result.change_count == 0 {
            result.after_sha256 = result.before_sha256.clone();
            result.owned_after = result.owned_before.clone();
            return Ok(());
        }
        result.status = Status::Changed;
        if self.options.check {
            if self.options.switch_diff && self.device.has_candidate() {
                self.stage(t, result)?;
                self.device
                    .discard(t)
                    .map_err(|e| Failure::BeforeCommit(Cause::Discard(e)))?;
            }
            self.commands_sent(result);
            return Ok(());
        }
        if interrupt::requested() {
            return Err(Failure::Read(Cause::Interrupted {
                at: "any change was sent",
            }));
        }
        self.stage(t, result)?;
        self.commands_sent(result);
        if interrupt::requested() {
            return Err(Failure::BeforeCommit(Cause::Interrupted { at: "commit" }));
        }
        // The read-back comes with the commit where the driver can (one round trip);
        // the journal records the commit before the read-back is judged.
        let after = self
            .device
            .commit_then_read(t, self.options.confirm_timeout)
            .map_err(|e| Failure::AfterCommit(Cause::Commit(e)))?;
        let pending = lock(self.journal).pending(
            &self.options.run,
            result,
            self.device.reverts_by_itself(),
            self.options.confirm_timeout,
        );
        pending.map_err(|e| Failure::AfterCommit(Cause::Journal(e)))?;
        let after = after.map_err(|e| Failure::AfterCommit(Cause::ReadBack(e)))?;
        let left = parallel::on_a_cpu(|| self.wanted(&after))
            .map_err(|e| Failure::AfterCommit(Cause::ReadBackPlan(e)))?
            .changes;
        if !left.is_empty() {
            return Err(Failure::AfterCommit(Cause::Verify(left)));
        }
        if interrupt::requested() {
            return Err(Failure::AfterCommit(Cause::Interrupted { at: "confirm" }));
        }
        result.owned_after =
            parallel::on_a_cpu(|| switch_config::owned(self.intent(), &after).ok());
        result.after_sha256 = Some(sha256(&after));
        if self.options.confirm == Confirm::Manual {
            result.unconfirmed = Some(journal::pending_note(
                self.device.reverts_by_itself(),
                self.options.confirm_timeout,
            ));
            return Ok(());
        }
        self.device
            .confirm(t)
            .map_err(|e| Failure::AfterCommit(Cause::Confirm(e)))?;
        Ok(())
    }

    /// The commands are on the switch (and in the session's transcript): the result
    /// keeps them only if the run reports them.
    fn commands_sent(&self, result: &mut DeviceResult) {
        if !self.options.keep_detail {
            result.commands = String::new();
        }
    }

    /// Loads the change and makes sure the switch sees it; keeps the switch's own diff
    /// when the switch has a candidate of its own to compare.
    fn stage(&mut self, t: &mut SshSession, result: &mut DeviceResult) -> Result<(), Failure> {
        self.device
            .load_candidate(t, &result.commands, &self.before)
            .map_err(|e| Failure::BeforeCommit(Cause::Load(e)))?;
        let own_diff = self
            .device
            .compare(t)
            .map_err(|e| Failure::BeforeCommit(Cause::Compare(e)))?;
        if own_diff.trim().is_empty() {
            return Err(Failure::BeforeCommit(Cause::Ignored));
        }
        if self.options.switch_diff && self.device.has_candidate() {
            result.switch_diff = Some(clean(own_diff.trim_end()));
        }
        Ok(())
    }

    /// Undoes the commit and says what the switch runs now, and whether that is what it
    /// ran before. A lost connection gets one new session. Whatever the rollback
    /// reported, the switch is read again to tell.
    fn roll_back(&mut self, t: &mut SshSession) -> (String, bool) {
        let mut attempt = self.device.rollback(t);
        if let Err(PushError::Connection(_)) = attempt {
            if let Err(e) = t.reconnect(&self.switch.mgmt, &self.options.ssh) {
                return (self.unreachable_after_commit(&e.to_string()), false);
            }
            attempt = self.device.rollback(t);
        }
        let (state, restored) = self.state_after_rollback(t);
        match attempt {
            Ok(()) => (format!("rolled back: {state}"), restored),
            Err(e) => (format!("rollback failed ({e}); {state}"), false),
        }
    }

    /// Does the switch run what it ran before?
    fn state_after_rollback(&mut self, t: &mut SshSession) -> (String, bool) {
        let now = match self.device.get_running(t) {
            Ok(now) => now,
            Err(e) => {
                let state = format!("the switch could not be read again ({e}); check it by hand");
                return (state, false);
            }
        };
        match switch_config::revert(self.intent(), &self.before, &now) {
            Ok(left) if left.changes.is_empty() => {
                ("the switch runs what it ran before".into(), true)
            }
            Ok(left) => (
                format!(
                    "the switch does NOT run what it ran before ({} item(s) differ); check it by hand",
                    left.changes.len()
                ),
                false,
            ),
            Err(e) => (
                format!("the switch's configuration cannot be read ({e}); check it by hand"),
                false,
            ),
        }
    }

    fn unreachable_after_commit(&self, reconnect: &str) -> String {
        if self.device.reverts_by_itself() {
            format!(
                "cannot reconnect to roll back ({reconnect}); the switch reverts the change by \
                 itself within {} s",
                self.options.confirm_timeout.as_secs()
            )
        } else {
            format!(
                "cannot reconnect to roll back ({reconnect}); the change is active but not saved \
                 for the next boot: restore it by hand or run apply again"
            )
        }
    }
}

impl Failure {
    fn interrupted(&self) -> bool {
        let (Failure::Read(cause) | Failure::BeforeCommit(cause) | Failure::AfterCommit(cause)) =
            self;
        matches!(cause, Cause::Interrupted { .. })
    }

    /// The failure, what was done about it, and whether nothing of the change is left
    /// active on the switch.
    fn describe(self, change: &mut Change<'_>, t: &mut SshSession) -> (String, bool) {
        match self {
            Failure::Read(why) => (why.to_string(), true),
            Failure::BeforeCommit(why) => match change.device.discard(t) {
                Ok(()) => (
                    format!("{why}; nothing was activated (candidate discarded)"),
                    true,
                ),
                Err(e) => (
                    format!("{why}; nothing was activated (discarding the candidate failed: {e})"),
                    true,
                ),
            },
            Failure::AfterCommit(why) => {
                let (done, restored) = change.roll_back(t);
                (format!("{why}; {done}"), restored)
            }
        }
    }
}

/// The journal, even if a thread panicked while holding it (its file is still good).
fn lock(journal: &Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    journal.lock().unwrap_or_else(|e| e.into_inner())
}

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
