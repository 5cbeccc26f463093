//! A leaf-spine fabric of network namespaces: every host a namespace with its own sshd
//! (on a management bridge) and a data NIC cabled to its rack's leaf; leaves and spines
//! namespaces that forward with the plan's static routes, set up here from `mltctl plan
//! --json`. mltctl itself runs in the management namespace. Dropping the fabric stops
//! every sshd and deletes every namespace and the scratch directory. Built with
//! `mlt_netns`, the builder the lab and the benches use.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use mlt_netns::sshd::{SSHD, Sshd, keygen, wait_for};
use mlt_netns::{Namespace, Namespaces, Role, cable};

/// Why the fabric cannot be built here, if it cannot.
pub fn unavailable() -> Option<String> {
    if let Some(why) = mlt_netns::unavailable() {
        return Some(why);
    }
    if !Path::new(SSHD).exists() {
        return Some(format!("{SSHD} is missing (Debian package openssh-server)"));
    }
    None
}

pub struct HostSpec {
    pub name: &'static str,
    pub rack: usize,
    /// The NIC name the inventory gives (the namespace's NIC is always eth1).
    pub nic: &'static str,
}

/// The test fabric's hosts: two racks of two.
pub const HOSTS: [HostSpec; 4] = [
    HostSpec {
        name: "h1",
        rack: 0,
        nic: "eth1",
    },
    HostSpec {
        name: "h2",
        rack: 0,
        nic: "eth1",
    },
    HostSpec {
        name: "h3",
        rack: 1,
        nic: "eth1",
    },
    HostSpec {
        name: "h4",
        rack: 1,
        nic: "eth1",
    },
];

fn host_ip(i: usize) -> String {
    format!("10.1.{}.{}", HOSTS[i].rack + 1, 11 + i % 2)
}

fn host_mac(i: usize) -> String {
    format!("02:00:0a:01:0{}:{:02x}", HOSTS[i].rack + 1, 11 + i % 2)
}

pub fn mgmt_ip(i: usize) -> String {
    format!("192.168.77.{}", 11 + i)
}

/// The inventory of `hosts` (a subset of [`HOSTS`], by index).
pub fn inventory(dir: &Path, hosts: &[(usize, &str)]) -> String {
    let mut yaml = format!(
        "fabric: {{name: nslab, path_pool: 10.200.0.0/16, mtu: 9000}}
defaults:
  mgmt: {{user: root, key: {{file: {key}}}}}
racks:
  - {{name: r1, subnet: 10.1.1.0/24, gateway: {{ip: 10.1.1.1, mac: \"02:00:0a:01:01:01\"}}}}
  - {{name: r2, subnet: 10.1.2.0/24, gateway: {{ip: 10.1.2.1, mac: \"02:00:0a:01:02:01\"}}}}
switches:
",
        key = dir.join("id_ed25519").display()
    );
    for s in 0..2 {
        yaml.push_str(&format!(
            "  - name: spine{n}\n    role: spine\n    vendor: sonic\n    mgmt: {{address: 192.0.2.1{n}}}\n    buffer_bytes: 33554432\n    queues: 8\n    ports:\n      - {{name: Ethernet0, speed: 10G, ip: 172.16.0.{a}/31}}\n      - {{name: Ethernet4, speed: 10G, ip: 172.16.0.{b}/31}}\n",
            n = s + 1,
            a = 2 * s,
            b = 4 + 2 * s
        ));
    }
    for r in 0..2 {
        yaml.push_str(&format!(
            "  - name: leaf{n}\n    role: leaf\n    rack: r{n}\n    vendor: sonic\n    mgmt: {{address: 192.0.2.2{n}}}\n    buffer_bytes: 16777216\n    queues: 8\n    ports:\n      - {{name: Ethernet0, speed: 10G}}\n      - {{name: Ethernet4, speed: 10G}}\n      - {{name: Ethernet48, speed: 10G, ip: 172.16.0.{a}/31}}\n      - {{name: Ethernet52, speed: 10G, ip: 172.16.0.{b}/31}}\n",
            n = r + 1,
            a = 4 * r + 1,
            b = 4 * r + 3
        ));
    }
    yaml.push_str("hosts:\n");
    for &(i, nic) in hosts {
        yaml.push_str(&format!(
            "  - name: {name}\n    rack: r{rack}\n    mgmt: {{address: {mgmt}, port: 22}}\n    nic: {{name: {nic}, pci: \"0000:3b:00.0\", mac: \"{mac}\", ip: {ip}}}\n    cores: [0, 1]\n",
            name = HOSTS[i].name,
            rack = HOSTS[i].rack + 1,
            mgmt = mgmt_ip(i),
            mac = host_mac(i),
            ip = host_ip(i),
        ));
    }
    yaml.push_str(
        "links:
  - [leaf1:Ethernet48, spine1:Ethernet0]
  - [leaf1:Ethernet52, spine2:Ethernet0]
  - [leaf2:Ethernet48, spine1:Ethernet4]
  - [leaf2:Ethernet52, spine2:Ethernet4]
",
    );
    for &(i, nic) in hosts {
        yaml.push_str(&format!(
            "  - [{}:{nic}, leaf{}:Ethernet{}]\n",
            HOSTS[i].name,
            HOSTS[i].rack + 1,
            4 * (i % 2)
        ));
    }
    yaml.push_str(
        "training:
  job_id: 7
  layers: {file: vgg16.layers}
  loss_bound: 0
  collective: ring
  priorities: 8
  model:
    load: 0.9
  launcher:
    socket_group: nogroup
",
    );
    yaml
}

pub struct Fabric {
    pub prefix: String,
    pub dir: PathBuf,
    pub inventory: PathBuf,
    pub known_hosts: PathBuf,
    pub remote_dir: PathBuf,
    sshd: Vec<Option<Child>>,
    namespaces: Namespaces,
}

impl Fabric {
    pub fn mgmt_ns(&self) -> String {
        format!("{}m", self.prefix)
    }

    pub fn host_ns(&self, i: usize) -> String {
        format!("{}h{}", self.prefix, i + 1)
    }

    pub fn leaf_ns(&self, r: usize) -> String {
        format!("{}l{}", self.prefix, r + 1)
    }

    pub fn spine_ns(&self, s: usize) -> String {
        format!("{}s{}", self.prefix, s + 1)
    }

    /// Builds everything; panics (after cleaning up, through Drop) if any step fails.
    pub fn new(test: &str) -> Fabric {
        let prefix = format!("mh{}{}", std::process::id() % 100_000, &test[..2]);
        // Removed by Drop.
        let dir = mlt_common::files::scratch_dir(&format!("mltctl-hosts-{test}-"))
            .unwrap()
            .keep();
        let mut fabric = Fabric {
            inventory: dir.join("inventory.yaml"),
            known_hosts: dir.join("known_hosts"),
            remote_dir: dir.join("remote"),
            prefix,
            dir,
            sshd: Vec::new(),
            namespaces: Namespaces::new(),
        };
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/inventory/vgg16.layers"),
            fabric.dir.join("vgg16.layers"),
        )
        .unwrap();
        keygen(&fabric.dir.join("id_ed25519")).unwrap();
        std::fs::copy(
            fabric.dir.join("id_ed25519.pub"),
            fabric.dir.join("authorized_keys"),
        )
        .unwrap();
        let all: Vec<(usize, &str)> = HOSTS.iter().enumerate().map(|(i, h)| (i, h.nic)).collect();
        std::fs::write(&fabric.inventory, inventory(&fabric.dir, &all)).unwrap();
        fabric.build();
        fabric
    }

    fn add_ns(&mut self, name: String, role: Role) -> Namespace {
        self.namespaces.add(&name, role).unwrap()
    }

    /// A veth pair `a` in `ns_a` and `b` in `ns_b`, both up, MTU 9000.
    fn cable(&self, ns_a: &str, a: &str, ns_b: &str, b: &str) {
        let (ns_a, ns_b) = (Namespace::named(ns_a), Namespace::named(ns_b));
        cable((Some(&ns_a), a), (Some(&ns_b), b), 9000).unwrap();
    }

    fn build(&mut self) {
        let mgmt = self.mgmt_ns();
        let mgmt_ns = self.add_ns(mgmt.clone(), Role::Host);
        mgmt_ns.bridge("br0", 1500, None).unwrap();
        mgmt_ns.address("br0", "192.168.77.1/24").unwrap();
        for s in 0..2 {
            let ns = self.spine_ns(s);
            self.add_ns(ns, Role::Router);
        }
        for r in 0..2 {
            let ns = self.leaf_ns(r);
            let leaf = self.add_ns(ns.clone(), Role::Router);
            let n = r + 1;
            leaf.bridge("br0", 9000, Some(&format!("02:00:0a:01:0{n}:01")))
                .unwrap();
            leaf.address("br0", &format!("10.1.{n}.1/24")).unwrap();
            for s in 0..2 {
                let spine = self.spine_ns(s);
                self.cable(&ns, &format!("s{}", s + 1), &spine, &format!("l{}", r + 1));
                self.sh(
                    &ns,
                    &format!(
                        "ip addr add 172.16.0.{}/31 dev s{}",
                        4 * r + 2 * s + 1,
                        s + 1
                    ),
                );
                self.sh(
                    &spine,
                    &format!("ip addr add 172.16.0.{}/31 dev l{}", 4 * r + 2 * s, r + 1),
                );
            }
        }
        for (i, host) in HOSTS.iter().enumerate() {
            let ns = self.host_ns(i);
            self.add_ns(ns.clone(), Role::Host);
            self.cable(&mgmt, &format!("m{}", i + 1), &ns, "mg0");
            self.sh(&mgmt, &format!("ip link set m{} master br0", i + 1));
            self.sh(&ns, &format!("ip addr add {}/24 dev mg0", mgmt_ip(i)));
            let leaf = self.leaf_ns(host.rack);
            self.cable(&ns, "eth1", &leaf, &format!("h{}", i + 1));
            // The NIC as the host's installer left it: MAC, MTU 1500, no addresses.
            self.sh(
                &ns,
                &format!("ip link set eth1 mtu 1500 address {}", host_mac(i)),
            );
            self.sh(&leaf, &format!("ip link set h{} master br0", i + 1));
        }
        self.install_switch_routes();
        let mut known_hosts = String::new();
        for i in 0..HOSTS.len() {
            known_hosts.push_str(&self.start_sshd(i));
        }
        std::fs::write(&self.known_hosts, known_hosts).unwrap();
    }

    /// The plan's static routes on every leaf and spine namespace.
    fn install_switch_routes(&self) {
        let out = self.mltctl(&[
            "plan",
            "-i",
            &self.inventory.display().to_string(),
            "--json",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for switch in plan["switches"].as_array().unwrap() {
            let name = switch["name"].as_str().unwrap();
            let n: usize = name[name.len() - 1..].parse().unwrap();
            let ns = if name.starts_with("spine") {
                self.spine_ns(n - 1)
            } else {
                self.leaf_ns(n - 1)
            };
            for route in switch["routes"].as_array().unwrap() {
                let prefix = route["prefix"].as_str().unwrap();
                let hops: Vec<&str> = route["next_hops"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h.as_str().unwrap())
                    .collect();
                let command = match hops.as_slice() {
                    [] => format!("ip route add blackhole {prefix}"),
                    [one] => format!("ip route add {prefix} via {one}"),
                    many => format!(
                        "ip route add {prefix} {}",
                        many.iter()
                            .map(|h| format!("nexthop via {h}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                };
                self.sh(&ns, &command);
            }
        }
    }

    /// Starts host i's sshd on its management address; returns its known_hosts line.
    fn start_sshd(&mut self, i: usize) -> String {
        let host_dir = self.dir.join(HOSTS[i].name);
        std::fs::create_dir_all(&host_dir).unwrap();
        let address = mgmt_ip(i).parse().unwrap();
        let started = Sshd {
            namespace: &Namespace::named(self.host_ns(i)),
            address,
            dir: &host_dir,
            authorized_keys: &self.dir.join("authorized_keys"),
            extra: String::new(),
        }
        .start(true)
        .expect("sshd starts");
        self.sshd.push(started.child);
        // From the management namespace, as mltctl will connect.
        let mgmt = Namespace::named(self.mgmt_ns());
        wait_for(Some(&mgmt), address, 22, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("sshd of {}: {e}", HOSTS[i].name));
        started.known_hosts
    }

    /// Stops host i's sshd: the host becomes unreachable.
    pub fn stop_sshd(&mut self, i: usize) {
        // `ip netns exec` execs sshd itself, so the child is the daemon.
        if let Some(mut child) = self.sshd[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `bash -c command` in namespace `ns`; panics with its output on failure.
    pub fn sh(&self, ns: &str, command: &str) -> String {
        let out = self.sh_output(ns, command);
        assert!(out.status.success(), "in {ns}: {command}\n{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn sh_output(&self, ns: &str, command: &str) -> Output {
        Command::new("ip")
            .args(["netns", "exec", ns, "bash", "-c", command])
            .output()
            .unwrap()
    }

    /// mltctl in the management namespace.
    pub fn mltctl(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.mgmt_ns()])
            .arg(env!("CARGO_BIN_EXE_mltctl"))
            .args(args)
            .env_remove("MLTCTL_INVENTORY")
            .env_remove("SSH_AUTH_SOCK")
            .output()
            .unwrap()
    }

    /// A host command (bootstrap, launch, stop) on this fabric's inventory.
    pub fn host_command(&self, command: &str, inventory: &Path, args: &[&str]) -> Output {
        self.host_command_in(command, inventory, &self.remote_dir, args)
    }

    /// [`Fabric::host_command`] with mltctl's files in `remote_dir` on the hosts.
    pub fn host_command_in(
        &self,
        command: &str,
        inventory: &Path,
        remote_dir: &Path,
        args: &[&str],
    ) -> Output {
        let mut all = vec![
            command.to_string(),
            "-i".into(),
            inventory.display().to_string(),
            "--known-hosts".into(),
            self.known_hosts.display().to_string(),
            "--remote-dir".into(),
            remote_dir.display().to_string(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        self.mltctl(&all)
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for i in 0..self.sshd.len() {
            self.stop_sshd(i);
        }
        // Transports a failed test left running.
        for host in &HOSTS {
            let pid_file = self.remote_dir.join(format!("{}.pid", host.name));
            if let Ok(pid) = std::fs::read_to_string(&pid_file) {
                let _ = Command::new("kill").args(["-9", pid.trim()]).status();
            }
        }
        // The namespaces go when `namespaces` is dropped, after this.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
