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
            std::path::Path::new("/usr/bin/mltctl"),
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
            std::path::Path::new("/usr/bin/mltctl"),
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
