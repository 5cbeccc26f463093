use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use endhost::agent::dpdk::Sysfs;
use endhost::agent::{self, HostNetworkPlan};
use endhost::bench::datapath::{PairSpec, System};
use endhost::bench::{self, BenchSpec};
use endhost::collective::Algorithm;
use endhost::config::{Collective, DatapathKind, RateControl, TransportConfig};
use endhost::daemon;
use endhost::netns::FabricSpec;
use endhost::sync::bpawr::Knobs;
use endhost::sync::cdf::RuntimeCdf;
use endhost::sync::policy::{AllReduce, PartialReduce, Policy, Scheme};
use endhost::sync::selective::SelectiveReduce;
use endhost::sync::service;
use endhost::sync::worker::{self, WorkerOptions};
use endhost::{Options, Transport, workload};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  error: a file, the fabric, a peer or a collective failed (the message says which)
  2  the command line is wrong
  3  (configure) the plan file is invalid; nothing was changed";

/// The end-host transport of mltctl: bounded-loss collectives over UDP, with per-packet
/// DSCP/ECN tagging, TIMELY-like rate control and path spraying (MLT).
#[derive(Parser)]
#[command(name = "endhost", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Join the job and serve collectives to this host's processes (a Unix socket).
    ///
    /// FILE is the host's transport configuration (`mltctl plan --host NAME`). The
    /// transport connects to every peer (waiting --connect-timeout for them), then
    /// listens on --socket; a process there asks for allreduces (see `endhost
    /// allreduce`), every rank in the same order. SIGTERM or SIGINT end it. With
    /// --detach it starts itself in the background, writes --pid-file and returns;
    /// `endhost status --wait` says when it is ready, `endhost stop` stops it.
    #[command(after_help = EXIT_CODES)]
    Serve {
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        #[arg(long, value_name = "FILE")]
        pid_file: Option<PathBuf>,
        /// Seconds to wait for every peer to come up.
        #[arg(long, default_value_t = 60)]
        connect_timeout: u64,
        /// Run in the background, output appended to --log.
        #[arg(long, requires_all = ["pid_file", "log"])]
        detach: bool,
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
    },
    /// Ask a launched transport who it is; with --wait, wait until it answers.
    #[command(after_help = EXIT_CODES)]
    Status {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        /// Seconds to wait for the transport to answer (0: ask once).
        #[arg(long, value_name = "SECS", default_value_t = 0)]
        wait: u64,
        /// Give up early if the process in this file has exited.
        #[arg(long, value_name = "FILE")]
        pid_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Stop a launched transport (SIGTERM, then SIGKILL after --grace seconds).
    /// Stopping one that is not running succeeds.
    #[command(after_help = EXIT_CODES)]
    Stop {
        #[arg(long, value_name = "FILE")]
        pid_file: PathBuf,
        #[arg(long, value_name = "SECS", default_value_t = 10)]
        grace: u64,
    },
    /// Run self-checking allreduces through a launched transport, as a training
    /// process would: every rank must run it with the same --size and --iterations.
    /// Rank r sends (r+1)·m(k); each iteration prints the time, the fraction delivered
    /// and the fraction of values that are the exact sum.
    #[command(after_help = EXIT_CODES)]
    Allreduce {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        #[arg(long, default_value = "4MiB", value_parser = bench::parse_size)]
        size: u64,
        #[arg(long, default_value_t = 1)]
        iterations: u32,
        #[arg(long)]
        json: bool,
    },
    /// Make this host's network match its part of the plan, through netlink.
    ///
    /// FILE is what `mltctl plan -i INVENTORY --host NAME --network` prints (and what
    /// `mltctl bootstrap` uploads): the data NIC's MTU, its address and path addresses,
    /// static neighbours (the rack gateway and the rack's other hosts) and routes to the
    /// other racks and the path pool through the gateway. Only the difference is
    /// applied, then read back and verified; on any failure this run's changes are
    /// undone. Everything added carries protocol 77 (`ip route show proto 77`): entries
    /// the plan no longer has are removed if they carry it, and entries anyone else made
    /// are never changed (one that contradicts the plan stops the run, unchanged). With
    /// a `dpdk` section it also checks the IOMMU, reserves hugepages and binds the NIC.
    #[command(after_help = EXIT_CODES)]
    Configure {
        #[arg(long, value_name = "FILE")]
        plan: PathBuf,
        /// Report what would change; change nothing.
        #[arg(long)]
        check: bool,
        /// List every change (made, or with --check to be made).
        #[arg(long)]
        diff: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Join the job a host configuration describes and run allreduces that check
    /// themselves.
    ///
    /// FILE is what `mltctl plan -i INVENTORY --host NAME` prints. Every rank of the job
    /// must run this; each waits for the others to come up (--connect-timeout). Then
    /// --iterations allreduces of --size bytes run, each after a barrier. Each rank's
    /// input is known to all (rank r sends (r+1)·m(k), magnitudes varying by packet), so
    /// each prints the time, the fraction delivered and the fraction of values that are
    /// the exact sum. Use it to check a fabric before training, or to measure it.
    #[command(after_help = EXIT_CODES)]
    Run {
        /// The host's transport configuration (JSON).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Allreduces to run.
        #[arg(long, default_value_t = 1)]
        iterations: u32,
        /// Bytes per allreduce (f32 values): 64MiB, 64MB, 1048576, …
        #[arg(long, default_value = "64MiB", value_parser = bench::parse_size)]
        size: u64,
        /// Override the job's collective.
        #[arg(long, value_enum)]
        collective: Option<CollectiveArg>,
        /// Override the job's loss bound p (0: exact delivery).
        #[arg(long)]
        loss_bound: Option<f64>,
        /// Seconds to wait for every peer to come up.
        #[arg(long, default_value_t = 60)]
        connect_timeout: u64,
        /// Override the job's hard per-phase timeout, ms.
        #[arg(long)]
        phase_ms: Option<u32>,
        /// Spread the tensor over this many layers for tagging [default: the job's].
        #[arg(long)]
        layers: Option<u16>,
        /// One JSON object per line: each iteration, then the counters.
        #[arg(long)]
        json: bool,
    },
    /// Run the synchronization controller: workers connect, it decides who syncs.
    ///
    /// Workers (`endhost worker`, or a launcher speaking the same JSON lines) report
    /// ready after each round with their computation time and bandwidth; the controller
    /// answers with launches (members, staleness weights) by the --scheme rule: Selective
    /// Reduce (BAG + BPAWR, Algorithm 3; the runtime distribution is learned from the
    /// reports), partial reduce or all reduce. It decides after every ready report and
    /// every Δt without one. A worker whose connection closes is dropped from every
    /// decision. Prints `listening on ADDR`, then one JSON line per launch.
    #[command(after_help = EXIT_CODES)]
    Controller {
        /// Where workers connect. A non-loopback address needs a token (--token-file
        /// or MLT_CONTROLLER_TOKEN), so that only the job's workers can join.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7700")]
        listen: std::net::SocketAddr,
        /// A file holding the shared token workers must present (or set
        /// MLT_CONTROLLER_TOKEN; never on the command line, where `ps` shows it).
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "selective-reduce")]
        scheme: Scheme,
        /// p: the smallest group that may synchronize.
        #[arg(long, default_value_t = 2)]
        min_group: usize,
        /// η: BAG extends a group down to (1 − η) of its p-th bandwidth.
        #[arg(long, default_value_t = 0.3)]
        eta: f64,
        /// θ: a replacement must save more than θ·Δt to be worth waiting for.
        #[arg(long, default_value_t = 1.0)]
        theta: f64,
        /// Δt, the waiting slot.
        #[arg(long, value_name = "MS", default_value_t = 50)]
        delta_t_ms: u64,
        /// The model's size (what one synchronization moves per worker).
        #[arg(long, default_value = "500MB", value_parser = bench::parse_size)]
        model: u64,
        /// c: every c-th synchronization is a full allreduce of all workers.
        #[arg(long, value_name = "C")]
        full_every: Option<u64>,
    },
    /// A training worker under the controller: compute, report ready, sync, repeat.
    ///
    /// The computation is a sleep (--compute-ms ± --jitter, deterministic per rank and
    /// round). With --config, each launch is a real weighted allreduce over exactly the
    /// launched group through the transport, checked against the known inputs; without,
    /// only the controller protocol runs. Prints one line (JSON with --json) per sync.
    #[command(after_help = EXIT_CODES)]
    Worker {
        #[arg(long, value_name = "ADDR")]
        controller: std::net::SocketAddr,
        /// A file holding the controller's token (or set MLT_CONTROLLER_TOKEN).
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// This worker's rank (the job rank when --config is given).
        #[arg(long)]
        rank: Option<u32>,
        /// The bandwidth this worker reports: 10gbit, 800mbit, …
        #[arg(long, default_value = "10gbit", value_parser = bench::parse_rate)]
        bandwidth: u64,
        #[arg(long, value_name = "MS", default_value_t = 100)]
        compute_ms: u64,
        #[arg(long, default_value_t = 0.3)]
        jitter: f64,
        #[arg(long, default_value_t = 10)]
        rounds: u32,
        /// Synchronize through the transport with this host configuration.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Bytes per synchronization (with --config).
        #[arg(long, default_value = "1MiB", value_parser = bench::parse_size)]
        size: u64,
        /// Seconds to wait for a launch.
        #[arg(long, default_value_t = 60)]
        launch_timeout: u64,
        #[arg(long)]
        json: bool,
    },
    /// Measure the transport on a namespace fabric built for the purpose.
    #[command(subcommand, after_help = EXIT_CODES)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Allreduce time against the link-rate optimum, optionally beside gloo.
    ///
    /// Builds --hosts network namespaces behind one bridge "switch" namespace, limits
    /// every switch port to --rate with tbf (its buffer: --switch-buffer-ms), drops
    /// --loss percent of all packets at random on the switch (nftables), runs `endhost run` on every host, then the same with gloo
    /// (torch.distributed, Debian's python3-torch) if --baseline gloo, removes the
    /// fabric and prints median and p99 times. Needs root.
    #[command(after_help = EXIT_CODES)]
    Allreduce {
        #[arg(long, default_value_t = 4)]
        hosts: usize,
        /// Bytes per allreduce: 64MiB, 64MB, …
        #[arg(long, default_value = "64MiB", value_parser = bench::parse_size)]
        size: u64,
        /// Link rate: 1gbit, 100mbit, …
        #[arg(long, default_value = "1gbit", value_parser = bench::parse_rate)]
        rate: u64,
        /// Packets dropped at random by the switch, percent.
        #[arg(long, default_value_t = 0.0)]
        loss: f64,
        #[arg(long, value_enum, default_value = "ring")]
        collective: CollectiveArg,
        /// Loss bound p of the transport.
        #[arg(long, default_value_t = 0.0)]
        loss_bound: f64,
        #[arg(long, default_value_t = 20)]
        iterations: u32,
        /// Switch port buffer (tbf latency on the switch's ports), ms; 0: no shaping.
        #[arg(long, default_value_t = 50)]
        switch_buffer_ms: u32,
        /// Shape the hosts' side of each link too, with this buffer (ms). 0, the
        /// default: hosts send as fast as they like and the switch ports are the
        /// bottleneck, so bursts meet the switch buffer as they would on a fabric.
        #[arg(long, default_value_t = 0)]
        host_buffer_ms: u32,
        /// Rate control: below this RTT the rate grows (µs). MLT's default is 12.5 for a
        /// 24 µs-RTT datacenter; namespaces on a shared CPU see RTTs of milliseconds.
        #[arg(long, default_value_t = bench::T_LOW_US)]
        t_low_us: f64,
        /// Rate control: above this RTT the rate shrinks (µs); MLT's default is 125.
        #[arg(long, default_value_t = bench::T_HIGH_US)]
        t_high_us: f64,
        /// Run gloo on the same fabric too.
        #[arg(long, value_enum)]
        baseline: Option<Baseline>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The datapaths side by side on one veth pair: packets per second, per core and
    /// in CPU cycles per packet, then allreduce goodput.
    ///
    /// For each datapath (and, for DPDK, each --vdev driver), builds two namespaces
    /// joined by a veth pair, blasts --packets datagrams of --payload bytes from one to
    /// the other through the datapath alone (each end measures its CPU time, every
    /// thread included), then runs --iterations allreduces of --size through the whole
    /// transport. DPDK runs without hugepages on the vdev over the veth, its receiving
    /// lcore busy-polling. Needs root and ethtool.
    #[command(after_help = EXIT_CODES)]
    Datapath {
        /// Datapaths to compare, in order.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "udp,dpdk")]
        datapath: Vec<DatapathArg>,
        /// DPDK virtual-device drivers to run the DPDK datapath on.
        #[arg(long, value_delimiter = ',', default_value = "net_af_packet")]
        vdev: Vec<String>,
        #[arg(long, default_value_t = 2_000_000)]
        packets: u64,
        /// UDP payload bytes per datagram.
        #[arg(long, default_value_t = 1024)]
        payload: usize,
        /// Bytes per allreduce.
        #[arg(long, default_value = "64MiB", value_parser = bench::parse_size)]
        size: u64,
        #[arg(long, default_value_t = 5)]
        iterations: u32,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One end of `bench datapath`'s blast (run by it in each namespace).
    #[command(hide = true)]
    Blast {
        #[arg(long, value_enum)]
        role: BlastRole,
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        packets: u64,
        #[arg(long)]
        payload: usize,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum CollectiveArg {
    Ring,
    Transpose,
    Ps,
}

impl From<CollectiveArg> for Collective {
    fn from(c: CollectiveArg) -> Self {
        match c {
            CollectiveArg::Ring => Collective::Ring,
            CollectiveArg::Transpose => Collective::Transpose,
            CollectiveArg::Ps => Collective::Ps,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Baseline {
    Gloo,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DatapathArg {
    Udp,
    Dpdk,
}

#[derive(Clone, Copy, ValueEnum)]
enum BlastRole {
    Send,
    Receive,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Configure {
            plan,
            check,
            diff,
            json,
        } => return configure(&plan, check, diff, json),
        Command::Serve {
            config,
            socket,
            pid_file,
            connect_timeout,
            detach,
            log,
        } => match (detach, log.as_deref(), pid_file.as_deref()) {
            (true, Some(log), Some(pid_file)) => {
                let args: Vec<std::ffi::OsString> = std::env::args_os()
                    .skip(1)
                    .filter(|a| a != "--detach")
                    .collect();
                daemon::detach(&args, log, pid_file)
                    .map(|pid| println!("{pid}"))
                    .with_context(|| format!("cannot start the transport (log {})", log.display()))
            }
            _ => serve(&config, &socket, pid_file.as_deref(), connect_timeout),
        },
        Command::Status {
            socket,
            wait,
            pid_file,
            json,
        } => daemon::wait_ready(&socket, pid_file.as_deref(), Duration::from_secs(wait))
            .map_err(anyhow::Error::msg)
            .map(|status| {
                if json {
                    println!("{}", serde_json::to_string(&status).expect("serializable"));
                } else {
                    println!(
                        "{}: rank {} of {}, job {}, {:?} datapath, pid {}, {} allreduces",
                        status.host,
                        status.rank,
                        status.world_size,
                        status.job_id,
                        status.datapath,
                        status.pid,
                        status.allreduces
                    );
                }
            }),
        Command::Stop { pid_file, grace } => daemon::stop(&pid_file, Duration::from_secs(grace))
            .with_context(|| format!("cannot stop the transport in {}", pid_file.display()))
            .map(|stopped| match stopped {
                Some(pid) => println!("stopped {pid}"),
                None => println!("not running"),
            }),
        Command::Allreduce {
            socket,
            size,
            iterations,
            json,
        } => allreduce_client(&socket, size, iterations, json),
        Command::Run {
            config,
            iterations,
            size,
            collective,
            loss_bound,
            connect_timeout,
            phase_ms,
            layers,
            json,
        } => run(
            &config,
            RunOptions {
                iterations,
                size,
                collective,
                loss_bound,
                connect_timeout,
                phase_ms,
                layers,
                json,
            },
        ),
        Command::Controller {
            listen,
            token_file,
            scheme,
            min_group,
            eta,
            theta,
            delta_t_ms,
            model,
            full_every,
        } => controller_token(token_file.as_deref()).and_then(|token| {
            controller(
                listen,
                token,
                scheme,
                Knobs {
                    min_group,
                    eta,
                    theta,
                    delta_t: Duration::from_millis(delta_t_ms).as_secs_f64(),
                    model_bits: model as f64 * 8.0,
                },
                full_every,
            )
        }),
        Command::Worker {
            controller,
            token_file,
            rank,
            bandwidth,
            compute_ms,
            jitter,
            rounds,
            config,
            size,
            launch_timeout,
            json,
        } => controller_token(token_file.as_deref()).and_then(|token| {
            worker(
                rank,
                config.as_deref(),
                WorkerOptions {
                    controller,
                    rank: 0,
                    bandwidth_bps: bandwidth as f64 * 1e6,
                    compute: Duration::from_millis(compute_ms),
                    jitter,
                    rounds,
                    values: (size / 4) as usize,
                    launch_timeout: Duration::from_secs(launch_timeout),
                    token,
                },
                json,
            )
        }),
        Command::Bench(BenchCommand::Allreduce {
            hosts,
            size,
            rate,
            loss,
            collective,
            loss_bound,
            iterations,
            switch_buffer_ms,
            host_buffer_ms,
            t_low_us,
            t_high_us,
            baseline,
            json,
        }) => {
            let spec = BenchSpec {
                fabric: FabricSpec {
                    hosts,
                    rate_mbit: rate,
                    host_buffer_ms,
                    switch_buffer_ms,
                    loss_percent: loss,
                },
                size_bytes: size,
                iterations,
                collective: collective.into(),
                loss_bound,
                rate_control: RateControl {
                    t_low_us,
                    t_high_us,
                    ..RateControl::default()
                },
                phase_ms: 30_000,
                gloo: baseline.is_some(),
            };
            bench_allreduce(&spec, json)
        }
        Command::Bench(BenchCommand::Datapath {
            datapath,
            vdev,
            packets,
            payload,
            size,
            iterations,
            json,
        }) => {
            let systems = datapath
                .iter()
                .flat_map(|d| match d {
                    DatapathArg::Udp => vec![System {
                        kind: DatapathKind::Udp,
                        vdev: None,
                    }],
                    DatapathArg::Dpdk => vdev
                        .iter()
                        .map(|v| System {
                            kind: DatapathKind::Dpdk,
                            vdev: Some(v.clone()),
                        })
                        .collect(),
                })
                .collect();
            let spec = PairSpec {
                systems,
                packets,
                payload,
                size_bytes: size,
                iterations,
            };
            bench_datapath(&spec, json)
        }
        Command::Bench(BenchCommand::Blast {
            role,
            config,
            packets,
            payload,
        }) => read_config(&config).and_then(|config| {
            let end =
                bench::datapath::blast(&config, matches!(role, BlastRole::Send), packets, payload)
                    .map_err(anyhow::Error::msg)?;
            println!("{}", serde_json::to_string(&end)?);
            Ok(())
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("endhost: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn configure(path: &std::path::Path, check: bool, diff: bool, json: bool) -> ExitCode {
    let plan = match HostNetworkPlan::load(path) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("endhost: {e}");
            return ExitCode::from(3);
        }
    };
    let report = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(agent::configure(&plan, check, &Sysfs::default())),
        Err(e) => {
            eprintln!("endhost: {e}");
            return ExitCode::from(1);
        }
    };
    if json {
        println!("{}", serde_json::to_string(&report).expect("serializable"));
    } else {
        print!("{}", agent::render(&report, diff));
    }
    match report.status {
        agent::Status::Failed => ExitCode::from(1),
        agent::Status::Ok | agent::Status::Changed => ExitCode::SUCCESS,
    }
}

fn serve(
    config: &std::path::Path,
    socket: &std::path::Path,
    pid_file: Option<&std::path::Path>,
    connect_timeout: u64,
) -> anyhow::Result<()> {
    let config = read_config(config)?;
    if let Some(pid_file) = pid_file {
        daemon::write_pid(pid_file, std::process::id())
            .with_context(|| format!("cannot write {}", pid_file.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let options = Options {
            connect_timeout: Duration::from_secs(connect_timeout),
            bind: None,
        };
        let (rank, world) = (config.rank, config.job.world_size);
        let transport = Transport::start(config, options).await?;
        // A socket file left by a transport that died is in the way; a live one answers.
        if daemon::Client::connect(socket).is_ok() {
            anyhow::bail!("another transport already serves {}", socket.display());
        }
        let _ = std::fs::remove_file(socket);
        let listener = tokio::net::UnixListener::bind(socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        println!("ready: rank {rank} of {world} on {}", socket.display());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        let transport = daemon::serve(transport, listener, stop).await;
        transport.shutdown().await;
        println!("stopped");
        anyhow::Ok(())
    });
    let _ = std::fs::remove_file(socket);
    if let Some(pid_file) = pid_file {
        let _ = std::fs::remove_file(pid_file);
    }
    result
}

fn allreduce_client(
    socket: &std::path::Path,
    size: u64,
    iterations: u32,
    json: bool,
) -> anyhow::Result<()> {
    let mut client = daemon::Client::connect(socket)
        .with_context(|| format!("no transport answers on {}", socket.display()))?;
    let status = client.status()?;
    let values = (size / 4) as usize;
    for iteration in 0..iterations {
        let mut data = workload::input(status.rank, values);
        let reply = client.allreduce(&mut data, 0)?;
        if let Some(error) = reply.error {
            anyhow::bail!("allreduce {iteration}: {error}");
        }
        let exact = workload::exact_fraction(&data, status.world_size);
        if json {
            println!(
                "{}",
                serde_json::json!({"iteration": iteration, "rank": status.rank,
                    "seconds": reply.seconds, "delivered": reply.delivered, "exact": exact})
            );
        } else {
            println!(
                "iteration {iteration}: {:.3} s, {:.2}% delivered, {:.2}% exact",
                reply.seconds,
                reply.delivered * 100.0,
                exact * 100.0
            );
        }
    }
    Ok(())
}

fn read_config(path: &std::path::Path) -> anyhow::Result<TransportConfig> {
    let text = endhost::input::read_text(path, endhost::input::MAX_FILE_BYTES)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a host configuration", path.display()))
}

struct RunOptions {
    iterations: u32,
    size: u64,
    collective: Option<CollectiveArg>,
    loss_bound: Option<f64>,
    connect_timeout: u64,
    phase_ms: Option<u32>,
    layers: Option<u16>,
    json: bool,
}

/// The controller's shared token: from `file`, else MLT_CONTROLLER_TOKEN, else none.
fn controller_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let token = match file {
        Some(path) => endhost::input::read_text(path, 4096)
            .with_context(|| format!("cannot read the token file {}", path.display()))?
            .trim()
            .to_string(),
        None => match std::env::var("MLT_CONTROLLER_TOKEN") {
            Ok(token) => token.trim().to_string(),
            Err(_) => return Ok(None),
        },
    };
    anyhow::ensure!(!token.is_empty(), "the controller token is empty");
    Ok(Some(token))
}

fn controller(
    listen: std::net::SocketAddr,
    token: Option<String>,
    scheme: Scheme,
    knobs: Knobs,
    full_every: Option<u64>,
) -> anyhow::Result<()> {
    anyhow::ensure!(knobs.min_group >= 1, "--min-group must be at least 1");
    anyhow::ensure!((0.0..1.0).contains(&knobs.eta), "--eta must be in [0, 1)");
    anyhow::ensure!(knobs.delta_t > 0.0, "--delta-t-ms must be positive");
    anyhow::ensure!(
        token.is_some() || listen.ip().is_loopback(),
        "listening on {listen} without a token would let anyone on the network join the job: \
         give --token-file FILE or set MLT_CONTROLLER_TOKEN (workers present the same token)"
    );
    let policy: Box<dyn Policy> = match scheme {
        Scheme::AllReduce => Box::new(AllReduce::default()),
        Scheme::PartialReduce => Box::new(PartialReduce::new(knobs.min_group)),
        Scheme::SelectiveReduce => Box::new(SelectiveReduce::new(
            knobs,
            full_every,
            RuntimeCdf::new(RuntimeCdf::DEFAULT_CAPACITY),
            true,
        )),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        println!("listening on {}", listener.local_addr()?);
        let delta_t = Duration::from_secs_f64(knobs.delta_t);
        let access = service::Access { token };
        service::serve(listener, access, policy, delta_t, |at, launch| {
            let line = serde_json::to_string(&service::Logged {
                at_seconds: at,
                launch,
            })
            .expect("serializable");
            println!("{line}");
        })
        .await?;
        Ok(())
    })
}

fn worker(
    rank: Option<u32>,
    config: Option<&std::path::Path>,
    mut options: WorkerOptions,
    json: bool,
) -> anyhow::Result<()> {
    let config = config.map(read_config).transpose()?;
    options.rank = match (&config, rank) {
        (Some(c), Some(r)) if c.rank != r => {
            anyhow::bail!("--rank {r} but the configuration is rank {}", c.rank)
        }
        (Some(c), _) => c.rank,
        (None, Some(r)) => r,
        (None, None) => anyhow::bail!("give --rank (or --config)"),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let transport = match config {
            Some(c) => Some(Transport::start(c, Options::default()).await?),
            None => None,
        };
        let print = |s: &worker::Synced| {
            if json {
                println!("{}", serde_json::to_string(s).expect("serializable"));
            } else {
                println!(
                    "round {} sync {} with {:?}: waited {:.3} s, synced {:.3} s, {}",
                    s.round, s.sync, s.members, s.waited_s, s.sync_s, s.outcome
                );
            }
        };
        let result = worker::run(&options, transport.as_ref(), print).await;
        if let Some(t) = transport {
            t.shutdown().await;
        }
        result?;
        Ok(())
    })
}

fn run(path: &std::path::Path, options: RunOptions) -> anyhow::Result<()> {
    let mut config = read_config(path)?;
    if let Some(c) = options.collective {
        config.job.collective = c.into();
    }
    if let Some(p) = options.loss_bound {
        anyhow::ensure!((0.0..1.0).contains(&p), "--loss-bound must be in [0, 1)");
        config.job.loss_bound = p;
    }
    if let Some(ms) = options.phase_ms {
        config.job.timeouts.phase_ms = ms;
    }
    let layers = options
        .layers
        .unwrap_or(u16::try_from(config.job.tagging.layers).unwrap_or(u16::MAX));
    let (rank, world) = (config.rank, config.job.world_size);
    let values = (options.size / 4) as usize;
    let json = options.json;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let start = Options {
            connect_timeout: Duration::from_secs(options.connect_timeout),
            bind: None,
        };
        let transport = Transport::start(config, start).await?;
        let barrier = |t: &Transport| {
            let mut spec = t.allreduce_spec(u32::MAX, vec![0.0], 0);
            spec.algorithm = Algorithm::Ring;
            spec.loss_bound = 0.0;
            spec
        };
        transport.allreduce(barrier(&transport)).await?;
        let mut data = workload::input(rank, values);
        for iteration in 0..options.iterations {
            transport.allreduce(barrier(&transport)).await?;
            let mut spec = transport.allreduce_spec(0, data, 0);
            spec.layers = workload::layer_map(values, layers);
            let started = Instant::now();
            let done = transport.allreduce(spec).await?;
            let seconds = started.elapsed().as_secs_f64();
            let exact = workload::exact_fraction(&done.data, world);
            if json {
                println!(
                    "{}",
                    serde_json::json!({"iteration": iteration, "seconds": seconds,
                        "delivered": done.delivered, "exact": exact})
                );
            } else {
                println!(
                    "iteration {iteration}: {seconds:.3} s, {:.2}% delivered, {:.2}% exact",
                    done.delivered * 100.0,
                    exact * 100.0
                );
            }
            data = done.data;
            data.copy_from_slice(&workload::input(rank, values));
        }
        let counters = transport.counters().await?;
        transport.shutdown().await;
        if json {
            println!("{}", serde_json::json!({ "counters": counters }));
        } else {
            let sent: u64 = counters.peers.iter().map(|p| p.packets_sent).sum();
            let resent: u64 = counters.peers.iter().map(|p| p.packets_retransmitted).sum();
            println!(
                "packets sent {sent}, retransmitted {resent}, dropped as malformed or foreign {}",
                counters.dropped.total()
            );
        }
        anyhow::Ok(())
    })
}

fn bench_datapath(spec: &PairSpec, json: bool) -> anyhow::Result<()> {
    if let Some(why) = endhost::netns::unavailable() {
        anyhow::bail!("cannot build a veth pair: {why}");
    }
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let scratch = std::env::temp_dir().join(format!("endhost-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let report = bench::datapath::run(spec, &exe, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let report = report.map_err(anyhow::Error::msg)?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

fn bench_allreduce(spec: &BenchSpec, json: bool) -> anyhow::Result<()> {
    if let Some(why) = endhost::netns::unavailable() {
        anyhow::bail!("cannot build a namespace fabric: {why}");
    }
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    let scratch = std::env::temp_dir().join(format!("endhost-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let report = bench::run(spec, &exe, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let report = report.map_err(anyhow::Error::msg)?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    print!("{report}");
    Ok(())
}
