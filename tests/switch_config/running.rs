//! Diffs against realistic running configurations, read as devices print them.

use super::*;
use crate::rendering::sonic_tables;

/// Saved running configurations of the lab switches, as each OS prints them: defaults
/// left out, ranges and lists, other units and spellings, and plenty the plan does not
/// own (interfaces, BGP, users, other QoS profiles, management routes).
pub(crate) fn realistic(switch: &str, file: &str) -> (SwitchIntent, String) {
    let plan = lab_plan();
    let running = std::fs::read_to_string(fixture(&format!("tests/running/lab/{file}"))).unwrap();
    (intent(&plan, switch).clone(), running)
}

/// One vendor's realistic config and edits of it.
pub(crate) struct Case {
    pub(crate) switch: &'static str,
    pub(crate) file: &'static str,
    /// One threshold edited: (from, to), the change reported, the fix.
    pub(crate) threshold: (&'static str, &'static str, &'static str, &'static str),
    /// Edits of things the plan does not own.
    pub(crate) unrelated: &'static [(&'static str, &'static str)],
    /// A line or entry the plan does not want, inside its scope: (after, insert), the
    /// change reported, the fix.
    pub(crate) stale: (&'static str, &'static str, &'static str, &'static str),
}

pub(crate) const CASES: &[Case] = &[
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

pub(crate) fn edited(text: &str, from: &str, to: &str) -> String {
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

/// What apply keeps when it reports only counts is what the full diff says.
#[test]
fn counted_diffs_and_reverts_agree_with_the_full_ones() {
    for case in CASES {
        let (intent, running) = realistic(case.switch, case.file);
        let (from, to, _, _) = case.threshold;
        let (after, insert, _, _) = case.stale;
        let variants = [
            String::new(),
            running.clone(),
            edited(&running, from, to),
            edited(&running, after, &format!("{after}{insert}")),
        ];
        for current in &variants {
            let full = switch_config::diff(&intent, Some(current)).unwrap();
            let counted = switch_config::diff_counted(&intent, Some(current)).unwrap();
            assert_eq!(counted.changes, full.changes.len(), "{}", case.switch);
            assert_eq!(counted.commands, full.commands, "{}", case.switch);
            let full = switch_config::revert(&intent, &variants[2], current).unwrap();
            let counted = switch_config::revert_counted(&intent, &variants[2], current).unwrap();
            assert_eq!(counted.changes, full.changes.len(), "{}", case.switch);
            assert_eq!(counted.commands, full.commands, "{}", case.switch);
        }
        // Not vacuous: an empty switch differs from the saved configuration.
        let empty = switch_config::revert_counted(&intent, &variants[2], "").unwrap();
        assert!(
            empty.changes > 0 && !empty.commands.is_empty(),
            "{}",
            case.switch
        );
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

/// EOS prints maps the plan does not own beside the ones it does: a DSCP map with a
/// drop precedence is read for its class, maps to DSCP or CoS are left alone.
#[test]
fn eos_map_lines_the_plan_does_not_own_are_read_or_left_alone() {
    let plan = lab_plan();
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
    let plan = lab_plan();
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
    let plan = lab_plan();
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
    let plan = lab_plan();
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

/// `intent`'s rendered configuration with Ethernet0's queues 0-2 set by one entry,
/// `fields` (older QoS templates write ranges).
fn with_queue_range(intent: &SwitchIntent, fields: serde_json::Value) -> serde_json::Value {
    let mut running: serde_json::Value =
        serde_json::from_str(&switch_config::render(intent).unwrap()).unwrap();
    let queues = running["QUEUE"].as_object_mut().unwrap();
    for queue in ["Ethernet0|1", "Ethernet0|2"] {
        queues.remove(queue);
    }
    queues.insert("Ethernet0|0-2".into(), fields);
    running
}

/// A QUEUE entry for a range of queues (`Ethernet0|0-2`, older QoS templates) that
/// covers one of the plan's queues is split: the plan's queue gets its own entry and
/// the others keep theirs, so no two entries set one queue.
#[test]
fn sonic_queue_ranges_shared_with_the_plan_are_split() {
    let plan = lab_plan();
    let spine1 = intent(&plan, "spine1");
    let running = with_queue_range(
        spine1,
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

/// What the journal keeps of a SONiC switch holds a shared entry as the switch has it;
/// a control character anywhere in it, nested values too, is refused.
#[test]
fn a_control_character_nested_in_a_shared_sonic_entry_is_refused() {
    let plan = lab_plan();
    let spine1 = intent(&plan, "spine1");
    let mut shared = serde_json::json!({"scheduler": "[SCHEDULER|scheduler.0]"});
    let running = with_queue_range(spine1, shared.clone());
    let owned = switch_config::owned(spine1, &running.to_string()).unwrap();
    assert!(owned.contains("Ethernet0|0-2"), "{owned}");
    shared["note"] = serde_json::json!(["fine", "evil\nline"]);
    let running = with_queue_range(spine1, shared);
    let err = switch_config::owned(spine1, &running.to_string()).unwrap_err();
    assert!(
        err.to_string()
            .contains("a control character cannot go into a configuration line"),
        "{err}"
    );
}

/// An NVUE interface bound to a QoS profile of its own does not use default-global:
/// on the plan's ports such a binding is drift and is unset; other ports, other
/// bindings (PFC) and multi-line quoted values are left alone.
#[test]
fn nvue_profiles_bound_on_the_plans_ports_are_unset() {
    let plan = lab_plan();
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
    let plan = lab_plan();
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
