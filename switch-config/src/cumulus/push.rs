//! NVIDIA Cumulus Linux (NVUE): `nv unset` and `nv config patch` (or `nv set`) build a
//! pending revision, `nv config diff` shows it, `nv config apply --confirm` applies it
//! and reverts unless `--confirm-yes` follows in time; `--confirm-no` reverts at once,
//! `nv config detach` drops a pending revision, `nv config save` keeps the applied one
//! for the next boot.

use std::time::Duration;

use crate::push::{Device, PushError, Session, run, run_then};
use mlt_common::shell::ShellCommand;

#[derive(Default)]
pub struct Cumulus {
    /// `nv config diff` as the load's last command printed it, until compare asks.
    diff: Option<Result<String, PushError>>,
}

/// What prints the applied configuration, as `nv set` commands.
fn read_command() -> ShellCommand {
    ShellCommand::new("nv config show -r applied -o commands")
}

/// Applies the pending revision; NVUE reverts it unless confirmed within `revert_in`.
fn commit_command(revert_in: Duration) -> ShellCommand {
    ShellCommand::new("nv config apply --confirm")
        .arg(format!("{}s", revert_in.as_secs()))
        .code("-y")
}

/// The pending revision's changes, as `nv set`/`nv unset` commands.
fn diff_command() -> ShellCommand {
    ShellCommand::new("nv config diff -o commands")
}

/// The most `nv` commands one shell on the switch runs while loading a change: at a
/// second or so each, well within the default --command-timeout (120 s).
const COMMANDS_PER_SHELL: usize = 25;

impl Device for Cumulus {
    fn get_running(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        run(t, &read_command(), "")
    }

    fn load_candidate(
        &mut self,
        t: &mut dyn Session,
        commands: &str,
        _running: &str,
    ) -> Result<(), PushError> {
        // Each `nv` command is a request to NVUE's daemon (about a second on a
        // switch), so the sets go as one patch (a spine's static routes are ~1,000
        // of them) after the unsets. What a patch cannot carry for certain runs
        // command by command, as written.
        // The commands come from the NVUE template, which quotes every word it did not
        // write itself.
        let lines = super::commands::commands(commands).map_err(|line| PushError::Rejected {
            command: "sh -es".into(),
            message: format!("line {line} of the change opens a quote it never closes"),
        })?;
        let lines: Vec<&str> = lines.iter().map(|c| c.text).collect();
        self.diff = None;
        let detach = ShellCommand::new("nv config detach");
        let Some(load) = super::patch::load(&lines) else {
            run(t, &detach, "")?;
            return run_in_batches(t, &lines);
        };
        let Some(patch) = load.patch else {
            run(t, &detach, "")?;
            return run_in_batches(t, &load.unsets);
        };
        // `nv config patch` reads a file named by its full path.
        let patch_command = ShellCommand::new("f=$(mktemp --suffix=.yaml)")
            .and(ShellCommand::new("trap 'rm -f \"$f\"' EXIT"))
            .and(ShellCommand::new("cat > \"$f\""))
            .and(ShellCommand::new("nv config patch \"$f\""));
        // The patch's shell also prints the diff compare asks for: one round trip less.
        let patch_command = if load.unsets.is_empty() {
            // One round trip: a change that only sets (a first apply, most changes).
            detach.and(patch_command)
        } else {
            run(t, &detach, "")?;
            run_in_batches(t, &load.unsets)?;
            patch_command
        };
        let (_, diff) = run_then(t, &patch_command, &diff_command(), &patch)?;
        self.diff = Some(diff);
        Ok(())
    }

    fn compare(&mut self, t: &mut dyn Session) -> Result<String, PushError> {
        match self.diff.take() {
            Some(diff) => diff,
            None => run(t, &diff_command(), ""),
        }
    }

    fn commit(&mut self, t: &mut dyn Session, revert_in: Duration) -> Result<(), PushError> {
        run(t, &commit_command(revert_in), "").map(drop)
    }

    fn commit_then_read(
        &mut self,
        t: &mut dyn Session,
        revert_in: Duration,
    ) -> Result<Result<String, PushError>, PushError> {
        run_then(t, &commit_command(revert_in), &read_command(), "").map(|(_, read)| read)
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

/// Runs `commands` in shells of [`COMMANDS_PER_SHELL`], each stopping at the first that
/// fails (the pending revision collects every batch): --command-timeout bounds a
/// batch, not the whole load.
fn run_in_batches(t: &mut dyn Session, commands: &[&str]) -> Result<(), PushError> {
    for batch in commands.chunks(COMMANDS_PER_SHELL) {
        let mut script = batch.join("\n");
        script.push('\n');
        run(t, &ShellCommand::new("sh -es"), &script)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::tests::Recorder;

    #[test]
    fn unsets_run_then_every_set_goes_in_one_patch_after_one_detach() {
        let mut commands = String::from("nv unset qos roce\n");
        for i in 0..60 {
            commands.push_str(&format!(
                "nv set vrf default router static 10.{i}.0.0/24 via 10.0.0.1\n"
            ));
        }
        let mut t = Recorder::answering_steps();
        Cumulus::default()
            .load_candidate(&mut t, &commands, "")
            .unwrap();
        assert_eq!(t.sent.len(), 3, "{:?}", t.sent);
        assert_eq!(t.sent[0], "exec nv config detach\n");
        assert_eq!(t.sent[1], "exec sh -es\nnv unset qos roce\n");
        let (command, patch) = t.sent[2].split_once('\n').unwrap();
        assert!(command.starts_with("exec f=$(mktemp"), "{command}");
        assert!(
            command.ends_with("&& nv config patch \"$f\" && printf '\\n%s\\n' '--- mltctl: the next step ---' && nv config diff -o commands"),
            "{command}"
        );
        assert!(patch.starts_with("---\n- set:\n    vrf:\n"), "{patch}");
        for i in 0..60 {
            assert!(
                patch.contains(&format!("      10.{i}.0.0/24:\n")),
                "{patch}"
            );
        }
        assert_eq!(patch.matches("10.0.0.1:\n").count(), 60);
        assert_eq!(patch.matches("type: ipv4-address\n").count(), 60);
    }

    #[test]
    fn a_change_that_only_sets_detaches_and_patches_in_one_command() {
        let commands = "nv set qos mapping default-global trust l3\n";
        let mut t = Recorder::answering_steps();
        let mut cumulus = Cumulus::default();
        cumulus.load_candidate(&mut t, commands, "").unwrap();
        assert_eq!(cumulus.compare(&mut t).unwrap(), "the next step's answer\n");
        assert_eq!(t.sent.len(), 1, "{:?}", t.sent);
        let (command, patch) = t.sent[0].split_once('\n').unwrap();
        assert!(
            command.starts_with("exec nv config detach && f=$(mktemp"),
            "{command}"
        );
        assert!(
            command.contains("&& nv config patch \"$f\" && "),
            "{command}"
        );
        assert!(
            command.ends_with("&& nv config diff -o commands"),
            "{command}"
        );
        assert!(patch.contains("trust: l3"), "{patch}");
    }

    #[test]
    fn the_commit_and_the_read_back_go_in_one_command() {
        let mut t = Recorder::answering_steps();
        let read = Cumulus::default()
            .commit_then_read(&mut t, Duration::from_secs(60))
            .unwrap();
        assert_eq!(read.unwrap(), "the next step's answer\n");
        assert_eq!(
            t.sent,
            [
                "exec nv config apply --confirm 60s -y && printf '\\n%s\\n' \
              '--- mltctl: the next step ---' && nv config show -r applied -o commands\n"
            ]
        );
    }

    #[test]
    fn a_change_a_patch_cannot_carry_is_loaded_in_batches_as_written() {
        // `nv set qos roce` sets an object without a value: not placed in a patch.
        let commands: String =
            std::iter::once("nv set qos roce\n".to_string())
                .chain((0..59).map(|i| {
                    format!("nv set vrf default router static 10.{i}.0.0/24 via 10.0.0.1\n")
                }))
                .collect();
        let mut t = Recorder::default();
        Cumulus::default()
            .load_candidate(&mut t, &commands, "")
            .unwrap();
        assert_eq!(t.sent[0], "exec nv config detach\n");
        let batches: Vec<Vec<&str>> = t.sent[1..]
            .iter()
            .map(|s| {
                let script = s.strip_prefix("exec sh -es\n").expect("a shell per batch");
                script.lines().collect()
            })
            .collect();
        let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
        assert_eq!(sizes, [25, 25, 10]);
        let sent: Vec<&str> = batches.concat();
        assert_eq!(sent, commands.lines().collect::<Vec<_>>(), "all, in order");
    }

    #[test]
    fn a_refused_detach_sends_no_command() {
        let commands = "nv set a 1\n".repeat(30);
        let mut t = Recorder {
            reply: crate::push::Output {
                stderr: "Error: bad\n".into(),
                status: 1,
                ..Default::default()
            },
            ..Recorder::default()
        };
        assert!(
            Cumulus::default()
                .load_candidate(&mut t, &commands, "")
                .is_err()
        );
        assert_eq!(
            t.sent,
            ["exec nv config detach\n"],
            "nothing after the failed detach"
        );
    }

    /// Answers the first `good` commands with success, then fails every one.
    struct FailsAfter {
        good: usize,
        sent: Vec<String>,
    }

    impl Session for FailsAfter {
        fn exec(
            &mut self,
            command: &ShellCommand,
            input: &str,
        ) -> std::io::Result<crate::push::Output> {
            self.sent.push(format!("exec {command}\n{input}"));
            let status = if self.sent.len() > self.good { 1 } else { 0 };
            Ok(crate::push::Output {
                status,
                stderr: "Error: rejected\n".into(),
                ..Default::default()
            })
        }

        fn cli(&mut self, _script: &str) -> std::io::Result<crate::push::Output> {
            unreachable!("NVUE is driven through a shell")
        }
    }

    #[test]
    fn a_rejected_batch_stops_the_load() {
        let commands = "nv set a 1\n".repeat(3 * COMMANDS_PER_SHELL);
        // The detach and the first batch succeed; the second batch fails.
        let mut t = FailsAfter {
            good: 2,
            sent: Vec::new(),
        };
        assert!(
            Cumulus::default()
                .load_candidate(&mut t, &commands, "")
                .is_err()
        );
        assert_eq!(t.sent.len(), 3, "no batch after the rejected one");
    }

    #[test]
    fn a_quote_that_never_closes_sends_nothing() {
        let mut t = Recorder::default();
        let err = Cumulus::default()
            .load_candidate(&mut t, "nv set a 1\nnv set b 'open\n", "")
            .unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(t.sent.is_empty());
    }
}
