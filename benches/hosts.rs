//! `cargo bench --bench hosts` (as root): the host agent on one host of a large fabric.
//!
//! Plans the 16-spine, 64-leaf, 2,048-host fabric and takes host h1's network plan: its
//! address and 16 path addresses, the gateway and its MAC map (every peer IP and every
//! peer path address: 34,800 static neighbours) and its routes. Each run gets a fresh
//! network namespace with a veth named and addressed as the plan's NIC. Side by side:
//! - the agent (`endhost configure`'s code, in this process): check mode on a bare NIC,
//!   the first apply (read, diff, apply, read back, verify), a second run (no change);
//! - the floor: the same addresses, neighbours and routes written by iproute2's
//!   `ip -batch` (one netlink request per entry, nothing read or verified);
//! - building the host's network plan from the plan, and its JSON.
//!
//! Prints a table and, last, one JSON line. Optional: `--runs N` (default 5).

mod common;

use std::fmt::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Scratch, large_fabric, print, row, runs_from_args, step_row};
use endhost::agent::{self, dpdk::Sysfs};
use endhost_core::config::DatapathKind;
use endhost_core::host::HostNetworkPlan;
use mlt_common::outcome::Status;
use mltctl::inventory;
use mltctl::plan::Plan;
use mltctl::plan::hosts::network_plan;

/// A network namespace holding one veth shaped as the plan's NIC; removed when dropped.
struct Namespace(String);

impl Namespace {
    fn new(plan: &HostNetworkPlan) -> Namespace {
        let name = format!("mltctl-bench-agent-{}", std::process::id());
        // One a killed earlier run left behind.
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(std::process::Stdio::null())
            .status();
        let ns = Namespace(name);
        let mac = plan.mac.to_string();
        for args in [
            vec!["netns", "add", &ns.0],
            vec![
                "-n", &ns.0, "link", "add", &plan.nic, "type", "veth", "peer", "name", "peer0",
            ],
            vec!["-n", &ns.0, "link", "set", &plan.nic, "address", &mac],
            vec!["-n", &ns.0, "link", "set", &plan.nic, "up"],
            vec!["-n", &ns.0, "link", "set", "peer0", "up"],
        ] {
            let status = Command::new("ip").args(&args).status().expect("ip runs");
            assert!(status.success(), "ip {}", args.join(" "));
        }
        ns
    }

    /// Runs `work` on a thread inside this namespace.
    fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    endhost::testbed::netns::enter(&self.0).expect("entering the namespace");
                    work()
                })
                .join()
                .expect("the namespace thread")
        })
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// One `endhost configure` run in `ns`: its duration and its report's status and size.
fn configure(ns: &Namespace, plan: &HostNetworkPlan, check: bool) -> (Duration, Status, usize) {
    ns.run(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let start = Instant::now();
        let report = runtime.block_on(agent::configure(plan, check, &Sysfs::default()));
        let took = start.elapsed();
        assert_eq!(report.error, None, "the agent failed");
        (took, report.status, report.changes.len())
    })
}

/// The plan's state as an `ip -batch` script.
fn batch(plan: &HostNetworkPlan) -> String {
    let nic = &plan.nic;
    let mut script = format!("link set {nic} mtu {}\n", plan.mtu);
    for net in &plan.addresses {
        let _ = writeln!(script, "addr add {net} dev {nic}");
    }
    for n in &plan.neighbours {
        let _ = writeln!(
            script,
            "neigh replace {} lladdr {} dev {nic} nud permanent",
            n.ip, n.mac
        );
    }
    for r in &plan.routes {
        let _ = writeln!(script, "route replace {} via {} dev {nic}", r.prefix, r.via);
    }
    script
}

fn main() {
    if !is_root() {
        eprintln!("the hosts benchmark needs root (network namespaces)");
        std::process::exit(2);
    }
    let runs = runs_from_args(5);
    let scratch = Scratch::new("hosts");
    let fabric = large_fabric(&scratch.0);
    let plan = Plan::build(&inventory::load(&fabric).expect("the generated fabric is valid"));
    let host = network_plan(&plan, 0, DatapathKind::Udp);
    let script = scratch.0.join("h1.batch");
    std::fs::write(&script, batch(&host)).expect("write the batch");

    let (mut check, mut first, mut second, mut floor) = (vec![], vec![], vec![], vec![]);
    let mut changes = 0;
    for _ in 0..runs {
        let ns = Namespace::new(&host);
        let (took, status, n) = configure(&ns, &host, true);
        assert_eq!(status, Status::Changed);
        check.push(took);
        let (took, status, n_applied) = configure(&ns, &host, false);
        assert_eq!((status, n_applied), (Status::Changed, n));
        changes = n;
        first.push(took);
        let (took, status, _) = configure(&ns, &host, false);
        assert_eq!(status, Status::Ok, "a second run must change nothing");
        second.push(took);
        drop(ns);

        let ns = Namespace::new(&host);
        let start = Instant::now();
        let status = Command::new("ip")
            .args(["-n", &ns.0, "-batch"])
            .arg(&script)
            .status()
            .expect("ip runs");
        floor.push(start.elapsed());
        assert!(status.success(), "ip -batch failed");
    }
    let neighbours = host.neighbours.len();
    let rows = vec![
        row(
            format!("agent: check mode, bare NIC ({changes} changes)"),
            check,
        ),
        row("agent: first apply, verified".into(), first),
        row("agent: second run (no change)".into(), second),
        row("floor: ip -batch, same state, unverified".into(), floor),
        step_row("plan: one host's network plan", runs, || {
            network_plan(&plan, 0, DatapathKind::Udp)
        }),
        step_row("plan: one host's network plan as JSON", runs, || {
            serde_json::to_vec_pretty(&host).expect("serializable")
        }),
    ];
    print(
        &format!(
            "host agent benchmark: h1 of 2048 hosts (16 spines): {} addresses, {neighbours} \
             static neighbours, {} routes; {runs} runs each, a fresh namespace per run",
            host.addresses.len(),
            host.routes.len()
        ),
        &rows,
        serde_json::json!({"benchmark": "hosts", "neighbours": neighbours, "changes": changes}),
    );
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() == 0 }
}
