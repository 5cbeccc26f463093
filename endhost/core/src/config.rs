//! The configuration one host's transport runs with, as `mltctl plan --host` writes it.
//!
//! Defaults are the values of the MLT paper (§4.2.3, §5.1) and OptiReduce's notes;
//! the inventory may override each of them.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addr::{MacAddr, PciAddr};
use crate::vdev::Vdev;

/// Everything one host needs to join a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportConfig {
    pub job: JobConfig,
    pub rank: u32,
    pub local: LocalConfig,
    /// Every other rank, in rank order, as this host reaches it.
    pub peers: Vec<PeerConfig>,
    /// How this host starts DPDK, when the job's datapath is DPDK.
    #[serde(default)]
    pub dpdk: DpdkOptions,
    /// Where this host keeps the job's shared key (`mltctl launch` writes it over SSH,
    /// 0600): every peer must prove it at the control channel's HELLO. Without one,
    /// peers are believed from their configured addresses alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<std::path::PathBuf>,
}

/// This host's DPDK settings: the EAL's arguments and where next-hop MACs come from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DpdkOptions {
    /// A virtual device to use instead of the NIC at `local.pci`, as EAL's `--vdev`
    /// takes it: `net_af_packet0,iface=eth0,qpairs=4`, `net_af_xdp0,iface=eth0`, …
    /// (read into typed parts: see [`Vdev`]).
    pub vdev: Option<Vdev>,
    /// EAL `--file-prefix` (one per DPDK process on a machine); default the host name.
    pub file_prefix: Option<String>,
    /// First CPU of the EAL's lcores (OptiReduce's GLOO_DPDK_THREADS_OFFSET): the main
    /// lcore there, then one lcore per RX queue (none with `inline_rx`). Default: the
    /// first of `local.cores`, else 0.
    pub threads_offset: Option<u32>,
    /// Run in ordinary memory instead of hugepages (EAL `--no-huge`).
    pub no_huge: bool,
    /// EAL memory in MiB (`-m`). Default: what the mempool needs with `no_huge`, and
    /// EAL's own growth with hugepages.
    pub memory_mb: Option<u32>,
    /// The `IP=MAC` file with the next-hop MAC of every address this host sends to;
    /// without it, each peer's `next_hop_mac`.
    pub ip_mac: Option<std::path::PathBuf>,
    /// Microseconds an idle RX lcore (inline: the datapath thread) sleeps between polls;
    /// 0 (default) busy-polls, as on dedicated cores — inline, that keeps the datapath
    /// thread at a full core even between jobs.
    pub rx_idle_sleep_us: u32,
    /// Poll the RX queues from the datapath thread itself, run to completion, instead
    /// of from an lcore per queue that hands frames over: one thread fewer, no handover,
    /// mbufs reused while still in cache. The thread then polls while it waits.
    pub inline_rx: bool,
    /// Put the port in flow-isolated mode with rules that claim only the data port's
    /// UDP traffic, so the kernel keeps the rest of a NIC it shares with DPDK (mlx5).
    pub isolate: bool,
    /// Further EAL arguments, passed as they are.
    pub eal_args: Vec<String>,
}

/// Settings shared by every host of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobConfig {
    /// The job: peers' HELLOs must name it; data packets carry its low byte (the job
    /// tag), and packets with another are dropped and counted.
    pub job_id: u32,
    pub world_size: u32,
    /// Largest fraction of a tensor that may be lost (p); 0 means exact delivery.
    pub loss_bound: f64,
    pub collective: Collective,
    pub tagging: Tagging,
    pub rate_control: RateControl,
    pub timeouts: Timeouts,
    pub ports: Ports,
    pub datapath: Datapath,
    /// Largest IP packet on the data NIC.
    pub mtu: u16,
    /// Training processes per host; the host's one transport serves them all (sums
    /// their contributions before allreducing across hosts).
    #[serde(default = "one_local_rank")]
    pub local_ranks: u32,
}

fn one_local_rank() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Collective {
    /// Ring allreduce.
    Ring,
    /// Transpose allreduce: reduce-scatter and all-gather as two all-to-all rounds.
    Transpose,
    /// Sharded parameter server.
    Ps,
}

/// How packets are marked for the switches (MLT §4.2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tagging {
    /// DSCP of the transport's control traffic (STOP, PROBE, bitmaps, ACKs).
    pub control_dscp: u8,
    /// Number of layers the model has; layer indices run from 0 (front) upwards.
    pub layers: u32,
    /// Gradient classes, highest priority (front layers) first.
    pub classes: Vec<ClassTag>,
    pub importance: Importance,
}

/// One traffic class: the layers it carries and how their packets are marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassTag {
    pub class: u8,
    pub dscp: u8,
    pub queue: u8,
    pub first_layer: u32,
    pub last_layer: u32,
}

/// Which packets are sent ECN-capable (important).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Importance {
    /// Quantile of sampled |gradient| used as the threshold; 0.5 is the median, so about
    /// this fraction of packets is unimportant (θ in MLT Appendix B).
    pub quantile: f64,
    /// Fraction of a tensor's gradients sampled to estimate the threshold.
    pub sample_fraction: f64,
}

impl Default for Importance {
    fn default() -> Self {
        Importance {
            quantile: 0.5,
            sample_fraction: 0.05,
        }
    }
}

/// TIMELY-like rate control (MLT §4.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateControl {
    /// Below this RTT the rate grows additively.
    pub t_low_us: f64,
    /// Above this RTT the rate shrinks multiplicatively.
    pub t_high_us: f64,
    /// Additive increase step.
    pub alpha_mbps: f64,
    /// Multiplicative decrease factor.
    pub beta: f64,
    /// The sender asks for an acknowledgement of every this many first-pass data
    /// packets to a peer (an RTT sample).
    pub ack_every: u32,
}

impl Default for RateControl {
    fn default() -> Self {
        RateControl {
            t_low_us: 12.5,
            t_high_us: 125.0,
            alpha_mbps: 40.0,
            beta: 0.8,
            ack_every: 10,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeouts {
    /// Hard limit for one phase of a collective.
    pub phase_ms: u32,
    /// OptiReduce-style early exit: a receive may end short of 1 − p once its sender's
    /// first pass is over and the rest is late (a tail cut). Off by default, so every
    /// receive gets at least 1 − p (MLT §4.2.3).
    pub early_exit: bool,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            phase_ms: 10_000,
            early_exit: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ports {
    /// UDP port of data packets.
    pub data: u16,
    /// TCP port of the reliable control channel.
    pub control: u16,
}

impl Default for Ports {
    fn default() -> Self {
        Ports {
            data: 11000,
            control: 11100,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Datapath {
    pub kind: DatapathKind,
    pub rx_queues: u16,
    pub rx_ring: u16,
    pub tx_ring: u16,
    /// How a DPDK host's NIC is given to DPDK (bootstrap binds it).
    #[serde(default)]
    pub driver: DpdkDriver,
}

impl Default for Datapath {
    fn default() -> Self {
        Datapath {
            kind: DatapathKind::Udp,
            rx_queues: 4,
            rx_ring: 8192,
            tx_ring: 128,
            driver: DpdkDriver::default(),
        }
    }
}

/// The kernel driver a DPDK host's NIC is bound to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DpdkDriver {
    /// vfio-pci (needs the IOMMU): DPDK owns the NIC and the kernel loses its interface.
    #[default]
    VfioPci,
    /// NVIDIA ConnectX, flow bifurcation: the NIC stays with mlx5_core and keeps its
    /// kernel interface, which DPDK's mlx5 PMD shares.
    Mlx5,
    /// DPDK's `net_af_packet` virtual device over the NIC's kernel interface: no IOMMU,
    /// hugepages or binding, and the kernel keeps the NIC (ARP, the control channel).
    /// Slower than a PMD that owns the NIC; for labs and NICs DPDK has no driver for.
    AfPacket,
    /// DPDK's `net_af_xdp` virtual device over the NIC's kernel interface, with our XDP
    /// program: only the data port's UDP goes to DPDK (kernel bypass on any NIC with
    /// XDP), everything else stays with the kernel. No IOMMU, hugepages or binding;
    /// the NIC needs as many queues as the transport's RX queues.
    AfXdp,
}

impl DpdkDriver {
    /// The Linux driver the NIC is bound to (`/sys/bus/pci/drivers/NAME`); none when
    /// DPDK reaches the NIC through its kernel interface.
    pub fn kernel_driver(self) -> Option<&'static str> {
        match self {
            DpdkDriver::VfioPci => Some("vfio-pci"),
            DpdkDriver::Mlx5 => Some("mlx5_core"),
            DpdkDriver::AfPacket | DpdkDriver::AfXdp => None,
        }
    }
}

impl Datapath {
    /// 2 MiB hugepages the DPDK datapath needs: a mempool of one mbuf per ring slot
    /// (2 KiB data room plus headroom and the mbuf header, ~2.3 KiB), doubled for
    /// DPDK's own memzones and per-lcore caches.
    pub fn hugepages_2m(&self) -> u32 {
        let mbufs = u64::from(self.rx_queues) * u64::from(self.rx_ring) + u64::from(self.tx_ring);
        let bytes = 2 * mbufs * 2432;
        u32::try_from(bytes.div_ceil(2 << 20))
            .unwrap_or(u32::MAX)
            .max(64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatapathKind {
    /// Kernel UDP sockets; runs anywhere.
    Udp,
    /// DPDK poll-mode driver on the data NIC.
    Dpdk,
}

impl DatapathKind {
    /// As people write it: "UDP", "DPDK".
    pub fn label(self) -> &'static str {
        match self {
            DatapathKind::Udp => "UDP",
            DatapathKind::Dpdk => "DPDK",
        }
    }
}

/// This host's own data NIC and resources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalConfig {
    pub name: String,
    pub nic: String,
    pub pci: PciAddr,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// Speed of the link to the leaf; rate control starts here.
    pub line_rate_mbps: u64,
    /// Addresses this host answers on, one per reachable spine.
    pub path_addresses: Vec<Ipv4Addr>,
    pub cores: Vec<u32>,
}

/// Another rank, as seen from this host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerConfig {
    pub rank: u32,
    pub name: String,
    /// Control channel address and the data address for peers in the same rack.
    pub ip: Ipv4Addr,
    /// Destination MAC for every packet to this peer: the peer itself in the same rack,
    /// the rack gateway otherwise.
    pub next_hop_mac: MacAddr,
    /// Data addresses to spray packets over; one per usable spine, or `ip` alone
    /// inside a rack.
    pub paths: Vec<Ipv4Addr>,
}
