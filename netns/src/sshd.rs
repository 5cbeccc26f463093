//! OpenSSH servers in namespaces, as the lab's switches and hosts and the tests' hosts
//! run them: a host key of their own, the keys of `authorized_keys`, `StrictModes no`
//! and no PAM (the files are in a test's or the lab's own directory), SFTP in-process.

use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Namespace, NetnsError, run};

/// Debian's OpenSSH server.
pub const SSHD: &str = "/usr/sbin/sshd";

/// A server to start.
pub struct Sshd<'a> {
    pub namespace: &'a Namespace,
    /// Where it listens (port 22).
    pub address: Ipv4Addr,
    /// Its own directory: host key, configuration, pid file and log go there.
    pub dir: &'a Path,
    pub authorized_keys: &'a Path,
    /// Further `sshd_config` lines (`SetEnv …`, `ForceCommand …`).
    pub extra: String,
}

/// A started server: its process when it runs in the foreground, and the line
/// `known_hosts` needs for it.
pub struct Started {
    pub child: Option<Child>,
    pub known_hosts: String,
}

/// An ed25519 key pair at `path` (and `path.pub`), replacing any there.
pub fn keygen(path: &Path) -> Result<(), NetnsError> {
    let _ = std::fs::remove_file(path);
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
    .map(drop)
}

impl Sshd<'_> {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Starts the server: daemonised (it outlives this process, and removing its
    /// namespace ends it), or in the `foreground` as a child this process can kill.
    pub fn start(&self, foreground: bool) -> Result<Started, NetnsError> {
        std::fs::create_dir_all("/run/sshd")
            .map_err(|e| NetnsError::Other(format!("cannot create /run/sshd: {e}")))?;
        let host_key = self.file("ssh_host_ed25519_key");
        keygen(&host_key)?;
        let config = format!(
            "Port 22\nListenAddress {ip}\nHostKey {key}\nPidFile {pid}\nAuthorizedKeysFile {keys}\n\
             StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\nMaxStartups 100\nMaxSessions 100\nLogLevel ERROR\n\
             Subsystem sftp internal-sftp\n{extra}",
            ip = self.address,
            key = host_key.display(),
            pid = self.file("sshd.pid").display(),
            keys = self.authorized_keys.display(),
            extra = self.extra,
        );
        let config_path = self.file("sshd_config");
        mlt_common::files::write(
            &config_path,
            config.as_bytes(),
            mlt_common::files::Access::Private,
        )
        .map_err(|e| NetnsError::Other(e.to_string()))?;
        let config_arg = config_path.to_string_lossy().into_owned();
        let log = self.file("sshd.log").to_string_lossy().into_owned();
        let child = if foreground {
            let child = self
                .namespace
                .command(SSHD)
                .args(["-D", "-f", &config_arg, "-E", &log])
                .stdin(Stdio::null())
                .spawn()
                .map_err(|source| NetnsError::Spawn {
                    program: SSHD.into(),
                    source,
                })?;
            Some(child)
        } else {
            self.namespace
                .exec(SSHD, &["-f", &config_arg, "-E", &log])?;
            None
        };
        let public = std::fs::read_to_string(host_key.with_extension("pub"))
            .map_err(|e| NetnsError::Other(format!("cannot read a host key: {e}")))?;
        let key: Vec<&str> = public.split_whitespace().take(2).collect();
        Ok(Started {
            child,
            known_hosts: format!("{} {}\n", self.address, key.join(" ")),
        })
    }
}

/// Waits until `address`:`port` accepts a connection made from namespace `from` (this
/// machine's own without one), at most `patience`.
pub fn wait_for(
    from: Option<&Namespace>,
    address: Ipv4Addr,
    port: u16,
    patience: Duration,
) -> Result<(), NetnsError> {
    let from = from.cloned();
    let connects = move || -> bool {
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            let attempt = (address, port).into();
            if TcpStream::connect_timeout(&attempt, Duration::from_millis(200)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };
    let answered = match from {
        // A thread of its own enters the namespace; this one stays where it is.
        Some(ns) => {
            std::thread::spawn(move || crate::capture::enter(ns.name()).is_ok() && connects())
                .join()
                .unwrap_or(false)
        }
        None => connects(),
    };
    if answered {
        Ok(())
    } else {
        Err(NetnsError::Other(format!(
            "nothing answers on {address}:{port} within {} s",
            patience.as_secs()
        )))
    }
}

/// Whether the command `sshd` can be run here.
pub fn available() -> bool {
    Path::new(SSHD).exists() && Command::new(SSHD).arg("-V").output().is_ok()
}
