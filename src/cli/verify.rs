//! `mltctl verify`: every selected switch's configuration and queue counters, and every
//! host's transport and class probes, against the plan.

use std::io::IsTerminal;
use std::time::Duration;

use mltctl::hosts::Remote;
use mltctl::select::Selection;
use mltctl::verify::{self, HostCheck, Said, SwitchCheck, Verdict};
use switch_config::counters::Count;

use mlt_common::outcome::Status;
use mltctl::plan::Plan;

use super::{Failure, InventoryArg, Ran, SshArgs, load, planned};

/// Check that switches and hosts run the plan, and that each class lands in its queue.
///
/// Each switch is read over SSH (host keys checked, --forks at a time): its running
/// configuration, compared with the plan as `diff` does (the DSCP → queue map, which
/// every switch must run alike for spraying to keep classes apart, is named as such),
/// and its per-queue counters in the OS's own print form — SONiC `show queue counters
/// --json` and `show queue wredcounters --json`, EOS `show interfaces counters queue
/// detail | json` and `show qos interfaces ecn counters queue | json`, NVUE `nv show
/// interface PORT counters qos -o json`, Onyx `show interfaces ethernet S/P
/// congestion-control | json-print` and `show interfaces ethernet counters tc N`. A
/// counter the OS does not expose is named, never taken as zero.
///
/// Each host's launched transport (`mltctl launch`; its socket in --remote-dir) is asked
/// what it runs: each class's DSCP, the control DSCP, the MTU, its path addresses; and
/// each host's network is checked against the plan as `bootstrap --check` does (MTU,
/// addresses, the MAC map, routes: what its leaf's static routes and MTU are compared
/// with the same plan for). Then, class by class, every transport sends --probe probes
/// with the class's DSCP to every peer over every path (half ECN-capable, MTU-sized);
/// after --window the switches' counters are read again, and each switch must have
/// counted the burst in the class's planned queue. With --congest the bursts fill the
/// queues: each class's burst is an incast to one host, whose leaf must mark or
/// WRED-drop in the class's queue, and no planned queue of another class may. The hosts
/// count what arrived per DSCP and with CE. Hosts are asked only when --limit selects
/// all of them (probes go to every peer). Nothing is changed on any switch or host.
/// --json events: device, host, summary.
///
/// Verdicts: ok (runs the plan; its queues' counters are all exposed; every class landed
/// in its queue), mismatch (lines say what runs and what the plan wants), unverifiable
/// (a counter the plan's queues need is not exposed by this OS; which, and why), failed,
/// unreachable.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Seconds between counter readings (after each class's burst): at least one counter
    /// poll interval (SONiC polls queue counters every 10 s by default; NVIDIA switches
    /// every 2 s).
    #[arg(long, value_name = "SECS", default_value_t = 11, env = "MLTCTL_VERIFY_WINDOW", value_parser = mlt_common::units::seconds)]
    pub window: u64,
    /// Probes per class to each peer on each path (0: probe nothing, read the counters
    /// once more after --window).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub probe: u32,
    /// Bursts that fill the queues: class i's is an incast from every other host to
    /// host i (mod the hosts), at least 5000 probes per path; that host's leaf must mark
    /// or WRED-drop in the class's queue, and no switch in another planned queue. Senders
    /// whose links together do not outrun the target's (two hosts) cannot fill it: that
    /// leaf is unverifiable for the class.
    #[arg(long)]
    pub congest: bool,
    /// Directory on every host with the launched transport's files (`mltctl launch`).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/lib/mltctl",
        env = "MLTCTL_REMOTE_DIR"
    )]
    pub remote_dir: String,
    /// Also write what was found to FILE in the Prometheus text format, replaced whole
    /// (for node-exporter's textfile collector: a `.prom` file in its directory):
    /// verdicts, each planned queue's packets, marks and drops during the window, the
    /// probes each host received per class. Unexposed counters are left out.
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub run: super::SwitchRun,
    #[command(flatten)]
    pub ssh: SshArgs,
}

/// Probes per peer and path in a burst that fills a queue.
const CONGESTING_BURST: u32 = 5000;

pub fn run(args: Args) -> Result<(), Failure> {
    let plan = planned(&load(&args.inventory.inventory)?)?;
    run_planned(args, &plan).result
}

/// `verify` with the plan of its inventory already built (a playbook's step); each
/// switch and host with its verdict as a status (ok, or failed and unreachable as they
/// are; a mismatch or an unverifiable counter is failed).
pub fn run_planned(args: Args, plan: &Plan) -> Ran {
    let mut devices = Vec::new();
    let result = verify_planned(args, plan, &mut devices);
    Ran { devices, result }
}

fn verify_planned(
    args: Args,
    plan: &Plan,
    devices: &mut Vec<(String, Status)>,
) -> Result<(), Failure> {
    let targets = super::apply::selected(plan, &args.run.limit)?;
    let every_host = Selection::parse(&args.run.limit)
        .and_then(|s| s.select(plan))
        .map_err(|e| Failure::Usage(e.to_string()))?
        .hosts
        .len()
        == plan.hosts.len();
    let remote = Remote::new(&args.remote_dir, plan).map_err(Failure::Usage)?;
    let per_path = if args.congest {
        args.probe.max(CONGESTING_BURST)
    } else {
        args.probe
    };
    let progress = !args.run.json && std::io::stderr().is_terminal();
    let ssh = args.ssh.options();
    let options = verify::Options {
        forks: usize::from(args.run.forks),
        ssh: &ssh,
        window: Duration::from_secs(args.window),
        remote: every_host.then_some(&remote),
        per_path,
        congest: args.congest,
    };
    if progress {
        eprintln!(
            "reading {} switch(es){}",
            targets.len(),
            if every_host {
                format!(" and {} host(s)", plan.hosts.len())
            } else {
                " (--limit leaves hosts out: no host is asked, nothing is probed)".into()
            }
        );
    }
    let verified = verify::verify(plan, &targets, &options, &mut |said| match said {
        Said::Step(step) if progress => eprintln!("{step}"),
        Said::Step(_) => {}
        Said::Switch(check) if args.run.json => {
            println!("{}", super::hosts::event_line("device", check))
        }
        Said::Switch(check) => print!("{}", shown(check)),
        Said::Host(check) if args.run.json => {
            println!("{}", super::hosts::event_line("host", check))
        }
        Said::Host(check) => print!("{}", shown_host(check)),
    });
    super::say_recorded(&ssh);
    let status = |verdict: Verdict| match verdict {
        Verdict::Ok => Status::Ok,
        Verdict::Unreachable => Status::Unreachable,
        Verdict::Mismatch | Verdict::Unverifiable | Verdict::Failed => Status::Failed,
    };
    devices.extend(
        verified
            .switches
            .iter()
            .map(|c| (c.device.clone(), status(c.verdict)))
            .chain(
                verified
                    .hosts
                    .iter()
                    .map(|c| (c.host.clone(), status(c.verdict))),
            ),
    );
    if let Some(file) = &args.prometheus {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let text = verify::export::prometheus(&verified, now);
        mlt_common::files::write(file, text.as_bytes(), mlt_common::files::Access::Readable)
            .map_err(|e| Failure::Error(anyhow::anyhow!("--prometheus: {e}")))?;
    }
    let verdicts: Vec<Verdict> = verified
        .switches
        .iter()
        .map(|c| c.verdict)
        .chain(verified.hosts.iter().map(|c| c.verdict))
        .collect();
    let count = |v: Verdict| verdicts.iter().filter(|&&c| c == v).count();
    if args.run.json {
        println!(
            "{}",
            serde_json::json!({
                "event": "summary",
                "switches": verified.switches.len(),
                "hosts": verified.hosts.len(),
                "ok": count(Verdict::Ok),
                "mismatch": count(Verdict::Mismatch),
                "unverifiable": count(Verdict::Unverifiable),
                "failed": count(Verdict::Failed),
                "unreachable": count(Verdict::Unreachable),
            })
        );
    } else {
        println!(
            "{} switch(es) and {} host(s): {} ok, {} mismatch, {} unverifiable, {} failed, {} unreachable",
            verified.switches.len(),
            verified.hosts.len(),
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

/// A host's lines for people: its verdict, what differs, what each class's probes
/// brought.
fn shown_host(check: &HostCheck) -> String {
    let mut out = format!(
        "{:<12} {} ({})\n",
        check.verdict, check.host, check.endpoint
    );
    if let Some(message) = &check.message {
        out.push_str(&format!("    {message}\n"));
    }
    for line in &check.mismatches {
        out.push_str(&format!("    differs: {line}\n"));
    }
    for a in &check.arrivals {
        out.push_str(&format!(
            "    class {} (DSCP {}): {} of {} probes arrived, {} CE\n",
            a.class, a.dscp, a.probes, a.expected, a.probes_ce
        ));
    }
    out
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
