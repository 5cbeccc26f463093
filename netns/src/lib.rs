//! The one builder of network namespaces on this machine, for the lab (`mltctl lab`),
//! the benches and the tests: namespaces with the settings a host or a router needs,
//! veth cables between them, bridges, addresses, tbf shaping and nftables loss (the
//! kernel here has no netem), OpenSSH servers in them ([`sshd`]), and packet capture.
//! Everything goes through iproute2, tc and nft with words as they are, never a shell.
//!
//! A [`Namespaces`] set deletes the namespaces it made when dropped (and with them
//! their cables, bridges and rules), unless [`Namespaces::keep`] hands them over (the
//! lab keeps its own until `lab down`).

pub mod capture;
pub mod nic;
pub mod sshd;

use std::io;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use mlt_common::units::{Duration, Rate};

/// A command that failed, with what it said.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` failed: {output}")]
    Failed { command: String, output: String },
    #[error("{0}")]
    Other(String),
}

/// Runs `program` with `args` and returns its standard output.
pub fn run(program: &str, args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            program: program.to_string(),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetnsError::Failed {
            command: format!("{program} {}", args.join(" ")),
            output: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Why namespaces cannot be built here, if they cannot: root, with iproute2, tc and
/// nft at hand.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root".into());
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

/// What a namespace does with packets not for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A host: no forwarding.
    Host,
    /// A router: IPv4 forwarding on.
    Router,
}

/// A network namespace, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace(String);

impl Namespace {
    /// The namespace of this name (made or not).
    pub fn named(name: impl Into<String>) -> Namespace {
        Namespace(name.into())
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// Whether the namespace exists.
    pub fn exists(&self) -> bool {
        std::path::Path::new("/run/netns").join(&self.0).exists()
    }

    /// A command that runs `program` in this namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.0, program]);
        command
    }

    /// Runs `program` with `args` in this namespace.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<String, NetnsError> {
        let mut all = vec!["netns", "exec", &self.0, program];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// `ip ARGS…` in this namespace.
    pub fn ip(&self, args: &[&str]) -> Result<String, NetnsError> {
        let mut all = vec!["-n", &self.0];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Adds `address` (CIDR) to `dev`.
    pub fn address(&self, dev: &str, address: &str) -> Result<(), NetnsError> {
        self.ip(&["addr", "add", address, "dev", dev]).map(drop)
    }

    /// A bridge `name` (up), with `mtu` and, if given, its MAC.
    pub fn bridge(&self, name: &str, mtu: u32, mac: Option<&str>) -> Result<(), NetnsError> {
        let mtu = mtu.to_string();
        let mut args = vec!["link", "add", name, "mtu", &mtu];
        if let Some(mac) = mac {
            args.extend(["address", mac]);
        }
        args.extend(["type", "bridge"]);
        self.ip(&args)?;
        self.ip(&["link", "set", name, "up"]).map(drop)
    }

    /// Puts `dev` into bridge `bridge`.
    pub fn enslave(&self, dev: &str, bridge: &str) -> Result<(), NetnsError> {
        self.ip(&["link", "set", dev, "master", bridge, "up"])
            .map(drop)
    }

    /// A token-bucket rate limit on `dev` whose queue holds `buffer` of the rate (at
    /// least half a millisecond of line rate per burst, so full-size bursts pass).
    pub fn shape(&self, dev: &str, rate: Rate, buffer: Duration) -> Result<(), NetnsError> {
        let rate_arg = format!("{}mbit", rate.mbps());
        let burst = (rate.mbps() * 1_000_000 / 8 / 2000).max(16_384).to_string();
        let latency = format!("{}us", buffer.nanos() / 1000);
        self.exec(
            "tc",
            &[
                "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate_arg, "burst", &burst,
                "latency", &latency,
            ],
        )
        .map(drop)
    }

    /// Drops `percent` of the frames this namespace's bridges forward, at random
    /// (nftables, bridge family, forward hook: on the switch's path, as loss belongs).
    pub fn bridge_loss(&self, percent: f64) -> Result<(), NetnsError> {
        let per_10k = (percent * 100.0).round().to_string();
        self.exec("nft", &["add", "table", "bridge", "lossy"])?;
        self.exec(
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
        self.exec(
            "nft",
            &[
                "add", "rule", "bridge", "lossy", "forward", "numgen", "random", "mod", "10000",
                "<", &per_10k, "counter", "drop",
            ],
        )
        .map(drop)
    }

    /// Drops the IPv4 frames that come in on `devices` for any address but `own` before
    /// this namespace's bridges or IP stack see them (nftables, netdev family, ingress
    /// hook); raw sockets on the devices still see every frame (their taps come first),
    /// and ARP and the rest pass. A program with such taps forwards them instead.
    pub fn hand_ipv4_to_taps(&self, devices: &[&str], own: &[Ipv4Addr]) -> Result<(), NetnsError> {
        let own: Vec<String> = own.iter().map(Ipv4Addr::to_string).collect();
        let own = format!("{{ {} }}", own.join(", "));
        self.exec("nft", &["add", "table", "netdev", "taps"])?;
        for dev in devices {
            let chain =
                format!("{{ type filter hook ingress device {dev} priority 0; policy accept; }}");
            self.exec("nft", &["add", "chain", "netdev", "taps", dev, &chain])?;
            self.exec(
                "nft",
                &[
                    "add", "rule", "netdev", "taps", dev, "ether", "type", "ip", "ip", "daddr",
                    "!=", &own, "drop",
                ],
            )?;
        }
        Ok(())
    }

    /// Drops `percent` of the UDP datagrams `dev` sends and receives, at random
    /// (nftables on its netdev ingress and egress hooks).
    pub fn device_loss(&self, dev: &str, percent: f64) -> Result<(), NetnsError> {
        let per_10k = (percent * 100.0).round().to_string();
        self.exec("nft", &["add", "table", "netdev", "lossy"])?;
        for hook in ["ingress", "egress"] {
            let chain =
                format!("{{ type filter hook {hook} device {dev} priority 0; policy accept; }}");
            self.exec("nft", &["add", "chain", "netdev", "lossy", hook, &chain])?;
            self.exec(
                "nft",
                &[
                    "add", "rule", "netdev", "lossy", hook, "ip", "protocol", "udp", "numgen",
                    "random", "mod", "10000", "<", &per_10k, "counter", "drop",
                ],
            )?;
        }
        Ok(())
    }

    /// Turns `features` off on `dev` (`ethtool -K`): `tx` gives every frame real
    /// checksums, as on a wire (a raw-socket reader — the lab's forwarder, af_packet,
    /// af_xdp — would otherwise see partial ones); `tso` and `gso` keep 64 KB segments
    /// off the cable.
    pub fn offloads_off(&self, dev: &str, features: &[&str]) -> Result<(), NetnsError> {
        let mut args = vec!["-K", dev];
        for feature in features {
            args.extend([*feature, "off"]);
        }
        self.exec("ethtool", &args).map(drop)
    }
}

/// One end of a cable: a namespace (`None`: this machine's own) and the interface
/// name there.
pub type End<'a> = (Option<&'a Namespace>, &'a str);

/// A veth cable between two ends, both up, with `mtu`.
pub fn cable(a: End<'_>, b: End<'_>, mtu: u32) -> Result<(), NetnsError> {
    let mtu = mtu.to_string();
    let mut args: Vec<&str> = Vec::new();
    if let Some(ns) = a.0 {
        args.extend(["-n", ns.name()]);
    }
    args.extend([
        "link", "add", a.1, "mtu", &mtu, "type", "veth", "peer", "name", b.1,
    ]);
    if let Some(ns) = b.0 {
        args.extend(["netns", ns.name()]);
    }
    args.extend(["mtu", &mtu]);
    run("ip", &args)?;
    for (ns, dev) in [a, b] {
        match ns {
            Some(ns) => ns.ip(&["link", "set", dev, "up"])?,
            None => run("ip", &["link", "set", dev, "up"])?,
        };
    }
    Ok(())
}

/// Namespaces made together, deleted together when dropped (unless kept).
#[derive(Debug, Default)]
pub struct Namespaces {
    made: Vec<Namespace>,
}

impl Namespaces {
    pub fn new() -> Namespaces {
        Namespaces::default()
    }

    /// Makes namespace `name` with its loopback up, IPv6 off, reverse-path filtering
    /// off (traffic is sprayed over paths), and forwarding as `role` says.
    pub fn add(&mut self, name: &str, role: Role) -> Result<Namespace, NetnsError> {
        run("ip", &["netns", "add", name])?;
        let ns = Namespace::named(name);
        self.made.push(ns.clone());
        ns.ip(&["link", "set", "lo", "up"])?;
        let forward = match role {
            Role::Host => "net.ipv4.ip_forward=0",
            Role::Router => "net.ipv4.ip_forward=1",
        };
        ns.exec(
            "sysctl",
            &[
                "-qw",
                forward,
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
            ],
        )?;
        Ok(ns)
    }

    /// The namespaces made, in order.
    pub fn made(&self) -> &[Namespace] {
        &self.made
    }

    /// Hands the namespaces over: nothing is deleted when this set is dropped.
    pub fn keep(mut self) -> Vec<Namespace> {
        std::mem::take(&mut self.made)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in self.made.iter().rev() {
            remove(ns);
        }
    }
}

/// Deletes `ns` after killing every process in it (a process may fork while its
/// parent is killed, so again until none is left); the pids killed.
pub fn remove(ns: &Namespace) -> Vec<i32> {
    let mut killed = Vec::new();
    if !ns.exists() {
        return killed;
    }
    for _round in 0..10 {
        let pids = run("ip", &["netns", "pids", ns.name()]).unwrap_or_default();
        let pids: Vec<i32> = pids
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // SAFETY: signalling a process that lives in the namespace we remove.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 && !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = run("ip", &["netns", "del", ns.name()]);
    killed
}
