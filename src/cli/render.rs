//! `mltctl render`: every switch's configuration, in its vendor's own syntax.

use std::path::PathBuf;

use anyhow::Context;
use mltctl::switches;

use super::{Failure, InventoryArg, load, planned, print};

/// Write every switch's configuration, in its vendor's own syntax, to a directory.
///
/// One file per switch: NAME.json (SONiC config_db tables), NAME.cfg (Arista EOS,
/// NVIDIA Onyx CLI) or NAME.nvue (NVIDIA Cumulus NVUE commands). If any switch
/// cannot be configured as planned, every such problem is reported and nothing is
/// written. A file that already holds its switch's configuration is left as it is,
/// time stamps included.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Directory to write the files to (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Remove configuration files in DIR that no switch of this inventory has (left
    /// by an earlier inventory); without it they are only listed.
    #[arg(long)]
    pub clean: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let Args {
        inventory,
        out,
        clean,
    } = args;
    let plan = planned(&load(&inventory.inventory)?)?;
    let rendered = switches::render_all(&plan).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        anyhow::anyhow!(
            "{} switch configuration(s) cannot be rendered; nothing was written:\n  {}",
            errors.len(),
            lines.join("\n  ")
        )
    })?;
    let written = switches::write_all(&out, &rendered)
        .with_context(|| format!("cannot write to {}", out.display()))?;
    let mut report = match written.unchanged {
        0 => format!(
            "wrote {} configurations to {}\n",
            written.paths.len(),
            out.display()
        ),
        unchanged => format!(
            "wrote {} of {} configurations to {} ({unchanged} already held theirs, left \
             as they were)\n",
            written.paths.len() - unchanged,
            written.paths.len(),
            out.display()
        ),
    };
    let stale = switches::stale_files(&out, &written.paths)
        .with_context(|| format!("cannot list {}", out.display()))?;
    let names: Vec<String> = stale
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    if clean {
        for path in &stale {
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
        if !names.is_empty() {
            report.push_str(&format!(
                "removed {} stale file(s): {}\n",
                names.len(),
                names.join(", ")
            ));
        }
    } else if !names.is_empty() {
        report.push_str(&format!(
            "note: {} also holds {} file(s) no switch of this inventory has (an earlier \
             inventory's?): {}; --clean removes them\n",
            out.display(),
            names.len(),
            names.join(", ")
        ));
    }
    // One note per OS that cannot hold queue limits, naming a few of its switches.
    for vendor in switch_config::Vendor::ALL {
        let Some(why) = vendor.no_queue_limit() else {
            continue;
        };
        let names: Vec<&str> = plan
            .switches
            .iter()
            .filter(|s| s.intent.vendor == vendor)
            .map(|s| s.intent.name.as_str())
            .collect();
        if names.is_empty() {
            continue;
        }
        let more = match names.len().saturating_sub(3) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        report.push_str(&format!(
            "note: {vendor} switches {}{more}: queue limits (L_i) are not configured: \
             {why}; the plan is solved for that (see `mltctl plan --explain`)\n",
            names[..names.len().min(3)].join(", ")
        ));
    }
    print(&report)?;
    Ok(())
}
