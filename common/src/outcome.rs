//! How a device or host ended a run, and the counts of a run: one vocabulary for
//! switches (`apply`) and hosts (`bootstrap`, `launch`, `stop`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Already as planned; nothing was sent but reads.
    Ok,
    /// Changed and verified (with `--check`: would change).
    Changed,
    /// Reached, but the change could not be made; the message says what runs now.
    Failed,
    /// No session could be opened; nothing was sent.
    Unreachable,
    /// A signal stopped the run before this device was changed, or after, and the
    /// change was undone; the message says which.
    Interrupted,
    /// Not contacted: an earlier batch of a rolling run failed.
    Skipped,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Ok => "ok",
            Status::Changed => "changed",
            Status::Failed => "failed",
            Status::Unreachable => "unreachable",
            Status::Interrupted => "interrupted",
            Status::Skipped => "skipped",
        })
    }
}

/// Counts of a finished run.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub ok: usize,
    pub changed: usize,
    pub failed: usize,
    pub unreachable: usize,
    #[serde(skip_serializing_if = "is_zero")]
    pub interrupted: usize,
    #[serde(skip_serializing_if = "is_zero")]
    pub skipped: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    pub fn of<'a>(statuses: impl IntoIterator<Item = &'a Status>) -> Summary {
        let mut s = Summary::default();
        for status in statuses {
            *match status {
                Status::Ok => &mut s.ok,
                Status::Changed => &mut s.changed,
                Status::Failed => &mut s.failed,
                Status::Unreachable => &mut s.unreachable,
                Status::Interrupted => &mut s.interrupted,
                Status::Skipped => &mut s.skipped,
            } += 1;
        }
        s
    }

    pub fn total(&self) -> usize {
        self.ok + self.changed + self.failed + self.unreachable + self.interrupted + self.skipped
    }
}
