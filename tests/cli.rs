//! The command line as admins and launchers use it: outputs, JSON and exit codes.

mod common;

use common::{fixture, mltctl, text};
use endhost_core::config::TransportConfig;
use mltctl::plan::Plan;

const LAB: &str = "inventory/lab.yaml";

#[test]
fn validate_accepts_the_lab() {
    let out = mltctl(&["validate", "-i", LAB]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "inventory/lab.yaml: valid (4 switches, 4 hosts in 2 racks, 16 layers)\n"
    );
}

/// Thresholds a switch cannot hold make the inventory invalid for validate and for
/// every command that plans: exit 3, the switch and queue named.
#[test]
fn an_over_committed_buffer_fails_validate_and_plan() {
    let inventory = "tests/inventories/invalid/over-committed.yaml";
    for command in ["validate", "plan", "render"] {
        let mut args = vec![command, "-i", inventory];
        if command == "render" {
            args.extend(["--out", "/nonexistent/never-written"]);
        }
        let out = mltctl(&args);
        assert_eq!(
            out.status.code(),
            Some(3),
            "{command}: {}",
            text(&out.stderr)
        );
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("over-committed.yaml:23:19: switch(es) "),
            "{stderr}"
        );
        assert!(stderr.contains("but the buffer holds 32768 B"), "{stderr}");
        assert!(
            stderr.contains(", queue 6 (gradient class 0): predicted loss"),
            "{stderr}"
        );
        assert!(stderr.contains("nothing was changed"), "{stderr}");
    }
}

#[test]
fn validate_json_lists_problems_for_machines() {
    let out = mltctl(&[
        "validate",
        "-i",
        "tests/inventories/invalid/duplicate-mac.yaml",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    let problem = &report["problems"][0];
    assert_eq!(problem["line"], 57);
    assert_eq!(problem["column"], 49);
    assert_eq!(
        problem["message"],
        "MAC address 02:00:00:00:01:0b is already used by host h1 (line 52)"
    );

    let out = mltctl(&["validate", "-i", LAB, "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report, serde_json::json!({"valid": true, "problems": []}));
}

#[test]
fn plan_json_is_the_plan() {
    let out = mltctl(&["plan", "-i", LAB, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan: Plan = serde_json::from_slice(&out.stdout).expect("plan JSON parses");
    assert_eq!(plan.fabric, "lab");
    assert_eq!(plan.hosts.len(), 4);
    assert_eq!(plan.switches.len(), 4);
    assert_eq!(plan.job.job_id, 7);
}

#[test]
fn plan_explain_shows_every_queue_with_dscp_layers_thresholds_and_losses() {
    let out = mltctl(&["plan", "-i", LAB, "--explain"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let explained = text(&out.stdout);
    let plan: Plan =
        serde_json::from_slice(&mltctl(&["plan", "-i", LAB, "--json"]).stdout).unwrap();
    // One row per gradient queue: queue, class, DSCP, layers, then its share of traffic.
    let rows: Vec<Vec<&str>> = explained
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    for class in &plan.qos.classes {
        let t = &class.tag;
        let (queue, id, dscp) = (t.queue.to_string(), t.class.to_string(), t.dscp.to_string());
        let layers = format!("{}-{}", t.first_layer, t.last_layer);
        let want = [queue.as_str(), "gradient", "class", &id, &dscp, &layers];
        assert!(
            rows.iter().any(|r| r.len() == 8 && r[..6] == want),
            "no row {want:?} in:\n{explained}"
        );
    }
    assert!(explained.contains("    7  control              46"));
    assert!(explained.contains("0-2 conv1_1..conv2_1"));
    assert!(
        explained.contains("RED/ECN thresholds for a 16.0 MiB buffer at 100 Gbit/s (leaf1, leaf2)")
    );
    // Every limit holds one burst (16 frames of 1,500 B), and each queue says what set it.
    assert!(explained.contains("every L_i holds one burst, 23.4 KiB"));
    assert!(explained.contains("set by (S; L)"));
    // The lab's ring of four at p = 0.01: each of its six messages may lose a sixth.
    assert!(explained.contains("Loss the transport leaves unrecovered: 1.67e-3 of a message"));
    assert!(explained.contains("Chosen within the loss the transport leaves unrecovered"));
    assert!(explained.contains("the transport's loss bound;"));
    // The front queue carries 0.08% of the traffic: one frame of step meets the bound and
    // the tolerance alike, so the bound did not set it.
    let front = explained
        .lines()
        .find(|l| l.starts_with("    6  2.0 KiB (1) "))
        .unwrap_or_else(|| panic!("no one-frame step for queue 6 in:\n{explained}"));
    assert!(front.contains("ok                tolerance;"), "{front}");
    // The model's prediction beside the lab switch's queue, for both kinds of frame.
    assert!(explained.contains("Not-ECT loss: predicted | simulated (tolerance)"));
    assert!(explained.contains("ECT loss: predicted | simulated (tolerance)"));
    assert!(explained.contains("Simulated: the lab switch's queue, an independent emulation"));
    for q in plan.thresholds.iter().flat_map(|p| &p.queues) {
        let predicted = format!("{:.2e}±", q.loss_not_ect);
        assert!(
            explained.contains(&predicted),
            "{predicted} in:\n{explained}"
        );
    }
    // SONiC and EOS hold L_i; Cumulus and Onyx cannot, and say why.
    assert!(explained.contains("Switches step at S_i (min = max, probability 100%) and drop"));
    assert!(explained.contains("but cannot hold L_i: it is not configured"));
    assert!(explained.contains("  onyx: Onyx documents no per-queue byte limit"));
    assert!(explained.contains("  cumulus: NVUE bounds a traffic class only through"));
    assert!(explained.contains("shared buffer (no queue limit on this OS)"));
    assert!(explained.contains("leaf2 (onyx, leaf, rack r2) at 192.0.2.22:22"));
    assert!(explained.contains("rank 2 h3 (rack r2) ens1f0 10.1.2.11/24"));
}

#[test]
fn plan_host_prints_that_hosts_transport_config() {
    let out = mltctl(&["plan", "-i", LAB, "--host", "h3"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let config: TransportConfig = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config.rank, 2);
    assert_eq!(config.local.name, "h3");
    assert_eq!(config.job.world_size, 4);
    assert_eq!(config.peers.len(), 3);

    let out = mltctl(&["plan", "-i", LAB, "--host", "h9"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "mltctl: no host named `h9` in the inventory\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn unreadable_inventory_is_an_error_not_a_validation_failure() {
    let out = mltctl(&["validate", "-i", "missing/inventory.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("mltctl: cannot read missing/inventory.yaml: "),
        "{err}"
    );
}

#[test]
fn wrong_command_lines_exit_with_2() {
    assert_eq!(mltctl(&["plan"]).status.code(), Some(2));
    assert_eq!(
        mltctl(&["plan", "-i", LAB, "--json", "--explain"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(mltctl(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn help_documents_exit_codes() {
    for args in [
        &["--help"][..],
        &["validate", "--help"],
        &["plan", "--help"],
    ] {
        let out = mltctl(args);
        assert_eq!(out.status.code(), Some(0));
        let help = text(&out.stdout);
        assert!(help.contains("Exit codes:"), "{args:?}");
        assert!(help.contains("3  the inventory is invalid"), "{args:?}");
    }
}

#[test]
fn generated_inventories_validate_and_plan() {
    let scratch = mlt_common::files::scratch_dir("mltctl-cli-").unwrap();
    let dir = scratch.path();
    let file = dir.join("gen.yaml");
    let path = file.to_str().unwrap();
    let out = mltctl(&[
        "generate",
        "--spines",
        "2",
        "--leaves",
        "3",
        "--hosts-per-leaf",
        "4",
        "-o",
        path,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = mltctl(&["plan", "-i", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(
        "Fabric gen-2x3x4: 5 switches (2 spines), 3 racks, 12 hosts; 161 layers in 6 gradient classes"
    ));
}

#[test]
fn groups_json_gives_each_iterations_groups_and_each_ranks_group() {
    let out = mltctl(&["groups", "-i", LAB, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let pattern: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pattern["workers"], 4);
    assert_eq!(pattern["mixing"]["connected"], true);
    assert!(pattern["mixing"]["second_eigenvalue"].as_f64().unwrap() < 1.0);
    let period = pattern["period"].as_u64().unwrap() as usize;
    assert_eq!(pattern["iterations"].as_array().unwrap().len(), period);
    // Rank 0's group in iteration 0 contains rank 0.
    let index = pattern["group_of"][0][0].as_u64().unwrap() as usize;
    let ranks = &pattern["iterations"][0]["groups"][index]["ranks"];
    assert!(ranks.as_array().unwrap().contains(&serde_json::json!(0)));
    assert_eq!(pattern["hosts"][0], "h1");
}

/// The lab's racks hold two hosts: a host with a shared NIC never represents its rack,
/// so its only rack-mate does, and it averages with the other rack's free host.
#[test]
fn a_contended_host_in_a_rack_of_two_pairs_across_racks() {
    let out = mltctl(&["groups", "-i", LAB, "--contention", "host:h1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(printed.contains("mixing: every host reached"), "{printed}");
    assert!(printed.contains("cross-rack pair [h1 h4]"), "{printed}");
    assert!(printed.contains("cross-rack pair [h1 h3]"), "{printed}");
}

#[test]
fn groups_rejects_unknown_contention_with_exit_2() {
    for bad in ["host:nope", "rack:nope", "switch:leaf1"] {
        let out = mltctl(&["groups", "-i", LAB, "--contention", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).contains(bad), "{}", text(&out.stderr));
    }
}

#[test]
fn sim_is_deterministic_and_reports_every_scheme() {
    let args = [
        "sim",
        "--trace",
        "cnn",
        "--workers",
        "20",
        "--trials",
        "2",
        "--duration",
        "5",
        "--json",
    ];
    let first = mltctl(&args);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert_eq!(first.stdout, mltctl(&args).stdout);
    let sweep: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let schemes: Vec<&str> = sweep["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["scheme"].as_str().unwrap())
        .collect();
    assert_eq!(
        schemes,
        ["all_reduce", "partial_reduce", "selective_reduce"]
    );
    // The headline ratios say which waiting slot Δt produced them.
    assert_eq!(sweep["headline"][0]["delta_t_ms"], 50.0);
    let mut slower = args.to_vec();
    slower.extend(["--delta-t-ms", "200"]);
    let sweep: serde_json::Value = serde_json::from_slice(&mltctl(&slower).stdout).unwrap();
    assert_eq!(sweep["headline"][0]["delta_t_ms"], 200.0);
    assert_eq!(sweep["setup"]["delta_t"], 0.2);
    let scratch = mlt_common::files::scratch_dir("mltctl-sim-").unwrap();
    let plot = scratch.path().join("sim.svg");
    let mut plotted = args.to_vec();
    plotted.extend(["--plot", plot.to_str().unwrap()]);
    let out = mltctl(&plotted);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stderr),
        format!("wrote the plot to {}\n", plot.display())
    );
    assert!(std::fs::read_to_string(&plot).unwrap().starts_with("<svg"));
    let out = mltctl(&["sim", "--eta", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plan_host_network_and_ipmac_are_what_the_host_agent_and_transport_read() {
    let lab = fixture("inventory/lab.yaml");
    let lab = lab.to_str().unwrap();
    let out = mltctl(&["plan", "-i", lab, "--host", "h3", "--network"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["nic"], "ens1f0");
    assert_eq!(plan["mac"], "02:00:0a:01:02:0b");
    let addresses = plan["addresses"].as_array().unwrap();
    assert_eq!(addresses[0], "10.1.2.11/24");
    assert_eq!(addresses.len(), 3, "own address and one per spine");
    assert!(
        addresses[1..]
            .iter()
            .all(|a| a.as_str().unwrap().ends_with("/32"))
    );
    // Static neighbours: the gateway, then the MAC map the IP=MAC file holds.
    let neighbours: Vec<String> = plan["neighbours"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            format!(
                "{}={}",
                n["ip"].as_str().unwrap(),
                n["mac"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(neighbours[0], "10.1.2.1=02:00:0a:01:02:01");
    let out = mltctl(&["plan", "-i", lab, "--host", "h3", "--ipmac"]);
    assert_eq!(
        text(&out.stdout).lines().collect::<Vec<_>>(),
        neighbours[1..]
    );
    let out = mltctl(&["plan", "-i", lab, "--host", "h1", "--ipmac"]);
    let ipmac = text(&out.stdout);
    // The peer's own MAC for its IP in the rack; the gateway's for every other address,
    // path addresses of a peer in the rack included (they are routed through the leaf).
    assert!(ipmac.contains("10.1.1.12=02:00:0a:01:01:0c\n"), "{ipmac}");
    assert!(ipmac.contains("10.200.0.2=02:00:0a:01:01:01\n"), "{ipmac}");
    assert!(ipmac.contains("10.1.2.11=02:00:0a:01:01:01\n"), "{ipmac}");
    assert!(ipmac.contains("10.200.0.13=02:00:0a:01:01:01\n"), "{ipmac}");
    assert_eq!(
        ipmac.lines().count(),
        3 * (1 + 2),
        "three peers, each its IP and two path addresses: {ipmac}"
    );
}

#[test]
fn procs_per_host_shape_the_launchers_environment_and_the_transport() {
    let small = std::fs::read_to_string(fixture("tests/inventories/valid/small.yaml")).unwrap();
    let scratch = mlt_common::files::scratch_dir("mltctl-launcher-").unwrap();
    let dir = scratch.path();
    let inventory = dir.join("launcher.yaml");
    let write = |launcher: &str| {
        std::fs::write(&inventory, format!("{small}  launcher: {launcher}\n")).unwrap();
        inventory.to_str().unwrap().to_string()
    };
    let path = write("{procs_per_host: 2, master_port: 29600}");
    let out = mltctl(&["env", "-i", &path, "--host", "h2", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let env: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts = env["PET_NNODES"].as_str().unwrap().parse::<u32>().unwrap();
    assert_eq!(env["WORLD_SIZE"], (hosts * 2).to_string());
    assert_eq!(env["LOCAL_WORLD_SIZE"], "2");
    assert_eq!(env["PET_NPROC_PER_NODE"], "2");
    assert_eq!(env["PET_NODE_RANK"], "1");
    assert_eq!(env["MASTER_PORT"], "29600");
    assert_eq!(env["PET_MASTER_PORT"], "29600");
    assert_eq!(env["MLT_LOCAL_RANKS"], "2");
    assert_eq!(env["PET_REDIRECTS"], "2:0");
    // Several processes per host: each gets RANK and LOCAL_RANK from the launcher.
    assert!(
        env.get("RANK").is_none() && env.get("LOCAL_RANK").is_none(),
        "{env}"
    );
    let out = mltctl(&["plan", "-i", &path, "--host", "h2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let config: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(config["job"]["local_ranks"], 2);

    let path = write("{socket_group: 'train ers'}");
    let out = mltctl(&["validate", "-i", &path]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("is not a group name"), "{stderr}");

    let path = write("{master_port: 11100}");
    let out = mltctl(&["validate", "-i", &path]);
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("master_port 11100 is the transport's control port"),
        "{stderr}"
    );
    assert!(stderr.contains("launcher.yaml:"), "{stderr}");
}

#[test]
fn the_inventorys_dpdk_driver_is_what_bootstrap_binds_the_nic_to() {
    let small = std::fs::read_to_string(fixture("tests/inventories/valid/small.yaml")).unwrap();
    let scratch = mlt_common::files::scratch_dir("mltctl-driver-").unwrap();
    let dir = scratch.path();
    let mut drivers = Vec::new();
    for datapath in [
        "{kind: dpdk}",
        "{kind: dpdk, driver: vfio-pci}",
        "{kind: dpdk, driver: mlx5}",
    ] {
        let inventory = dir.join("dpdk.yaml");
        std::fs::write(&inventory, format!("{small}  datapath: {datapath}\n")).unwrap();
        let out = mltctl(&[
            "plan",
            "-i",
            inventory.to_str().unwrap(),
            "--host",
            "h1",
            "--network",
        ]);
        assert!(out.status.success(), "{datapath}: {}", text(&out.stderr));
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        drivers.push(plan["dpdk"]["driver"].as_str().unwrap().to_string());
    }
    assert_eq!(drivers, ["vfio-pci", "vfio-pci", "mlx5_core"]);

    // Drivers over the kernel interface bind nothing; af_xdp asks the host for its
    // queues, and the transport gets the vdev with one AF_XDP socket per RX queue;
    // mlx5 isolates the PMD's flows.
    let plan = |datapath: &str, network: bool| -> serde_json::Value {
        let inventory = dir.join("dpdk.yaml");
        std::fs::write(&inventory, format!("{small}  datapath: {datapath}\n")).unwrap();
        let mut args = vec!["plan", "-i", inventory.to_str().unwrap(), "--host", "h1"];
        if network {
            args.push("--network");
        }
        let out = mltctl(&args);
        assert!(out.status.success(), "{datapath}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let xdp = "{kind: dpdk, driver: af_xdp, rx_queues: 2}";
    let network = plan(xdp, true);
    assert!(network.get("dpdk").is_none(), "{network}");
    assert_eq!(network["af_xdp_queues"], 2);
    let transport = plan(xdp, false);
    let vdev = transport["dpdk"]["vdev"].as_str().unwrap();
    assert!(
        vdev.starts_with("net_af_xdp0,iface=") && vdev.ends_with(",start_queue=0,queue_count=2"),
        "{vdev}"
    );
    assert_eq!(transport["dpdk"]["no_huge"], true);
    assert_eq!(transport["dpdk"]["inline_rx"], true);
    assert_eq!(
        plan("{kind: dpdk, driver: mlx5}", false)["dpdk"]["isolate"],
        true
    );
    let vfio = plan("{kind: dpdk, driver: vfio-pci}", false);
    assert_eq!(vfio["dpdk"]["isolate"], false);
    // A PMD that owns the NIC keeps an RX lcore per queue, on the host's cores.
    assert_eq!(vfio["dpdk"]["inline_rx"], false);
}

#[test]
fn env_prints_optireduce_and_mlt_variables_for_one_host() {
    let lab = fixture("inventory/lab.yaml");
    let out = mltctl(&["env", "-i", lab.to_str().unwrap(), "--host", "h2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let env = text(&out.stdout);
    for line in [
        "export RANK=1\n",
        "export WORLD_SIZE=4\n",
        "export MASTER_ADDR=10.1.1.11\n",
        "export GLOO_SOCKET_IFNAME=ens1f0\n",
        "export GLOO_DPDK_CONFIG=/var/lib/mltctl/h2.ipmac\n",
        "export GLOO_DPDK_THREADS_OFFSET=2\n",
        "export MLT_SOCKET=/var/lib/mltctl/h2.sock\n",
        "export MASTER_PORT=29500\n",
        "export LOCAL_RANK=0\n",
        "export PET_NNODES=4\n",
        "export PET_NODE_RANK=1\n",
        "export PET_NPROC_PER_NODE=1\n",
    ] {
        assert!(env.contains(line), "{line:?} missing from\n{env}");
    }
    // The lab's collective is ring: OptiReduce defines no GLOO_ALGO for it.
    assert!(!env.contains("GLOO_ALGO"), "{env}");
    let out = mltctl(&["env", "-i", lab.to_str().unwrap(), "--host", "h9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no host named `h9`"));
}

#[test]
fn launch_refuses_a_limit_that_leaves_out_a_host_of_the_job() {
    let lab = fixture("inventory/lab.yaml");
    let out = mltctl(&["launch", "-i", lab.to_str().unwrap(), "--limit", "rack:r1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--limit leaves out 2 of its 4 hosts (h3, h4)"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_bad_playbook_is_reported_with_its_location_and_nothing_runs() {
    let scratch = mlt_common::files::scratch_dir("mltctl-play-").unwrap();
    let dir = scratch.path();
    let playbook = dir.join("site.yml");
    std::fs::write(&playbook, "steps:\n  - validate\n  - deploy\n").unwrap();
    let lab = fixture("inventory/lab.yaml");
    let out = mltctl(&[
        "play",
        playbook.to_str().unwrap(),
        "-i",
        lab.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("site.yml:3:5: unknown step `deploy`"),
        "{stderr}"
    );
    assert!(!stderr.contains("== step"), "{stderr}");
}

/// Every step is parsed before the first runs: a wrong step argument, or one that would
/// point a step at another inventory, stops the play before anything is contacted.
#[test]
fn a_wrong_step_argument_stops_the_play_before_any_step() {
    let scratch = mlt_common::files::scratch_dir("mltctl-play-args-").unwrap();
    let dir = scratch.path();
    let lab = fixture("inventory/lab.yaml");
    for (args, says) in [
        (
            "[--bogus]",
            "step 2 (apply): error: unexpected argument '--bogus'",
        ),
        (
            "[-vi, other.yaml]",
            "step 2 (apply): every step works on the play's inventory",
        ),
    ] {
        let playbook = dir.join("site.yml");
        std::fs::write(
            &playbook,
            format!("steps:\n  - diff\n  - step: apply\n    args: {args}\n"),
        )
        .unwrap();
        let out = mltctl(&[
            "play",
            playbook.to_str().unwrap(),
            "-i",
            lab.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("== step"), "{stderr}");
    }
}

#[test]
fn the_site_playbook_skips_steps_a_limit_does_not_select() {
    let lab = fixture("inventory/lab.yaml");
    let site = fixture("playbooks/site.yml");
    let out = mltctl(&[
        "play",
        site.to_str().unwrap(),
        "-i",
        lab.to_str().unwrap(),
        "--check",
        "--limit",
        "spine9",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("`spine9` matches no switch or host"));
}

/// A reader that goes away (`mltctl plan --explain | head`) is not an error: mltctl
/// stops quietly, exit 0, nothing on stderr.
#[test]
fn a_closed_pipe_ends_quietly() {
    for args in [
        &["plan", "-i", LAB, "--explain"][..],
        &["plan", "-i", LAB, "--json"],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mltctl"))
            .args(args)
            .current_dir(common::root())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before mltctl has planned anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stderr), "", "{args:?}");
    }
}

/// `generate` is a function of its arguments: sizes it cannot build are usage errors.
#[test]
fn generate_with_impossible_sizes_is_a_usage_error() {
    let out = mltctl(&[
        "generate",
        "--spines",
        "0",
        "--leaves",
        "2",
        "--hosts-per-leaf",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("at least one spine"),
        "{}",
        text(&out.stderr)
    );
}

/// A pattern that cannot mix says so with the same λ₂ on both streams, names the hosts
/// left apart, and suggests what to change.
#[test]
fn a_pattern_that_never_mixes_names_the_hosts_apart() {
    let out = mltctl(&[
        "groups",
        "-i",
        LAB,
        "--contention",
        "host:h1",
        "--contention",
        "host:h3",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("DISCONNECTED (λ₂ = 1.000000)"));
    let err = text(&out.stderr);
    assert!(
        err.contains("(λ₂ = 1.000000): h2, h4 never average with h1"),
        "{err}"
    );
    assert!(err.contains("Report contention only where it is"), "{err}");
}

/// Rendering again leaves every file that already holds its switch's configuration as
/// it is (time stamps too) and rewrites those that differ, in bytes or in mode.
#[test]
fn render_rewrites_only_the_files_that_differ() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = mlt_common::files::scratch_dir("mltctl-render-again-").unwrap();
    let dir = scratch.path();
    let out_dir = dir.to_str().unwrap();
    let out = mltctl(&["render", "-i", LAB, "--out", out_dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let total = names.len();
    assert!(total >= 4, "{names:?}");
    assert!(
        text(&out.stdout).contains(&format!("wrote {total} configurations to")),
        "{}",
        text(&out.stdout)
    );
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for name in &names {
        let file = std::fs::File::options()
            .append(true)
            .open(dir.join(name))
            .unwrap();
        file.set_modified(long_ago).unwrap();
    }
    let rendered = std::fs::read(dir.join(&names[0])).unwrap();
    let mut edited = rendered.clone();
    let last = edited.len() - 2;
    edited[last] ^= 1;
    std::fs::write(dir.join(&names[0]), &edited).unwrap();
    std::fs::set_permissions(dir.join(&names[1]), PermissionsExt::from_mode(0o600)).unwrap();
    let out = mltctl(&["render", "-i", LAB, "--out", out_dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.contains(&format!(
            "wrote 2 of {total} configurations to {out_dir} ({} already held theirs",
            total - 2
        )),
        "{printed}"
    );
    assert_eq!(std::fs::read(dir.join(&names[0])).unwrap(), rendered);
    let mode = |name: &str| {
        std::fs::metadata(dir.join(name))
            .unwrap()
            .permissions()
            .mode()
    };
    assert_eq!(mode(&names[1]) & 0o777, 0o644);
    for name in &names[2..] {
        let modified = std::fs::metadata(dir.join(name))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(modified, long_ago, "{name} was rewritten");
    }
    let modified = std::fs::metadata(dir.join(&names[1]))
        .unwrap()
        .modified()
        .unwrap();
    assert_ne!(modified, long_ago, "{} was left as it was", names[1]);
}

/// Files an earlier inventory rendered into the same directory are named, and
/// `--clean` removes them (and nothing else).
#[test]
fn render_names_stale_files_and_clean_removes_them() {
    let scratch = mlt_common::files::scratch_dir("mltctl-render-stale-").unwrap();
    let dir = scratch.path();
    std::fs::write(dir.join("old-leaf.cfg"), "").unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let out_dir = dir.to_str().unwrap();
    let out = mltctl(&["render", "-i", LAB, "--out", out_dir]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.contains("also holds 1 file(s) no switch of this inventory has"),
        "{printed}"
    );
    assert!(
        printed.contains("old-leaf.cfg; --clean removes them"),
        "{printed}"
    );
    // Switches whose OS cannot hold queue limits are named, once per OS.
    assert!(
        printed.contains("note: cumulus switches leaf1: queue limits (L_i) are not configured"),
        "{printed}"
    );
    assert!(
        printed.contains("note: onyx switches leaf2: queue limits"),
        "{printed}"
    );
    assert!(dir.join("old-leaf.cfg").exists());
    let out = mltctl(&["render", "-i", LAB, "--out", out_dir, "--clean"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("removed 1 stale file(s): old-leaf.cfg"));
    assert!(!dir.join("old-leaf.cfg").exists());
    assert!(dir.join("notes.txt").exists() && dir.join("spine1.json").exists());
}
