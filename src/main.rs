//! `mltctl`: parses the command line, runs the command (see `cli/`), and turns its
//! outcome into an exit code.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command};

fn main() -> ExitCode {
    mltctl::parallel::one_malloc_arena_per_cpu();
    let result = match Cli::parse().command {
        Command::Validate(args) => cli::validate::run(args),
        Command::Plan(args) => cli::plan::run(args),
        Command::Render(args) => cli::render::run(args),
        Command::Diff(args) => cli::diff::run(args),
        Command::Fetch(args) => cli::fetch::run(args),
        Command::Verify(args) => cli::verify::run(args),
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
        Command::Lab(args) => cli::lab::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => ExitCode::from(cli::report(failure)),
    }
}
