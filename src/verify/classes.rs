//! Where a class's probes landed on a switch: what its planned queue counted (summed
//! over the switch's planned ports) during the window of its burst, and the rules that
//! judge it. A pure function of the counts, tested without a switch.

use endhost_core::config::ClassTag;
use serde::Serialize;
use switch_config::SwitchIntent;
use switch_config::counters::{Count, QueueCount, Reading};

use super::{SwitchCheck, Verdict};

/// One class's burst, as one switch counted it in the class's planned queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassLanding {
    pub class: u8,
    pub dscp: u8,
    pub queue: u8,
    /// Sent by the queue.
    pub packets: Count,
    /// Sent or dropped by the queue: at least what reached it.
    pub reached: Count,
    pub marked: Count,
    /// Where the OS counts ECN marks per port only (Onyx): what the queue's ports
    /// marked during the window, which only this class's burst was crossing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_marked: Option<Count>,
    pub wred_dropped: Count,
    /// The class's burst was an incast to a host on this leaf: its queue must fill.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fills: bool,
    /// Every other planned queue: what reached it and what it marked or WRED-dropped
    /// in the window, for saying where a class went.
    #[serde(skip)]
    others: Vec<(u8, Count, Count)>,
}

/// The sum of one count over every port of `queue`; unexposed if any port's is.
fn total(reading: &Reading, queue: u8, pick: impl Fn(&QueueCount) -> Count) -> Count {
    let mut sum = 0;
    for counted in reading.queues.iter().filter(|q| q.queue == queue) {
        match pick(counted) {
            Count::Known(n) => sum += n,
            unexposed => return unexposed,
        }
    }
    Count::Known(sum)
}

/// At least how many packets reached the queue: those it sent and those it dropped (a
/// queue with a step of a frame or two drops much of a burst's Not-ECT half). Drops
/// the OS does not expose count as none, and the larger of its two drop counters is
/// taken, since some count WRED drops among all drops.
fn reached(q: &QueueCount) -> Count {
    let drops = [&q.dropped, &q.wred_dropped]
        .into_iter()
        .filter_map(Count::known)
        .max()
        .unwrap_or(0);
    match q.packets {
        Count::Known(n) => Count::Known(n + drops),
        ref unexposed => unexposed.clone(),
    }
}

impl ClassLanding {
    /// What `grown` (the counters' growth during the class's window) says of `class`;
    /// `fills`: the burst was an incast to a host of this leaf.
    pub fn of(class: &ClassTag, grown: &Reading, fills: bool) -> ClassLanding {
        let mut queues: Vec<u8> = grown.queues.iter().map(|q| q.queue).collect();
        queues.sort_unstable();
        queues.dedup();
        let others = queues
            .into_iter()
            .filter(|&q| q != class.queue)
            .map(|q| {
                (
                    q,
                    total(grown, q, reached),
                    sum(
                        total(grown, q, |c| c.marked.clone()),
                        total(grown, q, |c| c.wred_dropped.clone()),
                    ),
                )
            })
            .collect();
        let marked = total(grown, class.queue, |c| c.marked.clone());
        let port_marked = matches!(marked, Count::Unexposed { .. }).then(|| {
            let mut ports: Vec<&str> = grown
                .queues
                .iter()
                .filter(|q| q.queue == class.queue)
                .map(|q| q.port.as_str())
                .collect();
            ports.sort_unstable();
            ports.dedup();
            ports.iter().fold(Count::Known(0), |sum_so_far, port| {
                let marks = grown
                    .port_marks
                    .get(*port)
                    .cloned()
                    .unwrap_or_else(|| Count::unexposed("no port ECN marks printed"));
                sum(sum_so_far, marks)
            })
        });
        ClassLanding {
            class: class.class,
            dscp: class.dscp,
            queue: class.queue,
            packets: total(grown, class.queue, |c| c.packets.clone()),
            reached: total(grown, class.queue, reached),
            marked,
            port_marked,
            wred_dropped: total(grown, class.queue, |c| c.wred_dropped.clone()),
            fills,
            others,
        }
    }
}

impl ClassLanding {
    /// What the queue marked or WRED-dropped during the window: its own marks, or its
    /// ports' where the OS counts marks per port only.
    fn hits(&self) -> Count {
        let marks = match (&self.marked, &self.port_marked) {
            (Count::Unexposed { .. }, Some(port)) => port.clone(),
            (queue, _) => queue.clone(),
        };
        sum(marks, self.wred_dropped.clone())
    }
}

fn sum(a: Count, b: Count) -> Count {
    match (a, b) {
        (Count::Known(a), Count::Known(b)) => Count::Known(a + b),
        (Count::Known(_), unexposed) | (unexposed, _) => unexposed,
    }
}

/// Adds the landings to `check` and a mismatch line for each class that did not land
/// in its planned queue (fewer packets sent or dropped there than a quarter of one burst
/// to one peer on one path: every switch on the class's paths forwards at least its
/// ECN-capable half), and, with
/// `congest`, for a class whose queue neither marked nor WRED-dropped on the
/// leaf its incast filled, or a queue of another class that marked or dropped. Counters the OS does not expose judge nothing
/// here: [`super::judge`] names them.
pub fn judge(
    check: &mut SwitchCheck,
    intent: &SwitchIntent,
    landings: &[ClassLanding],
    per_path: u32,
    congest: bool,
) {
    let ports = intent.qos.ports.join(", ");
    // A burst's ECN-capable half (every second probe, the first among them) reaches
    // every switch on its path: a queue upstream marks it and drops only Not-ECT. Half
    // of that again leaves room for losses no queue counts (a host's or an emulated
    // switch's receive buffer); a class in another queue counts none here.
    let least = u64::from(per_path).div_ceil(4);
    for landing in landings {
        let name = format!("class {} (DSCP {}) on {ports}", landing.class, landing.dscp);
        if let Count::Known(n) = landing.reached
            && n < least
        {
            let elsewhere: Vec<String> = landing
                .others
                .iter()
                .filter_map(|(q, packets, _)| match packets {
                    Count::Known(k) if *k >= least => Some(format!("queue {q} counted {k}")),
                    _ => None,
                })
                .collect();
            let elsewhere = if elsewhere.is_empty() {
                String::new()
            } else {
                format!("; {}", elsewhere.join(", "))
            };
            check.mismatches.push(format!(
                "{name}: planned queue {} counted {n} packets (sent or dropped) while every \
                 host probed the class ({} per peer and path, half of them ECN-capable, \
                 which no WRED drops){elsewhere}",
                landing.queue, per_path
            ));
        }
        if congest {
            if landing.fills
                && let Count::Known(0) = landing.hits()
            {
                check.mismatches.push(format!(
                    "{name}: planned queue {} neither marked nor WRED-dropped under an incast \
                     to a host of this leaf that fills it (is its RED/ECN profile bound?)",
                    landing.queue
                ));
            }
            for (q, _, hit) in &landing.others {
                if let Count::Known(k) = hit
                    && *k > 0
                {
                    check.mismatches.push(format!(
                        "{name}: queue {q}, not the class's queue {}, marked or dropped {k} \
                         packets during its burst",
                        landing.queue
                    ));
                }
            }
        }
    }
    check.probes = landings.to_vec();
    if !check.mismatches.is_empty() {
        check.verdict = Verdict::Mismatch;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switch_config::{QosIntent, Vendor};

    fn intent() -> SwitchIntent {
        SwitchIntent {
            name: "leaf1".into(),
            vendor: Vendor::Cumulus,
            qos: QosIntent {
                dscp_to_tc: vec![0; 64],
                tc_to_queue: (0..8).collect(),
                ports: vec!["swp1".into(), "swp2".into()],
                queues: Vec::new(),
            },
            routes: Vec::new(),
            route_scope: Vec::new(),
        }
    }

    fn class() -> ClassTag {
        ClassTag {
            class: 0,
            dscp: 32,
            queue: 6,
            first_layer: 0,
            last_layer: 0,
        }
    }

    /// Per port, queues 0 and 6: (sent, WRED-dropped, marked) each.
    fn grown(queue0: (u64, u64, u64), queue6: (u64, u64, u64)) -> Reading {
        let queue = |port: &str, queue, (sent, wred, marked): (u64, u64, u64)| QueueCount {
            port: port.into(),
            queue,
            packets: Count::Known(sent),
            dropped: Count::Known(wred),
            wred_dropped: Count::Known(wred),
            marked: Count::Known(marked),
        };
        Reading {
            queues: ["swp1", "swp2"]
                .iter()
                .flat_map(|p| [queue(p, 0, queue0), queue(p, 6, queue6)])
                .collect(),
            port_marks: Default::default(),
        }
    }

    fn judged(reading: &Reading, fills: bool, per_path: u32, congest: bool) -> Vec<String> {
        let mut check = crate::verify::judge::judge(&intent(), &[], reading);
        let landing = ClassLanding::of(&class(), reading, fills);
        judge(&mut check, &intent(), &[landing], per_path, congest);
        check.mismatches
    }

    #[test]
    fn a_class_lands_where_its_queue_sent_or_dropped_the_burst() {
        // A queue with a step of a frame drops most of a burst's Not-ECT half.
        assert!(judged(&grown((0, 0, 0), (1, 1, 1)), false, 4, false).is_empty());
        // The queueing is off: every class went to queue 0.
        let lines = judged(&grown((8, 0, 0), (0, 0, 0)), false, 4, false);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("class 0 (DSCP 32) on swp1, swp2: planned queue 6 counted 0")
                && lines[0].ends_with("; queue 0 counted 16"),
            "{lines:?}"
        );
    }

    #[test]
    fn under_congest_the_filled_leaf_must_mark_and_no_other_queue_may() {
        let quiet = grown((0, 0, 0), (5000, 0, 0));
        assert!(
            judged(&quiet, false, 5000, true).is_empty(),
            "not the incast's leaf"
        );
        let lines = judged(&quiet, true, 5000, true);
        assert!(
            lines[0].contains("neither marked nor WRED-dropped"),
            "{lines:?}"
        );
        assert!(judged(&grown((0, 0, 0), (4000, 300, 900)), true, 5000, true).is_empty());
        let leaking = judged(&grown((0, 0, 2), (4000, 300, 900)), true, 5000, true);
        assert_eq!(leaking.len(), 1, "{leaking:?}");
        assert!(
            leaking[0].contains("queue 0, not the class's queue 6, marked or dropped 4"),
            "{leaking:?}"
        );
    }

    #[test]
    fn where_marks_are_counted_per_port_the_ports_marks_judge_a_filled_queue() {
        let per_port = |port_marks: u64| {
            let mut reading = grown((0, 0, 0), (5000, 0, 0));
            for q in &mut reading.queues {
                q.marked = Count::unexposed("Onyx counts ECN marks per port only");
            }
            for port in ["swp1", "swp2"] {
                reading
                    .port_marks
                    .insert(port.into(), Count::Known(port_marks));
            }
            reading
        };
        let lines = judged(&per_port(0), true, 5000, true);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("neither marked nor WRED-dropped"),
            "{lines:?}"
        );
        assert!(judged(&per_port(7), true, 5000, true).is_empty());
        let landing = ClassLanding::of(&class(), &per_port(7), true);
        assert_eq!(landing.port_marked, Some(Count::Known(14)));
    }
}
