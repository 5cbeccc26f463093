//! Vendor configurations: rendered for the plan, read back, validated, and compared
//! with realistic running configurations.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{fixture, mltctl, root, sonic_yang, text};
use mltctl::generate::{FabricSize, fabric_yaml};
use mltctl::inventory::{self, LoadError};
use mltctl::plan::Plan;
use mltctl::switches;
use switch_config::{ChangeLine, SwitchIntent, Vendor};

fn plan_of(relative: &str) -> Plan {
    let path = fixture(relative);
    let text = std::fs::read_to_string(&path).expect("fixture exists");
    plan_of_text(&path, &text)
}

fn plan_of_text(path: &Path, text: &str) -> Plan {
    match inventory::load_str(path, text) {
        Ok(inv) => Plan::build(&inv),
        Err(LoadError::Invalid(d)) => panic!("{d}"),
        Err(e) => panic!("{e}"),
    }
}

fn generated(spines: usize, leaves: usize, hosts: usize) -> Plan {
    let yaml = fabric_yaml(FabricSize {
        spines,
        leaves,
        hosts_per_leaf: hosts,
        layers: 20,
        params_per_layer: 1000,
    })
    .unwrap();
    plan_of_text(Path::new("generated.yaml"), &yaml)
}

fn intent<'p>(plan: &'p Plan, name: &str) -> &'p SwitchIntent {
    &plan
        .switches
        .iter()
        .find(|s| s.intent.name == name)
        .expect("a switch of that name")
        .intent
}

fn changes(intent: &SwitchIntent, running: &str) -> Vec<ChangeLine> {
    switch_config::diff(intent, Some(running)).unwrap().changes
}

/// A fresh directory (unguessable name, 0700), removed when dropped.
struct Scratch(mlt_common::files::TempDir);

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        self.0.path()
    }
}

fn scratch(name: &str) -> Scratch {
    Scratch(mlt_common::files::scratch_dir(&format!("mltctl-{name}-")).unwrap())
}

// ---------------------------------------------------------------- rendering

/// The lab's configurations, reviewed by eye against the vendor notes. Set
/// MLTCTL_BLESS=1 to rewrite them after an intended change, then review the diff.
#[test]
fn golden_files_for_the_lab() {
    let plan = plan_of("inventory/lab.yaml");
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
        plan_of("inventory/lab.yaml"),
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
    let plan = plan_of("inventory/lab.yaml");
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

fn sonic_tables(intent: &SwitchIntent) -> serde_json::Value {
    serde_json::from_str(&switch_config::render(intent).unwrap()).expect("SONiC output is JSON")
}

#[test]
fn sonic_output_validates_against_the_sonic_yang_models() {
    let dir = scratch("yang-valid");
    let mut checked = 0;
    for plan in [plan_of("inventory/lab.yaml"), generated(4, 4, 2)] {
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
    let plan = plan_of("inventory/lab.yaml");
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

// ---------------------------------------------------------------- diffs against realistic running configs

/// Saved running configurations of the lab switches, as each OS prints them: defaults
/// left out, ranges and lists, other units and spellings, and plenty the plan does not
/// own (interfaces, BGP, users, other QoS profiles, management routes).
fn realistic(switch: &str, file: &str) -> (SwitchIntent, String) {
    let plan = plan_of("inventory/lab.yaml");
    let running = std::fs::read_to_string(fixture(&format!("tests/running/lab/{file}"))).unwrap();
    (intent(&plan, switch).clone(), running)
}

/// One vendor's realistic config and edits of it.
struct Case {
    switch: &'static str,
    file: &'static str,
    /// One threshold edited: (from, to), the change reported, the fix.
    threshold: (&'static str, &'static str, &'static str, &'static str),
    /// Edits of things the plan does not own.
    unrelated: &'static [(&'static str, &'static str)],
    /// A line or entry the plan does not want, inside its scope: (after, insert), the
    /// change reported, the fix.
    stale: (&'static str, &'static str, &'static str, &'static str),
}

const CASES: &[Case] = &[
    Case {
        switch: "spine1",
        file: "spine1.json",
        threshold: (
            r#""green_min_threshold": "147456""#,
            r#""green_min_threshold": "146432""#,
            "~ WRED_PROFILE|MLT_Q2 green_min_threshold: 146432 -> 147456",
            "[\n  {\n    \"op\": \"replace\",\n    \"path\": \"/WRED_PROFILE/MLT_Q2/green_min_threshold\",\n    \"value\": \"147456\"\n  }\n]\n",
        ),
        unrelated: &[
            (r#""asn": "65101""#, r#""asn": "65199""#),
            // Fields of an entry the plan partly owns, which are not its own.
            (
                "\"Ethernet0\": {\n            \"dscp_to_tc_map\": \"MLT\",\n            \"pfc_enable\": \"3,4\",",
                "\"Ethernet0\": {\n            \"dscp_to_tc_map\": \"MLT\",\n            \"pfc_enable\": \"3\",",
            ),
            (
                r#""global": {"#,
                r#""global": {"tc_to_queue_map": "AZURE","#,
            ),
            (r#""mgmt|0.0.0.0/0": {"#, r#""mgmt|0.0.0.0/1": {"#),
            (
                r#""default|192.168.50.0/24""#,
                r#""default|192.168.51.0/24""#,
            ),
            // A queue the plan does not own, on a port it does.
            (
                "\"Ethernet0|0\": {\n            \"scheduler\": \"scheduler.0\"",
                "\"Ethernet0|0\": {\n            \"scheduler\": \"scheduler.1\"",
            ),
        ],
        stale: (
            r#""STATIC_ROUTE": {"#,
            "\n        \"default|10.200.0.64/30\": {\"nexthop\": \"172.16.0.1\"},",
            "- STATIC_ROUTE|default|10.200.0.64/30: via 172.16.0.1",
            "[\n  {\n    \"op\": \"remove\",\n    \"path\": \"/STATIC_ROUTE/default|10.200.0.64~130\"\n  }\n]\n",
        ),
    },
    Case {
        switch: "spine2",
        file: "spine2.cfg",
        threshold: (
            "minimum-threshold 147456 bytes",
            "minimum-threshold 143 kbytes",
            "~ tx-queue 2 ECN: 146432 bytes to 147456 bytes, 100% -> 147456 bytes to 147456 bytes, 100%",
            "!\nqos profile MLT\n   !\n   tx-queue 2\n      random-detect ecn minimum-threshold 147456 bytes maximum-threshold 147456 bytes max-mark-probability 100\n",
        ),
        unrelated: &[
            ("hostname spine2", "hostname spine-two"),
            ("   description leaf1:swp32\n", ""),
            ("      bandwidth percent 50", "      bandwidth percent 40"),
            (
                "   neighbor 172.16.0.3 remote-as 65101",
                "   neighbor 172.16.0.3 remote-as 65111",
            ),
            ("ip route 192.168.100.0/24 172.16.0.3\n", ""),
            (
                "ip route vrf MGMT 0.0.0.0/0 192.0.2.1",
                "ip route vrf MGMT 0.0.0.0/0 192.0.2.254",
            ),
        ],
        stale: (
            "ip route 10.1.1.0/24 172.16.0.3\n",
            "ip route 10.200.0.64/30 172.16.0.3\n",
            "- route 10.200.0.64/30: via 172.16.0.3",
            "!\nno ip route 10.200.0.64/30 172.16.0.3\n",
        ),
    },
    Case {
        switch: "leaf1",
        file: "leaf1.nvue",
        threshold: (
            "traffic-class 2 min-threshold-bytes 147456",
            "traffic-class 2 min-threshold-bytes 146432",
            "~ traffic-class 2 congestion-control: 146432 to 147456 bytes, 100%, ecn enable, red enable -> 147456 to 147456 bytes, 100%, ecn enable, red enable",
            "nv set qos congestion-control default-global traffic-class 2 min-threshold 147456\n\
             nv set qos congestion-control default-global traffic-class 2 max-threshold 147456\n\
             nv set qos congestion-control default-global traffic-class 2 probability 100\n\
             nv set qos congestion-control default-global traffic-class 2 ecn enable\n\
             nv set qos congestion-control default-global traffic-class 2 red enable\n",
        ),
        unrelated: &[
            (
                "nv set system hostname leaf1",
                "nv set system hostname leaf-one",
            ),
            (
                "nv set router bgp autonomous-system 65101",
                "nv set router bgp autonomous-system 65111",
            ),
            (
                "traffic-class 0 min-threshold 150000",
                "traffic-class 0 min-threshold 160000",
            ),
            (
                "nv set vrf default router static 192.168.60.0/24 via 172.16.0.0 type ipv4-address\n",
                "",
            ),
            (
                "nv set vrf mgmt router static 0.0.0.0/0 via 192.0.2.1",
                "nv set vrf mgmt router static 0.0.0.0/0 via 192.0.2.2",
            ),
        ],
        stale: (
            "nv set vrf mgmt router static 0.0.0.0/0 via 192.0.2.1 type ipv4-address\n",
            "nv set vrf default router static 10.200.0.64/30 via 172.16.0.0 type ipv4-address\n",
            "- route 10.200.0.64/30: via 172.16.0.0",
            "nv unset vrf default router static 10.200.0.64/30 via 172.16.0.0\n",
        ),
    },
    Case {
        switch: "leaf2",
        file: "leaf2.cfg",
        threshold: (
            "ethernet 1/31 traffic-class 2 congestion-control both minimum-absolute 144",
            "ethernet 1/31 traffic-class 2 congestion-control both minimum-absolute 143",
            "~ Eth1/31 traffic-class 2 congestion-control: both 143 KB to 144 KB -> both 144 KB to 144 KB",
            "interface ethernet 1/31 traffic-class 2 congestion-control both minimum-absolute 144 maximum-absolute 144\n",
        ),
        unrelated: &[
            (
                "interface ethernet 1/5 qos trust L2",
                "interface ethernet 1/5 qos trust L3",
            ),
            (
                "minimum-absolute 150 maximum-absolute 1500",
                "minimum-absolute 100 maximum-absolute 1000",
            ),
            ("   interface ethernet 1/1 description h3\n", ""),
            ("   ip route vrf default 192.168.70.0/24 172.16.0.4\n", ""),
            (
                "snmp-server community public ro",
                "snmp-server community private ro",
            ),
        ],
        stale: (
            "   ip route vrf default 192.168.70.0/24 172.16.0.4\n",
            "   ip route vrf default 10.200.0.64/30 172.16.0.4\n",
            "- route 10.200.0.64/30: via 172.16.0.4",
            "no ip route 10.200.0.64 /30 172.16.0.4\n",
        ),
    },
];

fn edited(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "`{from}` should occur once");
    text.replacen(from, to, 1)
}

#[test]
fn realistic_running_configs_parse_and_match_the_plan() {
    for case in CASES {
        let (intent, running) = realistic(case.switch, case.file);
        let diff = switch_config::diff(&intent, Some(&running)).unwrap();
        assert_eq!(diff.changes, [], "{}", case.switch);
        assert_eq!(diff.commands, "", "{}", case.switch);
    }
}

#[test]
fn one_changed_threshold_is_exactly_one_change() {
    for case in CASES {
        let (intent, running) = realistic(case.switch, case.file);
        let (from, to, change, fix) = case.threshold;
        let diff = switch_config::diff(&intent, Some(&edited(&running, from, to))).unwrap();
        let lines: Vec<String> = diff.changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, [change], "{}", case.switch);
        assert_eq!(diff.commands, fix, "{}", case.switch);
    }
}

#[test]
fn unrelated_configuration_is_ignored() {
    for case in CASES {
        let (intent, mut running) = realistic(case.switch, case.file);
        for (from, to) in case.unrelated {
            running = edited(&running, from, to);
        }
        assert_eq!(changes(&intent, &running), [], "{}", case.switch);
    }
}

#[test]
fn stale_routes_inside_the_plans_scope_are_removed() {
    for case in CASES {
        let (intent, running) = realistic(case.switch, case.file);
        let (after, insert, change, fix) = case.stale;
        let running = edited(&running, after, &format!("{after}{insert}"));
        let diff = switch_config::diff(&intent, Some(&running)).unwrap();
        let lines: Vec<String> = diff.changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, [change], "{}", case.switch);
        assert_eq!(diff.commands, fix, "{}", case.switch);
    }
}

#[test]
fn a_service_profile_on_a_port_outside_the_plan_is_removed() {
    let (intent, running) = realistic("spine2", "spine2.cfg");
    let running = edited(
        &running,
        "   service-profile UPLINKS\n",
        "   service-profile MLT\n",
    );
    let diff = switch_config::diff(&intent, Some(&running)).unwrap();
    let lines: Vec<String> = diff.changes.iter().map(ToString::to_string).collect();
    assert_eq!(lines, ["- interface Ethernet3/1 service-profile: MLT"]);
    assert_eq!(
        diff.commands,
        "!\ninterface Ethernet3/1\n   no service-profile MLT\n"
    );
}

#[test]
fn a_missing_running_file_is_an_empty_switch_and_said_so() {
    let empty = scratch("empty-running");
    let out = mltctl(&[
        "diff",
        "-i",
        "inventory/lab.yaml",
        "--running",
        empty.to_str().unwrap(),
        "--json",
        "--exit-code",
    ]);
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
    let expected = |name: &str, file: &str| {
        format!(
            "mltctl: no running configuration for {name} (expected {}); taken as empty",
            empty.join(file).display()
        )
    };
    assert_eq!(
        text(&out.stderr).lines().collect::<Vec<_>>(),
        [
            expected("spine1", "spine1.json"),
            expected("spine2", "spine2.cfg"),
            expected("leaf1", "leaf1.nvue"),
            expected("leaf2", "leaf2.cfg"),
        ]
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["taken_as_empty"],
        serde_json::json!(["spine1", "spine2", "leaf1", "leaf2"])
    );
    assert_eq!(report["differing"], 4);
    for switch in report["switches"].as_array().unwrap() {
        let changes = switch["changes"].as_array().unwrap();
        assert!(!changes.is_empty());
        // Nothing to remove from an empty switch; only its defaults are replaced.
        assert!(changes.iter().all(|c| !c["to"].is_null()), "{switch}");
    }
    // The same directory holding the rendered files: nothing differs, exit 0.
    let out = mltctl(&[
        "render",
        "-i",
        "inventory/lab.yaml",
        "--out",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = mltctl(&[
        "diff",
        "-i",
        "inventory/lab.yaml",
        "--running",
        empty.to_str().unwrap(),
        "--exit-code",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).ends_with("0 of 4 switches differ from the plan (0 change(s))\n"));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    // With --require-running a missing file is an error.
    std::fs::remove_file(empty.join("leaf1.nvue")).unwrap();
    let out = mltctl(&[
        "diff",
        "-i",
        "inventory/lab.yaml",
        "--running",
        empty.to_str().unwrap(),
        "--require-running",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "mltctl: cannot compare 1 switch(es):\n  no running configuration for leaf1 (expected {})\n",
            empty.join("leaf1.nvue").display()
        )
    );
}

/// A running configuration saved in another form is refused, naming the form expected:
/// NVUE YAML under a `.nvue` name, JSON where CLI text belongs, text where config_db
/// JSON belongs.
#[test]
fn a_running_file_in_another_form_is_an_error() {
    let dir = scratch("wrong-form");
    let rendered = mltctl(&[
        "render",
        "-i",
        "inventory/lab.yaml",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(rendered.status.code(), Some(0));
    let cases = [
        (
            "leaf1.nvue",
            "- header:\n    rev-id: 1.0\n- set:\n    qos:\n      mapping: {}\n",
            "switch leaf1: running cumulus configuration, line 1: not an `nv` command: expected \
             `nv config show -o commands` output (the YAML of `nv config show` cannot be read)",
        ),
        (
            "spine2.cfg",
            "{\"cmds\": {}}\n",
            "switch spine2: running eos configuration, line 1: this is JSON; expected \
             `show running-config` text",
        ),
        (
            "leaf2.cfg",
            "---\ninterfaces: []\n",
            "switch leaf2: running onyx configuration, line 1: this is YAML; expected \
             `show running-config` text",
        ),
    ];
    for (file, contents, message) in cases {
        let saved = std::fs::read_to_string(dir.join(file)).unwrap();
        std::fs::write(dir.join(file), contents).unwrap();
        let out = mltctl(&[
            "diff",
            "-i",
            "inventory/lab.yaml",
            "--running",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "mltctl: cannot compare 1 switch(es):\n  {}: {message}\n",
                dir.join(file).display()
            ),
            "{file}"
        );
        std::fs::write(dir.join(file), saved).unwrap();
    }
    std::fs::write(dir.join("spine1.json"), "DSCP_TO_TC_MAP|MLT 0 0\n").unwrap();
    let out = mltctl(&[
        "diff",
        "-i",
        "inventory/lab.yaml",
        "--running",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("not config_db JSON (as `sonic-cfggen -d --print-data` prints it)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_sonic_patch_creates_missing_tables_before_their_objects() {
    let (intent, running) = realistic("spine1", "spine1.json");
    let patch_ops = |running: &str| -> Vec<(String, String)> {
        let diff = switch_config::diff(&intent, Some(running)).unwrap();
        let patch: serde_json::Value = serde_json::from_str(&diff.commands).unwrap();
        patch
            .as_array()
            .unwrap()
            .iter()
            .map(|op| {
                (
                    op["op"].as_str().unwrap().into(),
                    op["path"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    // An empty switch: every table the plan uses is added empty, then filled.
    let ops = patch_ops("");
    for table in [
        "/DSCP_TO_TC_MAP",
        "/WRED_PROFILE",
        "/QUEUE",
        "/STATIC_ROUTE",
    ] {
        let created = ops
            .iter()
            .position(|op| op == &("add".to_string(), table.to_string()))
            .unwrap_or_else(|| panic!("{table} is not created: {ops:?}"));
        let first_object = ops
            .iter()
            .position(|(_, path)| path.starts_with(&format!("{table}/")))
            .unwrap();
        assert!(created < first_object, "{table}: {ops:?}");
    }
    // A switch that has the tables, without the plan's objects: no table is replaced.
    let without_static_routes = {
        let mut doc: serde_json::Value = serde_json::from_str(&running).unwrap();
        doc["STATIC_ROUTE"] = serde_json::json!({"mgmt|0.0.0.0/0": {"nexthop": "192.0.2.1"}});
        doc.to_string()
    };
    let ops = patch_ops(&without_static_routes);
    assert!(
        !ops.iter().any(|(_, path)| path.matches('/').count() == 1),
        "{ops:?}"
    );
    assert!(
        ops.iter()
            .any(|(op, path)| op == "add" && path.starts_with("/STATIC_ROUTE/"))
    );
}

// ---------------------------------------------------------------- values are data

/// A value with a control character would add a line of its own to a configuration
/// (a newline in a port name: `username evil …`); every vendor refuses it, or (NVUE's
/// default-global QoS names no port) never writes it.
#[test]
fn a_control_character_in_any_value_is_refused() {
    let plan = plan_of("inventory/lab.yaml");
    for name in ["spine1", "spine2", "leaf1", "leaf2"] {
        let mut hostile = intent(&plan, name).clone();
        hostile.qos.ports[0].push_str("\nusername evil privilege 15 secret 0 x");
        match switch_config::render(&hostile) {
            Err(e) => {
                let err = e.to_string();
                assert!(
                    err.contains("a control character cannot go into a configuration line")
                        || err.contains("cannot express port"),
                    "{name}: {err}"
                );
                assert!(!err.contains('\n'), "{name}: {err}");
            }
            Ok(text) => assert!(!text.contains("username evil"), "{name}:\n{text}"),
        }
    }
}

/// NVUE commands run through a shell: a foreign next hop a switch prints (inside the
/// plan's scope, so it is to be removed) reaches that shell as one quoted word.
#[test]
fn foreign_words_in_nvue_commands_are_quoted() {
    let plan = plan_of("inventory/lab.yaml");
    let leaf1 = intent(&plan, "leaf1");
    let owned = leaf1.route_scope[0];
    let running = format!(
        "{}nv set vrf default router static {owned} via $(reboot)\n",
        switch_config::render(leaf1).unwrap()
    );
    let diff = switch_config::diff(leaf1, Some(&running)).unwrap();
    assert_eq!(
        diff.commands,
        format!("nv unset vrf default router static {owned} via '$(reboot)'\n")
    );
}

/// The fuzz targets' seeds (fuzz/seeds/running_VENDOR/), read as CI reads them: real
/// configurations parse; ranges past their domain are errors that name the limit;
/// nothing panics. The targets themselves run with `cargo fuzz` (see README).
#[test]
fn the_running_config_fuzz_seeds_parse_or_are_refused() {
    for vendor in ["sonic", "eos", "cumulus", "onyx"] {
        let json =
            std::fs::read_to_string(fixture(&format!("fuzz/intents/{vendor}.json"))).unwrap();
        let intent: SwitchIntent = serde_json::from_str(&json).unwrap();
        let seeds = fixture(&format!("fuzz/seeds/running_{vendor}"));
        let mut count = 0;
        for entry in std::fs::read_dir(&seeds).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let result = switch_config::diff(&intent, Some(&text));
            if name.starts_with("huge-") {
                let Err(err) = result else {
                    panic!("{name}: read without error");
                };
                let err = err.to_string();
                assert!(
                    err.contains("the largest value") || err.contains("at most"),
                    "{name}: {err}"
                );
            } else {
                if let Err(e) = result {
                    panic!("{name}: {e}");
                }
                let same = switch_config::revert(&intent, &text, &text).unwrap();
                assert!(same.changes.is_empty(), "{name}");
            }
            count += 1;
        }
        assert!(count >= 3, "{vendor}: {count} seeds");
    }
}

// ---------------------------------------------------------------- any valid inventory

fn vendor_strategy() -> impl proptest::strategy::Strategy<Value = Vendor> {
    proptest::sample::select(Vendor::ALL.to_vec())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Every fabric that validates — 1 to 4 spines, 1 to 6 racks of 0 to 4 hosts, any
    /// vendor in any role — renders on every switch, diffs against an empty switch and
    /// against its own rendering without a panic, and its own rendering shows no
    /// difference.
    #[test]
    fn any_valid_inventory_renders_and_reads_back(
        spines in proptest::collection::vec(vendor_strategy(), 1..=4),
        leaves in proptest::collection::vec((vendor_strategy(), 0usize..=4), 1..=6),
    ) {
        let shape = mltctl::generate::Shape { spines, leaves, layers: 12, params_per_layer: 5000, buffer_bytes: None };
        let Ok(yaml) = mltctl::generate::fabric_yaml_shaped(&shape) else {
            return Ok(()); // no host at all: not a fabric
        };
        let inv = match inventory::load_str(Path::new("shaped.yaml"), &yaml) {
            Ok(inv) => inv,
            Err(e) => panic!("the generated fabric does not validate: {e}\n{yaml}"),
        };
        let plan = Plan::build(&inv);
        for switch in &plan.switches {
            let intent = &switch.intent;
            let rendered = switch_config::render(intent)
                .unwrap_or_else(|e| panic!("{}: {e}", intent.name));
            switch_config::diff(intent, None).unwrap();
            let same = switch_config::diff(intent, Some(&rendered)).unwrap();
            proptest::prop_assert!(same.changes.is_empty(), "{}: {:?}", intent.name, same.changes);
        }
    }
}

// ---------------------------------------------------------------- as devices print them

/// EOS prints maps the plan does not own beside the ones it does: a DSCP map with a
/// drop precedence is read for its class, maps to DSCP or CoS are left alone.
#[test]
fn eos_map_lines_the_plan_does_not_own_are_read_or_left_alone() {
    let plan = plan_of("inventory/lab.yaml");
    let spine2 = intent(&plan, "spine2");
    let rendered = switch_config::render(spine2).unwrap();
    let running = format!(
        "{rendered}qos map dscp 8 9 to traffic-class 3 drop-precedence 2\n\
         qos map traffic-class 1 to dscp 8\nqos map traffic-class 2 to cos 2\n"
    );
    let diff = switch_config::diff(spine2, Some(&running)).unwrap();
    let items: Vec<&str> = diff.changes.iter().map(|c| c.item.as_str()).collect();
    assert_eq!(items, ["DSCP 8 traffic class", "DSCP 9 traffic class"]);
    assert_eq!(diff.commands, "qos map dscp 8 9 to traffic-class 0\n");
}

/// An interface's own `tx-queue` settings override the profile on that port: on the
/// plan's ports they are drift, reported and cleared; on other ports they are not
/// the plan's.
#[test]
fn eos_interface_queue_settings_on_planned_ports_are_drift() {
    let plan = plan_of("inventory/lab.yaml");
    let spine2 = intent(&plan, "spine2");
    let rendered = switch_config::render(spine2).unwrap();
    let running = format!(
        "{rendered}!\ninterface Ethernet1/1\n   service-profile MLT\n   tx-queue 5\n      no priority\n      \
         random-detect ecn minimum-threshold 10 kbytes maximum-threshold 20 kbytes\n      \
         random-detect drop minimum-threshold 40 kbytes maximum-threshold 40 kbytes drop-probability 100\n!\n\
         interface Ethernet9/1\n   tx-queue 5\n      no priority\n!\n"
    );
    let diff = switch_config::diff(spine2, Some(&running)).unwrap();
    let changes: Vec<String> = diff.changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        changes,
        [
            "~ interface Ethernet1/1 tx-queue 5 priority: round-robin -> strict",
            "~ interface Ethernet1/1 tx-queue 5 ECN: 10240 bytes to 20480 bytes, 100% -> the profile's",
            "~ interface Ethernet1/1 tx-queue 5 WRED drop: 40960 bytes to 40960 bytes, 100% -> the profile's",
        ]
    );
    assert_eq!(
        diff.commands,
        "!\ninterface Ethernet1/1\n   !\n   tx-queue 5\n      priority strict\n      no random-detect ecn\n      no random-detect drop\n"
    );
    // The fix, as the switch would print it back, shows no difference.
    let fixed = format!("{rendered}!\ninterface Ethernet1/1\n   service-profile MLT\n");
    assert!(
        switch_config::diff(spine2, Some(&fixed))
            .unwrap()
            .changes
            .is_empty()
    );
}

/// `PORT_QOS_MAP|global` is SONiC's switch-wide binding, not a port: what it binds is
/// never removed.
#[test]
fn sonic_global_qos_binding_is_never_removed() {
    let plan = plan_of("inventory/lab.yaml");
    let spine1 = intent(&plan, "spine1");
    let mut running: serde_json::Value =
        serde_json::from_str(&switch_config::render(spine1).unwrap()).unwrap();
    running["PORT_QOS_MAP"]["global"] =
        serde_json::json!({"dscp_to_tc_map": "MLT", "tc_to_queue_map": "AZURE"});
    let diff = switch_config::diff(spine1, Some(&running.to_string())).unwrap();
    assert!(diff.changes.is_empty(), "{:?}", diff.changes);
    assert!(!diff.commands.contains("global"), "{}", diff.commands);
}

/// A buffer binding to one of the plan's limit profiles on a queue the plan no longer
/// limits (a port that left the plan) goes whole: an entry without its profile is no
/// binding at all.
#[test]
fn a_stale_sonic_buffer_binding_is_removed_whole() {
    let plan = plan_of("inventory/lab.yaml");
    let spine1 = intent(&plan, "spine1");
    let mut running = sonic_tables(spine1);
    running["BUFFER_QUEUE"]["Ethernet8|3"] = serde_json::json!({"profile": "MLT_Q3_LIMIT"});
    running["BUFFER_QUEUE"]["Ethernet8|0-2"] =
        serde_json::json!({"profile": "egress_lossy_profile"});
    let diff = switch_config::diff(spine1, Some(&running.to_string())).unwrap();
    let changes: Vec<String> = diff.changes.iter().map(ToString::to_string).collect();
    assert_eq!(changes, ["- BUFFER_QUEUE|Ethernet8|3: present"]);
    let ops: serde_json::Value = serde_json::from_str(&diff.commands).unwrap();
    assert_eq!(
        ops,
        serde_json::json!([{"op": "remove", "path": "/BUFFER_QUEUE/Ethernet8|3"}])
    );
}

/// A QUEUE entry for a range of queues (`Ethernet0|0-2`, older QoS templates) that
/// covers one of the plan's queues is split: the plan's queue gets its own entry and
/// the others keep theirs, so no two entries set one queue.
#[test]
fn sonic_queue_ranges_shared_with_the_plan_are_split() {
    let plan = plan_of("inventory/lab.yaml");
    let spine1 = intent(&plan, "spine1");
    let mut running: serde_json::Value =
        serde_json::from_str(&switch_config::render(spine1).unwrap()).unwrap();
    let queues = running["QUEUE"].as_object_mut().unwrap();
    queues.remove("Ethernet0|1");
    queues.remove("Ethernet0|2");
    queues.insert(
        "Ethernet0|0-2".into(),
        serde_json::json!({"scheduler": "[SCHEDULER|scheduler.0]"}),
    );
    let diff = switch_config::diff(spine1, Some(&running.to_string())).unwrap();
    let lines: Vec<String> = diff.changes.iter().map(ToString::to_string).collect();
    assert!(
        lines.contains(
            &"- QUEUE|Ethernet0|0-2: shared with the plan's entries; split, keeping Ethernet0|0"
                .to_string()
        ),
        "{lines:#?}"
    );
    let patch: Vec<serde_json::Value> = serde_json::from_str(&diff.commands).unwrap();
    assert_eq!(
        patch[..3],
        [
            serde_json::json!({"op": "remove", "path": "/QUEUE/Ethernet0|0-2"}),
            serde_json::json!({"op": "add", "path": "/QUEUE/Ethernet0|0",
                "value": {"scheduler": "[SCHEDULER|scheduler.0]"}}),
            serde_json::json!({"op": "add", "path": "/QUEUE/Ethernet0|1",
                "value": {"scheduler": "MLT_STRICT", "wred_profile": "MLT_Q1"}}),
        ]
    );
}

/// An NVUE interface bound to a QoS profile of its own does not use default-global:
/// on the plan's ports such a binding is drift and is unset; other ports, other
/// bindings (PFC) and multi-line quoted values are left alone.
#[test]
fn nvue_profiles_bound_on_the_plans_ports_are_unset() {
    let plan = plan_of("inventory/lab.yaml");
    let leaf1 = intent(&plan, "leaf1");
    let running = format!(
        "{}\nnv set interface swp2,31-32 qos egress-scheduler profile uplinks\n\
         nv set interface swp1-4 qos congestion-control profile storage-red\n\
         nv set interface swp1-2 qos pfc profile lossless\n\
         nv set interface swp5 qos mapping profile other\n\
         nv set interface swp31 qos mapping profile default-global\n\
         nv set system config snippet snmp content 'agentAddress udp:161\n# not a command\n'\n",
        switch_config::render(leaf1).unwrap()
    );
    let diff = switch_config::diff(leaf1, Some(&running)).unwrap();
    assert_eq!(
        diff.commands,
        "nv unset interface swp1 qos congestion-control profile\n\
         nv unset interface swp2 qos egress-scheduler profile\n\
         nv unset interface swp2 qos congestion-control profile\n\
         nv unset interface swp31 qos egress-scheduler profile\n\
         nv unset interface swp32 qos egress-scheduler profile\n"
    );
}

/// `nv config show -o commands` prints a static route's next hop with its type and the
/// route's address family: the plan's routes read back in that form show no
/// difference, and a foreign route in the plan's scope in that form is seen.
#[test]
fn nvue_routes_as_nv_config_show_prints_them() {
    let plan = plan_of("inventory/lab.yaml");
    let leaf1 = intent(&plan, "leaf1");
    let printed: String = switch_config::render(leaf1)
        .unwrap()
        .lines()
        .flat_map(
            |line| match line.strip_prefix("nv set vrf default router static ") {
                Some(route) => {
                    let (prefix, via) = route.split_once(" via ").unwrap();
                    let kind = if via == "blackhole" {
                        "blackhole"
                    } else {
                        "ipv4-address"
                    };
                    vec![
                        format!(
                            "nv set vrf default router static {prefix} address-family ipv4-unicast"
                        ),
                        format!("nv set vrf default router static {prefix} via {via} type {kind}"),
                    ]
                }
                None => vec![line.to_string()],
            },
        )
        .map(|l| l + "\n")
        .collect();
    assert!(printed.contains("type ipv4-address"));
    let diff = switch_config::diff(leaf1, Some(&printed)).unwrap();
    assert!(diff.changes.is_empty(), "{:?}", diff.changes);
    let foreign = format!(
        "{printed}nv set vrf default router static 10.200.99.0/24 via 172.16.0.9 type ipv4-address\n"
    );
    let diff = switch_config::diff(leaf1, Some(&foreign)).unwrap();
    assert_eq!(
        diff.commands,
        "nv unset vrf default router static 10.200.99.0/24 via 172.16.0.9\n"
    );
}

// ---------------------------------------------------------------- a corpus of real forms

/// What a change to `intent`'s switch may touch, stated independently of the vendor
/// modules: the plan's maps, queues, profile and ports, and routes inside its scope.
struct Owned<'a> {
    intent: &'a SwitchIntent,
}

impl Owned<'_> {
    fn route(&self, prefix: &str) -> bool {
        prefix
            .parse::<ipnet::Ipv4Net>()
            .is_ok_and(|p| self.intent.owns_route(&p))
    }

    fn port(&self, port: &str) -> bool {
        self.intent.qos.ports.iter().any(|p| p == port)
    }

    fn queue(&self, queue: &str) -> bool {
        self.intent
            .qos
            .queues
            .iter()
            .any(|q| q.queue.to_string() == queue)
    }

    /// A queue the plan gives a limit L_i (SONiC: a BUFFER_QUEUE entry of the plan's).
    fn limited_queue(&self, queue: &str) -> bool {
        self.intent
            .qos
            .queues
            .iter()
            .any(|q| q.queue.to_string() == queue && q.ecn.is_some_and(|e| e.limit_bytes.is_some()))
    }

    /// Every class number in an NVUE/Onyx list (`1-3,5`) is one of the plan's queues.
    fn queues(&self, list: &str) -> bool {
        list.split(',').all(|part| {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            match (a.parse::<u8>(), b.parse::<u8>()) {
                (Ok(a), Ok(b)) => (a..=b).all(|q| self.queue(&q.to_string())),
                _ => false,
            }
        })
    }

    /// The lines of `commands` that touch something not the plan's.
    fn foreign(&self, vendor: Vendor, commands: &str, running: &str) -> Vec<String> {
        match vendor {
            Vendor::Sonic => self.foreign_sonic(commands, running),
            Vendor::Eos => self.foreign_eos(commands, running),
            Vendor::Cumulus => commands
                .lines()
                .filter(|l| !self.nvue_line(l))
                .map(String::from)
                .collect(),
            Vendor::Onyx => commands
                .lines()
                .filter(|l| !self.onyx_line(l))
                .map(String::from)
                .collect(),
        }
    }

    /// SONiC: the patch is applied to the running tables, and what each entry sets
    /// for each port and queue (an entry may name several) compared before and after.
    fn foreign_sonic(&self, patch: &str, running: &str) -> Vec<String> {
        let before: serde_json::Value = serde_json::from_str(running).unwrap();
        let mut after = before.clone();
        let ops: Vec<serde_json::Value> = serde_json::from_str(patch).unwrap();
        let mut foreign = Vec::new();
        for op in &ops {
            let (kind, path) = (op["op"].as_str().unwrap(), op["path"].as_str().unwrap());
            // A table is only ever created where it is missing.
            if path.matches('/').count() == 1 && !(kind == "add" && before.pointer(path).is_none())
            {
                foreign.push(format!("{kind} {path}"));
            }
            json_patch_apply(&mut after, op);
        }
        let (was, now) = (self.sonic_effective(&before), self.sonic_effective(&after));
        for (entry, fields) in &was {
            let after_fields = now.get(entry).cloned().unwrap_or_default();
            // A field may only lose a reference to one of the plan's objects.
            let kept: Vec<_> = fields
                .iter()
                .map(|f| {
                    f.iter()
                        .filter(|(_, v)| !v.contains("MLT"))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect::<BTreeMap<_, _>>()
                })
                .collect();
            let trimmed: Vec<_> = after_fields
                .iter()
                .map(|f| {
                    f.iter()
                        .filter(|(_, v)| !v.contains("MLT"))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect::<BTreeMap<_, _>>()
                })
                .collect();
            if !self.sonic_owned(entry) && kept != trimmed {
                foreign.push(format!("{entry}: {fields:?} -> {after_fields:?}"));
            }
        }
        for (entry, sets) in now.iter().filter(|(e, _)| !was.contains_key(*e)) {
            // A plan's port may get a binding entry holding the plan's maps alone.
            let binding = entry
                .strip_prefix("PORT_QOS_MAP|")
                .is_some_and(|port| self.port(port) && sets.iter().all(BTreeMap::is_empty));
            if !self.sonic_owned(entry) && !binding {
                foreign.push(format!("{entry} created"));
            }
        }
        foreign
    }

    /// Entries by what they set: `QUEUE|port|queue` and `PORT_QOS_MAP|port` one by one
    /// (whatever key names them), the plan's fields of the plan's ports left out.
    fn sonic_effective(
        &self,
        db: &serde_json::Value,
    ) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
        let mut out: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
        for (table, objects) in db.as_object().unwrap() {
            let Some(objects) = objects.as_object() else {
                continue;
            };
            for (key, fields) in objects {
                let Some(fields) = fields.as_object() else {
                    continue;
                };
                let members: Vec<String> = match table.as_str() {
                    "QUEUE" | "BUFFER_QUEUE" => {
                        let (ports, queues) = key.rsplit_once('|').unwrap();
                        let queues: Vec<u32> = queues
                            .split(',')
                            .flat_map(|part| {
                                let (a, b) = part.split_once('-').unwrap_or((part, part));
                                a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()
                            })
                            .collect();
                        ports
                            .split(',')
                            .flat_map(|p| queues.iter().map(move |q| format!("{p}|{q}")))
                            .collect()
                    }
                    "PORT_QOS_MAP" if *key != "global" => {
                        key.split(',').map(String::from).collect()
                    }
                    _ => vec![key.clone()],
                };
                for member in members {
                    let entry = format!("{table}|{member}");
                    let fields: BTreeMap<String, String> = fields
                        .iter()
                        .filter(|(f, _)| {
                            !(table == "PORT_QOS_MAP"
                                && self.port(&member)
                                && ["dscp_to_tc_map", "tc_to_queue_map"].contains(&f.as_str()))
                        })
                        .map(|(f, v)| (f.clone(), v.to_string()))
                        .collect();
                    out.entry(entry).or_default().push(fields);
                }
            }
        }
        for sets in out.values_mut() {
            sets.sort();
        }
        out
    }

    fn sonic_owned(&self, entry: &str) -> bool {
        let parts: Vec<&str> = entry.split('|').collect();
        match parts.as_slice() {
            ["DSCP_TO_TC_MAP" | "TC_TO_QUEUE_MAP", "MLT"] => true,
            ["SCHEDULER" | "WRED_PROFILE" | "BUFFER_PROFILE", name] => name.starts_with("MLT_"),
            ["QUEUE", port, queue] => self.port(port) && self.queue(queue),
            ["BUFFER_QUEUE", port, queue] => self.port(port) && self.limited_queue(queue),
            ["STATIC_ROUTE", prefix] | ["STATIC_ROUTE", "default", prefix] => self.route(prefix),
            _ => false,
        }
    }

    fn foreign_eos(&self, commands: &str, running: &str) -> Vec<String> {
        let mut foreign = Vec::new();
        // The mode a line is in: the profile, an interface (its name), a tx-queue in it.
        let mut mode: Option<String> = None;
        let mut queue_of_interface = false;
        for line in commands.lines() {
            let indent = line.len() - line.trim_start().len();
            let words: Vec<&str> = line.split_whitespace().collect();
            let ok = match (indent, words.as_slice()) {
                (_, ["!"]) => true,
                (0, ["qos", "map", "dscp", .., "to", "traffic-class", _]) => true,
                (0, ["qos", "map", "traffic-class", .., "to", "tx-queue", _]) => true,
                (0, ["qos", "profile", "MLT"]) => {
                    mode = Some("profile".into());
                    true
                }
                (0, ["interface", port]) => {
                    mode = Some(port.to_string());
                    // Ours, or a foreign port that carries our profile (to lose it).
                    self.port(port)
                        || running.contains(&format!("interface {port}\n"))
                            && running
                                .split(&format!("interface {port}\n"))
                                .nth(1)
                                .is_some_and(|rest| {
                                    rest.split("\n!")
                                        .next()
                                        .unwrap_or("")
                                        .contains("service-profile MLT")
                                })
                }
                (0, ["ip" | "no", ..]) => {
                    let route = words.iter().skip_while(|w| **w != "route").nth(1);
                    route.is_some_and(|p| self.route(p))
                }
                (3, ["service-profile" | "no", ..]) if mode.as_deref() != Some("profile") => {
                    words.last() == Some(&"MLT")
                }
                (3, ["tx-queue", q]) => {
                    queue_of_interface = mode.as_deref() != Some("profile");
                    self.queue(q)
                        && mode
                            .as_deref()
                            .is_some_and(|m| m == "profile" || self.port(m))
                }
                (3, ["qos", "trust", _]) => mode.as_deref() == Some("profile"),
                (6, _) => {
                    mode.is_some() && (queue_of_interface || mode.as_deref() == Some("profile"))
                }
                _ => false,
            };
            if !ok {
                foreign.push(line.to_string());
            }
        }
        foreign
    }

    fn nvue_line(&self, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [
                "nv",
                "set" | "unset",
                "qos",
                "mapping",
                "default-global",
                "trust" | "dscp",
                ..,
            ] => true,
            [
                "nv",
                "set" | "unset",
                "qos",
                "egress-queue-mapping",
                "default-global",
                ..,
            ] => true,
            [
                "nv",
                "set" | "unset",
                "qos",
                "egress-scheduler" | "congestion-control",
                "default-global",
                "traffic-class",
                classes,
                ..,
            ] => self.queues(classes),
            [
                "nv",
                "set" | "unset",
                "vrf",
                "default",
                "router",
                "static",
                prefix,
                ..,
            ] => self.route(prefix),
            // A plan's port loses a profile of its own that replaces default-global.
            [
                "nv",
                "unset",
                "interface",
                port,
                "qos",
                "mapping" | "egress-queue-mapping" | "egress-scheduler" | "congestion-control",
                "profile",
            ] => self.port(port),
            _ => false,
        }
    }

    fn onyx_line(&self, line: &str) -> bool {
        let words: Vec<&str> = line.split_whitespace().collect();
        let queue_ok = |rest: &[&str]| match rest {
            ["qos", "trust", _] | ["qos", "map", "dscp", ..] => true,
            ["traffic-class", _, "bind", ..] => true,
            ["traffic-class", q, ..] | ["no", "traffic-class", q, ..] => self.queue(q),
            _ => false,
        };
        match words.as_slice() {
            ["interface", "ethernet", spec, rest @ ..] => {
                let (first, last) = spec.split_once('-').unwrap_or((spec, spec));
                let (slot, a) = first.rsplit_once('/').unwrap();
                let (_, b) = last.rsplit_once('/').unwrap();
                let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
                (a..=b).all(|n| self.port(&format!("Eth{slot}/{n}"))) && queue_ok(rest)
            }
            ["ip" | "no", ..] => {
                let after: Vec<&&str> = words
                    .iter()
                    .skip_while(|w| **w != "route")
                    .skip(1)
                    .collect();
                let after: Vec<&str> = after
                    .iter()
                    .map(|w| **w)
                    .skip_while(|w| *w == "vrf" || *w == "default")
                    .collect();
                match after.as_slice() {
                    [net, len, ..] if len.starts_with('/') => self.route(&format!("{net}{len}")),
                    [cidr, ..] => self.route(cidr),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// Applies one RFC 6902 operation (`add`, `replace`, `remove`) to `doc`.
fn json_patch_apply(doc: &mut serde_json::Value, op: &serde_json::Value) {
    let path = op["path"].as_str().unwrap();
    let (parent, last) = path.rsplit_once('/').unwrap();
    let last = last.replace("~1", "/").replace("~0", "~");
    let parent = doc
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no parent for {path}"));
    let parent = parent.as_object_mut().unwrap();
    match op["op"].as_str().unwrap() {
        "add" | "replace" => {
            parent.insert(last, op["value"].clone());
        }
        "remove" => {
            assert!(
                parent.remove(&last).is_some(),
                "nothing to remove at {path}"
            );
        }
        other => panic!("unexpected op {other}"),
    }
}

/// Running configurations written after public examples of each vendor's own print
/// form (tests/running/real/, sources in each SOURCES.md): each parses; the change the
/// plan proposes touches only what the plan owns (checked by rules written apart from
/// the vendor modules); SONiC's patch, applied, leaves nothing to change.
#[test]
fn the_real_corpus_is_read_and_nothing_foreign_is_touched() {
    let plan = plan_of("inventory/lab.yaml");
    let mut read = 0;
    for (vendor, switch) in [
        (Vendor::Sonic, "spine1"),
        (Vendor::Eos, "spine2"),
        (Vendor::Cumulus, "leaf1"),
        (Vendor::Onyx, "leaf2"),
    ] {
        let intent = intent(&plan, switch);
        let dir = fixture(&format!("tests/running/real/{vendor}"));
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e == switch_config::extension(vendor))
            })
            .collect();
        files.sort();
        assert!(files.len() >= 4, "{vendor}: {} samples", files.len());
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().to_string();
            let running = std::fs::read_to_string(&file).unwrap();
            let diff = switch_config::diff(intent, Some(&running))
                .unwrap_or_else(|e| panic!("{vendor} {name}: {e}"));
            let foreign = Owned { intent }.foreign(vendor, &diff.commands, &running);
            assert!(
                foreign.is_empty(),
                "{vendor} {name} touches what is not the plan's: {foreign:#?}"
            );
            // SONiC's patch applies here as the switch would apply it: the result is
            // what the plan wants.
            if vendor == Vendor::Sonic {
                let mut db: serde_json::Value = serde_json::from_str(&running).unwrap();
                let ops: Vec<serde_json::Value> = serde_json::from_str(&diff.commands).unwrap();
                for op in &ops {
                    json_patch_apply(&mut db, op);
                }
                let again = switch_config::diff(intent, Some(&db.to_string())).unwrap();
                assert!(again.changes.is_empty(), "{name}: {:#?}", again.changes);
                // No entry competes with the plan's for one of its ports or queues.
                let owned = Owned { intent };
                for (entry, sets) in owned.sonic_effective(&db) {
                    let planned = match entry.split('|').collect::<Vec<_>>().as_slice() {
                        ["QUEUE", port, queue] => owned.port(port) && owned.queue(queue),
                        ["BUFFER_QUEUE", port, queue] => {
                            owned.port(port) && owned.limited_queue(queue)
                        }
                        ["PORT_QOS_MAP", port] => owned.port(port),
                        _ => false,
                    };
                    assert!(
                        !planned || sets.len() == 1,
                        "{name}: {entry} set by {sets:?}"
                    );
                }
            }
            read += 1;
        }
    }
    assert!(read >= 16, "{read}");
}

/// The journal keeps only the owned part of a switch; putting it back must be exact, for
/// a switch before the plan (vendor defaults and foreign QoS), as planned, and with stale
/// items inside the plan's scope — and none of the switch's secrets may be in it.
#[test]
fn the_owned_part_reads_back_as_the_same_configuration_and_holds_no_secret() {
    for case in CASES {
        let plan = plan_of("inventory/lab.yaml");
        let intent = intent(&plan, case.switch);
        let base =
            std::fs::read_to_string(fixture(&format!("tests/running/lab-base/{}", case.file)))
                .unwrap();
        let (_, planned) = realistic(case.switch, case.file);
        let (after, insert, _, _) = case.stale;
        let stale = edited(&planned, after, &format!("{after}{insert}"));
        for running in [&base, &planned, &stale] {
            let owned = switch_config::owned(intent, running).unwrap();
            let back = switch_config::revert(intent, &owned, running).unwrap();
            assert_eq!(back.changes, [], "{}: {owned}", case.switch);
            for marker in [
                "secret sha512",
                "password 7",
                "hashed-password",
                "community",
            ] {
                assert!(!owned.contains(marker), "{}: {owned}", case.switch);
            }
        }
        let from_base = switch_config::owned(intent, &base).unwrap();
        let to_base = switch_config::revert(intent, &from_base, &planned).unwrap();
        assert!(!to_base.changes.is_empty(), "{}", case.switch);
        assert!(!to_base.commands.is_empty(), "{}", case.switch);
    }
}

/// `diff` folds equal changes into number lists in numeric order; `--verbose` lists
/// each; both say the same number of changes.
#[test]
fn diff_folds_equal_changes_and_verbose_lists_each() {
    let running = fixture("tests/running/lab-base");
    let args = [
        "diff",
        "-i",
        "inventory/lab.yaml",
        "--running",
        running.to_str().unwrap(),
    ];
    let folded = text(&mltctl(&args).stdout);
    assert!(
        folded.contains("  ~ DSCP 8-15 traffic class: 1 -> 0\n"),
        "{folded}"
    );
    assert!(
        folded.contains("  + WRED_PROFILE|MLT_Q1-6: present\n"),
        "{folded}"
    );
    assert!(
        folded.contains("  + DSCP_TO_TC_MAP|MLT 0-31,38-45,47-63: 0\n"),
        "{folded}"
    );
    assert!(!folded.contains("  ~ DSCP 9 traffic class"), "{folded}");
    let mut verbose_args = args.to_vec();
    verbose_args.push("--verbose");
    let verbose = text(&mltctl(&verbose_args).stdout);
    assert!(
        verbose.contains("  ~ DSCP 9 traffic class: 1 -> 0\n"),
        "{verbose}"
    );
    assert!(verbose.lines().count() > folded.lines().count() + 100);
    let last = |t: &str| t.lines().last().unwrap_or_default().to_string();
    assert_eq!(last(&folded), last(&verbose));
}
