//! `mltctl bootstrap`: on every host, the `endhost` binary and the host's network plan
//! are uploaded, and `endhost configure` applies the plan (or, with `--check`, reports
//! what it would change — then the files go to a scratch directory that is removed).

use std::time::Instant;

use endhost_core::config::DatapathKind;
use endhost_core::host::{self as agent, Report};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Remote, Status, endpoint, open, run, seconds_since};
use crate::parallel::{self, Progress};
use crate::plan::Plan;
use crate::plan::hosts::network_plan;
use crate::ssh::{SshOptions, SshSession};
use mlt_common::redact::clean;
use mlt_common::shell::ShellCommand;

pub struct Options {
    pub check: bool,
    pub forks: usize,
    pub ssh: SshOptions,
    pub remote: Remote,
    pub datapath: DatapathKind,
}

/// The local `endhost` binary, read once for every host.
pub struct Binary {
    pub bytes: Vec<u8>,
    pub sha256: String,
}

impl Binary {
    pub fn new(bytes: Vec<u8>) -> Binary {
        let sha256 = format!("{:x}", Sha256::digest(&bytes));
        Binary { bytes, sha256 }
    }
}

/// What happened on one host.
#[derive(Debug, Clone, Serialize)]
pub struct HostResult {
    pub host: String,
    pub endpoint: String,
    pub status: Status,
    /// The binary was uploaded (check mode: would be).
    pub binary_uploaded: bool,
    /// The agent's own report.
    pub report: Option<Report>,
    pub message: Option<String>,
    pub seconds: f64,
}

pub fn run_all(
    plan: &Plan,
    hosts: &[usize],
    binary: &Binary,
    options: &Options,
    on_progress: &mut dyn FnMut(Progress<'_, HostResult>),
) -> Vec<HostResult> {
    parallel::run(
        hosts,
        options.forks,
        |&rank| bootstrap_host(plan, rank, binary, options),
        on_progress,
    )
}

pub fn bootstrap_host(plan: &Plan, rank: usize, binary: &Binary, options: &Options) -> HostResult {
    let started = Instant::now();
    let mut result = HostResult {
        host: plan.hosts[rank].name.clone(),
        endpoint: endpoint(plan, rank),
        status: Status::Failed,
        binary_uploaded: false,
        report: None,
        message: None,
        seconds: 0.0,
    };
    match open(plan, rank, &options.ssh) {
        Err(e) => {
            result.status = Status::Unreachable;
            result.message = Some(clean(&e));
        }
        Ok(mut session) => {
            if let Err(e) = configure(&mut session, plan, rank, binary, options, &mut result) {
                result.status = Status::Failed;
                result.message = Some(clean(&e));
            }
        }
    }
    result.seconds = seconds_since(started);
    result
}

fn configure(
    session: &mut SshSession,
    plan: &Plan,
    rank: usize,
    binary: &Binary,
    options: &Options,
    result: &mut HostResult,
) -> Result<(), String> {
    let remote = &options.remote;
    let checksum = ShellCommand::new("sha256sum")
        .arg(remote.binary())
        .code("2>/dev/null || true");
    let installed = run(session, &checksum)?;
    let current = installed.split_whitespace().next() == Some(binary.sha256.as_str());
    result.binary_uploaded = !current;
    let workdir = if options.check {
        make_scratch(session, plan)?
    } else {
        super::trusted_remote_dir(session, remote.dir())?;
        remote.clone()
    };
    let outcome = (|| {
        let endhost = if current {
            remote.binary()
        } else {
            session
                .upload(&binary.bytes, &workdir.binary(), 0o755)
                .map_err(|e| format!("uploading endhost: {e}"))?;
            workdir.binary()
        };
        let agent = Agent {
            endhost: &endhost,
            workdir: &workdir,
            datapath: options.datapath,
            check: options.check,
        };
        agent.configure(session, plan, rank)
    })();
    if options.check {
        remove_scratch(session, &workdir);
    }
    let report = outcome?;
    result.status = match report.status {
        Status::Ok if result.binary_uploaded => Status::Changed,
        status => status,
    };
    result.message = report.error.as_deref().map(clean);
    result.report = Some(report);
    Ok(())
}

/// `endhost configure` on a host: which binary, where the plan goes, how.
struct Agent<'a> {
    endhost: &'a str,
    workdir: &'a Remote,
    datapath: DatapathKind,
    check: bool,
}

impl Agent<'_> {
    /// Uploads host `rank`'s network plan and runs the agent on it.
    fn configure(
        &self,
        session: &mut SshSession,
        plan: &Plan,
        rank: usize,
    ) -> Result<Report, String> {
        let plan_file = self.workdir.file(&plan.hosts[rank].name, "network.json");
        let network = network_plan(plan, rank, self.datapath);
        let json = serde_json::to_vec_pretty(&network).expect("serializable");
        session
            .upload(&json, &plan_file, 0o644)
            .map_err(|e| format!("uploading the plan: {e}"))?;
        let mut command = ShellCommand::program(self.endhost)
            .code("configure --plan")
            .arg(&plan_file)
            .code("--json");
        if self.check {
            command = command.code("--check");
        }
        let output = session
            .exec(&command)
            .map_err(|e| format!("`{command}`: {e}"))?;
        match serde_json::from_str::<Report>(output.stdout.trim()) {
            Ok(report) => Ok(report),
            Err(_) => Err(format!(
                "`{command}` exited with {}: {}",
                output.status,
                clean(output.stderr.trim())
            )),
        }
    }
}

fn make_scratch(session: &mut SshSession, plan: &Plan) -> Result<Remote, String> {
    let scratch = run(
        session,
        &ShellCommand::new("mktemp -d /tmp/mltctl-check.XXXXXX"),
    )?;
    Remote::new(scratch.trim(), plan)
}

/// Best effort: the scratch directory is in /tmp either way.
fn remove_scratch(session: &mut SshSession, scratch: &Remote) {
    let _ = run(session, &ShellCommand::new("rm -rf").arg(scratch.dir()));
}

/// What the host's network lacks of the plan (MTU, addresses, the MAC map, routes) and
/// what contradicts it, as the installed agent finds in check mode: nothing is changed.
pub fn check_network(
    session: &mut SshSession,
    plan: &Plan,
    rank: usize,
    remote: &Remote,
) -> Result<Report, String> {
    let scratch = make_scratch(session, plan)?;
    let agent = Agent {
        endhost: &remote.binary(),
        workdir: &scratch,
        datapath: plan.job.datapath.kind,
        check: true,
    };
    let report = agent.configure(session, plan, rank);
    remove_scratch(session, &scratch);
    report
}

/// Makes the host's network match host `rank`'s plan for `datapath` again (the plan file
/// bootstrap uploaded to `remote` is uploaded anew): what the agent changed, if anything.
pub fn reapply_network(
    session: &mut SshSession,
    plan: &Plan,
    rank: usize,
    remote: &Remote,
    datapath: DatapathKind,
) -> Result<Report, String> {
    let agent = Agent {
        endhost: &remote.binary(),
        workdir: remote,
        datapath,
        check: false,
    };
    agent.configure(session, plan, rank)
}

/// One host's result as text; with `diff`, every change the agent made (or would make).
pub fn render(result: &HostResult, check: bool, diff: bool) -> String {
    let mut detail = Vec::new();
    if let Some(report) = &result.report {
        let n = report.changes.len();
        if n > 0 {
            let verb = if check { "would make" } else { "made" };
            detail.push(format!("{verb} {n} network change(s)"));
        }
    }
    if result.binary_uploaded {
        detail.push(
            if check {
                "would upload endhost"
            } else {
                "uploaded endhost"
            }
            .into(),
        );
    }
    if let (Some(message), None) = (&result.message, &result.report) {
        detail.push(message.clone());
    }
    let mut out = super::status_line(
        &result.host,
        &result.endpoint,
        result.status,
        &detail.join("; "),
    );
    if let Some(report) = &result.report {
        // The host wrote the report: its text is data.
        let agent_text = clean(&agent::render(report, diff));
        // The agent's first line repeats the status; its details follow.
        for line in agent_text.lines().skip(1) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
