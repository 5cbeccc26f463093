//! Every invalid inventory under tests/inventories/invalid is rejected with exactly the
//! expected `file:line:col: message` lines, exit code 3 and nothing on standard output.

mod common;

use common::{mltctl, root, text};

/// Runs `validate` and `plan --json` on one invalid inventory and checks the report.
fn rejects(name: &str, expected: &[&str]) {
    let path = format!("tests/inventories/invalid/{name}.yaml");
    let mut want: Vec<String> = expected
        .iter()
        .map(|line| format!("{path}:{line}"))
        .collect();
    want.push(format!(
        "mltctl: the inventory has {} problem(s); nothing was changed",
        expected.len()
    ));
    for command in [
        &["validate", "-i", &path][..],
        &["plan", "-i", &path, "--json"],
    ] {
        let out = mltctl(command);
        assert_eq!(
            out.status.code(),
            Some(3),
            "{command:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            text(&out.stderr).lines().collect::<Vec<_>>(),
            want,
            "{command:?}"
        );
        assert!(out.stdout.is_empty(), "{command:?} wrote to stdout");
    }
}

macro_rules! invalid_inventories {
    ($($test:ident: $file:literal => [$($line:literal),+ $(,)?];)+) => {
        $(
            #[test]
            fn $test() {
                rejects($file, &[$($line),+]);
            }
        )+

        /// Files that have a test above.
        const COVERED: &[&str] = &[$($file),+];
    };
}

invalid_inventories! {
    over_committed_buffer: "over-committed" => [
        "43:19: switch(es) leaf2: the thresholds need 121856 B but the buffer holds 32768 B: every gradient queue must hold one burst of the job (24000 B: 1 sender(s) at 100000 Mbit/s, the extra ones for T_high = 125 µs) and the lowest must mark no earlier than C·RTT/7 (35715 B); give more buffer or fewer priorities",
        "43:19: switch(es) leaf2, queue 6 (gradient class 0): predicted loss of ECT frames 4.36e-2 under the transport's bursts is over its tolerance 8.33e-3; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "43:19: switch(es) leaf2, queue 5 (gradient class 1): predicted loss of ECT frames 2.33e-1 under the transport's bursts is over its tolerance 3.26e-3; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "43:19: switch(es) leaf2, queue 4 (gradient class 2): predicted loss of ECT frames 4.54e-1 under the transport's bursts is over its tolerance 1.28e-3; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "43:19: switch(es) leaf2, queue 3 (gradient class 3): predicted loss of Not-ECT frames 3.09e-2 under the transport's bursts is over its tolerance 2.50e-2; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "43:19: switch(es) leaf2, queue 3 (gradient class 3): predicted loss of ECT frames 5.06e-1 under the transport's bursts is over its tolerance 5.00e-4; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "23:19: switch(es) spine1, leaf1: the thresholds need 121856 B but the buffer holds 32768 B: every gradient queue must hold one burst of the job (24000 B: 1 sender(s) at 100000 Mbit/s, the extra ones for T_high = 125 µs) and the lowest must mark no earlier than C·RTT/7 (35715 B); give more buffer or fewer priorities",
        "23:19: switch(es) spine1, leaf1, queue 5 (gradient class 1): predicted loss of ECT frames 3.57e-3 under the transport's bursts is over its tolerance 3.26e-3; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "23:19: switch(es) spine1, leaf1, queue 4 (gradient class 2): predicted loss of Not-ECT frames 2.67e-1 under the transport's bursts is over its tolerance 6.39e-2; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "23:19: switch(es) spine1, leaf1, queue 4 (gradient class 2): predicted loss of ECT frames 3.04e-2 under the transport's bursts is over its tolerance 1.28e-3; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "23:19: switch(es) spine1, leaf1, queue 3 (gradient class 3): predicted loss of Not-ECT frames 2.62e-1 under the transport's bursts is over its tolerance 2.50e-2; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
        "23:19: switch(es) spine1, leaf1, queue 3 (gradient class 3): predicted loss of ECT frames 7.42e-2 under the transport's bursts is over its tolerance 5.00e-4; give more buffer, or set training.model.accept_over_tolerance: true to plan anyway",
    ];
    duplicate_name: "duplicate-name" => [
        "54:11: name `h1` is already used (line 49)",
        "64:6: link end `h2:eth1`: no switch or host is named `h2`",
    ];
    duplicate_ip: "duplicate-ip" => [
        "57:74: IP address 10.1.2.1 is already used by the gateway of rack r2 (line 15)",
    ];
    duplicate_mac: "duplicate-mac" => [
        "57:49: MAC address 02:00:00:00:01:0b is already used by host h1 (line 52)",
    ];
    default_address: "default-address" => [
        "7:19: `defaults.mgmt.address` would give every device one address; give each switch and host its own",
    ];
    duplicate_key: "duplicate-key" => [
        "51:5: duplicate key `rack` (first at line 50)",
    ];
    link_to_undefined_port: "undefined-port" => [
        "64:15: link end `leaf2:swp7`: switch leaf2 has no port `swp7` (its ports: swp1, swp49)",
    ];
    link_to_undefined_node: "undefined-node" => [
        "62:19: link end `spine9:Ethernet4`: no switch or host is named `spine9`",
    ];
    host_without_link_is_unreachable: "host-not-linked" => [
        "54:11: host h2 has no link to leaf leaf2 of rack r2, so it cannot reach any other host",
    ];
    racks_without_a_shared_spine_are_unreachable: "racks-share-no-spine" => [
        "13:11: racks r1 and r2 share no spine, so their hosts cannot reach each other (r1 uses spine1; r2 uses spine2)",
    ];
    more_classes_than_queues: "more-classes-than-queues" => [
        "69:15: training.priorities is 8 but switch leaf2 has only 4 queues",
    ];
    threshold_over_the_buffer: "threshold-over-buffer" => [
        "70:50: limit_bytes 2048000 is larger than the 1048576-byte buffer of switch spine1",
    ];
    unknown_dpdk_driver: "unknown-dpdk-driver" => [
        "69:34: unknown DPDK driver `ixgbe` (expected vfio-pci, mlx5, af_packet or af_xdp)",
    ];
    misspelled_key_with_another_problem: "misspelled-key" => [
        "41:13: unknown vendor `junos` (expected one of: sonic, eos, cumulus, onyx)",
        "70:3: unknown field `training.colective`: did you mean `collective`? (expected one of: job_id, layers, loss_bound, collective, priorities, dscp, importance, rate_control, timeouts, ports, datapath, model, thresholds, launcher)",
    ];
    unknown_vendor: "unknown-vendor" => [
        "40:13: unknown vendor `junos` (expected one of: sonic, eos, cumulus, onyx)",
    ];
    malformed_mac: "malformed-mac" => [
        "52:49: `02:00:00:00:01` is not a MAC address (six hex pairs such as 02:00:0a:01:01:0b)",
    ];
    malformed_ip: "malformed-ip" => [
        "57:74: `10.1.2.311` is not an IPv4 address",
    ];
    malformed_pci: "malformed-pci" => [
        "52:28: `0000:01:00` is not a PCI address (domain:bus:device.function such as 0000:3b:00.0)",
    ];
    missing_required_field: "missing-field" => [
        "18:5: switch spine1: missing required field `queues`",
    ];
    wrong_type: "wrong-type" => [
        "33:13: switch leaf1: `queues` must be a whole number",
    ];
    password_is_refused: "password" => [
        "7:23: `defaults.mgmt.password`: passwords and other secrets are not accepted in an inventory; reference a key instead (key: {file: PATH}, key: {agent: true} or key: {env: VAR})",
    ];
    threshold_not_in_whole_kib: "threshold-not-whole-kib" => [
        "70:30: mark_bytes 3000 is not a whole number of KiB (1024 bytes), which every vendor can configure exactly",
    ];
    path_pool_too_small: "path-pool-too-small" => [
        "4:14: path pool 10.200.0.0/31 holds 2 addresses but 1 spine(s) x 2 rack(s) of up to 1 host(s) need 4; use a /30 or larger",
    ];
    host_outside_its_rack_subnet: "host-outside-rack-subnet" => [
        "52:74: 10.9.1.11 is not a host address of rack r1's subnet 10.1.1.0/24",
    ];
    every_problem_is_reported_at_once: "many-problems" => [
        "40:13: unknown vendor `junos` (expected one of: sonic, eos, cumulus, onyx)",
        "57:49: MAC address 02:00:00:00:01:0b is already used by host h1 (line 52)",
        "63:15: link end `leaf1:Ethernet2`: switch leaf1 has no port `Ethernet2` (its ports: Ethernet1, Ethernet49)",
        "68:15: `training.loss_bound` must be at least 0 and below 1",
    ];
}

#[test]
fn every_invalid_inventory_has_a_test() {
    let dir = root().join("tests/inventories/invalid");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("the invalid inventories exist")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            p.file_stem()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    files.sort();
    let mut covered: Vec<String> = COVERED.iter().map(|s| s.to_string()).collect();
    covered.sort();
    assert_eq!(files, covered);
}

#[test]
fn the_base_of_the_invalid_inventories_is_valid() {
    let out = mltctl(&["validate", "-i", "tests/inventories/valid/small.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
