//! SONiC: the generic config updater. A checkpoint saves the running configuration,
//! `config apply-patch` applies the JSON patch and `config rollback` returns to the
//! checkpoint. SONiC has no commit-confirm of its own, so a systemd timer (SONiC runs
//! systemd) rolls back to the checkpoint unless the commit is confirmed in time.

use std::time::Duration;

use super::{Device, PushError, Transport, run};

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
}

impl Device for Sonic {
    fn get_running(&mut self, t: &mut dyn Transport) -> Result<String, PushError> {
        run(t, "sonic-cfggen -d --print-data", "")
    }

    fn load_candidate(
        &mut self,
        t: &mut dyn Transport,
        patch: &str,
        _running: &str,
    ) -> Result<(), PushError> {
        run(t, &format!("cat > {}", self.patch_file), patch).map(drop)
    }

    fn compare(&mut self, t: &mut dyn Transport) -> Result<String, PushError> {
        run(
            t,
            &format!("sudo config apply-patch --dry-run {}", self.patch_file),
            "",
        )
    }

    fn commit(&mut self, t: &mut dyn Transport, revert_in: Duration) -> Result<(), PushError> {
        let (checkpoint, timer) = (&self.checkpoint, &self.timer);
        let command = format!(
            "sudo config checkpoint {checkpoint} \
             && sudo systemd-run --unit={timer} --on-active={} config rollback {checkpoint} \
             && sudo config apply-patch {}",
            revert_in.as_secs(),
            self.patch_file
        );
        run(t, &command, "").map(drop)
    }

    fn confirm(&mut self, t: &mut dyn Transport) -> Result<(), PushError> {
        let command = format!(
            "sudo systemctl stop {}.timer && sudo config save -y \
             && sudo config delete-checkpoint {} && rm -f {}",
            self.timer, self.checkpoint, self.patch_file
        );
        run(t, &command, "").map(drop)
    }

    fn discard(&mut self, t: &mut dyn Transport) -> Result<(), PushError> {
        run(t, &format!("rm -f {}", self.patch_file), "").map(drop)
    }

    fn rollback(&mut self, t: &mut dyn Transport) -> Result<(), PushError> {
        // The timer may have fired or never started; the checkpoint decides.
        let command = format!(
            "sudo systemctl stop {timer}.timer; sudo config rollback {checkpoint} \
             && sudo config delete-checkpoint {checkpoint} && rm -f {patch}",
            timer = self.timer,
            checkpoint = self.checkpoint,
            patch = self.patch_file
        );
        run(t, &command, "").map(drop)
    }

    fn reverts_by_itself(&self) -> bool {
        true
    }
}
