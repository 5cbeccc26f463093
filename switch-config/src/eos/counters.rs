//! EOS's queue counters, both in `| json` form: `show interfaces counters queue detail`
//! (`egressQueueCounters.interfaces.<port>.ucastQueues.trafficClasses.TC<n>
//! .dropPrecedences.DP<k>`: `enqueuedPackets`, `droppedPackets`, integers; summed over
//! drop precedences) and `show qos interfaces ecn counters queue`
//! (`intfQueueCounters.<port>.queueCounters.<tx-queue>`: marked packets as a string,
//! `-` where ECN counting is not configured). EOS has no WRED drop counter apart from
//! its drops. Forms: ANTA's `VerifyInterfacesEgressQueueDrops` and
//! `VerifyInterfacesECNCounters` and their test fixtures.

use serde_json::Value;

use crate::SwitchIntent;
use crate::counters::{
    Count, CountersError, QueueCount, Reading, count, documents, output_error, queue_of_class,
};
use crate::push::{Session, run_cli};

pub const QUEUE_COUNTERS: &str = "show interfaces counters queue detail | json";
pub const ECN_COUNTERS: &str = "show qos interfaces ecn counters queue | json";

pub fn read(intent: &SwitchIntent, t: &mut dyn Session) -> Result<Reading, CountersError> {
    let printed = run_cli(t, &format!("{QUEUE_COUNTERS}\n{ECN_COUNTERS}\n"))?;
    parse(intent, &printed)
}

/// The reading of the intent's ports from what the two commands printed, in order.
pub fn parse(intent: &SwitchIntent, printed: &str) -> Result<Reading, CountersError> {
    let both = format!("{QUEUE_COUNTERS}, {ECN_COUNTERS}");
    let docs = documents(printed).map_err(|m| output_error(intent, &both, m))?;
    let [queues, ecn] = docs.as_slice() else {
        return Err(output_error(
            intent,
            &both,
            format!("{} JSON documents where two were expected", docs.len()),
        ));
    };
    let mut reading = Reading::default();
    for port in &intent.qos.ports {
        let classes = &queues["egressQueueCounters"]["interfaces"][port.as_str()]["ucastQueues"]["trafficClasses"];
        let Some(classes) = classes.as_object() else {
            return Err(output_error(
                intent,
                QUEUE_COUNTERS,
                format!("no unicast queue counters for {port}"),
            ));
        };
        let marks = &ecn["intfQueueCounters"][port.as_str()]["queueCounters"];
        for (label, class) in classes {
            let Some(tc) = label.strip_prefix("TC").and_then(|n| n.parse::<u8>().ok()) else {
                continue;
            };
            let queue = queue_of_class(intent, tc);
            reading.queues.push(QueueCount {
                port: port.clone(),
                queue,
                packets: over_precedences(class, "enqueuedPackets"),
                dropped: over_precedences(class, "droppedPackets"),
                wred_dropped: Count::unexposed(
                    "EOS counts no WRED drops apart from droppedPackets",
                ),
                marked: match marks.get(queue.to_string()) {
                    Some(Value::String(s)) if s == "-" => Count::unexposed(
                        "ECN counters: `-` (no `random-detect ecn count` on this tx-queue)",
                    ),
                    value => count(value, "ECN counters"),
                },
            });
        }
    }
    Ok(reading)
}

/// `key` summed over the class's drop precedences.
fn over_precedences(class: &Value, key: &str) -> Count {
    let Some(precedences) = class["dropPrecedences"]
        .as_object()
        .filter(|p| !p.is_empty())
    else {
        return Count::unexposed("dropPrecedences: not printed");
    };
    let mut sum = 0u64;
    for precedence in precedences.values() {
        match count(precedence.get(key), key) {
            Count::Known(n) => sum = sum.saturating_add(n),
            missing => return missing,
        }
    }
    Count::Known(sum)
}
