//! Bindings to the system DPDK (22.11), written by hand for the small surface endhost's
//! DPDK datapath uses. Exported DPDK functions are declared as they are in DPDK's
//! headers; DPDK's static-inline fast path (bursts, mbuf allocation and data access,
//! ring operations, `rte_errno`) goes through `csrc/shim.c`, and so does port setup,
//! so that the large configuration structures stay on the C side. DPDK's own types are
//! opaque here: Rust only ever holds pointers to them.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `struct rte_mbuf`.
#[repr(C)]
pub struct rte_mbuf {
    _opaque: [u8; 0],
}

/// `struct rte_mempool`.
#[repr(C)]
pub struct rte_mempool {
    _opaque: [u8; 0],
}

/// `struct rte_ring`.
#[repr(C)]
pub struct rte_ring {
    _opaque: [u8; 0],
}

/// `struct rte_ether_addr` (6 bytes, 2-byte aligned).
#[repr(C, align(2))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct rte_ether_addr {
    pub addr_bytes: [u8; 6],
}

/// `struct shim_port_info` in shim.c.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_port_info {
    pub max_rx_queues: u16,
    pub max_tx_queues: u16,
    pub driver: [c_char; 32],
}

/// `struct shim_port_stats` in shim.c: the port's `rte_eth_stats` totals.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_port_stats {
    pub ipackets: u64,
    pub opackets: u64,
    pub ibytes: u64,
    pub obytes: u64,
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    pub rx_nombuf: u64,
}

/// The XDP program of the af_xdp path (`csrc/xdp_redirect.bpf.c`), compiled.
pub const XDP_REDIRECT_OBJECT: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/xdp_redirect.bpf.o"));

/// `SOCKET_ID_ANY`.
pub const SOCKET_ID_ANY: c_int = -1;
/// `RING_F_SP_ENQ`: one producer.
pub const RING_F_SP_ENQ: c_uint = 0x0001;
/// `RING_F_SC_DEQ`: one consumer.
pub const RING_F_SC_DEQ: c_uint = 0x0002;

/// `lcore_function_t`.
pub type lcore_function_t = unsafe extern "C" fn(arg: *mut c_void) -> c_int;

unsafe extern "C" {
    pub fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub fn rte_strerror(errnum: c_int) -> *const c_char;
    pub fn rte_eal_remote_launch(f: lcore_function_t, arg: *mut c_void, worker_id: c_uint)
    -> c_int;
    pub fn rte_eal_wait_lcore(worker_id: c_uint) -> c_int;
    pub fn rte_thread_unregister();
    pub fn rte_get_tsc_hz() -> u64;

    pub fn rte_eth_dev_count_avail() -> u16;
    pub fn rte_eth_macaddr_get(port_id: u16, mac_addr: *mut rte_ether_addr) -> c_int;
    pub fn rte_eth_dev_stop(port_id: u16) -> c_int;
    pub fn rte_eth_dev_close(port_id: u16) -> c_int;

    pub fn rte_pktmbuf_pool_create(
        name: *const c_char,
        n: c_uint,
        cache_size: c_uint,
        priv_size: u16,
        data_room_size: u16,
        socket_id: c_int,
    ) -> *mut rte_mempool;
    pub fn rte_mempool_free(mp: *mut rte_mempool);
    pub fn rte_pktmbuf_free_bulk(mbufs: *mut *mut rte_mbuf, count: c_uint);

    pub fn rte_ring_create(
        name: *const c_char,
        count: c_uint,
        socket_id: c_int,
        flags: c_uint,
    ) -> *mut rte_ring;
    pub fn rte_ring_free(r: *mut rte_ring);

    pub fn shim_errno() -> c_int;
    pub fn shim_pktmbuf_pool_create_packed(
        name: *const c_char,
        n: c_uint,
        cache: c_uint,
        data_room: u16,
        socket: c_int,
    ) -> *mut rte_mempool;
    pub fn shim_rdtsc() -> u64;
    pub fn shim_default_buf_size() -> u16;
    pub fn shim_port_info(port: u16, out: *mut shim_port_info) -> c_int;
    pub fn shim_port_setup(
        port: u16,
        nb_rxq: u16,
        nb_txq: u16,
        rx_desc: *mut u16,
        tx_desc: *mut u16,
        pool: *mut rte_mempool,
        mtu: u16,
        step: *mut *const c_char,
    ) -> c_int;
    pub fn shim_port_stats(port: u16, out: *mut shim_port_stats) -> c_int;
    pub fn shim_link_up(port: u16) -> c_int;
    pub fn shim_flow_isolate(port: u16, set: c_int, message: *mut *const c_char) -> c_int;
    pub fn shim_flow_udp_to_queue(
        port: u16,
        dst_be: u32,
        dst_port: u16,
        src_port: i32,
        queue: u16,
        priority: u32,
        message: *mut *const c_char,
    ) -> c_int;
    pub fn shim_rx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;
    pub fn shim_tx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;
    pub fn shim_pktmbuf_alloc(pool: *mut rte_mempool) -> *mut rte_mbuf;
    pub fn shim_pktmbuf_alloc_bulk(
        pool: *mut rte_mempool,
        mbufs: *mut *mut rte_mbuf,
        n: c_uint,
    ) -> c_int;
    pub fn shim_thread_register() -> c_int;
    pub fn shim_mempool_flush_own_cache(pool: *mut rte_mempool);
    pub fn shim_pktmbuf_free(m: *mut rte_mbuf);
    pub fn shim_mbuf_data(m: *mut rte_mbuf, len: *mut u16) -> *mut u8;
    pub fn shim_mbuf_append(m: *mut rte_mbuf, len: u16) -> *mut u8;
    pub fn shim_mbuf_keep(m: *mut rte_mbuf, len: u16);
    pub fn shim_mbuf_segments(m: *const rte_mbuf) -> u16;
    pub fn shim_mbuf_prefetch(m: *const rte_mbuf);
    pub fn shim_ring_enqueue_burst(r: *mut rte_ring, objs: *mut *mut rte_mbuf, n: c_uint)
    -> c_uint;
    pub fn shim_ring_dequeue_burst(r: *mut rte_ring, objs: *mut *mut rte_mbuf, n: c_uint)
    -> c_uint;
    pub fn shim_ring_count(r: *const rte_ring) -> c_uint;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Links against DPDK and calls into both the shared libraries and the shim
    /// without an EAL: the build found and linked what it declares.
    #[test]
    fn links_dpdk_and_the_shim() {
        // SAFETY: both are pure lookups that need no EAL.
        let (buf, text) = unsafe { (shim_default_buf_size(), rte_strerror(libc_enoent())) };
        assert_eq!(buf, 2048 + 128);
        // SAFETY: rte_strerror returns a NUL-terminated static or thread-local string.
        let text = unsafe { std::ffi::CStr::from_ptr(text) };
        assert!(text.to_string_lossy().contains("No such file"), "{text:?}");
    }

    fn libc_enoent() -> c_int {
        2
    }
}
