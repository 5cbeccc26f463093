//! `mltctl verify`: every selected switch's configuration and queue counters against
//! the plan.

use std::io::IsTerminal;
use std::time::Duration;

use mltctl::parallel::Progress;
use mltctl::verify::{self, SwitchCheck, Verdict};
use switch_config::counters::Count;

use super::{Failure, InventoryArg, SshArgs, load, planned};

/// Check that each switch runs the plan and counts in the plan's queues.
///
/// Each switch is read over SSH (host keys checked, --forks at a time): its running
/// configuration, compared with the plan as `diff` does (the DSCP → queue map, which
/// every switch must run alike for spraying to keep classes apart, is named as such),
/// and its per-queue counters in the OS's own print form — SONiC `show queue counters
/// --json` and `show queue wredcounters --json`, EOS `show interfaces counters queue
/// detail | json` and `show qos interfaces ecn counters queue | json`, NVUE `nv show
/// interface PORT counters qos -o json`, Onyx `show interfaces ethernet S/P
/// congestion-control | json-print`. After --window the counters are read again and
/// what each planned queue counted in between is shown: packets, drops, WRED drops, ECN
/// marks. A counter the OS does not expose is named, never taken as zero. Nothing is
/// changed on any switch. --json events: device, summary.
///
/// Verdicts: ok (runs the plan; its queues' counters are all exposed), mismatch (lines
/// say what the switch runs and what the plan wants), unverifiable (a counter the plan's
/// queues need is not exposed by this OS; which, and why), failed, unreachable.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Seconds between the two counter readings: at least one counter poll interval
    /// (SONiC polls queue counters every 10 s by default; NVIDIA switches every 2 s).
    #[arg(long, value_name = "SECS", default_value_t = 11, value_parser = mlt_common::units::seconds)]
    pub window: u64,
    #[command(flatten)]
    pub run: super::SwitchRun,
    #[command(flatten)]
    pub ssh: SshArgs,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let plan = planned(&load(&args.inventory.inventory)?)?;
    let targets = super::apply::selected(&plan, &args.run.limit)?;
    let progress = !args.run.json && std::io::stderr().is_terminal();
    if progress {
        eprintln!(
            "reading {} switch(es), then their counters again after {} s",
            targets.len(),
            args.window
        );
    }
    let ssh = args.ssh.options();
    let checks = verify::verify_all(
        &plan.switches,
        &targets,
        usize::from(args.run.forks),
        &ssh,
        Duration::from_secs(args.window),
        &mut |p| {
            if let Progress::Finished(_, check) = p {
                if args.run.json {
                    println!("{}", super::hosts::event_line("device", check));
                } else {
                    print!("{}", shown(check));
                }
            }
        },
    );
    super::say_recorded(&ssh);
    let count = |v: Verdict| checks.iter().filter(|c| c.verdict == v).count();
    if args.run.json {
        println!(
            "{}",
            serde_json::json!({
                "event": "summary",
                "switches": checks.len(),
                "ok": count(Verdict::Ok),
                "mismatch": count(Verdict::Mismatch),
                "unverifiable": count(Verdict::Unverifiable),
                "failed": count(Verdict::Failed),
                "unreachable": count(Verdict::Unreachable),
            })
        );
    } else {
        println!(
            "{} switch(es): {} ok, {} mismatch, {} unverifiable, {} failed, {} unreachable",
            checks.len(),
            count(Verdict::Ok),
            count(Verdict::Mismatch),
            count(Verdict::Unverifiable),
            count(Verdict::Failed),
            count(Verdict::Unreachable)
        );
    }
    let exit = [
        (Verdict::Failed, 4),
        (Verdict::Mismatch, 7),
        (Verdict::Unreachable, 5),
        (Verdict::Unverifiable, 8),
    ]
    .into_iter()
    .find(|(verdict, _)| count(*verdict) > 0);
    match exit {
        Some((_, code)) => Err(Failure::Reported(code)),
        None => Ok(()),
    }
}

/// A switch's lines for people: its verdict, then what differs or cannot be verified,
/// then what each planned queue counted (`-`: not exposed).
fn shown(check: &SwitchCheck) -> String {
    let mut out = format!(
        "{:<12} {} ({}, {})\n",
        check.verdict, check.device, check.vendor, check.endpoint
    );
    if let Some(message) = &check.message {
        out.push_str(&format!("    {message}\n"));
    }
    for line in &check.mismatches {
        out.push_str(&format!("    differs: {line}\n"));
    }
    for line in &check.unverifiable {
        out.push_str(&format!("    unverifiable: {line}\n"));
    }
    let n = |c: &Count| c.known().map_or("-".to_string(), |n| n.to_string());
    // Queues that counted nothing are left out (--json has them all).
    let counted = check.queues.iter().filter(|q| {
        [&q.packets, &q.marked, &q.dropped, &q.wred_dropped]
            .iter()
            .any(|c| c.known().is_some_and(|n| n > 0))
    });
    for q in counted {
        out.push_str(&format!(
            "    {} queue {}: {} packets, {} marked, {} dropped, {} WRED-dropped\n",
            q.port,
            q.queue,
            n(&q.packets),
            n(&q.marked),
            n(&q.dropped),
            n(&q.wred_dropped)
        ));
    }
    out
}
