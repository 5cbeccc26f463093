//! The emulated switches' queue counters, printed in each vendor's documented form from
//! the forwarder's per-port, per-queue counts (`<lab>/counters/<switch>.json`): the
//! same forms `mltctl verify` reads on real switches (samples in
//! tests/running/counters, whose SOURCES.md names the public examples). The lab's
//! switches serve traffic class n by queue n.
//!
//! Mapping of the forwarder's counts: transmitted = `packets`; WRED drops =
//! `dropped_not_ect` + `dropped_red` (the curves); tail drops = `dropped_full`; marks =
//! `marked`. SONiC's `droppacket` and EOS's `droppedPackets` count every drop.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::Device;
use crate::qos::SwitchQos;
use crate::queueing::QueueCounters;

/// Per port, its eight queues, as the forwarder last wrote them.
fn ports(device: &Device) -> BTreeMap<String, Vec<QueueCounters>> {
    let name = device
        .dir
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default();
    let file = device
        .dir
        .join("../../counters")
        .join(name)
        .with_extension("json");
    let parsed: Option<Value> = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let Some(Value::Object(ports)) = parsed.map(|mut p| p["ports"].take()) else {
        return BTreeMap::new();
    };
    ports
        .into_iter()
        .filter_map(|(port, queues)| Some((port, serde_json::from_value(queues).ok()?)))
        .collect()
}

fn wred(q: &QueueCounters) -> u64 {
    q.dropped_not_ect + q.dropped_red
}

fn all_drops(q: &QueueCounters) -> u64 {
    wred(q) + q.dropped_full
}

fn marks_on(qos: &SwitchQos, port: &str, queue: usize) -> bool {
    qos.port(port)
        .and_then(|p| p.queues.get(&(queue as u8)))
        .is_some_and(|q| q.mark.is_some())
}

fn now() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}.{:06}", since.as_secs(), since.subsec_micros())
}

/// SONiC `show queue counters --json` (queuestat): string values, keys sorted.
pub fn sonic_queues(device: &Device) -> String {
    sonic(device, |q| {
        json!({
            "dropbytes": "N/A",
            "droppacket": all_drops(q).to_string(),
            "totalbytes": q.bytes.to_string(),
            "totalpacket": q.packets.to_string(),
        })
    })
}

/// SONiC `show queue wredcounters --json` (wredstat, 202505 on).
pub fn sonic_wred(device: &Device) -> String {
    sonic(device, |q| {
        json!({
            "ecnmarkedbytes": "N/A",
            "ecnmarkedpacket": q.marked.to_string(),
            "wreddropbytes": "N/A",
            "wreddroppacket": wred(q).to_string(),
        })
    })
}

fn sonic(device: &Device, stats: impl Fn(&QueueCounters) -> Value) -> String {
    let mut out = serde_json::Map::new();
    for (port, queues) in ports(device) {
        let mut labels: serde_json::Map<String, Value> = queues
            .iter()
            .enumerate()
            .map(|(i, q)| (format!("UC{i}"), stats(q)))
            .collect();
        labels.insert("time".into(), json!(now()));
        out.insert(port, Value::Object(labels));
    }
    format!("{}\n", serde_json::to_string_pretty(&out).expect("JSON"))
}

/// EOS `show interfaces counters queue detail | json`.
pub fn eos_queues(device: &Device) -> String {
    let interfaces: serde_json::Map<String, Value> = ports(device)
        .into_iter()
        .map(|(port, queues)| {
            let classes: serde_json::Map<String, Value> = queues
                .iter()
                .enumerate()
                .map(|(tc, q)| {
                    let dp0 = json!({
                        "enqueuedPackets": q.packets,
                        "enqueuedBytes": q.bytes,
                        "droppedPackets": all_drops(q),
                    });
                    (format!("TC{tc}"), json!({"dropPrecedences": {"DP0": dp0}}))
                })
                .collect();
            (port, json!({"ucastQueues": {"trafficClasses": classes}}))
        })
        .collect();
    format!(
        "{}\n",
        json!({"egressQueueCounters": {"interfaces": interfaces}})
    )
}

/// EOS `show qos interfaces ecn counters queue | json`: `-` where the queue has no ECN.
pub fn eos_ecn(device: &Device) -> String {
    let qos = device.qos();
    let interfaces: serde_json::Map<String, Value> = ports(device)
        .into_iter()
        .map(|(port, queues)| {
            let counts: serde_json::Map<String, Value> = queues
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    let value = if marks_on(&qos, &port, i) {
                        q.marked.to_string()
                    } else {
                        "-".to_string()
                    };
                    (i.to_string(), json!(value))
                })
                .collect();
            (port, json!({"queueCounters": counts}))
        })
        .collect();
    format!("{}\n", json!({"intfQueueCounters": interfaces}))
}

/// NVUE `nv show interface PORT counters qos -o json`; None for a port it lacks.
pub fn nvue(device: &Device, port: &str) -> Option<String> {
    let ports = ports(device);
    let queues = ports.get(port)?;
    let classes: serde_json::Map<String, Value> = queues
        .iter()
        .enumerate()
        .map(|(tc, q)| {
            (
                tc.to_string(),
                json!({
                    "tx-frames": q.packets,
                    "tx-bytes": q.bytes,
                    "tx-uc-buffer-discards": q.dropped_full,
                    "wred-discards": wred(q),
                    "ecn-marked-frames": q.marked,
                }),
            )
        })
        .collect();
    let marked: u64 = queues.iter().map(|q| q.marked).sum();
    let doc = json!({
        "egress-queue-stats": classes,
        "port-stats": {"tx-stats": {"ecn-marked-packets": marked}},
    });
    Some(format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).expect("JSON")
    ))
}

/// Onyx `show interfaces ethernet S/P congestion-control | json-print`; None for a
/// port it lacks.
pub fn onyx(device: &Device, number: &str) -> Option<String> {
    let port = format!("Eth{number}");
    let ports = ports(device);
    let queues = ports.get(&port)?;
    let marked: u64 = queues.iter().map(|q| q.marked).sum();
    let qos = device.qos();
    let mut list = vec![json!({
        "Interface ethernet": number,
        "ECN marked packets": marked.to_string(),
    })];
    for (tc, q) in queues.iter().enumerate() {
        list.push(if marks_on(&qos, &port, tc) {
            json!({
                "header": format!("TC-{tc}"),
                "Mode": "ECN",
                "RED dropped packets": wred(q).to_string(),
            })
        } else {
            json!({"header": format!("TC-{tc}"), "Mode": "none"})
        });
    }
    Some(format!(
        "{}\n",
        serde_json::to_string_pretty(&list).expect("JSON")
    ))
}

/// Onyx `show interfaces ethernet counters tc N`: every port's block for the class, a
/// value then its label (the layout of Onyx's `show interfaces`; the counters of
/// Mellanox's QoS MIB traffic-class table). Tail drops are the unicast no-buffer discards.
pub fn onyx_class(device: &Device, tc: usize) -> String {
    let mut out = String::new();
    for (port, queues) in ports(device) {
        let Some(q) = queues.get(tc) else { continue };
        out.push_str(&format!("{port}:\n  TC {tc}:\n"));
        for (value, label) in [
            (q.packets, "packets"),
            (q.bytes, "bytes"),
            (q.dropped_full, "unicast no buffer discard"),
            (wred(q), "wred discard"),
        ] {
            out.push_str(&format!("    {value:<22}{label}\n"));
        }
        out.push('\n');
    }
    out
}
