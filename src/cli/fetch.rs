//! `mltctl fetch`: every selected switch's running configuration, saved for `diff`.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use mlt_common::outcome::{Status, Summary};
use mltctl::fetch;
use mltctl::parallel::Progress;

use super::{Failure, InventoryArg, SshArgs, load, planned};

/// Read each switch's running configuration over SSH and save it for `diff`.
///
/// One SSH session per switch (host keys checked, --forks at a time) runs the same
/// read `apply` does — `sonic-cfggen -d --print-data`, `show running-config`, `nv config
/// show -r applied -o commands` — and the output is saved in DIR as NAME.json, NAME.cfg
/// or NAME.nvue, the names `mltctl diff --running DIR` reads. Nothing is changed on any
/// switch. Configurations hold secrets (password hashes, keys): DIR is the admin's to
/// protect; mltctl prints none of it. --json events: device, summary.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Directory to save the running configurations in (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub run: super::SwitchRun,
    #[command(flatten)]
    pub ssh: SshArgs,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let plan = planned(&load(&args.inventory.inventory)?)?;
    let targets = super::apply::selected(&plan, &args.run.limit)?;
    // What is saved there carries the switches' secrets: a directory only this user can
    // read or change.
    mlt_common::files::trusted_dir(&args.out).with_context(|| {
        format!(
            "cannot use {} for running configurations",
            args.out.display()
        )
    })?;
    let progress = !args.run.json && std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let ssh = args.ssh.options();
    let results = fetch::fetch_all(
        &plan.switches,
        &targets,
        &args.out,
        usize::from(args.run.forks),
        &ssh,
        &mut |p| {
            if let Progress::Finished(_, r) = p {
                if args.run.json {
                    println!("{}", super::hosts::event_line("device", r));
                } else {
                    let detail = match (&r.file, &r.message) {
                        (Some(file), _) => format!("saved {} ({} bytes)", file.display(), r.bytes),
                        (None, Some(message)) => message.clone(),
                        (None, None) => String::new(),
                    };
                    println!(
                        "{:<12} {} ({}, {}): {detail}",
                        r.status, r.device, r.vendor, r.endpoint
                    );
                }
            } else if progress {
                eprint!(".");
            }
        },
    );
    super::say_recorded(&ssh);
    if progress {
        eprintln!();
    }
    let summary = Summary::of(results.iter().map(|r| &r.status));
    let seconds = started.elapsed().as_secs_f64();
    if args.run.json {
        println!(
            "{}",
            serde_json::json!({"event": "summary", "summary": summary, "seconds": seconds})
        );
    } else {
        println!(
            "{} switch(es): {} saved, {} failed, {} unreachable ({seconds:.1} s); next: mltctl diff --running {}",
            summary.total(),
            summary.ok,
            summary.failed,
            summary.unreachable,
            args.out.display()
        );
    }
    if results.iter().any(|r| r.status == Status::Failed) {
        Err(Failure::SwitchesFailed)
    } else if summary.unreachable > 0 {
        Err(Failure::SwitchesUnreachable)
    } else {
        Ok(())
    }
}
