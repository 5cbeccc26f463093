//! A switch's verdict from what it runs and what its planned queues counted: a pure
//! function, so every rule is tested without a switch.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use mlt_common::outcome::Status;
use serde::Serialize;
use switch_config::counters::{Count, Reading};
use switch_config::{ChangeLine, SwitchIntent};

use super::SwitchCheck;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Everything planned is run and counted.
    Ok,
    /// A counter the plan's queues need is not exposed (and nothing differs).
    Unverifiable,
    /// The switch runs something the plan does not say.
    Mismatch,
    /// The switch could not be read (SSH, a command, its output).
    Failed,
    Unreachable,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Ok => "ok",
            Verdict::Unverifiable => "unverifiable",
            Verdict::Mismatch => "mismatch",
            Verdict::Failed => "failed",
            Verdict::Unreachable => "unreachable",
        })
    }
}

/// The ports and the queues a missing counter was missing on.
type Places<'a> = (BTreeSet<&'a str>, BTreeSet<u8>);

/// Judges a switch from its configuration's differences with the plan and what its
/// counters grew by (`grown`).
pub fn judge(intent: &SwitchIntent, changes: &[ChangeLine], grown: &Reading) -> SwitchCheck {
    let mismatches: Vec<String> = switch_config::fold::fold(changes)
        .iter()
        .map(|line| {
            if line.dscp_map {
                format!("DSCP map (must be alike on every switch): {line}")
            } else {
                line.to_string()
            }
        })
        .collect();
    // (counter, why) → the ports and queues it holds for: one line each.
    let mut missing: BTreeMap<(&str, String), Places> = BTreeMap::new();
    let mut queues = Vec::new();
    for port in &intent.qos.ports {
        for planned in &intent.qos.queues {
            let mut miss = |what, why: &str| {
                let places = missing.entry((what, why.to_string())).or_default();
                places.0.insert(port.as_str());
                places.1.insert(planned.queue);
            };
            let Some(counted) = grown.queue(port, planned.queue) else {
                miss("counters", "the switch printed none");
                continue;
            };
            if let Count::Unexposed { unexposed } = &counted.packets {
                miss("packets", unexposed);
            }
            let port_marks = grown.port_marks.get(port).and_then(Count::known);
            if let (Some(_), Count::Unexposed { unexposed }, None) =
                (planned.ecn, &counted.marked, port_marks)
            {
                miss("ECN marks", unexposed);
            }
            queues.push(counted.clone());
        }
    }
    let unverifiable: Vec<String> = missing
        .into_iter()
        .map(|((what, why), (ports, numbers))| {
            let ports: Vec<&str> = ports.into_iter().collect();
            let numbers: Vec<String> = numbers.iter().map(u8::to_string).collect();
            format!(
                "{what} of queue(s) {} on {}: {why}",
                numbers.join(","),
                ports.join(", ")
            )
        })
        .collect();
    let verdict = if !mismatches.is_empty() {
        Verdict::Mismatch
    } else if !unverifiable.is_empty() {
        Verdict::Unverifiable
    } else {
        Verdict::Ok
    };
    SwitchCheck {
        device: intent.name.clone(),
        vendor: intent.vendor,
        endpoint: String::new(),
        verdict,
        mismatches,
        unverifiable,
        queues,
        probes: Vec::new(),
        message: None,
        seconds: 0.0,
    }
}

/// A switch that could not be read.
pub fn unread(intent: &SwitchIntent, status: Status, message: String) -> SwitchCheck {
    SwitchCheck {
        device: intent.name.clone(),
        vendor: intent.vendor,
        endpoint: String::new(),
        verdict: if status == Status::Unreachable {
            Verdict::Unreachable
        } else {
            Verdict::Failed
        },
        mismatches: Vec::new(),
        unverifiable: Vec::new(),
        queues: Vec::new(),
        probes: Vec::new(),
        message: Some(message),
        seconds: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switch_config::counters::QueueCount;
    use switch_config::{EcnThresholds, QosIntent, QueueIntent, Scheduler, Vendor};

    fn intent() -> SwitchIntent {
        SwitchIntent {
            name: "spine1".into(),
            vendor: Vendor::Onyx,
            qos: QosIntent {
                dscp_to_tc: vec![0; 64],
                tc_to_queue: (0..8).collect(),
                ports: vec!["Eth1/1".into(), "Eth1/2".into()],
                queues: [5, 6]
                    .map(|queue| QueueIntent {
                        queue,
                        scheduler: Scheduler::Strict,
                        ecn: Some(EcnThresholds {
                            mark_bytes: 12288,
                            limit_bytes: None,
                        }),
                    })
                    .to_vec(),
            },
            routes: Vec::new(),
            route_scope: Vec::new(),
        }
    }

    fn counted(port: &str, queue: u8, packets: Count, marked: Count) -> QueueCount {
        QueueCount {
            port: port.into(),
            queue,
            packets,
            dropped: Count::Known(0),
            wred_dropped: Count::Known(0),
            marked,
        }
    }

    fn reading(packets: impl Fn() -> Count, marked: impl Fn() -> Count) -> Reading {
        let queues = ["Eth1/1", "Eth1/2"]
            .iter()
            .flat_map(|p| [5, 6].map(|q| counted(p, q, packets(), marked())))
            .collect();
        Reading {
            queues,
            port_marks: Default::default(),
        }
    }

    #[test]
    fn a_switch_running_the_plan_with_every_counter_exposed_is_ok() {
        let check = judge(
            &intent(),
            &[],
            &reading(|| Count::Known(10), || Count::Known(1)),
        );
        assert_eq!(check.verdict, Verdict::Ok);
        assert_eq!(check.queues.len(), 4);
    }

    #[test]
    fn a_missing_counter_is_one_line_naming_where_and_why() {
        let check = judge(
            &intent(),
            &[],
            &reading(|| Count::unexposed("no print form"), || Count::Known(0)),
        );
        assert_eq!(check.verdict, Verdict::Unverifiable);
        assert_eq!(
            check.unverifiable,
            ["packets of queue(s) 5,6 on Eth1/1, Eth1/2: no print form"]
        );
        let mut per_port = reading(|| Count::Known(3), || Count::unexposed("per port only"));
        per_port.port_marks.insert("Eth1/1".into(), Count::Known(9));
        let check = judge(&intent(), &[], &per_port);
        assert_eq!(
            check.unverifiable,
            ["ECN marks of queue(s) 5,6 on Eth1/2: per port only"],
            "a port's own mark count stands in for its queues'"
        );
    }

    #[test]
    fn a_difference_is_a_mismatch_and_the_dscp_map_is_named() {
        let changes = [
            ChangeLine {
                item: "Eth1/1 DSCP 26 switch-priority".into(),
                from: Some("2".into()),
                to: Some("0".into()),
                dscp_map: true,
            },
            ChangeLine {
                item: "Eth1/1 traffic-class 6 congestion-control".into(),
                from: None,
                to: Some("ecn 12 KB".into()),
                dscp_map: false,
            },
        ];
        let check = judge(
            &intent(),
            &changes,
            &reading(|| Count::unexposed("x"), || Count::Known(0)),
        );
        assert_eq!(check.verdict, Verdict::Mismatch);
        assert_eq!(
            check.mismatches,
            [
                "DSCP map (must be alike on every switch): ~ Eth1/1 DSCP 26 switch-priority: 2 -> 0",
                "+ Eth1/1 traffic-class 6 congestion-control: ecn 12 KB",
            ]
        );
        assert!(
            !check.unverifiable.is_empty(),
            "still said, beside the mismatch"
        );
    }
}
