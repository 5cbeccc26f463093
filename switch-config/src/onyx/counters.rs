//! Onyx's queue counters, from two commands:
//!
//! - `show interfaces ethernet <s/p> congestion-control | json-print` per port: a list
//!   whose first element is the port's (`ECN marked packets`, per port only) and whose
//!   others are `TC-<n>` (`RED dropped packets` where the class has a RED or ECN curve).
//!   Form: the Ansible Onyx module's fixture `onyx_show_interface_congestion_control.cfg`.
//! - `show interfaces ethernet counters tc <n>` per traffic class, every port at once:
//!   text, an `Eth<s/p>:` title, a `TC <n>:` header, then one `<value> <label>` line per
//!   counter. The counters are those of Mellanox's QoS MIB traffic-class table
//!   (packets, bytes, unicast no-buffer and WRED discards); the layout is the one Onyx's
//!   `show interfaces` prints. Counters are read by label, so a label this release does
//!   not print is named as unexposed, never taken as zero.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::SwitchIntent;
use crate::counters::{
    Count, CountersError, QueueCount, Reading, count, output_error, per_port, queue_of_class,
};
use crate::push::{PushError, Session, run_cli};

pub const COMMAND: &str = "show interfaces ethernet S/P congestion-control | json-print";
pub const TC_COMMAND: &str = "show interfaces ethernet counters tc N";

/// Onyx's traffic classes (`traffic-class <0-7>`).
const CLASSES: u8 = 8;
const PORT_MARKS: &str = "Onyx counts ECN marks per port only";

fn congestion_script(intent: &SwitchIntent) -> String {
    let mut script = String::from("enable\n");
    for port in &intent.qos.ports {
        let number = port.strip_prefix("Eth").unwrap_or(port);
        script.push_str(&format!(
            "show interfaces ethernet {number} congestion-control | json-print\n"
        ));
    }
    script
}

fn tc_script() -> String {
    let mut script = String::from("enable\n");
    for tc in 0..CLASSES {
        script.push_str(&format!("show interfaces ethernet counters tc {tc}\n"));
    }
    script
}

pub fn read(intent: &SwitchIntent, t: &mut dyn Session) -> Result<Reading, CountersError> {
    if intent.qos.ports.is_empty() {
        return Ok(Reading::default());
    }
    let congestion = run_cli(t, &congestion_script(intent))?;
    // A release that refuses the per-class command still gives its RED drops and marks.
    let classes = match run_cli(t, &tc_script()) {
        Ok(text) => Ok(text),
        Err(PushError::Rejected { command, message }) => Err(format!(
            "`{command}` was refused ({message}): this release prints no per-class counters"
        )),
        Err(e) => return Err(e.into()),
    };
    parse(
        intent,
        &congestion,
        classes.as_deref().map_err(String::as_str),
    )
}

/// The reading from what the congestion-control command printed for each of the
/// intent's ports, in order, and what the per-class command printed (or why nothing).
pub fn parse(
    intent: &SwitchIntent,
    congestion: &str,
    classes: Result<&str, &str>,
) -> Result<Reading, CountersError> {
    let docs = per_port(intent, COMMAND, congestion)?;
    let printed = classes.map(per_class_counters);
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
            let counter = |label: &str| match &printed {
                Ok(counters) => match counters.get(&(port.clone(), tc)) {
                    Some(block) => block.get(label).cloned().unwrap_or_else(|| {
                        Count::unexposed(format!("`{label}`: not printed for {port} TC {tc}"))
                    }),
                    None => Count::unexposed(format!("{port} TC {tc}: not printed")),
                },
                Err(why) => Count::unexposed(*why),
            };
            reading.queues.push(QueueCount {
                port: port.clone(),
                queue: queue_of_class(intent, tc),
                packets: counter("packets"),
                dropped: counter("unicast no buffer discard"),
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

/// Per port and traffic class, each counter by its label. Blank lines are passed over;
/// a line at the margin that is no port's title (a prompt) ends the port.
fn per_class_counters(text: &str) -> BTreeMap<(String, u8), BTreeMap<String, Count>> {
    let mut counters: BTreeMap<(String, u8), BTreeMap<String, Count>> = BTreeMap::new();
    let mut port: Option<String> = None;
    let mut class: Option<u8> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            // A port's title, `Eth1/1:`; anything else at the margin leaves the port.
            port = trimmed
                .strip_suffix(':')
                .filter(|p| p.starts_with("Eth") && !p.contains(' '))
                .map(str::to_string);
            class = None;
        } else if let Some(tc) = trimmed
            .strip_prefix("TC ")
            .and_then(|t| t.strip_suffix(':'))
        {
            class = tc.trim().parse().ok();
        } else if let (Some(port), Some(tc)) = (&port, class)
            && let Some((value, label)) = trimmed.split_once(char::is_whitespace)
        {
            let label = label.trim();
            let value = count(Some(&Value::String(value.into())), label);
            counters
                .entry((port.clone(), tc))
                .or_default()
                .insert(label.to_string(), value);
        }
    }
    counters
}
