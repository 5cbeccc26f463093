//! Hosts: bootstrap (the host agent applies its network plan), launch (the transport
//! starts on every host), stop — each over one SSH session per host, `forks` at a time.
//!
//! Every file mltctl keeps on a host lives in one directory ([`Remote`]), named after
//! the host, so several hosts may even share a filesystem.

pub mod bootstrap;
pub mod launch;
pub mod probe;

use std::collections::BTreeMap;
use std::time::Instant;

use endhost_core::config::{Collective, DatapathKind};

use mlt_common::names::check_name;
use mlt_common::redact::clean;
use mlt_common::shell::{ShellCommand, quote};

use crate::plan::Plan;
use crate::ssh::{SshOptions, SshSession};
use mlt_common::outcome::{Status, Summary};

/// Where mltctl's files live on every host: one absolute directory, and in it only
/// files named after a host (checked when the value is made, so every path it gives
/// stays inside the directory).
#[derive(Debug, Clone)]
pub struct Remote {
    dir: String,
}

impl Remote {
    /// `dir` for the hosts of `plan`; refused unless it is an absolute path without `.`
    /// or `..` parts or control characters, and every host name is a plain file name.
    pub fn new(dir: &str, plan: &Plan) -> Result<Remote, String> {
        let dir = dir.trim_end_matches('/');
        let parts_ok = dir
            .split('/')
            .skip(1)
            .all(|part| !part.is_empty() && part != "." && part != "..");
        if !dir.starts_with('/') || !parts_ok || dir.chars().any(char::is_control) {
            return Err(format!(
                "--remote-dir {}: give an absolute directory without `.` or `..` parts",
                quote(dir)
            ));
        }
        if let Some(host) = plan.hosts.iter().find(|h| check_name(&h.name).is_err()) {
            return Err(format!(
                "host name {} cannot name a file",
                quote(&host.name)
            ));
        }
        Ok(Remote {
            dir: dir.to_string(),
        })
    }

    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The `endhost` binary bootstrap uploads.
    pub fn binary(&self) -> String {
        format!("{}/endhost", self.dir)
    }

    /// `DIR/HOST.SUFFIX`: network.json, transport.json, ipmac, env, pid, log, sock.
    pub fn file(&self, host: &str, suffix: &str) -> String {
        format!("{}/{host}.{suffix}", self.dir)
    }
}

/// The environment a training process on host `rank` runs with: what torchrun needs
/// (its own `PET_*` variables, so `torchrun train.py` needs no arguments), what
/// torch.distributed needs without a launcher (one process per host), OptiReduce's
/// variables where they mean what OptiReduce means (for its gloo integration), and ours
/// (for the launched transport and the `mlt_transport` hook).
pub fn environment(
    plan: &Plan,
    rank: usize,
    remote: &Remote,
    datapath: DatapathKind,
) -> BTreeMap<String, String> {
    let host = &plan.hosts[rank];
    let job = &plan.job;
    let launcher = &plan.launcher;
    let first_core = host.cores.first().copied().unwrap_or(0);
    let mut env = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    let master_addr = plan.hosts[0].nic.ip.to_string();
    set("MASTER_ADDR", master_addr.clone());
    set("MASTER_PORT", launcher.master_port.to_string());
    set(
        "WORLD_SIZE",
        (job.world_size * launcher.procs_per_host).to_string(),
    );
    set("LOCAL_WORLD_SIZE", launcher.procs_per_host.to_string());
    if launcher.procs_per_host == 1 {
        // Each process of several per host gets its own from the launcher.
        set("RANK", host.rank.to_string());
        set("LOCAL_RANK", "0".into());
    }
    set("PET_NNODES", job.world_size.to_string());
    set("PET_NPROC_PER_NODE", launcher.procs_per_host.to_string());
    set("PET_NODE_RANK", host.rank.to_string());
    set("PET_MASTER_ADDR", master_addr);
    set("PET_MASTER_PORT", launcher.master_port.to_string());
    // torchrun's default `--redirects 0` and `--tee 0` crash the torchrun of Debian 12's
    // python3-torch 1.13 on Python 3.11 (its Std.from_str("0") returns None there): a
    // setting for a local rank that does not exist means the same — nothing redirected.
    let no_local_rank = format!("{}:0", launcher.procs_per_host);
    set("PET_REDIRECTS", no_local_rank.clone());
    set("PET_TEE", no_local_rank);
    set("GLOO_SOCKET_IFNAME", host.nic.name.clone());
    if job.collective == Collective::Transpose {
        set("GLOO_ALGO", "Optireduce".into());
    }
    set("GLOO_DPDK_CONFIG", remote.file(&host.name, "ipmac"));
    set("GLOO_DPDK_THREADS_OFFSET", first_core.to_string());
    set("GLOO_DPDK_TIMEOUT", job.timeouts.phase_ms.to_string());
    set("GLOO_DPDK_FILE_PREFIX", host.name.clone());
    set("MLT_HOST", host.name.clone());
    set("MLT_RANK", host.rank.to_string());
    set("MLT_WORLD_SIZE", job.world_size.to_string());
    set("MLT_JOB_ID", job.job_id.to_string());
    set("MLT_LOSS_BOUND", job.loss_bound.to_string());
    set(
        "MLT_COLLECTIVE",
        serde_json::to_value(job.collective)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    );
    set(
        "MLT_DATAPATH",
        match datapath {
            DatapathKind::Udp => "udp",
            DatapathKind::Dpdk => "dpdk",
        }
        .into(),
    );
    set("MLT_CONFIG", remote.file(&host.name, "transport.json"));
    set("MLT_SOCKET", remote.file(&host.name, "sock"));
    set("MLT_LOCAL_RANKS", launcher.procs_per_host.to_string());
    env
}

/// `environment` as a file a shell can source.
pub fn env_file(env: &BTreeMap<String, String>) -> String {
    env.iter()
        .map(|(k, v)| format!("export {k}={}\n", quote(v)))
        .collect()
}

/// A session to a host, or why there is none.
fn open(plan: &Plan, rank: usize, ssh: &SshOptions) -> Result<SshSession, String> {
    SshSession::open(&plan.hosts[rank].mgmt, ssh).map_err(|e| clean(&e.to_string()))
}

/// `host:port` of a host's management address.
fn endpoint(plan: &Plan, rank: usize) -> String {
    let mgmt = &plan.hosts[rank].mgmt;
    format!("{}:{}", mgmt.address, mgmt.port)
}

/// Runs `command` and returns its standard output, or a message with its standard error
/// (a host's text is data: control characters escaped, key material redacted).
fn run(session: &mut SshSession, command: &ShellCommand) -> Result<String, String> {
    let output = session
        .exec(command)
        .map_err(|e| format!("`{command}`: {e}"))?;
    if output.status == 0 {
        Ok(output.stdout)
    } else {
        let detail = if output.stderr.trim().is_empty() {
            output.stdout.trim().to_string()
        } else {
            output.stderr.trim().to_string()
        };
        Err(format!(
            "`{command}` exited with {}: {}",
            output.status,
            clean(&detail)
        ))
    }
}

/// Makes the remote directory (if missing) and checks it can be trusted: a real
/// directory (not a link) of the SSH user or root that its group and others cannot
/// write, below directories of the SSH user or root that nobody else can write either
/// (unless sticky, as `/tmp` is); else another user of the host could swap what mltctl
/// puts there (the binary it runs, the job's key).
fn trusted_remote_dir(session: &mut SshSession, dir: &str) -> Result<(), String> {
    run(session, &ShellCommand::new("mkdir -p -m 0755").arg(dir))?;
    let me = run(session, &ShellCommand::new("id -u"))?;
    let me = me.trim();
    let own = run(
        session,
        &ShellCommand::new("stat -c '%u %a %F' --").arg(dir),
    )?;
    let mut ancestors = Vec::new();
    let mut at = dir;
    while let Some(cut) = at.rfind('/') {
        at = &dir[..cut];
        ancestors.push(if at.is_empty() { "/" } else { at });
    }
    let mut stat = ShellCommand::new("stat -L -c '%u %a' --");
    for ancestor in &ancestors {
        stat = stat.arg(*ancestor);
    }
    let above = run(session, &stat)?;
    let refuse = |path: &str, why: String| {
        Err(format!(
            "{path} {why}: refused, since another user could change what mltctl puts there"
        ))
    };
    let mut fields = own.split_whitespace();
    let (owner, mode) = (
        fields.next().unwrap_or_default(),
        fields.next().unwrap_or_default(),
    );
    let kind = fields.collect::<Vec<_>>().join(" ");
    if kind != "directory" {
        return Err(format!(
            "{dir} is a {}, not a directory: refused",
            clean(&kind)
        ));
    }
    let lines = std::iter::once((dir, owner, mode, false)).chain(
        ancestors.iter().zip(above.lines()).map(|(path, line)| {
            let mut fields = line.split_whitespace();
            (
                *path,
                fields.next().unwrap_or_default(),
                fields.next().unwrap_or_default(),
                true,
            )
        }),
    );
    for (path, owner, mode, sticky_allowed) in lines {
        let Ok(mode) = u32::from_str_radix(mode, 8) else {
            return Err(format!("cannot read the mode of {path}: {}", clean(mode)));
        };
        if owner != me && owner != "0" {
            return refuse(
                path,
                format!(
                    "belongs to uid {}, not to the SSH user (uid {}) or root",
                    clean(owner),
                    clean(me)
                ),
            );
        }
        if mode & 0o022 != 0 && !(sticky_allowed && mode & 0o1000 != 0) {
            return refuse(
                path,
                format!("is writable by its group or others (mode {mode:o}; chmod go-w it)"),
            );
        }
    }
    if above.lines().count() != ancestors.len() {
        return Err(format!("cannot check the directories above {dir}"));
    }
    Ok(())
}

fn seconds_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

/// Text for one host's line in a run's output.
pub fn status_line(host: &str, endpoint: &str, status: Status, detail: &str) -> String {
    if detail.is_empty() {
        format!("{host} ({endpoint}): {status}\n")
    } else {
        format!("{host} ({endpoint}): {status}: {detail}\n")
    }
}

/// The summary line of a run over hosts.
pub fn summary_line(what: &str, summary: &Summary, seconds: f64) -> String {
    format!(
        "{what}: {} ok, {} changed, {} failed, {} unreachable in {seconds:.1} s\n",
        summary.ok, summary.changed, summary.failed, summary.unreachable
    )
}
