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
