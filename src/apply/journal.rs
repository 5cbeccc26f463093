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

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use hmac::{Hmac, Mac};
use mlt_common::files::{self, Access, FileError};
use mlt_common::input::{self, InputError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
    /// The chain's key and the last line's MAC, in hex.
    key: Vec<u8>,
    last: String,
    /// Entries that could not be written, and why.
    failures: Vec<String>,
}

/// The largest journal read: a run of a thousand switches with their owned parts is a
/// few MB.
pub const MAX_JOURNAL_BYTES: u64 = 1 << 30;
/// The key file's size.
const KEY_BYTES: usize = 32;

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

/// What a journal holds, once checked.
#[derive(Debug, Default)]
pub struct Contents {
    pub entries: Vec<Entry>,
    /// Entries written before journals were chained (read, not verified).
    pub unchained: usize,
    /// A last line cut short (a crash while writing it): left out.
    pub cut_short: bool,
    /// The last chained line's MAC (hex), or what a next line chains from.
    last: String,
    /// Bytes of whole lines: past them is a line cut short.
    whole: u64,
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
    /// does not start.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        files::trusted_dir(state_dir(path))?;
        let key = key(path, true)?;
        let contents = verify(path, &key)?;
        let file = files::open_append(path, Access::Private)?;
        // A journal an older mltctl made readable by all becomes this user's alone.
        let io_error = |source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mode = file.metadata().map_err(io_error)?.mode();
        if mode & 0o077 != 0 {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io_error)?;
        }
        if contents.cut_short {
            file.set_len(contents.whole)
                .map_err(|source| JournalError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        Ok(Journal {
            path: path.to_path_buf(),
            file: Some(file),
            key,
            last: contents.last,
            failures: Vec::new(),
        })
    }

    /// A journal that records nothing, for `--check`: `path` is only named.
    pub fn none(path: &Path) -> Journal {
        Journal {
            path: path.to_path_buf(),
            file: None,
            key: Vec::new(),
            last: String::new(),
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
        let text = serde_json::to_string(entry).map_err(io::Error::other)?;
        let body = text.strip_prefix('{').unwrap_or(&text);
        let chain = mac(&self.key, &self.last, body);
        let line = format!("{CHAIN_PREFIX}{chain}\",{body}\n");
        file.write_all(line.as_bytes())?;
        // On disk before the run goes on: a run cut short keeps its record.
        file.sync_data()?;
        self.last = chain;
        Ok(())
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

/// What a chained line starts with; its MAC (64 hex digits) and `",` follow.
const CHAIN_PREFIX: &str = "{\"chain\":\"";

/// The directory the journal at `path` lives in.
fn state_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Where the key of the journal at `path` is kept.
pub fn key_path(path: &Path) -> PathBuf {
    path.with_extension("key")
}

/// The journal's key: read (a regular file of this user that nobody else can read), or
/// made when `make` and there is neither key nor chained journal yet.
fn key(path: &Path, make: bool) -> Result<Vec<u8>, JournalError> {
    let key_path = key_path(path);
    let no_key = |why: String| JournalError::NoKey {
        path: path.to_path_buf(),
        key: key_path.clone(),
        why,
    };
    match std::fs::symlink_metadata(&key_path) {
        Ok(meta) => {
            if !meta.is_file() || meta.uid() != files::effective_uid() || meta.mode() & 0o077 != 0 {
                return Err(no_key(format!(
                    "it must be a regular file of this user with mode 0600 (it is mode {:04o}, uid {})",
                    meta.mode() & 0o7777,
                    meta.uid()
                )));
            }
            let key = input::read_bytes(&key_path, 4096).map_err(|e| no_key(e.to_string()))?;
            if key.len() != KEY_BYTES {
                return Err(no_key(format!(
                    "it holds {} bytes, not {KEY_BYTES}",
                    key.len()
                )));
            }
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound && make => {
            let mut key = vec![0u8; KEY_BYTES];
            rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
            files::write(&key_path, &key, Access::Private)?;
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(no_key(e.to_string())),
    }
}

/// The MAC of a line whose text after `{` is `body`, chained from `previous`.
fn mac(key: &[u8], previous: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(previous.as_bytes());
    mac.update(b"\n");
    mac.update(body.as_bytes());
    hex(&mac.finalize().into_bytes())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every entry of the journal at `path`, in the order written (none if it does not
/// exist), each line's chain checked. A line edited or added by anyone but mltctl is
/// an error naming it; a last line cut short by a crash is left out and said.
pub fn read(path: &Path) -> Result<Contents, JournalError> {
    let key = key(path, false)?;
    verify(path, &key)
}

fn verify(path: &Path, key: &[u8]) -> Result<Contents, JournalError> {
    let bytes = match input::read_bytes(path, MAX_JOURNAL_BYTES) {
        Ok(bytes) => bytes,
        Err(InputError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Contents {
                last: hex(&Sha256::digest(b"")),
                ..Contents::default()
            });
        }
        Err(source) => {
            return Err(JournalError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let tampered = |line: usize, why: &str| JournalError::Tampered {
        path: path.to_path_buf(),
        line,
        why: why.to_string(),
    };
    let text = input::text(bytes[..whole].to_vec()).map_err(|e| match e {
        InputError::NotUtf8 { line, .. } => tampered(line, "not UTF-8 text"),
        other => JournalError::Read {
            path: path.to_path_buf(),
            source: other,
        },
    })?;
    let mut contents = Contents {
        cut_short: whole < bytes.len(),
        whole: whole as u64,
        ..Contents::default()
    };
    // Where the unchained lines end, and the chain so far.
    let mut chained = false;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let number = index + 1;
        let start = offset;
        offset += line.len();
        let line = line.trim_end_matches('\n');
        if line.trim().is_empty() {
            continue;
        }
        let entry_text = match line.strip_prefix(CHAIN_PREFIX) {
            Some(rest) => {
                if key.is_empty() {
                    return Err(JournalError::NoKey {
                        path: path.to_path_buf(),
                        key: key_path(path),
                        why: "there is no key".into(),
                    });
                }
                if !chained {
                    // The first chained line seals every unchained line above it.
                    contents.last = hex(&Sha256::digest(&text.as_bytes()[..start]));
                    chained = true;
                }
                let (chain, body) = rest
                    .split_once("\",")
                    .filter(|(chain, _)| chain.len() == 64)
                    .ok_or_else(|| tampered(number, "its chain field is malformed"))?;
                let expected = mac(key, &contents.last, body);
                if chain != expected {
                    return Err(tampered(
                        number,
                        "its MAC does not follow from the line before",
                    ));
                }
                contents.last = expected;
                format!("{{{body}")
            }
            None if chained => return Err(tampered(number, "it carries no MAC")),
            None => {
                contents.unchained += 1;
                line.to_string()
            }
        };
        let entry: Entry = serde_json::from_str(&entry_text)
            .map_err(|e| tampered(number, &format!("not a journal entry ({e})")))?;
        if switch_config::names::check_name(&entry.run).is_err() {
            return Err(tampered(number, "its run id is not a name"));
        }
        // Journals before the state directory recorded `--check` runs too; those
        // changed nothing and are not runs.
        if !entry.check {
            contents.entries.push(entry);
        }
    }
    if !chained {
        contents.last = hex(&Sha256::digest(text.as_bytes()));
    }
    Ok(contents)
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
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
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
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let path = dir.path().join("journal.jsonl");
        let mut journal = Journal::open(&path).unwrap();
        journal
            .append(&entry("r1", Kind::Apply, "a", "ok"))
            .unwrap();
        journal
            .append(&entry("r2", Kind::Apply, "a", "changed"))
            .unwrap();
        let good = std::fs::read_to_string(&path).unwrap();
        // Appended: a forged run with a MAC field of the right shape.
        let forged = serde_json::to_string(&entry("r9", Kind::Apply, "a", UNCONFIRMED)).unwrap();
        append_raw(
            &path,
            format!("{CHAIN_PREFIX}{}\",{}\n", "0".repeat(64), &forged[1..]).as_bytes(),
        );
        let err = read(&path).unwrap_err();
        assert!(
            matches!(err, JournalError::Tampered { line: 3, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("line 3"), "{err}");
        // Appended without a MAC.
        std::fs::write(&path, format!("{good}{forged}\n")).unwrap();
        assert!(matches!(
            read(&path).unwrap_err(),
            JournalError::Tampered { line: 3, .. }
        ));
        // Edited in place: the second line's outcome.
        std::fs::write(&path, good.replace("\"changed\"", "\"unconfirmed\"")).unwrap();
        assert!(matches!(
            read(&path).unwrap_err(),
            JournalError::Tampered { line: 2, .. }
        ));
        // Appending to a journal that was tampered with is refused too.
        assert!(Journal::open(&path).is_err());
        // Without its key, a chained journal is not read at all.
        std::fs::write(&path, &good).unwrap();
        std::fs::remove_file(key_path(&path)).unwrap();
        assert!(matches!(
            read(&path).unwrap_err(),
            JournalError::NoKey { .. }
        ));
    }

    /// Lines written before journals were chained are read, and the first chained line
    /// seals them: editing one afterwards breaks the chain.
    #[test]
    fn unchained_lines_are_read_and_sealed_by_the_first_chained_one() {
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
        assert_eq!(contents.entries.len(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen("\"changed\"", "\"ok\"", 1)).unwrap();
        assert!(matches!(
            read(&path).unwrap_err(),
            JournalError::Tampered { line: 3, .. }
        ));
    }

    #[test]
    fn a_fifo_or_a_device_is_refused_at_once() {
        let dir = files::scratch_dir("mltctl-journal-").unwrap();
        let fifo = dir.path().join("journal.jsonl");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read(&fifo).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        let err = read(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
    }
}
