//! NVUE's queue counters: `nv show interface <port> counters qos -o json` per port
//! (Cumulus Linux 5.5 and later), whose `egress-queue-stats` is keyed by traffic class:
//! `tx-frames`, `tx-uc-buffer-discards` (frames, whatever the table view's unit says),
//! `wred-discards` and, on recent releases only, `ecn-marked-frames`. Forms: NVIDIA's
//! NVUE reference (Show-Commands/QoS, "counters qos egress-queue-stats") and the
//! telemetry list's `nvswitch_interface_tc_tx_ecn_marked_tc`.

use mlt_common::shell::ShellCommand;

use crate::SwitchIntent;
use crate::counters::{
    CountersError, QueueCount, Reading, count, output_error, per_port, queue_of_class,
};
use crate::push::{Session, run};

pub const COMMAND: &str = "nv show interface PORT counters qos -o json";

/// One shell runs the command for every port in turn.
pub fn command(intent: &SwitchIntent) -> ShellCommand {
    let one = |port: &str| {
        ShellCommand::new("nv show interface")
            .arg(port)
            .code("counters qos -o json")
    };
    let mut ports = intent.qos.ports.iter();
    let first = one(ports.next().map_or("", String::as_str));
    ports.fold(first, |all, port| all.and(one(port)))
}

pub fn read(intent: &SwitchIntent, t: &mut dyn Session) -> Result<Reading, CountersError> {
    if intent.qos.ports.is_empty() {
        return Ok(Reading::default());
    }
    let printed = run(t, &command(intent), "")?;
    parse(intent, &printed)
}

/// The reading from what the command printed for each of the intent's ports, in order.
pub fn parse(intent: &SwitchIntent, printed: &str) -> Result<Reading, CountersError> {
    let docs = per_port(intent, COMMAND, printed)?;
    let mut reading = Reading::default();
    for (port, doc) in docs {
        let Some(classes) = doc["egress-queue-stats"].as_object() else {
            return Err(output_error(
                intent,
                COMMAND,
                format!("no egress-queue-stats for {port}"),
            ));
        };
        for (tc, stats) in classes {
            let Ok(tc) = tc.parse::<u8>() else {
                continue;
            };
            reading.queues.push(QueueCount {
                port: port.clone(),
                queue: queue_of_class(intent, tc),
                packets: count(stats.get("tx-frames"), "tx-frames"),
                dropped: count(stats.get("tx-uc-buffer-discards"), "tx-uc-buffer-discards"),
                wred_dropped: count(stats.get("wred-discards"), "wred-discards"),
                marked: count(stats.get("ecn-marked-frames"), "ecn-marked-frames"),
            });
        }
    }
    Ok(reading)
}
