//! `mltctl stop`: the transport stopped on every host.

use mltctl::hosts;

use mltctl::plan::Plan;

use super::hosts::{HostArgs, host_line, host_plan, host_summary, host_targets};
use super::{Failure, Ran};

/// Stop the transport on every host. A host where none runs is `ok`.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub hosts: HostArgs,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let plan = host_plan(&args.hosts)?;
    run_planned(args, &plan).result
}

/// `stop` with the plan of its inventory already built.
pub fn run_planned(args: Args, plan: &Plan) -> Ran {
    stop(&args.hosts, plan).unwrap_or_else(Ran::from)
}

fn stop(args: &HostArgs, plan: &Plan) -> Result<Ran, Failure> {
    use mltctl::hosts::launch;
    let targets = host_targets(args, plan)?;
    let ssh = args.ssh.options();
    let remote = hosts::Remote::new(&args.remote_dir, plan).map_err(Failure::Usage)?;
    let started = std::time::Instant::now();
    let results = mltctl::parallel::run(
        &targets,
        usize::from(args.forks),
        |&rank| launch::stop_host(plan, rank, &ssh, &remote),
        &mut |p: mltctl::parallel::Progress<'_, launch::HostResult>| {
            if let mltctl::parallel::Progress::Finished(_, r) = p {
                let detail = match (&r.message, r.pid) {
                    (Some(m), _) => m.clone(),
                    (None, Some(pid)) => format!("stopped {pid}"),
                    (None, None) => "not running".into(),
                };
                host_line(
                    args.json,
                    hosts::status_line(&r.host, &r.endpoint, r.status, &detail),
                    r,
                );
            }
        },
    );
    super::say_recorded(&ssh);
    let summary = mlt_common::outcome::Summary::of(results.iter().map(|r| &r.status));
    Ok(Ran {
        devices: results.iter().map(|r| (r.host.clone(), r.status)).collect(),
        result: host_summary(args.json, "stop", &summary, started.elapsed().as_secs_f64()),
    })
}
