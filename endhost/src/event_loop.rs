//! The event loop of the datapath thread: it drives the sans-IO [`Engine`] with a [`Datapath`], the clock
//! and the control channel. One thread, so the core needs no locks; it sleeps in the
//! datapath's wait (µs-precise, for pacing) until a datagram, a control frame, an
//! application command or a timer needs it.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::datapath::Datapath;
use crate::mesh::Incoming;
use endhost_core::collective::{Allreduce, Completion, Done, Engine, OpError, OpId};
use endhost_core::proto::counters::DscpArrivals;
use endhost_core::proto::{Control, Counters};

/// Datagrams sent per loop turn at most, so that arrivals are not starved.
const TX_PER_TURN: usize = 512;

/// Where an operation's result goes.
pub enum Reply {
    Future(oneshot::Sender<Result<Done, OpError>>),
    /// The completion queue of the post/poll API, with the caller's handle.
    Queue(std::sync::mpsc::Sender<(u64, Result<Done, OpError>)>, u64),
}

impl Reply {
    fn send(self, result: Result<Done, OpError>) {
        match self {
            Reply::Future(tx) => {
                let _ = tx.send(result);
            }
            Reply::Queue(tx, handle) => {
                let _ = tx.send((handle, result));
            }
        }
    }
}

/// What reaches the datapath thread from outside.
pub enum Inbound {
    Net(Incoming),
    Allreduce(Box<Allreduce>, Reply),
    Send {
        peer: u16,
        tensor: u32,
        data: Vec<f32>,
        layer: u16,
        reply: Reply,
    },
    Recv {
        peer: u16,
        tensor: u32,
        len: usize,
        loss_bound: f64,
        reply: Reply,
    },
    Counters(oneshot::Sender<Counters>),
    /// A class probe burst; the reply says how many probes go, and what has arrived.
    ProbeClass {
        dscp: u8,
        per_path: u32,
        to: Option<u16>,
        reply: oneshot::Sender<(u64, Vec<DscpArrivals>)>,
    },
    /// Finish what is in flight, then stop.
    Shutdown,
}

impl From<Incoming> for Inbound {
    fn from(incoming: Incoming) -> Self {
        Inbound::Net(incoming)
    }
}

/// An eventfd that wakes the datapath thread.
#[derive(Debug)]
pub struct Wake(OwnedFd);

impl Wake {
    pub fn new() -> std::io::Result<Arc<Wake>> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Arc::new(Wake(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to an eventfd we own; a full counter just means awake.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    fn drain(&self) {
        let mut value: u64 = 0;
        // SAFETY: reading 8 bytes into a u64; EAGAIN when nothing is pending.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut value as *mut u64).cast(), 8) };
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The addresses each peer sends data from: its own and its path addresses, from the
/// job's data port or the next ports (a DPDK sender spreads its lanes over them,
/// wrapping past 65535 as its port arithmetic does).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    ranks: HashMap<Ipv4Addr, u16>,
    data_port: u16,
    lanes: u16,
}

impl Sources {
    /// `addresses[rank]` are the addresses rank `rank` may send from; ports from
    /// `data_port` on, one per lane. An address given to two ranks is refused: its
    /// datagrams could not be told apart.
    pub fn new(addresses: &[Vec<Ipv4Addr>], data_port: u16, lanes: u16) -> Result<Sources, String> {
        let mut ranks = HashMap::new();
        for (rank, own) in addresses.iter().enumerate() {
            for address in own {
                if let Some(other) = ranks.insert(*address, rank as u16)
                    && usize::from(other) != rank
                {
                    return Err(format!(
                        "{address} is an address of rank {other} and of rank {rank}"
                    ));
                }
            }
        }
        Ok(Sources {
            ranks,
            data_port,
            lanes: lanes.max(1),
        })
    }

    /// The rank `from` belongs to, if it is a peer's.
    pub fn rank(&self, from: SocketAddrV4) -> Option<u16> {
        if from.port().wrapping_sub(self.data_port) >= self.lanes {
            return None;
        }
        self.ranks.get(from.ip()).copied()
    }
}

/// Everything the thread works with. The engine is built on the thread itself: it
/// shares tensor memory between operations and messages without locks, so it never
/// crosses threads.
pub struct EventLoop<D: Datapath> {
    pub engine: Engine,
    pub datapath: D,
    /// Data addresses of each rank's paths.
    pub paths: Vec<Vec<SocketAddrV4>>,
    /// Which rank each address datagrams may come from belongs to.
    pub sources: Sources,
    pub control: Vec<Option<UnboundedSender<Control>>>,
    pub inbound: Receiver<Inbound>,
    pub wake: Arc<Wake>,
    pub epoch: Instant,
    /// Datagrams that arrive while a send is due within this long wait for it: one
    /// wake-up serves both (half of T_low, so an RTT sample is late by less than the
    /// rate control's lowest threshold).
    pub coalesce: Duration,
}

impl<D: Datapath> EventLoop<D> {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Runs until shut down and idle, or until every handle is gone.
    pub fn run(mut self) {
        // Wake-ups within a microsecond of the deadline, not the default 50 µs: pacing
        // and RTT samples depend on it.
        // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
        let mut replies: std::collections::HashMap<OpId, Reply> = std::collections::HashMap::new();
        let mut buf = vec![0u8; 65_536];
        let mut stopping = false;
        loop {
            self.wake.drain();
            loop {
                let now = self.now();
                match self.inbound.try_recv() {
                    Ok(inbound) => self.accept(now, inbound, &mut replies, &mut stopping),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        stopping = true;
                        break;
                    }
                }
            }
            let now = self.now();
            let (engine, sources) = (&mut self.engine, &self.sources);
            if let Err(e) = self.datapath.receive(&mut |from, tos, d| {
                engine.handle_datagram(now, sources.rank(from), tos, d)
            }) {
                eprintln!("endhost: receive failed: {e}");
            }
            let now = self.now();
            if self.engine.next_timeout().is_some_and(|t| t <= now) {
                self.engine.handle_timeout(now);
            }
            let mut sent = 0;
            while sent < TX_PER_TURN {
                let Some(tx) = self.engine.poll_transmit(now, &mut buf) else {
                    break;
                };
                sent += 1;
                let to = self.paths[usize::from(tx.peer)][tx.path];
                if let Err(e) = self.datapath.queue(to, tx.tos, &buf[..tx.len]) {
                    eprintln!("endhost: send to {to} failed: {e}");
                }
            }
            if let Err(e) = self.datapath.flush() {
                eprintln!("endhost: send failed: {e}");
            }
            while let Some((peer, message)) = self.engine.poll_control() {
                if let Some(Some(tx)) = self.control.get(usize::from(peer)) {
                    let _ = tx.send(message);
                }
            }
            while let Some(Completion { op, result }) = self.engine.poll_completion() {
                if let Some(reply) = replies.remove(&op) {
                    reply.send(result);
                }
            }
            if stopping && self.engine.busy() == 0 {
                return;
            }
            if sent == TX_PER_TURN {
                continue;
            }
            let now = self.now();
            let timeout = self
                .engine
                .next_timeout()
                .map(|t| Duration::from_nanos(t.saturating_sub(now)));
            let waited = if timeout.is_some_and(|t| t <= self.coalesce) {
                crate::datapath::wait_readable(self.wake.fd(), -1, timeout)
            } else {
                self.datapath.wait(self.wake.fd(), timeout)
            };
            if let Err(e) = waited {
                eprintln!("endhost: wait failed: {e}");
            }
        }
    }

    fn accept(
        &mut self,
        now: u64,
        inbound: Inbound,
        replies: &mut std::collections::HashMap<OpId, Reply>,
        stopping: &mut bool,
    ) {
        match inbound {
            Inbound::Net(Incoming::Control { peer, message }) => {
                self.engine.handle_control(now, peer, message)
            }
            Inbound::Net(Incoming::Lost { peer, why }) => self.engine.peer_lost(peer, &why),
            Inbound::Allreduce(spec, reply) => {
                let op = self.engine.allreduce(now, *spec);
                replies.insert(op, reply);
            }
            Inbound::Send {
                peer,
                tensor,
                data,
                layer,
                reply,
            } => {
                let op = self.engine.post_send(now, peer, tensor, data, layer);
                replies.insert(op, reply);
            }
            Inbound::Recv {
                peer,
                tensor,
                len,
                loss_bound,
                reply,
            } => {
                let op = self.engine.post_recv(now, peer, tensor, len, loss_bound);
                replies.insert(op, reply);
            }
            Inbound::Counters(tx) => {
                let _ = tx.send(self.engine.endpoint().counters());
            }
            Inbound::ProbeClass {
                dscp,
                per_path,
                to,
                reply,
            } => {
                let queued = self.engine.probe_class(dscp, per_path, to);
                let _ = reply.send((queued, self.engine.endpoint().arrivals()));
            }
            Inbound::Shutdown => *stopping = true,
        }
    }
}
