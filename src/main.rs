//! `mltctl`: parses the command line, runs the command (see `cli/`), and turns its
//! outcome into an exit code.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command, Failure};

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Validate(args) => cli::validate::run(args),
        Command::Plan(args) => cli::plan::run(args),
        Command::Render(args) => cli::render::run(args),
        Command::Diff(args) => cli::diff::run(args),
        Command::Fetch(args) => cli::fetch::run(args),
        Command::Apply(args) => cli::apply::run(args),
        Command::Confirm(args) => cli::confirm::run(args),
        Command::History(args) => cli::history::run(args),
        Command::Rollback(args) => cli::rollback::run(args),
        Command::Bootstrap(args) => cli::bootstrap::run(args),
        Command::Launch(args) => cli::launch::run(args),
        Command::Env(args) => cli::env::run(args),
        Command::Stop(args) => cli::stop::run(args),
        Command::Play(args) => cli::play::run(args),
        Command::Generate(args) => cli::generate::run(args),
        Command::Sim(args) => cli::sim::run(args),
        Command::Groups(args) => cli::groups::run(args),
    };
    match result {
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
        Err(Failure::Interrupted) => ExitCode::from(mltctl::interrupt::EXIT_CODE),
        Err(Failure::Usage(message)) => {
            eprintln!("mltctl: {message}");
            ExitCode::from(2)
        }
        // The reader went away (`mltctl plan --explain | head`): nothing is wrong.
        Err(Failure::Error(e)) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(Failure::Error(e)) => {
            eprintln!("mltctl: {e:#}");
            ExitCode::from(1)
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
