//! `endhost`: parses the command line and runs the command (see `cli/`).

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command};

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Configure(args) => return cli::configure::run(args),
        Command::Serve(args) => cli::serve::run(args),
        Command::Status(args) => cli::status::run(args),
        Command::Probe(args) => cli::probe::run(args),
        Command::Stop(args) => cli::stop::run(args),
        Command::Allreduce(args) => cli::allreduce::run(args),
        Command::Run(args) => cli::run::run(args),
        Command::Controller(args) => cli::controller::run(args),
        Command::Worker(args) => cli::worker::run(args),
        #[cfg(feature = "testbed")]
        Command::Bench(command) => cli::bench::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("endhost: {e:#}");
            ExitCode::from(1)
        }
    }
}
