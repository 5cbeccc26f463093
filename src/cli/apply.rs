//! `mltctl apply`: push what differs to the switches over SSH, verified, then kept.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use mltctl::apply::journal::Journal;
use mltctl::apply::report::{Reporter, Style, Summary};
use mltctl::apply::{self, ApplyOptions};
use mltctl::select::Selection;

use super::{Failure, InventoryArg, SshArgs, load, planned};

/// Push the plan to the switches over SSH: only what differs, verified, then kept.
///
/// For each selected switch, over one SSH session: read the running configuration
/// and compare it with the plan. If nothing differs, nothing is sent. Otherwise load
/// the difference, commit it with a revert timer (EOS configure session with commit
/// timer, NVUE apply --confirm, SONiC checkpoint plus a rollback timer; Onyx has none
/// and is rolled back from a saved copy), read it back and verify, then confirm. On
/// any failure that switch is rolled back; the others carry on. Host keys are checked
/// against known_hosts. Every switch's outcome is appended to the journal.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Contact the switches and report what would change; change nothing.
    #[arg(long)]
    pub check: bool,
    /// Show each switch's changes and the commands (SONiC: the JSON patch) that make
    /// them. Only what the plan owns is shown, never the rest of a configuration.
    #[arg(long)]
    pub diff: bool,
    /// Only these switches: names, globs (leaf*), groups (all, leaf, spine, rack:NAME,
    /// vendor:NAME, sonic, eos, cumulus, onyx), comma-separated; &PATTERN narrows,
    /// !PATTERN excludes. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Vec<String>,
    /// Switches handled at once, one SSH session each.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub forks: u16,
    /// Seconds a committed change may stay unconfirmed before the switch reverts it.
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub confirm_timeout: u64,
    /// Print one JSON object per line: {"event":"started"|"device"|"summary", ...}.
    #[arg(long)]
    pub json: bool,
    /// (with --check) Exit with 6 when any switch would change.
    #[arg(long, requires = "check")]
    pub exit_code: bool,
    #[command(flatten)]
    pub ssh: SshArgs,
    /// Journal file, appended to [default: .mltctl/journal.jsonl next to the inventory].
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let path = &args.inventory.inventory;
    let plan = planned(&load(path)?)?;
    let targets = Selection::parse(&args.limit)
        .and_then(|s| s.select(&plan))
        .map_err(|e| Failure::Usage(e.to_string()))?
        .switches;
    if targets.is_empty() {
        return Err(Failure::Usage("--limit selects no switch".into()));
    }
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
    let journal_path = args.journal.clone().unwrap_or_else(|| {
        path.parent()
            .unwrap_or(std::path::Path::new("."))
            .join(".mltctl/journal.jsonl")
    });
    let journal = Journal::open(&journal_path)
        .with_context(|| format!("cannot open the journal {}", journal_path.display()))?;
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let options = ApplyOptions {
        check: args.check,
        confirm_timeout: Duration::from_secs(args.confirm_timeout),
        forks: usize::from(args.forks),
        ssh: args.ssh.options(),
        run_id: format!("mltctl-{}-{}", since_epoch.as_secs(), std::process::id()),
        lock_dir: journal_path
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("locks"),
    };
    let style = if args.json {
        Style::Json
    } else if std::io::stderr().is_terminal() {
        Style::Terminal
    } else {
        Style::Plain
    };
    mltctl::interrupt::install().context("cannot watch for SIGINT and SIGTERM")?;
    let journal = std::sync::Mutex::new(journal);
    let mut reporter = Reporter::new(style, targets.len(), args.diff, args.check);
    let mut problems = Vec::new();
    let started = std::time::Instant::now();
    let results = apply::run(&plan.switches, &targets, &options, &journal, &mut |event| {
        if let Err(e) = reporter.event(event) {
            problems.push(format!("cannot write to standard output: {e}"));
        }
    });
    let journal = journal.into_inner().unwrap_or_else(|e| e.into_inner());
    problems.extend(journal.failures().iter().cloned());
    let summary = Summary::of(results.iter().map(|r| &r.status));
    reporter
        .finish(
            &summary,
            started.elapsed().as_secs_f64(),
            &journal.path().display().to_string(),
        )
        .context("cannot write to standard output")?;
    if let Some(problem) = problems.first() {
        return Err(anyhow::anyhow!("{problem}").into());
    }
    if summary.interrupted > 0 {
        return Err(Failure::Interrupted);
    }
    if summary.failed > 0 {
        Err(Failure::SwitchesFailed)
    } else if summary.unreachable > 0 {
        Err(Failure::SwitchesUnreachable)
    } else if args.exit_code && summary.changed > 0 {
        Err(Failure::Differs)
    } else {
        Ok(())
    }
}
