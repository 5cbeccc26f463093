//! `mltctl lab`: the emulated switches' commands.

use super::Failure;

/// The lab: emulated switches to rehearse on.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(clap::Subcommand)]
pub enum LabCommand {
    Emulate(EmulateArgs),
}

/// Run one command of an emulated switch (its SSH server runs this; not for people).
#[derive(clap::Args)]
#[command(hide = true)]
pub struct EmulateArgs {
    /// The switch's command and its arguments (the switch's directory is $MLT_DEVICE).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<String>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    match args.command {
        LabCommand::Emulate(args) => {
            let status = mltctl::lab::emulator::run(&args.command);
            std::process::exit(status)
        }
    }
}
