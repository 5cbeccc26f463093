//! Bringing a lab up and down: network namespaces for switches and hosts (built with
//! `mlt_netns`), a management bridge, cables, SSH servers, and the key and known_hosts
//! that point at them. What the lab is made of — its switches, ports, racks, hosts and
//! links — is a [`Topology`] the caller gives (mltctl plans it from the inventory it
//! writes into the lab's directory).
//!
//! Layout of a lab directory:
//! - `lab.json`: what the lab is made of (written before anything is created, so that
//!   `down` finds it all, also after a crash);
//! - `inventory.yaml`, `id_ed25519`, `known_hosts`: what mltctl needs to work on it;
//! - `devices/NAME/`: an emulated switch (see [`crate::emulator`]);
//! - `hosts/NAME/`: a host's SSH server files.

mod build;
mod status;

use std::fs;
use std::net::Ipv4Addr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ipnet::Ipv4Net;
use mlt_common::files;
use mlt_netns::sshd::SSHD;
use mlt_netns::{Namespace, NetnsError, run};
use serde::{Deserialize, Serialize};
use switch_config::Vendor;

pub use build::interface_name;
pub use status::{MemberStatus, status};

/// The management network: the addresses `mltctl generate` gives, and the bridge's.
const MGMT_BRIDGE_ADDRESS: &str = "10.250.255.254/16";
const MGMT_PREFIX: &str = "10.250.0.0/16";

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Command(#[from] NetnsError),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

/// What `lab up` builds, besides its topology.
pub struct Spec {
    pub name: String,
    pub dir: PathBuf,
    /// Every port's rate (switch ports shape to it; the inventory says it).
    pub rate_mbps: u64,
    /// What each port may queue; None: 4 MiB per port.
    pub buffer_bytes: Option<u64>,
    /// The mltctl that runs the lab's forwarder.
    pub mltctl: PathBuf,
    /// The binary the emulated switches' commands run (`mltctl-lab-switch`).
    pub switch: PathBuf,
}

/// What a lab is made of: switches and their ports, racks, hosts and cables.
#[derive(Debug, Clone)]
pub struct Topology {
    pub switches: Vec<SwitchSpec>,
    pub hosts: Vec<HostSpec>,
    pub racks: Vec<RackSpec>,
    /// (leaf, its port, spine, its port), by index.
    pub uplinks: Vec<(usize, usize, usize, usize)>,
    /// (host, leaf, the leaf's port), by index.
    pub downlinks: Vec<(usize, usize, usize)>,
}

#[derive(Debug, Clone)]
pub struct SwitchSpec {
    pub name: String,
    pub vendor: Vendor,
    pub mgmt: Ipv4Addr,
    pub ports: Vec<PortSpec>,
}

#[derive(Debug, Clone)]
pub struct PortSpec {
    pub name: String,
    /// The port's routed address, if it has one.
    pub ip: Option<Ipv4Net>,
}

#[derive(Debug, Clone)]
pub struct HostSpec {
    pub name: String,
    pub mgmt: Ipv4Addr,
    pub nic: String,
    pub mac: String,
}

/// A rack: its leaf (by index) and the gateway the leaf is to its hosts.
#[derive(Debug, Clone)]
pub struct RackSpec {
    pub leaf: usize,
    pub gateway: Ipv4Net,
    pub gateway_mac: String,
}

/// What a lab is made of, as `lab.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Layout {
    pub name: String,
    pub bridge: String,
    /// Every port's rate, which the forwarder paces to.
    #[serde(default = "default_rate_mbps")]
    pub rate_mbps: u64,
    /// What each port may queue, when `lab up --buffer` set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_bytes: Option<u64>,
    pub switches: Vec<Member>,
    pub hosts: Vec<Member>,
}

/// A switch or host of the lab.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub namespace: String,
    pub mgmt: String,
    /// The switch's vendor; none for a host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// (hosts) Its NIC and the leaf port at the cable's other end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cable: Option<HostCable>,
}

/// A host's cable: its NIC, and the leaf and the leaf's interface it ends on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostCable {
    pub nic: String,
    pub leaf: String,
    pub port: String,
}

impl Layout {
    fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.switches
            .iter()
            .chain(&self.hosts)
            .map(|m| m.namespace.as_str())
    }
}

/// The file that, while it exists, makes the forwarder of the lab in `dir` ignore every
/// switch's queueing (`mltctl lab qos off`).
pub fn qos_off_file(dir: &Path) -> PathBuf {
    dir.join("qos-off")
}

/// The file that holds the share of frames the hosts' cables of the lab in `dir` lose
/// (`mltctl lab loss`): a fraction from 0 to 1, as text. No file: none lost.
pub fn loss_file(dir: &Path) -> PathBuf {
    dir.join("loss")
}

/// The share of frames the hosts' cables lose, as [`loss_file`] says (0 when it is
/// missing or unreadable).
pub fn loss(dir: &Path) -> f64 {
    fs::read_to_string(loss_file(dir))
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|p| (0.0..=1.0).contains(p))
        .unwrap_or(0.0)
}

/// Where the forwarder of the lab in `dir` keeps its process id.
fn forwarder_pid_file(dir: &Path) -> PathBuf {
    dir.join("forwarder.pid")
}

/// A lab written before the forwarder had the rate the CLI defaults to.
fn default_rate_mbps() -> u64 {
    1000
}

fn layout_file(dir: &Path) -> PathBuf {
    dir.join("lab.json")
}

/// Reads the layout of the lab in `dir`.
pub fn layout(dir: &Path) -> Result<Layout, LabError> {
    let file = layout_file(dir);
    let text = fs::read_to_string(&file).map_err(io(format!(
        "no lab in {} (cannot read {})",
        dir.display(),
        file.display()
    )))?;
    serde_json::from_str(&text)
        .map_err(|e| LabError::Refused(format!("{}: not a lab layout: {e}", file.display())))
}

/// The lab's SSH key, which its switches and hosts authorize and its inventory names.
pub fn key_file(dir: &Path) -> PathBuf {
    dir.join("id_ed25519")
}

/// Builds the lab; on any failure, removes what it made and says why. `topology` is
/// called once the lab's directory and key exist (the key at [`key_file`]) and tells
/// what to build.
pub fn up(
    spec: &Spec,
    topology: &dyn Fn(&Path) -> Result<Topology, String>,
    say: &mut dyn FnMut(&str),
) -> Result<Layout, LabError> {
    preflight(spec)?;
    // A directory of our own (root's, 0700): the switches' commands in it run as root,
    // and sshd reads its keys there, so one that another user owns or can write (or a
    // link) is refused, and one we trust is made private.
    let made_dir =
        files::trusted_dir(&spec.dir).map_err(|e| LabError::Refused(format!("--dir: {e}")))?;
    fs::set_permissions(&spec.dir, fs::Permissions::from_mode(0o700))
        .map_err(io(format!("cannot make {} private", spec.dir.display())))?;
    let made = mlt_netns::sshd::keygen(&key_file(&spec.dir))
        .map_err(LabError::from)
        .and_then(|()| {
            fs::copy(
                key_file(&spec.dir).with_extension("pub"),
                spec.dir.join("authorized_keys"),
            )
            .map_err(io("cannot write authorized_keys"))
        })
        .and_then(|_| topology(&spec.dir).map_err(LabError::Refused))
        .and_then(|topology| {
            let layout = plan_layout(spec, &topology);
            refuse_taken_names(&layout)?;
            Ok((topology, layout))
        });
    let (topology, layout) = match made {
        Ok(made) => made,
        Err(e) => {
            // Nothing exists yet but the directory, which was empty, and its files.
            if made_dir == files::Made::Created {
                let _ = fs::remove_dir_all(&spec.dir);
            } else if let Ok(entries) = fs::read_dir(&spec.dir) {
                for entry in entries.flatten() {
                    let _ = fs::remove_file(entry.path());
                }
            }
            return Err(e);
        }
    };
    fs::write(
        layout_file(&spec.dir),
        serde_json::to_string_pretty(&layout).expect("a layout serialises"),
    )
    .map_err(io("cannot write lab.json"))?;
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        build::build(spec, &topology, &layout, say)
    }))
    .unwrap_or_else(|_| Err(LabError::Refused("building the lab panicked".into())));
    match built {
        Ok(()) => Ok(layout),
        Err(e) => {
            say("the lab did not come up; removing what was made");
            if let Err(left) = down(&spec.dir, &mut |_| {}) {
                say(&format!("could not remove everything: {left}"));
            }
            Err(e)
        }
    }
}

fn plan_layout(spec: &Spec, topology: &Topology) -> Layout {
    let member = |name: &str, mgmt: Ipv4Addr, vendor: Option<String>| Member {
        name: name.to_string(),
        namespace: format!("{}-{name}", spec.name),
        mgmt: mgmt.to_string(),
        vendor,
        cable: None,
    };
    let cable = |host: usize| {
        let &(_, leaf, port) = topology.downlinks.iter().find(|d| d.0 == host)?;
        let leaf = &topology.switches[leaf];
        Some(HostCable {
            nic: topology.hosts[host].nic.clone(),
            leaf: leaf.name.clone(),
            port: build::interface_name(&leaf.ports[port].name),
        })
    };
    Layout {
        name: spec.name.clone(),
        bridge: format!("{}0", spec.name),
        rate_mbps: spec.rate_mbps,
        buffer_bytes: spec.buffer_bytes,
        switches: topology
            .switches
            .iter()
            .map(|s| member(&s.name, s.mgmt, Some(s.vendor.to_string())))
            .collect(),
        hosts: (topology.hosts.iter().enumerate())
            .map(|(i, h)| Member {
                cable: cable(i),
                ..member(&h.name, h.mgmt, None)
            })
            .collect(),
    }
}

fn preflight(spec: &Spec) -> Result<(), LabError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LabError::Refused(
            "the lab needs root (it makes network namespaces)".into(),
        ));
    }
    if !Path::new("/usr/sbin/ethtool").exists() && !Path::new("/sbin/ethtool").exists() {
        return Err(LabError::Refused(
            "ethtool is missing (Debian package ethtool; scripts/setup installs it)".into(),
        ));
    }
    if !Path::new(SSHD).exists() {
        return Err(LabError::Refused(format!(
            "{SSHD} is missing (Debian package openssh-server; scripts/setup installs it)"
        )));
    }
    if spec.name.is_empty()
        || spec.name.len() > 8
        || !spec
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return Err(LabError::Refused(format!(
            "lab name `{}`: 1 to 8 lowercase letters or digits (it prefixes interface names)",
            spec.name
        )));
    }
    if layout_file(&spec.dir).exists() {
        return Err(LabError::Refused(format!(
            "a lab is already up in {} (`mltctl lab down --dir {}` first)",
            spec.dir.display(),
            spec.dir.display()
        )));
    }
    if !spec.switch.is_file() {
        return Err(LabError::Refused(format!(
            "{} is missing: the emulated switches' commands are a binary of their own, \
             expected next to mltctl's executable; `cargo build` and `cargo install --path .` \
             make both (`cargo run` builds mltctl alone)",
            spec.switch.display()
        )));
    }
    // Paths go into sshd's configuration, the switches' command links and YAML as they are.
    for path in [&spec.dir, &spec.mltctl, &spec.switch] {
        if !plain_path(path) {
            return Err(LabError::Refused(format!(
                "{}: the lab's paths may hold only letters, digits, `/`, `.`, `_` and `-`",
                path.display()
            )));
        }
    }
    // `down` removes the directory: it must be the lab's alone.
    if fs::read_dir(&spec.dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(LabError::Refused(format!(
            "{} exists and is not empty: give the lab a directory of its own",
            spec.dir.display()
        )));
    }
    let mut routes = run("ip", &["-4", "route", "show", "match", MGMT_PREFIX])?;
    routes.push_str(&run("ip", &["-4", "route", "show", "root", MGMT_PREFIX])?);
    let addresses = run("ip", &["-4", "-o", "addr", "show"])?;
    let overlapping: Vec<&str> = routes
        .lines()
        .filter(|l| !l.starts_with("default") && !l.trim().is_empty())
        .chain(addresses.lines().filter(|l| l.contains(" inet 10.250.")))
        .collect();
    if !overlapping.is_empty() {
        return Err(LabError::Refused(format!(
            "this machine already routes the lab's management network {MGMT_PREFIX}: {} \
             (another lab is up, or the network is in use)",
            overlapping.join("; ")
        )));
    }
    Ok(())
}

fn plain_path(path: &Path) -> bool {
    path.to_str().is_some_and(|p| {
        p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    })
}

/// Every interface and namespace the lab would make must be free: `down` removes them
/// by name.
fn refuse_taken_names(layout: &Layout) -> Result<(), LabError> {
    let members = layout.switches.len() + layout.hosts.len();
    let links = (0..members)
        .map(|i| management_cable(&layout.name, i))
        .chain([layout.bridge.clone()]);
    let mut taken: Vec<String> = links
        .filter(|l| Path::new("/sys/class/net").join(l).exists())
        .collect();
    taken.extend(
        layout
            .namespaces()
            .filter(|ns| Path::new("/run/netns").join(ns).exists())
            .map(|ns| format!("namespace {ns}")),
    );
    if taken.is_empty() {
        return Ok(());
    }
    Err(LabError::Refused(format!(
        "names the lab `{}` would make are taken: {} (another lab, or choose --name)",
        layout.name,
        taken.join(", ")
    )))
}

/// This machine's end of the management cable of the lab's `index`th member.
fn management_cable(lab: &str, index: usize) -> String {
    format!("{lab}m{index}")
}

/// Removes everything the lab in `dir` made: its processes, namespaces, bridge and
/// directory. Parts already gone are skipped.
pub fn down(dir: &Path, say: &mut dyn FnMut(&str)) -> Result<(), LabError> {
    let layout = layout(dir)?;
    check_layout(&layout)?;
    let mut killed = Vec::new();
    if let Some(pid) = fs::read_to_string(forwarder_pid_file(dir))
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
        .filter(|pid| *pid > 1)
    {
        // Only if it is ours: `mltctl lab forward --dir` this very directory.
        let command = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let words: Vec<&[u8]> = command.split(|b| *b == 0).collect();
        let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let ours = words.windows(4).any(|w| {
            w[0] == b"lab"
                && w[1] == b"forward"
                && w[2] == b"--dir"
                && Path::new(std::ffi::OsStr::from_bytes(w[3])) == absolute
        });
        if ours
            // SAFETY: signalling the lab's own forwarder.
            && unsafe { libc::kill(pid, libc::SIGKILL) } == 0
        {
            killed.push(pid);
        }
    }
    let mut removed = 0;
    let mut left = Vec::new();
    for ns in layout.namespaces().map(Namespace::named) {
        if !ns.exists() {
            continue;
        }
        for pid in mlt_netns::remove(&ns) {
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        if ns.exists() {
            left.push(format!("namespace {} is still there", ns.name()));
        } else {
            removed += 1;
        }
    }
    // A namespace (and its end of a cable) lives on until its last process is gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    while killed
        .iter()
        .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let members = layout.switches.len() + layout.hosts.len();
    for link in (0..members)
        .map(|i| management_cable(&layout.name, i))
        .chain([layout.bridge.clone()])
    {
        if Path::new("/sys/class/net").join(&link).exists()
            && let Err(e) = run("ip", &["link", "del", &link])
        {
            left.push(e.to_string());
        }
    }
    if !left.is_empty() {
        return Err(LabError::Refused(format!(
            "the lab in {} is not all gone (run lab down again): {}",
            dir.display(),
            left.join("; ")
        )));
    }
    // The DPDK runtime directories of the hosts' transports (their file prefix is the
    // host's name).
    for host in &layout.hosts {
        let _ = fs::remove_dir_all(Path::new("/var/run/dpdk").join(&host.name));
    }
    fs::remove_dir_all(dir).map_err(io(format!("cannot remove {}", dir.display())))?;
    say(&format!(
        "removed {removed} namespace(s), {} process(es), the bridge {} and {}",
        killed.len(),
        layout.bridge,
        dir.display()
    ));
    Ok(())
}

/// A layout read from a file names only what a lab makes: plain names, the lab's own
/// prefix.
fn check_layout(layout: &Layout) -> Result<(), LabError> {
    let plain = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    let prefix = format!("{}-", layout.name);
    let ok = plain(&layout.name)
        && layout.bridge == format!("{}0", layout.name)
        && layout
            .switches
            .iter()
            .chain(&layout.hosts)
            .all(|m| plain(&m.name) && m.namespace == format!("{prefix}{}", m.name));
    if ok {
        Ok(())
    } else {
        Err(LabError::Refused(
            "lab.json names something a lab does not make; nothing was removed".into(),
        ))
    }
}
