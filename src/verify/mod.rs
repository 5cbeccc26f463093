//! `mltctl verify`: what each switch runs and counts, and what each host's transport
//! runs and receives, against the plan. Nothing is changed on any switch or host.
//!
//! Every switch is read over SSH — its running configuration and queue counters — and
//! every host's launched transport is asked what it marks with. Then, class by class,
//! every transport sends a probe burst with the class's DSCP to every peer over every
//! path ([`endhost_core::proto::class_probe`]), and after `window` the switches'
//! counters are read again: what each queue counted in that window is the class's
//! ([`classes`]). Without probes, the counters are read once more after `window`.
//! Verdicts per switch ([`judge`]) and host ([`hosts`]): `ok`, `mismatch` (what differs,
//! the DSCP map named apart since spraying needs it alike on every switch),
//! `unverifiable` (a counter the OS does not expose, named), or the read failed.
//! Design: `docs/src/design/verify.md`.

pub mod classes;
pub mod export;
pub mod hosts;
pub mod judge;

use std::time::{Duration, Instant};

use endhost_core::config::ClassTag;
use endhost_core::daemon::{ProbeReply, TransportStatus};
use endhost_core::host::Report;
use mlt_common::outcome::Status;
use mlt_common::redact::clean;
use serde::Serialize;
use switch_config::counters::Reading;
use switch_config::{ChangeLine, Vendor};

use crate::hosts::Remote;
use crate::hosts::probe::{TransportAsker, Unasked};
use crate::parallel;
use crate::plan::{Plan, SwitchPlan};
use crate::ssh::{SshOptions, SshSession};

pub use classes::ClassLanding;
pub use hosts::HostCheck;
pub use judge::Verdict;

/// One switch, judged.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchCheck {
    pub device: String,
    pub vendor: Vendor,
    pub endpoint: String,
    pub verdict: Verdict,
    /// What the switch runs that the plan does not say, and probes that did not land
    /// where the plan says, one line each.
    pub mismatches: Vec<String>,
    /// Counters of the plan's queues the switch does not expose, one line each.
    pub unverifiable: Vec<String>,
    /// What the plan's queues counted from the first reading to the last.
    pub queues: Vec<switch_config::counters::QueueCount>,
    /// Where each class's probes landed: its planned queue's counts during its burst.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ClassLanding>,
    /// Why the switch could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub seconds: f64,
}

/// What verify does besides reading the switches.
pub struct Options<'a> {
    pub forks: usize,
    pub ssh: &'a SshOptions,
    /// Between counter readings: at least the switches' counter poll interval.
    pub window: Duration,
    /// Where the hosts' transports keep their sockets; `None`: hosts are not asked
    /// and nothing is probed.
    pub remote: Option<&'a Remote>,
    /// Probes per peer and path in each class's burst; 0: none.
    pub per_path: u32,
    /// The bursts are large enough to fill the queue: marks and drops are expected.
    pub congest: bool,
}

/// Everything verify found.
pub struct Verified {
    pub switches: Vec<SwitchCheck>,
    pub hosts: Vec<HostCheck>,
}

/// What a host said before any probe: what its transport runs, and what its network
/// lacks of the plan.
pub struct Asked {
    pub transport: TransportStatus,
    pub network: Report,
}

/// Why a switch could not be read: unreachable, or failed with a message.
type Unread = (Status, String);

/// The first reading: what runs, and the counters then.
#[derive(Clone)]
struct First {
    changes: Vec<ChangeLine>,
    counters: Reading,
}

/// What is said while verify works, and each switch and host as it is judged.
pub enum Said<'a> {
    Step(String),
    Switch(&'a SwitchCheck),
    Host(&'a HostCheck),
}

/// Verifies the switches `targets` (indices into `plan.switches`) and, with a remote
/// directory, every host of the job.
pub fn verify(
    plan: &Plan,
    targets: &[usize],
    options: &Options<'_>,
    say: &mut dyn FnMut(Said<'_>),
) -> Verified {
    let started = Instant::now();
    let switches: Vec<&SwitchPlan> = targets.iter().map(|&i| &plan.switches[i]).collect();
    let first: Vec<Result<First, Unread>> = parallel::run(
        &switches,
        options.forks,
        |s| read_first(s, options.ssh),
        &mut |_| {},
    );
    let ranks: Vec<usize> = (0..plan.hosts.len()).collect();
    let statuses: Vec<Result<Asked, Unasked>> = match options.remote {
        Some(remote) => parallel::run(
            &ranks,
            options.forks,
            |&rank| {
                let mut asker = TransportAsker::open(plan, rank, options.ssh, remote)?;
                Ok(Asked {
                    transport: asker.status()?,
                    network: asker.network(plan, rank)?,
                })
            },
            &mut |_| {},
        ),
        None => Vec::new(),
    };
    // Probes need every transport (a burst goes to every peer) and a class to ask
    // the arrivals of.
    let probe_with = options
        .remote
        .filter(|_| options.per_path > 0 && statuses.iter().all(Result::is_ok))
        .zip(plan.job.tagging.classes.first().map(|c| c.class));
    let mut readings: Vec<Result<Reading, Unread>> = first
        .iter()
        .map(|f| f.as_ref().map(|f| f.counters.clone()).map_err(Clone::clone))
        .collect();
    let mut landings: Vec<Vec<ClassLanding>> = vec![Vec::new(); switches.len()];
    let mut replies: Vec<Vec<Result<ProbeReply, Unasked>>> = Vec::new();
    let classes = &plan.job.tagging.classes;
    // With --congest every other host aims class i's burst at host i mod n: an incast
    // that fills the queue of that host's port on its leaf.
    let target = |i: usize| options.congest.then(|| i % plan.hosts.len());
    // Leaves an incast could not fill, with why: their classes are not judged under
    // --congest and say so.
    let mut unfillable: Vec<(&str, String)> = Vec::new();
    let rates: Vec<u64> = plan.hosts.iter().map(|h| h.nic.line_rate_mbps).collect();
    if let Some((remote, first_class)) = probe_with {
        // What arrived before the first burst.
        replies.push(arrived(plan, &ranks, options, remote, first_class));
        for (c, class) in classes.iter().enumerate() {
            let to = target(c);
            say(Said::Step(format!(
                "probing class {} (DSCP {}, queue {}) from {} host(s), {} per {} and path",
                class.class,
                class.dscp,
                class.queue,
                ranks.len(),
                options.per_path,
                to.map_or("peer".to_string(), |t| plan.hosts[t].name.clone()),
            )));
            // An incast's bursts start together, a moment after every host is asked,
            // so that they meet at the target's port.
            let at = to.map(|_| unix_now() + INCAST_LEAD.as_secs_f64());
            replies.push(parallel::run(
                &ranks,
                options.forks,
                |&rank| {
                    // The target's own burst to itself is none: it only reads.
                    TransportAsker::open(plan, rank, options.ssh, remote)?.probe(
                        class.class,
                        options.per_path,
                        to.map(|t| t as u32),
                        at,
                    )
                },
                &mut |_| {},
            ));
            std::thread::sleep(options.window);
            let now = read_all(&switches, &readings, options);
            let target_leaf = to.map(|t| plan.racks[plan.hosts[t].rack].leaf.as_str());
            let filled_leaf = target_leaf.filter(|_| to.is_some_and(|t| incast_fills(&rates, t)));
            if let (Some(t), Some(leaf)) = (to, target_leaf)
                && filled_leaf.is_none()
            {
                unfillable.push((leaf, unfillable_line(plan, class, t)));
            }
            for (i, (then, now)) in readings.iter().zip(&now).enumerate() {
                if let (Ok(then), Ok(now)) = (then, now) {
                    let fills = filled_leaf == Some(switches[i].intent.name.as_str());
                    landings[i].push(ClassLanding::of(class, &now.since(then), fills));
                }
            }
            readings = now;
        }
        // What arrived after the last burst.
        replies.push(arrived(plan, &ranks, options, remote, first_class));
    } else {
        say(Said::Step(format!(
            "reading the counters again after {} s",
            options.window.as_secs_f64()
        )));
        std::thread::sleep(options.window);
        readings = read_all(&switches, &readings, options);
    }
    let mut checks = Vec::new();
    for (i, switch) in switches.iter().enumerate() {
        let mut check = match (&first[i], &readings[i]) {
            (Ok(first), Ok(last)) => {
                judge::judge(&switch.intent, &first.changes, &last.since(&first.counters))
            }
            (Err((status, message)), _) | (_, Err((status, message))) => {
                judge::unread(&switch.intent, *status, message.clone())
            }
        };
        if check.verdict != Verdict::Failed && check.verdict != Verdict::Unreachable {
            classes::judge(
                &mut check,
                &switch.intent,
                &landings[i],
                options.per_path,
                options.congest,
            );
        }
        if check.verdict == Verdict::Ok || check.verdict == Verdict::Unverifiable {
            let lines = unfillable
                .iter()
                .filter(|(leaf, _)| *leaf == switch.intent.name);
            check
                .unverifiable
                .extend(lines.map(|(_, line)| line.clone()));
            if !check.unverifiable.is_empty() {
                check.verdict = Verdict::Unverifiable;
            }
        }
        check.endpoint = format!("{}:{}", switch.mgmt.address, switch.mgmt.port);
        check.seconds = started.elapsed().as_secs_f64();
        say(Said::Switch(&check));
        checks.push(check);
    }
    // Per class, per host: the probes its peers sent it.
    let expected: Vec<Vec<u64>> = (0..classes.len())
        .map(|c| match probe_with {
            Some(_) => expected_probes(plan, options.per_path, target(c)),
            None => vec![0; plan.hosts.len()],
        })
        .collect();
    let mut host_checks = Vec::new();
    for (rank, status) in statuses.iter().enumerate() {
        let replies: Vec<&Result<ProbeReply, Unasked>> =
            replies.iter().map(|step| &step[rank]).collect();
        let expected: Vec<u64> = expected.iter().map(|per_host| per_host[rank]).collect();
        let mut check = hosts::judge(plan, rank, status, &replies, &expected);
        check.seconds = started.elapsed().as_secs_f64();
        say(Said::Host(&check));
        host_checks.push(check);
    }
    Verified {
        switches: checks,
        hosts: host_checks,
    }
}

/// How long after verify asks the hosts an incast's bursts start: every host's SSH
/// session is up by then.
const INCAST_LEAD: Duration = Duration::from_secs(2);

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Whether every other host sending at its line rate (`rates`, Mbit/s by rank) to
/// host `to` outruns `to`'s own port: only then can an incast fill the queue of that
/// port on its leaf.
fn incast_fills(rates: &[u64], to: usize) -> bool {
    let senders: u64 = (rates.iter().enumerate())
        .filter(|(rank, _)| *rank != to)
        .map(|(_, rate)| rate)
        .sum();
    senders > rates[to]
}

/// Why class `class`'s incast to host `to` cannot be judged under --congest.
fn unfillable_line(plan: &Plan, class: &ClassTag, to: usize) -> String {
    let host = &plan.hosts[to];
    let senders = plan.hosts.len() - 1;
    format!(
        "--congest, class {} (DSCP {}, queue {}): an incast from {senders} host(s) cannot \
         fill {}'s {} Mbit/s port (marks and drops need senders whose links together \
         outrun it)",
        class.class, class.dscp, class.queue, host.name, host.nic.line_rate_mbps
    )
}

/// The probes each host should receive from one class's burst: every peer sends
/// `per_path` to each address it reaches the host by (its path addresses, or its NIC's
/// within a rack) — to every host, or to host `to` alone.
fn expected_probes(plan: &Plan, per_path: u32, to: Option<usize>) -> Vec<u64> {
    let mut expected = vec![0; plan.hosts.len()];
    for sender in 0..plan.hosts.len() {
        for peer in plan.transport_config(sender).peers {
            let rank = peer.rank as usize;
            if to.is_some_and(|t| t != rank) {
                continue;
            }
            if let Some(e) = expected.get_mut(rank) {
                *e += peer.paths.len() as u64 * u64::from(per_path);
            }
        }
    }
    expected
}

/// What has arrived at every host's transport so far (a probe request of no probes).
fn arrived(
    plan: &Plan,
    ranks: &[usize],
    options: &Options<'_>,
    remote: &Remote,
    class: u8,
) -> Vec<Result<ProbeReply, Unasked>> {
    parallel::run(
        ranks,
        options.forks,
        |&rank| TransportAsker::open(plan, rank, options.ssh, remote)?.probe(class, 0, None, None),
        &mut |_| {},
    )
}

/// The switches' counters now; a switch whose last reading failed keeps its failure.
fn read_all(
    switches: &[&SwitchPlan],
    last: &[Result<Reading, Unread>],
    options: &Options<'_>,
) -> Vec<Result<Reading, Unread>> {
    let pairs: Vec<(&SwitchPlan, &Result<Reading, Unread>)> =
        switches.iter().copied().zip(last).collect();
    parallel::run(
        &pairs,
        options.forks,
        |(switch, last)| match last {
            Ok(_) => read_counters(switch, options.ssh),
            Err(e) => Err(e.clone()),
        },
        &mut |_| {},
    )
}

fn open(switch: &SwitchPlan, ssh: &SshOptions) -> Result<SshSession, Unread> {
    SshSession::open(&switch.mgmt, ssh).map_err(|e| (Status::Unreachable, clean(&e.to_string())))
}

fn read_first(switch: &SwitchPlan, ssh: &SshOptions) -> Result<First, Unread> {
    let intent = &switch.intent;
    let mut session = open(switch, ssh)?;
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        (Status::Failed, clean(&format!("cannot read {what}: {e}")))
    };
    let running = switch_config::driver(intent, "mltctl-verify")
        .get_running(&mut session)
        .map_err(|e| failed("the running configuration", &e))?;
    let changes = parallel::on_a_cpu(|| switch_config::diff(intent, Some(&running)))
        .map_err(|e| failed("the running configuration", &e))?
        .changes;
    let counters = switch_config::read_counters(intent, &mut session)
        .map_err(|e| failed("queue counters", &e))?;
    Ok(First { changes, counters })
}

fn read_counters(switch: &SwitchPlan, ssh: &SshOptions) -> Result<Reading, Unread> {
    let mut session = open(switch, ssh)?;
    switch_config::read_counters(&switch.intent, &mut session).map_err(|e| {
        (
            Status::Failed,
            clean(&format!("cannot read queue counters: {e}")),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::incast_fills;

    #[test]
    fn an_incast_fills_a_port_only_when_its_senders_outrun_it() {
        assert!(
            !incast_fills(&[1000, 1000], 1),
            "one sender at the port's rate"
        );
        assert!(incast_fills(&[1000, 1000, 1000], 0));
        assert!(!incast_fills(&[400, 400, 1000], 2), "slower senders");
        assert!(incast_fills(&[10_000, 1000], 1), "a faster sender");
    }
}
