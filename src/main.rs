use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use mltctl::apply::journal::Journal;
use mltctl::apply::report::{Reporter, Style, Summary};
use mltctl::apply::{self, ApplyOptions};
use mltctl::diag::Diagnostics;
use mltctl::generate::{FabricSize, fabric_yaml_with};
use mltctl::hosts;
use mltctl::inventory::{self, Inventory, LoadError};
use mltctl::plan::{Plan, explain};
use mltctl::playbook::{self, StepPlan};
use mltctl::select::Selection;
use mltctl::ssh::{self, SshOptions};
use mltctl::switches;
use serde::Serialize;

/// The largest endhost binary bootstrap uploads (a debug build is about 80 MB).
const MAX_BINARY_BYTES: u64 = 1 << 30;
/// The largest playbook read.
const MAX_PLAYBOOK_BYTES: u64 = 1 << 20;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file could not be read or written
  2  the command line is wrong
  3  the inventory is invalid; every problem is listed as file:line:col: message
     and nothing was changed
  4  (apply) at least one switch failed: it was rolled back, or reverts by itself;
     its line says which; (bootstrap, launch, stop) at least one host failed: its
     line says why (bootstrap undoes its network changes on the host; a failed DPDK
     preparation step keeps them)
  5  (apply, bootstrap, launch, stop) at least one switch or host was unreachable
     (none failed); nothing was sent to it
  6  (diff --exit-code, apply --check --exit-code) at least one switch differs from
     the plan
  130 (apply) SIGINT or SIGTERM stopped the run: no switch was started after it; a
     switch in progress had its staged change discarded or its commit rolled back
     (each line and the journal say which); a second signal ends mltctl at once and
     switches with a revert timer undo an unconfirmed commit by themselves
  (play) the exit code of the step that failed";

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
        /// With --host: print the host's network plan instead (what `endhost configure
        /// --plan` reads): NIC, MTU, addresses, static neighbours, routes.
        #[arg(long, requires = "host", conflicts_with = "ipmac")]
        network: bool,
        /// With --host: print the host's IP=MAC file instead (OptiReduce's format): every
        /// peer address and path address with its next-hop MAC.
        #[arg(long, requires = "host")]
        ipmac: bool,
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
    /// Push the plan to the switches over SSH: only what differs, verified, then kept.
    ///
    /// For each selected switch, over one SSH session: read the running configuration
    /// and compare it with the plan. If nothing differs, nothing is sent. Otherwise load
    /// the difference, commit it with a revert timer (EOS configure session with commit
    /// timer, NVUE apply --confirm, SONiC checkpoint plus a rollback timer; Onyx has none
    /// and is rolled back from a saved copy), read it back and verify, then confirm. On
    /// any failure that switch is rolled back; the others carry on. Host keys are checked
    /// against known_hosts. Every switch's outcome is appended to the journal.
    #[command(after_help = EXIT_CODES)]
    Apply(ApplyArgs),
    /// Make every host's network match the plan, over SSH.
    ///
    /// Per host, over one SSH session: upload the endhost binary (unless the host has
    /// this very one) and the host's network plan to --remote-dir (atomically), then
    /// run `endhost configure` there, which applies only what differs — addresses, path
    /// addresses, static neighbours, routes, MTU — verifies it and undoes everything on
    /// failure. Entries it made that the plan no longer has are removed; nothing anyone
    /// else configured is changed. With the dpdk datapath it also prepares the host
    /// (IOMMU, hugepages, NIC binding). --check uploads to a scratch directory, reports
    /// and removes it.
    #[command(after_help = EXIT_CODES)]
    Bootstrap {
        #[command(flatten)]
        hosts: HostArgs,
        /// Report what would change; change nothing.
        #[arg(long)]
        check: bool,
        /// List every change made (or, with --check, to be made) per host.
        #[arg(long)]
        diff: bool,
        /// Prepare for this datapath [default: the inventory's].
        #[arg(long, value_enum)]
        datapath: Option<DatapathArg>,
        /// The endhost binary to upload [default: the one beside mltctl].
        #[arg(long, value_name = "FILE")]
        endhost: Option<PathBuf>,
    },
    /// Start the transport on every host and print what a training launcher needs.
    ///
    /// Per host: upload its transport configuration, IP=MAC file and environment file
    /// to --remote-dir, stop a transport already running there, and start `endhost
    /// serve` in the background; then wait until every transport has found its peers.
    /// Prints, as JSON: per rank its host, addresses, socket, pid and environment
    /// (OptiReduce's GLOO_* variables and ours), and DS-Sync's group schedule. Needs a
    /// bootstrapped host (the binary in --remote-dir).
    ///
    /// All or nothing: a job needs every host (a --limit must select them all); if one
    /// cannot start or does not become ready, the transports that started are stopped
    /// again and nothing is printed on standard output.
    #[command(after_help = EXIT_CODES)]
    Launch {
        #[command(flatten)]
        hosts: HostArgs,
        /// [default: the inventory's]
        #[arg(long, value_enum)]
        datapath: Option<DatapathArg>,
        /// Seconds a transport may take to find all its peers.
        #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        ready_timeout: u64,
    },
    /// Print the environment a training process on one host runs with.
    ///
    /// As `export KEY=value` lines a shell can source, or JSON. The same values
    /// `launch` writes to the host's env file.
    #[command(after_help = EXIT_CODES)]
    Env {
        #[command(flatten)]
        inventory: InventoryArg,
        #[arg(long, value_name = "NAME")]
        host: String,
        #[arg(long, value_name = "DIR", default_value = "/var/lib/mltctl")]
        remote_dir: String,
        /// [default: the inventory's]
        #[arg(long, value_enum)]
        datapath: Option<DatapathArg>,
        #[arg(long)]
        json: bool,
    },
    /// Stop the transport on every host. A host where none runs is `ok`.
    #[command(after_help = EXIT_CODES)]
    Stop {
        #[command(flatten)]
        hosts: HostArgs,
    },
    /// Run a playbook: its steps in order, stopping at the first that fails.
    ///
    /// A playbook (playbooks/site.yml) lists steps: validate, diff (the switches'
    /// differences: `apply --check --diff`), apply, bootstrap, launch, stop. --check,
    /// --diff and --limit are passed to every step that takes them; with --check,
    /// apply and bootstrap only report and launch is skipped. A step whose --limit
    /// selects nothing of its kind (no switch, no host) is skipped.
    #[command(after_help = EXIT_CODES)]
    Play {
        /// The playbook (YAML).
        playbook: PathBuf,
        #[command(flatten)]
        inventory: InventoryArg,
        #[arg(long)]
        check: bool,
        #[arg(long)]
        diff: bool,
        #[arg(long, value_name = "PATTERN")]
        limit: Vec<String>,
        /// Passed to the steps that use SSH.
        #[arg(long, value_name = "FILE")]
        known_hosts: Option<PathBuf>,
        /// Passed to the host steps.
        #[arg(long, value_name = "DIR")]
        remote_dir: Option<String>,
    },
    /// Write a synthetic leaf-spine inventory, for scale tests and benchmarks.
    ///
    /// Every leaf links to every spine; vendors rotate through the --vendors list.
    /// Management addresses (10.250.0.0/16) reach nothing: use it for dry runs.
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
        /// Switch operating systems to rotate through, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "sonic,eos,cumulus,onyx")]
        vendors: Vec<switch_config::Vendor>,
        /// Write here instead of standard output.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Simulate training under all reduce, partial reduce and selective reduce.
    ///
    /// A deterministic discrete-event simulation of the Selective Reduce document's
    /// evaluation: n workers behind one switch with bandwidths round(20u, 3) Gbit/s,
    /// u ~ U[λ, 1]; each computes a round (CNN-like or Transformer-like runtimes),
    /// reports to the controller, and synchronizes with a ring allreduce (Eq. 2). For
    /// each trace, n and scheme it prints min, median and max over the trials of the
    /// average sync time, average sync scale, total syncs, total iterations and wasted
    /// wait per worker. The same arguments give the same numbers.
    #[command(after_help = EXIT_CODES)]
    Sim(SimArgs),
    /// Plan DS-Sync groups: which hosts average their models together, per iteration.
    ///
    /// From the racks: each iteration, a rack's hosts form an intra-rack group except
    /// one representative per rack; representatives form the inter-rack group; the
    /// racks' hosts take turns as representative. Contention splits the affected group
    /// (see --contention). The pattern repeats with the printed period; it is checked to
    /// mix every host (λ₂ of one period's averaging product below 1). The JSON lists,
    /// per iteration, every group and, per rank, the index of its group.
    #[command(after_help = EXIT_CODES)]
    Groups {
        #[command(flatten)]
        inventory: InventoryArg,
        /// Reported contention, repeatable: `rack:NAME` (the rack's inter-rack link is
        /// slowed by other traffic) or `host:NAME` (the host's NIC is shared).
        #[arg(long, value_name = "rack:NAME|host:NAME")]
        contention: Vec<String>,
        /// Print the pattern as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct SimArgs {
    /// Runtime traces to simulate, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "cnn,transformer")]
    trace: Vec<mltctl::sim::Trace>,
    /// Cluster sizes n, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "40,80,120,160,200")]
    workers: Vec<usize>,
    /// Runs per (trace, n, scheme); trial t uses seed SEED + t.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    trials: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated seconds of training per run.
    #[arg(long, value_name = "SECS", default_value_t = 100.0)]
    duration: f64,
    /// p, the smallest group, as a fraction of n.
    #[arg(long, default_value_t = 0.3)]
    p_fraction: f64,
    /// η: BAG extends a group with workers down to (1 − η) of its p-th bandwidth.
    #[arg(long, default_value_t = 0.3)]
    eta: f64,
    /// θ: a replacement must save more than θ·Δt to be worth waiting for.
    #[arg(long, default_value_t = 1.0)]
    theta: f64,
    /// Δt, the waiting slot.
    #[arg(long, value_name = "MS", default_value_t = 50.0)]
    delta_t_ms: f64,
    /// Model size in MB (10⁶ bytes).
    #[arg(long, default_value_t = 500.0)]
    model_mb: f64,
    /// One-way latency α between workers.
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    latency_ms: f64,
    /// λ: the bandwidth skew (u ~ U[λ, 1]); smaller is more skewed.
    #[arg(long, default_value_t = 0.05)]
    lambda: f64,
    /// c: selective reduce runs a full weighted allreduce of all workers every c
    /// synchronizations (default: never, like the baselines).
    #[arg(long, value_name = "C")]
    full_every: Option<u64>,
    /// The controller learns the runtime distribution from observed rounds instead of
    /// knowing it in advance.
    #[arg(long)]
    cold_start: bool,
    /// e: the controller's bandwidth estimates are off by b·e·x, x ~ U[−1, 1].
    #[arg(long, default_value_t = 0.0)]
    bandwidth_error: f64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Also draw each metric against n to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

#[derive(Args)]
struct ApplyArgs {
    #[command(flatten)]
    inventory: InventoryArg,
    /// Contact the switches and report what would change; change nothing.
    #[arg(long)]
    check: bool,
    /// Show each switch's changes and the commands (SONiC: the JSON patch) that make
    /// them. Only what the plan owns is shown, never the rest of a configuration.
    #[arg(long)]
    diff: bool,
    /// Only these switches: names, globs (leaf*), groups (all, leaf, spine, rack:NAME,
    /// vendor:NAME, sonic, eos, cumulus, onyx), comma-separated; &PATTERN narrows,
    /// !PATTERN excludes. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    limit: Vec<String>,
    /// Switches handled at once, one SSH session each.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    forks: u16,
    /// Seconds a committed change may stay unconfirmed before the switch reverts it.
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    confirm_timeout: u64,
    /// Print one JSON object per line: {"event":"started"|"device"|"summary", ...}.
    #[arg(long)]
    json: bool,
    /// (with --check) Exit with 6 when any switch would change.
    #[arg(long, requires = "check")]
    exit_code: bool,
    #[command(flatten)]
    ssh: SshArgs,
    /// Journal file, appended to [default: .mltctl/journal.jsonl next to the inventory].
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
}

#[derive(Args)]
struct SshArgs {
    /// OpenSSH known_hosts file to check host keys against [default: ~/.ssh/known_hosts].
    #[arg(long, value_name = "FILE")]
    known_hosts: Option<PathBuf>,
    /// Record the host key of a device that has none in known_hosts. A changed key is
    /// always refused.
    #[arg(long)]
    accept_new_host_keys: bool,
    /// Seconds to wait for a device to accept the TCP connection.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    connect_timeout: u64,
    /// Seconds any one command on a device may take.
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    command_timeout: u64,
}

impl SshArgs {
    fn options(&self) -> SshOptions {
        SshOptions {
            known_hosts: self
                .known_hosts
                .clone()
                .unwrap_or_else(|| ssh::expand_home(std::path::Path::new("~/.ssh/known_hosts"))),
            accept_new_host_keys: self.accept_new_host_keys,
            connect_timeout: Duration::from_secs(self.connect_timeout),
            command_timeout: Duration::from_secs(self.command_timeout),
            known_hosts_lock: Default::default(),
        }
    }
}

/// What every command that works on hosts over SSH takes.
#[derive(Args)]
struct HostArgs {
    #[command(flatten)]
    inventory: InventoryArg,
    /// Only these hosts: names, globs (h1*), groups (all, hosts, rack:NAME),
    /// comma-separated; &PATTERN narrows, !PATTERN excludes. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    limit: Vec<String>,
    /// Hosts handled at once, one SSH session each.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    forks: u16,
    /// Directory on every host for the endhost binary and the host's files.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/mltctl")]
    remote_dir: String,
    /// Print one JSON object per line: {"event":"host"|"summary", ...}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    ssh: SshArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DatapathArg {
    Udp,
    Dpdk,
}

impl From<DatapathArg> for endhost_core::config::DatapathKind {
    fn from(d: DatapathArg) -> Self {
        match d {
            DatapathArg::Udp => endhost_core::config::DatapathKind::Udp,
            DatapathArg::Dpdk => endhost_core::config::DatapathKind::Dpdk,
        }
    }
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
    /// `apply` finished with failed or unreachable switches (already reported).
    SwitchesFailed,
    SwitchesUnreachable,
    /// A command-line value is wrong in a way clap cannot see.
    Usage(String),
    /// A playbook step failed with this exit code (already reported).
    Step(i32),
    /// A signal stopped the run (already reported).
    Interrupted,
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
        Err(Failure::SwitchesFailed) => ExitCode::from(4),
        Err(Failure::SwitchesUnreachable) => ExitCode::from(5),
        Err(Failure::Step(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(Failure::Interrupted) => ExitCode::from(mltctl::interrupt::EXIT_CODE),
        Err(Failure::Usage(message)) => {
            eprintln!("mltctl: {message}");
            ExitCode::from(2)
        }
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
            network,
            ipmac,
        } => {
            let inv = load(&inventory.inventory)?;
            let plan = Plan::build(&inv);
            if let Some(name) = host {
                let rank = host_rank(&plan, &name)?;
                if network {
                    let datapath = plan.job.datapath.kind;
                    print_json(&mltctl::plan::hosts::network_plan(&plan, rank, datapath))?;
                } else if ipmac {
                    print(&mltctl::plan::hosts::ip_mac(&plan, rank))?;
                } else {
                    print_json(&plan.transport_config(rank))?;
                }
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
        Command::Apply(args) => apply(args),
        Command::Sim(args) => sim(args),
        Command::Groups {
            inventory,
            contention,
            json,
        } => groups(&inventory.inventory, &contention, json),
        Command::Bootstrap {
            hosts,
            check,
            diff,
            datapath,
            endhost,
        } => bootstrap(&hosts, check, diff, datapath, endhost),
        Command::Launch {
            hosts,
            datapath,
            ready_timeout,
        } => launch(&hosts, datapath, ready_timeout),
        Command::Env {
            inventory,
            host,
            remote_dir,
            datapath,
            json,
        } => {
            let plan = Plan::build(&load(&inventory.inventory)?);
            let rank = host_rank(&plan, &host)?;
            let datapath = datapath.map_or(plan.job.datapath.kind, Into::into);
            let remote = hosts::Remote::new(&remote_dir, &plan).map_err(Failure::Usage)?;
            let env = hosts::environment(&plan, rank, &remote, datapath);
            if json {
                print_json(&env)?;
            } else {
                print(&hosts::env_file(&env))?;
            }
            Ok(())
        }
        Command::Stop { hosts } => stop(&hosts),
        Command::Play {
            playbook,
            inventory,
            check,
            diff,
            limit,
            known_hosts,
            remote_dir,
        } => play(&playbook::Run {
            playbook,
            inventory: inventory.inventory,
            check,
            diff,
            limit,
            known_hosts,
            remote_dir,
        }),
        Command::Generate {
            spines,
            leaves,
            hosts_per_leaf,
            layers,
            params_per_layer,
            vendors,
            output,
        } => {
            let size = FabricSize {
                spines,
                leaves,
                hosts_per_leaf,
                layers,
                params_per_layer,
            };
            let yaml = fabric_yaml_with(size, &vendors)?;
            match output {
                Some(path) => std::fs::write(&path, yaml)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => print(&yaml)?,
            }
            Ok(())
        }
    }
}

fn groups(inventory: &std::path::Path, contention: &[String], json: bool) -> Result<(), Failure> {
    use mltctl::plan::groups::{Contention, Pattern, Rack};
    let plan = Plan::build(&load(inventory)?);
    let racks = Rack::of_plan(&plan);
    let mut reported = Contention::default();
    for item in contention {
        match item.split_once(':') {
            Some(("rack", name)) => {
                let rack = plan
                    .racks
                    .iter()
                    .position(|r| r.name == name)
                    .ok_or_else(|| {
                        Failure::Usage(format!("--contention {item}: no rack named `{name}`"))
                    })?;
                reported.racks.insert(rack);
            }
            Some(("host", name)) => {
                let rank = plan.host_rank(name).ok_or_else(|| {
                    Failure::Usage(format!("--contention {item}: no host named `{name}`"))
                })?;
                reported.workers.insert(plan.hosts[rank].rank);
            }
            _ => {
                return Err(Failure::Usage(format!(
                    "--contention {item}: expected rack:NAME or host:NAME"
                )));
            }
        }
    }
    let pattern = Pattern::divide_and_shuffle(&racks, &reported);
    if json {
        #[derive(Serialize)]
        struct Output<'a> {
            #[serde(flatten)]
            pattern: &'a Pattern,
            hosts: Vec<&'a str>,
            /// [rank][iteration]: the index of the rank's group, or null.
            group_of: Vec<Vec<Option<usize>>>,
        }
        print_json(&Output {
            pattern: &pattern,
            hosts: plan.hosts.iter().map(|h| h.name.as_str()).collect(),
            group_of: (0..pattern.workers as u32)
                .map(|r| pattern.group_of(r))
                .collect(),
        })?;
    } else {
        let name = |rank: &u32| plan.hosts[*rank as usize].name.as_str();
        let mut out = format!(
            "{} hosts in {} racks; period {} iterations; mixing: {} (λ₂ = {:.6})\n",
            pattern.workers,
            racks.len(),
            pattern.period,
            if pattern.mixing.connected {
                "every host reached"
            } else {
                "DISCONNECTED"
            },
            pattern.mixing.second_eigenvalue
        );
        for it in &pattern.iterations {
            let groups: Vec<String> = it
                .groups
                .iter()
                .map(|g| {
                    let names: Vec<&str> = g.ranks.iter().map(name).collect();
                    format!("{} [{}]", g.kind.label(), names.join(" "))
                })
                .collect();
            out.push_str(&format!("{:>4}: {}\n", it.iteration, groups.join(", ")));
        }
        print(&out)?;
    }
    if !pattern.mixing.connected {
        return Err(anyhow::anyhow!(
            "this pattern never mixes every host (λ₂ = {}); do not use it",
            pattern.mixing.second_eigenvalue
        )
        .into());
    }
    Ok(())
}

fn sim(args: SimArgs) -> Result<(), Failure> {
    use mltctl::sim::{Setup, report};
    let positive = [
        ("--duration", args.duration),
        ("--delta-t-ms", args.delta_t_ms),
        ("--model-mb", args.model_mb),
    ];
    for (name, value) in positive {
        if !(value.is_finite() && value > 0.0) {
            return Err(Failure::Usage(format!(
                "{name} must be positive, not {value}"
            )));
        }
    }
    let fractions = [
        ("--p-fraction", args.p_fraction, 0.0, 1.0),
        ("--eta", args.eta, 0.0, 1.0),
        ("--lambda", args.lambda, 0.0, 1.0),
        ("--bandwidth-error", args.bandwidth_error, 0.0, 0.99),
    ];
    for (name, value, lo, hi) in fractions {
        if !(lo..=hi).contains(&value) {
            return Err(Failure::Usage(format!(
                "{name} must be between {lo} and {hi}, not {value}"
            )));
        }
    }
    if args.lambda == 0.0 {
        return Err(Failure::Usage(
            "--lambda must be above 0 (a link of 0 Gbit/s)".into(),
        ));
    }
    if !(args.theta >= 0.0 && args.latency_ms >= 0.0) {
        return Err(Failure::Usage(
            "--theta and --latency-ms cannot be negative".into(),
        ));
    }
    if let Some(n) = args.workers.iter().find(|&&n| !(2..=100_000).contains(&n)) {
        return Err(Failure::Usage(format!(
            "--workers: {n} is not between 2 and 100000"
        )));
    }
    let template = Setup {
        duration: args.duration,
        min_group_fraction: args.p_fraction,
        eta: args.eta,
        theta: args.theta,
        delta_t: args.delta_t_ms / 1e3,
        model_bits: args.model_mb * 8e6,
        latency: args.latency_ms / 1e3,
        lambda: args.lambda,
        full_every: args.full_every,
        cold_start: args.cold_start,
        bandwidth_error: args.bandwidth_error,
        ..Setup::paper(args.workers[0], args.trace[0])
    };
    let runs = (args.trace.len() * args.workers.len() * 3) as u64 * args.trials;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(runs);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {eta} left")
                .expect("valid template"),
        );
        bar
    });
    let sweep = report::sweep(
        &template,
        &args.trace,
        &args.workers,
        args.trials,
        args.seed,
        || {
            if let Some(bar) = &bar {
                bar.inc(1);
            }
        },
    );
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, mltctl::sim::plot::svg(&sweep))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        print_json(&sweep)?;
    } else {
        print(&sweep.to_string())?;
    }
    Ok(())
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

fn apply(args: ApplyArgs) -> Result<(), Failure> {
    let path = &args.inventory.inventory;
    let plan = Plan::build(&load(path)?);
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
    let summary = Summary::of(&results);
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

/// The plan and the hosts a host command works on.
fn host_targets(args: &HostArgs) -> Result<(Plan, Vec<usize>), Failure> {
    let plan = Plan::build(&load(&args.inventory.inventory)?);
    let selected = Selection::parse(&args.limit)
        .and_then(|s| s.select(&plan))
        .map_err(|e| Failure::Usage(e.to_string()))?;
    if selected.hosts.is_empty() {
        return Err(Failure::Usage("--limit selects no host".into()));
    }
    Ok((plan, selected.hosts))
}

/// Prints one host's line as it finishes (JSON Lines with --json), to standard output.
fn host_line(json: bool, text: String, value: &impl Serialize) {
    if json {
        let mut line = serde_json::json!({ "event": "host" });
        if let (Some(map), Ok(serde_json::Value::Object(fields))) =
            (line.as_object_mut(), serde_json::to_value(value))
        {
            map.extend(fields);
        }
        println!("{line}");
    } else {
        print!("{text}");
    }
}

fn host_summary(
    json: bool,
    what: &str,
    summary: &hosts::HostSummary,
    seconds: f64,
) -> Result<(), Failure> {
    if json {
        println!(
            "{}",
            serde_json::json!({"event": "summary", "summary": summary, "seconds": seconds})
        );
    } else {
        print!("{}", hosts::summary_line(what, summary, seconds));
    }
    hosts_outcome(summary)
}

fn hosts_outcome(summary: &hosts::HostSummary) -> Result<(), Failure> {
    if summary.failed > 0 {
        Err(Failure::SwitchesFailed)
    } else if summary.unreachable > 0 {
        Err(Failure::SwitchesUnreachable)
    } else {
        Ok(())
    }
}

fn bootstrap(
    args: &HostArgs,
    check: bool,
    diff: bool,
    datapath: Option<DatapathArg>,
    endhost: Option<PathBuf>,
) -> Result<(), Failure> {
    use mltctl::hosts::bootstrap::{self, Binary};
    let (plan, targets) = host_targets(args)?;
    let binary_path = match endhost {
        Some(path) => path,
        None => std::env::current_exe()
            .context("cannot find mltctl's own path")?
            .with_file_name("endhost"),
    };
    let bytes = endhost::input::read_bytes(&binary_path, MAX_BINARY_BYTES).with_context(|| {
        format!(
            "cannot read the endhost binary {} (build it, or give --endhost)",
            binary_path.display()
        )
    })?;
    let options = bootstrap::Options {
        check,
        forks: usize::from(args.forks),
        ssh: args.ssh.options(),
        remote: hosts::Remote::new(&args.remote_dir, &plan).map_err(Failure::Usage)?,
        datapath: datapath.map_or(plan.job.datapath.kind, Into::into),
    };
    let started = std::time::Instant::now();
    let results = bootstrap::run_all(&plan, &targets, &Binary::new(bytes), &options, &mut |p| {
        if let mltctl::parallel::Progress::Finished(_, result) = p {
            host_line(args.json, bootstrap::render(result, check, diff), result);
        }
    });
    let summary = hosts::HostSummary::of(results.iter().map(|r| &r.status));
    let what = if check {
        "bootstrap (check)"
    } else {
        "bootstrap"
    };
    host_summary(args.json, what, &summary, started.elapsed().as_secs_f64())
}

fn launch(
    args: &HostArgs,
    datapath: Option<DatapathArg>,
    ready_timeout: u64,
) -> Result<(), Failure> {
    use mltctl::hosts::launch;
    let (plan, targets) = host_targets(args)?;
    if targets.len() < plan.hosts.len() {
        let left_out: Vec<&str> = (0..plan.hosts.len())
            .filter(|rank| !targets.contains(rank))
            .map(|rank| plan.hosts[rank].name.as_str())
            .collect();
        return Err(Failure::Usage(format!(
            "launch starts the whole job: --limit leaves out {} of its {} hosts ({})",
            left_out.len(),
            plan.hosts.len(),
            left_out.join(", ")
        )));
    }
    let options = launch::Options {
        forks: usize::from(args.forks),
        ssh: args.ssh.options(),
        remote: hosts::Remote::new(&args.remote_dir, &plan).map_err(Failure::Usage)?,
        datapath: datapath.map_or(plan.job.datapath.kind, Into::into),
        ready_timeout: Duration::from_secs(ready_timeout),
    };
    let started = std::time::Instant::now();
    let (results, launched) = launch::launch(&plan, &targets, &options, &mut |p| {
        if let mltctl::parallel::Progress::Finished(_, r) = p {
            eprint!(
                "{}",
                hosts::status_line(&r.host, &r.endpoint, r.status, "started")
            );
        }
    });
    for r in results
        .iter()
        .filter(|r| r.status != hosts::HostStatus::Changed)
    {
        let message = r.message.as_deref().unwrap_or("");
        eprint!(
            "{}",
            hosts::status_line(&r.host, &r.endpoint, r.status, message)
        );
    }
    let summary = hosts::HostSummary::of(results.iter().map(|r| &r.status));
    eprint!(
        "{}",
        hosts::summary_line("launch", &summary, started.elapsed().as_secs_f64())
    );
    if let Some(launched) = launched {
        print_json(&launched)?;
    }
    hosts_outcome(&summary)
}

fn stop(args: &HostArgs) -> Result<(), Failure> {
    use mltctl::hosts::launch;
    let (plan, targets) = host_targets(args)?;
    let ssh = args.ssh.options();
    let remote = hosts::Remote::new(&args.remote_dir, &plan).map_err(Failure::Usage)?;
    let started = std::time::Instant::now();
    let results = mltctl::parallel::run(
        &targets,
        usize::from(args.forks),
        |&rank| launch::stop_host(&plan, rank, &ssh, &remote),
        &mut |p: mltctl::parallel::Progress<'_, launch::HostResult>| {
            if let mltctl::parallel::Progress::Finished(_, r) = p {
                let detail = match (&r.message, r.pid) {
                    (Some(m), _) => m.clone(),
                    (None, Some(pid)) => format!("stopped {pid}"),
                    (None, None) => "not running".into(),
                };
                host_line(
                    args.json,
                    hosts::status_line(&r.host, &r.endpoint, r.status, &detail),
                    r,
                );
            }
        },
    );
    let summary = hosts::HostSummary::of(results.iter().map(|r| &r.status));
    host_summary(args.json, "stop", &summary, started.elapsed().as_secs_f64())
}

fn play(run: &playbook::Run) -> Result<(), Failure> {
    let text = endhost::input::read_text(&run.playbook, MAX_PLAYBOOK_BYTES)
        .with_context(|| format!("cannot read {}", run.playbook.display()))?;
    let steps = playbook::parse(&run.playbook, &text).map_err(|e| Failure::Usage(e.to_string()))?;
    let plan = Plan::build(&load(&run.inventory)?);
    // Every step's command is known before the first runs: a bad --limit stops the run
    // before anything is touched.
    let commands = steps
        .iter()
        .map(|step| playbook::command(step, run, &plan))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::Usage)?;
    let exe = std::env::current_exe().context("cannot find mltctl's own path")?;
    let total = steps.len();
    for (n, (step, command)) in steps.iter().zip(commands).enumerate() {
        let name = step.kind.name();
        let args = match command {
            StepPlan::Skip(why) => {
                eprintln!("== step {}/{total} {name}: skipped ({why})", n + 1);
                continue;
            }
            StepPlan::Command(args) => args,
        };
        eprintln!(
            "== step {}/{total} {name}: mltctl {}",
            n + 1,
            args.join(" ")
        );
        let status = std::process::Command::new(&exe)
            .args(&args)
            .status()
            .with_context(|| format!("cannot run step {name}"))?;
        if !status.success() {
            let code = status.code().unwrap_or(1);
            eprintln!(
                "== step {}/{total} {name} failed (exit {code}); the remaining {} step(s) did not run",
                n + 1,
                total - n - 1
            );
            return Err(Failure::Step(code));
        }
    }
    eprintln!("== all {total} steps succeeded");
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

fn host_rank(plan: &Plan, name: &str) -> Result<usize, Failure> {
    plan.host_rank(name)
        .ok_or_else(|| Failure::Usage(format!("no host named `{name}` in the inventory")))
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
