//! SSH sessions to devices (the `ssh2` crate): one session per device, reused for every
//! step. The device's host key is checked against known_hosts before anything is sent;
//! the user authenticates with a key file, a key held in an environment variable, or
//! the ssh-agent. Passwords are never used, and no key or passphrase is ever printed.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use mlt_common::shell::ShellCommand;
use ssh2::{CheckResult, KnownHostFileKind, MethodType};
use switch_config::push::{Output, Session};

use crate::inventory::{KeyRef, Mgmt};

mod exchange;

/// How sessions are opened.
#[derive(Debug)]
pub struct SshOptions {
    /// OpenSSH known_hosts file the device keys are checked against.
    pub known_hosts: PathBuf,
    /// Record the key of a device that has none in `known_hosts` (a changed key is
    /// always refused).
    pub accept_new_host_keys: bool,
    pub connect_timeout: Duration,
    /// The longest any one step (a command, a read) may take.
    pub command_timeout: Duration,
    /// Host keys recorded in `known_hosts` by this run (endpoint, type and
    /// fingerprint), for the admin to see; also serialises the additions from parallel
    /// sessions.
    pub recorded: Mutex<Vec<String>>,
}

impl SshOptions {
    /// What this run recorded in `known_hosts`, one line each.
    pub fn recorded(&self) -> Vec<String> {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Why a session could not be opened. Nothing was sent to the device.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("cannot resolve {endpoint}: {source}")]
    Resolve {
        endpoint: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot connect to {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: io::Error,
    },
    #[error("SSH handshake with {endpoint} failed: {source}")]
    Handshake {
        endpoint: String,
        #[source]
        source: ssh2::Error,
    },
    #[error(
        "the host key of {endpoint} ({key}) is not in {known}: check that fingerprint against \
         the device's own (`ssh-keygen -lf` of its host key, on its console), then run again \
         with --accept-new-host-keys to record it, or record it with `ssh-keyscan -p {port} \
         -t {kind} {address} >> {known}`",
        known = known_hosts.display()
    )]
    UnknownHostKey {
        endpoint: String,
        address: String,
        port: u16,
        /// The key's type and SHA-256 fingerprint, as `ssh-keygen -l` prints them.
        key: String,
        /// The type as ssh-keyscan names it.
        kind: String,
        known_hosts: PathBuf,
    },
    #[error(
        "the host key of {endpoint} does not match the one in {}: refusing to connect (a replaced device, or someone in between)",
        known_hosts.display()
    )]
    HostKeyChanged {
        endpoint: String,
        known_hosts: PathBuf,
    },
    #[error("known hosts {}: {message}", path.display())]
    KnownHosts { path: PathBuf, message: String },
    #[error("authentication as {user} on {endpoint} failed: {reason}")]
    Auth {
        user: String,
        endpoint: String,
        reason: String,
    },
}

/// An authenticated session, with a record of every command sent over it.
pub struct SshSession {
    session: ssh2::Session,
    sent: Vec<String>,
}

/// The host key algorithms in OpenSSH's order of preference, so that the key checked
/// is the one OpenSSH recorded for the device.
const HOST_KEY_PREFERENCE: &[&str] = &[
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
    "ssh-rsa",
];

impl SshSession {
    /// Connects to `mgmt`, checks its host key and logs in.
    pub fn open(mgmt: &Mgmt, options: &SshOptions) -> Result<SshSession, SshError> {
        let endpoint = format!("{}:{}", mgmt.address, mgmt.port);
        let tcp = connect(&mgmt.address, mgmt.port, options.connect_timeout, &endpoint)?;
        let handshake = |source| SshError::Handshake {
            endpoint: endpoint.clone(),
            source,
        };
        let mut session = ssh2::Session::new().map_err(handshake)?;
        session.set_tcp_stream(tcp);
        session.set_timeout(millis(options.command_timeout));
        let supported = session
            .supported_algs(MethodType::HostKey)
            .map_err(handshake)?;
        let preference: Vec<&str> = HOST_KEY_PREFERENCE
            .iter()
            .copied()
            .filter(|a| supported.contains(a))
            .collect();
        session
            .method_pref(MethodType::HostKey, &preference.join(","))
            .map_err(handshake)?;
        session.handshake().map_err(handshake)?;
        check_host_key(&session, mgmt, options, &endpoint)?;
        authenticate(&session, mgmt, &endpoint)?;
        Ok(SshSession {
            session,
            sent: Vec::new(),
        })
    }

    /// Replaces a lost connection with a new one; the record of what was sent stays.
    pub fn reconnect(&mut self, mgmt: &Mgmt, options: &SshOptions) -> Result<(), SshError> {
        self.session = SshSession::open(mgmt, options)?.session;
        Ok(())
    }

    /// Every command and CLI script sent so far, in order (no output, no secrets: only
    /// what mltctl itself wrote).
    pub fn sent(&self) -> &[String] {
        &self.sent
    }

    /// Writes `data` to `path` on the device: to a temporary file beside it over SFTP,
    /// then renamed into place, so a reader sees the old file or the new, never part.
    pub fn upload(&mut self, data: &[u8], path: &str, mode: i32) -> io::Result<()> {
        // Unique per upload: sessions to hosts sharing a filesystem may write the same path.
        static UPLOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = UPLOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = format!("{path}.mltctl-{}-{n}.tmp", std::process::id());
        self.sent
            .push(format!("upload {} bytes to {path}", data.len()));
        let sftp = self.session.sftp().map_err(io::Error::from)?;
        {
            let mut file = sftp
                .open_mode(
                    Path::new(&tmp),
                    // A new file, never one (or a link) that was there before.
                    ssh2::OpenFlags::WRITE
                        | ssh2::OpenFlags::CREATE
                        | ssh2::OpenFlags::EXCLUSIVE
                        | ssh2::OpenFlags::TRUNCATE,
                    mode,
                    ssh2::OpenType::File,
                )
                .map_err(|e| io::Error::other(format!("cannot create {tmp}: {e}")))?;
            // Large writes keep many SFTP requests in flight.
            for chunk in data.chunks(1 << 20) {
                file.write_all(chunk)?;
            }
        }
        // -T: onto `path` itself, never into a directory (or a link to one) there.
        let rename = ShellCommand::new("mv -f -T").arg(&tmp).arg(path);
        let output = self.run(Some(rename.as_str()), "")?;
        if output.status != 0 {
            return Err(io::Error::other(format!(
                "cannot move {tmp} to {path}: {}",
                output.stderr.trim()
            )));
        }
        Ok(())
    }

    /// Runs `command` on the device and returns what it printed and its exit status.
    pub fn exec(&mut self, command: &ShellCommand) -> io::Result<Output> {
        self.sent.push(command.to_string());
        self.run(Some(command.as_str()), "")
    }

    fn run(&mut self, command: Option<&str>, input: &str) -> io::Result<Output> {
        let mut channel = self.session.channel_session().map_err(io::Error::from)?;
        match command {
            Some(command) => channel.exec(command),
            None => channel.shell(),
        }
        .map_err(io::Error::from)?;
        let printed = exchange::exchange(&self.session, &mut channel, input.as_bytes())?;
        Ok(Output {
            stdout: text(printed.stdout),
            stderr: text(printed.stderr),
            status: printed.status,
        })
    }
}

impl Session for SshSession {
    fn exec(&mut self, command: &ShellCommand, input: &str) -> io::Result<Output> {
        self.sent.push(if input.is_empty() {
            command.to_string()
        } else {
            // Sized once: a spine's patch is megabytes, and format! would grow by doubling.
            let (command, open, close) = (command.as_str(), " <<'EOF'\n", "EOF");
            let mut line =
                String::with_capacity(command.len() + open.len() + input.len() + close.len());
            line.extend([command, open, input, close]);
            line
        });
        self.run(Some(command.as_str()), input)
    }

    fn cli(&mut self, script: &str) -> io::Result<Output> {
        self.sent.push(script.trim_end().to_string());
        self.run(None, script)
    }
}

/// The most a device may print in answer to one command: far above any running
/// configuration, far below what would hurt mltctl or the machine it runs on.
pub const MAX_OUTPUT_BYTES: u64 = 64 << 20;

/// A device's output as text (invalid UTF-8 replaced, never refused).
fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

fn connect(
    address: &str,
    port: u16,
    timeout: Duration,
    endpoint: &str,
) -> Result<TcpStream, SshError> {
    let addresses: Vec<_> = (address, port)
        .to_socket_addrs()
        .map_err(|source| SshError::Resolve {
            endpoint: endpoint.to_string(),
            source,
        })?
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in addresses {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(tcp) => {
                // Each step is a short request and a short reply: without this, Nagle's
                // algorithm and delayed ACKs add tens of milliseconds to every step.
                tcp.set_nodelay(true).map_err(|source| SshError::Connect {
                    endpoint: endpoint.to_string(),
                    source,
                })?;
                return Ok(tcp);
            }
            Err(e) => last = e,
        }
    }
    Err(SshError::Connect {
        endpoint: endpoint.to_string(),
        source: last,
    })
}

fn check_host_key(
    session: &ssh2::Session,
    mgmt: &Mgmt,
    options: &SshOptions,
    endpoint: &str,
) -> Result<(), SshError> {
    let path = &options.known_hosts;
    let known_hosts_error = |message: String| SshError::KnownHosts {
        path: path.clone(),
        message,
    };
    let (key, key_type) = session
        .host_key()
        .ok_or_else(|| known_hosts_error("the device sent no host key".into()))?;
    let kind = key_kind(key_type);
    let fingerprint = format!("{} {}", kind.to_uppercase(), fingerprint(key));
    let mut known = session
        .known_hosts()
        .map_err(|e| known_hosts_error(e.to_string()))?;
    if path.exists() {
        known
            .read_file(path, KnownHostFileKind::OpenSSH)
            .map_err(|e| known_hosts_error(e.to_string()))?;
    }
    match known.check_port(&mgmt.address, mgmt.port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::Mismatch => Err(SshError::HostKeyChanged {
            endpoint: endpoint.to_string(),
            known_hosts: path.clone(),
        }),
        CheckResult::NotFound if options.accept_new_host_keys => {
            let name = if mgmt.port == 22 {
                mgmt.address.clone()
            } else {
                format!("[{}]:{}", mgmt.address, mgmt.port)
            };
            known
                .add(&name, key, "recorded by mltctl", key_type.into())
                .map_err(|e| known_hosts_error(e.to_string()))?;
            let entry = known
                .hosts()
                .map_err(|e| known_hosts_error(e.to_string()))?
                .into_iter()
                .rfind(|h| h.name() == Some(name.as_str()))
                .ok_or_else(|| known_hosts_error("the new key was not recorded".into()))?;
            let line = known
                .write_string(&entry, KnownHostFileKind::OpenSSH)
                .map_err(|e| known_hosts_error(e.to_string()))?;
            let mut recorded = options.recorded.lock().unwrap_or_else(|e| e.into_inner());
            append_line(path, &line).map_err(|e| known_hosts_error(e.to_string()))?;
            recorded.push(format!(
                "recorded the host key of {endpoint} ({fingerprint}) in {}",
                path.display()
            ));
            Ok(())
        }
        CheckResult::NotFound => Err(SshError::UnknownHostKey {
            endpoint: endpoint.to_string(),
            address: mgmt.address.clone(),
            port: mgmt.port,
            key: fingerprint,
            kind: kind.to_string(),
            known_hosts: path.clone(),
        }),
        CheckResult::Failure => Err(known_hosts_error(
            "the host key could not be checked".into(),
        )),
    }
}

/// The key's type as ssh-keyscan's `-t` takes it.
fn key_kind(key_type: ssh2::HostKeyType) -> &'static str {
    match key_type {
        ssh2::HostKeyType::Rsa => "rsa",
        ssh2::HostKeyType::Dss => "dsa",
        ssh2::HostKeyType::Ed25519 => "ed25519",
        ssh2::HostKeyType::Ecdsa256 | ssh2::HostKeyType::Ecdsa384 | ssh2::HostKeyType::Ecdsa521 => {
            "ecdsa"
        }
        _ => "unknown",
    }
}

/// `SHA256:…`, as `ssh-keygen -l` prints a key's fingerprint: base64 without padding
/// of the SHA-256 of the key blob.
fn fingerprint(key: &[u8]) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key);
    format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

/// Appends a line; the caller holds the lock that serialises writers.
fn append_line(path: &Path, line: &str) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(file, "{}", line.trim_end())
}

fn authenticate(session: &ssh2::Session, mgmt: &Mgmt, endpoint: &str) -> Result<(), SshError> {
    let failed = |reason: String| SshError::Auth {
        user: mgmt.user.clone(),
        endpoint: endpoint.to_string(),
        reason,
    };
    match &mgmt.key {
        KeyRef::File {
            path,
            passphrase_env,
        } => {
            let path = expand_home(path);
            if !path.is_file() {
                return Err(failed(format!("no key file {}", path.display())));
            }
            let passphrase = match passphrase_env {
                Some(var) => Some(
                    std::env::var(var)
                        .map_err(|_| failed(format!("the passphrase variable {var} is not set")))?,
                ),
                None => None,
            };
            session
                .userauth_pubkey_file(&mgmt.user, None, &path, passphrase.as_deref())
                .map_err(|e| {
                    // libssh2 reports a key it cannot decrypt as a file format problem.
                    let unreadable = e.code() == ssh2::ErrorCode::Session(LIBSSH2_ERROR_FILE);
                    let why = match (unreadable, key_is_encrypted(&path), passphrase_env) {
                        (true, Some(true), None) => format!(
                            "key {} is encrypted: name the variable that holds its passphrase \
                             in `passphrase_env`",
                            path.display()
                        ),
                        (true, Some(true), Some(var)) => format!(
                            "the passphrase in {var} does not decrypt key {}",
                            path.display()
                        ),
                        (true, _, _) => {
                            format!("key {} cannot be read ({})", path.display(), e.message())
                        }
                        _ => format!("key {} was refused ({})", path.display(), e.message()),
                    };
                    failed(why)
                })
        }
        KeyRef::Env { var } => {
            let key = std::env::var(var)
                .map_err(|_| failed(format!("the key variable {var} is not set")))?;
            session
                .userauth_pubkey_memory(&mgmt.user, None, &key, None)
                .map_err(|e| failed(format!("the key in {var} was refused ({})", e.message())))
        }
        KeyRef::Agent => {
            let mut agent = session
                .agent()
                .map_err(|e| failed(format!("no ssh-agent ({})", e.message())))?;
            agent
                .connect()
                .and_then(|()| agent.list_identities())
                .map_err(|e| failed(format!("cannot reach the ssh-agent ({})", e.message())))?;
            let identities = agent
                .identities()
                .map_err(|e| failed(format!("cannot list agent keys ({})", e.message())))?;
            if identities
                .iter()
                .any(|id| agent.userauth(&mgmt.user, id).is_ok())
            {
                Ok(())
            } else {
                Err(failed(format!(
                    "none of the {} key(s) in the ssh-agent was accepted",
                    identities.len()
                )))
            }
        }
    }
}

/// libssh2's code for a key file it cannot use (unreadable, unknown format, or
/// encrypted with another passphrase).
const LIBSSH2_ERROR_FILE: i32 = -16;

/// Whether the private key file at `path` is encrypted; `None` when that cannot be
/// told. OpenSSH keys name their cipher right after the magic: an unencrypted key's
/// base64 starts with that of `openssh-key-v1\0` + `none`; PEM keys say ENCRYPTED.
fn key_is_encrypted(path: &Path) -> Option<bool> {
    const OPENSSH_MAGIC: &str = "b3BlbnNzaC1rZXktdjE";
    const OPENSSH_CIPHER_NONE: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU";
    let text = mlt_common::input::read_text(path, 1 << 20).ok()?;
    let mut lines = text.lines().map(str::trim);
    let header = lines.next()?;
    if header.contains("OPENSSH PRIVATE KEY") {
        let body = lines.next()?;
        return body
            .starts_with(OPENSSH_MAGIC)
            .then(|| !body.starts_with(OPENSSH_CIPHER_NONE));
    }
    if header.starts_with("-----BEGIN") && header.contains("PRIVATE KEY") {
        return Some(header.contains("ENCRYPTED") || text.contains("Proc-Type: 4,ENCRYPTED"));
    }
    None
}

/// `~/x` as `$HOME/x`.
pub fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_is_expanded_only_at_the_start() {
        let home = std::env::var("HOME").unwrap();
        assert_eq!(
            expand_home(Path::new("~/.ssh/id")),
            Path::new(&home).join(".ssh/id")
        );
        assert_eq!(expand_home(Path::new("/a/~/b")), Path::new("/a/~/b"));
    }
}
