//! A host's verdict: what its launched transport runs (each class's DSCP, the control
//! DSCP, the MTU, its path addresses) and what its network runs (MTU, addresses, MAC
//! map, routes) against the plan, and what its class probes' peers sent it — by the DSCP they arrived with, and with how many CE marks. A pure
//! function of the transport's replies, tested without a host.

use endhost_core::daemon::{ProbeReply, TransportStatus};
use endhost_core::host::Report;
use endhost_core::proto::counters::DscpArrivals;
use mlt_common::outcome::Status;
use mlt_common::redact::clean;
use serde::Serialize;

use super::{Asked, Verdict};
use crate::hosts::probe::Unasked;
use crate::plan::Plan;

/// One host, judged.
#[derive(Debug, Clone, Serialize)]
pub struct HostCheck {
    pub host: String,
    pub endpoint: String,
    pub verdict: Verdict,
    /// What the transport runs that the plan does not say, one line each.
    pub mismatches: Vec<String>,
    /// Per class of the plan: the probes that arrived with its DSCP, and their CE marks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arrivals: Vec<ClassArrivals>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassArrivals {
    pub class: u8,
    pub dscp: u8,
    /// Probes the peers sent this host with the class's DSCP, if every peer runs it.
    pub expected: u64,
    pub probes: u64,
    pub probes_ce: u64,
}

/// Judges host `rank` from its status and its probe replies, in order: one before the
/// first burst, one per class burst, one after the last (none when nothing was
/// probed); class i's burst should bring it `expected[i]` probes.
pub fn judge(
    plan: &Plan,
    rank: usize,
    asked: &Result<Asked, Unasked>,
    replies: &[&Result<ProbeReply, Unasked>],
    expected: &[u64],
) -> HostCheck {
    let host = &plan.hosts[rank];
    let mut check = HostCheck {
        host: host.name.clone(),
        endpoint: format!("{}:{}", host.mgmt.address, host.mgmt.port),
        verdict: Verdict::Ok,
        mismatches: Vec::new(),
        arrivals: Vec::new(),
        message: None,
        seconds: 0.0,
    };
    let unasked = |check: &mut HostCheck, (status, message): &Unasked| {
        check.verdict = if *status == Status::Unreachable {
            Verdict::Unreachable
        } else {
            Verdict::Failed
        };
        check.message = Some(message.clone());
    };
    let asked = match asked {
        Ok(asked) => asked,
        Err(e) => {
            unasked(&mut check, e);
            return check;
        }
    };
    check.mismatches = running_differences(plan, rank, &asked.transport);
    check.mismatches.extend(network_differences(&asked.network));
    // A burst the host could not be asked for is as much a failure as the reads.
    if let Some(Err(e)) = replies.iter().find(|r| r.is_err()) {
        unasked(&mut check, e);
    } else if let (Some(Ok(first)), Some(Ok(last))) = (replies.first(), replies.last()) {
        arrivals(plan, expected, first, last, &mut check);
    }
    if check.verdict == Verdict::Ok && !check.mismatches.is_empty() {
        check.verdict = Verdict::Mismatch;
    }
    check
}

/// What the host's network lacks of the plan — its MTU, addresses, the MAC map of its
/// rack and the routes to its leaf (what its leaf's running configuration is checked
/// against too) — and what contradicts it.
fn network_differences(report: &Report) -> Vec<String> {
    let mut lines: Vec<String> = report
        .changes
        .iter()
        .map(|c| format!("network: `{c}` is needed to match the plan (mltctl bootstrap)"))
        .collect();
    lines.extend(report.conflicts.iter().map(|c| format!("network: {c}")));
    if let Some(error) = &report.error {
        lines.push(format!("network: the check failed: {}", clean(error)));
    }
    lines
}

/// What the running transport marks with and sends, against the plan.
fn running_differences(plan: &Plan, rank: usize, status: &TransportStatus) -> Vec<String> {
    let mut lines = Vec::new();
    let tagging = &plan.job.tagging;
    for class in &tagging.classes {
        match status.classes.iter().find(|c| c.class == class.class) {
            None => lines.push(format!(
                "class {}: the transport runs no such class, the plan marks it DSCP {}",
                class.class, class.dscp
            )),
            Some(running) if running.dscp != class.dscp => lines.push(format!(
                "class {}: the transport marks DSCP {}, the plan (and the switches' DSCP \
                 map) DSCP {}",
                class.class, running.dscp, class.dscp
            )),
            Some(_) => {}
        }
    }
    if status.control_dscp != tagging.control_dscp {
        lines.push(format!(
            "control traffic: the transport marks DSCP {}, the plan DSCP {}",
            status.control_dscp, tagging.control_dscp
        ));
    }
    if status.mtu != plan.job.mtu {
        lines.push(format!(
            "MTU: the transport sends packets of up to {} bytes, the plan {}",
            status.mtu, plan.job.mtu
        ));
    }
    let planned: Vec<std::net::Ipv4Addr> = plan.hosts[rank]
        .path_addresses
        .iter()
        .map(|p| p.address)
        .collect();
    if status.path_addresses != planned {
        let shown = |a: &[std::net::Ipv4Addr]| {
            a.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!(
            "path addresses: the transport has {}, the plan {}",
            shown(&status.path_addresses),
            shown(&planned)
        ));
    }
    lines
}

/// The probes that arrived between the first reply and the last, per class; a DSCP no
/// class of the plan has, arriving as probes, is a peer marking its class wrongly.
fn arrivals(
    plan: &Plan,
    expected: &[u64],
    first: &ProbeReply,
    last: &ProbeReply,
    check: &mut HostCheck,
) {
    let grown = |dscp: u8| {
        let of = |reply: &ProbeReply| {
            reply
                .arrivals
                .iter()
                .find(|a| a.dscp == dscp)
                .copied()
                .unwrap_or(DscpArrivals {
                    dscp,
                    ..DscpArrivals::default()
                })
        };
        let (then, now) = (of(first), of(last));
        (
            now.probes.saturating_sub(then.probes),
            now.probes_ce.saturating_sub(then.probes_ce),
        )
    };
    let tagging = &plan.job.tagging;
    for (class, &expected) in tagging.classes.iter().zip(expected) {
        let (probes, probes_ce) = grown(class.dscp);
        check.arrivals.push(ClassArrivals {
            class: class.class,
            dscp: class.dscp,
            expected,
            probes,
            probes_ce,
        });
        if expected > 0 && probes == 0 {
            check.mismatches.push(format!(
                "class {} (DSCP {}): none of the {expected} probes the peers sent arrived",
                class.class, class.dscp
            ));
        }
    }
    for arrived in &last.arrivals {
        let planned = tagging.classes.iter().any(|c| c.dscp == arrived.dscp);
        let (probes, _) = grown(arrived.dscp);
        if !planned && probes > 0 {
            check.mismatches.push(format!(
                "{probes} probes arrived with DSCP {}, which no class of the plan has: a \
                 peer marks a class with another DSCP",
                arrived.dscp
            ));
        }
    }
}
