//! What `mltctl verify` asks a host over SSH: who its launched transport runs as (its
//! classes' DSCPs, MTU, path addresses), whether its network still matches the plan,
//! and class probe bursts with what arrived.

use endhost_core::daemon::{ProbeReply, TransportStatus};
use endhost_core::host::Report;
use mlt_common::outcome::Status;
use mlt_common::redact::clean;
use mlt_common::shell::ShellCommand;
use serde::de::DeserializeOwned;

use super::{Remote, open, run};
use crate::plan::Plan;
use crate::ssh::{SshOptions, SshSession};

/// Why a host could not be asked: unreachable, or failed with a message.
pub type Unasked = (Status, String);

/// One SSH session to a host's transport.
pub struct TransportAsker<'a> {
    session: SshSession,
    remote: &'a Remote,
    host: &'a str,
}

impl<'a> TransportAsker<'a> {
    pub fn open(
        plan: &'a Plan,
        rank: usize,
        ssh: &SshOptions,
        remote: &'a Remote,
    ) -> Result<Self, Unasked> {
        let session = open(plan, rank, ssh).map_err(|e| (Status::Unreachable, e))?;
        Ok(TransportAsker {
            session,
            remote,
            host: &plan.hosts[rank].name,
        })
    }

    /// The endhost binary on the host.
    fn endhost(&self) -> ShellCommand {
        ShellCommand::program(self.remote.binary())
    }

    /// Runs `command --socket SOCK --json` and reads its line.
    fn ask<T: DeserializeOwned>(&mut self, command: ShellCommand) -> Result<T, Unasked> {
        let line = command
            .code("--socket")
            .arg(self.remote.file(self.host, "sock"));
        let out = run(&mut self.session, &line.code("--json")).map_err(|e| {
            (
                Status::Failed,
                format!("{e} (is the transport launched? mltctl launch)"),
            )
        })?;
        serde_json::from_str(out.trim()).map_err(|e| {
            (
                Status::Failed,
                format!("unexpected reply from the transport ({e}): {}", clean(&out)),
            )
        })
    }

    pub fn status(&mut self) -> Result<TransportStatus, Unasked> {
        let command = self.endhost().code("status");
        self.ask(command)
    }

    /// What the host's network lacks of host `rank`'s plan or contradicts in it
    /// (`endhost configure --check`).
    pub fn network(&mut self, plan: &Plan, rank: usize) -> Result<Report, Unasked> {
        super::bootstrap::check_network(&mut self.session, plan, rank, self.remote)
            .map_err(|e| (Status::Failed, format!("checking the host's network: {e}")))
    }

    /// Sends `per_path` probes of `class` to every peer (or to rank `to`) on every
    /// path (0: none), at time `at` (Unix seconds) or at once, and returns the reply
    /// with what has arrived so far.
    pub fn probe(
        &mut self,
        class: u8,
        per_path: u32,
        to: Option<u32>,
        at: Option<f64>,
    ) -> Result<ProbeReply, Unasked> {
        let mut command = self
            .endhost()
            .code("probe --class")
            .arg(class.to_string())
            .code("--per-path")
            .arg(per_path.to_string());
        if let Some(rank) = to {
            command = command.code("--to").arg(rank.to_string());
        }
        if let Some(at) = at {
            command = command.code("--at").arg(format!("{at:.3}"));
        }
        self.ask(command)
    }
}
