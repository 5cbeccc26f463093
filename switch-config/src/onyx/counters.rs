//! Onyx's queue counters: `show interfaces ethernet <s/p> congestion-control |
//! json-print` per port, a list whose first element is the port's (`ECN marked
//! packets`, per port only) and whose others are `TC-<n>` (`RED dropped packets` where
//! the class has a RED or ECN curve). Onyx documents no print form of its per-class
//! transmit counters, so what a class transmitted is unexposed. Form: the Ansible Onyx
//! module's fixture `onyx_show_interface_congestion_control.cfg`.

use serde_json::Value;

use crate::SwitchIntent;
use crate::counters::{
    Count, CountersError, QueueCount, Reading, count, output_error, per_port, queue_of_class,
};
use crate::push::{Session, run_cli};

pub const COMMAND: &str = "show interfaces ethernet S/P congestion-control | json-print";

const NO_TX: &str = "Onyx documents no print form of its per-class transmit counters";
const PORT_MARKS: &str = "Onyx counts ECN marks per port only";

fn script(intent: &SwitchIntent) -> String {
    let mut script = String::from("enable\n");
    for port in &intent.qos.ports {
        let number = port.strip_prefix("Eth").unwrap_or(port);
        script.push_str(&format!(
            "show interfaces ethernet {number} congestion-control | json-print\n"
        ));
    }
    script
}

pub fn read(intent: &SwitchIntent, t: &mut dyn Session) -> Result<Reading, CountersError> {
    if intent.qos.ports.is_empty() {
        return Ok(Reading::default());
    }
    let printed = run_cli(t, &script(intent))?;
    parse(intent, &printed)
}

/// The reading from what the command printed for each of the intent's ports, in order.
pub fn parse(intent: &SwitchIntent, printed: &str) -> Result<Reading, CountersError> {
    let docs = per_port(intent, COMMAND, printed)?;
    let mut reading = Reading::default();
    for (port, doc) in docs {
        let Some([head, classes @ ..]) = doc.as_array().map(Vec::as_slice) else {
            return Err(output_error(
                intent,
                COMMAND,
                format!("{port}: not the list the command prints"),
            ));
        };
        reading.port_marks.insert(
            port.clone(),
            count(head.get("ECN marked packets"), "ECN marked packets"),
        );
        for class in classes {
            let Some(tc) = class["header"]
                .as_str()
                .and_then(|h| h.strip_prefix("TC-"))
                .and_then(|n| n.parse::<u8>().ok())
            else {
                continue;
            };
            reading.queues.push(QueueCount {
                port: port.clone(),
                queue: queue_of_class(intent, tc),
                packets: Count::unexposed(NO_TX),
                dropped: Count::unexposed(NO_TX),
                wred_dropped: red_drops(class),
                marked: Count::unexposed(PORT_MARKS),
            });
        }
    }
    Ok(reading)
}

/// A class in `Mode: none` has no RED counter at all.
fn red_drops(class: &Value) -> Count {
    match class["Mode"].as_str() {
        Some("none") => Count::unexposed("RED dropped packets: the class has no RED or ECN curve"),
        _ => count(class.get("RED dropped packets"), "RED dropped packets"),
    }
}
