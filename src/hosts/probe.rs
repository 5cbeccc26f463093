//! What `mltctl verify` asks a launched transport over SSH: who it runs as (its
//! classes' DSCPs, MTU, path addresses), and class probe bursts with what arrived.

use endhost_core::daemon::{ProbeReply, TransportStatus};
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

    /// Runs `endhost COMMAND --socket SOCK [FLAG VALUE]... --json` and reads its line.
    fn ask<T: DeserializeOwned>(
        &mut self,
        command: &'static str,
        options: &[(&'static str, String)],
    ) -> Result<T, Unasked> {
        let mut line = ShellCommand::program(self.remote.binary())
            .code(command)
            .code("--socket")
            .arg(self.remote.file(self.host, "sock"));
        for (flag, value) in options {
            line = line.code(flag).arg(value);
        }
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
        self.ask("status", &[])
    }

    /// Sends `per_path` probes of `class` to every peer on every path (0: none) and
    /// returns the reply with what has arrived so far.
    pub fn probe(&mut self, class: u8, per_path: u32) -> Result<ProbeReply, Unasked> {
        self.ask(
            "probe",
            &[
                ("--class", class.to_string()),
                ("--per-path", per_path.to_string()),
            ],
        )
    }
}
