//! A test fabric on one machine (through `mlt_netns`, the one namespace builder): each
//! host a network namespace with one veth into a "switch" namespace that bridges them.
//! tbf on a switch port limits the link's rate towards its host and its latency is the
//! port's buffer, so traffic that converges on a port, or comes faster than the port
//! drains, queues and drops there as on a switch. The hosts' side can be shaped too (a
//! NIC queue). Random loss, if asked, is an nftables rule on the switch's forwarding
//! path. The kernel has no netem, so this is how links, buffers and loss are emulated.
//! Dropping the fabric deletes every namespace it made (and with them their links,
//! rules and processes).

use std::io;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use endhost_core::addr::MacAddr;
use mlt_common::units::{Duration, Rate};
pub use mlt_netns::capture::{capture, enter};
pub use mlt_netns::unavailable;
use mlt_netns::{Namespace, Namespaces, Role, cable};

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
    _namespaces: Namespaces,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn unique(kind: char) -> String {
    format!(
        "mlt{}{kind}{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Fabric {
    /// Builds the fabric; on failure removes whatever was made.
    pub fn create(spec: &FabricSpec) -> io::Result<Fabric> {
        if spec.hosts == 0 || spec.hosts > 200 {
            return Err(io::Error::other("a fabric has 1 to 200 hosts"));
        }
        let prefix = unique('x');
        let mut namespaces = Namespaces::new();
        build(&prefix, spec, &mut namespaces).map_err(io::Error::other)?;
        Ok(Fabric {
            prefix,
            _namespaces: namespaces,
        })
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

    /// A command that runs `program` in host `i`'s namespace.
    pub fn command(&self, i: usize, program: &str) -> Command {
        Namespace::named(self.host(i)).command(program)
    }

    /// Runs a command in the switch's namespace (for tests that look at its traffic).
    pub fn switch_command(&self, program: &str) -> Command {
        Namespace::named(self.switch()).command(program)
    }
}

fn build(
    prefix: &str,
    spec: &FabricSpec,
    namespaces: &mut Namespaces,
) -> Result<(), mlt_netns::NetnsError> {
    let switch = namespaces.add(&format!("{prefix}sw"), Role::Host)?;
    switch.bridge("br0", 1500, None)?;
    let rate = Rate::from_mbps(spec.rate_mbit);
    let ms = |ms: u32| Duration::from_nanos(u64::from(ms) * 1_000_000);
    for i in 0..spec.hosts {
        let host = namespaces.add(&format!("{prefix}h{i}"), Role::Host)?;
        let port = format!("p{i}");
        cable((Some(&host), "eth0"), (Some(&switch), &port), 1500)?;
        host.address("eth0", &format!("{}/24", Fabric::ip(i)))?;
        switch.enslave(&port, "br0")?;
        if spec.host_buffer_ms > 0 {
            host.shape("eth0", rate, ms(spec.host_buffer_ms))?;
        }
        if spec.switch_buffer_ms > 0 {
            switch.shape(&port, rate, ms(spec.switch_buffer_ms))?;
        }
    }
    if spec.loss_percent > 0.0 {
        switch.bridge_loss(spec.loss_percent)?;
    }
    Ok(())
}

/// Two hosts joined by one veth pair and nothing else (`eth0` in each namespace,
/// 10.78.0.1/24 and 10.78.0.2/24): the setting in which datapaths are compared.
/// Transmit checksum offload is off on both ends, so that every frame on the veth
/// carries real checksums, as on a wire: a kernel-bypass reader (af_packet, af_xdp)
/// would otherwise see the kernel's partial ones. Dropping the pair deletes it.
#[derive(Debug)]
pub struct Pair {
    prefix: String,
    _namespaces: Namespaces,
}

impl Pair {
    pub fn create() -> io::Result<Pair> {
        let prefix = unique('p');
        let mut namespaces = Namespaces::new();
        let hosts = [0, 1].map(|i| format!("{prefix}h{i}"));
        let built = (|| {
            let a = namespaces.add(&hosts[0], Role::Host)?;
            let b = namespaces.add(&hosts[1], Role::Host)?;
            cable((Some(&a), "eth0"), (Some(&b), "eth0"), 1500)?;
            for (i, host) in [a, b].iter().enumerate() {
                host.address("eth0", &format!("{}/24", Pair::ip(i)))?;
                host.offloads_off("eth0", &["tx"])?;
            }
            Ok::<(), mlt_netns::NetnsError>(())
        })();
        built.map_err(io::Error::other)?;
        Ok(Pair {
            prefix,
            _namespaces: namespaces,
        })
    }

    /// Host `i`'s namespace (i is 0 or 1).
    pub fn host(&self, i: usize) -> String {
        format!("{}h{i}", self.prefix)
    }

    pub fn ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 78, 0, 1 + i as u8)
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
        Namespace::named(self.host(i))
            .device_loss("eth0", percent)
            .map_err(io::Error::other)
    }

    /// A command that runs `program` in host `i`'s namespace.
    pub fn command(&self, i: usize, program: &str) -> Command {
        Namespace::named(self.host(i)).command(program)
    }
}
