//! `mltctl rollback --to RUN`: put the owned configuration back as it was before a run.

use std::collections::BTreeMap;

use mltctl::apply::Confirm;
use mltctl::apply::journal::{self, Entry, Kind, RunInfo};
use mltctl::apply::settle::Decision;

use super::apply::{ConfirmArg, Push, PushArgs, new_run_id, push, selected};
use super::confirm::{Settling, settle_all};
use super::{Failure, InventoryArg, load, planned, print};

/// Put the owned configuration back as it was before a run (see `mltctl history`).
///
/// For each selected switch the run touched, the journal holds the part of its
/// configuration the plan owns as it was before that run; the switch is compared with
/// it and the difference goes through the same path as apply: load, commit with a
/// revert timer, read back and verify, confirm (or, with --confirm manual, wait for
/// `mltctl confirm`). A change of that run still waiting for its confirm is undone the
/// switch's own way instead (EOS session abort, `nv config apply --confirm-no`, SONiC
/// rollback to the run's checkpoint). Only the parts the plan owns as the inventory
/// says now are compared and put back. The rollback is a run of its own in the journal.
/// --json events: started, device, summary.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// The run whose earlier state to put back (an id `mltctl history` lists).
    #[arg(long, value_name = "RUN")]
    pub to: String,
    /// Contact the switches and report what would change; change nothing and write
    /// nothing to the state directory.
    #[arg(long)]
    pub check: bool,
    /// Who confirms the rollback once it verified (as apply --confirm).
    #[arg(long, value_enum, default_value = "auto")]
    pub confirm: ConfirmArg,
    #[command(flatten)]
    pub push: PushArgs,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let path = &args.inventory.inventory;
    let plan = planned(&load(path)?)?;
    let targets = selected(&plan, &args.push.run.limit)?;
    let journal_path = args.push.state.journal(path);
    let entries = journal::read(&journal_path)
        .map_err(anyhow::Error::from)?
        .entries;
    let runs = journal::runs(&entries);
    let Some(run) = runs.iter().find(|r| r.run == args.to) else {
        return Err(Failure::Usage(format!(
            "no run `{}` in the journal {}; `mltctl history` lists the runs",
            args.to,
            journal_path.display()
        )));
    };
    let latest = journal::latest_by_device(&entries);
    let mut cancel: Vec<(usize, Entry)> = Vec::new();
    let mut restore: BTreeMap<String, String> = BTreeMap::new();
    let mut restore_targets = Vec::new();
    let mut blocked = Vec::new();
    for index in targets {
        let name = plan.switches[index].intent.name.as_str();
        let Some(in_run) = run.devices.iter().find(|e| e.device == name) else {
            continue;
        };
        let now = latest.get(name).copied();
        match now {
            Some(last) if last.outcome == journal::UNCONFIRMED && last.run == args.to => {
                cancel.push((index, last.clone()));
            }
            Some(last) if last.outcome == journal::UNCONFIRMED => blocked.push(format!(
                "{name} waits for a confirm of the later run {}",
                last.run
            )),
            // What the switch ran before the run: its own entries, not those of a
            // confirm that settled it later.
            _ => match entries
                .iter()
                .rev()
                .find(|e| e.run == args.to && e.device == name && !e.kind.settles())
                .and_then(|e| e.owned_before.as_ref())
            {
                Some(before) => {
                    restore.insert(name.to_string(), before.clone());
                    restore_targets.push(index);
                }
                None => eprintln!(
                    "mltctl: {name}: run {} never read it ({}); nothing to put back",
                    args.to, in_run.outcome
                ),
            },
        }
    }
    if !blocked.is_empty() {
        return Err(anyhow::anyhow!(
            "{}; settle that run first (`mltctl confirm`, or `mltctl rollback --to` it); no \
             switch was contacted",
            blocked.join("; ")
        )
        .into());
    }
    if cancel.is_empty() && restore_targets.is_empty() {
        return Err(Failure::Usage(format!(
            "run `{}` has nothing to put back on the selected switches",
            args.to
        )));
    }
    let mut worst: Result<(), Failure> = Ok(());
    if !cancel.is_empty() {
        if args.check {
            for (_, entry) in &cancel {
                print(&format!(
                    "would cancel {}: run {}'s change waits for a confirm and would be undone \
                     the switch's own way\n",
                    entry.device, entry.run
                ))?;
            }
        } else {
            let how = Settling {
                ssh: &args.push.ssh,
                state: &args.push.state,
                inventory: path,
                forks: args.push.run.forks,
                json: args.push.run.json,
            };
            let summary = settle_all(&plan, &cancel, Decision::Cancel, &how)?;
            worst = super::confirm::outcome(&summary);
        }
    }
    if !restore_targets.is_empty() {
        let confirm = match args.confirm {
            ConfirmArg::Auto => Confirm::Auto,
            ConfirmArg::Manual => Confirm::Manual,
        };
        let how = Push {
            check: args.check,
            run: RunInfo {
                id: new_run_id(),
                kind: Kind::Rollback,
                of: Some(args.to.clone()),
            },
            confirm,
            restore,
        };
        let (_, pushed) = push(&plan, &restore_targets, &args.push, path, how);
        worst = match (worst, pushed) {
            (Err(Failure::SwitchesFailed), _) | (_, Err(Failure::SwitchesFailed)) => {
                Err(Failure::SwitchesFailed)
            }
            (_, Err(e)) => Err(e),
            (w, Ok(_)) => w,
        };
    }
    worst
}
