//! `mltctl`: parses the command line, runs the command (see `cli/`), and turns its
//! outcome into an exit code.

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command};

#[global_allocator]
static ALLOCATOR: mltctl::allocator::Allocator = mltctl::allocator::Allocator;

/// Before the first allocation, mimalloc's arenas set to be committed as they fill
/// (`allocator::commit_arenas_as_they_fill`): commands that keep little at a time then
/// shrink when they free. Runs from `.init_array`, before the Rust runtime allocates
/// anything.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENAS_AS_THEY_FILL: extern "C" fn() = {
    extern "C" fn commit_arenas_as_they_fill() {
        mltctl::allocator::commit_arenas_as_they_fill();
    }
    commit_arenas_as_they_fill
};

fn main() -> ExitCode {
    let command = Cli::parse().command;
    if command.forks_wait_on_devices() {
        mltctl::allocator::return_freed_memory_at_once();
        mltctl::allocator::map_big_blocks_on_their_own();
    }
    let result = match command {
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
