//! The journal: an append-only JSON Lines file with one entry per device and run —
//! when, what the switch ran before and after (SHA-256), every command sent, and the
//! outcome. It never holds what a switch printed, so no secret of a switch lands in it.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use super::{DeviceResult, Status};

/// An open journal; entries are appended as devices finish.
pub struct Journal {
    path: PathBuf,
    file: std::fs::File,
}

#[derive(Serialize)]
struct Entry<'a> {
    time: String,
    run: &'a str,
    check: bool,
    device: &'a str,
    vendor: String,
    endpoint: &'a str,
    outcome: Status,
    changes: usize,
    before_sha256: Option<&'a str>,
    after_sha256: Option<&'a str>,
    sent: &'a [String],
    message: Option<&'a str>,
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
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one device's entry as a single line, flushed at once.
    pub fn record(&mut self, run: &str, check: bool, result: &DeviceResult) -> io::Result<()> {
        let entry = Entry {
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            run,
            check,
            device: &result.device,
            vendor: result.vendor.to_string(),
            endpoint: &result.endpoint,
            outcome: result.status,
            changes: result.changes.len(),
            before_sha256: result.before_sha256.as_deref(),
            after_sha256: result.after_sha256.as_deref(),
            sent: &result.sent,
            message: result.message.as_deref(),
        };
        let mut line = serde_json::to_string(&entry).map_err(io::Error::other)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.flush()
    }
}
