//! The transport as an application uses it: start it from a host's configuration, then
//! run collectives (`async`), or post sends and receives and poll a completion queue
//! (MLT §5.1's post_send / post_recv / poll_cq).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::datapath::{AnyDatapath, OpenError};
use crate::event_loop::{EventLoop, Inbound, Reply, Sources, Wake};
use crate::mesh::{self, MeshConfig, MeshError};
use endhost_core::collective::{Algorithm, Allreduce, Done, Engine, OpError};
use endhost_core::config::TransportConfig;
use endhost_core::proto::counters::DscpArrivals;
use endhost_core::proto::{Control, Counters, Endpoint, EndpointConfig};

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("configuration: {0}")]
    Config(String),
    /// The OS error is in the message, not a source too: printed once.
    #[error("data socket: {0}")]
    Socket(std::io::Error),
    #[error("DPDK datapath: {0}")]
    Datapath(String),
    #[error(transparent)]
    Mesh(#[from] MeshError),
    #[error(transparent)]
    Op(#[from] OpError),
    #[error("the transport has stopped")]
    Stopped,
}

/// How to start besides the configuration.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long to wait for every peer to come up.
    pub connect_timeout: Duration,
    /// Bind the data socket here. Default: the host's address when it has no other
    /// path address, else 0.0.0.0 (every path address).
    pub bind: Option<Ipv4Addr>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connect_timeout: Duration::from_secs(60),
            bind: None,
        }
    }
}

/// A posted operation's handle and result.
pub type Finished = (u64, Result<Done, OpError>);

/// A running transport: a datapath thread, and a control thread with its own tokio
/// runtime for the TCP control channel — so control frames (STOPs, bitmaps) flow
/// whatever the application's executor is busy with. Dropping it stops the datapath
/// thread after the operations in flight.
pub struct Transport {
    config: TransportConfig,
    inbound: Sender<Inbound>,
    wake: Arc<Wake>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Says when every control frame has been written (the control thread ends).
    control_flushed: Option<oneshot::Receiver<()>>,
    queue: (Sender<Finished>, Receiver<Finished>),
    next_handle: u64,
}

/// The job's size and this host's rank as the wire carries them (16 bits each), or why
/// `world`, `rank` and the `peers` listed do not make a job that fits it.
fn job_shape(world: u32, rank: u32, peers: usize) -> Result<(u16, u16), String> {
    let world16 = u16::try_from(world).map_err(|_| {
        format!(
            "a job of {world} ranks: ranks are 16-bit on the wire, so a job has at most {}",
            u16::MAX
        )
    })?;
    if peers + 1 != usize::from(world16) || rank >= world {
        return Err(format!(
            "rank {rank} with {peers} peers does not make a job of {world}"
        ));
    }
    // Below `world`, which fits.
    Ok((world16, rank as u16))
}

/// How long shutting down waits for the last control frames to be written.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects the control channel on a thread of its own, which keeps its runtime until
/// every queued frame is written (the datapath dropped its senders). Returns a sender
/// per peer and a signal for when the thread is done.
async fn start_control(
    config: MeshConfig,
    inbound: Sender<Inbound>,
    wake: Arc<Wake>,
) -> Result<(Vec<Option<UnboundedSender<Control>>>, oneshot::Receiver<()>), TransportError> {
    let (connected_tx, connected_rx) = oneshot::channel();
    let (flushed_tx, flushed_rx) = oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(TransportError::Socket)?;
    std::thread::Builder::new()
        .name(format!("endhost-control{}", config.rank))
        .spawn(move || {
            runtime.block_on(async move {
                match mesh::connect(&config, inbound, move || wake.wake()).await {
                    Ok(mesh) => {
                        let _ = connected_tx.send(Ok(mesh.outgoing));
                        for writer in mesh.writers {
                            let _ = writer.await;
                        }
                    }
                    Err(e) => {
                        let _ = connected_tx.send(Err(e));
                    }
                }
            });
            let _ = flushed_tx.send(());
        })
        .map_err(TransportError::Socket)?;
    let outgoing = connected_rx.await.map_err(|_| TransportError::Stopped)??;
    Ok((outgoing, flushed_rx))
}

impl Transport {
    /// Binds the data socket, connects the control channel to every peer (waiting for
    /// them up to `options.connect_timeout`), and starts the datapath thread. Any
    /// executor can await it.
    pub async fn start(
        config: TransportConfig,
        options: Options,
    ) -> Result<Transport, TransportError> {
        let (world16, rank16) = job_shape(config.job.world_size, config.rank, config.peers.len())
            .map_err(TransportError::Config)?;
        let (world, rank) = (usize::from(world16), usize::from(rank16));
        let ports = config.job.ports;
        let mut control_addresses = vec![SocketAddrV4::new(config.local.ip, ports.control); world];
        let mut paths = vec![Vec::new(); world];
        let mut sources = vec![Vec::new(); world];
        for peer in &config.peers {
            let r = peer.rank as usize;
            if r >= world || r == rank {
                return Err(TransportError::Config(format!(
                    "peer rank {r} is out of the job"
                )));
            }
            control_addresses[r] = SocketAddrV4::new(peer.ip, ports.control);
            let addresses = if peer.paths.is_empty() {
                vec![peer.ip]
            } else {
                peer.paths.clone()
            };
            paths[r] = addresses
                .into_iter()
                .map(|a| SocketAddrV4::new(a, ports.data))
                .collect();
            sources[r] = std::iter::once(peer.ip).chain(peer.paths.clone()).collect();
        }
        let sources = Sources::new(&sources, ports.data, config.job.datapath.rx_queues)
            .map_err(TransportError::Config)?;
        let local = config.local.ip;
        let only_local = config.local.path_addresses.iter().all(|a| *a == local);
        let default_bind = if only_local {
            local
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        let bind = SocketAddrV4::new(options.bind.unwrap_or(default_bind), ports.data);
        let datapath = AnyDatapath::open(&config, bind).map_err(|e| match e {
            OpenError::Socket(e) => TransportError::Socket(e),
            OpenError::Dpdk(why) => TransportError::Datapath(why),
            OpenError::NotBuilt => TransportError::Config(e.to_string()),
        })?;
        let (inbound_tx, inbound_rx) = std::sync::mpsc::channel();
        let wake = Wake::new().map_err(TransportError::Socket)?;
        let key = match &config.key_file {
            Some(path) => Some(read_key(path)?),
            None => None,
        };
        let mesh_config = MeshConfig {
            job: config.job.job_id,
            rank: rank16,
            addresses: control_addresses,
            key,
            connect_timeout: options.connect_timeout,
            tos: endhost_core::proto::tagging::tos(config.job.tagging.control_dscp, false),
        };
        let (control, control_flushed) =
            start_control(mesh_config, inbound_tx.clone(), wake.clone()).await?;
        let endpoint_config = EndpointConfig {
            job: config.job.job_id,
            rank: rank16,
            world: world16,
            mtu: config.job.mtu,
            rate: config.job.rate_control,
            line_bps: config.local.line_rate_mbps as f64 * 1e6,
            tagging: config.job.tagging.clone(),
            paths: paths.iter().map(Vec::len).collect(),
            early_exit: config.job.timeouts.early_exit,
            handle_seed: random_seed(),
        };
        let timeouts = config.job.timeouts;
        let coalesce =
            Duration::try_from_secs_f64(config.job.rate_control.t_low_us / 2e6).unwrap_or_default();
        let thread_wake = wake.clone();
        let thread = std::thread::Builder::new()
            .name(format!("endhost-rank{rank}"))
            .spawn(move || {
                let endpoint = Endpoint::new(endpoint_config, 0);
                EventLoop {
                    engine: Engine::new(endpoint, timeouts),
                    datapath,
                    paths,
                    sources,
                    control,
                    inbound: inbound_rx,
                    wake: thread_wake,
                    epoch: Instant::now(),
                    coalesce,
                }
                .run()
            })
            .map_err(TransportError::Socket)?;
        Ok(Transport {
            config,
            inbound: inbound_tx,
            wake,
            thread: Some(thread),
            control_flushed: Some(control_flushed),
            queue: std::sync::mpsc::channel(),
            next_handle: 1,
        })
    }

    pub fn config(&self) -> &TransportConfig {
        &self.config
    }

    fn submit(&self, inbound: Inbound) -> Result<(), TransportError> {
        self.inbound
            .send(inbound)
            .map_err(|_| TransportError::Stopped)?;
        self.wake.wake();
        Ok(())
    }

    /// An allreduce of `spec` (see [`Allreduce`]); the algorithm and loss bound default
    /// to the job's when built with [`Transport::allreduce_spec`].
    pub async fn allreduce(&self, spec: Allreduce) -> Result<Done, TransportError> {
        let (tx, rx) = oneshot::channel();
        self.submit(Inbound::Allreduce(Box::new(spec), Reply::Future(tx)))?;
        Ok(rx.await.map_err(|_| TransportError::Stopped)??)
    }

    /// An allreduce of `data` over the whole job with the job's collective, tensor
    /// `tensor`, its values in `layers` ((first value, layer) breakpoints; empty: all in
    /// layer 0), within `loss_bound` (`None`: the job's).
    pub fn allreduce_spec(
        &self,
        tensor: u32,
        data: Vec<f32>,
        layers: Vec<(usize, u16)>,
        loss_bound: Option<f64>,
    ) -> Allreduce {
        let algorithm = Algorithm::of_job(
            self.config.job.collective,
            self.config.job.world_size as u16,
        );
        Allreduce {
            tensor,
            data,
            algorithm,
            group: None,
            weights: None,
            layers,
            loss_bound: loss_bound.unwrap_or(self.config.job.loss_bound),
        }
    }

    /// Sends `data` to `peer` as the next message of `tensor`; done when the peer has
    /// stopped it.
    pub async fn send(
        &self,
        peer: u16,
        tensor: u32,
        data: Vec<f32>,
        layer: u16,
    ) -> Result<Done, TransportError> {
        let (tx, rx) = oneshot::channel();
        self.submit(Inbound::Send {
            peer,
            tensor,
            data,
            layer,
            reply: Reply::Future(tx),
        })?;
        Ok(rx.await.map_err(|_| TransportError::Stopped)??)
    }

    /// Receives the next message of `tensor` from `peer`: `len` values, all but
    /// `loss_bound` of them.
    pub async fn recv(
        &self,
        peer: u16,
        tensor: u32,
        len: usize,
        loss_bound: f64,
    ) -> Result<Done, TransportError> {
        let (tx, rx) = oneshot::channel();
        self.submit(Inbound::Recv {
            peer,
            tensor,
            len,
            loss_bound,
            reply: Reply::Future(tx),
        })?;
        Ok(rx.await.map_err(|_| TransportError::Stopped)??)
    }

    fn handle(&mut self) -> u64 {
        let h = self.next_handle;
        self.next_handle += 1;
        h
    }

    /// Posts a send (MLT's post_send); its completion comes from [`Transport::poll`].
    pub fn post_send(
        &mut self,
        peer: u16,
        tensor: u32,
        data: Vec<f32>,
        layer: u16,
    ) -> Result<u64, TransportError> {
        let handle = self.handle();
        let reply = Reply::Queue(self.queue.0.clone(), handle);
        self.submit(Inbound::Send {
            peer,
            tensor,
            data,
            layer,
            reply,
        })?;
        Ok(handle)
    }

    /// Posts a receive (MLT's post_recv); its completion comes from [`Transport::poll`].
    pub fn post_recv(
        &mut self,
        peer: u16,
        tensor: u32,
        len: usize,
        loss_bound: f64,
    ) -> Result<u64, TransportError> {
        let handle = self.handle();
        let reply = Reply::Queue(self.queue.0.clone(), handle);
        self.submit(Inbound::Recv {
            peer,
            tensor,
            len,
            loss_bound,
            reply,
        })?;
        Ok(handle)
    }

    /// Posts an allreduce; its completion comes from [`Transport::poll`].
    pub fn post_allreduce(&mut self, spec: Allreduce) -> Result<u64, TransportError> {
        let handle = self.handle();
        let reply = Reply::Queue(self.queue.0.clone(), handle);
        self.submit(Inbound::Allreduce(Box::new(spec), reply))?;
        Ok(handle)
    }

    /// The next completion of a posted operation, if any (MLT's poll_cq); never blocks.
    pub fn poll(&self) -> Option<Finished> {
        self.queue.1.try_recv().ok()
    }

    /// Waits up to `timeout` for the next completion of a posted operation.
    pub fn poll_wait(&self, timeout: Duration) -> Option<Finished> {
        self.queue.1.recv_timeout(timeout).ok()
    }

    /// Hands over the completion queue of posted operations, for a caller that waits on
    /// it apart from its posts (the C ABI: a waiting thread must not hold up a posting
    /// one); [`Transport::poll`] finds nothing afterwards.
    pub fn take_completions(&mut self) -> Receiver<Finished> {
        let (_, nothing) = std::sync::mpsc::channel();
        std::mem::replace(&mut self.queue.1, nothing)
    }

    pub async fn counters(&self) -> Result<Counters, TransportError> {
        let (tx, rx) = oneshot::channel();
        self.submit(Inbound::Counters(tx))?;
        rx.await.map_err(|_| TransportError::Stopped)
    }

    /// Queues a class probe burst with `dscp`, `per_path` to every peer (or `to`) on
    /// each path; returns how many probes will go and what has arrived from peers so
    /// far.
    pub async fn probe_class(
        &self,
        dscp: u8,
        per_path: u32,
        to: Option<u16>,
    ) -> Result<(u64, Vec<DscpArrivals>), TransportError> {
        let (tx, rx) = oneshot::channel();
        self.submit(Inbound::ProbeClass {
            dscp,
            per_path,
            to,
            reply: tx,
        })?;
        rx.await.map_err(|_| TransportError::Stopped)
    }
}

impl Transport {
    /// Finishes the operations in flight, stops the datapath thread, and waits until
    /// every control message (the last STOPs above all) has been written, so peers
    /// still finishing are not cut off.
    pub async fn shutdown(mut self) {
        let _ = self.submit(Inbound::Shutdown);
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        if let Some(flushed) = self.control_flushed.take() {
            let _ = tokio::time::timeout(FLUSH_TIMEOUT, flushed).await;
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        let _ = self.submit(Inbound::Shutdown);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The job's key from `path`: a regular file of this user that nobody else may read,
/// of 16 to 4,096 bytes.
fn read_key(path: &std::path::Path) -> Result<mesh::JobKey, TransportError> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| {
        TransportError::Config(format!("the job's key file {}: {why}", path.display()))
    };
    let meta = std::fs::metadata(path).map_err(|e| refuse(e.to_string()))?;
    if meta.mode() & 0o077 != 0 || meta.uid() != mlt_common::files::effective_uid() {
        return Err(refuse(format!(
            "must be this user's and readable by nobody else (it is mode {:04o}, uid {})",
            meta.mode() & 0o7777,
            meta.uid()
        )));
    }
    let key = mlt_common::input::read_bytes(path, 4096).map_err(|e| refuse(e.to_string()))?;
    if key.len() < 16 {
        return Err(refuse(format!("holds {} bytes, fewer than 16", key.len())));
    }
    Ok(key.into())
}

/// 32 random bits: std's randomly keyed SipHash, keyed afresh for each call.
fn random_seed() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish() as u32
}

#[cfg(test)]
mod tests {
    use super::job_shape;

    #[test]
    fn a_job_is_its_peers_and_this_rank_within_sixteen_bits() {
        assert_eq!(job_shape(4, 3, 3), Ok((4, 3)));
        assert_eq!(job_shape(65_535, 65_534, 65_534), Ok((65_535, 65_534)));
        // A world of 65,536 would carry as 0, and 70,000 as 4,464.
        for world in [65_536, 70_000] {
            let refused = job_shape(world, 0, world as usize - 1).unwrap_err();
            assert!(refused.contains("at most 65535"), "{refused}");
        }
        assert!(job_shape(4, 4, 3).is_err(), "a rank outside the job");
        assert!(job_shape(4, 0, 2).is_err(), "a peer missing");
    }
}
