//! SONiC: the generic config updater. A checkpoint saves the running configuration,
//! `config apply-patch` applies the JSON patch and `config rollback` returns to the
//! checkpoint. SONiC has no commit-confirm of its own, so a systemd timer (SONiC runs
//! systemd) rolls back to the checkpoint unless the commit is confirmed in time.

use std::time::Duration;

use crate::push::{Device, PushError, Transport, run};
use crate::shell::ShellCommand;

pub struct Sonic {
    checkpoint: String,
    patch_file: String,
    timer: String,
}

impl Sonic {
    pub fn new(change_id: &str, switch: &str) -> Self {
        Sonic {
            checkpoint: change_id.to_string(),
            // Named after the switch too: a file's name should say whose it is.
            patch_file: format!("/tmp/{change_id}-{switch}.json-patch"),
            timer: format!("{change_id}-revert"),
        }
    }

    fn remove_patch(&self) -> ShellCommand {
        ShellCommand::new("rm -f").arg(&self.patch_file)
    }

    fn delete_checkpoint(&self) -> ShellCommand {
        ShellCommand::new("sudo config delete-checkpoint").arg(&self.checkpoint)
    }

    fn stop_timer(&self) -> ShellCommand {
        ShellCommand::new("sudo systemctl stop").arg(format!("{}.timer", self.timer))
    }
}

impl Device for Sonic {
    fn get_running(&mut self, t: &mut dyn Transport) -> Result<String, PushError> {
        run(t, &ShellCommand::new("sonic-cfggen -d --print-data"), "")
    }

    fn load_candidate(
        &mut self,
        t: &mut dyn Transport,
        patch: &str,
        _running: &str,
    ) -> Result<(), PushError> {
        let command = ShellCommand::new("cat").code(">").arg(&self.patch_file);
        run(t, &command, patch).map(drop)
    }

    fn compare(&mut self, t: &mut dyn Transport) -> Result<String, PushError> {
        let command = ShellCommand::new("sudo config apply-patch --dry-run").arg(&self.patch_file);
        run(t, &command, "")
    }

    fn commit(&mut self, t: &mut dyn Transport, revert_in: Duration) -> Result<(), PushError> {
        let command = ShellCommand::new("sudo config checkpoint")
            .arg(&self.checkpoint)
            .and(
                ShellCommand::new("sudo systemd-run")
                    .arg(format!("--unit={}", self.timer))
                    .arg(format!("--on-active={}", revert_in.as_secs()))
                    .code("config rollback")
                    .arg(&self.checkpoint),
            )
            .and(ShellCommand::new("sudo config apply-patch").arg(&self.patch_file));
        run(t, &command, "").map(drop)
    }

    fn confirm(&mut self, t: &mut dyn Transport) -> Result<(), PushError> {
        let command = self
            .stop_timer()
            .and(ShellCommand::new("sudo config save -y"))
            .and(self.delete_checkpoint())
            .and(self.remove_patch());
        run(t, &command, "").map(drop)
    }

    fn discard(&mut self, t: &mut dyn Transport) -> Result<(), PushError> {
        run(t, &self.remove_patch(), "").map(drop)
    }

    fn rollback(&mut self, t: &mut dyn Transport) -> Result<(), PushError> {
        // The timer may have fired or never started; the checkpoint decides.
        let command = self.stop_timer().then(
            ShellCommand::new("sudo config rollback")
                .arg(&self.checkpoint)
                .and(self.delete_checkpoint())
                .and(self.remove_patch()),
        );
        run(t, &command, "").map(drop)
    }

    fn reverts_by_itself(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::tests::Recorder;

    #[test]
    fn names_reach_the_shell_as_single_words() {
        let mut t = Recorder::default();
        let mut sonic = Sonic::new("mltctl-1", "leaf;reboot");
        sonic.load_candidate(&mut t, "[]", "").unwrap();
        sonic.commit(&mut t, Duration::from_secs(60)).unwrap();
        sonic.rollback(&mut t).unwrap();
        assert_eq!(
            t.sent,
            [
                "exec cat > '/tmp/mltctl-1-leaf;reboot.json-patch'\n[]",
                "exec sudo config checkpoint mltctl-1 && sudo systemd-run --unit=mltctl-1-revert \
                 --on-active=60 config rollback mltctl-1 && sudo config apply-patch \
                 '/tmp/mltctl-1-leaf;reboot.json-patch'\n",
                "exec sudo systemctl stop mltctl-1-revert.timer; sudo config rollback mltctl-1 \
                 && sudo config delete-checkpoint mltctl-1 && rm -f \
                 '/tmp/mltctl-1-leaf;reboot.json-patch'\n",
            ]
        );
    }
}
