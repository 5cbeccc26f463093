//! `mltctl diff`: the plan against saved running configurations.

use std::path::PathBuf;

use mltctl::switches;

use super::{Failure, InventoryArg, load, planned, print, print_json};

/// Compare the plan with saved running configurations, and show what would change.
///
/// DIR holds one running configuration per switch, named as `render` names them
/// (or just NAME), as `mltctl fetch` saves them: SONiC's `sonic-cfggen -d
/// --print-data` JSON, EOS's and Onyx's `show running-config`, NVUE's `nv config show
/// -o commands`. A switch without a file is taken to be empty, and said so (an error
/// with --require-running); a file in another form is an error. Only what the plan
/// owns is compared, after units, defaults and ordering are normalised; for each
/// switch that differs, the commands (SONiC: the JSON patch) that would fix it follow.
/// Changes that differ only in one number and change the same way are folded into one
/// line with a number list (`DSCP 0-7,9-15 traffic class: 1 -> 0`); --verbose lists
/// each, and --json always does.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Directory of saved running configurations.
    #[arg(long, value_name = "DIR")]
    pub running: PathBuf,
    /// Print the differences as JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit with 6 when any switch differs (for drift checks in CI).
    #[arg(long)]
    pub exit_code: bool,
    /// A switch without a running configuration in DIR is an error, not an empty switch.
    #[arg(long)]
    pub require_running: bool,
    /// Every change on its own line, not folded.
    #[arg(long, short)]
    pub verbose: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let (inventory, running) = (args.inventory.inventory.as_path(), args.running.as_path());
    let (json, exit_code) = (args.json, args.exit_code);
    if !running.is_dir() {
        return Err(anyhow::anyhow!("{} is not a directory", running.display()).into());
    }
    let plan = planned(&load(inventory)?)?;
    let mut diffs = Vec::new();
    let mut missing = Vec::new();
    let mut errors = Vec::new();
    for (result, switch) in switches::diff_all(&plan, running)
        .into_iter()
        .zip(&plan.switches)
    {
        match result {
            Ok(compared) => {
                if compared.running.is_none() {
                    let expected = running.join(switches::file_name(&switch.intent));
                    missing.push((switch.intent.name.clone(), expected));
                }
                diffs.push(compared.diff);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    for (name, expected) in &missing {
        let line = format!(
            "no running configuration for {name} (expected {})",
            expected.display()
        );
        if args.require_running {
            errors.push(line);
        } else {
            eprintln!("mltctl: {line}; taken as empty");
        }
    }
    if !errors.is_empty() {
        return Err(anyhow::anyhow!(
            "cannot compare {} switch(es):\n  {}",
            errors.len(),
            errors.join("\n  ")
        )
        .into());
    }
    let differing = diffs.iter().filter(|d| !d.changes.is_empty()).count();
    if json {
        let missing: Vec<&str> = missing.iter().map(|(name, _)| name.as_str()).collect();
        print_json(&serde_json::json!({
            "switches": diffs,
            "differing": differing,
            "taken_as_empty": missing,
        }))?;
    } else {
        print(&diff_text(&diffs, differing, args.verbose))?;
    }
    if exit_code && differing > 0 {
        return Err(Failure::Differs);
    }
    Ok(())
}

fn diff_text(diffs: &[switch_config::SwitchDiff], differing: usize, verbose: bool) -> String {
    let mut out = String::new();
    let changes: usize = diffs.iter().map(|d| d.changes.len()).sum();
    for d in diffs {
        if d.changes.is_empty() {
            out.push_str(&format!("{} ({}): no change\n", d.switch, d.vendor));
            continue;
        }
        out.push_str(&format!(
            "{} ({}): {} change(s)\n",
            d.switch,
            d.vendor,
            d.changes.len()
        ));
        let folded;
        let shown = if verbose {
            &d.changes
        } else {
            folded = switch_config::fold::fold(&d.changes);
            &folded
        };
        for change in shown {
            out.push_str(&format!("  {change}\n"));
        }
        out.push_str("  to apply:\n");
        for line in d.commands.lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out.push_str(&format!(
        "{differing} of {} switches differ from the plan ({changes} change(s))\n",
        diffs.len()
    ));
    out
}
