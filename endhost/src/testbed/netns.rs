//! A test fabric on one machine: each host a network namespace with one veth into a
//! "switch" namespace that bridges them (iproute2). tbf on a switch port limits the
//! link's rate towards its host and its latency is the port's buffer, so traffic that
//! converges on a port, or comes faster than the port drains, queues and drops there as
//! on a switch. The hosts' side can be shaped too (a NIC queue). Random loss, if asked,
//! is an nftables rule on the switch (`numgen random`). The kernel has no netem, so this
//! is how links, buffers and loss are emulated. Dropping the fabric deletes every
//! namespace it made (and with them their links and rules).

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use endhost_core::addr::MacAddr;
use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, Clone)]
pub struct FabricSpec {
    pub hosts: usize,
    /// Link rate, Mbit/s.
    pub rate_mbit: u64,
    /// tbf latency (buffer) on the hosts' side of each link, ms; 0: not shaped.
    pub host_buffer_ms: u32,
    /// tbf latency (buffer) on the switch's ports, ms; 0: not shaped.
    pub switch_buffer_ms: u32,
    /// Packets the switch drops at random, percent.
    pub loss_percent: f64,
}

/// A fabric that exists until dropped.
#[derive(Debug)]
pub struct Fabric {
    prefix: String,
    hosts: usize,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn run(program: &str, args: &[&str]) -> io::Result<()> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("{program}: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// `tc` arguments for a token-bucket rate limit on `dev`; `latency` bounds its queue.
fn tbf<'a>(dev: &'a str, rate: &'a str, burst: &'a str, latency: &'a str) -> [&'a str; 12] {
    [
        "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", burst, "latency", latency,
    ]
}

/// Runs `program` inside namespace `ns`.
fn in_ns(ns: &str, program: &str, args: &[&str]) -> io::Result<()> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    run("ip", &all)
}

impl Fabric {
    /// Builds the fabric; on failure removes whatever was made.
    pub fn create(spec: &FabricSpec) -> io::Result<Fabric> {
        let prefix = format!(
            "mlt{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let fabric = Fabric {
            prefix,
            hosts: spec.hosts,
        };
        fabric.build(spec)?;
        Ok(fabric)
    }

    /// The switch namespace's name.
    pub fn switch(&self) -> String {
        format!("{}sw", self.prefix)
    }

    /// Host `i`'s namespace name.
    pub fn host(&self, i: usize) -> String {
        format!("{}h{i}", self.prefix)
    }

    /// Host `i`'s address on the fabric (10.77.0.i+1/24).
    pub fn ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, 0, 1 + i as u8)
    }

    /// The switch's port facing host `i`.
    pub fn switch_port(&self, i: usize) -> String {
        format!("p{i}")
    }

    fn build(&self, spec: &FabricSpec) -> io::Result<()> {
        if spec.hosts == 0 || spec.hosts > 200 {
            return Err(io::Error::other("a fabric has 1 to 200 hosts"));
        }
        let sw = self.switch();
        run("ip", &["netns", "add", &sw])?;
        in_ns(&sw, "ip", &["link", "add", "br0", "type", "bridge"])?;
        in_ns(&sw, "ip", &["link", "set", "br0", "up"])?;
        let rate = format!("{}mbit", spec.rate_mbit);
        // At least half a millisecond of line rate, so tbf passes full-size bursts.
        let burst = format!("{}", (spec.rate_mbit * 1_000_000 / 8 / 2000).max(16_384));
        for i in 0..spec.hosts {
            let host = self.host(i);
            let port = self.switch_port(i);
            let tmp = format!("{}v{i}", self.prefix);
            run("ip", &["netns", "add", &host])?;
            run(
                "ip",
                &[
                    "link", "add", &tmp, "type", "veth", "peer", "name", &port, "netns", &sw,
                ],
            )?;
            run("ip", &["link", "set", &tmp, "netns", &host])?;
            in_ns(&host, "ip", &["link", "set", &tmp, "name", "eth0"])?;
            let address = format!("{}/24", Fabric::ip(i));
            in_ns(&host, "ip", &["addr", "add", &address, "dev", "eth0"])?;
            in_ns(&host, "ip", &["link", "set", "eth0", "up"])?;
            in_ns(&host, "ip", &["link", "set", "lo", "up"])?;
            in_ns(&sw, "ip", &["link", "set", &port, "master", "br0"])?;
            in_ns(&sw, "ip", &["link", "set", &port, "up"])?;
            if spec.host_buffer_ms > 0 {
                let latency = format!("{}ms", spec.host_buffer_ms);
                in_ns(&host, "tc", &tbf("eth0", &rate, &burst, &latency))?;
            }
            if spec.switch_buffer_ms > 0 {
                let latency = format!("{}ms", spec.switch_buffer_ms);
                in_ns(&sw, "tc", &tbf(&port, &rate, &burst, &latency))?;
            }
        }
        if spec.loss_percent > 0.0 {
            let per_10k = (spec.loss_percent * 100.0).round().to_string();
            in_ns(&sw, "nft", &["add", "table", "bridge", "lossy"])?;
            in_ns(
                &sw,
                "nft",
                &[
                    "add",
                    "chain",
                    "bridge",
                    "lossy",
                    "forward",
                    "{ type filter hook forward priority 0; policy accept; }",
                ],
            )?;
            in_ns(
                &sw,
                "nft",
                &[
                    "add", "rule", "bridge", "lossy", "forward", "numgen", "random", "mod",
                    "10000", "<", &per_10k, "counter", "drop",
                ],
            )?;
        }
        Ok(())
    }

    /// A command that runs `program` in host `i`'s namespace.
    pub fn command(&self, i: usize, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.host(i), program]);
        command
    }

    /// Runs a command in the switch's namespace (for tests that look at its traffic).
    pub fn switch_command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.switch(), program]);
        command
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for i in 0..self.hosts {
            let _ = run("ip", &["netns", "del", &self.host(i)]);
        }
        let _ = run("ip", &["netns", "del", &self.switch()]);
    }
}

/// Whether this process may build fabrics: root, with iproute2, tc and nft at hand.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("namespaces need root".into());
    }
    for tool in ["ip", "tc", "nft"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    None
}

/// Two hosts joined by one veth pair and nothing else (`eth0` in each namespace,
/// 10.78.0.1/24 and 10.78.0.2/24): the setting in which datapaths are compared.
/// Transmit checksum offload is off on both ends, so that every frame on the veth
/// carries real checksums, as on a wire: a kernel-bypass reader (af_packet, af_xdp)
/// would otherwise see the kernel's partial ones. Dropping the pair deletes it.
#[derive(Debug)]
pub struct Pair {
    prefix: String,
}

impl Pair {
    pub fn create() -> io::Result<Pair> {
        let pair = Pair {
            prefix: format!(
                "mlt{}p{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
        };
        pair.build()?;
        Ok(pair)
    }

    /// Host `i`'s namespace (i is 0 or 1).
    pub fn host(&self, i: usize) -> String {
        format!("{}h{i}", self.prefix)
    }

    pub fn ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 78, 0, 1 + i as u8)
    }

    fn build(&self) -> io::Result<()> {
        let tmp = format!("{}v", self.prefix);
        run("ip", &["netns", "add", &self.host(0)])?;
        run("ip", &["netns", "add", &self.host(1)])?;
        run(
            "ip",
            &[
                "link",
                "add",
                &tmp,
                "netns",
                &self.host(0),
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &self.host(1),
            ],
        )?;
        in_ns(&self.host(0), "ip", &["link", "set", &tmp, "name", "eth0"])?;
        for i in 0..2 {
            let host = self.host(i);
            let address = format!("{}/24", Pair::ip(i));
            in_ns(&host, "ip", &["addr", "add", &address, "dev", "eth0"])?;
            in_ns(&host, "ethtool", &["-K", "eth0", "tx", "off"])?;
            in_ns(&host, "ip", &["link", "set", "eth0", "up"])?;
            in_ns(&host, "ip", &["link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// Host `i`'s MAC on the veth.
    pub fn mac(&self, i: usize) -> io::Result<MacAddr> {
        let out = self
            .command(i, "cat")
            .arg("/sys/class/net/eth0/address")
            .output()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|e| io::Error::other(format!("the veth's MAC: {e}")))
    }

    /// Host `i` drops `percent` of the UDP datagrams it sends and receives, at random
    /// (nftables on its veth's egress and ingress hooks). Only a host on kernel sockets
    /// sees its drops in both directions: a kernel-bypass reader on the other host
    /// takes frames before the ingress hook.
    pub fn lossy(&self, i: usize, percent: f64) -> io::Result<()> {
        let per_10k = (percent * 100.0).round().to_string();
        let host = self.host(i);
        in_ns(&host, "nft", &["add", "table", "netdev", "lossy"])?;
        for hook in ["ingress", "egress"] {
            let chain =
                format!("{{ type filter hook {hook} device eth0 priority 0; policy accept; }}");
            in_ns(
                &host,
                "nft",
                &["add", "chain", "netdev", "lossy", hook, &chain],
            )?;
            in_ns(
                &host,
                "nft",
                &[
                    "add", "rule", "netdev", "lossy", hook, "ip", "protocol", "udp", "numgen",
                    "random", "mod", "10000", "<", &per_10k, "counter", "drop",
                ],
            )?;
        }
        Ok(())
    }

    /// A command that runs `program` in host `i`'s namespace.
    pub fn command(&self, i: usize, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.host(i), program]);
        command
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for i in 0..2 {
            let _ = run("ip", &["netns", "del", &self.host(i)]);
        }
    }
}

/// Moves the calling thread (only) into the named network namespace `ns`.
pub fn enter(ns: &str) -> io::Result<()> {
    let netns = std::fs::File::open(std::path::Path::new("/run/netns").join(ns))?;
    // SAFETY: setns on this thread only, with a namespace file we hold open.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Captures the frames seen on interface `iface` of namespace `ns` (both directions)
/// for `duration`, on a thread of its own.
pub fn capture(
    ns: &str,
    iface: &str,
    duration: Duration,
) -> std::thread::JoinHandle<io::Result<Vec<Vec<u8>>>> {
    let ns = ns.to_string();
    let iface = iface.to_string();
    std::thread::spawn(move || {
        enter(&ns)?;
        let protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: creating a raw packet socket; checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol)) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = std::ffi::CString::new(iface.as_str()).map_err(io::Error::other)?;
        // SAFETY: sockaddr_ll is plain data; the index comes from the kernel.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol;
        // SAFETY: a NUL-terminated name.
        addr.sll_ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        if addr.sll_ifindex == 0 {
            return Err(io::Error::other(format!("no interface {iface} in {ns}")));
        }
        // SAFETY: binding our socket to a valid sockaddr_ll.
        let rc = unsafe {
            libc::bind(
                socket.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        // SAFETY: setting a receive timeout from a timeval.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&timeout as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        let mut frames = Vec::new();
        let mut buf = vec![0u8; 65_536];
        let end = std::time::Instant::now() + duration;
        while std::time::Instant::now() < end {
            // SAFETY: receiving into a buffer of the size given.
            let n =
                unsafe { libc::recv(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n > 0 {
                frames.push(buf[..n as usize].to_vec());
            }
        }
        Ok(frames)
    })
}
