//! Starting the DPDK datapath, step by step: size the mempool, start the EAL (with our
//! XDP program for af_xdp), open the port and its pool, set the port up and wait for
//! its link, then start one RX lcore per queue (or, inline, none: the datapath thread
//! polls them).

use std::ffi::{CStr, CString};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dpdk_sys as sys;
use endhost_core::addr::MacAddr;
use endhost_core::config::TransportConfig;
use endhost_core::vdev::VdevDriver;

use super::inline::InlineRx;
use super::{
    BURST, Checker, DpdkDatapath, Lcore, POOL_CACHE, PortGuard, Receiving, RxCounters, RxQueue,
    STARTED, Shared, ThreadCache, await_memif_server, check, eal, error, install_flow_rules,
    rte_errno, rx_lcore, wait_for_link, xdp,
};

/// How much memory the datapath asks for.
struct Sizing {
    /// RX queues the configuration asks for.
    queues: u16,
    mbufs: u32,
    buf_size: u16,
    pool_mb: u64,
    memory_mb: u32,
}

impl Sizing {
    /// Mbufs: every RX descriptor and handover slot (none inline), the TX ring, bursts
    /// in flight, and what the caches of the RX lcores and the datapath thread may hold.
    fn of(config: &TransportConfig) -> io::Result<Sizing> {
        let datapath = &config.job.datapath;
        let queues = datapath.rx_queues.max(1);
        let queues64 = u64::from(queues);
        let (handover, lcores) = if config.dpdk.inline_rx {
            (0, 0)
        } else {
            (u64::from(handover_slots(datapath.rx_ring)), queues64)
        };
        let mbufs = u32::try_from(
            queues64 * (u64::from(datapath.rx_ring) + handover)
                + u64::from(datapath.tx_ring)
                + 4 * BURST as u64
                + u64::from(POOL_CACHE) * (lcores + 1),
        )
        .map_err(|_| error("rx_queues × rx_ring is too large for one mempool".into()))?;
        // SAFETY: a constant lookup.
        let buf_size = unsafe { sys::shim_default_buf_size() };
        let pool_mb = (u64::from(mbufs) * (u64::from(buf_size) + 256)).div_ceil(1 << 20);
        let memory_mb = config
            .dpdk
            .memory_mb
            .unwrap_or((pool_mb * 3 / 2 + 64) as u32);
        Ok(Sizing {
            queues,
            mbufs,
            buf_size,
            pool_mb,
            memory_mb,
        })
    }
}

/// An RX queue's handover ring: a power of two of at least its descriptors.
fn handover_slots(rx_ring: u16) -> u32 {
    u32::from(rx_ring).next_power_of_two()
}

impl DpdkDatapath {
    /// Starts the EAL (once per process), sets up the port, and starts one RX lcore
    /// per queue unless the datapath thread polls them (`dpdk.inline_rx`).
    pub fn start(config: &TransportConfig) -> io::Result<DpdkDatapath> {
        let mut next_hops: Vec<_> =
            super::super::ipmac::next_hops(config, config.dpdk.ip_mac.as_deref())
                .map_err(error)?
                .into_iter()
                .collect();
        next_hops.sort_unstable_by_key(|(ip, _)| *ip);
        let sizing = Sizing::of(config)?;
        let program = start_eal(config, &sizing)?;
        let port = 0;
        let (info, queues, pool) = open_port(config, &sizing, port)?;
        // Until the datapath owns the port, a failure closes it: af_xdp's program
        // would otherwise stay on the interface after this process. Not a memif port
        // (see `close_on_drop`).
        let memif = config
            .dpdk
            .vdev
            .as_ref()
            .is_some_and(|v| v.driver() == VdevDriver::Memif);
        let mut port_guard = PortGuard {
            port,
            armed: !memif,
        };
        let driver = set_up_port(config, port, &info, queues, pool, program.is_some())?;
        // The PMD has loaded the program by now.
        drop(program);
        wait_for_link(port, &driver)?;
        let mut mac = sys::rte_ether_addr::default();
        // SAFETY: a valid port and output.
        check(
            unsafe { sys::rte_eth_macaddr_get(port, &mut mac) },
            "rte_eth_macaddr_get",
        )?;
        // SAFETY: eventfd returns a new descriptor or -1.
        let event = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if event < 0 {
            return Err(io::Error::last_os_error());
        }
        let shared = Arc::new(Shared {
            // SAFETY: a fresh descriptor we own.
            event: unsafe { OwnedFd::from_raw_fd(event) },
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            rx: RxCounters::default(),
        });
        let mut addresses = config.local.path_addresses.clone();
        if !addresses.contains(&config.local.ip) {
            addresses.push(config.local.ip);
        }
        if config.dpdk.isolate {
            install_flow_rules(port, &addresses, config.job.ports.data, queues)?;
        }
        port_guard.armed = false;
        let mut datapath = DpdkDatapath {
            port,
            pool,
            mac: MacAddr(mac.addr_bytes),
            source: config.local.ip,
            data_port: config.job.ports.data,
            lanes: queues,
            next_hops,
            pending: Vec::with_capacity(BURST),
            stock: Vec::with_capacity(BURST),
            last_hop: None,
            thread: ThreadCache::Unchecked,
            rx: Receiving::Lcores(Vec::new()),
            close_on_drop: !memif,
            shared,
            tx_frames: 0,
            tx_dropped: 0,
            _kernel_port: UdpSocket::bind(SocketAddrV4::new(
                Ipv4Addr::UNSPECIFIED,
                config.job.ports.data,
            ))
            .ok(),
        };
        if config.dpdk.inline_rx {
            let idle_sleep = Duration::from_micros(u64::from(config.dpdk.rx_idle_sleep_us));
            let check = datapath.checker(config, &addresses);
            datapath.rx = Receiving::Inline(InlineRx::new(port, queues, idle_sleep, check));
        } else {
            datapath.start_rx_lcores(config, queues, &addresses)?;
        }
        Ok(datapath)
    }

    fn checker(&self, config: &TransportConfig, addresses: &[Ipv4Addr]) -> Checker {
        Checker {
            mac: self.mac,
            addresses: addresses.to_vec(),
            data_port: config.job.ports.data,
            shared: self.shared.clone(),
        }
    }

    /// One RX lcore per queue, each handing its frames over on a ring of its own.
    fn start_rx_lcores(
        &mut self,
        config: &TransportConfig,
        queues: u16,
        addresses: &[Ipv4Addr],
    ) -> io::Result<()> {
        let slots = handover_slots(config.job.datapath.rx_ring);
        for queue in 0..queues {
            let ring = create_ring(&format!("endhost_rx{queue}"), slots)?;
            let mut rx = Box::new(RxQueue {
                port: self.port,
                queue,
                ring,
                idle_sleep: Duration::from_micros(u64::from(config.dpdk.rx_idle_sleep_us)),
                check: self.checker(config, addresses),
            });
            let id = u32::from(queue) + 1;
            let arg: *mut RxQueue = &mut *rx;
            // SAFETY: lcore `id` exists (--lcores has one per queue) and is idle; `rx`
            // outlives the lcore's run (Drop waits for it before freeing).
            let rc = unsafe { sys::rte_eal_remote_launch(rx_lcore, arg.cast(), id) };
            if rc != 0 {
                // SAFETY: no lcore took the ring; nothing else knows it.
                unsafe { sys::rte_ring_free(rx.ring) };
                return Err(error(format!(
                    "cannot start the RX lcore of queue {queue}: {}",
                    eal::strerror(-rc)
                )));
            }
            if let Receiving::Lcores(lcores) = &mut self.rx {
                lcores.push(Lcore { id, queue: rx });
            }
        }
        Ok(())
    }
}

/// A single-producer single-consumer ring of `slots` mbuf pointers.
fn create_ring(name: &str, slots: u32) -> io::Result<*mut sys::rte_ring> {
    let c_name = CString::new(name).expect("no NUL");
    // SAFETY: the EAL is running; the name is a valid C string.
    let ring = unsafe {
        sys::rte_ring_create(
            c_name.as_ptr(),
            slots,
            sys::SOCKET_ID_ANY,
            sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
        )
    };
    if ring.is_null() {
        return Err(error(format!(
            "cannot create the ring {name}: {}",
            eal::strerror(rte_errno())
        )));
    }
    Ok(ring)
}

/// Checks what the EAL needs, writes our XDP program for an af_xdp device (returned:
/// it must live until the port is set up), and starts the EAL once per process.
fn start_eal(config: &TransportConfig, sizing: &Sizing) -> io::Result<Option<xdp::ProgramFile>> {
    eal::preflight(config, Path::new("/sys")).map_err(error)?;
    if let Some(vdev) = &config.dpdk.vdev {
        await_memif_server(vdev)?;
    }
    // An af_xdp device gets our XDP program, which leaves the kernel all but the data
    // port; the PMD loads the file when the queues are set up.
    let mut program = None;
    let mut program_vdev = None;
    if let Some(vdev) = config
        .dpdk
        .vdev
        .as_ref()
        .filter(|v| v.driver() == VdevDriver::AfXdp)
    {
        let object =
            xdp::program_for(sys::XDP_REDIRECT_OBJECT, config.job.ports.data).map_err(error)?;
        let file = xdp::ProgramFile::write(&object)
            .map_err(|e| error(format!("cannot write the XDP program: {e}")))?;
        program_vdev = Some(
            vdev.with_program(&file.path())
                .map_err(|e| error(e.to_string()))?,
        );
        program = Some(file);
    }
    let (mut args, warning) = eal::arguments(
        config,
        sizing.queues,
        sizing.memory_mb,
        &eal::allowed_cpus(),
    );
    if let Some(with_program) = program_vdev {
        let at = args
            .iter()
            .position(|a| a == "--vdev")
            .expect("a vdev is given");
        args[at + 1] = with_program;
    }
    if let Some(warning) = warning {
        eprintln!("endhost: {warning}");
    }
    if STARTED.swap(true, Ordering::SeqCst) {
        return Err(error(
            "one DPDK datapath per process: this process already started one".into(),
        ));
    }
    eal::init(&args).map_err(error)?;
    Ok(program)
}

/// The port the EAL found, the RX queues it offers of those asked for, and the
/// mempool its frames live in.
fn open_port(
    config: &TransportConfig,
    sizing: &Sizing,
    port: u16,
) -> io::Result<(sys::shim_port_info, u16, *mut sys::rte_mempool)> {
    // SAFETY: the EAL is running.
    if unsafe { sys::rte_eth_dev_count_avail() } == 0 {
        return Err(error(format!(
            "missing device: the EAL found no port for {}",
            config
                .dpdk
                .vdev
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_else(|| format!("PCI device {}", config.local.pci))
        )));
    }
    // SAFETY: plain data filled by the shim.
    let mut info: sys::shim_port_info = unsafe { std::mem::zeroed() };
    // SAFETY: a valid port and output.
    check(
        unsafe { sys::shim_port_info(port, &mut info) },
        "rte_eth_dev_info_get",
    )?;
    let wanted = sizing.queues;
    let queues = wanted.min(info.max_rx_queues.max(1));
    if queues < wanted {
        eprintln!(
            "endhost: the port offers {} RX queues; using {queues} of the {wanted} configured (af_packet: add qpairs={wanted} to the vdev)",
            info.max_rx_queues
        );
    }
    let name = CString::new("endhost_mbufs").expect("no NUL");
    let pool = if config.dpdk.vdev.is_some() {
        // A virtual device does no DMA: the objects need not keep to IOVA pages, and
        // af_xdp needs them back to back (see the shim).
        // SAFETY: the EAL is running; the name is a valid C string.
        unsafe {
            sys::shim_pktmbuf_pool_create_packed(
                name.as_ptr(),
                sizing.mbufs,
                POOL_CACHE,
                sizing.buf_size,
                sys::SOCKET_ID_ANY,
            )
        }
    } else {
        // SAFETY: as above.
        unsafe {
            sys::rte_pktmbuf_pool_create(
                name.as_ptr(),
                sizing.mbufs,
                POOL_CACHE,
                0,
                sizing.buf_size,
                sys::SOCKET_ID_ANY,
            )
        }
    };
    if pool.is_null() {
        return Err(error(format!(
            "cannot create a mempool of {} mbufs ({} MiB): {}; raise dpdk.memory_mb or reserve more hugepages",
            sizing.mbufs,
            sizing.pool_mb,
            eal::strerror(rte_errno())
        )));
    }
    Ok((info, queues, pool))
}

/// Isolates the port's flows if asked (mlx5) and sets it up with its queues; returns
/// its driver's name. `with_program`: an XDP program is to be loaded (for the hint).
fn set_up_port(
    config: &TransportConfig,
    port: u16,
    info: &sys::shim_port_info,
    queues: u16,
    pool: *mut sys::rte_mempool,
    with_program: bool,
) -> io::Result<String> {
    if config.dpdk.isolate {
        let mut message = std::ptr::null();
        // SAFETY: a valid, not yet configured port; the shim points `message` at a
        // static or driver-owned string on failure.
        let rc = unsafe { sys::shim_flow_isolate(port, 1, &mut message) };
        if rc != 0 {
            return Err(error(format!(
                "cannot isolate the port's flows (dpdk.isolate): {}",
                // SAFETY: set by the shim on failure.
                unsafe { CStr::from_ptr(message) }.to_string_lossy()
            )));
        }
    }
    let datapath = &config.job.datapath;
    let (mut rx_desc, mut tx_desc) = (datapath.rx_ring, datapath.tx_ring);
    // af_xdp pairs each RX queue with a TX queue (one AF_XDP socket each); the datapath
    // sends on queue 0 alone.
    // SAFETY: the shim wrote a NUL-terminated name.
    let driver = unsafe { CStr::from_ptr(info.driver.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let tx_queues = if driver == "net_af_xdp" { queues } else { 1 };
    let mut step = std::ptr::null();
    // SAFETY: a valid port, pool and outputs.
    let rc = unsafe {
        sys::shim_port_setup(
            port,
            queues,
            tx_queues,
            &mut rx_desc,
            &mut tx_desc,
            pool,
            config.job.mtu,
            &mut step,
        )
    };
    if rc != 0 {
        // SAFETY: the shim points `step` at a static string.
        let step = unsafe { CStr::from_ptr(step) }.to_string_lossy();
        let hint = if with_program {
            " (af_xdp: the PMD's log says why; an XDP program left on the interface by a \
             transport that did not stop is removed with `ip link set dev NIC xdp off`)"
        } else {
            ""
        };
        return Err(error(format!(
            "port setup failed at {step}: {}{hint}",
            eal::strerror(-rc)
        )));
    }
    Ok(driver)
}
