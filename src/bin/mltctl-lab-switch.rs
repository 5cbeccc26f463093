//! `mltctl-lab-switch`: the commands of the lab's emulated switches (`mltctl lab up`
//! links each switch's `nv`, `config`, `cli`, ... to it). A binary of its own, apart from
//! `mltctl`, so that each command starts in well under a millisecond: it loads neither
//! OpenSSL nor the rest of mltctl.

use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let status = mltctl_lab::emulator::run_as_called(&argv);
    ExitCode::from(u8::try_from(status).unwrap_or(u8::MAX))
}
