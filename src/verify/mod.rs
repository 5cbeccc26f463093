//! `mltctl verify`: what each switch runs and counts, against the plan. Every switch is
//! read twice over SSH — its running configuration and queue counters, then, after a
//! window, its counters again — and judged ([`judge`]): `ok`, `mismatch` (what differs
//! from the plan, the DSCP map named apart since spraying needs it alike on every
//! switch), `unverifiable` (a counter the OS does not expose, named), or the read
//! failed. Nothing is changed on any switch. Design: `docs/src/design/verify.md`.

pub mod judge;

use std::time::{Duration, Instant};

use mlt_common::outcome::Status;
use mlt_common::redact::clean;
use serde::Serialize;
use switch_config::counters::Reading;
use switch_config::{ChangeLine, Vendor};

use crate::parallel::{self, Progress};
use crate::plan::SwitchPlan;
use crate::ssh::{SshOptions, SshSession};

pub use judge::Verdict;

/// One switch, judged.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchCheck {
    pub device: String,
    pub vendor: Vendor,
    pub endpoint: String,
    pub verdict: Verdict,
    /// What the switch runs that the plan does not say, one line each.
    pub mismatches: Vec<String>,
    /// Counters of the plan's queues the switch does not expose, one line each.
    pub unverifiable: Vec<String>,
    /// What the plan's queues counted during the window.
    pub queues: Vec<switch_config::counters::QueueCount>,
    /// Why the switch could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub seconds: f64,
}

/// Why a switch could not be read: unreachable, or failed with a message.
type Unread = (Status, String);

/// The first reading: what runs, and the counters then.
struct First {
    changes: Vec<ChangeLine>,
    counters: Reading,
}

/// Reads `targets` (indices into `switches`), waits `window`, reads their counters
/// again, and judges each.
pub fn verify_all(
    switches: &[SwitchPlan],
    targets: &[usize],
    forks: usize,
    ssh: &SshOptions,
    window: Duration,
    on_progress: &mut dyn FnMut(Progress<'_, SwitchCheck>),
) -> Vec<SwitchCheck> {
    let started = Instant::now();
    let first = parallel::run(
        targets,
        forks,
        |&i| read_first(&switches[i], ssh),
        &mut |_| {},
    );
    std::thread::sleep(window);
    let pairs: Vec<(usize, Result<First, Unread>)> = targets.iter().copied().zip(first).collect();
    parallel::run(
        &pairs,
        forks,
        |(i, first)| {
            let switch = &switches[*i];
            let second = match first {
                Ok(first) => read_counters(switch, ssh).map(|now| (first, now)),
                Err(e) => Err(e.clone()),
            };
            let mut check = match second {
                Ok((first, now)) => {
                    judge::judge(&switch.intent, &first.changes, &now.since(&first.counters))
                }
                Err((status, message)) => judge::unread(&switch.intent, status, message),
            };
            check.endpoint = format!("{}:{}", switch.mgmt.address, switch.mgmt.port);
            check.seconds = started.elapsed().as_secs_f64();
            check
        },
        on_progress,
    )
}

fn open(switch: &SwitchPlan, ssh: &SshOptions) -> Result<SshSession, Unread> {
    SshSession::open(&switch.mgmt, ssh).map_err(|e| (Status::Unreachable, clean(&e.to_string())))
}

fn read_first(switch: &SwitchPlan, ssh: &SshOptions) -> Result<First, Unread> {
    let intent = &switch.intent;
    let mut session = open(switch, ssh)?;
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        (Status::Failed, clean(&format!("cannot read {what}: {e}")))
    };
    let running = switch_config::driver(intent, "mltctl-verify")
        .get_running(&mut session)
        .map_err(|e| failed("the running configuration", &e))?;
    let changes = switch_config::diff(intent, Some(&running))
        .map_err(|e| failed("the running configuration", &e))?
        .changes;
    let counters = switch_config::read_counters(intent, &mut session)
        .map_err(|e| failed("queue counters", &e))?;
    Ok(First { changes, counters })
}

fn read_counters(switch: &SwitchPlan, ssh: &SshOptions) -> Result<Reading, Unread> {
    let mut session = open(switch, ssh)?;
    switch_config::read_counters(&switch.intent, &mut session).map_err(|e| {
        (
            Status::Failed,
            clean(&format!("cannot read queue counters: {e}")),
        )
    })
}
