//! `mltctl fetch`: each switch's running configuration, read over SSH with the same
//! read the push drivers use (host keys checked, one session per switch, `forks` at a
//! time), saved under the name `mltctl diff --running` looks for — NAPALM's
//! `get_config`, so that `fetch` then `diff` is an offline dry run on real devices.

use std::path::{Path, PathBuf};
use std::time::Instant;

use mlt_common::files::Access;
use mlt_common::redact::clean;
use serde::Serialize;
use switch_config::Vendor;

use crate::parallel::{self, Progress};
use crate::plan::SwitchPlan;
use crate::ssh::{SshOptions, SshSession};
use crate::switches;
use mlt_common::outcome::Status;

/// What happened on one switch.
#[derive(Debug, Clone, Serialize)]
pub struct Fetched {
    pub device: String,
    pub vendor: Vendor,
    pub endpoint: String,
    /// `ok` when saved; `failed` or `unreachable` with a message otherwise.
    pub status: Status,
    pub file: Option<PathBuf>,
    pub bytes: usize,
    pub message: Option<String>,
    pub seconds: f64,
}

/// Reads `targets` (indices into `switches`) and saves each into `dir`.
pub fn fetch_all(
    switches: &[SwitchPlan],
    targets: &[usize],
    dir: &Path,
    forks: usize,
    ssh: &SshOptions,
    on_progress: &mut dyn FnMut(Progress<'_, Fetched>),
) -> Vec<Fetched> {
    parallel::run(
        targets,
        forks,
        |&index| fetch_one(&switches[index], dir, ssh),
        on_progress,
    )
}

fn fetch_one(switch: &SwitchPlan, dir: &Path, ssh: &SshOptions) -> Fetched {
    let started = Instant::now();
    let intent = &switch.intent;
    let mut result = Fetched {
        device: intent.name.clone(),
        vendor: intent.vendor,
        endpoint: format!("{}:{}", switch.mgmt.address, switch.mgmt.port),
        status: Status::Failed,
        file: None,
        bytes: 0,
        message: None,
        seconds: 0.0,
    };
    let outcome = SshSession::open(&switch.mgmt, ssh)
        .map_err(|e| (Status::Unreachable, e.to_string()))
        .and_then(|mut session| {
            let mut driver = switch_config::driver(intent, "mltctl-fetch");
            driver.get_running(&mut session).map_err(|e| {
                (
                    Status::Failed,
                    format!("cannot read the running configuration: {e}"),
                )
            })
        })
        .and_then(|running| {
            let name = switches::file_name(intent);
            // Running configurations carry a switch's secrets: readable by this user only.
            let path = switches::write_file(dir, &name, &running, Access::Private)
                .map_err(|e| (Status::Failed, format!("cannot save {name}: {e}")))?;
            Ok((path, running.len()))
        });
    match outcome {
        Ok((path, bytes)) => {
            result.status = Status::Ok;
            result.file = Some(path);
            result.bytes = bytes;
        }
        Err((status, message)) => {
            result.status = status;
            result.message = Some(clean(&message));
        }
    }
    result.seconds = started.elapsed().as_secs_f64();
    result
}
