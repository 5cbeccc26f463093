//! The journal: an append-only JSON Lines file with one entry per device and run —
//! when, what the switch ran before and after (SHA-256), every command sent, and the
//! outcome — and, while a commit waits for its confirm, a `pending` entry saying whether
//! the switch reverts it by itself. It never holds what a switch printed, so no secret
//! of a switch lands in it. Each entry is on disk before the run goes on.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use super::DeviceResult;

/// An open journal; entries are appended as devices finish.
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
    /// Entries that could not be written, and why.
    failures: Vec<String>,
}

#[derive(Serialize)]
struct Entry<'a> {
    time: String,
    run: &'a str,
    check: bool,
    device: &'a str,
    vendor: String,
    endpoint: &'a str,
    /// The device's status, or `pending` for a commit awaiting its confirm.
    outcome: String,
    changes: usize,
    before_sha256: Option<&'a str>,
    after_sha256: Option<&'a str>,
    sent: &'a [String],
    message: Option<String>,
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
            file,
            failures: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why entries could not be written, if any could not.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// Appends one device's final entry; a failure is kept for [`Journal::failures`].
    pub fn record(&mut self, run: &str, check: bool, result: &DeviceResult) {
        let entry = Entry::of(run, check, result, result.status.to_string(), None);
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
        run: &str,
        result: &DeviceResult,
        reverts_by_itself: bool,
        revert_in: std::time::Duration,
    ) -> io::Result<()> {
        let note = if reverts_by_itself {
            let at = SystemTime::now() + revert_in;
            format!(
                "committed, not confirmed: the switch reverts it by itself at {} unless mltctl confirms",
                humantime::format_rfc3339_seconds(at)
            )
        } else {
            "committed, not confirmed: active until mltctl confirms or rolls it back, \
             and not saved for the next boot"
                .to_string()
        };
        let entry = Entry::of(run, false, result, "pending".into(), Some(note));
        self.append(&entry)
    }

    fn append(&mut self, entry: &Entry<'_>) -> io::Result<()> {
        let mut line = serde_json::to_string(entry).map_err(io::Error::other)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        // On disk before the run goes on: a run cut short keeps its record.
        self.file.sync_data()
    }
}

impl<'a> Entry<'a> {
    fn of(
        run: &'a str,
        check: bool,
        result: &'a DeviceResult,
        outcome: String,
        note: Option<String>,
    ) -> Entry<'a> {
        Entry {
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            run,
            check,
            device: &result.device,
            vendor: result.vendor.to_string(),
            endpoint: &result.endpoint,
            outcome,
            changes: result.changes.len(),
            before_sha256: result.before_sha256.as_deref(),
            after_sha256: result.after_sha256.as_deref(),
            sent: &result.sent,
            message: note.or_else(|| result.message.clone()),
        }
    }
}
