//! `mltctl validate`: check an inventory, report every problem at once.

use mltctl::inventory::{self, LoadError};
use mltctl::plan::Plan;
use serde::Serialize;

use super::{Failure, InventoryArg, loaded, print, print_json};

/// Check an inventory and report every problem at once.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Print the result as JSON: {"valid": bool, "problems": [{file, line, column, message}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let (path, json) = (args.inventory.inventory.as_path(), args.json);
    // A valid inventory whose thresholds cannot work is invalid too.
    let result = inventory::load(path).and_then(|inv| {
        let problems = Plan::build(&inv).problems(&inv);
        if problems.is_empty() {
            Ok(inv)
        } else {
            Err(LoadError::Invalid(problems))
        }
    });
    if json {
        let problems = match &result {
            Ok(_) => Vec::new(),
            Err(LoadError::Invalid(d)) => d.iter().collect(),
            Err(e @ LoadError::Io { .. }) => return Err(Failure::Error(anyhow::anyhow!("{e:#}"))),
        };
        #[derive(Serialize)]
        struct Report<'a> {
            valid: bool,
            problems: Vec<&'a mltctl::diag::Diagnostic>,
        }
        print_json(&Report {
            valid: problems.is_empty(),
            problems,
        })?;
        return match result {
            Ok(_) => Ok(()),
            Err(_) => Err(Failure::InvalidReported),
        };
    }
    let inv = loaded(result)?;
    print(&format!(
        "{}: valid ({} switches, {} hosts in {} racks, {} layers)\n",
        path.display(),
        inv.switches.len(),
        inv.hosts.len(),
        inv.racks.len(),
        inv.training.layers.len()
    ))?;
    Ok(())
}
