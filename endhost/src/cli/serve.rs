//! `endhost serve`: the launched transport, serving collectives over a Unix socket.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use endhost::daemon;
use endhost::{Options, Transport};

/// Join the job and serve collectives to this host's processes (a Unix socket).
///
/// FILE is the host's transport configuration (`mltctl plan --host NAME`). The
/// transport connects to every peer (waiting --connect-timeout for them), then
/// listens on --socket; a process there asks for allreduces (see `endhost
/// allreduce`), every rank in the same order. The socket is for the user who started
/// the transport (mode 0600), or also for --socket-group's members (0660). SIGTERM or
/// SIGINT end it. With
/// --detach it starts itself in the background, writes --pid-file and returns;
/// `endhost status --wait` says when it is ready, `endhost stop` stops it.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// This host's transport configuration (`mltctl plan --host NAME`).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Unix socket where training processes ask for allreduces.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Write the process id here (required with --detach).
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Let this group's members use the socket (mode 0660; default 0600, the owner only).
    #[arg(long, value_name = "GROUP")]
    pub socket_group: Option<String>,
    /// Seconds to wait for every peer to come up.
    #[arg(long, default_value_t = 60, value_parser = mlt_common::units::positive_seconds)]
    pub connect_timeout: u64,
    /// Seconds a client may take to send one request, from its first byte to its last
    /// (idle time between requests is not counted); a client that stalls mid-request is
    /// cut off.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = mlt_common::units::positive_seconds)]
    pub request_timeout: u64,
    /// The most memory the socket's clients together can make the transport hold
    /// (request values until answered, and shared regions), in MiB [default: 2,048 per
    /// local rank: each one region and one request of the largest allreduce].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub client_memory: Option<u64>,
    /// Answer Prometheus scrapes (`GET /metrics`, OpenMetrics text) on this address,
    /// e.g. 127.0.0.1:9464: per class packets sent and ECN-capable, per peer packets,
    /// bytes, retransmissions, rate and RTT, per DSCP arrivals and CE marks, the
    /// results' exact fraction, dropped datagrams by reason.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Run in the background, output appended to --log.
    #[arg(long, requires_all = ["pid_file", "log"])]
    pub detach: bool,
    /// Append output here when detached (required with --detach).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match (args.detach, args.log.as_deref(), args.pid_file.as_deref()) {
        (true, Some(log), Some(pid_file)) => {
            let argv: Vec<std::ffi::OsString> = std::env::args_os()
                .skip(1)
                .filter(|a| a != "--detach")
                .collect();
            daemon::detach(&argv, log, pid_file)
                .map(|pid| println!("{pid}"))
                .with_context(|| format!("cannot start the transport (log {})", log.display()))
        }
        _ => serve(&args),
    }
}

/// In the foreground: until SIGTERM or SIGINT.
fn serve(args: &Args) -> anyhow::Result<()> {
    let (socket, pid_file) = (args.socket.as_path(), args.pid_file.as_deref());
    let socket_group = args.socket_group.as_deref();
    let config = super::read_config(&args.config)?;
    let mut limits = daemon::Limits::for_local_ranks(config.job.local_ranks);
    limits.request_timeout = Duration::from_secs(args.request_timeout);
    if let Some(mib) = args.client_memory {
        limits.client_bytes = mib.saturating_mul(1 << 20);
    }
    // Before joining the job: a group that does not exist fails at once.
    let gid = socket_group.map(group_id).transpose()?;
    if let Some(pid_file) = pid_file {
        daemon::write_pid(pid_file, std::process::id())
            .with_context(|| format!("cannot write {}", pid_file.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let options = Options {
            connect_timeout: Duration::from_secs(args.connect_timeout),
            bind: None,
        };
        let (rank, world) = (config.rank, config.job.world_size);
        let transport = Transport::start(config, options).await?;
        // A socket file left by a transport that died is in the way; a live one answers.
        if daemon::Client::connect(socket).is_ok() {
            anyhow::bail!("another transport already serves {}", socket.display());
        }
        let _ = std::fs::remove_file(socket);
        let listener = listen(socket, gid)?;
        let metrics = match args.metrics {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("--metrics {addr}: cannot listen"))?,
            ),
            None => None,
        };
        println!("ready: rank {rank} of {world} on {}", socket.display());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        let transport = daemon::serve(transport, listener, metrics, limits, stop).await;
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

/// The id of group `name`.
fn group_id(name: &str) -> anyhow::Result<nix::unistd::Gid> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid),
        Ok(None) => anyhow::bail!("--socket-group {name}: no such group on this host"),
        Err(e) => anyhow::bail!("--socket-group {name}: cannot look the group up: {e}"),
    }
}

/// Listens on `socket`, made for its owner only (0600) or also for group `gid` (0660).
/// The socket is made under a umask that lets nobody else in, so there is no moment
/// when another user could connect. Its group and mode are set through its path (a
/// socket's descriptor does not reach its file on Linux), never following a link, and
/// only once the path is seen to be this user's socket; the directory it is in is the
/// transport's own (`mltctl bootstrap` checks it), so nobody can swap it between.
fn listen(
    socket: &Path,
    gid: Option<nix::unistd::Gid>,
) -> anyhow::Result<tokio::net::UnixListener> {
    use nix::sys::stat::{Mode, umask};
    let previous = umask(Mode::from_bits_truncate(0o177));
    let bound = tokio::net::UnixListener::bind(socket);
    umask(previous);
    let listener = bound.with_context(|| format!("cannot listen on {}", socket.display()))?;
    if let Some(gid) = gid {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let meta = std::fs::symlink_metadata(socket)
            .with_context(|| format!("cannot look at {}", socket.display()))?;
        if !meta.file_type().is_socket() || meta.uid() != nix::unistd::geteuid().as_raw() {
            anyhow::bail!("{} is not the socket this transport made", socket.display());
        }
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            socket,
            None,
            Some(gid),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .with_context(|| format!("cannot give {} to group {gid}", socket.display()))?;
        nix::sys::stat::fchmodat(
            nix::fcntl::AT_FDCWD,
            socket,
            Mode::from_bits_truncate(0o660),
            nix::sys::stat::FchmodatFlags::NoFollowSymlink,
        )
        .with_context(|| format!("cannot set the mode of {}", socket.display()))?;
    }
    Ok(listener)
}
