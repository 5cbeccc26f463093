//! The DPDK datapath against real DPDK, without a NIC: `endhost run` processes in two
//! network namespaces joined by one veth pair (`endhost::testbed::netns::Pair`), a DPDK host on
//! an af_packet virtual device (`--no-huge --no-pci --vdev=net_af_packet0,iface=eth0`)
//! beside a kernel-UDP host, or two DPDK hosts. Every collective in both roles, loss
//! from nftables, frames captured on the veth, and the EAL's errors. Needs root,
//! iproute2, nft and ethtool; otherwise every test is reported as skipped (ignored).

#[path = "../../tests/common/harness.rs"]
mod harness;
#[path = "common/run.rs"]
mod run;
#[path = "common/tagging.rs"]
mod tagging;

use std::path::PathBuf;
use std::process::{Child, Output};
use std::time::Duration;

use endhost::testbed::bench::datapath::pair_configs;
use endhost::testbed::netns::{Pair, capture};
use endhost_core::config::{DpdkOptions, TransportConfig};
use harness::Suite;
use run::{lines, text};
use tagging::Tagging;

const ENDHOST: &str = env!("CARGO_BIN_EXE_endhost");

fn main() {
    let missing = endhost::testbed::netns::unavailable().or_else(|| {
        std::process::Command::new("ethtool")
            .arg("--version")
            .output()
            .is_err()
            .then(|| "`ethtool` is not installed".to_string())
    });
    let tests: &[(&str, fn())] = &[
        (
            "a_dpdk_host_and_a_kernel_host_are_exact_in_every_collective_in_both_roles",
            dpdk_with_kernel,
        ),
        (
            "loss_from_nftables_is_recovered_or_bounded_between_dpdk_and_kernel",
            loss,
        ),
        ("two_dpdk_hosts_allreduce", two_dpdk_hosts),
        (
            "af_xdp_hosts_take_only_the_data_port_and_keep_the_control_channel_on_their_nic",
            af_xdp,
        ),
        ("two_dpdk_processes_allreduce_over_memif", memif),
        (
            "with_the_datapath_thread_polling_every_queue_dpdk_hosts_are_exact",
            inline_rx,
        ),
        (
            "dpdk_frames_carry_the_planned_dscp_ecn_checksums_and_macs",
            frames,
        ),
        ("eal_failures_are_reported_clearly", eal_failures),
    ];
    // Needs a machine without free hugepages; skipped (ignored) on one that has some.
    let free = free_hugepages();
    let hugepages = missing
        .clone()
        .or_else(|| (free > 0).then(|| format!("this machine has {free} free hugepages")));
    Suite::new("DPDK")
        .tests(tests, missing.as_deref())
        .test(
            "without_hugepages_the_eal_is_refused_unless_no_huge",
            without_hugepages,
            hugepages.as_deref(),
        )
        .run()
}

/// Two hosts on a veth pair, their configuration files, and the EAL's runtime
/// directories, all removed when dropped.
struct Hosts {
    pair: Pair,
    dir: PathBuf,
    configs: Vec<PathBuf>,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        for i in 0..2 {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.pair.host(i)));
        }
    }
}

/// Host i on DPDK when `dpdk[i]`, else on kernel sockets; `tweak` adjusts each
/// configuration.
fn hosts(name: &str, dpdk: [bool; 2], tweak: impl Fn(&mut TransportConfig)) -> Hosts {
    let pair = Pair::create().expect("the veth pair is built");
    // Removed by Drop. Others may read (not write): a test runs endhost as another user.
    let dir = mlt_common::files::scratch_dir(&format!("endhost-dpdk-{name}-"))
        .unwrap()
        .keep();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let options = |rank: usize| {
        dpdk[rank].then(|| DpdkOptions {
            vdev: Some("net_af_packet0,iface=eth0,qpairs=4".parse().unwrap()),
            file_prefix: Some(pair.host(rank)),
            no_huge: true,
            // Two cores shared by every test: RX lcores must not spin.
            rx_idle_sleep_us: 50,
            ..DpdkOptions::default()
        })
    };
    let configs = pair_configs(&pair, [options(0), options(1)])
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(rank, mut config)| {
            tweak(&mut config);
            let path = dir.join(format!("h{rank}.json"));
            std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
            path
        })
        .collect();
    Hosts { pair, dir, configs }
}

impl Hosts {
    fn spawn(&self, rank: usize, args: &[&str]) -> Child {
        run::spawn(self.pair.command(rank, ENDHOST), &self.configs[rank], args)
    }

    fn run_both(&self, args: &[&str]) -> Vec<Output> {
        run::wait_all((0..2).map(|r| self.spawn(r, args)).collect())
    }
}

/// Runs `collective` on both hosts and checks every iteration is exact.
fn exact(hosts: &Hosts, collective: &str, what: &str) {
    let args = [
        "--collective",
        collective,
        "--size",
        "2MiB",
        "--iterations",
        "2",
    ];
    let outputs = hosts.run_both(&args);
    for (rank, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "{what}, {collective}, rank {rank}: {}\nthe other rank: {}",
            text(out),
            text(&outputs[1 - rank])
        );
        let (iterations, counters) = lines(out);
        assert_eq!(iterations.len(), 2, "{}", text(out));
        for i in &iterations {
            assert_eq!(i["exact"], 1.0, "{what}, {collective}, rank {rank}: {i}");
            assert_eq!(i["delivered"], 1.0);
        }
        assert_eq!(counters["dropped"]["malformed"], 0);
    }
}

fn dpdk_with_kernel() {
    for dpdk_rank in 0..2 {
        let mut dpdk = [false; 2];
        dpdk[dpdk_rank] = true;
        let h = hosts(&format!("mixed{dpdk_rank}"), dpdk, |_| {});
        for collective in ["ring", "transpose", "ps"] {
            exact(&h, collective, &format!("DPDK on rank {dpdk_rank}"));
        }
    }
}

fn loss() {
    let h = hosts("loss", [true, false], |_| {});
    // The kernel host drops 3% of the datagrams it receives, one by one, and 3% of what
    // it sends — but its sends leave in segmentation-offload batches of up to 64, which
    // the egress hook drops whole, so a short run may lose none of them: only the DPDK
    // sender is sure to retransmit.
    h.pair.lossy(1, 3.0).unwrap();
    let mut retransmitted = 0;
    let args = [
        "--collective",
        "ring",
        "--size",
        "2MiB",
        "--iterations",
        "2",
    ];
    for (rank, out) in h.run_both(&args).iter().enumerate() {
        assert!(out.status.success(), "rank {rank}: {}", text(out));
        let (iterations, counters) = lines(out);
        assert!(
            iterations.iter().all(|i| i["exact"] == 1.0),
            "rank {rank}: {iterations:?}"
        );
        let peer = &counters["peers"][1 - rank];
        assert!(peer["packets_sent"].as_u64().unwrap() > 0, "{counters}");
        retransmitted += peer["packets_retransmitted"].as_u64().unwrap();
        if rank == 0 {
            assert!(
                peer["packets_retransmitted"].as_u64().unwrap() > 0,
                "the DPDK rank retransmitted nothing: {counters}"
            );
        }
    }
    assert!(retransmitted > 0);
    let args = [
        "--collective",
        "transpose",
        "--size",
        "2MiB",
        "--iterations",
        "2",
        "--loss-bound",
        "0.05",
    ];
    for (rank, out) in h.run_both(&args).iter().enumerate() {
        assert!(out.status.success(), "rank {rank}: {}", text(out));
        for i in lines(out).0 {
            assert!(i["delivered"].as_f64().unwrap() >= 0.95, "rank {rank}: {i}");
        }
    }
}

fn two_dpdk_hosts() {
    let h = hosts("both", [true, true], |_| {});
    for collective in ["ring", "transpose"] {
        exact(&h, collective, "two DPDK hosts");
    }
}

/// The XDP program on host `rank`'s eth0, as `ip link` shows it (empty: none).
fn xdp_attached(h: &Hosts, rank: usize) -> String {
    let out = h
        .pair
        .command(rank, "ip")
        .args(["-details", "link", "show", "eth0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ip link: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("prog/xdp") || l.trim_start().starts_with("xdp"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn af_xdp() {
    // A veth has one queue: one RX queue, one AF_XDP socket.
    let on_af_xdp = |config: &mut TransportConfig| {
        config.job.datapath.rx_queues = 1;
        if let Some(vdev) = &mut config.dpdk.vdev {
            *vdev = "net_af_xdp0,iface=eth0".parse().unwrap();
        }
    };
    for (what, dpdk) in [
        ("af_xdp beside the kernel", [true, false]),
        ("two af_xdp hosts", [true, true]),
    ] {
        let h = hosts(&format!("xdp{}", dpdk[1]), dpdk, on_af_xdp);
        // The job joins (the TCP control channel crosses the same NIC as the data,
        // which only our program's XDP_PASS lets the kernel see) and is exact.
        for collective in ["ring", "transpose"] {
            exact(&h, collective, what);
        }
        let out = &h.run_both(&["--size", "1MiB", "--iterations", "1"])[0];
        let totals = totals(out, what);
        // The data port reached the PMD; nothing else did (rx_not_ours: ARP, TCP).
        assert!(totals["rx_delivered"].as_u64().unwrap() > 0, "{totals}");
        assert_eq!(totals["rx_not_ours"], 0, "{what}: {totals}");
        for rank in 0..2 {
            assert_eq!(
                xdp_attached(&h, rank),
                "",
                "{what}: host {rank} left an XDP program"
            );
        }
    }
}

fn memif() {
    let scratch = mlt_common::files::scratch_dir("endhost-memif-").unwrap();
    let socket = scratch.path().join("memif.sock");
    let h = hosts("memif", [true, true], |config| on_memif(config, &socket));
    // Started together: the client (host 0) waits until its server listens.
    for collective in ["ring", "ps"] {
        exact(&h, collective, "memif");
        let _ = std::fs::remove_file(&socket);
    }
}

/// `dpdk.inline_rx`: the datapath thread polls the port itself, no RX lcores. On
/// af_packet with four queues (the thread polls them all), beside a host on kernel
/// sockets and beside another such host; then over memif.
fn inline_rx() {
    let inline = |config: &mut TransportConfig| config.dpdk.inline_rx = true;
    for (what, dpdk) in [
        ("inline beside the kernel", [true, false]),
        ("two inline hosts", [true, true]),
    ] {
        let h = hosts(&format!("inline{}", dpdk[1]), dpdk, inline);
        for collective in ["ring", "transpose"] {
            exact(&h, collective, what);
        }
        let outputs = h.run_both(&["--size", "1MiB", "--iterations", "1"]);
        for (rank, out) in outputs.iter().enumerate().filter(|(rank, _)| dpdk[*rank]) {
            assert!(out.status.success(), "{what}, rank {rank}: {}", text(out));
            let totals = totals(out, &format!("{what}, rank {rank}"));
            assert_eq!(
                totals["rx_polling"], "inline",
                "{what}, rank {rank}: {totals}"
            );
            assert!(totals["rx_delivered"].as_u64().unwrap() > 0, "{totals}");
        }
    }
    let scratch = mlt_common::files::scratch_dir("endhost-memif-inline-").unwrap();
    let socket = scratch.path().join("memif.sock");
    let h = hosts("memif-inline", [true, true], |config| {
        inline(config);
        on_memif(config, &socket);
    });
    exact(&h, "ring", "inline over memif");
}

/// The counters a DPDK host printed when its datapath closed.
fn totals(out: &Output, what: &str) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let totals = stderr
        .lines()
        .find_map(|l| l.strip_prefix("endhost: DPDK datapath totals: "))
        .unwrap_or_else(|| panic!("{what}: no DPDK totals: {stderr}"));
    serde_json::from_str(totals).unwrap()
}

/// Host `config.rank` on a memif port meeting its peer on `socket` (host 1 the server).
fn on_memif(config: &mut TransportConfig, socket: &std::path::Path) {
    let mac = config.local.mac;
    let role = if config.rank == 1 { "server" } else { "client" };
    config.job.datapath.rx_queues = 1;
    config.dpdk.vdev = Some(
        format!(
            "net_memif0,role={role},socket={},socket-abstract=no,mac={mac}",
            socket.display()
        )
        .parse()
        .unwrap(),
    );
}

/// One's-complement checksum over `data` (RFC 1071); zero when `data` includes a
/// correct checksum.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn frames() {
    // Host 0 on DPDK takes its next hops from an IP=MAC file.
    let scratch = mlt_common::files::scratch_dir("endhost-dpdk-ipmac-").unwrap();
    let ip_mac = scratch.path().join("ipmac");
    let h = hosts("frames", [true, false], |config| {
        tagging::one_class_per_layer(config);
        if config.rank == 0 {
            config.dpdk.ip_mac = Some(ip_mac.clone());
        }
    });
    let (dpdk_mac, kernel_mac) = (h.pair.mac(0).unwrap(), h.pair.mac(1).unwrap());
    std::fs::write(
        &ip_mac,
        format!("# the kernel host\n{}={kernel_mac}\n", Pair::ip(1)),
    )
    .unwrap();
    let sniffer = capture(&h.pair.host(1), "eth0", Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(300));
    for out in h.run_both(&["--size", "2MiB", "--iterations", "2", "--layers", "4"]) {
        assert!(out.status.success(), "{}", text(&out));
    }
    let captured = sniffer.finish().expect("frames are captured");
    let mut tagging = Tagging::default();
    for frame in captured.iter().filter(|f| f[6..12] == dpdk_mac.0) {
        if frame[12..14] != [0x08, 0x00] || frame[14 + 9] != 17 {
            continue;
        }
        assert_eq!(frame[0..6], kernel_mac.0, "the IP=MAC file's next hop");
        let ip = &frame[14..34];
        assert_eq!(ip[0], 0x45);
        assert_eq!(checksum(ip), 0, "IPv4 header checksum");
        assert_eq!(ip[16..20], Pair::ip(1).octets(), "the peer's path address");
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let udp = &frame[34..14 + total];
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 11000, "the data port");
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(udp);
        assert_ne!(udp[6..8], [0, 0], "a UDP checksum is sent");
        assert_eq!(checksum(&pseudo), 0, "UDP checksum");
        tagging.check(ip[1], &udp[8..]);
    }
    tagging.assert_complete(&format!("from the DPDK host in {} frames", captured.len()));
    assert!(tagging.acks > 0, "no acknowledgement from the DPDK host");
}

/// Starts the DPDK host alone with `tweak`ed options (as user `as_user` if given) and
/// expects it to fail at once saying `expected`.
fn fails_with(h: &Hosts, tweak: impl Fn(&mut DpdkOptions), as_user: bool, expected: &str) {
    let mut config: TransportConfig =
        serde_json::from_slice(&std::fs::read(&h.configs[0]).unwrap()).unwrap();
    tweak(&mut config.dpdk);
    let path = h.dir.join("failing.json");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    let mut command = if as_user {
        let mut c = h.pair.command(0, "setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", ENDHOST]);
        c
    } else {
        h.pair.command(0, ENDHOST)
    };
    let out = command
        .args(["run", "--connect-timeout", "20", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in:\n{stderr}"
    );
}

fn eal_failures() {
    let h = hosts("errors", [true, false], |_| {});
    fails_with(
        &h,
        |d| d.vdev = Some("net_af_packet0,iface=eth9".parse().unwrap()),
        false,
        "missing interface: net_af_packet0,iface=eth9 names eth9",
    );
    fails_with(
        &h,
        |d| d.eal_args = vec!["--no-such-option".into()],
        false,
        "DPDK's EAL did not start (bad arguments",
    );
    fails_with(&h, |_| {}, true, "no permission");
}

/// Free hugepages on this machine, of every size.
fn free_hugepages() -> u64 {
    std::fs::read_dir("/sys/kernel/mm/hugepages")
        .map(|sizes| {
            sizes
                .filter_map(Result::ok)
                .filter_map(|s| std::fs::read_to_string(s.path().join("free_hugepages")).ok())
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

fn without_hugepages() {
    let h = hosts("nohuge", [true, false], |_| {});
    fails_with(&h, |d| d.no_huge = false, false, "no free hugepages");
}
