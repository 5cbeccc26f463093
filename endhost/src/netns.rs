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
use std::process::{Command, Stdio};
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
