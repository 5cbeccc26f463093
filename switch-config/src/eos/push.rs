//! Arista EOS: a configure session holds the change, `commit timer` activates it with
//! a revert timer, `commit` keeps it and `abort` drops it (before the timer runs out,
//! abort also reverts a timed commit).

use std::time::Duration;

use crate::push::{Device, PushError, Session, clock, run_cli};

pub struct Eos {
    session: String,
}

impl Eos {
    pub fn new(change_id: &str) -> Self {
        Eos {
            session: change_id.to_string(),
        }
    }

    fn session_command(&self, t: &mut dyn Session, verb: &str) -> Result<String, PushError> {
        run_cli(t, &format!("configure session {} {verb}\n", self.session))
    }
}

impl Device for Eos {
    fn get_running(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        run_cli(t, "show running-config\n")
    }

    fn load_candidate(
        &mut self,
        t: &mut dyn Session,
        commands: &str,
        _running: &str,
    ) -> Result<(), PushError> {
        let script = format!("configure session {}\n{commands}end\n", self.session);
        run_cli(t, &script).map(drop)
    }

    fn compare(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        run_cli(
            t,
            &format!("show session-config named {} diffs\n", self.session),
        )
    }

    fn commit(&mut self, t: &mut dyn Session, revert_in: Duration) -> Result<(), PushError> {
        self.session_command(t, &format!("commit timer {}", clock(revert_in)))
            .map(drop)
    }

    fn confirm(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        self.session_command(t, "commit")?;
        run_cli(t, "copy running-config startup-config\n").map(drop)
    }

    fn discard(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        self.session_command(t, "abort").map(drop)
    }

    fn rollback(&mut self, t: &mut dyn Session) -> Result<(), PushError> {
        self.session_command(t, "abort").map(drop)
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
    fn a_change_goes_through_a_named_session_with_a_commit_timer() {
        let mut t = Recorder::default();
        let mut eos = Eos::new("mltctl-1");
        eos.load_candidate(&mut t, "qos map dscp 46 to traffic-class 7\n", "")
            .unwrap();
        eos.commit(&mut t, Duration::from_secs(300)).unwrap();
        eos.confirm(&mut t).unwrap();
        assert_eq!(
            t.sent,
            [
                "cli\nconfigure session mltctl-1\nqos map dscp 46 to traffic-class 7\nend\n",
                "cli\nconfigure session mltctl-1 commit timer 00:05:00\n",
                "cli\nconfigure session mltctl-1 commit\n",
                "cli\ncopy running-config startup-config\n",
            ]
        );
    }
}
