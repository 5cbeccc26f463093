//! NVIDIA Cumulus Linux (NVUE): `nv set`/`nv unset` build a pending revision,
//! `nv config diff` shows it, `nv config apply --confirm` applies it and reverts unless
//! `--confirm-yes` follows in time; `--confirm-no` reverts at once, `nv config detach`
//! drops a pending revision, `nv config save` keeps the applied one for the next boot.

use std::time::Duration;

use crate::push::{Device, PushError, Session, run};
use mlt_common::shell::ShellCommand;

pub struct Cumulus;

impl Device for Cumulus {
    fn get_running(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        run(
            t,
            &ShellCommand::new("nv config show -r applied -o commands"),
            "",
        )
    }

    fn load_candidate(
        &mut self,
        t: &mut dyn Session,
        commands: &str,
        _running: &str,
    ) -> Result<(), PushError> {
        // One shell reads the commands and stops at the first that fails. The commands
        // come from the NVUE template, which quotes every word it did not write itself.
        let script = format!("nv config detach\n{commands}");
        run(t, &ShellCommand::new("sh -es"), &script).map(drop)
    }

    fn compare(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        run(t, &ShellCommand::new("nv config diff -o commands"), "")
    }

    fn commit(&mut self, t: &mut dyn Session, revert_in: Duration) -> Result<(), PushError> {
        let command = ShellCommand::new("nv config apply --confirm")
            .arg(format!("{}s", revert_in.as_secs()))
            .code("-y");
        run(t, &command, "").map(drop)
    }

    fn confirm(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        // Releases before 5.9 do not save on apply.
        let command = ShellCommand::new("nv config apply --confirm-yes")
            .and(ShellCommand::new("nv config save"));
        run(t, &command, "").map(drop)
    }

    fn discard(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        run(t, &ShellCommand::new("nv config detach"), "").map(drop)
    }

    fn rollback(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        run(t, &ShellCommand::new("nv config apply --confirm-no"), "").map(drop)
    }

    fn reverts_by_itself(&self) -> bool {
        true
    }
}
