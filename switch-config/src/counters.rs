//! Per-queue counters, as each switch OS prints them: the commands that read them
//! (`<vendor>/counters.rs`, through [`crate::read_counters`]) and a vendor-neutral reading of their output. A counter the
//! OS does not expose — a release without it, a cell printed `N/A` or `-`, a print form
//! no public document gives — is [`Count::Unexposed`] with the reason, never zero.
//!
//! Counters are cumulative and polled by the switch; `mltctl verify` takes two readings
//! of its own and compares them ([`Reading::since`]), and never clears a switch's
//! counters (SONiC's clear is a per-user cache, NVUE's is software-only).
//!
//! Vendors that count per traffic class (EOS, NVUE, Onyx) are read through the intent's
//! traffic class → queue map, the one the configuration diff checks the switch runs.
//! Design: `docs/src/design/verify.md`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::push::PushError;
use crate::{SwitchIntent, Vendor};

/// One counter's value, or why the switch does not give it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Count {
    Known(u64),
    Unexposed { unexposed: String },
}

impl Count {
    pub fn unexposed(why: impl Into<String>) -> Count {
        Count::Unexposed {
            unexposed: why.into(),
        }
    }

    pub fn known(&self) -> Option<u64> {
        match self {
            Count::Known(n) => Some(*n),
            Count::Unexposed { .. } => None,
        }
    }

    /// The growth from `before` to `self`; a counter that went backwards was cleared
    /// (or wrapped) between the readings and says so.
    fn since(&self, before: &Count) -> Count {
        match (self, before) {
            (Count::Known(now), Count::Known(then)) if now >= then => Count::Known(now - then),
            (Count::Known(_), Count::Known(_)) => {
                Count::unexposed("the counter went backwards between the readings (cleared?)")
            }
            (Count::Unexposed { .. }, _) => self.clone(),
            (_, Count::Unexposed { .. }) => before.clone(),
        }
    }
}

/// One egress queue of one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueCount {
    pub port: String,
    pub queue: u8,
    /// Packets the queue transmitted.
    pub packets: Count,
    /// Packets dropped at the queue, as the OS counts its drops (buffer or tail drops;
    /// whether WRED drops are among them depends on the platform).
    pub dropped: Count,
    /// Packets WRED dropped (Not-ECT above the step).
    pub wred_dropped: Count,
    /// Packets marked CE (ECT above the step).
    pub marked: Count,
}

/// Everything one reading of a switch gave.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reading {
    /// By port, then queue.
    pub queues: Vec<QueueCount>,
    /// ECN marks per port, where the OS counts them per port only (Onyx).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub port_marks: BTreeMap<String, Count>,
}

impl Reading {
    pub fn queue(&self, port: &str, queue: u8) -> Option<&QueueCount> {
        self.queues
            .iter()
            .find(|q| q.port == port && q.queue == queue)
    }

    /// What grew from `before` to this reading; queues `before` lacks are left out.
    pub fn since(&self, before: &Reading) -> Reading {
        let queues = self
            .queues
            .iter()
            .filter_map(|now| {
                let then = before.queue(&now.port, now.queue)?;
                Some(QueueCount {
                    port: now.port.clone(),
                    queue: now.queue,
                    packets: now.packets.since(&then.packets),
                    dropped: now.dropped.since(&then.dropped),
                    wred_dropped: now.wred_dropped.since(&then.wred_dropped),
                    marked: now.marked.since(&then.marked),
                })
            })
            .collect();
        let port_marks = self
            .port_marks
            .iter()
            .filter_map(|(port, now)| Some((port.clone(), now.since(before.port_marks.get(port)?))))
            .collect();
        Reading { queues, port_marks }
    }

    pub(crate) fn sorted(mut self) -> Reading {
        self.queues
            .sort_by(|a, b| (&a.port, a.queue).cmp(&(&b.port, b.queue)));
        self
    }
}

/// The queue a vendor's traffic class `tc` is served by, as the intent maps it.
pub(crate) fn queue_of_class(intent: &SwitchIntent, tc: u8) -> u8 {
    intent
        .qos
        .tc_to_queue
        .get(usize::from(tc))
        .copied()
        .unwrap_or(tc)
}

/// A vendor's count, written as a decimal number or a string of one; `N/A`, `-` and
/// anything else that is not a number is the counter not exposed, with `what` named.
pub(crate) fn count(value: Option<&Value>, what: &str) -> Count {
    let number = match value {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    match (number, value) {
        (Some(n), _) => Count::Known(n),
        (None, None) => Count::unexposed(format!("{what}: not printed")),
        (None, Some(Value::String(s))) => Count::unexposed(format!(
            "{what}: printed as {}",
            mlt_common::redact::shown(s)
        )),
        (None, Some(v)) => Count::unexposed(format!(
            "{what}: printed as {}",
            mlt_common::redact::shown(&v.to_string())
        )),
    }
}

/// Every JSON document in `text`, in order (a CLI session prints one per command).
pub(crate) fn documents(text: &str) -> Result<Vec<Value>, String> {
    let start = text.find(['{', '[']).unwrap_or(text.len());
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not the JSON the command prints: {e}"))
}

/// The JSON documents a command run once per port of the intent printed, one per port
/// in the intent's order.
pub(crate) fn per_port<'i>(
    intent: &'i SwitchIntent,
    command: &str,
    printed: &str,
) -> Result<impl Iterator<Item = (&'i String, Value)>, CountersError> {
    let docs = documents(printed).map_err(|m| output_error(intent, command, m))?;
    if docs.len() != intent.qos.ports.len() {
        return Err(output_error(
            intent,
            command,
            format!(
                "{} JSON documents for {} ports",
                docs.len(),
                intent.qos.ports.len()
            ),
        ));
    }
    Ok(intent.qos.ports.iter().zip(docs))
}

/// Why a reading failed.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    #[error(transparent)]
    Push(#[from] PushError),
    #[error("switch {switch}: {vendor} `{command}`: {message}")]
    Output {
        switch: String,
        vendor: Vendor,
        command: String,
        message: String,
    },
}

/// A parse failure of `command`'s output on `intent`'s switch.
pub(crate) fn output_error(
    intent: &SwitchIntent,
    command: &str,
    message: impl Into<String>,
) -> CountersError {
    CountersError::Output {
        switch: intent.name.clone(),
        vendor: intent.vendor,
        command: command.to_string(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(packets: Count) -> QueueCount {
        QueueCount {
            port: "Ethernet0".into(),
            queue: 6,
            packets,
            dropped: Count::Known(0),
            wred_dropped: Count::Known(0),
            marked: Count::unexposed("no"),
        }
    }

    #[test]
    fn growth_is_counted_and_a_cleared_counter_says_so() {
        let before = Reading {
            queues: vec![queue(Count::Known(10))],
            ..Reading::default()
        };
        let grown = Reading {
            queues: vec![queue(Count::Known(25))],
            ..Reading::default()
        };
        let delta = grown.since(&before);
        assert_eq!(delta.queues[0].packets, Count::Known(15));
        assert_eq!(delta.queues[0].marked, Count::unexposed("no"));
        let cleared = Reading {
            queues: vec![queue(Count::Known(3))],
            ..Reading::default()
        };
        assert!(matches!(
            cleared.since(&before).queues[0].packets,
            Count::Unexposed { .. }
        ));
    }

    #[test]
    fn counts_are_numbers_or_strings_of_one_and_nothing_else() {
        use serde_json::json;
        assert_eq!(count(Some(&json!(7)), "x"), Count::Known(7));
        assert_eq!(count(Some(&json!("42")), "x"), Count::Known(42));
        assert_eq!(
            count(Some(&json!("N/A")), "Counter/pkts"),
            Count::unexposed("Counter/pkts: printed as `N/A`")
        );
        assert_eq!(
            count(None, "ecn-marked-frames"),
            Count::unexposed("ecn-marked-frames: not printed")
        );
    }

    #[test]
    fn a_cli_session_prints_one_document_per_command() {
        let docs = documents("switch# \n{\"a\": 1}\n{\"b\": [2]}\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert!(documents("{\"a\": ").is_err());
    }
}
