//! Receiving on the datapath thread itself (`dpdk.inline_rx`), run to completion as
//! DPDK applications do: the thread that runs the protocol polls the RX queues, checks
//! each frame, hands its payload to the protocol in place and frees the mbuf, all in
//! one pass. No lcore per queue, no handover ring, no wake-up between two threads: one
//! thread fewer, and every mbuf is reused from this thread's pool cache while its
//! buffer is still in this core's cache. While the protocol has nothing to do, `wait`
//! polls the queues itself until a frame arrives, the wake descriptor is readable, or
//! the timeout passes: after 64 empty rounds it sleeps `rx_idle_sleep_us` on the wake
//! descriptor between rounds; with 0 it busy-polls, looking at the descriptor every 64
//! rounds. A frame that is not ours (ARP, the kernel's TCP on af_packet) also ends the
//! wait: `receive` sorts it out.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dpdk_sys as sys;

use super::{BURST, Checker, RX_BUDGET, SPINS_BEFORE_SLEEP};

pub(super) struct InlineRx {
    port: u16,
    queues: u16,
    idle_sleep: Duration,
    check: Checker,
    /// Frames `wait` took from the port, delivered by the next `receive`.
    arrived: Vec<*mut sys::rte_mbuf>,
}

impl InlineRx {
    pub(super) fn new(port: u16, queues: u16, idle_sleep: Duration, check: Checker) -> InlineRx {
        InlineRx {
            port,
            queues,
            idle_sleep,
            check,
            arrived: Vec::with_capacity(BURST * usize::from(queues)),
        }
    }

    /// Delivers what `wait` took, then up to [`RX_BUDGET`] frames of each queue; the
    /// datagrams delivered.
    pub(super) fn receive(&mut self, deliver: &mut dyn FnMut(SocketAddrV4, u8, &[u8])) -> usize {
        let mut delivered = 0;
        if !self.arrived.is_empty() {
            let mut arrived = std::mem::take(&mut self.arrived);
            delivered += self.deliver(&mut arrived, deliver);
            arrived.clear();
            self.arrived = arrived;
        }
        let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST];
        for queue in 0..self.queues {
            let mut taken = 0;
            while taken < RX_BUDGET {
                let n = self.poll(queue, &mut burst);
                delivered += self.deliver(&mut burst[..n], deliver);
                taken += n;
                if n < BURST {
                    break;
                }
            }
        }
        delivered
    }

    /// Polls the queues until a frame arrives, `wake` is readable or `timeout` passes.
    pub(super) fn wait(&mut self, wake: RawFd, timeout: Option<Duration>) -> io::Result<()> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST];
        let mut idle = 0u32;
        loop {
            for queue in 0..self.queues {
                let n = self.poll(queue, &mut burst);
                self.arrived.extend_from_slice(&burst[..n]);
            }
            if !self.arrived.is_empty() {
                return Ok(());
            }
            let left = match deadline {
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(()),
                },
                None => None,
            };
            idle += 1;
            if idle < SPINS_BEFORE_SLEEP {
                std::hint::spin_loop();
                continue;
            }
            if self.idle_sleep.is_zero() {
                // Busy-polling: a look at the wake descriptor every 64 rounds.
                idle = 0;
            }
            let nap = left.map_or(self.idle_sleep, |left| left.min(self.idle_sleep));
            if super::super::readable(wake, nap)? {
                return Ok(());
            }
        }
    }

    /// Takes up to a burst of frames from `queue` into `burst`; how many.
    fn poll(&self, queue: u16, burst: &mut [*mut sys::rte_mbuf; BURST]) -> usize {
        // SAFETY: the port is started and only this thread polls its queues.
        let n = unsafe { sys::shim_rx_burst(self.port, queue, burst.as_mut_ptr(), BURST as u16) }
            as usize;
        if n > 0 {
            self.check
                .shared
                .rx
                .frames
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        n
    }

    /// Checks each frame, hands the payloads of ours to `deliver` and frees them all.
    fn deliver(
        &self,
        mbufs: &mut [*mut sys::rte_mbuf],
        deliver: &mut dyn FnMut(SocketAddrV4, u8, &[u8]),
    ) -> usize {
        if mbufs.is_empty() {
            return 0;
        }
        let mut delivered = 0;
        // SAFETY: received mbufs this thread owns until they are freed below.
        unsafe {
            super::each_prefetched(mbufs, |m| {
                if let Some((datagram, frame)) = self.check.accept(m) {
                    deliver(datagram.src, datagram.tos, &frame[datagram.payload]);
                    delivered += 1;
                }
            })
        };
        self.check
            .shared
            .rx
            .delivered
            .fetch_add(delivered as u64, Ordering::Relaxed);
        // SAFETY: delivered or refused; nothing refers to them any more.
        unsafe { sys::rte_pktmbuf_free_bulk(mbufs.as_mut_ptr(), mbufs.len() as u32) };
        delivered
    }

    /// Frees the frames `wait` took and nobody will deliver (the datapath is closing).
    pub(super) fn release(&mut self) {
        if !self.arrived.is_empty() {
            // SAFETY: taken from the port and never delivered; nothing refers to them.
            unsafe {
                sys::rte_pktmbuf_free_bulk(self.arrived.as_mut_ptr(), self.arrived.len() as u32)
            };
            self.arrived.clear();
        }
    }
}

impl Drop for InlineRx {
    fn drop(&mut self) {
        self.release();
    }
}
