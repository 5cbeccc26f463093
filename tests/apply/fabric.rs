//! A fabric of emulated switches, each behind its own real OpenSSH server (Debian's
//! `openssh-server`) on a free loopback port, and an inventory that points at them.
//! Everything lives in one scratch directory; dropping the fabric stops the servers and
//! removes the directory, whether the test passed or not.

#![allow(dead_code)] // the benchmark uses a subset

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use mltctl_lab::emulator::Device;

const SSHD: &str = "/usr/sbin/sshd";

pub struct Switch {
    pub name: String,
    pub vendor: String,
    pub device: Device,
    pub port: u16,
    sshd: Option<Child>,
}

pub struct Fabric {
    pub dir: PathBuf,
    pub inventory: PathBuf,
    pub known_hosts: PathBuf,
    pub journal: PathBuf,
    /// The private key the inventory names (no passphrase unless `with_passphrase`).
    pub key: PathBuf,
    pub switches: Vec<Switch>,
}

/// What a test needs to know to skip cleanly when the machine cannot run sshd.
pub fn sshd_missing() -> Option<String> {
    if !Path::new(SSHD).exists() {
        return Some(format!(
            "{SSHD} is not installed (Debian package openssh-server)"
        ));
    }
    None
}

impl Fabric {
    /// The lab fabric (`inventory/lab.yaml`), each switch running `initial(name)`.
    pub fn lab(test: &str, initial: impl Fn(&str) -> String) -> Fabric {
        Fabric::new(test, &root().join("inventory/lab.yaml"), initial, None)
    }

    /// The lab fabric with the realistic base configurations in
    /// `tests/running/lab-base/` (interfaces, BGP, users — none of the plan's QoS).
    pub fn lab_base(test: &str) -> Fabric {
        Fabric::lab(test, base_config)
    }

    /// Builds a fabric for an inventory: one emulated switch per inventory switch. The
    /// layer files next to the inventory come along. With `passphrase`, the login key
    /// is encrypted with it and the inventory names the environment variable
    /// `MLTCTL_TEST_PASSPHRASE`.
    pub fn new(
        test: &str,
        source: &Path,
        initial: impl Fn(&str) -> String,
        passphrase: Option<&str>,
    ) -> Fabric {
        let inventory_yaml = &std::fs::read_to_string(source).unwrap();
        // Removed by Drop (unless MLTCTL_TEST_KEEP is set).
        let dir = mlt_common::files::scratch_dir(&format!("mltctl-apply-{test}-"))
            .unwrap()
            .keep();
        // Debian's sshd needs its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let key = dir.join("id_ed25519");
        keygen(&key, passphrase.unwrap_or(""));
        std::fs::copy(dir.join("id_ed25519.pub"), dir.join("authorized_keys")).unwrap();
        for entry in std::fs::read_dir(source.parent().unwrap())
            .unwrap()
            .flatten()
        {
            if entry.path().extension().is_some_and(|e| e == "layers") {
                std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
            }
        }
        let inventory = match mltctl::inventory::load(source) {
            Ok(inventory) => inventory,
            Err(e) => panic!("the test inventory is valid: {e:#}"),
        };
        let mut fabric = Fabric {
            known_hosts: dir.join("known_hosts"),
            journal: dir.join("journal.jsonl"),
            inventory: dir.join("inventory.yaml"),
            key: key.clone(),
            switches: Vec::new(),
            dir,
        };
        let mut known_hosts = String::new();
        for switch in &inventory.switches {
            let name = switch.name.clone();
            let vendor = switch.vendor.to_string();
            let device_dir = fabric.dir.join("devices").join(&name);
            let device = Device::install(&device_dir, &vendor, &initial(&name), emulator());
            let host_key = device_dir.join("ssh_host_ed25519_key");
            keygen(&host_key, "");
            let public = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
            let mut s = Switch {
                name,
                vendor,
                device,
                port: 0,
                sshd: None,
            };
            fabric.start(&mut s);
            let key_text: Vec<&str> = public.split_whitespace().take(2).collect();
            known_hosts.push_str(&format!("[127.0.0.1]:{} {}\n", s.port, key_text.join(" ")));
            fabric.switches.push(s);
        }
        std::fs::write(&fabric.known_hosts, known_hosts).unwrap();
        let ports: BTreeMap<String, u16> = inventory
            .switches
            .iter()
            .zip(&fabric.switches)
            .map(|(s, e)| (s.mgmt.address.clone(), e.port))
            .collect();
        let yaml = point_at(inventory_yaml, &ports, &key, passphrase.is_some());
        std::fs::write(&fabric.inventory, yaml).unwrap();
        fabric
    }

    fn start(&self, switch: &mut Switch) {
        let device_dir = &switch.device.dir;
        for _attempt in 0..10 {
            let port = free_port();
            let mut config = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {pid}\n\
                 AuthorizedKeysFile {keys}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
                 MaxStartups 200\nMaxSessions 100\nLogLevel ERROR\n\
                 SetEnv MLT_DEVICE={dev} HOME={dev} PATH={dev}/bin:/usr/local/bin:/usr/bin:/bin\n",
                host_key = device_dir.join("ssh_host_ed25519_key").display(),
                pid = device_dir.join("sshd.pid").display(),
                keys = self.dir.join("authorized_keys").display(),
                dev = device_dir.display(),
            );
            // HOME is the switch's own: the login shell reads no start-up files of the
            // machine's root account (a switch's admin account has none of them).
            if switch.vendor == "eos" || switch.vendor == "onyx" {
                // These log in to their CLI, not to a shell.
                config.push_str(&format!("ForceCommand {}/bin/cli\n", device_dir.display()));
            }
            let config_path = device_dir.join("sshd_config");
            std::fs::write(&config_path, config).unwrap();
            let mut child = Command::new(SSHD)
                .args(["-D", "-f"])
                .arg(&config_path)
                .arg("-E")
                .arg(device_dir.join("sshd.log"))
                .stdin(Stdio::null())
                .spawn()
                .expect("sshd starts");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken meanwhile: try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    switch.port = port;
                    switch.sshd = Some(child);
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "sshd for {} did not start: see {}",
            switch.name,
            device_dir.join("sshd.log").display()
        );
    }

    /// Puts every switch back to `initial(name)`, as if freshly installed.
    pub fn reset(&self, initial: impl Fn(&str) -> String) {
        for switch in &self.switches {
            for dir in ["sessions", "checkpoints", "timers"] {
                let _ = std::fs::remove_dir_all(switch.device.dir.join(dir));
            }
            for file in ["pending", "confirm-previous"] {
                switch.device.remove(file);
            }
            Device::install(
                &switch.device.dir,
                &switch.vendor,
                &initial(&switch.name),
                emulator(),
            );
        }
    }

    pub fn switch(&self, name: &str) -> &Switch {
        self.switches
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no switch {name}"))
    }

    /// Stops a switch's SSH server: the switch becomes unreachable.
    pub fn stop(&mut self, name: &str) {
        let switch = self.switches.iter_mut().find(|s| s.name == name).unwrap();
        if let Some(mut child) = switch.sshd.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `mltctl apply` on this fabric (its inventory, known_hosts and journal), to run.
    pub fn apply_command(&self, args: &[&str]) -> Command {
        let mut command = self.mltctl("apply");
        command.arg("--journal").arg(&self.journal).args(args);
        command
    }

    /// `mltctl SUBCOMMAND` on this fabric's inventory, with its known_hosts.
    pub fn mltctl(&self, subcommand: &str) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mltctl"));
        command
            .arg(subcommand)
            .arg("-i")
            .arg(&self.inventory)
            .arg("--known-hosts")
            .arg(&self.known_hosts)
            .env_remove("MLTCTL_INVENTORY")
            .env_remove("SSH_AUTH_SOCK");
        command
    }

    /// Runs `mltctl apply` on this fabric (its inventory, known_hosts and journal).
    pub fn apply(&self, args: &[&str]) -> Output {
        self.apply_with(args, &[])
    }

    pub fn apply_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.apply_command(args)
            .envs(env.iter().copied())
            .output()
            .expect("mltctl runs")
    }

    /// Every switch's state files, for byte-for-byte comparisons.
    pub fn states(&self) -> BTreeMap<String, Vec<(String, String)>> {
        self.switches
            .iter()
            .map(|s| (s.name.clone(), s.device.state()))
            .collect()
    }

    /// The journal's entries.
    pub fn journal(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.journal)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("journal lines are JSON"))
            .collect()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for switch in &mut self.switches {
            if let Some(mut child) = switch.sshd.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // MLTCTL_TEST_KEEP=1 keeps the switches' state for a look after a failure.
        if std::env::var_os("MLTCTL_TEST_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The binary the emulated switches' commands run.
fn emulator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mltctl-lab-switch"))
}

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The realistic configuration of a lab switch without the plan's parts.
pub fn base_config(name: &str) -> String {
    let file = match name {
        "spine1" => "spine1.json",
        "spine2" => "spine2.cfg",
        "leaf1" => "leaf1.nvue",
        "leaf2" => "leaf2.cfg",
        other => panic!("no base configuration for {other}"),
    };
    std::fs::read_to_string(root().join("tests/running/lab-base").join(file)).unwrap()
}

/// A factory-empty switch: nothing configured.
pub fn empty_config(vendor: &str) -> String {
    match vendor {
        "sonic" => "{}".into(),
        _ => String::new(),
    }
}

fn keygen(path: &Path, passphrase: &str) {
    let status = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            "mltctl-test",
            "-f",
        ])
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .expect("ssh-keygen runs (Debian package openssh-client)");
    assert!(status.success());
}

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The inventory with every switch's management address replaced by its emulated
/// switch on loopback, logging in as root with the fabric's key.
fn point_at(yaml: &str, ports: &BTreeMap<String, u16>, key: &Path, passphrase: bool) -> String {
    let mut out = String::new();
    let mut in_defaults = false;
    for line in yaml.lines() {
        let trimmed = line.trim_start();
        if !line.starts_with(' ') {
            in_defaults = trimmed.starts_with("defaults:");
        }
        let indent = &line[..line.len() - trimmed.len()];
        let rewritten = if in_defaults && trimmed.starts_with("user:") {
            format!("{indent}user: root")
        } else if in_defaults && trimmed.starts_with("key:") {
            let passphrase = if passphrase {
                ", passphrase_env: MLTCTL_TEST_PASSPHRASE"
            } else {
                ""
            };
            format!("{indent}key: {{file: {}{passphrase}}}", key.display())
        } else if let Some(address) = trimmed
            .strip_prefix("mgmt: {address: ")
            .map(|rest| rest.split([',', '}']).next().unwrap_or_default().trim())
            && let Some(port) = ports.get(address)
        {
            format!("{indent}mgmt: {{address: 127.0.0.1, port: {port}, user: root}}")
        } else {
            line.to_string()
        };
        out.push_str(&rewritten);
        out.push('\n');
    }
    out
}
