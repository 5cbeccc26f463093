//! config_db tables in the RFC 7951 JSON form the SONiC YANG models describe, and
//! `yanglint` run on them.

use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value, json};

use super::root;

/// Builds the YANG document for config_db `tables`, plus the `PORT` and
/// `DEVICE_METADATA` entries a real switch has (the models check references to ports).
pub fn document(tables: &Value, ports: &[String]) -> Value {
    let mut doc = Map::new();
    doc.insert(
        "sonic-device_metadata:sonic-device_metadata".into(),
        json!({"DEVICE_METADATA": {"localhost": {
            "hostname": "switch", "hwsku": "generic", "platform": "x86_64-generic",
            "mac": "02:00:00:00:00:01", "type": "LeafRouter"}}}),
    );
    let port_list: Vec<Value> = ports
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let lanes: Vec<String> = (0..4).map(|l| (i * 4 + l).to_string()).collect();
            json!({"name": name, "lanes": lanes.join(","), "speed": 100000})
        })
        .collect();
    doc.insert(
        "sonic-port:sonic-port".into(),
        json!({"PORT": {"PORT_LIST": port_list}}),
    );
    let objects = |table: &str| -> Vec<(String, Map<String, Value>)> {
        tables
            .get(table)
            .and_then(Value::as_object)
            .map(|t| {
                t.iter()
                    .map(|(k, v)| (k.clone(), v.as_object().cloned().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let number = |v: &Value| -> Value { json!(text(v).parse::<u64>().expect("a number")) };

    let map_list = |table: &str, key: &str, value: &str, key_is_number: bool| -> Vec<Value> {
        objects(table)
            .into_iter()
            .map(|(name, entries)| {
                let inner: Vec<Value> = entries
                    .iter()
                    .map(|(k, v)| {
                        let k = if key_is_number {
                            json!(k.parse::<u64>().unwrap())
                        } else {
                            json!(k)
                        };
                        let v = if key_is_number {
                            json!(text(v))
                        } else {
                            number(v)
                        };
                        json!({key: k, value: v})
                    })
                    .collect();
                json!({"name": name, table: inner})
            })
            .collect()
    };
    doc.insert(
        "sonic-dscp-tc-map:sonic-dscp-tc-map".into(),
        json!({"DSCP_TO_TC_MAP": {"DSCP_TO_TC_MAP_LIST": map_list("DSCP_TO_TC_MAP", "dscp", "tc", false)}}),
    );
    doc.insert(
        "sonic-tc-queue-map:sonic-tc-queue-map".into(),
        json!({"TC_TO_QUEUE_MAP": {"TC_TO_QUEUE_MAP_LIST": map_list("TC_TO_QUEUE_MAP", "tc", "qindex", true)}}),
    );
    let schedulers: Vec<Value> = objects("SCHEDULER")
        .into_iter()
        .map(|(name, f)| json!({"name": name, "type": text(&f["type"])}))
        .collect();
    doc.insert(
        "sonic-scheduler:sonic-scheduler".into(),
        json!({"SCHEDULER": {"SCHEDULER_LIST": schedulers}}),
    );
    let profiles: Vec<Value> = objects("WRED_PROFILE")
        .into_iter()
        .map(|(name, f)| {
            let mut entry = Map::new();
            entry.insert("name".into(), json!(name));
            for (field, value) in f {
                let value = if field.starts_with("wred_") {
                    json!(text(&value) == "true")
                } else {
                    json!(text(&value))
                };
                entry.insert(field, value);
            }
            Value::Object(entry)
        })
        .collect();
    doc.insert(
        "sonic-wred-profile:sonic-wred-profile".into(),
        json!({"WRED_PROFILE": {"WRED_PROFILE_LIST": profiles}}),
    );
    let queues: Vec<Value> = objects("QUEUE")
        .into_iter()
        .map(|(key, f)| {
            let (ifname, qindex) = key.rsplit_once('|').expect("port|queue");
            let mut entry = f.clone();
            entry.insert("ifname".into(), json!(ifname));
            entry.insert("qindex".into(), json!(qindex));
            Value::Object(entry)
        })
        .collect();
    doc.insert(
        "sonic-queue:sonic-queue".into(),
        json!({"QUEUE": {"QUEUE_LIST": queues}}),
    );
    // The egress lossy pool every SKU's buffer template defines, which the plan's
    // buffer profiles draw from.
    doc.insert(
        "sonic-buffer-pool:sonic-buffer-pool".into(),
        json!({"BUFFER_POOL": {"BUFFER_POOL_LIST": [
            {"name": "egress_lossy_pool", "type": "egress", "mode": "dynamic", "size": "24709632"}
        ]}}),
    );
    let buffer_profiles: Vec<Value> = objects("BUFFER_PROFILE")
        .into_iter()
        .map(|(name, f)| {
            let mut entry = f.clone();
            entry.insert("name".into(), json!(name));
            Value::Object(entry)
        })
        .collect();
    doc.insert(
        "sonic-buffer-profile:sonic-buffer-profile".into(),
        json!({"BUFFER_PROFILE": {"BUFFER_PROFILE_LIST": buffer_profiles}}),
    );
    let buffer_queues: Vec<Value> = objects("BUFFER_QUEUE")
        .into_iter()
        .map(|(key, f)| {
            let (port, qindex) = key.rsplit_once('|').expect("port|queue");
            let mut entry = f.clone();
            entry.insert("port".into(), json!(port));
            entry.insert("qindex".into(), json!(qindex));
            Value::Object(entry)
        })
        .collect();
    doc.insert(
        "sonic-buffer-queue:sonic-buffer-queue".into(),
        json!({"BUFFER_QUEUE": {"BUFFER_QUEUE_LIST": buffer_queues}}),
    );
    let bindings: Vec<Value> = objects("PORT_QOS_MAP")
        .into_iter()
        .map(|(port, f)| {
            let mut entry = f.clone();
            entry.insert("ifname".into(), json!(port));
            Value::Object(entry)
        })
        .collect();
    doc.insert(
        "sonic-port-qos-map:sonic-port-qos-map".into(),
        json!({"PORT_QOS_MAP": {"PORT_QOS_MAP_LIST": bindings}}),
    );
    let routes: Vec<Value> = objects("STATIC_ROUTE")
        .into_iter()
        .map(|(key, f)| {
            let (vrf, prefix) = key.split_once('|').expect("vrf|prefix");
            let mut entry = f.clone();
            entry.insert("vrf_name".into(), json!(vrf));
            entry.insert("prefix".into(), json!(prefix));
            Value::Object(entry)
        })
        .collect();
    doc.insert(
        "sonic-static-route:sonic-static-route".into(),
        json!({"STATIC_ROUTE": {"STATIC_ROUTE_LIST": routes}}),
    );
    Value::Object(doc)
}

/// Runs yanglint on `document` with every model; returns its exit code and messages.
pub fn yanglint(document: &Value, scratch: &Path) -> (i32, String) {
    let models = root().join("tests/yang/sonic");
    let file = scratch.join("document.json");
    std::fs::write(&file, serde_json::to_string_pretty(document).unwrap()).unwrap();
    let mut yang: Vec<_> = std::fs::read_dir(&models)
        .expect("the SONiC YANG models are in tests/yang/sonic")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yang"))
        .collect();
    yang.sort();
    let out = Command::new("yanglint")
        .arg("-p")
        .arg(&models)
        .args(["-t", "config"])
        .args(&yang)
        .arg(&file)
        .output()
        .expect("yanglint runs (Debian package libyang-tools; scripts/setup installs it)");
    let messages = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), messages)
}
