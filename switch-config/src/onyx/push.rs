//! NVIDIA Onyx: no candidate configuration and no revert timer. Commands take effect
//! line by line in `configure terminal`; `configuration write` keeps them across a
//! reboot. Rollback is emulated from the saved copy of the running configuration: the
//! owned parts that differ from it are put back with the same commands a diff would
//! send.

use std::time::Duration;

use crate::SwitchIntent;
use crate::push::{Device, PushError, Session, run_cli};

pub struct Onyx<'a> {
    intent: &'a SwitchIntent,
    /// What the switch ran before the change, and the change itself.
    staged: Option<(String, String)>,
}

impl<'a> Onyx<'a> {
    pub fn new(intent: &'a SwitchIntent) -> Self {
        Onyx {
            intent,
            staged: None,
        }
    }
}

fn configure(t: &mut dyn Session, commands: &str) -> Result<(), PushError> {
    run_cli(t, &format!("enable\nconfigure terminal\n{commands}exit\n")).map(drop)
}

impl Device for Onyx<'_> {
    fn get_running(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        run_cli(t, "enable\nshow running-config\n")
    }

    fn load_candidate(
        &mut self,
        _t: &mut dyn Session,
        commands: &str,
        running: &str,
    ) -> Result<(), PushError> {
        self.staged = Some((running.to_string(), commands.to_string()));
        Ok(())
    }

    fn compare(&mut self, _t: &mut dyn Session) -> Result<String, PushError> {
        Ok(self
            .staged
            .as_ref()
            .map(|(_, commands)| commands.clone())
            .unwrap_or_default())
    }

    fn commit(&mut self, t: &mut dyn Session, _revert_in: Duration) -> Result<(), PushError> {
        let commands = self.compare(t)?;
        configure(t, &commands)
    }

    fn confirm(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        self.staged = None;
        run_cli(t, "enable\nconfigure terminal\nconfiguration write\nexit\n").map(drop)
    }

    fn discard(&mut self, _t: &mut dyn Session) -> Result<(), PushError> {
        self.staged = None;
        Ok(())
    }

    fn rollback(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        let Some((saved, _)) = self.staged.take() else {
            return Ok(());
        };
        let current = self.get_running(t)?;
        let fix = crate::revert(self.intent, &saved, &current)?;
        if !fix.commands.is_empty() {
            configure(t, &fix.commands)?;
        }
        Ok(())
    }

    fn reverts_by_itself(&self) -> bool {
        false
    }

    fn resume(&mut self, saved: &str) {
        self.staged = Some((saved.to_string(), String::new()));
    }

    fn has_candidate(&self) -> bool {
        false
    }
}
