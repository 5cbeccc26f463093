//! `endhost bench`: measurements on namespace fabrics and veth pairs built for the
//! purpose (see `endhost::testbed`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use endhost::testbed::bench::datapath::{PairSpec, System};
use endhost::testbed::bench::{self, BenchSpec};
use endhost::testbed::netns::{self, FabricSpec};
use endhost_core::config::{DatapathKind, RateControl};
use endhost_core::vdev::VdevDriver;
use mlt_common::units;

use super::{Baseline, BlastRole, CollectiveArg, DatapathArg, RxPollingArg};

/// Measure the transport on a namespace fabric built for the purpose.
#[derive(clap::Subcommand)]
pub enum Command {
    Allreduce(AllreduceArgs),
    Datapath(DatapathArgs),
    Train(TrainArgs),
    Blast(BlastArgs),
}

/// MLT's accuracy result: a small model trained through the transport at several
/// loss bounds, with random loss at the switch, beside gloo.
///
/// Builds the namespace fabric of `bench allreduce` (--hosts behind one switch
/// namespace, ports shaped to --rate, --loss percent dropped at random on the
/// switch), then for each --loss-bounds value starts `endhost serve` on every host
/// and trains an MLP on scikit-learn's bundled digits with PyTorch DDP, its
/// gradients allreduced by the mlt_transport hook (endhost/python/examples/
/// train_digits.py, one process per host), then the same training on gloo. Prints
/// test accuracy per epoch and training time per epoch for each; --plot draws them.
/// Needs root, python3-torch, python3-sklearn (and python3-matplotlib for --plot).
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct TrainArgs {
    /// Hosts (network namespaces) behind the switch.
    #[arg(long, default_value_t = 4)]
    pub hosts: usize,
    /// Link rate: 1gbit, 100mbit, …
    #[arg(long, default_value = "1gbit", value_parser = units::mbps)]
    pub rate: u64,
    /// Packets dropped at random by the switch, percent.
    #[arg(long, default_value_t = 1.0)]
    pub loss: f64,
    /// The transport's loss bounds to train with, one run each.
    #[arg(long, value_delimiter = ',', default_value = "0,0.01,0.025")]
    pub loss_bounds: Vec<f64>,
    /// Epochs per run.
    #[arg(long, default_value_t = 20)]
    pub epochs: u32,
    /// Steps between exact re-syncs of the replicas' parameters (0: never).
    #[arg(long, default_value_t = 50)]
    pub resync_every: u32,
    /// Switch port buffer (tbf latency on the switch's ports), ms.
    #[arg(long, default_value_t = 50)]
    pub switch_buffer_ms: u32,
    /// Draw accuracy and time per epoch here (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Allreduce time against the link-rate optimum, optionally beside gloo.
///
/// Builds --hosts network namespaces behind one bridge "switch" namespace, limits
/// every switch port to --rate with tbf (its buffer: --switch-buffer-ms) and every
/// host's NIC too (--host-buffer-ms; 0: switch ports alone), drops
/// --loss percent of all packets at random on the switch (nftables), runs `endhost run` on every host, then the same with gloo
/// (torch.distributed, Debian's python3-torch) if --baseline gloo, removes the
/// fabric and prints median and p99 times. Needs root.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct AllreduceArgs {
    /// Hosts (network namespaces) behind the switch.
    #[arg(long, default_value_t = 4)]
    pub hosts: usize,
    /// Bytes per allreduce: 64MiB, 64MB, … Several, comma-separated
    /// (64KiB,1MiB,64MiB), sweep the sizes on one fabric and end with a table of
    /// them; --json then prints a list of reports, one per size.
    #[arg(long, default_value = "64MiB", value_parser = super::tensor_bytes, value_delimiter = ',')]
    pub size: Vec<u64>,
    /// Link rate: 1gbit, 100mbit, …
    #[arg(long, default_value = "1gbit", value_parser = units::mbps)]
    pub rate: u64,
    /// Packets dropped at random by the switch, percent.
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Collective the transport runs.
    #[arg(long, value_enum, default_value = "ring")]
    pub collective: CollectiveArg,
    /// Loss bound p of the transport.
    #[arg(long, default_value_t = 0.0)]
    pub loss_bound: f64,
    /// Allreduces to time.
    #[arg(long, default_value_t = 20)]
    pub iterations: u32,
    /// Switch port buffer (tbf latency on the switch's ports), ms; 0: no shaping.
    #[arg(long, default_value_t = 50)]
    pub switch_buffer_ms: u32,
    /// The hosts' side of each link is shaped too, as a NIC sends at line rate: its
    /// queue (tbf latency), ms. 0 shapes the switch ports alone, so hosts burst at
    /// veth speed into them.
    #[arg(long, default_value_t = 10)]
    pub host_buffer_ms: u32,
    /// Rate control: below this RTT the rate grows (µs). MLT's default is 12.5 for a
    /// 24 µs-RTT datacenter; namespaces on a shared CPU see RTTs of milliseconds.
    #[arg(long, default_value_t = bench::T_LOW_US)]
    pub t_low_us: f64,
    /// Rate control: above this RTT the rate shrinks (µs); MLT's default is 125.
    #[arg(long, default_value_t = bench::T_HIGH_US)]
    pub t_high_us: f64,
    /// Run gloo on the same fabric too.
    #[arg(long, value_enum)]
    pub baseline: Option<Baseline>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The datapaths side by side on one veth pair: packets per second, per core and
/// in CPU cycles per packet, then allreduce goodput.
///
/// For each datapath (and, for DPDK, each --vdev driver), builds two namespaces
/// joined by a veth pair, blasts --packets datagrams of --payload bytes from one to
/// the other through the datapath alone (each end measures its CPU time, every
/// thread included), then runs --iterations allreduces of --size through the whole
/// transport. DPDK runs without hugepages on the vdev over the veth, its receiving
/// lcore busy-polling. Needs root and ethtool.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct DatapathArgs {
    /// Datapaths to compare, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "udp,dpdk")]
    pub datapath: Vec<DatapathArg>,
    /// DPDK virtual-device drivers to run the DPDK datapath on: net_af_packet and
    /// net_af_xdp over the veth (af_xdp with our XDP program), net_memif between the two
    /// processes in shared memory (no kernel: our code's own cost per packet).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "net_af_packet,net_af_xdp,net_memif",
        value_parser = vdev_driver
    )]
    pub vdev: Vec<VdevDriver>,
    /// Who polls DPDK's RX queues, each compared on every --vdev: an lcore per queue
    /// handing frames to the datapath thread, or the datapath thread itself
    /// (`dpdk.inline_rx`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "lcores,inline"
    )]
    pub rx: Vec<RxPollingArg>,
    /// Datagrams to blast from one namespace to the other.
    #[arg(long, default_value_t = 2_000_000)]
    pub packets: u64,
    /// UDP payload bytes per datagram.
    #[arg(long, default_value_t = 1024)]
    pub payload: usize,
    /// Bytes per allreduce.
    #[arg(long, default_value = "64MiB", value_parser = super::tensor_bytes)]
    pub size: u64,
    /// Allreduces per datapath.
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One end of `bench datapath`'s blast (run by it in each namespace).
#[derive(clap::Args)]
#[command(hide = true)]
pub struct BlastArgs {
    /// This end: the sender or the receiver.
    #[arg(long, value_enum)]
    pub role: BlastRole,
    /// This end's transport configuration.
    #[arg(long)]
    pub config: PathBuf,
    /// Datagrams to send (or to expect).
    #[arg(long)]
    pub packets: u64,
    /// UDP payload bytes per datagram.
    #[arg(long)]
    pub payload: usize,
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Allreduce(args) => allreduce(args),
        Command::Datapath(args) => datapath(args),
        Command::Train(args) => train(args),
        Command::Blast(args) => blast(args),
    }
}

fn allreduce(args: AllreduceArgs) -> anyhow::Result<()> {
    let spec = BenchSpec {
        fabric: FabricSpec {
            hosts: args.hosts,
            rate_mbit: args.rate,
            host_buffer_ms: args.host_buffer_ms,
            switch_buffer_ms: args.switch_buffer_ms,
            loss_percent: args.loss,
        },
        size_bytes: args.size[0],
        iterations: args.iterations,
        collective: args.collective.into(),
        loss_bound: args.loss_bound,
        rate_control: RateControl {
            t_low_us: args.t_low_us,
            t_high_us: args.t_high_us,
            ..RateControl::default()
        },
        phase_ms: 30_000,
        gloo: args.baseline.is_some(),
    };
    if let Some(why) = netns::unavailable() {
        anyhow::bail!("cannot build a namespace fabric: {why}");
    }
    if let [_] = args.size[..] {
        report(args.json, |exe, scratch| bench::run(&spec, exe, scratch))
    } else {
        report(args.json, |exe, scratch| {
            bench::sweep(&spec, &args.size, exe, scratch)
        })
    }
}

fn train(args: TrainArgs) -> anyhow::Result<()> {
    if let Some(p) = args.loss_bounds.iter().find(|p| !(0.0..1.0).contains(*p)) {
        anyhow::bail!("--loss-bounds {p}: each must be at least 0 and below 1");
    }
    let spec = bench::train::TrainSpec {
        bench: BenchSpec {
            fabric: FabricSpec {
                hosts: args.hosts,
                rate_mbit: args.rate,
                host_buffer_ms: 0,
                switch_buffer_ms: args.switch_buffer_ms,
                loss_percent: args.loss,
            },
            size_bytes: 0,
            iterations: 0,
            collective: endhost_core::config::Collective::Ring,
            loss_bound: 0.0,
            rate_control: RateControl {
                t_low_us: bench::T_LOW_US,
                t_high_us: bench::T_HIGH_US,
                ..RateControl::default()
            },
            phase_ms: 30_000,
            gloo: true,
        },
        loss_bounds: args.loss_bounds,
        epochs: args.epochs,
        resync_every: args.resync_every,
    };
    if let Some(why) = netns::unavailable() {
        anyhow::bail!("cannot build a namespace fabric: {why}");
    }
    report(args.json, |exe, scratch| {
        let report = bench::train::run(&spec, exe, scratch)?;
        if let Some(out) = &args.plot {
            bench::train::plot(&report, out, scratch)?;
        }
        Ok(report)
    })
}

/// A DPDK virtual-device driver by DPDK's name for it.
fn vdev_driver(name: &str) -> Result<VdevDriver, String> {
    VdevDriver::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = VdevDriver::ALL.iter().map(|d| d.name()).collect();
            format!("one of {}", names.join(", "))
        })
}

fn datapath(args: DatapathArgs) -> anyhow::Result<()> {
    let systems = args
        .datapath
        .iter()
        .flat_map(|d| match d {
            DatapathArg::Udp => vec![System {
                kind: DatapathKind::Udp,
                vdev: None,
                inline_rx: false,
            }],
            DatapathArg::Dpdk => args
                .vdev
                .iter()
                .flat_map(|v| {
                    args.rx.iter().map(|rx| System {
                        kind: DatapathKind::Dpdk,
                        vdev: Some(*v),
                        inline_rx: *rx == RxPollingArg::Inline,
                    })
                })
                .collect(),
        })
        .collect();
    let spec = PairSpec {
        systems,
        packets: args.packets,
        payload: args.payload,
        size_bytes: args.size,
        iterations: args.iterations,
    };
    if let Some(why) = netns::unavailable() {
        anyhow::bail!("cannot build a veth pair: {why}");
    }
    report(args.json, |exe, scratch| {
        bench::datapath::run(&spec, exe, scratch)
    })
}

/// Runs a benchmark with this program as its hosts' transport and a scratch directory
/// (removed afterwards), and prints its report as text or JSON.
fn report<R: serde::Serialize + std::fmt::Display>(
    json: bool,
    run: impl FnOnce(&Path, &Path) -> Result<R, String>,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    // Scripts run as root from here: a fresh directory of our own, never a fixed name.
    let scratch = mlt_common::files::scratch_dir("endhost-bench-")?;
    let report = run(&exe, scratch.path());
    drop(scratch);
    let report = report.map_err(anyhow::Error::msg)?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

fn blast(args: BlastArgs) -> anyhow::Result<()> {
    let config = super::read_config(&args.config)?;
    let send = matches!(args.role, BlastRole::Send);
    let end = bench::datapath::blast(&config, send, args.packets, args.payload)
        .map_err(anyhow::Error::msg)?;
    println!("{}", serde_json::to_string(&end)?);
    Ok(())
}
