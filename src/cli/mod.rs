//! mltctl's commands, cargo-style: one file per command with its arguments, its run
//! and its output; what several share lives here and in [`hosts`].

pub mod apply;
pub mod bootstrap;
pub mod confirm;
pub mod diff;
pub mod env;
pub mod fetch;
pub mod generate;
pub mod groups;
pub mod history;
pub mod hosts;
pub mod lab;
pub mod launch;
pub mod plan;
pub mod play;
pub mod render;
pub mod rollback;
pub mod sim;
pub mod stop;
pub mod validate;
pub mod verify;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use mlt_common::outcome::Status;
use mlt_common::units;
use mltctl::diag::Diagnostics;
use mltctl::inventory::{self, Inventory, LoadError};
use mltctl::plan::Plan;
use mltctl::ssh::{self, SshOptions};
use serde::Serialize;

pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file could not be read or written, or a switch cannot be configured
     as planned (the message says which)
  2  the command line is wrong (a --limit that matches no switch or host, or an
     unknown host name, among them)
  3  the inventory is invalid; every problem is listed as file:line:col: message
     and nothing was changed
  4  (apply) at least one switch failed: it was rolled back, or reverts by itself;
     its line says which; (bootstrap, launch, stop) at least one host failed: its
     line says why (bootstrap undoes its network changes on the host; a failed DPDK
     preparation step keeps them); (fetch) a switch's configuration could not be
     read or saved; (verify) a switch's configuration or counters could not be read
  5  (apply, fetch, bootstrap, launch, stop, verify) at least one switch or host was
     unreachable (none failed); nothing was sent to it
  6  (diff --exit-code, apply --check --exit-code) at least one switch differs from
     the plan
  7  (verify) at least one switch runs something the plan does not say (its lines
     say what)
  8  (verify) nothing differs, but a counter the plan's queues need is not exposed by
     the switch's OS (its lines name it)
  130 (apply) SIGINT or SIGTERM stopped the run: no switch was started after it; a
     switch in progress had its staged change discarded or its commit rolled back
     (each line and the journal say which); a second signal ends mltctl at once and
     switches with a revert timer undo an unconfirmed commit by themselves
  (play) the exit code of the step that failed; with --check, 5 when a step found
     unreachable switches or hosts (the play went on)";

/// Deploy an ML-aware network transport from one inventory file.
///
/// mltctl reads an inventory (switches, links, hosts and the training job), checks it,
/// and plans every setting: DSCP values and strict-priority queues, per-queue RED/ECN
/// thresholds from MLT's queueing model, path addresses and static routes for source
/// routing, and each host's MAC map and transport configuration.
#[derive(clap::Parser)]
#[command(name = "mltctl", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand)]
pub enum Command {
    Validate(validate::Args),
    Plan(plan::Args),
    Render(render::Args),
    Diff(diff::Args),
    Fetch(fetch::Args),
    Apply(apply::Args),
    Confirm(confirm::Args),
    History(history::Args),
    Rollback(rollback::Args),
    Bootstrap(bootstrap::Args),
    Launch(launch::Args),
    Env(env::Args),
    Stop(stop::Args),
    Play(play::Args),
    Generate(generate::Args),
    Sim(sim::Args),
    Groups(groups::Args),
    Verify(verify::Args),
    Lab(lab::Args),
}

impl Command {
    /// Whether the command holds sessions with switches or hosts on many threads that
    /// mostly wait (`parallel::run`): those ask the allocator to give memory back at
    /// once (`allocator::return_freed_memory_at_once`). The others read files and compute,
    /// or run the lab's emulation.
    pub fn forks_wait_on_devices(&self) -> bool {
        matches!(
            self,
            Command::Fetch(_)
                | Command::Verify(_)
                | Command::Apply(_)
                | Command::Confirm(_)
                | Command::Rollback(_)
                | Command::Bootstrap(_)
                | Command::Launch(_)
                | Command::Stop(_)
                | Command::Play(_)
        )
    }
}

#[derive(clap::Args)]
pub struct InventoryArg {
    /// The inventory file (YAML).
    #[arg(
        short,
        long = "inventory",
        value_name = "FILE",
        env = "MLTCTL_INVENTORY"
    )]
    pub inventory: PathBuf,
}

#[derive(clap::Args)]
pub struct SshArgs {
    /// OpenSSH known_hosts file to check host keys against [default: ~/.ssh/known_hosts].
    #[arg(long, value_name = "FILE", env = "MLTCTL_KNOWN_HOSTS")]
    pub known_hosts: Option<PathBuf>,
    /// Record the host key of a device that has none in known_hosts. A changed key is
    /// always refused.
    #[arg(long)]
    pub accept_new_host_keys: bool,
    /// Seconds to wait for a device to accept the TCP connection.
    #[arg(long, value_name = "SECS", default_value_t = CONNECT_TIMEOUT, value_parser = units::positive_seconds)]
    pub connect_timeout: u64,
    /// Seconds any one command on a device may take.
    #[arg(long, value_name = "SECS", default_value_t = COMMAND_TIMEOUT, value_parser = units::positive_seconds)]
    pub command_timeout: u64,
}

const CONNECT_TIMEOUT: u64 = 10;
const COMMAND_TIMEOUT: u64 = 120;

impl SshArgs {
    /// These options as command-line arguments (defaults left out).
    pub fn as_arguments(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(file) = &self.known_hosts {
            args.extend(["--known-hosts".to_string(), file.display().to_string()]);
        }
        if self.accept_new_host_keys {
            args.push("--accept-new-host-keys".into());
        }
        if self.connect_timeout != CONNECT_TIMEOUT {
            args.extend(["--connect-timeout".into(), self.connect_timeout.to_string()]);
        }
        if self.command_timeout != COMMAND_TIMEOUT {
            args.extend(["--command-timeout".into(), self.command_timeout.to_string()]);
        }
        args
    }

    fn options(&self) -> SshOptions {
        SshOptions {
            known_hosts: self
                .known_hosts
                .clone()
                .unwrap_or_else(|| ssh::expand_home(std::path::Path::new("~/.ssh/known_hosts"))),
            accept_new_host_keys: self.accept_new_host_keys,
            connect_timeout: Duration::from_secs(self.connect_timeout),
            command_timeout: Duration::from_secs(self.command_timeout),
            recorded: Default::default(),
        }
    }
}

/// How long a committed change may stay unconfirmed (`--confirm-timeout`): a duration
/// as `mlt_common::units` reads it (a bare number is seconds), 1 s to a day.
pub fn confirm_seconds(text: &str) -> Result<u64, String> {
    match units::positive_seconds(text).map_err(|e| e.to_string())? {
        seconds if seconds <= 86_400 => Ok(seconds),
        _ => Err(format!("`{text}` is longer than a day")),
    }
}

/// Which switches a run works on, how many at once, and how it reports: one group for
/// every command that works on switches over SSH (apply, rollback, confirm, fetch).
#[derive(clap::Args)]
pub struct SwitchRun {
    /// Only these switches: names, globs (leaf*), groups (all, leaf, spine, rack:NAME,
    /// vendor:NAME, sonic, eos, cumulus, onyx), comma-separated; &PATTERN narrows,
    /// !PATTERN excludes. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Vec<String>,
    /// Switches handled at once, one SSH session each.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub forks: u16,
    /// Print one JSON object per line, {"event": ...}: the command's events (listed in
    /// its description), then {"event":"summary", ...}.
    #[arg(long)]
    pub json: bool,
}

/// Where a run keeps its journal and per-switch locks.
#[derive(clap::Args)]
pub struct StateArgs {
    /// Directory for the journal (journal.jsonl) and the per-switch locks (locks/)
    /// [default: the --journal file's directory, else .mltctl next to the inventory].
    /// --check writes nothing there.
    #[arg(long, value_name = "DIR", env = "MLTCTL_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Journal file [default: journal.jsonl in the state directory].
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
}

impl StateArgs {
    /// These options as command-line arguments.
    pub fn as_arguments(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(dir) = &self.state_dir {
            args.extend(["--state-dir".to_string(), dir.display().to_string()]);
        }
        if let Some(file) = &self.journal {
            args.extend(["--journal".to_string(), file.display().to_string()]);
        }
        args
    }

    fn dir(&self, inventory: &std::path::Path) -> PathBuf {
        if let Some(dir) = &self.state_dir {
            return dir.clone();
        }
        if let Some(journal) = &self.journal {
            return journal
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .to_path_buf();
        }
        inventory
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join(".mltctl")
    }

    pub fn journal(&self, inventory: &std::path::Path) -> PathBuf {
        self.journal
            .clone()
            .unwrap_or_else(|| self.dir(inventory).join("journal.jsonl"))
    }

    pub fn locks(&self, inventory: &std::path::Path) -> PathBuf {
        self.dir(inventory).join("locks")
    }
}

/// Says on standard error which host keys a run recorded (--accept-new-host-keys).
pub fn say_recorded(ssh: &SshOptions) {
    for line in ssh.recorded() {
        eprintln!("mltctl: {line}");
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum DatapathArg {
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

/// How each switch or host ended a command, and how the command ended: what a
/// playbook step adds to the play's recap.
pub struct Ran {
    pub devices: Vec<(String, Status)>,
    pub result: Result<(), Failure>,
}

impl From<Failure> for Ran {
    /// A command that stopped before it reached any device.
    fn from(failure: Failure) -> Ran {
        Ran {
            devices: Vec::new(),
            result: Err(failure),
        }
    }
}

/// A run that ended with a known outcome other than success.
pub enum Failure {
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
    /// A signal stopped the run (already reported).
    Interrupted,
    /// Already said; ends with this exit code.
    Reported(u8),
    Error(anyhow::Error),
}

/// Says what `failure` needs said (on standard error) and gives its exit code.
pub fn report(failure: Failure) -> u8 {
    match failure {
        Failure::Invalid(problems) => {
            eprint!("{problems}");
            eprintln!(
                "mltctl: the inventory has {} problem(s); nothing was changed",
                problems.len()
            );
            3
        }
        Failure::InvalidReported => 3,
        Failure::Differs => 6,
        Failure::SwitchesFailed => 4,
        Failure::SwitchesUnreachable => 5,
        Failure::Interrupted => mltctl::interrupt::EXIT_CODE,
        Failure::Reported(code) => code,
        Failure::Usage(message) => {
            eprintln!("mltctl: {message}");
            2
        }
        // The reader went away (`mltctl plan --explain | head`): nothing is wrong.
        Failure::Error(e) if closed_pipe(&e) => 0,
        Failure::Error(e) => {
            eprintln!("mltctl: {e:#}");
            1
        }
    }
}

/// Whether `e` comes from writing to a pipe whose reader has closed it.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Error(e)
    }
}

pub fn host_rank(plan: &Plan, name: &str) -> Result<usize, Failure> {
    plan.host_rank(name)
        .ok_or_else(|| Failure::Usage(format!("no host named `{name}` in the inventory")))
}

pub fn load(path: &std::path::Path) -> Result<Inventory, Failure> {
    loaded(inventory::load(path))
}

/// The plan of a valid inventory, refused (as invalid, exit 3) when its thresholds
/// cannot work: see [`Plan::problems`].
pub fn planned(inv: &Inventory) -> Result<Plan, Failure> {
    let plan = Plan::build(inv);
    let problems = plan.problems(inv);
    if problems.is_empty() {
        Ok(plan)
    } else {
        Err(Failure::Invalid(problems))
    }
}

pub fn loaded(result: Result<Inventory, LoadError>) -> Result<Inventory, Failure> {
    result.map_err(load_failure)
}

pub fn load_failure(e: LoadError) -> Failure {
    match e {
        LoadError::Invalid(problems) => Failure::Invalid(problems),
        io => Failure::Error(io.into()),
    }
}

pub fn layer_names(inv: &Inventory) -> Vec<String> {
    inv.training.layers.iter().map(|l| l.name.clone()).collect()
}

pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

/// Pretty JSON for a person at a terminal, compact JSON for programs.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let pretty = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if pretty {
        serde_json::to_writer_pretty(&mut out, value)
    } else {
        serde_json::to_writer(&mut out, value)
    }
    // As an I/O error, so that a closed pipe is seen as one.
    .map_err(std::io::Error::from)
    .context("cannot write JSON")?;
    writeln!(out)
        .and_then(|()| out.flush())
        .context("cannot write to standard output")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command and every option says what it is for in `--help`.
    #[test]
    fn every_command_and_option_has_help() {
        let missing = endhost::help::missing_help(&super::Cli::command());
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
