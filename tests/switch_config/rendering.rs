//! Rendering: golden files, determinism, read-back, and what a vendor cannot express;
//! SONiC's output against SONiC's own YANG models.

use super::*;

/// The lab's configurations, reviewed by eye against the vendor notes. Set
/// MLTCTL_BLESS=1 to rewrite them after an intended change, then review the diff.
#[test]
fn golden_files_for_the_lab() {
    let plan = lab_plan();
    let golden = root().join("tests/golden/lab");
    let rendered = switches::render_all(&plan).expect("the lab renders");
    let vendors: Vec<Vendor> = plan.switches.iter().map(|s| s.intent.vendor).collect();
    assert_eq!(
        vendors,
        [Vendor::Sonic, Vendor::Eos, Vendor::Cumulus, Vendor::Onyx]
    );
    if std::env::var_os("MLTCTL_BLESS").is_some() {
        switches::write_all(&golden, &rendered).unwrap();
    }
    for r in &rendered {
        let path = golden.join(&r.file_name);
        let expected =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            r.text == expected,
            "{} differs from {}",
            r.switch,
            path.display()
        );
    }
}

#[test]
fn identical_inputs_give_byte_identical_files() {
    let (a, b) = (scratch("render-a"), scratch("render-b"));
    for dir in [&a, &b] {
        let out = mltctl(&[
            "render",
            "-i",
            "inventory/lab.yaml",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let mut names: Vec<_> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["leaf1.nvue", "leaf2.cfg", "spine1.json", "spine2.cfg"]
    );
    for name in &names {
        assert_eq!(
            std::fs::read(a.join(name)).unwrap(),
            std::fs::read(b.join(name)).unwrap()
        );
    }
}

/// Render, parse back: no difference from the plan, for every vendor and fabric shape.
#[test]
fn every_vendor_reads_back_what_it_renders() {
    let plans = [
        lab_plan(),
        plan_of("tests/inventories/valid/partial-mesh.yaml"),
        plan_of("tests/inventories/valid/one-rack.yaml"),
        generated(4, 8, 3),
    ];
    let mut vendors = std::collections::BTreeSet::new();
    for plan in &plans {
        for switch in &plan.switches {
            let intent = &switch.intent;
            let text = switch_config::render(intent).unwrap();
            assert_eq!(
                changes(intent, &text),
                [],
                "{} ({})",
                intent.name,
                intent.vendor
            );
            vendors.insert(intent.vendor);
        }
    }
    assert_eq!(vendors.len(), 4, "every vendor was exercised");
}

/// A plan that changes is a difference against the old rendering, for every vendor.
#[test]
fn a_changed_plan_differs_from_the_old_rendering() {
    let plan = generated(4, 4, 2);
    for switch in plan.switches.iter().take(4) {
        let old = switch_config::render(&switch.intent).unwrap();
        let mut new = switch.intent.clone();
        let queue = new.qos.queues.iter_mut().find(|q| q.ecn.is_some()).unwrap();
        queue.ecn.as_mut().unwrap().mark_bytes += 1024;
        let removed = new.routes.pop().unwrap();
        new.qos.dscp_to_tc[10] = 3;
        let lines = changes(&new, &old);
        let vendor = new.vendor;
        let about = |needle: &str| lines.iter().filter(|l| l.item.contains(needle)).count();
        // Per-port vendors carry the DSCP map and thresholds on each port.
        let per_port = if vendor == Vendor::Onyx {
            new.qos.ports.len()
        } else {
            1
        };
        assert_eq!(
            about(&removed.prefix.to_string()),
            1,
            "{vendor}: {lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.item.contains("10") && l.to.is_some()),
            "{vendor}: {lines:#?}"
        );
        // The step is min = max: SONiC writes them as two fields, the others as one
        // curve.
        let step_items = if vendor == Vendor::Sonic { 2 } else { 1 };
        assert_eq!(
            lines.len(),
            1 + (1 + step_items) * per_port,
            "{vendor}: {lines:#?}"
        );
    }
}

#[test]
fn unexpressible_items_name_the_switch_the_item_and_the_vendor() {
    let plan = lab_plan();
    let mut eos = intent(&plan, "spine2").clone();
    eos.qos.queues[0].queue = 9;
    assert_eq!(
        switch_config::render(&eos).unwrap_err().to_string(),
        "switch spine2: eos cannot express queue 9: queues are numbered 0-7"
    );
    let mut onyx = intent(&plan, "leaf2").clone();
    onyx.qos.ports[0] = "swp1".into();
    assert_eq!(
        switch_config::render(&onyx).unwrap_err().to_string(),
        "switch leaf2: onyx cannot express port swp1: Onyx ports are named EthS/P (or EthS/P/N)"
    );
    let mut thresholds = intent(&plan, "leaf2").clone();
    let q = thresholds
        .qos
        .queues
        .iter_mut()
        .find(|q| q.ecn.is_some())
        .unwrap();
    q.ecn.as_mut().unwrap().mark_bytes = 1000;
    let err = switch_config::render(&thresholds).unwrap_err().to_string();
    assert!(
        err.ends_with("ECN threshold 1000 bytes: Onyx sets thresholds in whole KB"),
        "{err}"
    );

    // Through the CLI, a port the vendor cannot name is refused where it is written,
    // before anything is planned, and nothing is written.
    let out_dir = scratch("unexpressible");
    let inventory = std::fs::read_to_string(fixture("inventory/lab.yaml"))
        .unwrap()
        .replace("{name: Eth1/1, speed: 100G}", "{name: port1, speed: 100G}")
        .replace("[h3:ens1f0, leaf2:Eth1/1]", "[h3:ens1f0, leaf2:port1]");
    let file = out_dir.join("lab.yaml");
    std::fs::write(&file, inventory).unwrap();
    std::fs::copy(
        fixture("inventory/vgg16.layers"),
        out_dir.join("vgg16.layers"),
    )
    .unwrap();
    let target = out_dir.join("out");
    let out = mltctl(&[
        "render",
        "-i",
        file.to_str().unwrap(),
        "--out",
        target.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        text(&out.stderr),
        format!(
            "{}:66:16: port `port1` on leaf2 is not a port name in onyx's naming; \
             expected EthS/P or EthS/P/N (such as Eth1/5)\n\
             mltctl: the inventory has 1 problem(s); nothing was changed\n",
            file.display()
        )
    );
    assert!(!target.exists());
}

// ---------------------------------------------------------------- SONiC and its YANG models

pub(crate) fn sonic_tables(intent: &SwitchIntent) -> serde_json::Value {
    serde_json::from_str(&switch_config::render(intent).unwrap()).expect("SONiC output is JSON")
}

#[test]
fn sonic_output_validates_against_the_sonic_yang_models() {
    let dir = scratch("yang-valid");
    let mut checked = 0;
    for plan in [lab_plan(), generated(4, 4, 2)] {
        for switch in plan
            .switches
            .iter()
            .filter(|s| s.intent.vendor == Vendor::Sonic)
        {
            let doc = sonic_yang::document(&sonic_tables(&switch.intent), &switch.intent.qos.ports);
            let (code, messages) = sonic_yang::yanglint(&doc, &dir);
            assert_eq!(code, 0, "{}: {messages}", switch.intent.name);
            checked += 1;
        }
    }
    assert!(checked >= 2);
}

#[test]
fn a_broken_sonic_rendering_fails_yang_validation() {
    let plan = lab_plan();
    let intent = intent(&plan, "spine1");
    let dir = scratch("yang-broken");
    // A WRED profile whose maximum is below its minimum.
    let mut tables = sonic_tables(intent);
    tables["WRED_PROFILE"]["MLT_Q1"]["green_max_threshold"] = "1024".into();
    let (code, messages) =
        sonic_yang::yanglint(&sonic_yang::document(&tables, &intent.qos.ports), &dir);
    assert_ne!(code, 0);
    assert!(
        messages.contains("Green max threshold must be greater than or equal to min threshold"),
        "{messages}"
    );
    // A queue limit drawing from a pool the switch does not have.
    let mut tables = sonic_tables(intent);
    tables["BUFFER_PROFILE"]["MLT_Q1_LIMIT"]["pool"] = "no_such_pool".into();
    let (code, messages) =
        sonic_yang::yanglint(&sonic_yang::document(&tables, &intent.qos.ports), &dir);
    assert_ne!(code, 0);
    assert!(messages.contains("no_such_pool"), "{messages}");
    // A queue bound to a scheduler that does not exist.
    let mut tables = sonic_tables(intent);
    tables["QUEUE"]["Ethernet0|7"]["scheduler"] = "MLT_MISSING".into();
    let (code, messages) =
        sonic_yang::yanglint(&sonic_yang::document(&tables, &intent.qos.ports), &dir);
    assert_ne!(code, 0);
    assert!(messages.contains("MLT_MISSING"), "{messages}");
}
