//! Where a class's probes landed on a switch: what its planned queue counted (summed
//! over the switch's planned ports) during the window of its burst, and the rules that
//! judge it. A pure function of the counts, tested without a switch.

use endhost_core::config::ClassTag;
use serde::Serialize;
use switch_config::SwitchIntent;
use switch_config::counters::{Count, QueueCount, Reading};

use super::{Options, SwitchCheck, Verdict};

/// One class's burst, as one switch counted it in the class's planned queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassLanding {
    pub class: u8,
    pub dscp: u8,
    pub queue: u8,
    pub packets: Count,
    pub marked: Count,
    pub wred_dropped: Count,
    /// Every planned queue's packets in the window, for saying where a class went.
    #[serde(skip)]
    others: Vec<(u8, Count, Count)>,
}

/// The sum of one counter over every port of `queue`; unexposed if any port's is.
fn total(reading: &Reading, queue: u8, pick: fn(&QueueCount) -> &Count) -> Count {
    let mut sum = 0;
    for counted in reading.queues.iter().filter(|q| q.queue == queue) {
        match pick(counted) {
            Count::Known(n) => sum += n,
            unexposed => return unexposed.clone(),
        }
    }
    Count::Known(sum)
}

impl ClassLanding {
    /// What `grown` (the counters' growth during the class's window) says of `class`.
    pub fn of(class: &ClassTag, grown: &Reading) -> ClassLanding {
        let mut queues: Vec<u8> = grown.queues.iter().map(|q| q.queue).collect();
        queues.sort_unstable();
        queues.dedup();
        let others = queues
            .into_iter()
            .filter(|&q| q != class.queue)
            .map(|q| {
                (
                    q,
                    total(grown, q, |c| &c.packets),
                    sum(
                        total(grown, q, |c| &c.marked),
                        total(grown, q, |c| &c.wred_dropped),
                    ),
                )
            })
            .collect();
        ClassLanding {
            class: class.class,
            dscp: class.dscp,
            queue: class.queue,
            packets: total(grown, class.queue, |c| &c.packets),
            marked: total(grown, class.queue, |c| &c.marked),
            wred_dropped: total(grown, class.queue, |c| &c.wred_dropped),
            others,
        }
    }
}

fn sum(a: Count, b: Count) -> Count {
    match (a, b) {
        (Count::Known(a), Count::Known(b)) => Count::Known(a + b),
        (Count::Known(_), unexposed) | (unexposed, _) => unexposed,
    }
}

/// Adds the landings to `check` and a mismatch line for each class that did not land
/// in its planned queue (fewer packets there than one burst to one peer on one path,
/// which every switch on the class's paths forwards at least), and, with
/// `options.congest`, for a class whose queue neither marked nor WRED-dropped, or a
/// queue of another class that did. Counters the OS does not expose judge nothing
/// here: [`super::judge`] names them.
pub fn judge(
    check: &mut SwitchCheck,
    intent: &SwitchIntent,
    landings: &[ClassLanding],
    options: &Options<'_>,
) {
    let ports = intent.qos.ports.join(", ");
    for landing in landings {
        let name = format!("class {} (DSCP {}) on {ports}", landing.class, landing.dscp);
        if let Count::Known(n) = landing.packets
            && n < u64::from(options.per_path)
        {
            let elsewhere: Vec<String> = landing
                .others
                .iter()
                .filter_map(|(q, packets, _)| match packets {
                    Count::Known(k) if *k >= u64::from(options.per_path) => {
                        Some(format!("queue {q} counted {k}"))
                    }
                    _ => None,
                })
                .collect();
            let elsewhere = if elsewhere.is_empty() {
                String::new()
            } else {
                format!("; {}", elsewhere.join(", "))
            };
            check.mismatches.push(format!(
                "{name}: planned queue {} counted {n} packets while every host probed the \
                 class ({} per peer and path){elsewhere}",
                landing.queue, options.per_path
            ));
        }
        if options.congest {
            if let Count::Known(0) = sum(landing.marked.clone(), landing.wred_dropped.clone()) {
                check.mismatches.push(format!(
                    "{name}: planned queue {} neither marked nor WRED-dropped under a burst \
                     that fills it (is its RED/ECN profile bound?)",
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
