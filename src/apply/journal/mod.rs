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
//!
//! What `rollback` pushes is decided by the journal, so nobody else may write it: it
//! lives in a trusted directory (this user's, writable by nobody else), is 0600 and
//! opened without following links, and each line carries a chained MAC,
//! `{"chain":"<hex>",…}`: HMAC-SHA-256, under a key only this user can read
//! (`journal.key` beside the journal, made with it), of the previous line's MAC and
//! this line's own text. A line edited, inserted or appended by anyone without the key
//! breaks the chain there, and `history`, `rollback`, `confirm` and `apply` refuse the
//! journal naming that line. Lines written before journals were chained are read as
//! they are (`unchained`), and the first chained line seals them (its chain starts
//! from their SHA-256). A last line cut short by a crash is left out (`history` says
//! so) and removed by the next run that appends. Not detected: lines removed from the
//! end.

mod store;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use mlt_common::files::{self, FileError};
use mlt_common::input::InputError;
use serde::{Deserialize, Serialize};

use super::DeviceResult;
pub use store::{Contents, key_path};

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
    /// None for `--check`.
    store: Option<store::Store>,
    /// Entries that could not be written, and why.
    failures: Vec<String>,
}

/// The largest journal read: a run of a thousand switches with their owned parts is a
/// few MB.
pub const MAX_JOURNAL_BYTES: u64 = 1 << 30;

/// Why the journal cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: InputError,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{} line {line}: {why}; the journal was changed by something other than mltctl, so \
         history, rollback, confirm and apply do not trust it (move it aside to start a new one)",
        path.display()
    )]
    Tampered {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error(
        "{} holds chained lines but its key {} is missing or unreadable ({why}): its lines \
         cannot be told from forged ones",
        path.display(),
        key.display()
    )]
    NoKey {
        path: PathBuf,
        key: PathBuf,
        why: String,
    },
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
    /// Opens (creating it, its key and its directory if needed) the journal for
    /// appending, after checking every line already in it; a line cut short by a crash
    /// is removed. Done before any device is contacted, so a run that cannot be recorded
    /// does not start. Several runs may have it open at once (on different switches):
    /// each appends under a lock, after checking what the others appended.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        files::trusted_dir(state_dir(path))?;
        Ok(Journal {
            path: path.to_path_buf(),
            store: Some(store::Store::open(path)?),
            failures: Vec::new(),
        })
    }

    /// A journal that records nothing, for `--check`: `path` is only named.
    pub fn none(path: &Path) -> Journal {
        Journal {
            path: path.to_path_buf(),
            store: None,
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
    ) -> Result<(), JournalError> {
        let entry = Entry::of(
            run,
            result,
            PENDING.into(),
            Some(pending_note(reverts_by_itself, revert_in)),
        );
        self.append(&entry)
    }

    /// Appends an entry written elsewhere (a confirm settling an earlier run).
    pub fn append(&mut self, entry: &Entry) -> Result<(), JournalError> {
        match &mut self.store {
            Some(store) => store.append(entry),
            None => Ok(()),
        }
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
            changes: result.change_count,
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

/// The directory the journal at `path` lives in.
fn state_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Every entry of the journal at `path`, in the order written (none if it does not
/// exist), each line checked against the journal's key. A line edited, inserted or
/// added by anyone but mltctl is an error naming it; a last line cut short by a crash
/// is left out and said.
pub fn read(path: &Path) -> Result<Contents, JournalError> {
    store::read(path)
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

    fn append_raw(path: &Path, bytes: &[u8]) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    /// A fresh journal in a scratch directory with one entry per run in `runs`.
    fn written(runs: &[(&str, &str)]) -> (files::TempDir, PathBuf) {
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut journal = Journal::open(&path).unwrap();
        for (run, outcome) in runs {
            journal
                .append(&entry(run, Kind::Apply, "a", outcome))
                .unwrap();
        }
        (dir, path)
    }

    fn tampered_at(result: Result<Contents, JournalError>) -> usize {
        match result {
            Err(JournalError::Tampered { line, .. }) => line,
            other => panic!("not refused as tampered: {other:?}"),
        }
    }

    #[test]
    fn a_line_cut_short_is_left_out_and_removed_by_the_next_append() {
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let path = dir.path().join("state/journal.jsonl");
        let mut journal = Journal::open(&path).unwrap();
        journal
            .append(&entry("r1", Kind::Apply, "a", "ok"))
            .unwrap();
        append_raw(&path, b"{\"chain\":\"00");
        let contents = read(&path).unwrap();
        assert_eq!(contents.entries.len(), 1);
        assert!(contents.cut_short);
        let mut journal = Journal::open(&path).unwrap();
        journal
            .append(&entry("r2", Kind::Apply, "a", "ok"))
            .unwrap();
        let contents = read(&path).unwrap();
        assert_eq!(contents.entries.len(), 2);
        assert!(!contents.cut_short);
        assert_eq!(read(&dir.path().join("absent")).unwrap().entries.len(), 0);
    }

    /// Anyone without the key who appends, edits or inserts a line breaks the chain
    /// there, and the journal is refused naming that line.
    #[test]
    fn a_forged_or_edited_line_is_refused_naming_it() {
        let (_dir, path) = written(&[("r1", "ok"), ("r2", "changed")]);
        let good = std::fs::read_to_string(&path).unwrap();
        let forged = serde_json::to_string(&entry("r9", Kind::Apply, "a", UNCONFIRMED)).unwrap();
        append_raw(
            &path,
            format!(
                "{}{}\",{}\n",
                store::CHAIN_PREFIX,
                "0".repeat(64),
                &forged[1..]
            )
            .as_bytes(),
        );
        assert_eq!(tampered_at(read(&path)), 3);
        // Appended without a MAC.
        std::fs::write(&path, format!("{good}{forged}\n")).unwrap();
        assert_eq!(tampered_at(read(&path)), 3);
        // Edited in place: the second line's outcome.
        std::fs::write(&path, good.replace("\"changed\"", "\"unconfirmed\"")).unwrap();
        assert_eq!(tampered_at(read(&path)), 2);
        // Appending to a journal that was tampered with is refused too.
        assert!(Journal::open(&path).is_err());
        // Every MAC stripped: the lines are no longer as the key found the journal.
        let stripped: String = good
            .lines()
            .map(|l| format!("{{{}\n", &l[store::CHAIN_PREFIX.len() + 66..]))
            .collect();
        std::fs::write(&path, &stripped).unwrap();
        assert_eq!(tampered_at(read(&path)), 1);
    }

    /// Without its key a chained journal is neither read nor appended to, and no new
    /// key is made in the old one's place.
    #[test]
    fn a_lost_key_is_said_and_not_replaced() {
        let (_dir, path) = written(&[("r1", "ok")]);
        std::fs::remove_file(key_path(&path)).unwrap();
        assert!(matches!(read(&path), Err(JournalError::NoKey { .. })));
        assert!(matches!(
            Journal::open(&path).err(),
            Some(JournalError::NoKey { .. })
        ));
        assert!(!key_path(&path).exists());
    }

    /// Lines written before journals were chained are read, and the key seals them as
    /// they were: editing one afterwards, or adding an unchained line, is refused.
    #[test]
    fn unchained_lines_are_read_and_sealed_by_the_key() {
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let path = dir.path().join("journal.jsonl");
        let old = serde_json::to_string(&entry("r0", Kind::Apply, "a", "changed")).unwrap();
        let mut checked = serde_json::to_value(entry("r00", Kind::Apply, "a", "changed")).unwrap();
        checked["check"] = true.into();
        std::fs::write(&path, format!("{old}\n{checked}\n")).unwrap();
        let contents = read(&path).unwrap();
        assert_eq!((contents.entries.len(), contents.unchained), (1, 2));
        let mut journal = Journal::open(&path).unwrap();
        journal
            .append(&entry("r1", Kind::Apply, "a", "ok"))
            .unwrap();
        let contents = read(&path).unwrap();
        assert_eq!((contents.entries.len(), contents.unchained), (2, 2));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen("\"changed\"", "\"ok\"", 1)).unwrap();
        assert_eq!(tampered_at(read(&path)), 1);
        std::fs::write(&path, format!("{text}{old}\n")).unwrap();
        assert_eq!(tampered_at(read(&path)), 4);
    }

    /// Two runs with the journal open at once (on different switches) append in turn,
    /// each after checking the other's lines: the chain holds.
    #[test]
    fn two_runs_appending_at_once_keep_the_chain() {
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut first = Journal::open(&path).unwrap();
        let mut second = Journal::open(&path).unwrap();
        for i in 0..5 {
            first
                .append(&entry(&format!("a{i}"), Kind::Apply, "x", "ok"))
                .unwrap();
            second
                .append(&entry(&format!("b{i}"), Kind::Apply, "y", "ok"))
                .unwrap();
        }
        let contents = read(&path).unwrap();
        assert_eq!(contents.entries.len(), 10);
        assert!(!contents.cut_short);
    }

    /// A journal named `X.key` does not share a file with its own key.
    #[test]
    fn a_journal_named_like_a_key_keeps_its_key_apart() {
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let path = dir.path().join("audit.key");
        let mut journal = Journal::open(&path).unwrap();
        journal
            .append(&entry("r1", Kind::Apply, "a", "ok"))
            .unwrap();
        assert_ne!(key_path(&path), path);
        assert_eq!(read(&path).unwrap().entries.len(), 1);
    }

    #[test]
    fn a_fifo_a_link_or_a_device_is_refused_at_once() {
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let fifo = dir.path().join("journal.jsonl");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        let err = read(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
        assert!(matches!(
            read(&link).unwrap_err(),
            JournalError::File(FileError::Symlink { .. })
        ));
        assert!(Journal::open(&link).is_err());
        assert!(!dir.path().join("elsewhere").exists());
    }
}
