//! `mltctl confirm`: keep the changes `apply --confirm manual` left waiting.

use mltctl::apply::DeviceResult;
use mltctl::apply::journal::{self, Entry, Journal, Kind};
use mltctl::apply::report::Summary;
use mltctl::apply::settle::{self, Decision};
use mltctl::parallel::{self, Progress};
use mltctl::plan::Plan;
use serde::Serialize;

use super::apply::selected;
use super::{Failure, InventoryArg, SshArgs, StateArgs, load, planned, print};

/// Keep the changes an `apply --confirm manual` left waiting for a confirm.
///
/// For each selected switch whose last journal entry is an unconfirmed commit: read
/// the running configuration and check it still holds what that run committed (the
/// owned part the journal kept), then confirm it the switch's own way (EOS session
/// commit, `nv config apply --confirm-yes`, SONiC: stop the revert timer and save;
/// Onyx: save) — all in the run's own session, checkpoint and timer names. A switch
/// whose revert timer already ran out is not confirmed, and said so. Each switch's
/// outcome is appended to the journal.
/// --json events: device, summary.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    #[command(flatten)]
    pub run: super::SwitchRun,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let path = &args.inventory.inventory;
    let plan = planned(&load(path)?)?;
    let targets = selected(&plan, &args.run.limit)?;
    let journal_path = args.state.journal(path);
    let entries = journal::read(&journal_path)
        .map_err(anyhow::Error::from)?
        .entries;
    let latest = journal::latest_by_device(&entries);
    let waiting: Vec<(usize, Entry)> = targets
        .into_iter()
        .filter_map(|i| {
            let entry = latest.get(plan.switches[i].intent.name.as_str())?;
            (entry.outcome == journal::UNCONFIRMED).then(|| (i, (*entry).clone()))
        })
        .collect();
    if waiting.is_empty() {
        if args.run.json {
            super::print_json(&serde_json::json!({"event": "summary", "confirmed": 0}))?;
        } else {
            print("no selected switch waits for a confirm; nothing was sent\n")?;
        }
        return Ok(());
    }
    let summary = settle_all(
        &plan,
        &waiting,
        Decision::Confirm,
        &Settling {
            ssh: &args.ssh,
            state: &args.state,
            inventory: path,
            forks: args.run.forks,
            json: args.run.json,
        },
    )?;
    outcome(&summary)
}

/// The shared flags of a settling run.
pub struct Settling<'a> {
    pub ssh: &'a SshArgs,
    pub state: &'a StateArgs,
    pub inventory: &'a std::path::Path,
    pub forks: u16,
    pub json: bool,
}

/// Confirms or cancels each `(switch, entry)`, printing a line per switch and
/// recording each in the journal.
pub fn settle_all(
    plan: &Plan,
    waiting: &[(usize, Entry)],
    decision: Decision,
    how: &Settling<'_>,
) -> Result<Summary, Failure> {
    let journal_path = how.state.journal(how.inventory);
    let mut journal = Journal::open(&journal_path).map_err(anyhow::Error::from)?;
    let ssh = how.ssh.options();
    let locks = how.state.locks(how.inventory);
    let kind = match decision {
        Decision::Confirm => Kind::Confirm,
        Decision::Cancel => Kind::Cancel,
    };
    let mut problems = Vec::new();
    let results = parallel::run(
        waiting,
        usize::from(how.forks),
        |(index, entry)| settle::settle(&plan.switches[*index], entry, decision, &ssh, &locks),
        &mut |progress: Progress<'_, DeviceResult>| {
            let Progress::Finished(slot, result) = progress else {
                return;
            };
            let earlier = &waiting[slot].1;
            let outcome = settle::outcome(decision, result);
            if let Err(e) = journal.append(&Entry::settling(earlier, kind, result, outcome)) {
                problems.push(format!(
                    "cannot record {} in the journal: {e}",
                    result.device
                ));
            }
            if let Err(e) = show(result, outcome, how.json) {
                problems.push(format!("cannot write to standard output: {e}"));
            }
        },
    );
    super::say_recorded(&ssh);
    let summary = Summary::of(results.iter().map(|r| &r.status));
    if how.json {
        super::print_json(&serde_json::json!({"event": "summary", "summary": summary}))?;
    }
    if let Some(problem) = problems.first() {
        return Err(anyhow::anyhow!("{problem}").into());
    }
    Ok(summary)
}

fn show(result: &DeviceResult, outcome: &str, json: bool) -> anyhow::Result<()> {
    if json {
        #[derive(Serialize)]
        struct Line<'a> {
            event: &'static str,
            outcome: &'a str,
            #[serde(flatten)]
            result: &'a DeviceResult,
        }
        return super::print_json(&Line {
            event: "device",
            outcome,
            result,
        });
    }
    let message = result.message.as_deref().unwrap_or_default();
    print(&format!(
        "{outcome:<12} {} ({}, {}): {message} [{:.1} s]\n",
        result.device, result.vendor, result.endpoint, result.seconds
    ))
}

/// The exit code a settling run's summary means.
pub fn outcome(summary: &Summary) -> Result<(), Failure> {
    if summary.failed > 0 {
        Err(Failure::SwitchesFailed)
    } else if summary.unreachable > 0 {
        Err(Failure::SwitchesUnreachable)
    } else {
        Ok(())
    }
}
