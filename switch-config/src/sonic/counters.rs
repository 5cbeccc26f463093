//! SONiC's queue counters: `show queue counters --json` (queuestat: per port, per
//! `UC<n>` queue, `totalpacket` and `droppacket` as strings, `N/A` where the switch
//! polls none) and, from 202505, `show queue wredcounters --json` (wredstat:
//! `wreddroppacket`, `ecnmarkedpacket`). Earlier releases have no per-queue ECN or
//! WRED counter at all; where the command is missing those counters are unexposed.
//! Forms: sonic-utilities' queuestat and wredstat scripts and their tests.

use mlt_common::redact::shown;
use mlt_common::shell::ShellCommand;
use serde_json::Value;

use crate::SwitchIntent;
use crate::counters::{Count, CountersError, QueueCount, Reading, count, output_error};
use crate::push::Session;

pub const QUEUE_COUNTERS: &str = "show queue counters --json";
pub const WRED_COUNTERS: &str = "show queue wredcounters --json";

pub fn read(intent: &SwitchIntent, t: &mut dyn Session) -> Result<Reading, CountersError> {
    let queues = crate::push::run(t, &ShellCommand::new(QUEUE_COUNTERS), "")?;
    let wred = t
        .exec(&ShellCommand::new(WRED_COUNTERS), "")
        .map_err(crate::push::PushError::from)?;
    let wred = if wred.status == 0 {
        Ok(wred.stdout)
    } else {
        let said = [&wred.stderr, &wred.stdout]
            .into_iter()
            .find_map(|t| t.lines().map(str::trim).find(|l| !l.is_empty()))
            .unwrap_or("no message");
        Err(format!(
            "`{WRED_COUNTERS}` failed ({}): SONiC before 202505 has no per-queue ECN or WRED counters",
            shown(said)
        ))
    };
    parse(intent, &queues, wred.as_deref().map_err(String::as_str))
}

/// The reading of the intent's ports from queuestat's JSON and wredstat's (or why
/// there is none).
pub fn parse(
    intent: &SwitchIntent,
    queues: &str,
    wred: Result<&str, &str>,
) -> Result<Reading, CountersError> {
    let queue_json = one_document(intent, QUEUE_COUNTERS, queues)?;
    let wred_json = match wred {
        Ok(text) => Ok(one_document(intent, WRED_COUNTERS, text)?),
        Err(why) => Err(why),
    };
    let mut reading = Reading::default();
    for port in &intent.qos.ports {
        let Some(labels) = queue_json.get(port).and_then(Value::as_object) else {
            return Err(output_error(
                intent,
                QUEUE_COUNTERS,
                format!("no counters for port {port}"),
            ));
        };
        for (label, stats) in labels {
            let Some(queue) = label.strip_prefix("UC").and_then(|n| n.parse::<u8>().ok()) else {
                continue;
            };
            let from_wred = |key: &str, what: &str| match &wred_json {
                Ok(w) => count(w[port.as_str()][label.as_str()].get(key), what),
                Err(why) => Count::unexposed(*why),
            };
            reading.queues.push(QueueCount {
                port: port.clone(),
                queue,
                packets: count(stats.get("totalpacket"), "Counter/pkts"),
                dropped: count(stats.get("droppacket"), "Drop/pkts"),
                wred_dropped: from_wred("wreddroppacket", "WredDrp/pkts"),
                marked: from_wred("ecnmarkedpacket", "EcnMarked/pkts"),
            });
        }
    }
    Ok(reading)
}

fn one_document(intent: &SwitchIntent, command: &str, text: &str) -> Result<Value, CountersError> {
    let mut docs =
        crate::counters::documents(text).map_err(|m| output_error(intent, command, m))?;
    match (docs.pop(), docs.is_empty()) {
        (Some(doc @ Value::Object(_)), true) => Ok(doc),
        _ => Err(output_error(intent, command, "not one JSON object")),
    }
}
