//! SONiC: the generic config updater. A checkpoint saves the running configuration,
//! `config apply-patch` applies the JSON patch and `config rollback` returns to the
//! checkpoint. SONiC has no commit-confirm of its own, so a systemd timer (SONiC runs
//! systemd) rolls back to the checkpoint unless the commit is confirmed in time.
//!
//! The patch is applied with sudo, so it is staged where no other user of the switch
//! can write or swap it: a fresh `mktemp -d` directory (0700, unguessable name), removed
//! as soon as the patch is applied or dropped.

use std::time::Duration;

use crate::push::{Device, PushError, Session, run, run_then};
use mlt_common::shell::ShellCommand;

pub struct Sonic {
    checkpoint: String,
    /// The private directory the patch is staged in, once made.
    staging: Option<String>,
    timer: String,
    /// The dry run the staging's shell ran, until compare asks.
    dry_run: Option<Result<String, PushError>>,
}

/// What `mktemp -d /tmp/mltctl-patch.XXXXXXXXXX` answers starts with; ten random
/// letters and digits follow.
const STAGING_PREFIX: &str = "/tmp/mltctl-patch.";

impl Sonic {
    pub fn new(change_id: &str) -> Self {
        Sonic {
            checkpoint: change_id.to_string(),
            staging: None,
            timer: format!("{change_id}-revert"),
            dry_run: None,
        }
    }

    fn patch_file(&self) -> Result<String, PushError> {
        self.staging
            .as_ref()
            .map(|dir| format!("{dir}/patch.json"))
            .ok_or_else(|| PushError::Rejected {
                command: "config apply-patch".into(),
                message: "no patch was staged".into(),
            })
    }

    /// Removes the staging directory (and the patch in it), if one was made.
    fn remove_patch(&mut self) -> Option<ShellCommand> {
        self.staging
            .take()
            .map(|dir| ShellCommand::new("rm -rf").arg(dir))
    }

    fn delete_checkpoint(&self) -> ShellCommand {
        ShellCommand::new("sudo config delete-checkpoint").arg(&self.checkpoint)
    }

    /// The commit: a checkpoint, the revert timer, the patch applied, and the staged
    /// patch removed whatever happened.
    fn commit_command(&mut self, revert_in: Duration) -> Result<ShellCommand, PushError> {
        let patch = self.patch_file()?;
        let apply = ShellCommand::new("sudo config checkpoint")
            .arg(&self.checkpoint)
            .and(
                ShellCommand::new("sudo systemd-run")
                    .arg(format!("--unit={}", self.timer))
                    .arg(format!("--on-active={}", revert_in.as_secs()))
                    .code("config rollback")
                    .arg(&self.checkpoint),
            )
            .and(ShellCommand::new("sudo config apply-patch").arg(patch));
        // Applied or not, the staged patch has served (rollback uses the checkpoint): the
        // shell removes it on its way out, and its status stays the commit's.
        let command = match self.staging.take() {
            Some(dir) => ShellCommand::new("trap")
                .arg(format!("rm -rf {}", mlt_common::shell::quote(&dir)))
                .code("EXIT")
                .and(apply),
            None => apply,
        };
        Ok(command)
    }

    fn stop_timer(&self) -> ShellCommand {
        ShellCommand::new("sudo systemctl stop").arg(format!("{}.timer", self.timer))
    }
}

/// What prints the running configuration (CONFIG_DB as JSON).
fn read_command() -> ShellCommand {
    ShellCommand::new("sonic-cfggen -d --print-data")
}

impl Device for Sonic {
    fn get_running(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        run(t, &read_command(), "")
    }

    fn load_candidate(
        &mut self,
        t: &mut dyn Session,
        patch: &str,
        _running: &str,
    ) -> Result<(), PushError> {
        if let Some(old) = self.remove_patch() {
            run(t, &old, "")?;
        }
        self.dry_run = None;
        // One round trip: the patch goes into the directory `mktemp -d` makes, on the
        // switch, never into a path the switch answers (a directory it could not fill
        // is removed); the answer names it for the commands after, once checked. The
        // same shell then runs the dry run compare asks for.
        let write =
            ShellCommand::new("{ cat > \"$d/patch.json\"").code("|| { rm -rf \"$d\"; exit 1; }; }");
        let stage = ShellCommand::new("d=$(mktemp -d /tmp/mltctl-patch.XXXXXXXXXX)")
            .and(write)
            .and(ShellCommand::new("printf '%s\\n' \"$d\""));
        let dry_run = ShellCommand::new("sudo config apply-patch --dry-run \"$d/patch.json\"");
        let (made, dry_run) = run_then(t, &stage, &dry_run, patch)?;
        let dir = made.trim();
        let random = dir.strip_prefix(STAGING_PREFIX).unwrap_or_default();
        if random.len() != 10 || !random.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(PushError::Rejected {
                command: stage.to_string(),
                message: format!(
                    "it answered {}, not a new directory of that name",
                    mlt_common::redact::shown(dir)
                ),
            });
        }
        self.staging = Some(dir.to_string());
        self.dry_run = Some(dry_run);
        Ok(())
    }

    fn compare(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        if let Some(dry_run) = self.dry_run.take() {
            return dry_run;
        }
        let command =
            ShellCommand::new("sudo config apply-patch --dry-run").arg(self.patch_file()?);
        run(t, &command, "")
    }

    fn commit(&mut self, t: &mut dyn Session, revert_in: Duration) -> Result<(), PushError> {
        let command = self.commit_command(revert_in)?;
        run(t, &command, "").map(drop)
    }

    fn commit_then_read(
        &mut self,
        t: &mut dyn Session,
        revert_in: Duration,
    ) -> Result<Result<String, PushError>, PushError> {
        let command = self.commit_command(revert_in)?;
        run_then(t, &command, &read_command(), "").map(|(_, read)| read)
    }

    fn confirm(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        let command = self
            .stop_timer()
            .and(ShellCommand::new("sudo config save -y"))
            .and(self.delete_checkpoint());
        run(t, &command, "").map(drop)
    }

    fn discard(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        match self.remove_patch() {
            Some(remove) => run(t, &remove, "").map(drop),
            None => Ok(()),
        }
    }

    fn rollback(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        // The timer may have fired or never started; the checkpoint decides.
        let mut undo = ShellCommand::new("sudo config rollback")
            .arg(&self.checkpoint)
            .and(self.delete_checkpoint());
        if let Some(remove) = self.remove_patch() {
            undo = undo.and(remove);
        }
        let command = self.stop_timer().then(undo);
        run(t, &command, "").map(drop)
    }

    fn reverts_by_itself(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::Output;
    use crate::push::tests::Recorder;

    /// The patch goes to a directory `mktemp -d` made (never a name another user of the
    /// switch could guess and make first), every name reaches the shell as one word,
    /// and the directory is removed once the patch is applied.
    #[test]
    fn the_patch_is_staged_in_a_private_directory_and_removed() {
        let mut t = Recorder {
            reply: Output {
                stdout: "/tmp/mltctl-patch.Ab3dE6gH9k\n\n--- mltctl: the next step ---\n\
                         Patch would be applied\n"
                    .into(),
                ..Output::default()
            },
            ..Recorder::default()
        };
        let mut sonic = Sonic::new("mltctl-1;reboot");
        sonic.load_candidate(&mut t, "[]", "").unwrap();
        assert_eq!(sonic.compare(&mut t).unwrap(), "Patch would be applied\n");
        let read = sonic.commit_then_read(&mut t, Duration::from_secs(60));
        assert_eq!(read.unwrap().unwrap(), "Patch would be applied\n");
        sonic.rollback(&mut t).unwrap();
        assert_eq!(
            t.sent,
            [
                "exec d=$(mktemp -d /tmp/mltctl-patch.XXXXXXXXXX) && { cat > \"$d/patch.json\" \
                 || { rm -rf \"$d\"; exit 1; }; } && printf '%s\\n' \"$d\" && printf '\\n%s\\n' \
                 '--- mltctl: the next step ---' && sudo config apply-patch --dry-run \
                 \"$d/patch.json\"\n[]",
                "exec trap 'rm -rf /tmp/mltctl-patch.Ab3dE6gH9k' EXIT && sudo config checkpoint \
                 'mltctl-1;reboot' && sudo systemd-run '--unit=mltctl-1;reboot-revert' \
                 --on-active=60 config rollback 'mltctl-1;reboot' && sudo config apply-patch \
                 /tmp/mltctl-patch.Ab3dE6gH9k/patch.json && printf '\\n%s\\n' \
                 '--- mltctl: the next step ---' && sonic-cfggen -d --print-data\n",
                "exec sudo systemctl stop 'mltctl-1;reboot-revert.timer'; sudo config rollback \
                 'mltctl-1;reboot' && sudo config delete-checkpoint 'mltctl-1;reboot'\n",
            ]
        );
    }

    /// A dry run that fails is compare's failure: the patch stays staged, so that the
    /// discard after it removes it.
    #[test]
    fn a_failed_dry_run_fails_compare_and_the_patch_is_still_removed() {
        let mut t = Recorder {
            reply: Output {
                stdout: "/tmp/mltctl-patch.Ab3dE6gH9k\n\n--- mltctl: the next step ---\n".into(),
                stderr: "Error: the patch breaks YANG validation\n".into(),
                status: 1,
            },
            ..Recorder::default()
        };
        let mut sonic = Sonic::new("mltctl-1");
        sonic.load_candidate(&mut t, "[]", "").unwrap();
        let err = sonic.compare(&mut t).unwrap_err().to_string();
        assert!(err.contains("--dry-run"), "{err}");
        assert!(err.contains("YANG validation"), "{err}");
        let _ = sonic.discard(&mut t);
        assert_eq!(t.sent.len(), 2, "{:?}", t.sent);
        assert_eq!(t.sent[1], "exec rm -rf /tmp/mltctl-patch.Ab3dE6gH9k\n");
    }

    /// A switch that answers `mktemp -d` with a path of its choosing (a link it made,
    /// another directory) is refused: no later command names that path.
    #[test]
    fn an_unexpected_staging_directory_is_refused() {
        for answer in ["/etc\n", "/tmp/mltctl-patch.x/../../etc\n", "\n"] {
            let mut t = Recorder {
                reply: Output {
                    stdout: format!("{answer}\n--- mltctl: the next step ---\n"),
                    ..Output::default()
                },
                ..Recorder::default()
            };
            let mut sonic = Sonic::new("mltctl-1");
            assert!(
                sonic.load_candidate(&mut t, "[]", "").is_err(),
                "{answer:?}"
            );
            assert!(sonic.compare(&mut t).is_err(), "{answer:?}");
            assert!(sonic.commit(&mut t, Duration::from_secs(60)).is_err());
            assert_eq!(t.sent.len(), 1, "only the staging for {answer:?}");
        }
    }
}
