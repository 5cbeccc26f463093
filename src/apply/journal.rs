//! The journal: an append-only JSON Lines file in the state directory with one entry
//! per device and run — when, which kind of run (`apply`, `rollback`, `confirm`), the
//! owned configuration before and after (only the parts the plan owns, in the vendor's
//! syntax, as [`switch_config::owned`] writes them), their SHA-256 over the whole
//! running configuration, every command sent, and the outcome. While a commit waits
//! for its confirm there is a `pending` entry saying whether the switch reverts it by
//! itself; a commit left for the admin to confirm ends `unconfirmed` until `mltctl
//! confirm` or `mltctl rollback` settles it. It never holds what a switch printed
//! beyond the owned part, so no secret of a switch lands in it. Each entry is on disk
//! before the run goes on. `--check` runs write nothing.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::DeviceResult;

/// The outcome of a commit that waits for the admin's `mltctl confirm`.
pub const UNCONFIRMED: &str = "unconfirmed";
/// The outcome written the moment a commit is active, before it is verified.
pub const PENDING: &str = "pending";

/// What kind of run wrote an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Apply,
    Rollback,
    /// Settles an earlier run's unconfirmed commit by keeping it.
    Confirm,
    /// Settles an earlier run's unconfirmed commit by undoing it.
    Cancel,
}

impl Kind {
    /// Whether an entry of this kind settles an earlier run instead of starting one.
    pub fn settles(self) -> bool {
        matches!(self, Kind::Confirm | Kind::Cancel)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Apply => "apply",
            Kind::Rollback => "rollback",
            Kind::Confirm => "confirm",
            Kind::Cancel => "cancel",
        })
    }
}

/// An open journal; entries are appended as devices finish. A `--check` run has one
/// that writes nothing.
pub struct Journal {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// Entries that could not be written, and why.
    failures: Vec<String>,
}

/// One device in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub time: String,
    pub run: String,
    #[serde(default = "apply_kind")]
    pub kind: Kind,
    /// For a rollback: the run whose earlier state it puts back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
    pub device: String,
    pub vendor: String,
    pub endpoint: String,
    /// The device's status, `pending` for a commit being verified, `unconfirmed` for
    /// one waiting for the admin.
    pub outcome: String,
    pub changes: usize,
    pub before_sha256: Option<String>,
    pub after_sha256: Option<String>,
    /// The parts of the configuration the plan owns, before and after the run.
    #[serde(default)]
    pub owned_before: Option<String>,
    #[serde(default)]
    pub owned_after: Option<String>,
    #[serde(default)]
    pub sent: Vec<String>,
    pub message: Option<String>,
    /// Journals before the state directory recorded `--check` runs too; those changed
    /// nothing and are not read as runs.
    #[serde(default, skip_serializing)]
    pub check: bool,
}

fn apply_kind() -> Kind {
    Kind::Apply
}

/// How a run is recorded: its id, kind and (for a rollback) the run it undoes.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub id: String,
    pub kind: Kind,
    pub of: Option<String>,
}

impl Journal {
    /// Opens (creating it and its directory if needed) the journal for appending. Done
    /// before any device is contacted, so a run that cannot be recorded does not start.
    pub fn open(path: &Path) -> io::Result<Journal> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file: Some(file),
            failures: Vec::new(),
        })
    }

    /// A journal that records nothing, for `--check`: `path` is only named.
    pub fn none(path: &Path) -> Journal {
        Journal {
            path: path.to_path_buf(),
            file: None,
            failures: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why entries could not be written, if any could not.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// Appends one device's final entry; a failure is kept for [`Journal::failures`].
    pub fn record(&mut self, run: &RunInfo, result: &DeviceResult) {
        let outcome = if result.unconfirmed.is_some() {
            UNCONFIRMED.to_string()
        } else {
            result.status.to_string()
        };
        let entry = Entry::of(run, result, outcome, None);
        if let Err(e) = self.append(&entry) {
            let device = &result.device;
            self.failures
                .push(format!("cannot record {device} in the journal: {e}"));
        }
    }

    /// Records that `result`'s change is committed and waits for its confirm: whether
    /// the switch reverts it by itself, and by when.
    pub fn pending(
        &mut self,
        run: &RunInfo,
        result: &DeviceResult,
        reverts_by_itself: bool,
        revert_in: std::time::Duration,
    ) -> io::Result<()> {
        let entry = Entry::of(
            run,
            result,
            PENDING.into(),
            Some(pending_note(reverts_by_itself, revert_in)),
        );
        self.append(&entry)
    }

    /// Appends an entry written elsewhere (a confirm settling an earlier run).
    pub fn append(&mut self, entry: &Entry) -> io::Result<()> {
        let Some(file) = &mut self.file else {
            return Ok(());
        };
        let mut line = serde_json::to_string(entry).map_err(io::Error::other)?;
        line.push('\n');
        file.write_all(line.as_bytes())?;
        // On disk before the run goes on: a run cut short keeps its record.
        file.sync_data()
    }
}

/// What an unconfirmed commit does if nobody confirms it.
pub fn pending_note(reverts_by_itself: bool, revert_in: std::time::Duration) -> String {
    if reverts_by_itself {
        let at = SystemTime::now() + revert_in;
        format!(
            "committed, not confirmed: the switch reverts it by itself at {} unless mltctl confirms",
            humantime::format_rfc3339_seconds(at)
        )
    } else {
        "committed, not confirmed: active until mltctl confirms or rolls it back, \
         and not saved for the next boot"
            .to_string()
    }
}

impl Entry {
    /// The entry that settles `earlier`'s unconfirmed commit: it carries that run's id.
    pub fn settling(earlier: &Entry, kind: Kind, result: &DeviceResult, outcome: &str) -> Entry {
        let run = RunInfo {
            id: earlier.run.clone(),
            kind,
            of: None,
        };
        Entry::of(&run, result, outcome.to_string(), None)
    }

    fn of(run: &RunInfo, result: &DeviceResult, outcome: String, note: Option<String>) -> Entry {
        Entry {
            time: now(),
            run: run.id.clone(),
            kind: run.kind,
            of: run.of.clone(),
            device: result.device.clone(),
            vendor: result.vendor.to_string(),
            endpoint: result.endpoint.clone(),
            outcome,
            changes: result.changes.len(),
            before_sha256: result.before_sha256.clone(),
            after_sha256: result.after_sha256.clone(),
            owned_before: result.owned_before.clone(),
            owned_after: result.owned_after.clone(),
            sent: result.sent.clone(),
            message: note.or_else(|| result.message.clone()),
            check: false,
        }
    }
}

pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Every entry of the journal at `path`, in the order written (none if it does not
/// exist). A line that is not an entry — cut short by a crash, or edited into a run id
/// that is not a name (the id names sessions, checkpoints and timers on switches) — is
/// skipped and counted.
pub fn read(path: &Path) -> io::Result<(Vec<Entry>, usize)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut entries = Vec::new();
    let mut skipped = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Entry>(line) {
            Ok(entry) if entry.check => {}
            Ok(entry) if switch_config::names::check_name(&entry.run).is_ok() => {
                entries.push(entry)
            }
            _ => skipped += 1,
        }
    }
    Ok((entries, skipped))
}

/// The last word on each device: its newest entry.
pub fn latest_by_device(entries: &[Entry]) -> BTreeMap<&str, &Entry> {
    let mut latest = BTreeMap::new();
    for entry in entries {
        latest.insert(entry.device.as_str(), entry);
    }
    latest
}

/// One run as `history` shows it: its kind, when it started, and each device's last
/// word in it (a later confirm updates it).
#[derive(Debug, Serialize)]
pub struct Run<'a> {
    pub run: &'a str,
    pub kind: Kind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<&'a str>,
    pub started: &'a str,
    pub devices: Vec<&'a Entry>,
}

/// The runs in `entries`, oldest first. A confirm entry names the run it settles and
/// counts as that run's last word on the device.
pub fn runs(entries: &[Entry]) -> Vec<Run<'_>> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_run: BTreeMap<&str, (Option<&Entry>, BTreeMap<&str, &Entry>)> = BTreeMap::new();
    for entry in entries {
        let slot = by_run.entry(entry.run.as_str()).or_insert_with(|| {
            order.push(entry.run.as_str());
            (None, BTreeMap::new())
        });
        if !entry.kind.settles() && slot.0.is_none() {
            slot.0 = Some(entry);
        }
        slot.1.insert(entry.device.as_str(), entry);
    }
    order
        .into_iter()
        .filter_map(|run| {
            let (first, devices) = by_run.remove(run)?;
            let first = first?;
            Some(Run {
                run,
                kind: first.kind,
                of: first.of.as_deref(),
                started: &first.time,
                devices: devices.into_values().collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(run: &str, kind: Kind, device: &str, outcome: &str) -> Entry {
        Entry {
            time: format!("t-{run}-{device}"),
            run: run.into(),
            kind,
            of: None,
            device: device.into(),
            vendor: "eos".into(),
            endpoint: "x:22".into(),
            outcome: outcome.into(),
            changes: 1,
            before_sha256: None,
            after_sha256: None,
            owned_before: None,
            owned_after: None,
            sent: Vec::new(),
            message: None,
            check: false,
        }
    }

    #[test]
    fn a_confirm_settles_the_run_it_names() {
        let entries = [
            entry("r1", Kind::Apply, "a", PENDING),
            entry("r1", Kind::Apply, "a", UNCONFIRMED),
            entry("r1", Kind::Apply, "b", "ok"),
            entry("r2", Kind::Apply, "b", "changed"),
            entry("r1", Kind::Confirm, "a", "changed"),
        ];
        let runs = runs(&entries);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].run, "r1");
        assert_eq!(runs[0].kind, Kind::Apply);
        assert_eq!(runs[0].started, "t-r1-a");
        let outcomes: Vec<(&str, &str)> = runs[0]
            .devices
            .iter()
            .map(|e| (e.device.as_str(), e.outcome.as_str()))
            .collect();
        assert_eq!(outcomes, [("a", "changed"), ("b", "ok")]);
        assert_eq!(latest_by_device(&entries)["b"].run, "r2");
    }

    #[test]
    fn a_line_cut_short_or_a_forged_run_id_is_skipped_and_counted() {
        let dir = std::env::temp_dir().join(format!("mltctl-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.jsonl");
        let mut journal = Journal::open(&path).unwrap();
        journal
            .append(&entry("r1", Kind::Apply, "a", "ok"))
            .unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"time\": \"2026")
            .unwrap();
        let forged = entry(
            "r1\nconfigure\nno ip routing",
            Kind::Apply,
            "a",
            "unconfirmed",
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(format!("\n{}\n", serde_json::to_string(&forged).unwrap()).as_bytes())
            .unwrap();
        let mut checked = entry("r0", Kind::Apply, "a", "changed");
        checked.check = true;
        let mut old = serde_json::to_value(&checked).unwrap();
        old["check"] = true.into();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(format!("\n{old}\n").as_bytes())
            .unwrap();
        let (entries, skipped) = read(&path).unwrap();
        assert_eq!((entries.len(), skipped), (1, 2));
        assert_eq!(entries[0].run, "r1");
        assert_eq!(read(&dir.join("absent")).unwrap().0.len(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
