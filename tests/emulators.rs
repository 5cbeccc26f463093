//! The lab's emulated switches against mltctl's rendered configurations: each vendor's
//! emulation, running what mltctl renders for the lab fabric, reads back the queueing
//! the plan decided.

use mltctl::plan::Plan;
use mltctl_lab::emulator::Device;
use mltctl_lab::qos::Curve;

/// Each emulation, running the configuration mltctl renders for the lab fabric,
/// queues as the plan says: DSCP → queue on every planned port, every planned queue
/// strict, marking (ECT) and dropping (Not-ECT) from S_i, dropping all from L_i.
#[test]
fn every_emulation_reads_back_the_queueing_the_plan_renders() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory/lab.yaml");
    let plan = Plan::build(&mltctl::inventory::load(std::path::Path::new(path)).unwrap());
    let scratch_dir = mlt_common::files::scratch_dir("mltctl-qos-").unwrap();
    let scratch = scratch_dir.path();
    let mut checked = 0;
    for switch in &plan.switches {
        let intent = &switch.intent;
        let vendor = intent.vendor.to_string();
        if !IMPLEMENTED.contains(&vendor.as_str()) {
            continue;
        }
        let rendered = switch_config::render(intent).unwrap();
        let device = Device::install(
            &scratch.join(&intent.name),
            &vendor,
            &rendered,
            std::path::Path::new(env!("CARGO_BIN_EXE_mltctl-lab-switch")),
        );
        let qos = device.qos();
        for port in &intent.qos.ports {
            let got = qos
                .port(port)
                .unwrap_or_else(|| panic!("{}: no queueing on {port}: {qos:?}", intent.name));
            for dscp in 0..64 {
                let class = intent.qos.dscp_to_tc[dscp];
                let queue = intent.qos.tc_to_queue[class as usize];
                assert_eq!(
                    got.queue_of_dscp[dscp], queue,
                    "{} {port} DSCP {dscp}",
                    intent.name
                );
            }
            for q in &intent.qos.queues {
                let queue = &got.queues[&q.queue];
                assert!(queue.strict, "{} {port} queue {}", intent.name, q.queue);
                let Some(ecn) = q.ecn else { continue };
                let step = |bytes: u64| Curve {
                    min_bytes: bytes,
                    max_bytes: bytes,
                    max_percent: 100,
                };
                let at = format!("{} {port} queue {}", intent.name, q.queue);
                assert_eq!(queue.mark, Some(step(ecn.mark_bytes)), "{at}");
                assert_eq!(queue.drop_not_ect, Some(step(ecn.mark_bytes)), "{at}");
                if let Some(limit) = ecn.limit_bytes {
                    let dropped = queue.drop_all.map(|c| c.min_bytes).or(queue.limit_bytes);
                    assert_eq!(dropped, Some(limit), "{at}");
                }
            }
        }
        checked += 1;
    }
    assert_eq!(
        checked,
        IMPLEMENTED.len(),
        "one switch of each vendor read back"
    );
}

const IMPLEMENTED: &[&str] = &["eos", "sonic", "cumulus", "onyx"];

/// A switch-wide knob that makes a vendor enqueue Not-ECT packets above S (EOS's
/// `qos random-detect ecn allow non-ect`, NVUE's RoCE mode) takes the step's drop away
/// in the emulation, as the vendor documents; mltctl owns it as absent: its diff names
/// it, and its commands, entered on the emulated switch, take it out again, so the
/// step drops Not-ECT again.
#[test]
fn switch_wide_knobs_that_stop_dropping_not_ect_are_shown_and_removed() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory/lab.yaml");
    let plan = Plan::build(&mltctl::inventory::load(std::path::Path::new(path)).unwrap());
    let scratch_dir = mlt_common::files::scratch_dir("mltctl-knobs-").unwrap();
    let cases = [
        (
            "eos",
            "qos random-detect ecn allow non-ect chip-based\n",
            "- ECN allow non-ect (switch-wide): `qos random-detect ecn allow non-ect chip-based`",
            "no qos random-detect ecn allow non-ect\n",
        ),
        (
            "cumulus",
            "nv set qos roce mode lossless\n",
            "- qos roce (switch-wide): `mode lossless`",
            "nv unset qos roce\n",
        ),
    ];
    for (vendor, knob, change, command) in cases {
        let intent = &plan
            .switches
            .iter()
            .find(|s| s.intent.vendor.to_string() == vendor)
            .expect("a switch of the vendor")
            .intent;
        let rendered = switch_config::render(intent).unwrap();
        let running = format!("{rendered}{knob}");
        let device = Device::install(
            &scratch_dir.path().join(vendor),
            vendor,
            &running,
            std::path::Path::new(env!("CARGO_BIN_EXE_mltctl-lab-switch")),
        );
        let port = &intent.qos.ports[0];
        let gradient = intent
            .qos
            .queues
            .iter()
            .find(|q| q.ecn.is_some() && (vendor != "cumulus" || q.queue == 3))
            .expect("a gradient queue the knob reaches");
        let not_ect_dropped = |device: &Device| {
            let qos = device.qos();
            qos.port(port).unwrap().queues[&gradient.queue]
                .drop_not_ect
                .is_some()
        };
        assert!(
            !not_ect_dropped(&device),
            "{vendor}: the knob keeps Not-ECT"
        );
        let diff = switch_config::diff(intent, Some(&device.running())).unwrap();
        let changes: Vec<String> = diff.changes.iter().map(ToString::to_string).collect();
        assert!(
            changes.contains(&change.to_string()),
            "{vendor}: {changes:#?}"
        );
        assert!(
            diff.commands.contains(command),
            "{vendor}: {}",
            diff.commands
        );
        let reply = match vendor {
            "eos" => {
                let script = format!(
                    "configure session fix\n{}end\nconfigure session fix commit\n",
                    diff.commands
                );
                device.run(&["cli".to_string()], &script)
            }
            _ => {
                for line in diff.commands.lines() {
                    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
                    let reply = device.run(&argv, "");
                    assert_eq!(reply.status, 0, "{vendor}: {line}: {reply:?}");
                }
                device.run(
                    &["nv".into(), "config".into(), "apply".into(), "-y".into()],
                    "",
                )
            }
        };
        assert_eq!(reply.status, 0, "{vendor}: {reply:?}");
        assert!(
            not_ect_dropped(&device),
            "{vendor}: the step drops Not-ECT again"
        );
        let after = switch_config::diff(intent, Some(&device.running())).unwrap();
        assert!(after.changes.is_empty(), "{vendor}: {:?}", after.changes);
    }
}

/// Each emulation prints the forwarder's counters in its vendor's documented form, and
/// mltctl's readers of those forms (the ones `verify` uses on real switches) get the
/// counts back: transmitted, drops, WRED drops and marks per port and queue, or a
/// counter named as not exposed where the vendor has none.
#[test]
fn every_emulation_prints_the_forwarders_counters_in_its_vendors_form() {
    use mltctl_lab::queueing::QueueCounters;
    use switch_config::counters::{Count, Reading};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory/lab.yaml");
    let plan = Plan::build(&mltctl::inventory::load(std::path::Path::new(path)).unwrap());
    let scratch_dir = mlt_common::files::scratch_dir("mltctl-counters-").unwrap();
    let scratch = scratch_dir.path();
    let counted = |port: usize, queue: usize| QueueCounters {
        packets: 1000 * port as u64 + 10 * queue as u64,
        bytes: 1500 * (1000 * port as u64 + 10 * queue as u64),
        marked: 7 * queue as u64,
        dropped_not_ect: 3,
        dropped_red: 1,
        dropped_full: 2,
        ..QueueCounters::default()
    };
    for switch in &plan.switches {
        let intent = &switch.intent;
        let name = &intent.name;
        let device = Device::install(
            &scratch.join("devices").join(name),
            intent.vendor.as_str(),
            &switch_config::render(intent).unwrap(),
            std::path::Path::new(env!("CARGO_BIN_EXE_mltctl-lab-switch")),
        );
        let ports: serde_json::Map<String, serde_json::Value> = intent
            .qos
            .ports
            .iter()
            .enumerate()
            .map(|(p, port)| {
                let queues: Vec<_> = (0..8).map(|q| counted(p, q)).collect();
                (port.clone(), serde_json::to_value(queues).unwrap())
            })
            .collect();
        std::fs::create_dir_all(scratch.join("counters")).unwrap();
        std::fs::write(
            scratch.join("counters").join(format!("{name}.json")),
            serde_json::json!({"ports": ports}).to_string(),
        )
        .unwrap();
        let run = |argv: &[&str], stdin: &str| {
            let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
            let reply = device.run(&argv, stdin);
            assert_eq!(reply.status, 0, "{name} {argv:?}: {}", reply.stderr);
            reply.stdout
        };
        let reading: Reading = match intent.vendor {
            switch_config::Vendor::Sonic => switch_config::sonic::counters::parse(
                intent,
                &run(&["show", "queue", "counters", "--json"], ""),
                Ok(&run(&["show", "queue", "wredcounters", "--json"], "")),
            ),
            switch_config::Vendor::Eos => switch_config::eos::counters::parse(
                intent,
                &run(
                    &["cli"],
                    "show interfaces counters queue detail | json\n\
                     show qos interfaces ecn counters queue | json\n",
                ),
            ),
            switch_config::Vendor::Cumulus => {
                let printed: String = intent
                    .qos
                    .ports
                    .iter()
                    .map(|p| {
                        run(
                            &[
                                "nv",
                                "show",
                                "interface",
                                p,
                                "counters",
                                "qos",
                                "-o",
                                "json",
                            ],
                            "",
                        )
                    })
                    .collect();
                switch_config::cumulus::counters::parse(intent, &printed)
            }
            switch_config::Vendor::Onyx => {
                let script: String = intent
                    .qos
                    .ports
                    .iter()
                    .map(|p| {
                        format!(
                            "show interfaces ethernet {} congestion-control | json-print\n",
                            p.trim_start_matches("Eth")
                        )
                    })
                    .collect();
                let classes: String = (0..8)
                    .map(|tc| format!("show interfaces ethernet counters tc {tc}\n"))
                    .collect();
                switch_config::onyx::counters::parse(
                    intent,
                    &run(&["cli"], &script),
                    Ok(&run(&["cli"], &classes)),
                )
            }
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(reading.queues.len(), 8 * intent.qos.ports.len(), "{name}");
        let last = intent.qos.ports.len() - 1;
        let port = &intent.qos.ports[last];
        let gradient = intent
            .qos
            .queues
            .iter()
            .find(|q| q.ecn.is_some())
            .unwrap()
            .queue;
        let q = reading.queue(port, gradient).unwrap();
        let expected = counted(last, usize::from(gradient));
        let known = |c: &Count| c.known();
        match intent.vendor {
            switch_config::Vendor::Onyx => {
                assert_eq!(known(&q.wred_dropped), Some(4), "{name}");
                let all: u64 = (0..8).map(|i| counted(last, i).marked).sum();
                assert_eq!(reading.port_marks[port], Count::Known(all), "{name}");
                assert_eq!(known(&q.packets), Some(expected.packets), "{name}");
                // Onyx's per-class discards are unicast no-buffer (tail) drops alone.
                assert_eq!(known(&q.dropped), Some(2), "{name}");
            }
            vendor => {
                assert_eq!(known(&q.packets), Some(expected.packets), "{name}");
                assert_eq!(known(&q.marked), Some(expected.marked), "{name}");
                let dropped = if vendor == switch_config::Vendor::Cumulus {
                    2
                } else {
                    6
                };
                assert_eq!(known(&q.dropped), Some(dropped), "{name}");
            }
        }
        if intent.vendor == switch_config::Vendor::Eos {
            // A queue without ECN prints `-`: not exposed, not zero.
            assert_eq!(
                known(&reading.queue(port, 0).unwrap().marked),
                None,
                "{name}"
            );
        }
    }
}

/// The emulated NVUE's `nv config patch FILE` sets what the same settings set as `nv
/// set` commands, whole or not at all. The file is written as NVIDIA's `startup.yaml`
/// and `nv config diff -o yaml` show a configuration (its `qos` tree as in the NVUE
/// object model printed in NVIDIA's *Cumulus Linux Automation Workshop*): a list of
/// operations, attributes as nested keys, a collection's member holding its attributes
/// or `{}`.
#[test]
fn the_emulated_nvue_patches_what_its_commands_set() {
    let scratch_dir = mlt_common::files::scratch_dir("mltctl-nvue-patch-").unwrap();
    let scratch = scratch_dir.path();
    let emulator = std::path::Path::new(env!("CARGO_BIN_EXE_mltctl-lab-switch"));
    let words = |line: &str| -> Vec<String> { line.split_whitespace().map(String::from).collect() };
    let by_commands = Device::install(&scratch.join("commands"), "cumulus", "", emulator);
    for line in [
        "nv set qos congestion-control default-global traffic-class 2,3 min-threshold 150000",
        "nv set qos congestion-control default-global traffic-class 2,3 ecn enable",
        "nv set qos mapping default-global trust l3",
        "nv set vrf default router static 10.1.0.0/24 via 10.0.0.1",
        "nv set vrf default router static 10.2.0.0/24 via blackhole",
    ] {
        assert_eq!(by_commands.run(&words(line), "").status, 0, "{line}");
    }
    let patch = "- set:
    qos:
      congestion-control:
        default-global:
          traffic-class:
            '2':
              ecn: enable
              min-threshold: 150000
            '3':
              ecn: enable
              min-threshold: 150000
      mapping:
        default-global:
          trust: l3
    vrf:
      default:
        router:
          static:
            10.1.0.0/24:
              address-family: ipv4-unicast
              via:
                10.0.0.1:
                  type: ipv4-address
            10.2.0.0/24:
              via:
                blackhole: {}
";
    let file = scratch.join("patch.yaml");
    std::fs::write(&file, patch).unwrap();
    let file = file.to_str().unwrap();
    let by_patch = Device::install(&scratch.join("patch"), "cumulus", "", emulator);
    let patched = by_patch.run(&words(&format!("nv config patch {file}")), "");
    assert_eq!(patched.status, 0, "{patched:?}");
    let diff = |device: &Device| device.run(&words("nv config diff -o commands"), "").stdout;
    let pending = diff(&by_commands);
    assert!(
        pending.contains("traffic-class 3 min-threshold 150000"),
        "{pending}"
    );
    assert_eq!(diff(&by_patch), pending);

    // Refused, the pending revision unchanged: a relative path, a file that is not YAML
    // or not a list of operations, a setting the switch rejects.
    let refused = Device::install(&scratch.join("refused"), "cumulus", "", emulator);
    refused.set_faults(&["reject: via blackhole"]);
    let write = |name: &str, text: &str| {
        let path = scratch.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    for (file, error) in [
        ("patch.yaml".to_string(), "full path"),
        (write("bad.yaml", "- set: [\n"), "Failed to parse YAML"),
        (write("map.yaml", "set: {}\n"), "list of operation objects"),
        (
            write("verb.yaml", "- replace: {a: {b: c}}\n"),
            "list of operation objects",
        ),
        (
            write(
                "hop.yaml",
                "- set:\n    vrf: {default: {router: {static: {10.3.0.0/24: {via: {10.0.0.3: {type: blackhole}}}}}}}\n",
            ),
            "10.0.0.3 type blackhole",
        ),
        (
            file.to_string(),
            "Invalid config: set vrf default router static 10.2.0.0/24 via blackhole",
        ),
    ] {
        let reply = refused.run(&words(&format!("nv config patch {file}")), "");
        assert_eq!(reply.status, 1, "{file}: {reply:?}");
        assert!(reply.stderr.contains(error), "{file}: {reply:?}");
        assert_eq!(diff(&refused), "", "{file}");
    }
    // An empty file changes nothing; `- unset:` takes settings out.
    let empty = write("empty.yaml", "");
    assert_eq!(
        by_patch
            .run(&words(&format!("nv config patch {empty}")), "")
            .status,
        0
    );
    assert_eq!(diff(&by_patch), pending);
    let unset = write(
        "unset.yaml",
        "- unset:\n    vrf: {default: {router: {static: {10.2.0.0/24: {via: {blackhole: {}}}}}}}\n",
    );
    assert_eq!(
        by_patch
            .run(&words(&format!("nv config patch {unset}")), "")
            .status,
        0
    );
    let without = diff(&by_patch);
    assert!(!without.contains("blackhole"), "{without}");
    assert!(without.contains("10.1.0.0/24 via 10.0.0.1"), "{without}");
}
