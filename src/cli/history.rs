//! `mltctl history`: the runs the journal holds.

use mltctl::apply::journal::{self, Entry, Run};
use serde::Serialize;

use super::apply::selected;
use super::{Failure, InventoryArg, StateArgs, load, planned, print, print_json};

/// List the runs in the journal: apply, rollback, and what confirms or cancels settled.
///
/// One line per run, oldest first: its id (what `mltctl rollback --to` takes), its
/// kind, when it started, and how its switches ended; a commit still waiting for
/// `mltctl confirm` shows as unconfirmed. --check runs are not recorded.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Only these switches (same patterns as apply --limit): runs that did not touch
    /// them are left out. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Vec<String>,
    /// Only the newest N runs.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Under each run, a line per switch: its outcome, changes and message.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the runs as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Serialize)]
struct DeviceView<'a> {
    device: &'a str,
    vendor: &'a str,
    time: &'a str,
    outcome: &'a str,
    changes: usize,
    message: Option<&'a str>,
}

#[derive(Serialize)]
struct RunView<'a> {
    run: &'a str,
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    of: Option<&'a str>,
    started: &'a str,
    devices: Vec<DeviceView<'a>>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let path = &args.inventory.inventory;
    let wanted: Option<Vec<String>> = if args.limit.is_empty() {
        None
    } else {
        let plan = planned(&load(path)?)?;
        let targets = selected(&plan, &args.limit)?;
        Some(
            targets
                .into_iter()
                .map(|i| plan.switches[i].intent.name.clone())
                .collect(),
        )
    };
    let journal_path = args.state.journal(path);
    let contents = journal::read(&journal_path).map_err(anyhow::Error::from)?;
    if contents.cut_short {
        eprintln!(
            "mltctl: the last line of {} was cut short (a run stopped while writing it) and is left out",
            journal_path.display()
        );
    }
    if contents.unchained > 0 {
        eprintln!(
            "mltctl: {} line(s) of {} were written before journal lines were chained and cannot be verified",
            contents.unchained,
            journal_path.display()
        );
    }
    let entries = contents.entries;
    let mut runs: Vec<Run<'_>> = journal::runs(&entries);
    if let Some(names) = &wanted {
        for run in &mut runs {
            run.devices.retain(|e| names.contains(&e.device));
        }
        runs.retain(|r| !r.devices.is_empty());
    }
    if let Some(last) = args.last {
        let cut = runs.len().saturating_sub(last);
        runs.drain(..cut);
    }
    if args.json {
        let views: Vec<RunView<'_>> = runs.iter().map(view).collect();
        return Ok(print_json(&views)?);
    }
    if runs.is_empty() {
        print(&format!(
            "no runs recorded in {} (--check runs are not recorded)\n",
            journal_path.display()
        ))?;
        return Ok(());
    }
    let mut text = String::new();
    for run in &runs {
        let of = run.of.map(|o| format!(" of {o}")).unwrap_or_default();
        text.push_str(&format!(
            "{}  {}{of}  {}  {}\n",
            run.run,
            run.kind,
            run.started,
            counts(&run.devices)
        ));
        if args.verbose {
            for e in &run.devices {
                let message = e
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                text.push_str(&format!(
                    "    {:<12} {} ({}), {} change(s){message}\n",
                    e.outcome, e.device, e.vendor, e.changes
                ));
            }
        }
    }
    print(&text)?;
    Ok(())
}

/// `4 switch(es): 3 changed, 1 ok`, outcomes in the order they first appear.
fn counts(devices: &[&Entry]) -> String {
    let mut order: Vec<(&str, usize)> = Vec::new();
    for e in devices {
        match order.iter_mut().find(|(o, _)| *o == e.outcome) {
            Some((_, n)) => *n += 1,
            None => order.push((&e.outcome, 1)),
        }
    }
    let parts: Vec<String> = order.iter().map(|(o, n)| format!("{n} {o}")).collect();
    format!("{} switch(es): {}", devices.len(), parts.join(", "))
}

fn view<'a>(run: &'a Run<'a>) -> RunView<'a> {
    RunView {
        run: run.run,
        kind: run.kind.to_string(),
        of: run.of,
        started: run.started,
        devices: run
            .devices
            .iter()
            .map(|e| DeviceView {
                device: &e.device,
                vendor: &e.vendor,
                time: &e.time,
                outcome: &e.outcome,
                changes: e.changes,
                message: e.message.as_deref(),
            })
            .collect(),
    }
}
