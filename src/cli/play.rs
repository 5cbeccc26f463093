//! `mltctl play`: a playbook's steps in order, stopping at the first that fails.

use std::path::PathBuf;

use anyhow::Context;
use mltctl::playbook::{self, StepPlan};

use super::{Failure, InventoryArg, load, planned};

/// The largest playbook read.
const MAX_PLAYBOOK_BYTES: u64 = 1 << 20;

/// Run a playbook: its steps in order, stopping at the first that fails.
///
/// A playbook (playbooks/site.yml) lists steps: validate, diff (the switches'
/// differences: `apply --check --diff`), apply, bootstrap, launch, stop. --check,
/// --diff and --limit are passed to every step that takes them; with --check,
/// apply and bootstrap only report and launch is skipped. A step whose --limit
/// selects nothing of its kind (no switch, no host) is skipped.
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
    /// Passed to the steps that use SSH.
    #[arg(long, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// Passed to the host steps.
    #[arg(long, value_name = "DIR")]
    pub remote_dir: Option<String>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let run = &playbook::Run {
        playbook: args.playbook,
        inventory: args.inventory.inventory,
        check: args.check,
        diff: args.diff,
        limit: args.limit,
        known_hosts: args.known_hosts,
        remote_dir: args.remote_dir,
    };
    let text = endhost::input::read_text(&run.playbook, MAX_PLAYBOOK_BYTES)
        .with_context(|| format!("cannot read {}", run.playbook.display()))?;
    let steps = playbook::parse(&run.playbook, &text).map_err(|e| Failure::Usage(e.to_string()))?;
    let plan = planned(&load(&run.inventory)?)?;
    // Every step's command is known before the first runs: a bad --limit stops the run
    // before anything is touched.
    let commands = steps
        .iter()
        .map(|step| playbook::command(step, run, &plan))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::Usage)?;
    let exe = std::env::current_exe().context("cannot find mltctl's own path")?;
    let total = steps.len();
    for (n, (step, command)) in steps.iter().zip(commands).enumerate() {
        let name = step.kind.name();
        let args = match command {
            StepPlan::Skip(why) => {
                eprintln!("== step {}/{total} {name}: skipped ({why})", n + 1);
                continue;
            }
            StepPlan::Command(args) => args,
        };
        eprintln!(
            "== step {}/{total} {name}: mltctl {}",
            n + 1,
            args.join(" ")
        );
        let status = std::process::Command::new(&exe)
            .args(&args)
            .status()
            .with_context(|| format!("cannot run step {name}"))?;
        if !status.success() {
            let code = status.code().unwrap_or(1);
            eprintln!(
                "== step {}/{total} {name} failed (exit {code}); the remaining {} step(s) did not run",
                n + 1,
                total - n - 1
            );
            return Err(Failure::Step(code));
        }
    }
    eprintln!("== all {total} steps succeeded");
    Ok(())
}
