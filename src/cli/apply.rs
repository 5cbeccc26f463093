//! `mltctl apply`: push what differs to the switches over SSH, verified, then kept.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use mltctl::apply::journal::{self, Journal, Kind, RunInfo};
use mltctl::apply::report::{Reporter, Style, Summary};
use mltctl::apply::{self, ApplyOptions, BatchSize, Confirm, Rolling};
use mltctl::plan::Plan;
use mltctl::select::Selection;

use mlt_common::outcome::Status;

use super::{Failure, InventoryArg, Ran, SshArgs, StateArgs, load, planned};

/// Push the plan to the switches over SSH: only what differs, verified, then kept.
///
/// For each selected switch, over one SSH session: read the running configuration
/// and compare it with the plan. If nothing differs, nothing is sent. Otherwise load
/// the difference, commit it with a revert timer (EOS configure session with commit
/// timer, NVUE apply --confirm, SONiC checkpoint plus a rollback timer; Onyx has none
/// and is rolled back from a saved copy), read it back and verify, then confirm (or,
/// with --confirm manual, leave that to `mltctl confirm`). On any failure that switch
/// is rolled back; the others carry on. Host keys are checked against known_hosts.
/// Every switch's outcome, with the owned part of its configuration before and after,
/// is appended to the journal (see `mltctl history` and `mltctl rollback`).
/// --json events: started, device, summary.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Contact the switches and report what would change; change nothing and write
    /// nothing to the state directory.
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub push: PushArgs,
    /// Who confirms a change that verified: mltctl at once (auto), or the admin after
    /// testing traffic (manual: `mltctl confirm` keeps it, `mltctl rollback --to RUN`
    /// undoes it, and otherwise the switch reverts by itself after --confirm-timeout;
    /// Onyx has no revert timer and keeps it active, unsaved, until one of them).
    #[arg(long, value_enum, default_value = "auto")]
    pub confirm: ConfirmArg,
    /// (with --check) Exit with 6 when any switch would change.
    #[arg(long, requires = "check")]
    pub exit_code: bool,
}

/// What `apply` and `rollback` share.
#[derive(clap::Args)]
pub struct PushArgs {
    /// Show each switch's changes (equal changes folded into number lists), the
    /// commands (SONiC: the JSON patch) that make them, and under them the diff the
    /// switch itself reported for the loaded change (with --check the change is loaded
    /// as a candidate and discarded; Onyx has no candidate to ask about). Only what the
    /// plan owns is shown, never the rest of a configuration.
    #[arg(long)]
    pub diff: bool,
    /// With --diff: every change on its own line, not folded.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub run: super::SwitchRun,
    /// Seconds a committed change may stay unconfirmed before the switch reverts it.
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = super::confirm_seconds)]
    pub confirm_timeout: u64,
    /// Rolling change, as Ansible's `serial`: switches in batches of N or N% of the
    /// selected switches; a comma-separated list gives successive batches, the last
    /// repeating (`1,25%`: one switch as a canary, then a quarter at a time). A batch
    /// with more failed or unreachable switches than --max-fail-percentage stops the
    /// run; the switches after it are not contacted (`skipped`).
    #[arg(long, value_name = "N|N%[,...]", value_parser = parse_serial)]
    pub serial: Option<Serial>,
    /// With --serial: the share of a batch (percent) that may fail or be unreachable
    /// before the run stops.
    #[arg(long, value_name = "PERCENT", default_value_t = 0, requires = "serial", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub max_fail_percentage: u8,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ConfirmArg {
    Auto,
    Manual,
}

/// `--serial`'s batch sizes.
#[derive(Clone)]
pub struct Serial(Vec<BatchSize>);

fn parse_serial(text: &str) -> Result<Serial, String> {
    text.split(',')
        .map(|part| {
            let part = part.trim();
            let size = match part.strip_suffix('%') {
                Some(p) => match p.parse::<u8>() {
                    Ok(p @ 1..=100) => BatchSize::Percent(p),
                    _ => return Err(format!("`{part}`: a percentage from 1% to 100%")),
                },
                None => match part.parse::<usize>() {
                    Ok(n @ 1..) => BatchSize::Devices(n),
                    _ => return Err(format!("`{part}`: a number of switches (1 or more) or N%")),
                },
            };
            Ok(size)
        })
        .collect::<Result<_, _>>()
        .map(Serial)
}

pub fn run(args: Args) -> Result<(), Failure> {
    let plan = planned(&load(&args.inventory.inventory)?)?;
    run_planned(args, &plan).result
}

/// `apply` with the plan of its inventory already built.
pub fn run_planned(args: Args, plan: &Plan) -> Ran {
    let path = &args.inventory.inventory;
    let targets = match selected(plan, &args.push.run.limit) {
        Ok(targets) => targets,
        Err(failure) => return failure.into(),
    };
    if !args.check
        && let Err(failure) = refuse_unconfirmed(plan, &targets, &args.push.state.journal(path))
    {
        return failure.into();
    }
    let confirm = match args.confirm {
        ConfirmArg::Auto => Confirm::Auto,
        ConfirmArg::Manual => Confirm::Manual,
    };
    let run = RunInfo {
        id: new_run_id(),
        kind: Kind::Apply,
        of: None,
    };
    let (devices, pushed) = push(
        plan,
        &targets,
        &args.push,
        path,
        Push {
            check: args.check,
            run,
            confirm,
            restore: BTreeMap::new(),
        },
    );
    let result = match pushed {
        Ok(summary) if args.exit_code && summary.changed > 0 => Err(Failure::Differs),
        Ok(_) => Ok(()),
        Err(failure) => Err(failure),
    };
    Ran { devices, result }
}

/// The switches `--limit` selects (all without one), in plan order.
pub fn selected(plan: &Plan, limit: &[String]) -> Result<Vec<usize>, Failure> {
    let targets = Selection::parse(limit)
        .and_then(|s| s.select(plan))
        .map_err(|e| Failure::Usage(e.to_string()))?
        .switches;
    if targets.is_empty() {
        return Err(Failure::Usage("--limit selects no switch".into()));
    }
    Ok(targets)
}

/// A new change on a switch that still waits for its confirm would mix two changes in
/// one revert timer: refused, naming the run to settle first.
fn refuse_unconfirmed(plan: &Plan, targets: &[usize], journal: &Path) -> Result<(), Failure> {
    let entries = journal::read(journal).map_err(anyhow::Error::from)?.entries;
    let latest = journal::latest_by_device(&entries);
    let waiting: Vec<String> = targets
        .iter()
        .filter_map(|&i| latest.get(plan.switches[i].intent.name.as_str()))
        .filter(|e| e.outcome == journal::UNCONFIRMED)
        .map(|e| format!("{} (run {})", e.device, e.run))
        .collect();
    if waiting.is_empty() {
        return Ok(());
    }
    Err(anyhow::anyhow!(
        "{} switch(es) still wait for a confirm: {}; run `mltctl confirm` to keep that \
         change or `mltctl rollback --to RUN` to undo it first; no switch was contacted",
        waiting.len(),
        waiting.join(", ")
    )
    .into())
}

/// Names the run on every switch (session, checkpoint, timer) and in the journal.
pub fn new_run_id() -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("mltctl-{}-{}", since_epoch.as_secs(), std::process::id())
}

/// What a push does beyond the shared flags.
pub struct Push {
    pub check: bool,
    pub run: RunInfo,
    pub confirm: Confirm,
    pub restore: BTreeMap<String, String>,
}

/// Runs the change on `targets`, reporting as it goes; how each switch ended, and the
/// summary or the failure the exit code should say.
pub fn push(
    plan: &Plan,
    targets: &[usize],
    args: &PushArgs,
    inventory: &Path,
    how: Push,
) -> (Vec<(String, Status)>, Result<Summary, Failure>) {
    match push_reported(plan, targets, args, inventory, how) {
        Ok((devices, result)) => (devices, result),
        Err(failure) => (Vec::new(), Err(failure)),
    }
}

type Pushed = (Vec<(String, Status)>, Result<Summary, Failure>);

fn push_reported(
    plan: &Plan,
    targets: &[usize],
    args: &PushArgs,
    inventory: &Path,
    how: Push,
) -> Result<Pushed, Failure> {
    let unrenderable: Vec<String> = targets
        .iter()
        .filter_map(|&i| switch_config::render(&plan.switches[i].intent).err())
        .map(|e| e.to_string())
        .collect();
    if !unrenderable.is_empty() {
        return Err(anyhow::anyhow!(
            "{} switch(es) cannot be configured as planned; no switch was contacted:\n  {}",
            unrenderable.len(),
            unrenderable.join("\n  ")
        )
        .into());
    }
    let journal_path = args.state.journal(inventory);
    let journal = if how.check {
        Journal::none(&journal_path)
    } else {
        Journal::open(&journal_path).map_err(anyhow::Error::from)?
    };
    let run_id = how.run.id.clone();
    let options = ApplyOptions {
        check: how.check,
        confirm_timeout: Duration::from_secs(args.confirm_timeout),
        forks: usize::from(args.run.forks),
        ssh: args.ssh.options(),
        run: how.run,
        lock_dir: args.state.locks(inventory),
        confirm: how.confirm,
        switch_diff: args.diff,
        keep_detail: args.diff || args.run.json,
        restore: how.restore,
        rolling: Rolling {
            serial: args.serial.clone().map(|s| s.0).unwrap_or_default(),
            max_fail_percentage: args.max_fail_percentage,
        },
    };
    let style = if args.run.json {
        Style::Json
    } else if std::io::stderr().is_terminal() {
        Style::Terminal
    } else {
        Style::Plain
    };
    mltctl::interrupt::install().context("cannot watch for SIGINT and SIGTERM")?;
    let journal = std::sync::Mutex::new(journal);
    let mut reporter = Reporter::new(style, targets.len(), args.diff, how.check);
    reporter.verbose(args.verbose);
    let mut problems = Vec::new();
    let started = std::time::Instant::now();
    let results = apply::run(&plan.switches, targets, &options, &journal, &mut |event| {
        if let Err(e) = reporter.event(event) {
            problems.push(format!("cannot write to standard output: {e}"));
        }
    });
    super::say_recorded(&options.ssh);
    let journal = journal.into_inner().unwrap_or_else(|e| e.into_inner());
    problems.extend(journal.failures().iter().cloned());
    let summary = Summary::of(results.iter().map(|r| &r.status));
    let unconfirmed = results.iter().filter(|r| r.unconfirmed).count();
    let recorded = if how.check {
        "nothing (--check)".to_string()
    } else {
        journal.path().display().to_string()
    };
    let finished = reporter.finish(
        &summary,
        started.elapsed().as_secs_f64(),
        &recorded,
        (unconfirmed > 0).then_some((unconfirmed, run_id.as_str())),
    );
    let devices = results
        .iter()
        .map(|r| (r.device.clone(), r.status))
        .collect();
    let result = if let Err(e) = finished {
        Err(anyhow::Error::from(e)
            .context("cannot write to standard output")
            .into())
    } else if let Some(problem) = problems.first() {
        Err(anyhow::anyhow!("{problem}").into())
    } else if summary.interrupted > 0 {
        Err(Failure::Interrupted)
    } else if summary.failed > 0 || summary.skipped > 0 {
        Err(Failure::SwitchesFailed)
    } else if summary.unreachable > 0 {
        Err(Failure::SwitchesUnreachable)
    } else {
        Ok(summary)
    };
    Ok((devices, result))
}
