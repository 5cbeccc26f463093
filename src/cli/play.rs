//! `mltctl play`: a playbook's steps in order, on the plan built once, with a recap.

use std::path::PathBuf;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches};
use mlt_common::outcome::{Status, Summary};
use mltctl::plan::Plan;
use mltctl::playbook::{self, Step, StepPlan};
use serde::Serialize;

use super::hosts::event_line;
use super::{Cli, Command, Failure, InventoryArg, Ran, SshArgs, StateArgs};

/// The largest playbook read.
const MAX_PLAYBOOK_BYTES: u64 = 1 << 20;

/// Run a playbook: its steps in order, stopping at the first that fails, then a recap.
///
/// A playbook (playbooks/site.yml) lists steps: validate, diff (the switches'
/// differences: `apply --check --diff`), apply, bootstrap, launch, stop. The inventory
/// is read and planned once; every step works on that plan, in this process. --check,
/// --diff, --limit, --json, --forks and the SSH options are passed to every step that
/// takes them, the state options and --confirm-timeout to diff and apply, --remote-dir
/// to the host steps; a step's own `args` in the playbook come last and win (they may
/// not name another inventory or selection). With --check, apply and bootstrap only
/// report, launch and stop are skipped, and a step with unreachable switches or hosts
/// does not stop the play, so every step's check is seen. A step whose --limit selects
/// nothing of its kind (no switch, no host) is skipped. A signal stops apply at its next
/// safe point and the play after the step in progress. The PLAY RECAP counts, per
/// switch and host, the steps that ended ok (nothing to change), changed (with --check:
/// would change), unreachable, failed and skipped.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// The playbook (YAML).
    pub playbook: PathBuf,
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Dry run: every step checks and changes nothing.
    #[arg(long)]
    pub check: bool,
    /// Show what each step changes (or, with --check, would change).
    #[arg(long)]
    pub diff: bool,
    /// Only these switches and hosts: names or glob patterns, repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Vec<String>,
    /// Switches or hosts each step handles at once [default: each step's own].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub forks: Option<u16>,
    /// JSON Lines on standard output: {"event":"step"} as each step starts (or is
    /// skipped), the step's own events, and {"event":"recap"} at the end.
    #[arg(long)]
    pub json: bool,
    /// (diff, apply) Seconds a committed change may stay unconfirmed before the switch
    /// reverts it [default: apply's].
    #[arg(long, value_name = "SECS", value_parser = super::confirm_seconds)]
    pub confirm_timeout: Option<u64>,
    /// (host steps) Directory on every host for the endhost binary and the host's files
    /// [default: the host commands'].
    #[arg(long, value_name = "DIR")]
    pub remote_dir: Option<String>,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let path = &args.inventory.inventory;
    let text = mlt_common::input::read_text(&args.playbook, MAX_PLAYBOOK_BYTES)
        .with_context(|| format!("cannot read {}", args.playbook.display()))?;
    let steps =
        playbook::parse(&args.playbook, &text).map_err(|e| Failure::Usage(e.to_string()))?;
    let (inv, plan) = super::validate::checked(path).map_err(|e| invalid(e, args.json))?;
    let run = passed(&args);
    // Every step's command is known and parsed before the first runs: a bad --limit or a
    // bad step argument stops the play before anything is touched.
    let commands = steps
        .iter()
        .enumerate()
        .map(|(n, step)| prepared(n, step, &run, &plan))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::Usage)?;
    // Once for the whole play: a signal stops apply at its next safe point, and the play
    // after the step in progress.
    mltctl::interrupt::install().context("cannot watch for SIGINT and SIGTERM")?;
    let mut recap = Recap::default();
    let total = steps.len();
    let mut unreachable_seen = false;
    for (n, (step, prepared)) in steps.iter().zip(commands).enumerate() {
        let name = step.kind.name();
        let (words, command) = match prepared {
            Prepared::Skip(why) => {
                announce(args.json, n, total, name, None, Some(why))?;
                recap.skipped_steps += 1;
                continue;
            }
            Prepared::Run(words, command) => (words, command),
        };
        announce(args.json, n, total, name, Some(&words), None)?;
        let ran = match command {
            StepCommand::Validate => Ran {
                devices: Vec::new(),
                result: say_valid(path, &inv, args.json),
            },
            StepCommand::Apply(a) => super::apply::run_planned(*a, &plan),
            StepCommand::Bootstrap(a) => super::bootstrap::run_planned(*a, &plan),
            StepCommand::Launch(a) => super::launch::run_planned(*a, &plan),
            StepCommand::Verify(a) => super::verify::run_planned(*a, &plan),
            StepCommand::Stop(a) => super::stop::run_planned(*a, &plan),
        };
        recap.add(&ran.devices);
        recap.ran_steps += 1;
        let failure = match ran.result {
            Ok(()) if mltctl::interrupt::requested() => Failure::Interrupted,
            Ok(()) => continue,
            // A dry run goes on past switches and hosts it could not reach (or, in a
            // rolling step, did not contact after them), so every step's check is seen.
            Err(Failure::SwitchesUnreachable | Failure::SwitchesFailed)
                if args.check && only_unreached(&ran.devices) =>
            {
                unreachable_seen = true;
                continue;
            }
            Err(failure) => failure,
        };
        // Said here, beside the step, before the recap.
        let code = super::report(failure);
        if !args.json {
            eprintln!(
                "== step {}/{total} {name} failed (exit {code}); the remaining {} step(s) did not run",
                n + 1,
                total - n - 1
            );
        }
        recap.failed_step = Some(name);
        recap.print(args.json)?;
        return Err(Failure::Reported(code));
    }
    recap.print(args.json)?;
    if unreachable_seen {
        Err(Failure::SwitchesUnreachable)
    } else {
        Ok(())
    }
}

/// Whether every device a step did not finish was unreachable (or not contacted after
/// one was), with at least one of them.
fn only_unreached(devices: &[(String, Status)]) -> bool {
    devices.iter().all(|(_, s)| {
        matches!(
            s,
            Status::Ok | Status::Changed | Status::Unreachable | Status::Skipped
        )
    }) && devices.iter().any(|(_, s)| *s == Status::Unreachable)
}

/// An inventory the play cannot use; with --json, said as the validate step's event.
fn invalid(e: mltctl::inventory::LoadError, json: bool) -> Failure {
    match (e, json) {
        (mltctl::inventory::LoadError::Invalid(problems), true) => {
            let report = super::validate::Report {
                valid: false,
                problems: problems.iter().collect(),
            };
            match super::print(&format!("{}\n", event_line("validate", &report))) {
                Ok(()) => Failure::InvalidReported,
                Err(e) => Failure::Error(e),
            }
        }
        (e, json) => super::validate::refused(e, json),
    }
}

/// The play's options as the arguments each kind of step takes.
fn passed(args: &Args) -> playbook::Run {
    let mut reach = Vec::new();
    if let Some(forks) = args.forks {
        reach.extend(["--forks".to_string(), forks.to_string()]);
    }
    reach.extend(args.ssh.as_arguments());
    let mut switches = args.state.as_arguments();
    if let Some(secs) = args.confirm_timeout {
        switches.extend(["--confirm-timeout".to_string(), secs.to_string()]);
    }
    let hosts = match &args.remote_dir {
        Some(dir) => vec!["--remote-dir".to_string(), dir.clone()],
        None => Vec::new(),
    };
    playbook::Run {
        inventory: args.inventory.inventory.clone(),
        check: args.check,
        diff: args.diff,
        json: args.json,
        limit: args.limit.clone(),
        reach,
        switches,
        hosts,
    }
}

/// What a step runs: the commands a playbook may name.
enum StepCommand {
    Validate,
    Apply(Box<super::apply::Args>),
    Bootstrap(Box<super::bootstrap::Args>),
    Launch(Box<super::launch::Args>),
    Verify(Box<super::verify::Args>),
    Stop(Box<super::stop::Args>),
}

/// A step ready to run: its command line and the command parsed from it.
enum Prepared {
    Run(Vec<String>, StepCommand),
    Skip(&'static str),
}

fn prepared(n: usize, step: &Step, run: &playbook::Run, plan: &Plan) -> Result<Prepared, String> {
    let words = match playbook::command(step, run, plan)? {
        StepPlan::Skip(why) => return Ok(Prepared::Skip(why)),
        StepPlan::Command(words) => words,
    };
    let at = |message: String| format!("step {} ({}): {message}", n + 1, step.kind.name());
    // A step's own arguments come last and override the play's (the setting reaches
    // every subcommand).
    let matches = Cli::command()
        .args_override_self(true)
        .try_get_matches_from(std::iter::once("mltctl").chain(words.iter().map(String::as_str)))
        .map_err(|e| at(e.render().to_string().trim_end().to_string()))?;
    let inventory = matches
        .subcommand()
        .and_then(|(_, m)| m.get_one::<PathBuf>("inventory"));
    if inventory != Some(&run.inventory) {
        return Err(at(
            "every step works on the play's inventory (give it to `mltctl play -i`)".into(),
        ));
    }
    let cli = Cli::from_arg_matches(&matches).map_err(|e| at(e.to_string()))?;
    let command = match cli.command {
        Command::Validate(_) => StepCommand::Validate,
        Command::Apply(a) => StepCommand::Apply(Box::new(a)),
        Command::Bootstrap(a) => StepCommand::Bootstrap(Box::new(a)),
        Command::Launch(a) => StepCommand::Launch(Box::new(a)),
        Command::Verify(a) => StepCommand::Verify(Box::new(a)),
        Command::Stop(a) => StepCommand::Stop(Box::new(a)),
        _ => return Err(at(format!("a playbook cannot run `mltctl {}`", words[0]))),
    };
    Ok(Prepared::Run(words, command))
}

/// Says which step starts (with its command line) or is skipped (and why).
fn announce(
    json: bool,
    n: usize,
    total: usize,
    name: &str,
    words: Option<&[String]>,
    skipped: Option<&str>,
) -> anyhow::Result<()> {
    if json {
        #[derive(Serialize)]
        struct Announced<'a> {
            step: &'a str,
            number: usize,
            of: usize,
            #[serde(skip_serializing_if = "Option::is_none")]
            command: Option<Vec<&'a str>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            skipped: Option<&'a str>,
        }
        let line = event_line(
            "step",
            &Announced {
                step: name,
                number: n + 1,
                of: total,
                command: words.map(|w| {
                    std::iter::once("mltctl")
                        .chain(w.iter().map(String::as_str))
                        .collect()
                }),
                skipped,
            },
        );
        return super::print(&format!("{line}\n"));
    }
    match (words, skipped) {
        (Some(words), _) => eprintln!(
            "== step {}/{total} {name}: mltctl {}",
            n + 1,
            words.join(" ")
        ),
        (None, why) => eprintln!(
            "== step {}/{total} {name}: skipped ({})",
            n + 1,
            why.unwrap_or("")
        ),
    }
    Ok(())
}

/// The validate step: the inventory was read and planned before the first step.
fn say_valid(
    path: &std::path::Path,
    inv: &mltctl::inventory::Inventory,
    json: bool,
) -> Result<(), Failure> {
    if json {
        let report = super::validate::Report {
            valid: true,
            problems: Vec::new(),
        };
        super::print(&format!("{}\n", event_line("validate", &report)))?;
        return Ok(());
    }
    super::validate::say_valid(path, inv, false)
}

/// Per switch and host, how many steps ended which way; switches and hosts in the
/// order the steps first reached them.
#[derive(Default)]
struct Recap {
    devices: Vec<(String, Vec<Status>)>,
    ran_steps: usize,
    skipped_steps: usize,
    failed_step: Option<&'static str>,
}

impl Recap {
    fn add(&mut self, devices: &[(String, Status)]) {
        for (name, status) in devices {
            match self.devices.iter_mut().find(|(n, _)| n == name) {
                Some((_, statuses)) => statuses.push(*status),
                None => self.devices.push((name.clone(), vec![*status])),
            }
        }
    }

    fn print(&self, json: bool) -> anyhow::Result<()> {
        let counted: Vec<(&str, Summary)> = self
            .devices
            .iter()
            .map(|(name, statuses)| (name.as_str(), Summary::of(statuses)))
            .collect();
        if json {
            #[derive(Serialize)]
            struct Device<'a> {
                device: &'a str,
                ok: usize,
                changed: usize,
                unreachable: usize,
                failed: usize,
                skipped: usize,
                interrupted: usize,
            }
            #[derive(Serialize)]
            struct Recapped<'a> {
                devices: Vec<Device<'a>>,
                steps_ran: usize,
                steps_skipped: usize,
                failed_step: Option<&'a str>,
            }
            let recap = Recapped {
                devices: counted
                    .iter()
                    .map(|(device, s)| Device {
                        device,
                        ok: s.ok,
                        changed: s.changed,
                        unreachable: s.unreachable,
                        failed: s.failed,
                        skipped: s.skipped,
                        interrupted: s.interrupted,
                    })
                    .collect(),
                steps_ran: self.ran_steps,
                steps_skipped: self.skipped_steps,
                failed_step: self.failed_step,
            };
            return super::print(&format!("{}\n", event_line("recap", &recap)));
        }
        let width = counted.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        let mut text = format!(
            "\nPLAY RECAP ({} step(s) ran, {} skipped{})\n",
            self.ran_steps,
            self.skipped_steps,
            self.failed_step
                .map(|s| format!(", stopped at {s}"))
                .unwrap_or_default()
        );
        for (name, s) in &counted {
            text.push_str(&format!(
                "{name:<width$} : ok={} changed={} unreachable={} failed={} skipped={}{}\n",
                s.ok,
                s.changed,
                s.unreachable,
                s.failed,
                s.skipped,
                if s.interrupted > 0 {
                    format!(" interrupted={}", s.interrupted)
                } else {
                    String::new()
                }
            ));
        }
        super::print(&text)
    }
}
