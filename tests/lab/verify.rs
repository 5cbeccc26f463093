//! `mltctl verify` on the lab after `play`: every switch and every host is `ok`, each
//! class's probes landed in its planned queue; then each of four changes made behind
//! mltctl's back is found and named, and undone again.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{Lab, NAME, json_lines, mltctl, text};

/// One verify run: its exit code, its device and host events, and all it printed.
struct Run {
    code: Option<i32>,
    devices: Vec<Value>,
    hosts: Vec<Value>,
    said: String,
}

impl Run {
    fn device(&self, name: &str) -> &Value {
        self.devices
            .iter()
            .find(|d| d["device"] == name)
            .unwrap_or_else(|| panic!("no {name}: {}", self.said))
    }

    fn host(&self, name: &str) -> &Value {
        self.hosts
            .iter()
            .find(|d| d["host"] == name)
            .unwrap_or_else(|| panic!("no {name}: {}", self.said))
    }
}

fn verify(lab: &Lab, limit: &str) -> Run {
    verify_with(lab, limit, &[])
}

fn verify_with(lab: &Lab, limit: &str, more: &[&str]) -> Run {
    let mut args = vec!["verify", "--window", "1", "--json", "--limit", limit];
    args.extend(more);
    let out = lab.mltctl(&args);
    let lines = json_lines(&out);
    let events = |kind: &str| -> Vec<Value> {
        lines
            .iter()
            .filter(|l| l["event"] == kind)
            .cloned()
            .collect()
    };
    Run {
        code: out.status.code(),
        devices: events("device"),
        hosts: events("host"),
        said: text(&out),
    }
}

/// Runs a script through an emulated switch's own command, as its CLI would.
fn emulate(lab: &Lab, switch: &str, args: &[&str], stdin: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mltctl-lab-switch"))
        .args(args)
        .env("MLT_DEVICE", lab.dir.join("devices").join(switch))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "{switch}: {args:?}");
}

/// A JSON patch through SONiC's `config apply-patch`.
fn patch_sonic(lab: &Lab, switch: &str, patch: &str) {
    let file = lab.dir.join(format!("{switch}-patch.json"));
    std::fs::write(&file, patch).unwrap();
    emulate(
        lab,
        switch,
        &["config", "apply-patch", &file.to_string_lossy()],
        "",
    );
}

/// Every sample of a Prometheus text, by metric name: `[labels, value]` pairs, as the
/// Prometheus project's parser (python3-prometheus-client's, the text format
/// node-exporter's textfile collector reads) gives them.
fn prometheus_samples(text: &str) -> Value {
    let parse = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
seen = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        seen.setdefault(s.name, []).append([s.labels, s.value])
print(json.dumps(seen))
"#;
    let mut python = Command::new("/usr/bin/python3")
        .args(["-c", parse])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    python
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let parsed = python.wait_with_output().unwrap();
    assert!(
        parsed.status.success(),
        "not Prometheus text: {}\n{text}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    serde_json::from_slice(&parsed.stdout).unwrap()
}

/// The switches a metric has samples of.
fn switches_in(samples: &Value, name: &str) -> std::collections::BTreeSet<String> {
    samples[name]
        .as_array()
        .unwrap_or_else(|| panic!("no {name}"))
        .iter()
        .map(|s| s[0]["switch"].as_str().unwrap().to_string())
        .collect()
}

pub fn lab_verify(lab: &Lab) {
    let textfile = lab.dir.join("verify.prom");
    let run = verify_with(lab, "all", &["--prometheus", textfile.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}", run.said);
    // The textfile: every switch's and host's verdict, every switch's queues.
    let written = prometheus_samples(&std::fs::read_to_string(&textfile).unwrap());
    let verdicts = written["mltctl_verify_verdict"].as_array().unwrap();
    assert_eq!(
        verdicts.len(),
        run.devices.len() + run.hosts.len(),
        "{written}"
    );
    assert!(
        verdicts.iter().all(|v| v[0]["verdict"] == "ok"),
        "{written}"
    );
    let names = ["spine1", "spine2", "leaf1", "leaf2"]
        .map(String::from)
        .into();
    assert_eq!(switches_in(&written, "mltctl_verify_queue_packets"), names);
    // The lab's own counters, every switch's, with drops by reason.
    let dir = lab.dir.to_string_lossy();
    let status = lab.mltctl(&["lab", "status", "--prometheus", "--dir", &dir]);
    assert!(status.status.success(), "{}", text(&status));
    let counted = prometheus_samples(&String::from_utf8_lossy(&status.stdout));
    assert_eq!(
        switches_in(&counted, "mltctl_lab_queue_packets_total"),
        names
    );
    let reasons: std::collections::BTreeSet<&str> =
        counted["mltctl_lab_queue_dropped_packets_total"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s[0]["reason"].as_str().unwrap())
            .collect();
    assert_eq!(reasons, ["full", "not_ect", "red"].into());
    let sent: f64 = counted["mltctl_lab_queue_packets_total"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[1].as_f64().unwrap())
        .sum();
    assert!(sent > 0.0, "{counted}");
    assert_eq!((run.devices.len(), run.hosts.len()), (4, 4), "{}", run.said);
    for device in &run.devices {
        assert_eq!(device["verdict"], "ok", "{device}");
        // Every class's burst was counted in its planned queue (4 probes per peer and
        // path cross every switch at least once).
        let probes = device["probes"].as_array().unwrap();
        assert_eq!(probes.len(), 6, "{device}");
        for landing in probes {
            assert!(landing["packets"].as_u64().unwrap() >= 4, "{device}");
        }
    }
    for host in &run.hosts {
        assert_eq!(host["verdict"], "ok", "{host}");
        for class in host["arrivals"].as_array().unwrap() {
            // The rack's peer by its NIC's address, two peers by two paths each.
            assert_eq!(class["expected"], 20, "five paths of 4 probes: {host}");
            assert!(class["probes"].as_u64().unwrap() > 0, "{host}");
        }
    }

    // Bursts that fill the queues: each class's burst is an incast to one host, whose
    // leaf must mark or WRED-drop in the class's queue, and no other queue may.
    let run = verify_with(lab, "all", &["--congest"]);
    assert_eq!(run.code, Some(0), "{}", run.said);
    let filled: Vec<&Value> = run
        .devices
        .iter()
        .flat_map(|d| d["probes"].as_array().unwrap())
        .filter(|landing| landing["fills"] == true)
        .collect();
    assert_eq!(filled.len(), 6, "one leaf per class: {}", run.said);
    for landing in filled {
        let hits =
            landing["marked"].as_u64().unwrap_or(0) + landing["wred_dropped"].as_u64().unwrap_or(0);
        assert!(hits > 0, "{landing}");
    }

    // 1. A switch's WRED/ECN profile unbound from a queue.
    let unbind = r#"[{"op":"remove","path":"/QUEUE/Ethernet0|6/wred_profile"}]"#;
    patch_sonic(lab, "spine1", unbind);
    let run = verify(lab, "spine1");
    assert_eq!(run.code, Some(7), "{}", run.said);
    let line = run.device("spine1")["mismatches"][0].as_str().unwrap();
    assert!(
        line.contains("QUEUE|Ethernet0|6") && line.contains("wred_profile"),
        "{line}"
    );
    let bind = r#"[{"op":"add","path":"/QUEUE/Ethernet0|6/wred_profile","value":"MLT_Q6"}]"#;
    patch_sonic(lab, "spine1", bind);

    // 2. One spine's DSCP map differs from the rest.
    let cli = ["cli"];
    emulate(
        lab,
        "spine2",
        &cli,
        "configure\nqos map dscp 26 to traffic-class 2\nend\n",
    );
    let run = verify(lab, "spine*");
    assert_eq!(run.code, Some(7), "{}", run.said);
    let line = run.device("spine2")["mismatches"][0].as_str().unwrap();
    assert!(
        line.contains("DSCP map") && line.contains("DSCP 26"),
        "{line}"
    );
    assert_eq!(run.device("spine1")["verdict"], "ok", "{}", run.said);
    emulate(
        lab,
        "spine2",
        &cli,
        "configure\nqos map dscp 26 to traffic-class 0\nend\n",
    );

    // 3. The switches' queueing not enforced: every class lands in queue 0.
    let dir = lab.dir.to_string_lossy().to_string();
    assert!(
        lab.mltctl(&["lab", "qos", "off", "--dir", &dir])
            .status
            .success()
    );
    let run = verify(lab, "all");
    assert!(
        lab.mltctl(&["lab", "qos", "on", "--dir", &dir])
            .status
            .success()
    );
    assert_eq!(run.code, Some(7), "{}", run.said);
    let lines = run.device("leaf1")["mismatches"].as_array().unwrap();
    let first = lines[0].as_str().unwrap();
    assert!(
        first.contains("class 0 (DSCP 32) on swp1")
            && first.contains("planned queue 6 counted 0 packets")
            && first.contains("queue 0 counted"),
        "{}",
        run.said
    );
    assert_eq!(lines.len(), 6, "every class: {}", run.said);

    // 4. A host's transport marks a class with another DSCP.
    relaunch_with_dscp(lab, "h2", 0, 40);
    let run = verify(lab, "all");
    assert_eq!(run.code, Some(7), "{}", run.said);
    let h2 = run.host("h2")["mismatches"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        h2.contains("class 0: the transport marks DSCP 40") && h2.contains("DSCP 32"),
        "{}",
        run.said
    );
    let h1 = run.host("h1")["mismatches"].to_string();
    assert!(h1.contains("probes arrived with DSCP 40"), "{}", run.said);
    let out = lab.mltctl(&["launch", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(verify(lab, "all").code, Some(0));

    // 5. A host's MAC map changed behind mltctl's back: one static neighbour's MAC.
    let namespace = format!("{NAME}-h2");
    let neighbours = Command::new("ip")
        .args(["-j", "-n", &namespace, "neigh", "show", "nud", "permanent"])
        .output()
        .unwrap();
    let neighbours: Value = serde_json::from_slice(&neighbours.stdout).unwrap();
    let first = &neighbours[0];
    let (ip, dev) = (
        first["dst"].as_str().unwrap(),
        first["dev"].as_str().unwrap(),
    );
    let changed = Command::new("ip")
        .args(["-n", &namespace, "neigh", "replace", ip, "dev", dev])
        .args([
            "lladdr",
            "02:00:00:00:00:99",
            "nud",
            "permanent",
            "proto",
            "77",
        ])
        .status()
        .unwrap();
    assert!(changed.success());
    let run = verify_with(lab, "all", &["--probe", "0"]);
    assert_eq!(run.code, Some(7), "{}", run.said);
    let h2 = run.host("h2")["mismatches"].to_string();
    assert!(
        h2.contains(&format!("neighbour {ip} lladdr 02:00:00:00:00:99 ->")),
        "{}",
        run.said
    );
    let out = lab.mltctl(&["bootstrap", "--limit", "h2", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(verify_with(lab, "all", &["--probe", "0"]).code, Some(0));
}

/// Stops every host's transport, changes `host`'s class `class` to `dscp` in its
/// configuration file, and starts them all again as `mltctl launch` does.
fn relaunch_with_dscp(lab: &Lab, host: &str, class: u64, dscp: u64) {
    let remote = lab.dir.join("remote");
    let endhost = mltctl().with_file_name("endhost");
    let file = |h: &str, ext: &str| remote.join(format!("{h}.{ext}"));
    let in_host = |h: &str, args: &[&Path]| {
        let out = Command::new("ip")
            .args(["netns", "exec", &format!("{NAME}-{h}")])
            .arg(&endhost)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{h}: {}", text(&out));
    };
    let p = |s: &'static str| Path::new(s);
    let hosts = lab.hosts();
    for h in &hosts {
        in_host(h, &[p("stop"), p("--pid-file"), &file(h, "pid")]);
    }
    let config = file(host, "transport.json");
    let mut json: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    for tag in json["job"]["tagging"]["classes"].as_array_mut().unwrap() {
        if tag["class"] == class {
            tag["dscp"] = dscp.into();
        }
    }
    std::fs::write(&config, json.to_string()).unwrap();
    for h in &hosts {
        in_host(
            h,
            &[
                p("serve"),
                p("--config"),
                &file(h, "transport.json"),
                p("--socket"),
                &file(h, "sock"),
                p("--pid-file"),
                &file(h, "pid"),
                p("--log"),
                &file(h, "log"),
                p("--connect-timeout"),
                p("30"),
                p("--detach"),
            ],
        );
    }
    for h in &hosts {
        in_host(
            h,
            &[
                p("status"),
                p("--socket"),
                &file(h, "sock"),
                p("--wait"),
                p("30"),
            ],
        );
    }
}
