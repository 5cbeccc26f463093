//! `mltctl launch`: the transport started on every host; JSON for the launcher.

use std::time::Duration;

use mltctl::hosts;

use mltctl::plan::Plan;

use super::hosts::{
    HostArgs, event_line, host_line, host_plan, host_summary, host_targets, hosts_outcome,
};
use super::{DatapathArg, Failure, Ran, print_json};

/// Start the transport on every host and print what a training launcher needs.
///
/// Per host: upload its transport configuration, IP=MAC file and environment file
/// to --remote-dir, stop a transport already running there, and start `endhost
/// serve` in the background; then wait until every transport has found its peers.
/// Prints, as JSON: per rank its host, addresses, socket, pid and environment
/// (OptiReduce's GLOO_* variables and ours), and DS-Sync's group schedule. Needs a
/// bootstrapped host (the binary in --remote-dir).
///
/// All or nothing: a job needs every host (a --limit must select them all); if one
/// cannot start or does not become ready, the transports that started are stopped
/// again and nothing is printed on standard output.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub hosts: HostArgs,
    /// [default: the inventory's]
    #[arg(long, value_enum)]
    pub datapath: Option<DatapathArg>,
    /// Seconds a transport may take to find all its peers.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = mlt_common::units::positive_seconds)]
    pub ready_timeout: u64,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let plan = host_plan(&args.hosts)?;
    run_planned(args, &plan).result
}

/// `launch` with the plan of its inventory already built.
pub fn run_planned(args: Args, plan: &Plan) -> Ran {
    launch(args, plan).unwrap_or_else(Ran::from)
}

fn launch(args: Args, plan: &Plan) -> Result<Ran, Failure> {
    let Args {
        hosts: args,
        datapath,
        ready_timeout,
    } = args;
    let args = &args;
    use mltctl::hosts::launch;
    let targets = host_targets(args, plan)?;
    if targets.len() < plan.hosts.len() {
        let left_out: Vec<&str> = (0..plan.hosts.len())
            .filter(|rank| !targets.contains(rank))
            .map(|rank| plan.hosts[rank].name.as_str())
            .collect();
        return Err(Failure::Usage(format!(
            "launch starts the whole job: --limit leaves out {} of its {} hosts ({})",
            left_out.len(),
            plan.hosts.len(),
            left_out.join(", ")
        )));
    }
    let options = launch::Options {
        forks: usize::from(args.forks),
        ssh: args.ssh.options(),
        remote: hosts::Remote::new(&args.remote_dir, plan).map_err(Failure::Usage)?,
        datapath: datapath.map_or(plan.job.datapath.kind, Into::into),
        ready_timeout: Duration::from_secs(ready_timeout),
    };
    let started = std::time::Instant::now();
    let (results, launched) = launch::launch(plan, &targets, &options, &mut |p| {
        // Hosts that did not start are said once, at the end, with why.
        if let (false, mltctl::parallel::Progress::Finished(_, r)) = (args.json, p)
            && r.status == mlt_common::outcome::Status::Changed
        {
            eprint!(
                "{}",
                hosts::status_line(&r.host, &r.endpoint, r.status, "started")
            );
        }
    });
    super::say_recorded(&options.ssh);
    let summary = mlt_common::outcome::Summary::of(results.iter().map(|r| &r.status));
    let seconds = started.elapsed().as_secs_f64();
    let result = if args.json {
        // Once every host is settled: a started host can still be stopped again.
        for r in &results {
            host_line(true, String::new(), r);
        }
        let result = host_summary(true, "launch", &summary, seconds);
        if let Some(launched) = &launched {
            println!("{}", event_line("launched", launched));
        }
        result
    } else {
        for r in results
            .iter()
            .filter(|r| r.status != mlt_common::outcome::Status::Changed)
        {
            let message = r.message.as_deref().unwrap_or("");
            eprint!(
                "{}",
                hosts::status_line(&r.host, &r.endpoint, r.status, message)
            );
        }
        eprint!("{}", hosts::summary_line("launch", &summary, seconds));
        match &launched {
            Some(launched) => print_json(launched)
                .map_err(Failure::from)
                .and_then(|()| hosts_outcome(&summary)),
            None => hosts_outcome(&summary),
        }
    };
    Ok(Ran {
        devices: results.iter().map(|r| (r.host.clone(), r.status)).collect(),
        result,
    })
}
