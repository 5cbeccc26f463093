//! Pushing a change to a switch, the way NAPALM drivers do: one small driver per vendor
//! behind one interface (get running, load candidate, compare, commit with a revert
//! timer, confirm, discard, rollback).
//!
//! Drivers never open connections. Each step runs over a [`Session`] the caller
//! passes in (mltctl gives them an SSH session), so a driver survives a reconnect: the
//! rollback of a commit can go over a fresh session. Drivers decide nothing about
//! *what* to change; they carry the commands (SONiC: the JSON patch) that
//! [`crate::diff`] produced.

use std::io;
use std::time::Duration;

use mlt_common::redact::clean;
use mlt_common::shell::ShellCommand;

/// What a command printed, and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    /// The exit status; CLI sessions (EOS, Onyx) end with 0 even when a line failed.
    pub status: i32,
}

/// How a driver reaches its switch.
pub trait Session {
    /// Runs one command (an SSH exec request) with `input` on its standard input.
    fn exec(&mut self, command: &ShellCommand, input: &str) -> io::Result<Output>;

    /// Feeds `script` line by line to the switch's command line (an SSH shell session
    /// without a terminal), and returns what it printed once the script ended.
    fn cli(&mut self, script: &str) -> io::Result<Output>;
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The connection failed: the step may or may not have taken effect.
    #[error("connection lost: {0}")]
    Connection(#[from] io::Error),
    /// The switch refused a command.
    #[error("the switch rejected `{command}`: {message}")]
    Rejected { command: String, message: String },
    /// The saved copy could not be turned back into commands.
    #[error(transparent)]
    Config(#[from] crate::Error),
}

/// One vendor's way through the steps of a change.
pub trait Device {
    /// The running configuration, in the form [`crate::diff`] reads.
    fn get_running(&mut self, t: &mut dyn Session) -> Result<String, PushError>;

    /// Stages `commands` without activating them, where the OS can; `running` is the
    /// configuration they were computed against (the saved copy for an emulated
    /// rollback).
    fn load_candidate(
        &mut self,
        t: &mut dyn Session,
        commands: &str,
        running: &str,
    ) -> Result<(), PushError>;

    /// The switch's own account of the staged change; empty if it sees none.
    fn compare(&mut self, t: &mut dyn Session) -> Result<String, PushError>;

    /// Activates the staged change; unless confirmed within `revert_in`, the switch
    /// goes back by itself where the OS has a revert timer.
    fn commit(&mut self, t: &mut dyn Session, revert_in: Duration) -> Result<(), PushError>;

    /// Commits (as [`Device::commit`]), then reads the running configuration back (as
    /// [`Device::get_running`]): the commit's failure, or the read's own outcome.
    /// Drivers with a shell do both in one round trip.
    fn commit_then_read(
        &mut self,
        t: &mut dyn Session,
        revert_in: Duration,
    ) -> Result<Result<String, PushError>, PushError> {
        self.commit(t, revert_in)?;
        Ok(self.get_running(t))
    }

    /// Keeps the committed change (and saves it for the next boot).
    fn confirm(&mut self, t: &mut dyn Session) -> Result<(), PushError>;

    /// Drops a staged change that was not committed.
    fn discard(&mut self, t: &mut dyn Session) -> Result<(), PushError>;

    /// Undoes a commit that is not confirmed yet.
    fn rollback(&mut self, t: &mut dyn Session) -> Result<(), PushError>;

    /// Whether an unconfirmed commit is undone by the switch itself when the revert
    /// timer runs out (false: only [`Device::rollback`] undoes it).
    fn reverts_by_itself(&self) -> bool;

    /// Takes up a change another process committed, to confirm or roll it back:
    /// `saved` is the owned part of what the switch ran before (the copy a switch
    /// without a rollback of its own is put back to).
    fn resume(&mut self, saved: &str) {
        let _ = saved;
    }

    /// Whether the switch holds a candidate of its own, so that [`Device::compare`] is
    /// the switch's account of the change (false: it only echoes the commands).
    fn has_candidate(&self) -> bool {
        true
    }
}

/// Runs `command` and fails on a non-zero exit status.
pub(crate) fn run(
    t: &mut dyn Session,
    command: &ShellCommand,
    input: &str,
) -> Result<String, PushError> {
    let out = t.exec(command, input)?;
    if out.status == 0 {
        Ok(out.stdout)
    } else {
        Err(rejected(command, &out))
    }
}

/// The line [`run_then`] prints between its two commands' outputs.
const BETWEEN: &str = "--- mltctl: the next step ---";

/// Runs `first` with `input`, then, if it succeeded, `next`, in one shell: two steps
/// for one round trip. `first` fails as [`run`] would; once it succeeded, its output
/// comes with `next`'s own outcome.
pub(crate) fn run_then(
    t: &mut dyn Session,
    first: &ShellCommand,
    next: &ShellCommand,
    input: &str,
) -> Result<(String, Result<String, PushError>), PushError> {
    // The line goes after a newline of its own: the first's output may not end in one.
    let both = first
        .clone()
        .and(ShellCommand::new("printf '\\n%s\\n'").arg(BETWEEN))
        .and(next.clone());
    let out = t.exec(&both, input)?;
    let Some(at) = out.stdout.find(&format!("\n{BETWEEN}\n")) else {
        return Err(rejected(first, &out));
    };
    let before = out.stdout[..at].to_string();
    let after = &out.stdout[at + BETWEEN.len() + 2..];
    let outcome = if out.status == 0 {
        Ok(after.to_string())
    } else {
        Err(rejected(
            next,
            &Output {
                stdout: after.to_string(),
                ..out.clone()
            },
        ))
    };
    Ok((before, outcome))
}

/// `command`'s failure, with the gist of what it printed.
fn rejected(command: &ShellCommand, out: &Output) -> PushError {
    let message = [&out.stderr, &out.stdout]
        .into_iter()
        .find_map(|text| gist(text))
        .unwrap_or_else(|| "no message".into());
    PushError::Rejected {
        command: command.to_string(),
        message: format!("exit status {}: {}", out.status, clean(&message)),
    }
}

/// The part of a command's output that says what went wrong, on one line: the lines
/// that mention an error, else the last line.
fn gist(text: &str) -> Option<String> {
    const MAX: usize = 400;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.to_ascii_lowercase().contains("error"))
        .collect();
    let mut gist = if errors.is_empty() {
        lines.last()?.to_string()
    } else {
        errors.join("; ")
    };
    if gist.len() > MAX {
        let cut = (0..=MAX)
            .rev()
            .find(|&i| gist.is_char_boundary(i))
            .unwrap_or(0);
        gist.truncate(cut);
        gist.push('…');
    }
    Some(gist)
}

/// Runs a CLI script and fails if the switch printed an error: on EOS and Onyx every
/// error line starts with `%`.
pub(crate) fn run_cli(t: &mut dyn Session, script: &str) -> Result<String, PushError> {
    let out = t.cli(script)?;
    let mut errors: Vec<&str> = Vec::new();
    for line in out.stdout.lines().chain(out.stderr.lines()).map(str::trim) {
        // One rejected command in several places is said once.
        if line.starts_with('%') && !errors.contains(&line) {
            errors.push(line);
        }
    }
    if errors.is_empty() && out.status == 0 {
        Ok(out.stdout)
    } else {
        let first = script.lines().next().unwrap_or_default();
        let command = errors
            .iter()
            .find_map(|e| rejected_line(script, e))
            .map(|line| line.trim().to_string())
            .unwrap_or_else(|| format!("{first} …"));
        Err(PushError::Rejected {
            command: clean(&command),
            message: if errors.is_empty() {
                format!("exit status {}", out.status)
            } else {
                clean(&errors.join("; "))
            },
        })
    }
}

/// The script line an error names: EOS says `% Invalid input (at token N: 'WORD')`
/// (without echoing the line), so the line is the one whose word N is WORD.
fn rejected_line<'s>(script: &'s str, error: &str) -> Option<&'s str> {
    let (_, at) = error.split_once("(at token ")?;
    let (index, rest) = at.split_once(": '")?;
    let index: usize = index.trim().parse().ok()?;
    let (word, _) = rest.split_once("')")?;
    script
        .lines()
        .find(|line| line.split_whitespace().nth(index) == Some(word))
}

/// `hh:mm:ss`, as EOS writes timers.
pub(crate) fn clock(duration: Duration) -> String {
    let s = duration.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Records what a driver sends; answers every command with `reply`.
    #[derive(Default)]
    pub(crate) struct Recorder {
        pub sent: Vec<String>,
        pub reply: Output,
    }

    impl Recorder {
        /// Answers every command as a shell running two steps does when both succeed.
        pub fn answering_steps() -> Recorder {
            Recorder {
                reply: Output {
                    stdout: format!(
                        "the first step's answer\n\n{BETWEEN}\nthe next step's answer\n"
                    ),
                    ..Output::default()
                },
                ..Recorder::default()
            }
        }
    }

    impl Session for Recorder {
        fn exec(&mut self, command: &ShellCommand, input: &str) -> io::Result<Output> {
            self.sent.push(format!("exec {command}\n{input}"));
            Ok(self.reply.clone())
        }

        fn cli(&mut self, script: &str) -> io::Result<Output> {
            self.sent.push(format!("cli\n{script}"));
            Ok(self.reply.clone())
        }
    }

    /// Two steps in one shell: the first's failure is the first's, and once it
    /// succeeded the next step's outcome is its own, with each step's output apart.
    #[test]
    fn two_steps_in_one_shell_keep_their_own_outcomes() {
        let (first, next) = (ShellCommand::new("load"), ShellCommand::new("show diff"));
        let mut t = Recorder::answering_steps();
        let (before, after) = run_then(&mut t, &first, &next, "input").unwrap();
        assert_eq!(before, "the first step's answer\n");
        assert_eq!(after.unwrap(), "the next step's answer\n");
        assert_eq!(
            t.sent,
            ["exec load && printf '\\n%s\\n' '--- mltctl: the next step ---' && show diff\ninput"]
        );
        // A first step whose output does not end in a newline keeps it whole.
        t.reply.stdout = format!("no newline\n{BETWEEN}\nnext\n");
        let (before, after) = run_then(&mut t, &first, &next, "").unwrap();
        assert_eq!(
            (before.as_str(), after.unwrap().as_str()),
            ("no newline", "next\n")
        );
        // The first step failed: the shell never printed the line between.
        t.reply = Output {
            stdout: "partial\n".into(),
            stderr: "Error: no room\n".into(),
            status: 1,
        };
        let err = run_then(&mut t, &first, &next, "").unwrap_err();
        assert!(err.to_string().contains("rejected `load`"), "{err}");
        assert!(err.to_string().contains("no room"), "{err}");
        // The next step failed: the first's output stands, the error is the next's.
        t.reply = Output {
            stdout: format!("\n{BETWEEN}\n"),
            stderr: "Error: no diff\n".into(),
            status: 2,
        };
        let (before, after) = run_then(&mut t, &first, &next, "").unwrap();
        assert_eq!(before, "");
        let err = after.unwrap_err().to_string();
        assert!(err.contains("rejected `show diff`: exit status 2"), "{err}");
    }

    #[test]
    fn timers_are_written_as_a_clock() {
        assert_eq!(clock(Duration::from_secs(5)), "00:00:05");
        assert_eq!(clock(Duration::from_secs(3723)), "01:02:03");
    }

    #[test]
    fn a_cli_error_line_fails_the_step() {
        let mut t = Recorder {
            reply: Output {
                stdout: "ok\n% Invalid input (at token 0: 'bogus')\n".into(),
                ..Output::default()
            },
            ..Recorder::default()
        };
        let err = run_cli(&mut t, "configure\nbogus line\n").unwrap_err();
        assert!(err.to_string().contains("Invalid input"), "{err}");
        assert!(err.to_string().contains("rejected `bogus line`"), "{err}");
        t.reply.stdout = "% Incomplete command\n".into();
        let err = run_cli(&mut t, "configure\nbogus line\n").unwrap_err();
        assert!(err.to_string().contains("rejected `configure …`"), "{err}");
        t.reply.stdout = "fine\n".into();
        assert_eq!(run_cli(&mut t, "configure\n").unwrap(), "fine\n");
    }

    #[test]
    fn a_failing_command_reports_its_status_and_message() {
        let mut t = Recorder {
            reply: Output {
                stderr: "Error: no such checkpoint\n".into(),
                status: 2,
                ..Output::default()
            },
            ..Recorder::default()
        };
        let command = ShellCommand::new("config rollback").arg("x");
        let err = run(&mut t, &command, "").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the switch rejected `config rollback x`: exit status 2: Error: no such checkpoint"
        );
    }

    #[test]
    fn secrets_a_switch_prints_in_an_error_are_redacted() {
        let hash = "$6$rounds=5000$examplesaltexam$Q8m0W3pVt7Ll9aQkJcXyZr0Tt5aZ1";
        let mut t = Recorder {
            reply: Output {
                stdout: format!("% Error: username admin secret sha512 {hash} rejected\n"),
                ..Output::default()
            },
            ..Recorder::default()
        };
        let err = run_cli(&mut t, "configure\n").unwrap_err().to_string();
        assert!(!err.contains("Q8m0W3"), "{err}");
        assert!(err.contains(mlt_common::redact::REDACTED), "{err}");
        t.reply = Output {
            stderr: format!("Error: bad key {hash}\n"),
            status: 1,
            ..Output::default()
        };
        let err = run(&mut t, &ShellCommand::new("nv config apply"), "")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("Q8m0W3"), "{err}");
    }

    #[test]
    fn the_gist_of_a_long_report_is_its_error_lines() {
        let report = "Patch Applier: applying\n  op 1\n  op 2\nError: op 2 failed\n";
        assert_eq!(gist(report).unwrap(), "Error: op 2 failed");
        assert_eq!(gist("first\nlast\n").unwrap(), "last");
        assert_eq!(gist("  \n"), None);
        assert!(gist(&"error ".repeat(200)).unwrap().ends_with('…'));
    }
}
