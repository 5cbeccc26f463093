//! DPDK's Environment Abstraction Layer: its arguments, computed from the transport
//! configuration, and its one initialisation per process.

use std::ffi::{CStr, CString, c_char};
use std::path::Path;
use std::sync::OnceLock;

use endhost_core::config::TransportConfig;
use endhost_core::vdev::VdevDriver;

/// The EAL's arguments for `config`, with the lcores laid over `cpus` (the CPUs this
/// process may run on), and a warning when the lcores had to share CPUs.
pub fn arguments(
    config: &TransportConfig,
    rx_queues: u16,
    memory_mb: u32,
    cpus: &[u32],
) -> (Vec<String>, Option<String>) {
    let options = &config.dpdk;
    let offset = options
        .threads_offset
        .or_else(|| config.local.cores.first().copied())
        .unwrap_or(0);
    // The main lcore, and one per RX queue unless the datapath thread polls them.
    let rx_lcores = if options.inline_rx { 0 } else { rx_queues };
    let (lcores, warning) = lcores(offset, 1 + usize::from(rx_lcores), cpus);
    let mut args = vec![
        "endhost".to_string(),
        "--file-prefix".into(),
        options
            .file_prefix
            .clone()
            .unwrap_or_else(|| config.local.name.clone()),
        "--lcores".into(),
        lcores,
        "--no-telemetry".into(),
        "--log-level=notice".into(),
    ];
    if options.no_huge {
        args.push("--no-huge".into());
    }
    if options.no_huge || options.memory_mb.is_some() {
        args.extend(["-m".into(), memory_mb.to_string()]);
    }
    match &options.vdev {
        Some(vdev) => args.extend(["--no-pci".into(), "--vdev".into(), vdev.to_string()]),
        None => args.extend(["-a".into(), config.local.pci.to_string()]),
    }
    args.extend(options.eal_args.iter().cloned());
    (args, warning)
}

/// `--lcores`: lcore 0 (main) on CPU `offset`, lcore i on CPU `offset + i`. Where
/// those CPUs are not all available, the lcores take the available CPUs in turn from
/// `offset` on, and the warning says so.
fn lcores(offset: u32, count: usize, cpus: &[u32]) -> (String, Option<String>) {
    let wanted: Vec<u32> = (0..count as u32).map(|i| offset + i).collect();
    let (chosen, warning) = if wanted.iter().all(|c| cpus.contains(c)) {
        (wanted, None)
    } else {
        let start = cpus.iter().position(|&c| c >= offset).unwrap_or(0);
        let chosen: Vec<u32> = (0..count).map(|i| cpus[(start + i) % cpus.len()]).collect();
        let warning = format!(
            "{count} lcores (main, and one per RX queue unless inline_rx) want CPUs {}-{}, this process may use {}: the lcores share CPUs {}",
            offset,
            offset + count as u32 - 1,
            list(cpus),
            list(&chosen)
        );
        (chosen, Some(warning))
    };
    let text = chosen
        .iter()
        .enumerate()
        .map(|(lcore, cpu)| format!("{lcore}@{cpu}"))
        .collect::<Vec<_>>()
        .join(",");
    (text, warning)
}

fn list(cpus: &[u32]) -> String {
    let mut unique = cpus.to_vec();
    unique.sort_unstable();
    unique.dedup();
    unique
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid set of the size given, for this process (pid 0).
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as u32)
        // SAFETY: CPU_ISSET reads the set within its size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect()
}

/// What stops the EAL from starting, checked before it is tried (the EAL can be tried
/// once per process), in the terms an operator acts on.
pub fn preflight(config: &TransportConfig, sysfs: &Path) -> Result<(), String> {
    let options = &config.dpdk;
    // DPDK 22.11's af_xdp without busy polling waits in poll() for up to a second when
    // its fill ring runs dry: on an lcore that costs nothing, on the datapath thread it
    // stalls the protocol.
    if let Some(vdev) = &options.vdev
        && options.inline_rx
        && vdev.driver() == VdevDriver::AfXdp
        && vdev.get("busy_budget") == Some("0")
    {
        return Err(format!(
            "dpdk.inline_rx cannot run {vdev}: with busy_budget=0 the PMD may block the datapath thread for up to a second; leave busy_budget out or turn inline_rx off"
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("no permission: the DPDK datapath runs as root (it maps device memory, hugepages and raw sockets)".into());
    }
    if !options.no_huge {
        let free = free_hugepages(sysfs);
        if free == 0 {
            return Err(format!(
                "no free hugepages under {}/kernel/mm/hugepages: reserve them (mltctl bootstrap --datapath dpdk does) or set dpdk.no_huge",
                sysfs.display()
            ));
        }
    }
    match &options.vdev {
        Some(vdev) => {
            let iface = vdev.get("iface");
            if let Some(iface) = iface
                && !sysfs.join("class/net").join(iface).exists()
            {
                return Err(format!(
                    "missing interface: {vdev} names {iface}, which this host does not have"
                ));
            }
        }
        None => {
            let pci = config.local.pci.to_string();
            if !sysfs.join("bus/pci/devices").join(&pci).exists() {
                return Err(format!(
                    "missing device: no PCI device {pci} (local.pci); set dpdk.vdev for a virtual device"
                ));
            }
        }
    }
    Ok(())
}

fn free_hugepages(sysfs: &Path) -> u64 {
    let Ok(sizes) = std::fs::read_dir(sysfs.join("kernel/mm/hugepages")) else {
        return 0;
    };
    sizes
        .filter_map(Result::ok)
        .filter_map(|size| std::fs::read_to_string(size.path().join("free_hugepages")).ok())
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .sum()
}

/// The arguments the EAL started with, or why it did not.
static EAL: OnceLock<Result<Vec<String>, String>> = OnceLock::new();

/// Starts the EAL with `args`, once per process; a later call with the same arguments
/// finds it running, with other arguments is an error. The EAL pins the thread that
/// starts it to the main lcore's CPU, so a thread of its own starts it and stays
/// parked as the main lcore.
pub fn init(args: &[String]) -> Result<(), String> {
    let started = EAL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let owned = args.to_vec();
        let spawned = std::thread::Builder::new()
            .name("dpdk-main".into())
            .spawn(move || {
                let _ = tx.send(call_init(&owned).map(|()| owned));
                loop {
                    std::thread::park();
                }
            });
        match spawned {
            Ok(_) => rx
                .recv()
                .unwrap_or_else(|_| Err("the EAL thread ended".into())),
            Err(e) => Err(format!("cannot start the EAL thread: {e}")),
        }
    });
    match started {
        Ok(first) if first == args => Ok(()),
        Ok(first) => Err(format!(
            "DPDK's EAL already runs in this process with other arguments ({}); one EAL per process",
            first.join(" ")
        )),
        Err(e) => Err(e.clone()),
    }
}

fn call_init(args: &[String]) -> Result<(), String> {
    let owned: Vec<CString> = args
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| format!("EAL argument {a:?} has a NUL byte")))
        .collect::<Result<_, _>>()?;
    // The EAL may keep pointers into argv for the life of the process.
    let owned: &'static [CString] = Box::leak(owned.into_boxed_slice());
    let mut argv: Vec<*mut c_char> = owned.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let argv: &'static mut [*mut c_char] = Box::leak(argv.into_boxed_slice());
    // SAFETY: argc matches argv's non-null entries; the strings live forever.
    let rc = unsafe { dpdk_sys::rte_eal_init(args.len() as i32, argv.as_mut_ptr()) };
    if rc >= 0 {
        return Ok(());
    }
    // SAFETY: shim_errno reads DPDK's thread-local rte_errno, set by the failed call.
    let errno = unsafe { dpdk_sys::shim_errno() };
    let why = match errno {
        libc::EINVAL => "bad arguments".to_string(),
        libc::EACCES => "no permission".to_string(),
        libc::ENOMEM => {
            "not enough memory: too few free hugepages for -m, or set dpdk.no_huge".to_string()
        }
        libc::ENODEV => "a device or bus could not be probed".to_string(),
        _ => strerror(errno),
    };
    Err(format!(
        "DPDK's EAL did not start ({why}; its log above has details); arguments: {}",
        args[1..].join(" ")
    ))
}

/// DPDK's text for an error number.
pub fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a NUL-terminated string that outlives this call.
    unsafe { CStr::from_ptr(dpdk_sys::rte_strerror(errno)) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcores_follow_the_offset_and_share_cpus_only_when_they_must() {
        assert_eq!(
            lcores(2, 5, &[0, 1, 2, 3, 4, 5, 6, 7]),
            ("0@2,1@3,2@4,3@5,4@6".into(), None)
        );
        let (text, warning) = lcores(0, 5, &[0, 1]);
        assert_eq!(text, "0@0,1@1,2@0,3@1,4@0");
        assert!(warning.unwrap().contains("share CPUs 0,1"));
        let (text, _) = lcores(1, 3, &[0, 1]);
        assert_eq!(text, "0@1,1@0,2@1");
    }

    #[test]
    fn arguments_come_from_the_configuration() {
        let mut config: TransportConfig =
            serde_json::from_str(include_str!("../../../tests/data/dpdk-host.json")).unwrap();
        let (args, _) = arguments(&config, 4, 512, &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(
            args.join(" "),
            "endhost --file-prefix h2 --lcores 0@2,1@3,2@4,3@5,4@6 --no-telemetry --log-level=notice -a 0000:3b:00.0"
        );
        config.dpdk.vdev = Some("net_af_packet0,iface=veth1".parse().unwrap());
        config.dpdk.no_huge = true;
        config.dpdk.threads_offset = Some(0);
        config.dpdk.file_prefix = Some("rank1".into());
        config.dpdk.eal_args = vec!["--log-level=debug".into()];
        let (args, _) = arguments(&config, 1, 512, &[0, 1]);
        assert_eq!(
            args.join(" "),
            "endhost --file-prefix rank1 --lcores 0@0,1@1 --no-telemetry --log-level=notice --no-huge -m 512 --no-pci --vdev net_af_packet0,iface=veth1 --log-level=debug"
        );
        // The datapath thread polls the queues: the main lcore only.
        config.dpdk.inline_rx = true;
        let (args, _) = arguments(&config, 4, 512, &[0, 1]);
        assert!(args.join(" ").contains("--lcores 0@0 "), "{args:?}");
    }

    #[test]
    fn inline_polling_refuses_an_af_xdp_port_that_may_block() {
        let mut config: TransportConfig =
            serde_json::from_str(include_str!("../../../tests/data/dpdk-host.json")).unwrap();
        config.dpdk.inline_rx = true;
        config.dpdk.no_huge = true;
        config.dpdk.vdev = Some("net_af_xdp0,iface=lo,busy_budget=0".parse().unwrap());
        let refused = preflight(&config, Path::new("/sys")).unwrap_err();
        assert!(refused.contains("busy_budget=0"), "{refused}");
        config.dpdk.inline_rx = false;
        let lcores = preflight(&config, Path::new("/sys"))
            .err()
            .unwrap_or_default();
        assert!(!lcores.contains("busy_budget"), "{lcores}");
    }
}
