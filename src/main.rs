use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mltctl::diag::Diagnostics;
use mltctl::generate::{FabricSize, fabric_yaml};
use mltctl::inventory::{self, Inventory, LoadError};
use mltctl::plan::{Plan, explain};
use mltctl::switches;
use serde::Serialize;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file could not be read or written
  2  the command line is wrong
  3  the inventory is invalid; every problem is listed as file:line:col: message
     and nothing was changed
  6  (diff --exit-code) at least one switch differs from the plan";

/// Deploy an ML-aware network transport from one inventory file.
///
/// mltctl reads an inventory (switches, links, hosts and the training job), checks it,
/// and plans every setting: DSCP values and strict-priority queues, per-queue RED/ECN
/// thresholds from MLT's queueing model, path addresses and static routes for source
/// routing, and each host's MAC map and transport configuration.
#[derive(Parser)]
#[command(name = "mltctl", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check an inventory and report every problem at once.
    #[command(after_help = EXIT_CODES)]
    Validate {
        #[command(flatten)]
        inventory: InventoryArg,
        /// Print the result as JSON: {"valid": bool, "problems": [{file, line, column, message}]}.
        #[arg(long)]
        json: bool,
    },
    /// Plan queues, thresholds, routes and host settings; changes nothing.
    ///
    /// Without options, prints per queue the DSCP value, the layers carried, the
    /// thresholds and the loss the model predicts. --explain adds what every switch and
    /// host would be configured with.
    #[command(after_help = EXIT_CODES)]
    Plan {
        #[command(flatten)]
        inventory: InventoryArg,
        /// Print the whole plan as JSON (for launchers and scripts).
        #[arg(long, conflicts_with = "explain")]
        json: bool,
        /// Also list what every switch and host would be configured with: queues, static
        /// routes, path addresses, neighbours.
        #[arg(long)]
        explain: bool,
        /// Print only this host's transport configuration, as JSON (what `endhost run
        /// --config` reads).
        #[arg(long, value_name = "NAME", conflicts_with_all = ["json", "explain"])]
        host: Option<String>,
    },
    /// Write every switch's configuration, in its vendor's own syntax, to a directory.
    ///
    /// One file per switch: NAME.json (SONiC config_db tables), NAME.cfg (Arista EOS,
    /// NVIDIA Onyx CLI) or NAME.nvue (NVIDIA Cumulus NVUE commands). If any switch
    /// cannot be configured as planned, every such problem is reported and nothing is
    /// written.
    #[command(after_help = EXIT_CODES)]
    Render {
        #[command(flatten)]
        inventory: InventoryArg,
        /// Directory to write the files to (created if needed).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Compare the plan with saved running configurations, and show what would change.
    ///
    /// DIR holds one running configuration per switch, named as `render` names them
    /// (or just NAME); a switch without a file is taken to be empty. Only what the plan
    /// owns is compared, after units, defaults and ordering are normalised; for each
    /// switch that differs, the commands (SONiC: the JSON patch) that would fix it follow.
    #[command(after_help = EXIT_CODES)]
    Diff {
        #[command(flatten)]
        inventory: InventoryArg,
        /// Directory of saved running configurations.
        #[arg(long, value_name = "DIR")]
        running: PathBuf,
        /// Print the differences as JSON.
        #[arg(long)]
        json: bool,
        /// Exit with 6 when any switch differs (for drift checks in CI).
        #[arg(long)]
        exit_code: bool,
    },
    /// Write a synthetic leaf-spine inventory, for scale tests and benchmarks.
    ///
    /// Every leaf links to every spine; vendors rotate through SONiC, EOS, Cumulus and
    /// Onyx. Management addresses (10.250.0.0/16) reach nothing: use it for dry runs.
    Generate {
        /// Spine switches.
        #[arg(long, default_value_t = 16)]
        spines: usize,
        /// Leaf switches, one per rack.
        #[arg(long, default_value_t = 64)]
        leaves: usize,
        /// Hosts in each rack (at most 243).
        #[arg(long, default_value_t = 32)]
        hosts_per_leaf: usize,
        /// Layers of the training profile (all of equal size).
        #[arg(long, default_value_t = 161)]
        layers: usize,
        /// Parameters in each layer.
        #[arg(long, default_value_t = 158_000)]
        params_per_layer: u64,
        /// Write here instead of standard output.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Args)]
struct InventoryArg {
    /// The inventory file (YAML).
    #[arg(
        short,
        long = "inventory",
        value_name = "FILE",
        env = "MLTCTL_INVENTORY"
    )]
    inventory: PathBuf,
}

/// A run that ended with a known outcome other than success.
enum Failure {
    Invalid(Diagnostics),
    /// The inventory is invalid and the problems were already printed (as JSON).
    InvalidReported,
    /// `diff --exit-code` found differences (already printed).
    Differs,
    Error(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Error(e)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(problems)) => {
            eprint!("{problems}");
            eprintln!(
                "mltctl: the inventory has {} problem(s); nothing was changed",
                problems.len()
            );
            ExitCode::from(3)
        }
        Err(Failure::InvalidReported) => ExitCode::from(3),
        Err(Failure::Differs) => ExitCode::from(6),
        Err(Failure::Error(e)) => {
            eprintln!("mltctl: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Validate { inventory, json } => validate(&inventory.inventory, json),
        Command::Plan {
            inventory,
            json,
            explain,
            host,
        } => {
            let inv = load(&inventory.inventory)?;
            let plan = Plan::build(&inv);
            if let Some(name) = host {
                let rank = plan
                    .host_rank(&name)
                    .with_context(|| format!("no host named `{name}` in the inventory"))?;
                print_json(&plan.transport_config(rank))?;
            } else if json {
                print_json(&plan)?;
            } else if explain {
                print(&explain::explain(&plan, &layer_names(&inv)))?;
            } else {
                print(&explain::overview(&plan, &layer_names(&inv)))?;
            }
            Ok(())
        }
        Command::Render { inventory, out } => {
            let plan = Plan::build(&load(&inventory.inventory)?);
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
            print(&format!(
                "wrote {} configurations to {}\n",
                written.len(),
                out.display()
            ))?;
            Ok(())
        }
        Command::Diff {
            inventory,
            running,
            json,
            exit_code,
        } => diff(&inventory.inventory, &running, json, exit_code),
        Command::Generate {
            spines,
            leaves,
            hosts_per_leaf,
            layers,
            params_per_layer,
            output,
        } => {
            let yaml = fabric_yaml(FabricSize {
                spines,
                leaves,
                hosts_per_leaf,
                layers,
                params_per_layer,
            })?;
            match output {
                Some(path) => std::fs::write(&path, yaml)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => print(&yaml)?,
            }
            Ok(())
        }
    }
}

fn diff(
    inventory: &std::path::Path,
    running: &std::path::Path,
    json: bool,
    exit_code: bool,
) -> Result<(), Failure> {
    if !running.is_dir() {
        return Err(anyhow::anyhow!("{} is not a directory", running.display()).into());
    }
    let plan = Plan::build(&load(inventory)?);
    let mut diffs = Vec::new();
    let mut errors = Vec::new();
    for result in switches::diff_all(&plan, running) {
        match result {
            Ok(d) => diffs.push(d),
            Err(e) => errors.push(e.to_string()),
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
        print_json(&serde_json::json!({"switches": diffs, "differing": differing}))?;
    } else {
        print(&diff_text(&diffs, differing))?;
    }
    if exit_code && differing > 0 {
        return Err(Failure::Differs);
    }
    Ok(())
}

fn diff_text(diffs: &[switch_config::SwitchDiff], differing: usize) -> String {
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
        for change in &d.changes {
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

fn validate(path: &std::path::Path, json: bool) -> Result<(), Failure> {
    let result = inventory::load(path);
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

fn load(path: &std::path::Path) -> Result<Inventory, Failure> {
    loaded(inventory::load(path))
}

fn loaded(result: Result<Inventory, LoadError>) -> Result<Inventory, Failure> {
    result.map_err(|e| match e {
        LoadError::Invalid(problems) => Failure::Invalid(problems),
        io => Failure::Error(io.into()),
    })
}

fn layer_names(inv: &Inventory) -> Vec<String> {
    inv.training.layers.iter().map(|l| l.name.clone()).collect()
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

/// Pretty JSON for a person at a terminal, compact JSON for programs.
fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let pretty = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if pretty {
        serde_json::to_writer_pretty(&mut out, value)
    } else {
        serde_json::to_writer(&mut out, value)
    }
    .context("cannot write JSON")?;
    writeln!(out)
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}
