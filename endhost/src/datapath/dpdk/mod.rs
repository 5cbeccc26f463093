//! The DPDK datapath: a poll-mode driver port instead of kernel sockets (OptiReduce's
//! UBT layer, on DPDK 22.11 through our `dpdk-sys`).
//!
//! One port, `rx_queues` RX queues and one TX queue (af_xdp: one per RX queue, which
//! it pairs; we send on the first), rings of `rx_ring`/`tx_ring` descriptors, one
//! mempool sized from them. Each RX queue has an EAL lcore of its own
//! that polls it, checks every frame down to its UDP payload ([`super::frame`]: ours,
//! to one of this host's addresses and the data port, valid checksums), trims the
//! mbuf to the payload and hands it over a single-producer ring to the datapath
//! thread, which reads the payload in place and frees the mbuf; or, with
//! `dpdk.inline_rx`, the datapath thread polls the queues and checks the frames itself
//! ([`inline`]). Senders put the packet's lane (its message handle, modulo the lanes)
//! in the UDP source port, so a NIC's RSS keeps concurrent buckets on different queues
//! and rings, in order within each.
//!
//! Frames are built here: the next hop's MAC from the IP=MAC map, the destination a
//! peer's path address, the TOS byte (DSCP, ECN) the protocol chose, IPv4 and UDP
//! checksums in software. The UDP payload is the kernel datapath's, byte for byte.
//!
//! One DPDK datapath per process: the EAL starts once; the port is closed when the
//! datapath is dropped (af_xdp: detaching our XDP program), or when starting fails —
//! but a memif port, which its peer's departure closes (see `close_on_drop`).

mod eal;
pub mod flow;
mod inline;
mod start;
mod xdp;

use std::ffi::{CStr, c_int, c_void};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use dpdk_sys as sys;

use super::Datapath;
use endhost_core::addr::MacAddr;
use endhost_core::frame::{self, Addresses, HEADERS_LEN, Rejected};
use endhost_core::vdev::{Vdev, VdevDriver};
use endhost_core::wire::{HEADER_LEN, Packet};

/// Frames per RX or TX burst call.
const BURST: usize = 32;
/// Payloads handed to the protocol per ring per `receive` call, so sending is not
/// starved by a long run of arrivals.
const RX_BUDGET: usize = 1024;
/// How long `flush` keeps offering frames to a full TX ring before it drops them.
const TX_PATIENCE: Duration = Duration::from_millis(200);
/// Per-lcore mempool cache.
const POOL_CACHE: u32 = 256;
/// Frames ahead of the one being read whose first cache line is asked for meanwhile
/// (DPDK's l3fwd example looks 3 ahead too): its headers are in the cache by its turn.
const PREFETCH_AHEAD: usize = 3;
/// Empty polls (inline: rounds of polls over every queue) before an idle poller starts
/// sleeping `rx_idle_sleep_us` between them.
const SPINS_BEFORE_SLEEP: u32 = 64;

static STARTED: AtomicBool = AtomicBool::new(false);

/// What the receiving side counted (the RX lcores, or the datapath thread inline).
#[derive(Default)]
struct RxCounters {
    frames: AtomicU64,
    delivered: AtomicU64,
    not_ours: AtomicU64,
    ring_full: AtomicU64,
    rejected: [AtomicU64; Rejected::ALL.len()],
}

/// A snapshot of the datapath's counters.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct DpdkStats {
    /// Who polled the RX queues: "lcores" or "inline".
    pub rx_polling: &'static str,
    /// Frames taken from the port.
    pub rx_frames: u64,
    /// Datagrams handed to the protocol.
    pub rx_delivered: u64,
    /// Frames for another MAC, address or port (ARP, the kernel's own traffic…).
    pub rx_not_ours: u64,
    /// Datagrams dropped because the datapath thread fell behind.
    pub rx_ring_full: u64,
    /// Frames refused by their headers, by reason.
    pub rx_rejected: Vec<(String, u64)>,
    pub tx_frames: u64,
    pub tx_dropped: u64,
    /// The port's own counters: missed (no RX descriptor free), no mbuf, errors.
    pub port_imissed: u64,
    pub port_rx_nombuf: u64,
    pub port_ierrors: u64,
    pub port_oerrors: u64,
}

/// What one RX lcore works with; lives until its lcore has returned.
struct RxQueue {
    port: u16,
    queue: u16,
    ring: *mut sys::rte_ring,
    idle_sleep: Duration,
    check: Checker,
}

/// What decides whether a received frame is ours, and counts what it decides.
struct Checker {
    mac: MacAddr,
    /// This host's addresses: the NIC's and its path addresses (a handful).
    addresses: Vec<Ipv4Addr>,
    data_port: u16,
    shared: Arc<Shared>,
}

struct Shared {
    /// Written by an RX lcore when it hands over datagrams while the thread sleeps.
    event: OwnedFd,
    sleeping: AtomicBool,
    stop: AtomicBool,
    rx: RxCounters,
}

impl Shared {
    fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes to our eventfd.
            unsafe { libc::write(self.event.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }
}

/// An RX lcore: polls its queue until told to stop.
unsafe extern "C" fn rx_lcore(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the RxQueue the datapath keeps alive until this returns.
    let rx = unsafe { &*(arg as *const RxQueue) };
    let shared = &rx.check.shared;
    let counters = &shared.rx;
    let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST];
    let mut keep = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST];
    let mut drop = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST];
    let mut idle = 0u32;
    while !shared.stop.load(Ordering::Relaxed) {
        // SAFETY: the port is started and this lcore alone polls this queue.
        let n = unsafe { sys::shim_rx_burst(rx.port, rx.queue, burst.as_mut_ptr(), BURST as u16) }
            as usize;
        if n == 0 {
            idle += 1;
            if !rx.idle_sleep.is_zero() && idle > SPINS_BEFORE_SLEEP {
                std::thread::sleep(rx.idle_sleep);
            }
            continue;
        }
        idle = 0;
        counters.frames.fetch_add(n as u64, Ordering::Relaxed);
        let (mut kept, mut dropped) = (0, 0);
        // SAFETY: received mbufs, ours until handed on or freed.
        unsafe {
            each_prefetched(&burst[..n], |m| {
                if let Some((datagram, _)) = rx.check.accept(m) {
                    // The headers stay (the source is read from them again); Ethernet
                    // padding goes. The payload lies within the first segment, as
                    // parse checked.
                    sys::shim_mbuf_keep(m, datagram.payload.end as u16);
                    keep[kept] = m;
                    kept += 1;
                } else {
                    drop[dropped] = m;
                    dropped += 1;
                }
            })
        };
        if kept > 0 {
            // SAFETY: this lcore is the ring's only producer.
            let queued =
                unsafe { sys::shim_ring_enqueue_burst(rx.ring, keep.as_mut_ptr(), kept as u32) }
                    as usize;
            counters
                .delivered
                .fetch_add(queued as u64, Ordering::Relaxed);
            if queued < kept {
                counters
                    .ring_full
                    .fetch_add((kept - queued) as u64, Ordering::Relaxed);
                for &m in &keep[queued..kept] {
                    drop[dropped] = m;
                    dropped += 1;
                }
            }
            if queued > 0 {
                shared.notify();
            }
        }
        if dropped > 0 {
            // SAFETY: mbufs this lcore owns and no longer uses.
            unsafe { sys::rte_pktmbuf_free_bulk(drop.as_mut_ptr(), dropped as u32) };
        }
    }
    0
}

/// Calls `each` on the mbufs in order, each one's first cache line asked for
/// [`PREFETCH_AHEAD`] frames before its turn.
///
/// # Safety
/// Every mbuf is valid and the caller's for the whole call.
unsafe fn each_prefetched(mbufs: &[*mut sys::rte_mbuf], mut each: impl FnMut(*mut sys::rte_mbuf)) {
    for &m in mbufs.iter().take(PREFETCH_AHEAD) {
        // SAFETY: per the contract; a prefetch only reads the mbuf's header.
        unsafe { sys::shim_mbuf_prefetch(m) };
    }
    for (i, &m) in mbufs.iter().enumerate() {
        if let Some(&ahead) = mbufs.get(i + PREFETCH_AHEAD) {
            // SAFETY: as above.
            unsafe { sys::shim_mbuf_prefetch(ahead) };
        }
        each(m);
    }
}

impl Checker {
    /// The datagram `m` carries if it is ours, with the frame's bytes.
    ///
    /// # Safety
    /// `m` is a valid mbuf this thread owns; the bytes live until it is freed.
    unsafe fn accept<'m>(&self, m: *mut sys::rte_mbuf) -> Option<(frame::Datagram, &'m [u8])> {
        let counters = &self.shared.rx;
        // SAFETY: per the contract; data and len describe the first segment.
        let bytes = unsafe {
            if sys::shim_mbuf_segments(m) != 1 {
                counters.rejected[Rejected::Truncated as usize].fetch_add(1, Ordering::Relaxed);
                return None;
            }
            let mut len = 0u16;
            let data = sys::shim_mbuf_data(m, &mut len);
            std::slice::from_raw_parts(data, usize::from(len))
        };
        let datagram = match frame::parse(bytes) {
            Ok(d) => d,
            Err(why) => {
                // Foreign protocols are not faults: ARP and the kernel's TCP share the port.
                if matches!(why, Rejected::NotIpv4 | Rejected::NotUdp) {
                    counters.not_ours.fetch_add(1, Ordering::Relaxed);
                } else {
                    counters.rejected[why as usize].fetch_add(1, Ordering::Relaxed);
                }
                return None;
            }
        };
        if datagram.dst_mac != self.mac
            || datagram.dst.port() != self.data_port
            || !self.addresses.contains(datagram.dst.ip())
        {
            counters.not_ours.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some((datagram, bytes))
    }
}

struct Lcore {
    id: u32,
    queue: Box<RxQueue>,
}

/// Who polls the RX queues.
enum Receiving {
    /// An lcore per queue, handing checked frames over on rings.
    Lcores(Vec<Lcore>),
    /// The datapath thread itself (`dpdk.inline_rx`).
    Inline(inline::InlineRx),
}

/// Whether the datapath thread has a mempool cache: a thread DPDK did not start has none
/// until it registers, and without one every allocation and free goes to the pool's
/// shared ring (first in, first out, so each mbuf comes back cold from the cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThreadCache {
    Unchecked,
    /// This thread was registered here; dropping the datapath on it flushes its cache
    /// and unregisters it (dropped on another thread, the id stays taken).
    Registered(std::thread::ThreadId),
    /// An EAL lcore already, or registering failed: nothing to undo.
    AsItWas,
}

pub struct DpdkDatapath {
    port: u16,
    pool: *mut sys::rte_mempool,
    mac: MacAddr,
    source: Ipv4Addr,
    data_port: u16,
    lanes: u16,
    /// The IP=MAC map, sorted by address: a binary search per frame, no hashing.
    next_hops: Vec<(Ipv4Addr, MacAddr)>,
    pending: Vec<*mut sys::rte_mbuf>,
    /// Fresh mbufs, taken from the pool a burst at a time.
    stock: Vec<*mut sys::rte_mbuf>,
    /// The last destination's next hop: a flow's packets go to one peer in a row.
    last_hop: Option<(Ipv4Addr, MacAddr)>,
    thread: ThreadCache,
    rx: Receiving,
    /// Whether dropping the datapath stops and closes the port. Not a memif port: its
    /// peer's departure already disconnects it (on DPDK's interrupt thread), and DPDK
    /// 22.11's memif disconnects again on stop and close, freeing and unmapping its
    /// regions a second time (seen: the heap's "Invalid memory", and a live thread's
    /// stack unmapped under it). The process ends with its datapath (one per process),
    /// which closes the memif socket.
    close_on_drop: bool,
    shared: Arc<Shared>,
    tx_frames: u64,
    tx_dropped: u64,
    /// Keeps the kernel from answering our datagrams with ICMP port unreachable where
    /// it sees them too (af_packet, tap).
    _kernel_port: Option<UdpSocket>,
}

// SAFETY: the raw pointers are DPDK objects (mempool, rings, mbufs) that any thread may
// use; the datapath moves to its thread once and is used there alone.
unsafe impl Send for DpdkDatapath {}

fn error(text: String) -> io::Error {
    io::Error::other(text)
}

impl DpdkDatapath {
    fn stats(&self) -> DpdkStats {
        let rx = &self.shared.rx;
        let mut port = sys::shim_port_stats::default();
        // SAFETY: a valid port and output; on failure the zeros stay.
        unsafe { sys::shim_port_stats(self.port, &mut port) };
        DpdkStats {
            rx_polling: match self.rx {
                Receiving::Lcores(_) => "lcores",
                Receiving::Inline(_) => "inline",
            },
            rx_frames: rx.frames.load(Ordering::Relaxed),
            rx_delivered: rx.delivered.load(Ordering::Relaxed),
            rx_not_ours: rx.not_ours.load(Ordering::Relaxed),
            rx_ring_full: rx.ring_full.load(Ordering::Relaxed),
            rx_rejected: Rejected::ALL
                .iter()
                .map(|r| {
                    (
                        r.name().to_string(),
                        rx.rejected[*r as usize].load(Ordering::Relaxed),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect(),
            tx_frames: self.tx_frames,
            tx_dropped: self.tx_dropped,
            port_imissed: port.imissed,
            port_rx_nombuf: port.rx_nombuf,
            port_ierrors: port.ierrors,
            port_oerrors: port.oerrors,
        }
    }

    /// Gives the thread that uses the datapath a mempool cache, on its first call.
    /// Registering a thread turns off DPDK's multi-process support for good: this
    /// process has no secondary processes.
    fn attach_thread(&mut self) {
        if self.thread != ThreadCache::Unchecked {
            return;
        }
        // SAFETY: the EAL is running; registering touches only this thread's state.
        self.thread = match unsafe { sys::shim_thread_register() } {
            1 => ThreadCache::Registered(std::thread::current().id()),
            0 => ThreadCache::AsItWas,
            _ => {
                eprintln!(
                    "endhost: the datapath thread could not register with DPDK's EAL (no \
                     free lcore id, or multi-process in use): its mbufs go through the \
                     pool's ring, without a cache"
                );
                ThreadCache::AsItWas
            }
        };
    }

    /// A fresh mbuf from the stock, refilled a burst at a time; when the pool runs low,
    /// frames waiting to go are sent first (they hold mbufs).
    fn fresh_mbuf(&mut self) -> io::Result<*mut sys::rte_mbuf> {
        if let Some(m) = self.stock.pop() {
            return Ok(m);
        }
        self.attach_thread();
        for attempt in 0..2 {
            if attempt == 1 {
                self.send_pending()?;
            }
            self.stock.resize(BURST, std::ptr::null_mut());
            // SAFETY: room for BURST pointers; the pool lives as long as the process.
            let rc = unsafe {
                sys::shim_pktmbuf_alloc_bulk(self.pool, self.stock.as_mut_ptr(), BURST as u32)
            };
            if rc == 0 {
                return Ok(self.stock.pop().expect("a full burst"));
            }
            self.stock.clear();
            // Fewer than a burst left: one at a time.
            // SAFETY: as above.
            let m = unsafe { sys::shim_pktmbuf_alloc(self.pool) };
            if !m.is_null() {
                return Ok(m);
            }
        }
        Err(error("the mempool is exhausted".into()))
    }

    /// The next-hop MAC for `to`, from the IP=MAC map.
    fn next_hop(&mut self, to: Ipv4Addr) -> io::Result<MacAddr> {
        if let Some((ip, mac)) = self.last_hop
            && ip == to
        {
            return Ok(mac);
        }
        let at = self
            .next_hops
            .binary_search_by_key(&to, |(ip, _)| *ip)
            .map_err(|_| error(format!("no next-hop MAC for {to}: not in the IP=MAC map")))?;
        let mac = self.next_hops[at].1;
        self.last_hop = Some((to, mac));
        Ok(mac)
    }

    /// The lane of a datagram: its message (the receiver's handle), spread over the RX
    /// queues, so one message's packets stay on one queue.
    fn lane(&self, datagram: &[u8]) -> u16 {
        // The protocol built this datagram: its header needs no checking, only room.
        if datagram.len() < HEADER_LEN {
            return 0;
        }
        let packet = Packet::new_unchecked(datagram);
        (packet.message() % u32::from(self.lanes)) as u16
    }

    fn send_pending(&mut self) -> io::Result<()> {
        let mut sent = 0;
        let mut stalled_since = None;
        while sent < self.pending.len() {
            let left = (self.pending.len() - sent).min(u16::MAX as usize) as u16;
            // SAFETY: the TX queue is ours alone; the mbufs are ours until accepted.
            let n = unsafe {
                sys::shim_tx_burst(self.port, 0, self.pending[sent..].as_mut_ptr(), left)
            } as usize;
            sent += n;
            if n > 0 {
                stalled_since = None;
                continue;
            }
            let since = *stalled_since.get_or_insert_with(Instant::now);
            if since.elapsed() > TX_PATIENCE {
                let unsent = self.pending.len() - sent;
                // SAFETY: the port did not take these; they are still ours.
                unsafe {
                    sys::rte_pktmbuf_free_bulk(self.pending[sent..].as_mut_ptr(), unsent as u32)
                };
                self.tx_frames += sent as u64;
                self.tx_dropped += unsent as u64;
                self.pending.clear();
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "the TX ring took nothing for {TX_PATIENCE:?}; {unsent} frames dropped"
                    ),
                ));
            }
            std::hint::spin_loop();
        }
        self.tx_frames += sent as u64;
        self.pending.clear();
        Ok(())
    }
}

fn rte_errno() -> i32 {
    // SAFETY: reads DPDK's thread-local rte_errno.
    unsafe { sys::shim_errno() }
}

fn check(rc: i32, what: &str) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(error(format!("{what}: {}", eal::strerror(-rc))))
    }
}

impl Datapath for DpdkDatapath {
    fn receive(&mut self, deliver: &mut dyn FnMut(SocketAddrV4, u8, &[u8])) -> io::Result<usize> {
        self.attach_thread();
        let lcores = match &mut self.rx {
            Receiving::Inline(inline) => return Ok(inline.receive(deliver)),
            Receiving::Lcores(lcores) => lcores,
        };
        let mut total = 0;
        let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST];
        for lcore in lcores.iter() {
            let mut taken = 0;
            while taken < RX_BUDGET {
                // SAFETY: this thread is the ring's only consumer.
                let n = unsafe {
                    sys::shim_ring_dequeue_burst(lcore.queue.ring, burst.as_mut_ptr(), BURST as u32)
                } as usize;
                // SAFETY: single-segment mbufs the RX lcore checked and trimmed to the
                // end of their datagrams, ours until freed below.
                unsafe {
                    each_prefetched(&burst[..n], |m| {
                        let mut len = 0u16;
                        let data = sys::shim_mbuf_data(m, &mut len);
                        let frame = std::slice::from_raw_parts(data, usize::from(len));
                        if let Some((source, tos, payload)) = frame::accepted(frame) {
                            deliver(source, tos, payload);
                        }
                    })
                };
                if n > 0 {
                    // SAFETY: delivered; nothing refers to them any more.
                    unsafe { sys::rte_pktmbuf_free_bulk(burst.as_mut_ptr(), n as u32) };
                }
                taken += n;
                if n < BURST {
                    break;
                }
            }
            total += taken;
        }
        Ok(total)
    }

    fn queue(&mut self, to: SocketAddrV4, tos: u8, datagram: &[u8]) -> io::Result<()> {
        let dst_mac = self.next_hop(*to.ip())?;
        let len = HEADERS_LEN + datagram.len();
        let len16 = u16::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "datagram too long"))?;
        let m = self.fresh_mbuf()?;
        // SAFETY: a fresh mbuf; append returns room for `len` bytes or null.
        let data = unsafe { sys::shim_mbuf_append(m, len16) };
        if data.is_null() {
            // SAFETY: ours, unused.
            unsafe { sys::shim_pktmbuf_free(m) };
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a {len}-byte frame does not fit an mbuf"),
            ));
        }
        // SAFETY: `data` has room for `len` bytes, in an mbuf no one else sees yet.
        let frame = unsafe { std::slice::from_raw_parts_mut(data, len) };
        frame[HEADERS_LEN..].copy_from_slice(datagram);
        let addresses = Addresses {
            src_mac: self.mac,
            dst_mac,
            src: SocketAddrV4::new(
                self.source,
                self.data_port.wrapping_add(self.lane(datagram)),
            ),
            dst: to,
        };
        frame::write_headers(frame, &addresses, tos);
        self.pending.push(m);
        if self.pending.len() == BURST {
            self.send_pending()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_pending()
    }

    fn wait(&mut self, wake: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        self.attach_thread();
        let lcores = match &mut self.rx {
            Receiving::Inline(inline) => return inline.wait(wake, timeout),
            Receiving::Lcores(lcores) => lcores,
        };
        self.shared.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // SAFETY: counting entries of rings this datapath owns.
        let waiting = lcores
            .iter()
            .any(|l| unsafe { sys::shim_ring_count(l.queue.ring) } > 0);
        let waited = if waiting {
            Ok(())
        } else {
            super::wait_readable(self.shared.event.as_raw_fd(), wake, timeout)
        };
        self.shared.sleeping.store(false, Ordering::SeqCst);
        let mut value = 0u64;
        // SAFETY: reading 8 bytes from our non-blocking eventfd.
        unsafe {
            libc::read(
                self.shared.event.as_raw_fd(),
                (&mut value as *mut u64).cast(),
                8,
            )
        };
        waited
    }
}

impl Drop for DpdkDatapath {
    fn drop(&mut self) {
        let _ = self.send_pending();
        if !self.stock.is_empty() {
            // SAFETY: fresh mbufs nothing else refers to.
            unsafe { sys::rte_pktmbuf_free_bulk(self.stock.as_mut_ptr(), self.stock.len() as u32) };
            self.stock.clear();
        }
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Receiving::Inline(inline) = &mut self.rx {
            inline.release();
        }
        // As OptiReduce does at exit: what the port and the RX lcores saw, for the log.
        if let Ok(stats) = serde_json::to_string(&self.stats()) {
            eprintln!("endhost: DPDK datapath totals: {stats}");
        }
        let lcores = match &mut self.rx {
            Receiving::Lcores(lcores) => std::mem::take(lcores),
            Receiving::Inline(_) => Vec::new(),
        };
        for lcore in &lcores {
            // SAFETY: waits for an lcore this datapath launched.
            unsafe { sys::rte_eal_wait_lcore(lcore.id) };
        }
        if self.close_on_drop {
            // SAFETY: no lcore polls the port any more (nor this thread, which is here).
            unsafe { sys::rte_eth_dev_stop(self.port) };
        }
        for lcore in lcores {
            let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST];
            loop {
                // SAFETY: the ring is ours; its producer has stopped.
                let n = unsafe {
                    sys::shim_ring_dequeue_burst(lcore.queue.ring, burst.as_mut_ptr(), BURST as u32)
                };
                if n == 0 {
                    break;
                }
                // SAFETY: handed-over mbufs nobody reads any more.
                unsafe { sys::rte_pktmbuf_free_bulk(burst.as_mut_ptr(), n) };
            }
            // SAFETY: empty, and nothing uses it any more.
            unsafe { sys::rte_ring_free(lcore.queue.ring) };
        }
        // Closing gives back what the PMD took from the host: af_xdp detaches our XDP
        // program from the interface, which otherwise keeps the data port's traffic.
        if self.close_on_drop {
            // SAFETY: the port is stopped and nothing uses it any more.
            unsafe { sys::rte_eth_dev_close(self.port) };
        }
        if self.thread == ThreadCache::Registered(std::thread::current().id()) {
            // SAFETY: this thread was registered by `attach_thread` and is done with DPDK;
            // what its cache holds goes back to the pool first.
            unsafe {
                sys::shim_mempool_flush_own_cache(self.pool);
                sys::rte_thread_unregister();
            }
        }
    }
}

/// Installs the rules that claim the data port's traffic of a flow-isolated port.
fn install_flow_rules(
    port: u16,
    addresses: &[Ipv4Addr],
    data_port: u16,
    queues: u16,
) -> io::Result<()> {
    for rule in flow::data_rules(addresses, data_port, queues) {
        let mut message = std::ptr::null();
        // SAFETY: a started port; the shim points `message` at a string on failure.
        let rc = unsafe {
            sys::shim_flow_udp_to_queue(
                port,
                u32::from(rule.dst).to_be(),
                rule.dst_port,
                rule.src_port.map_or(-1, i32::from),
                rule.queue,
                rule.priority,
                &mut message,
            )
        };
        if rc != 0 {
            return Err(error(format!(
                "cannot install the flow rule {rule:?}: {}",
                // SAFETY: set by the shim on failure.
                unsafe { CStr::from_ptr(message) }.to_string_lossy()
            )));
        }
    }
    Ok(())
}

/// How long a started port's link may take to come up (a memif port's, until its peer
/// process has connected).
const LINK_PATIENCE: Duration = Duration::from_secs(20);

/// A memif client's port cannot start before its server listens (DPDK 22.11 does not
/// retry), so two processes started together would race: a client waits until the
/// server's socket file is there, then a moment more (the server binds, then listens).
/// It does not probe the socket: the server's listen backlog is one connection.
fn await_memif_server(vdev: &Vdev) -> io::Result<()> {
    if vdev.driver() != VdevDriver::Memif || vdev.get("role") != Some("client") {
        return Ok(());
    }
    let Some(path) = vdev
        .get("socket")
        .filter(|_| vdev.get("socket-abstract") == Some("no"))
    else {
        return Ok(());
    };
    let since = Instant::now();
    while !Path::new(path).exists() {
        if since.elapsed() > LINK_PATIENCE {
            return Err(error(format!(
                "no memif server made {path} within {} s",
                LINK_PATIENCE.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    Ok(())
}

/// Waits until the port's link is up: frames sent before would be lost.
fn wait_for_link(port: u16, driver: &str) -> io::Result<()> {
    let since = Instant::now();
    // SAFETY: a started port.
    while unsafe { sys::shim_link_up(port) } == 0 {
        if since.elapsed() > LINK_PATIENCE {
            let hint = if driver == "net_memif" {
                " (net_memif: is the peer process running, on the same socket? A client \
                 starts only once its server listens)"
            } else {
                ""
            };
            return Err(error(format!(
                "the port's link ({driver}) did not come up within {} s{hint}",
                LINK_PATIENCE.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Stops and closes a port whose datapath was never made (see `start`).
struct PortGuard {
    port: u16,
    armed: bool,
}

impl Drop for PortGuard {
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: nothing else uses the port: its datapath does not exist.
            unsafe {
                sys::rte_eth_dev_stop(self.port);
                sys::rte_eth_dev_close(self.port);
            }
        }
    }
}
