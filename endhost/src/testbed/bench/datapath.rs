//! `endhost bench datapath`: the datapaths side by side on one veth pair
//! ([`crate::testbed::netns::Pair`]). For each: a blast of datagrams from one host to the
//! other through the [`Datapath`] calls alone (packets per second, per core of CPU
//! time, and CPU cycles per packet at each end), then allreduces through the whole
//! transport (`endhost run`) for goodput.
//!
//! The blast's two ends are `endhost bench blast` processes, one per namespace; each
//! measures its own CPU time (every thread, DPDK's lcores included) and converts it to
//! cycles at the measured TSC rate.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{collect, host_config, times};
use crate::datapath::{AnyDatapath, Datapath};
use crate::testbed::netns::{FabricSpec, Pair};
use endhost_core::config::{Collective, DatapathKind, DpdkOptions, TransportConfig};
use endhost_core::vdev::{Vdev, VdevDriver};

/// One datapath under test: kernel UDP, or DPDK on a virtual device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System {
    pub kind: DatapathKind,
    /// The vdev driver for DPDK.
    pub vdev: Option<VdevDriver>,
    /// DPDK's datapath thread polls the RX queues itself (`dpdk.inline_rx`).
    pub inline_rx: bool,
}

impl System {
    pub fn name(&self) -> String {
        match &self.vdev {
            Some(vdev) if self.inline_rx => format!("dpdk {} inline", vdev.name()),
            Some(vdev) => format!("dpdk {}", vdev.name()),
            None => "kernel udp".into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct PairSpec {
    pub systems: Vec<System>,
    pub packets: u64,
    pub payload: usize,
    pub size_bytes: u64,
    pub iterations: u32,
}

/// What one end of a blast measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlastEnd {
    pub packets: u64,
    pub seconds: f64,
    /// CPU time of the whole process (every thread).
    pub cpu_seconds: f64,
    pub tsc_hz: f64,
}

impl BlastEnd {
    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.seconds
    }

    /// Packets per second per core: per second of CPU time.
    pub fn pps_per_core(&self) -> f64 {
        self.packets as f64 / self.cpu_seconds
    }

    pub fn cycles_per_packet(&self) -> f64 {
        self.cpu_seconds * self.tsc_hz / self.packets as f64
    }

    /// Cores kept busy on average.
    pub fn cores(&self) -> f64 {
        self.cpu_seconds / self.seconds
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemReport {
    pub system: String,
    pub sender: BlastEnd,
    pub receiver: BlastEnd,
    /// Allreduce times, in the order they ran.
    pub allreduce_seconds: Vec<f64>,
    /// Median allreduce: bytes of the tensor per second, in Gbit/s.
    pub allreduce_gbit: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairReport {
    pub packets: u64,
    pub payload: usize,
    pub size_bytes: u64,
    pub results: Vec<SystemReport>,
}

impl std::fmt::Display for PairReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "veth pair: {} datagrams of {} bytes one way; allreduce of {} bytes over 2 hosts",
            self.packets, self.payload, self.size_bytes
        )?;
        writeln!(
            f,
            "{:<27} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
            "datapath",
            "tx Mpps",
            "tx cores",
            "tx Mpps/c",
            "tx cyc/p",
            "rx Mpps",
            "rx cores",
            "rx Mpps/c",
            "rx cyc/p",
            "AR Gbit/s"
        )?;
        for r in &self.results {
            let (s, d) = (&r.sender, &r.receiver);
            writeln!(
                f,
                "{:<27} {:>9.3} {:>9.2} {:>9.3} {:>9.0} {:>9.3} {:>9.2} {:>9.3} {:>9.0} {:>10.3}",
                r.system,
                s.pps() / 1e6,
                s.cores(),
                s.pps_per_core() / 1e6,
                s.cycles_per_packet(),
                d.pps() / 1e6,
                d.cores(),
                d.pps_per_core() / 1e6,
                d.cycles_per_packet(),
                r.allreduce_gbit
            )?;
            writeln!(
                f,
                "{:<27} received {} of {} datagrams sent",
                "", d.packets, s.packets
            )?;
        }
        Ok(())
    }
}

/// A job of the two hosts of `pair`, host i on DPDK with `dpdk[i]` (on kernel UDP
/// without), with the namespace settings of `endhost bench` (rate-control thresholds,
/// a long phase timeout), exact delivery and the ring collective.
pub fn pair_configs(
    pair: &Pair,
    dpdk: [Option<DpdkOptions>; 2],
) -> Result<Vec<TransportConfig>, String> {
    let spec = super::BenchSpec {
        fabric: FabricSpec {
            hosts: 2,
            rate_mbit: 10_000,
            host_buffer_ms: 0,
            switch_buffer_ms: 0,
            loss_percent: 0.0,
        },
        size_bytes: 0,
        iterations: 0,
        collective: Collective::Ring,
        loss_bound: 0.0,
        rate_control: endhost_core::config::RateControl {
            t_low_us: super::T_LOW_US,
            t_high_us: super::T_HIGH_US,
            ..Default::default()
        },
        phase_ms: 30_000,
        gloo: false,
    };
    let mac = |i: usize| pair.mac(i).map_err(|e| e.to_string());
    dpdk.into_iter()
        .enumerate()
        .map(|(rank, dpdk)| {
            let mut config = host_config(&spec, rank);
            let other = 1 - rank;
            config.local.ip = Pair::ip(rank);
            config.local.path_addresses = vec![Pair::ip(rank)];
            config.local.mac = mac(rank)?;
            config.peers[0].ip = Pair::ip(other);
            config.peers[0].paths = vec![Pair::ip(other)];
            config.peers[0].next_hop_mac = mac(other)?;
            if let Some(dpdk) = dpdk {
                config.job.datapath.kind = DatapathKind::Dpdk;
                config.dpdk = dpdk;
            }
            Ok(config)
        })
        .collect()
}

/// Whether `system` runs DPDK's memif: the two DPDK processes share memory, and only
/// the control channel crosses the veth.
fn memif(system: &System) -> bool {
    system.vdev == Some(VdevDriver::Memif)
}

/// The memif socket of a run in `scratch` (a file both namespaces see).
fn memif_socket(scratch: &Path, what: &str) -> std::path::PathBuf {
    scratch.join(format!("{what}.memif"))
}

/// Host `rank`'s vdev for `driver`: over the veth end `eth0`, or for memif a shared
/// memory interface on `socket` (host 1 the server, host 0 the client) with the veth's
/// MAC, so frames are addressed as on the veth.
fn vdev(driver: VdevDriver, pair: &Pair, rank: usize, socket: &Path) -> Result<Vdev, String> {
    let vdev = Vdev::new(driver, 0);
    let built = if driver != VdevDriver::Memif {
        vdev.with("iface", "eth0")
    } else {
        let mac = pair.mac(rank).map_err(|e| e.to_string())?;
        let role = if rank == 1 { "server" } else { "client" };
        vdev.with("role", role)
            .and_then(|v| v.with("socket", socket.display()))
            .and_then(|v| v.with("socket-abstract", "no"))
            .and_then(|v| v.with("mac", mac))
    };
    built.map_err(|e| e.to_string())
}

/// The two hosts' configurations for `system` on `pair`, with one RX queue (the
/// per-core numbers are about one lcore's work), host i's DPDK RX lcore sleeping
/// `idle_us[i]` µs when idle (0: busy polling); a memif pair meets on `socket`.
fn configs(
    pair: &Pair,
    system: &System,
    idle_us: [u32; 2],
    socket: &Path,
) -> Result<Vec<TransportConfig>, String> {
    let dpdk = |rank: usize| -> Result<Option<DpdkOptions>, String> {
        let Some(driver) = &system.vdev else {
            return Ok(None);
        };
        Ok(Some(DpdkOptions {
            vdev: Some(vdev(*driver, pair, rank, socket)?),
            file_prefix: Some(pair.host(rank)),
            no_huge: true,
            rx_idle_sleep_us: idle_us[rank],
            inline_rx: system.inline_rx,
            ..DpdkOptions::default()
        }))
    };
    let mut configs = pair_configs(pair, [dpdk(0)?, dpdk(1)?])?;
    for config in &mut configs {
        config.job.datapath.rx_queues = 1;
    }
    Ok(configs)
}

fn write_configs(
    configs: &[TransportConfig],
    scratch: &Path,
    what: &str,
) -> Result<Vec<std::path::PathBuf>, String> {
    configs
        .iter()
        .enumerate()
        .map(|(rank, config)| {
            let path = scratch.join(format!("{what}-h{rank}.json"));
            std::fs::write(&path, serde_json::to_string(config).expect("serializes"))
                .map(|()| path)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Runs the comparison; `endhost` is the binary to start on each host.
pub fn run(spec: &PairSpec, endhost: &Path, scratch: &Path) -> Result<PairReport, String> {
    let exe = endhost.to_str().ok_or("a non-UTF-8 binary path")?;
    let mut report = PairReport {
        packets: spec.packets,
        payload: spec.payload,
        size_bytes: spec.size_bytes,
        results: Vec::new(),
    };
    for (index, system) in spec.systems.iter().enumerate() {
        let pair = Pair::create().map_err(|e| format!("cannot build the veth pair: {e}"))?;
        // The blast: the receiver busy-polls (its lcore, or inline its datapath thread),
        // the idle sender's lcore sleeps. The allreduce: both hosts receive, on two
        // shared cores, so both sleep briefly when idle.
        // A socket file of its own for each run: DPDK's memif server never removes its
        // file, and binding to one left behind fails.
        let blast_socket = memif_socket(scratch, &format!("blast{index}"));
        let allreduce_socket = memif_socket(scratch, &format!("allreduce{index}"));
        let files = write_configs(
            &configs(&pair, system, [1_000, 0], &blast_socket)?,
            scratch,
            "blast",
        )?;
        let allreduce_files = write_configs(
            &configs(&pair, system, [50, 50], &allreduce_socket)?,
            scratch,
            "allreduce",
        )?;
        let blast = |rank: usize, role: &str| {
            pair.command(rank, exe)
                .args(["bench", "blast", "--role", role, "--config"])
                .arg(&files[rank])
                .args(["--packets", &spec.packets.to_string()])
                .args(["--payload", &spec.payload.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start endhost: {e}"))
        };
        let mut receiver = blast(1, "receive")?;
        // A memif server's link comes up when its client connects (the client waits
        // for the server to listen): the receiver is ready only once the sender runs.
        let early_sender = if memif(system) {
            Some(blast(0, "send")?)
        } else {
            None
        };
        let mut lines = BufReader::new(receiver.stdout.take().expect("piped")).lines();
        match lines.next() {
            Some(Ok(line)) if line == "ready" => {}
            other => {
                let _ = receiver.kill();
                if let Some(mut sender) = early_sender {
                    let _ = sender.kill();
                }
                return Err(format!(
                    "{}: the receiver did not start: {other:?}",
                    system.name()
                ));
            }
        }
        let sender = match early_sender {
            Some(sender) => sender,
            None => blast(0, "send")?,
        };
        let sent = sender.wait_with_output().map_err(|e| e.to_string())?;
        let received = lines.next().and_then(Result::ok).unwrap_or_default();
        let _ = receiver.wait();
        let end = |text: &str, who: &str| {
            serde_json::from_str::<BlastEnd>(text.trim())
                .map_err(|e| format!("{}: the {who} printed {text:?} ({e})", system.name()))
        };
        let sender_end = end(&String::from_utf8_lossy(&sent.stdout), "sender")?;
        let receiver_end = end(&received, "receiver")?;
        let run = |rank: usize| {
            pair.command(rank, exe)
                .args(["run", "--json", "--config"])
                .arg(&allreduce_files[rank])
                .args(["--iterations", &spec.iterations.to_string()])
                .args(["--size", &spec.size_bytes.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start endhost: {e}"))
        };
        let children = vec![run(0)?, run(1)?];
        let deadline = Instant::now() + Duration::from_secs(60 + 10 * u64::from(spec.iterations));
        let output = collect(children, deadline)
            .map_err(|e| format!("{}: allreduce: {e}", system.name()))?;
        let (seconds, _) = times(&output);
        let mut sorted = seconds.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
        report.results.push(SystemReport {
            system: system.name(),
            sender: sender_end,
            receiver: receiver_end,
            allreduce_seconds: seconds,
            allreduce_gbit: spec.size_bytes as f64 * 8.0 / median / 1e9,
        });
        for rank in 0..2 {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", pair.host(rank)));
        }
    }
    Ok(report)
}

/// CPU time of this process so far (all threads), seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid output for this process.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// One end of a blast (`endhost bench blast`): the sender queues `packets` datagrams of
/// `payload` bytes to its peer as fast as the datapath takes them; the receiver prints
/// `ready`, then counts until it has them all or a second passes without any.
pub fn blast(
    config: &TransportConfig,
    send: bool,
    packets: u64,
    payload: usize,
) -> Result<BlastEnd, String> {
    let bind = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, config.job.ports.data);
    let mut datapath = AnyDatapath::open(config, bind).map_err(|e| e.to_string())?;
    let to = SocketAddrV4::new(config.peers[0].ip, config.job.ports.data);
    let (cpu0, tsc0, start) = (cpu_seconds(), tsc(), Instant::now());
    let mut count = 0u64;
    let mut first: Option<(Instant, f64)> = None;
    let mut last = start;
    // CPU time at the last arrival, sampled every few thousand datagrams: the idle
    // second a receiver waits at the end is not part of its cost.
    let (mut cpu_last, mut sampled_at) = (cpu0, 0u64);
    if send {
        let datagram = vec![0x5a; payload];
        while count < packets {
            datapath
                .queue(to, 0, &datagram)
                .map_err(|e| format!("send: {e}"))?;
            count += 1;
            if count.is_multiple_of(1024) {
                datapath.flush().map_err(|e| format!("send: {e}"))?;
            }
        }
        datapath.flush().map_err(|e| format!("send: {e}"))?;
        last = Instant::now();
        cpu_last = cpu_seconds();
        first = Some((start, cpu0));
    } else {
        println!("ready");
        let idle = crate::event_loop::Wake::new().map_err(|e| e.to_string())?;
        loop {
            let n = datapath
                .receive(&mut |_, _, _| {})
                .map_err(|e| format!("receive: {e}"))?;
            if n > 0 {
                if first.is_none() {
                    first = Some((Instant::now(), cpu_seconds()));
                }
                count += n as u64;
                last = Instant::now();
                if count - sampled_at >= 4096 || count >= packets {
                    cpu_last = cpu_seconds();
                    sampled_at = count;
                }
            }
            if count >= packets || (first.is_some() && last.elapsed() > Duration::from_secs(1)) {
                break;
            }
            if first.is_none() && start.elapsed() > Duration::from_secs(30) {
                return Err("no datagram arrived in 30 s".into());
            }
            if n == 0 {
                datapath
                    .wait(idle.fd(), Some(Duration::from_millis(10)))
                    .map_err(|e| format!("wait: {e}"))?;
            }
        }
    }
    let (began, cpu_began) = first.unwrap_or((start, cpu0));
    let tsc_hz = (tsc() - tsc0) as f64 / start.elapsed().as_secs_f64();
    Ok(BlastEnd {
        packets: count,
        seconds: (last - began).as_secs_f64().max(1e-9),
        cpu_seconds: cpu_last - cpu_began,
        tsc_hz,
    })
}
