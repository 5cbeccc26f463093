//! What `--help` must say: both binaries (mltctl, endhost) check their command trees
//! with this in their tests.

/// Commands without a description and options without help text in `command` and
/// its subcommands, as `"path --option: no help"` lines (empty when all is said).
pub fn missing_help(command: &clap::Command) -> Vec<String> {
    let mut out = Vec::new();
    walk(command, "", &mut out);
    out
}

fn walk(command: &clap::Command, path: &str, out: &mut Vec<String>) {
    let path = format!("{path} {}", command.get_name());
    if command.get_about().is_none() && command.get_long_about().is_none() {
        out.push(format!("{path}: no description"));
    }
    for arg in command.get_arguments() {
        let builtin = ["help", "version"].contains(&arg.get_id().as_str());
        if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
            out.push(format!("{path} --{}: no help", arg.get_id()));
        }
    }
    for sub in command.get_subcommands() {
        if sub.get_name() != "help" {
            walk(sub, &path, out);
        }
    }
}
