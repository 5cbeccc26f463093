//! `mltctl validate`: check an inventory, report every problem at once.

use std::path::Path;

use mltctl::inventory::{self, Inventory, LoadError};
use mltctl::plan::Plan;
use serde::Serialize;

use super::{Failure, InventoryArg, load_failure, print, print_json};

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
    match checked(path) {
        Ok((inv, _)) => say_valid(path, &inv, json),
        Err(e) => Err(refused(e, json)),
    }
}

/// The inventory and its plan; a valid inventory whose thresholds cannot work is
/// invalid too.
pub fn checked(path: &Path) -> Result<(Inventory, Plan), LoadError> {
    let inv = inventory::load(path)?;
    let plan = Plan::build(&inv);
    let problems = plan.problems(&inv);
    if problems.is_empty() {
        Ok((inv, plan))
    } else {
        Err(LoadError::Invalid(problems))
    }
}

/// What `validate --json` prints.
#[derive(Serialize)]
pub struct Report<'a> {
    pub valid: bool,
    pub problems: Vec<&'a mltctl::diag::Diagnostic>,
}

/// Says that the inventory is valid, and what it holds.
pub fn say_valid(path: &Path, inv: &Inventory, json: bool) -> Result<(), Failure> {
    if json {
        print_json(&Report {
            valid: true,
            problems: Vec::new(),
        })?;
        return Ok(());
    }
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

/// The failure of an inventory that cannot be used; with `json`, its problems are
/// printed as `validate --json` prints them.
pub fn refused(e: LoadError, json: bool) -> Failure {
    match (e, json) {
        (LoadError::Invalid(problems), true) => match print_json(&Report {
            valid: false,
            problems: problems.iter().collect(),
        }) {
            Ok(()) => Failure::InvalidReported,
            Err(e) => Failure::Error(e),
        },
        (e @ LoadError::Io { .. }, true) => Failure::Error(anyhow::anyhow!("{e:#}")),
        (e, false) => load_failure(e),
    }
}
