//! What verify found, for node-exporter's textfile collector (`mltctl verify
//! --prometheus FILE`): each switch's and host's verdict, what each planned queue
//! counted during the window, and the probes each host received per class.

use prometheus_client::encoding::EncodeLabelSet;

use super::Verified;
use crate::metrics::{Metrics, QueueSample, Values, VerdictLabel};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeLabel {
    host: String,
    class: u8,
    dscp: u8,
}

/// The Prometheus text of `verified`, a run that ended at `unix_seconds`.
pub fn prometheus(verified: &Verified, unix_seconds: f64) -> String {
    let mut metrics = Metrics::default();
    let verdicts = metrics.family::<VerdictLabel, Values>(
        "verify_verdict",
        "1 for each switch's and host's verdict in the last verify",
    );
    for check in &verified.switches {
        verdicts
            .get_or_create(&VerdictLabel {
                kind: "switch",
                name: check.device.clone(),
                verdict: check.verdict.to_string(),
            })
            .set(1);
    }
    for check in &verified.hosts {
        verdicts
            .get_or_create(&VerdictLabel {
                kind: "host",
                name: check.host.clone(),
                verdict: check.verdict.to_string(),
            })
            .set(1);
    }
    let samples: Vec<QueueSample<'_>> = verified
        .switches
        .iter()
        .flat_map(|check| {
            check.queues.iter().map(|q| QueueSample {
                switch: &check.device,
                port: &q.port,
                queue: q.queue,
                packets: q.packets.known(),
                marked: q.marked.known(),
                dropped: vec![
                    ("wred", q.wred_dropped.known()),
                    ("queue", q.dropped.known()),
                ],
            })
        })
        .collect();
    metrics.queues::<Values>("verify_queue", "during the last verify's window", &samples);
    let probes = metrics.family::<ProbeLabel, Values>(
        "verify_probes_arrived",
        "Class probes the host's transport received in the last verify",
    );
    let marked =
        metrics.family::<ProbeLabel, Values>("verify_probes_ce", "Of those, marked CE by a switch");
    let expected = metrics.family::<ProbeLabel, Values>(
        "verify_probes_expected",
        "Class probes the host's peers sent it in the last verify",
    );
    for check in &verified.hosts {
        for a in &check.arrivals {
            let label = ProbeLabel {
                host: check.host.clone(),
                class: a.class,
                dscp: a.dscp,
            };
            probes.get_or_create(&label).set(a.probes);
            marked.get_or_create(&label).set(a.probes_ce);
            expected.get_or_create(&label).set(a.expected);
        }
    }
    metrics.seconds(
        "verify_timestamp_seconds",
        "When the last verify ended, seconds since the Unix epoch",
        unix_seconds,
    );
    metrics.text()
}
