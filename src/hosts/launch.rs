//! `mltctl launch` and `mltctl stop`: the transport on every host, started with the
//! host's configuration, IP=MAC file and environment; and what a training launcher
//! needs per rank.
//!
//! Starting is two passes: every host's transport is started (detached), then each is
//! waited for — a transport is ready only once all its peers are up, so no host may
//! wait before every host has started.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use endhost_core::config::DatapathKind;
use endhost_core::daemon::TransportStatus;
use serde::Serialize;

use super::{Remote, Status, endpoint, env_file, environment, open, run, seconds_since};
use crate::parallel::{self, Progress};
use crate::plan::Plan;
use crate::plan::groups::{Contention, Pattern, Rack};
use crate::plan::hosts::ip_mac;
use crate::ssh::SshOptions;
use mlt_common::redact::clean;
use mlt_common::shell::ShellCommand;

pub struct Options {
    pub forks: usize,
    pub ssh: SshOptions,
    pub remote: Remote,
    pub datapath: DatapathKind,
    /// How long a transport may take to find all its peers.
    pub ready_timeout: Duration,
}

/// One host's part of a launch or stop.
#[derive(Debug, Clone, Serialize)]
pub struct HostResult {
    pub host: String,
    pub endpoint: String,
    pub status: Status,
    pub pid: Option<u32>,
    pub message: Option<String>,
    pub seconds: f64,
}

/// What a training launcher needs, per rank.
#[derive(Debug, Clone, Serialize)]
pub struct Launched {
    pub job_id: u32,
    pub world_size: u32,
    pub datapath: DatapathKind,
    pub ranks: Vec<RankInfo>,
    /// DS-Sync's group schedule: per iteration of the period, the groups of ranks.
    pub groups: Pattern,
}

#[derive(Debug, Clone, Serialize)]
pub struct RankInfo {
    pub rank: u32,
    pub host: String,
    pub mgmt: String,
    pub ip: Ipv4Addr,
    pub path_addresses: Vec<Ipv4Addr>,
    pub socket: String,
    pub pid: Option<u32>,
    pub env: BTreeMap<String, String>,
}

/// The transport's configuration with the datapath asked for and the job's key file
/// (uploaded beside it, 0600); a DPDK transport reads its next hops from the IP=MAC
/// file uploaded beside it (the file GLOO_DPDK_CONFIG names).
fn transport_json(plan: &Plan, rank: usize, remote: &Remote, datapath: DatapathKind) -> Vec<u8> {
    let mut config = plan.transport_config(rank);
    config.job.datapath.kind = datapath;
    config.key_file = Some(remote.file(&plan.hosts[rank].name, "key").into());
    if datapath == DatapathKind::Dpdk {
        config.dpdk.ip_mac = Some(remote.file(&plan.hosts[rank].name, "ipmac").into());
    }
    serde_json::to_vec_pretty(&config).expect("serializable")
}

fn result(plan: &Plan, rank: usize) -> HostResult {
    HostResult {
        host: plan.hosts[rank].name.clone(),
        endpoint: endpoint(plan, rank),
        status: Status::Failed,
        pid: None,
        message: None,
        seconds: 0.0,
    }
}

/// The bytes of a job's key: fresh for each launch, so a key that leaked from an
/// earlier job opens nothing.
pub const JOB_KEY_BYTES: usize = 32;

/// Pass one on one host: files uploaded (the job's `key` among them, readable by the
/// transport's user alone), a running transport stopped, a new one started in the
/// background.
pub fn start_host(plan: &Plan, rank: usize, options: &Options, key: &[u8]) -> HostResult {
    let started = Instant::now();
    let mut out = result(plan, rank);
    let remote = &options.remote;
    let name = &plan.hosts[rank].name;
    let outcome = open(plan, rank, &options.ssh)
        .map_err(|e| (Status::Unreachable, e))
        .and_then(|mut session| {
            let failed = |e: String| (Status::Failed, e);
            let endhost = || ShellCommand::program(remote.binary());
            super::trusted_remote_dir(&mut session, remote.dir()).map_err(failed)?;
            run(
                &mut session,
                &ShellCommand::new("test -x").arg(remote.binary()),
            )
            .map_err(|_| {
                failed(format!(
                    "{} is not there: run mltctl bootstrap first",
                    remote.binary()
                ))
            })?;
            let env = environment(plan, rank, remote, options.datapath);
            let files = [
                (
                    "transport.json",
                    transport_json(plan, rank, remote, options.datapath),
                ),
                ("ipmac", ip_mac(plan, rank).into_bytes()),
                ("env", env_file(&env).into_bytes()),
            ];
            for (suffix, data) in files {
                session
                    .upload(&data, &remote.file(name, suffix), 0o644)
                    .map_err(|e| failed(format!("uploading {suffix}: {e}")))?;
            }
            session
                .upload(key, &remote.file(name, "key"), 0o600)
                .map_err(|e| failed(format!("uploading the job's key: {e}")))?;
            let file = |suffix| remote.file(name, suffix);
            let stop = endhost().code("stop --pid-file").arg(file("pid"));
            run(&mut session, &stop).map_err(failed)?;
            let mut serve = endhost()
                .code("serve --config")
                .arg(file("transport.json"))
                .code("--socket")
                .arg(file("sock"));
            if let Some(group) = &plan.launcher.socket_group {
                serve = serve.code("--socket-group").arg(group);
            }
            let serve = serve
                .code("--pid-file")
                .arg(file("pid"))
                .code("--log")
                .arg(file("log"))
                .code("--connect-timeout")
                .arg(options.ready_timeout.as_secs().max(1).to_string())
                .code("--detach");
            let pid = run(&mut session, &serve).map_err(failed)?;
            Ok(pid.trim().parse().ok())
        });
    match outcome {
        Ok(pid) => {
            out.status = Status::Changed;
            out.pid = pid;
        }
        Err((status, message)) => {
            out.status = status;
            out.message = Some(clean(&message));
        }
    }
    out.seconds = seconds_since(started);
    out
}

/// Pass two on one host: wait until its transport answers; on failure, the end of its
/// log says why.
pub fn wait_host(
    plan: &Plan,
    rank: usize,
    options: &Options,
) -> (HostResult, Option<TransportStatus>) {
    let started = Instant::now();
    let mut out = result(plan, rank);
    let remote = &options.remote;
    let name = &plan.hosts[rank].name;
    let file = |suffix| remote.file(name, suffix);
    let outcome = open(plan, rank, &options.ssh).and_then(|mut session| {
        let command = ShellCommand::program(remote.binary())
            .code("status --socket")
            .arg(file("sock"))
            .code("--pid-file")
            .arg(file("pid"))
            .code("--wait")
            .arg(options.ready_timeout.as_secs().max(1).to_string())
            .code("--json");
        match run(&mut session, &command) {
            Ok(stdout) => serde_json::from_str::<TransportStatus>(stdout.trim())
                .map_err(|e| format!("unexpected status reply ({e}): {}", clean(&stdout))),
            Err(e) => {
                let tail = ShellCommand::new("tail -n 5").arg(file("log"));
                let log = run(&mut session, &tail).unwrap_or_default();
                Err(format!("{e}; its log ends:\n{}", clean(log.trim_end())))
            }
        }
    });
    let outcome = outcome.and_then(|status| {
        if over_the_kernel(plan, options.datapath) {
            restore_network(plan, rank, options)?;
        }
        Ok(status)
    });
    let status = match outcome {
        Ok(status) => {
            out.status = Status::Changed;
            out.pid = Some(status.pid);
            Some(status)
        }
        Err(message) => {
            out.message = Some(clean(&message));
            None
        }
    };
    out.seconds = seconds_since(started);
    (out, status)
}

/// Whether the transport runs DPDK over the NIC's kernel interface (a virtual device:
/// af_packet, af_xdp).
fn over_the_kernel(plan: &Plan, datapath: DatapathKind) -> bool {
    datapath == DatapathKind::Dpdk && plan.job.datapath.driver.kernel_driver().is_none()
}

/// DPDK's port start sets the interface's MAC (af_packet: to the one it has), and the
/// kernel flushes an interface's neighbours, the plan's MAC map among them, on any MAC
/// change: the agent puts them back once the transport runs.
fn restore_network(plan: &Plan, rank: usize, options: &Options) -> Result<(), String> {
    let mut session = open(plan, rank, &options.ssh)?;
    let report = super::bootstrap::reapply_network(
        &mut session,
        plan,
        rank,
        &options.remote,
        options.datapath,
    )?;
    match report.error {
        None => Ok(()),
        Some(error) => Err(format!(
            "restoring the network plan after DPDK started: {error}"
        )),
    }
}

/// Starts the transport on `hosts` (every host of the job), waits for each, and returns
/// every host's result and, if all are ready, what the launcher needs.
///
/// A job without all its ranks cannot form, so launch is all or nothing: if a host
/// fails to start, nobody is waited for, and if any host fails, the transports that
/// did start are stopped again.
pub fn launch(
    plan: &Plan,
    hosts: &[usize],
    options: &Options,
    on_progress: &mut dyn FnMut(Progress<'_, HostResult>),
) -> (Vec<HostResult>, Option<Launched>) {
    let mut key = [0u8; JOB_KEY_BYTES];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
    let mut results = parallel::run(
        hosts,
        options.forks,
        |&rank| start_host(plan, rank, options, &key),
        on_progress,
    );
    // (slot in `hosts`, rank) of every host whose transport started.
    let started: Vec<(usize, usize)> = hosts
        .iter()
        .enumerate()
        .filter(|&(slot, _)| results[slot].status == Status::Changed)
        .map(|(slot, &rank)| (slot, rank))
        .collect();
    let mut pids = BTreeMap::new();
    if started.len() == hosts.len() {
        let waited = parallel::run(
            &started,
            options.forks.max(started.len()),
            |&(_, rank)| wait_host(plan, rank, options),
            &mut |_| {},
        );
        for (&(slot, rank), (result, status)) in started.iter().zip(waited) {
            if let Some(status) = status {
                pids.insert(rank, status.pid);
            }
            results[slot] = result;
        }
    }
    let missing: Vec<&str> = results
        .iter()
        .filter(|r| r.status != Status::Changed)
        .map(|r| r.host.as_str())
        .collect();
    if missing.is_empty() {
        return (results, Some(launched(plan, options, &pids)));
    }
    let why = format!("the job cannot form without {}", missing.join(", "));
    let stopped = parallel::run(
        &started,
        options.forks,
        |&(_, rank)| stop_host(plan, rank, &options.ssh, &options.remote),
        &mut |_| {},
    );
    for (&(slot, _), stop) in started.iter().zip(stopped) {
        let result = &mut results[slot];
        let stopped = if stop.status == Status::Changed {
            "stopped again"
        } else {
            "it is no longer running"
        };
        match (result.status, stop.message) {
            (Status::Changed, None) => {
                result.status = Status::Ok;
                result.message = Some(format!("started, then {stopped}: {why}"));
            }
            (_, None) => {
                let message = result.message.take().unwrap_or_default();
                result.message = Some(format!("{message}; {stopped}"));
            }
            (_, Some(e)) => {
                result.status = Status::Failed;
                let message = result.message.take().unwrap_or_else(|| why.clone());
                result.message = Some(format!("{message}; could not stop it again: {e}"));
            }
        }
        result.pid = None;
    }
    (results, None)
}

fn launched(plan: &Plan, options: &Options, pids: &BTreeMap<usize, u32>) -> Launched {
    Launched {
        job_id: plan.job.job_id,
        world_size: plan.job.world_size,
        datapath: options.datapath,
        ranks: plan
            .hosts
            .iter()
            .enumerate()
            .map(|(rank, host)| RankInfo {
                rank: host.rank,
                host: host.name.clone(),
                mgmt: endpoint(plan, rank),
                ip: host.nic.ip,
                path_addresses: host.path_addresses.iter().map(|p| p.address).collect(),
                socket: options.remote.file(&host.name, "sock"),
                pid: pids.get(&rank).copied(),
                env: environment(plan, rank, &options.remote, options.datapath),
            })
            .collect(),
        groups: Pattern::divide_and_shuffle(&Rack::of_plan(plan), &Contention::default()),
    }
}

/// Stops the transport on one host; stopping one that is not running is `ok`.
pub fn stop_host(plan: &Plan, rank: usize, ssh: &SshOptions, remote: &Remote) -> HostResult {
    let started = Instant::now();
    let mut out = result(plan, rank);
    let name = &plan.hosts[rank].name;
    let outcome = open(plan, rank, ssh)
        .map_err(|e| (Status::Unreachable, e))
        .and_then(|mut session| {
            let command = ShellCommand::program(remote.binary())
                .code("stop --pid-file")
                .arg(remote.file(name, "pid"));
            run(&mut session, &command).map_err(|e| (Status::Failed, e))
        });
    match outcome {
        Ok(stdout) => match stdout.trim().strip_prefix("stopped ") {
            Some(pid) => {
                out.status = Status::Changed;
                out.pid = pid.parse().ok();
            }
            None => out.status = Status::Ok,
        },
        Err((status, message)) => {
            out.status = status;
            out.message = Some(clean(&message));
        }
    }
    out.seconds = seconds_since(started);
    out
}
