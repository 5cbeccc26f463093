//! Bringing a lab up and down: network namespaces for switches and hosts, a management
//! bridge, cables, SSH servers, and the inventory, key and known_hosts that point at
//! them.
//!
//! Layout of a lab directory:
//! - `lab.json`: what the lab is made of (written before anything is created, so that
//!   `down` finds it all, also after a crash);
//! - `inventory.yaml`, `id_ed25519`, `known_hosts`: what mltctl needs to work on it;
//! - `devices/NAME/`: an emulated switch (see [`super::emulator`]);
//! - `hosts/NAME/`: a host's SSH server files.

use std::fs;
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mlt_common::files;
use serde::{Deserialize, Serialize};

use super::emulator::Device;
use crate::generate::{Shape, fabric_yaml_shaped};
use crate::inventory::{self, Inventory};

const SSHD: &str = "/usr/sbin/sshd";
/// The management network: the addresses `mltctl generate` gives, and the bridge's.
const MGMT_BRIDGE_ADDRESS: &str = "10.250.255.254/16";
const MGMT_PREFIX: &str = "10.250.0.0/16";

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{0}")]
    Refused(String),
    #[error("`{command}` failed: {output}")]
    Command { command: String, output: String },
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

/// What `lab up` builds.
pub struct Spec {
    pub name: String,
    pub dir: PathBuf,
    pub spines: usize,
    pub leaves: usize,
    pub hosts_per_leaf: usize,
    /// Rotated through the switches, spines first.
    pub vendors: Vec<switch_config::Vendor>,
    /// Every port's rate (switch ports shape to it; the inventory says it).
    pub rate_mbps: u64,
    /// Every switch's buffer (the inventory says it) and what each port may queue;
    /// None: the generated inventory's buffers, and 4 MiB per port.
    pub buffer_bytes: Option<u64>,
    /// The mltctl the emulated switches run.
    pub mltctl: PathBuf,
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

/// Builds the lab; on any failure, removes what it made and says why.
pub fn up(spec: &Spec, say: &mut dyn FnMut(&str)) -> Result<Layout, LabError> {
    preflight(spec)?;
    // A directory of our own (root's, 0700): the switches' commands in it run as root,
    // and sshd reads its keys there, so one that another user owns or can write (or a
    // link) is refused, and one we trust is made private.
    let made_dir =
        files::trusted_dir(&spec.dir).map_err(|e| LabError::Refused(format!("--dir: {e}")))?;
    fs::set_permissions(&spec.dir, fs::Permissions::from_mode(0o700))
        .map_err(io(format!("cannot make {} private", spec.dir.display())))?;
    let made = write_inventory(spec).and_then(|inventory| {
        let layout = plan_layout(spec, &inventory);
        refuse_taken_names(&layout)?;
        Ok((inventory, layout))
    });
    let (inventory, layout) = match made {
        Ok(made) => made,
        Err(e) => {
            // Nothing exists yet but the directory, which was empty.
            if made_dir == files::Made::Created {
                let _ = fs::remove_dir_all(&spec.dir);
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
        build(spec, &inventory, &layout, say)
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
    // Paths go into sshd's configuration, shell scripts and YAML as they are.
    for path in [&spec.dir, &spec.mltctl] {
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

/// The generated fabric, logging in as root with the lab's own key.
fn write_inventory(spec: &Spec) -> Result<Inventory, LabError> {
    let vendor = |i: usize| spec.vendors[i % spec.vendors.len()];
    let shape = Shape {
        spines: (0..spec.spines).map(vendor).collect(),
        leaves: (0..spec.leaves)
            .map(|l| (vendor(spec.spines + l), spec.hosts_per_leaf))
            .collect(),
        layers: 16,
        params_per_layer: 1_000_000,
        buffer_bytes: spec.buffer_bytes,
    };
    if spec.vendors.is_empty() || spec.spines == 0 || spec.leaves == 0 || spec.hosts_per_leaf == 0 {
        return Err(LabError::Refused(
            "a lab needs a vendor, a spine, a leaf and a host per leaf".into(),
        ));
    }
    let yaml = fabric_yaml_shaped(&shape).map_err(|e| LabError::Refused(format!("{e:#}")))?;
    // Every port at the lab's rate; the transport's delay thresholds at the round trip
    // of software forwarding through namespaces (about a millisecond on a busy
    // machine, where a datacenter fabric has microseconds); DPDK (--datapath dpdk) over
    // the hosts' veth NICs.
    let speed = format!("speed: {}M", spec.rate_mbps);
    let mut yaml = yaml;
    for (from, to) in [
        ("speed: 100G", speed.as_str()),
        ("speed: 400G", speed.as_str()),
        (
            "  collective: ring\n",
            "  collective: ring\n  rate_control: {t_low_us: 2000, t_high_us: 20000}\n  \
             datapath: {driver: af_packet}\n",
        ),
    ] {
        if !yaml.contains(from) {
            return Err(LabError::Refused(format!(
                "the generated inventory has no `{}` to adapt for the lab",
                from.trim()
            )));
        }
        yaml = yaml.replace(from, to);
    }
    let key = spec.dir.join("id_ed25519");
    let generated_login = "  mgmt:\n    user: admin\n    key: {agent: true}\n";
    if !yaml.contains(generated_login) {
        return Err(LabError::Refused(
            "the generated inventory has no login defaults to replace".into(),
        ));
    }
    let yaml = yaml
        .replace(
            generated_login,
            &format!("  mgmt:\n    user: root\n    key: {{file: {}}}\n", key.display()),
        )
        .replace(
            "# Management addresses are in 10.250.0.0/16 and reach nothing: use it for dry runs and scale tests.",
            &format!(
                "# The lab `{}`: emulated switches and namespace hosts on this machine (mltctl lab up).",
                spec.name
            ),
        );
    keygen(&key)?;
    fs::copy(key.with_extension("pub"), spec.dir.join("authorized_keys"))
        .map_err(io("cannot write authorized_keys"))?;
    let path = spec.dir.join("inventory.yaml");
    fs::write(&path, yaml).map_err(io("cannot write inventory.yaml"))?;
    let inv = inventory::load(&path)
        .map_err(|e| LabError::Refused(format!("the lab's inventory is not valid: {e:#}")))?;
    let problems = crate::plan::Plan::build(&inv).problems(&inv);
    if !problems.is_empty() {
        return Err(LabError::Refused(format!(
            "the lab's inventory cannot be planned (a smaller --buffer than its \
             thresholds need?):\n{problems}"
        )));
    }
    Ok(inv)
}

fn plan_layout(spec: &Spec, inv: &Inventory) -> Layout {
    let member = |name: &str, mgmt: &str, vendor: Option<String>| Member {
        name: name.to_string(),
        namespace: format!("{}-{name}", spec.name),
        mgmt: mgmt.to_string(),
        vendor,
    };
    Layout {
        name: spec.name.clone(),
        bridge: format!("{}0", spec.name),
        rate_mbps: spec.rate_mbps,
        buffer_bytes: spec.buffer_bytes,
        switches: inv
            .switches
            .iter()
            .map(|s| member(&s.name, &s.mgmt.address, Some(s.vendor.to_string())))
            .collect(),
        hosts: inv
            .hosts
            .iter()
            .map(|h| member(&h.name, &h.mgmt.address, None))
            .collect(),
    }
}

fn build(
    spec: &Spec,
    inv: &Inventory,
    layout: &Layout,
    say: &mut dyn FnMut(&str),
) -> Result<(), LabError> {
    fs::create_dir_all("/run/sshd").map_err(io("cannot create /run/sshd"))?;
    run("ip", &["link", "add", &layout.bridge, "type", "bridge"])?;
    run(
        "ip",
        &["addr", "add", MGMT_BRIDGE_ADDRESS, "dev", &layout.bridge],
    )?;
    run("ip", &["link", "set", &layout.bridge, "up"])?;
    let members: Vec<&Member> = layout.switches.iter().chain(&layout.hosts).collect();
    for (index, member) in members.iter().enumerate() {
        add_namespace(layout, member, index)?;
    }
    say(&format!(
        "{} switch and {} host namespaces on the management bridge {}",
        layout.switches.len(),
        layout.hosts.len(),
        layout.bridge
    ));
    cable(inv, layout)?;
    say("cabled: every leaf to every spine, every host to its leaf");
    let mut known_hosts = String::new();
    for (switch, member) in inv.switches.iter().zip(&layout.switches) {
        let dir = spec.dir.join("devices").join(&switch.name);
        let device = Device::install(
            &dir,
            &switch.vendor.to_string(),
            &empty_config(switch.vendor),
            &spec.mltctl,
        );
        // Empty, it runs no route yet; its first command that changes one installs it.
        device.enable_dataplane();
        let cli = matches!(
            switch.vendor,
            switch_config::Vendor::Eos | switch_config::Vendor::Onyx
        );
        known_hosts.push_str(&start_sshd(spec, member, &device.dir, Some(cli))?);
    }
    for member in &layout.hosts {
        let dir = spec.dir.join("hosts").join(&member.name);
        fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
        known_hosts.push_str(&start_sshd(spec, member, &dir, None)?);
    }
    fs::write(spec.dir.join("known_hosts"), known_hosts).map_err(io("cannot write known_hosts"))?;
    for member in &members {
        wait_for_ssh(member)?;
    }
    say("every switch and host answers SSH on its management address");
    start_forwarder(spec)?;
    say(&format!(
        "the forwarder runs every switch's data plane at {} per port",
        mlt_common::units::Rate::from_mbps(spec.rate_mbps)
    ));
    Ok(())
}

/// Starts `mltctl lab forward` in the background, in a process group of its own.
fn start_forwarder(spec: &Spec) -> Result<(), LabError> {
    use std::os::unix::process::CommandExt;
    let log = fs::File::create(spec.dir.join("forwarder.log"))
        .map_err(io("cannot create forwarder.log"))?;
    let mut child = Command::new(&spec.mltctl)
        .args(["lab", "forward", "--dir"])
        .arg(&spec.dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(io("cannot start the forwarder"))?;
    // Every switch's sockets open within moments; a forwarder that cannot says why.
    std::thread::sleep(Duration::from_millis(300));
    if let Ok(Some(status)) = child.try_wait() {
        let log = fs::read_to_string(spec.dir.join("forwarder.log")).unwrap_or_default();
        return Err(LabError::Refused(format!(
            "the forwarder ended ({status}): {}",
            log.trim()
        )));
    }
    fs::write(forwarder_pid_file(&spec.dir), child.id().to_string())
        .map_err(io("cannot write forwarder.pid"))?;
    Ok(())
}

/// A factory-empty switch: nothing of the plan configured.
fn empty_config(vendor: switch_config::Vendor) -> String {
    match vendor {
        switch_config::Vendor::Sonic => "{}".into(),
        _ => String::new(),
    }
}

fn add_namespace(layout: &Layout, member: &Member, index: usize) -> Result<(), LabError> {
    let ns = &member.namespace;
    run("ip", &["netns", "add", ns])?;
    ip_in(ns, &["link", "set", "lo", "up"])?;
    exec_in(
        ns,
        "sysctl",
        &[
            "-qw",
            "net.ipv4.ip_forward=0",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
        ],
    )?;
    let outside = management_cable(&layout.name, index);
    run(
        "ip",
        &[
            "link", "add", &outside, "type", "veth", "peer", "name", "mgmt0", "netns", ns,
        ],
    )?;
    run(
        "ip",
        &["link", "set", &outside, "master", &layout.bridge, "up"],
    )?;
    ip_in(
        ns,
        &[
            "addr",
            "add",
            &format!("{}/16", member.mgmt),
            "dev",
            "mgmt0",
        ],
    )?;
    ip_in(ns, &["link", "set", "mgmt0", "up"])
}

/// This machine's end of the management cable of the lab's `index`th member.
fn management_cable(lab: &str, index: usize) -> String {
    format!("{lab}m{index}")
}

/// The name of a switch port in its namespace (interface names take no `/`), with the
/// vendor's name as its alias.
pub fn interface_name(port: &str) -> String {
    let name: String = port.replace('/', "_").chars().take(15).collect();
    name
}

fn cable(inv: &Inventory, layout: &Layout) -> Result<(), LabError> {
    let ns = |switch: usize| layout.switches[switch].namespace.as_str();
    let mut wired: Vec<(usize, usize)> = Vec::new();
    for link in &inv.uplinks {
        let leaf = &inv.switches[link.leaf];
        let spine = &inv.switches[link.spine];
        let (leaf_port, spine_port) = (&leaf.ports[link.leaf_port], &spine.ports[link.spine_port]);
        veth(
            (ns(link.leaf), &interface_name(&leaf_port.name)),
            (ns(link.spine), &interface_name(&spine_port.name)),
            9216,
        )?;
        wired.push((link.leaf, link.leaf_port));
        wired.push((link.spine, link.spine_port));
    }
    for rack in &inv.racks {
        let prefix = rack.subnet.prefix_len();
        let leaf = ns(rack.leaf);
        let mac = rack.gateway_mac.to_string();
        ip_in(
            leaf,
            &[
                "link", "add", "rack0", "mtu", "9216", "address", &mac, "type", "bridge",
            ],
        )?;
        ip_in(leaf, &["link", "set", "rack0", "up"])?;
        let address = format!("{}/{prefix}", rack.gateway_ip);
        ip_in(leaf, &["addr", "add", &address, "dev", "rack0"])?;
    }
    for link in &inv.downlinks {
        let host = &inv.hosts[link.host];
        let leaf_port = &inv.switches[link.leaf].ports[link.leaf_port];
        let port = interface_name(&leaf_port.name);
        veth(
            (&layout.hosts[link.host].namespace, &host.nic.name),
            (ns(link.leaf), &port),
            9216,
        )?;
        // The NIC as the host's installer left it: its MAC, MTU 1500, no addresses.
        let mac = host.nic.mac.to_string();
        ip_in(
            &layout.hosts[link.host].namespace,
            &[
                "link",
                "set",
                &host.nic.name,
                "mtu",
                "1500",
                "address",
                &mac,
            ],
        )?;
        ip_in(ns(link.leaf), &["link", "set", &port, "master", "rack0"])?;
        wired.push((link.leaf, link.leaf_port));
    }
    for (switch, port_index) in wired {
        let port = &inv.switches[switch].ports[port_index];
        let name = interface_name(&port.name);
        ip_in(ns(switch), &["link", "set", &name, "alias", &port.name])?;
        if let Some(ip) = port.ip {
            ip_in(ns(switch), &["addr", "add", &ip.to_string(), "dev", &name])?;
        }
    }
    Ok(())
}

fn veth(a: (&str, &str), b: (&str, &str), mtu: u32) -> Result<(), LabError> {
    let mtu = mtu.to_string();
    run(
        "ip",
        &[
            "-n", a.0, "link", "add", a.1, "mtu", &mtu, "type", "veth", "peer", "name", b.1,
            "netns", b.0, "mtu", &mtu,
        ],
    )?;
    // Whole frames with their checksums: the forwarder's raw sockets would otherwise
    // see half-checksummed packets and 64 KB segments that no wire carries.
    for (ns, name) in [a, b] {
        exec_in(
            ns,
            "ethtool",
            &["-K", name, "tx", "off", "tso", "off", "gso", "off"],
        )?;
        ip_in(ns, &["link", "set", name, "up"])?;
    }
    Ok(())
}

/// Starts a member's SSH server (daemonised, in its namespace); its known_hosts line.
/// `cli`: a switch (logging in to its CLI when true, to a shell with the vendor's
/// commands otherwise); None: a host.
fn start_sshd(
    spec: &Spec,
    member: &Member,
    dir: &Path,
    cli: Option<bool>,
) -> Result<String, LabError> {
    let host_key = dir.join("ssh_host_ed25519_key");
    keygen(&host_key)?;
    let mut config = format!(
        "Port 22\nListenAddress {ip}\nHostKey {key}\nPidFile {pid}\nAuthorizedKeysFile {keys}\n\
         StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\nMaxStartups 100\nMaxSessions 100\nLogLevel ERROR\n\
         Subsystem sftp internal-sftp\n",
        ip = member.mgmt,
        key = host_key.display(),
        pid = dir.join("sshd.pid").display(),
        keys = spec.dir.join("authorized_keys").display(),
    );
    if let Some(cli) = cli {
        let dev = dir.display();
        config.push_str(&format!(
            "SetEnv MLT_DEVICE={dev} HOME={dev} PATH={dev}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin\n"
        ));
        if cli {
            config.push_str(&format!("ForceCommand {dev}/bin/cli\n"));
        }
    }
    let config_path = dir.join("sshd_config");
    fs::write(&config_path, config).map_err(io("cannot write sshd_config"))?;
    let log = dir.join("sshd.log");
    run(
        "ip",
        &[
            "netns",
            "exec",
            &member.namespace,
            SSHD,
            "-f",
            &config_path.to_string_lossy(),
            "-E",
            &log.to_string_lossy(),
        ],
    )?;
    let public =
        fs::read_to_string(host_key.with_extension("pub")).map_err(io("cannot read a host key"))?;
    let key: Vec<&str> = public.split_whitespace().take(2).collect();
    Ok(format!("{} {}\n", member.mgmt, key.join(" ")))
}

fn wait_for_ssh(member: &Member) -> Result<(), LabError> {
    let address: Ipv4Addr = member
        .mgmt
        .parse()
        .map_err(|_| LabError::Refused(format!("{}: bad management address", member.name)))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&(address, 22).into(), Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(LabError::Refused(format!(
        "{}'s SSH server does not answer on {}:22",
        member.name, member.mgmt
    )))
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
    for ns in layout.namespaces() {
        if !Path::new("/run/netns").join(ns).exists() {
            continue;
        }
        // Again until none is left: a process may fork while its parent is killed.
        for _round in 0..10 {
            let pids = run("ip", &["netns", "pids", ns]).unwrap_or_default();
            let pids: Vec<i32> = pids
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // SAFETY: signalling a process that lives in the lab's namespace.
                if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 && !killed.contains(&pid) {
                    killed.push(pid);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        match run("ip", &["netns", "del", ns]) {
            Ok(_) => removed += 1,
            Err(e) => left.push(e.to_string()),
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

/// How a member of a running lab is.
#[derive(Debug, Serialize)]
pub struct MemberStatus {
    pub name: String,
    pub kind: &'static str,
    pub namespace: bool,
    pub ssh: bool,
    /// (switches) The static routes its namespace forwards by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub static_routes: Option<usize>,
    /// (switches) Why its data plane could not follow its configuration, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataplane_error: Option<String>,
    /// (switches) The queueing its running configuration holds, as the lab reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<super::qos::SwitchQos>,
    /// (switches) The forwarder's counters: per port the eight queues' packets, bytes,
    /// ECN marks, drops by reason and peak depth; frames without a route or neighbour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<serde_json::Value>,
}

pub fn status(dir: &Path) -> Result<Vec<MemberStatus>, LabError> {
    let layout = layout(dir)?;
    let mut out = Vec::new();
    for (kind, member) in layout
        .switches
        .iter()
        .map(|m| ("switch", m))
        .chain(layout.hosts.iter().map(|m| ("host", m)))
    {
        let namespace = Path::new("/run/netns").join(&member.namespace).exists();
        let ssh = member.mgmt.parse::<Ipv4Addr>().is_ok_and(|a| {
            TcpStream::connect_timeout(&(a, 22).into(), Duration::from_millis(300)).is_ok()
        });
        let (static_routes, dataplane_error) = if kind == "switch" && namespace {
            let routes = run(
                "ip",
                &[
                    "-n",
                    &member.namespace,
                    "-4",
                    "route",
                    "show",
                    "proto",
                    "static",
                ],
            )
            .map(|r| {
                r.lines()
                    .filter(|l| !l.starts_with(char::is_whitespace))
                    .count()
            })
            .ok();
            let log =
                fs::read_to_string(dir.join("devices").join(&member.name).join("dataplane.log"))
                    .ok()
                    .map(|t| t.trim().to_string());
            (routes, log)
        } else {
            (None, None)
        };
        let device = dir.join("devices").join(&member.name);
        let qos =
            (kind == "switch" && device.join("vendor").exists()).then(|| Device::at(&device).qos());
        let counters =
            fs::read_to_string(dir.join("counters").join(format!("{}.json", member.name)))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
        out.push(MemberStatus {
            name: member.name.clone(),
            kind,
            namespace,
            ssh,
            static_routes,
            dataplane_error,
            qos,
            counters,
        });
    }
    Ok(out)
}

fn keygen(path: &Path) -> Result<(), LabError> {
    let _ = fs::remove_file(path);
    run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &path.to_string_lossy(),
        ],
    )
    .map(|_| ())
}

fn run(program: &str, args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(io(format!("cannot run {program}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LabError::Command {
            command: format!("{program} {}", args.join(" ")),
            output: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// `ip -n NS ARGS…`: words as they are, never through a shell.
fn ip_in(ns: &str, args: &[&str]) -> Result<(), LabError> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    run("ip", &all).map(|_| ())
}

/// PROGRAM ARGS… in namespace `ns`.
fn exec_in(ns: &str, program: &str, args: &[&str]) -> Result<(), LabError> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    run("ip", &all).map(|_| ())
}
