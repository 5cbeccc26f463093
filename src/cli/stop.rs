//! `mltctl stop`: the transport stopped on every host.

use mltctl::hosts;

use super::Failure;
use super::hosts::{HostArgs, host_line, host_summary, host_targets};

/// Stop the transport on every host. A host where none runs is `ok`.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub hosts: HostArgs,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let args = &args.hosts;
    use mltctl::hosts::launch;
    let (plan, targets) = host_targets(args)?;
    let ssh = args.ssh.options();
    let remote = hosts::Remote::new(&args.remote_dir, &plan).map_err(Failure::Usage)?;
    let started = std::time::Instant::now();
    let results = mltctl::parallel::run(
        &targets,
        usize::from(args.forks),
        |&rank| launch::stop_host(&plan, rank, &ssh, &remote),
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
    let summary = mltctl::outcome::Summary::of(results.iter().map(|r| &r.status));
    host_summary(args.json, "stop", &summary, started.elapsed().as_secs_f64())
}
