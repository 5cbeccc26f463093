//! Emulated switches. Each sits behind a real OpenSSH server and keeps its
//! configuration on disk, in its own directory:
//!
//! - SONiC and Cumulus are Linux: their login shell is a real shell, with the vendor
//!   commands (`sonic-cfggen`, `config`, `systemd-run`, `systemctl`, `sudo`; `nv`) put
//!   first on its PATH. Those commands are links to one small binary,
//!   `mltctl-lab-switch`, which runs the command it was called as.
//! - EOS and Onyx log in to their CLI: sshd's ForceCommand runs the switch's `cli`,
//!   which reads commands from standard input (or the one exec'd command).
//!
//! The semantics follow the vendors' documentation (see each module); where mltctl's
//! own parsers could be reused, they are not — the emulation is an independent model.
//!
//! Faults a test (or an admin rehearsing) can inject, one per line of
//! `<device>/faults`:
//! - `reject: TEXT` — a configuration command containing TEXT fails;
//! - `ignore: TEXT` — a configuration command containing TEXT is accepted but does
//!   nothing (a switch that silently ignores a setting);
//! - `drop-after-commit` — after a commit, the switch's SSH server dies, cutting the
//!   connection and refusing new ones (the revert timer keeps running);
//! - `print: TEXT` — the switch prints TEXT (`\n` for a new line) after its running
//!   configuration, whatever its configuration holds: a misbehaving or compromised
//!   device;
//! - `stderr: BYTES` — with every answer the switch prints about BYTES bytes of
//!   warnings on its standard error, before its output: a chatty device (more than an
//!   SSH window's worth stalls a client that reads standard output to its end first);
//! - `pause: TEXT` — a command (or CLI script) containing TEXT first creates the file
//!   `<device>/paused`, then waits (up to 60 s) until `<device>/resume` exists, then
//!   runs: a test can act while a change is at a known step.

pub mod counters;
pub mod eos;
pub mod nvue;
pub mod onyx;
pub mod sonic;

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The commands an emulated switch has.
pub const COMMANDS: &[&str] = &[
    "cli",
    "nv",
    "sonic-cfggen",
    "config",
    "sudo",
    "systemd-run",
    "systemctl",
    "show",
];

const TIMER_FLAG: &str = "--emulator-timer";
/// The file that marks a switch with a data plane.
const DATAPLANE: &str = "dataplane";

/// Runs the command this process was started as and returns its exit status. A
/// switch's `bin/NAME` is a link to the emulator's binary, so the name it was called by
/// is the command; called by its own name, the first argument is (or a timer's flag).
pub fn run_as_called(argv: &[String]) -> i32 {
    run(&called_as(argv))
}

/// The command line `argv` (the program's name first) stands for.
fn called_as(argv: &[String]) -> Vec<String> {
    let called = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .filter(|n| COMMANDS.contains(n));
    match called {
        Some(name) => std::iter::once(name.to_string())
            .chain(argv[1..].iter().cloned())
            .collect(),
        None => argv.get(1..).unwrap_or_default().to_vec(),
    }
}

/// Runs one command of an emulated switch (`args[0]` is its name, or a timer's flag)
/// and returns its exit status.
fn run(args: &[String]) -> i32 {
    if args.first().map(String::as_str) == Some(TIMER_FLAG) {
        return run_timer(&args[1..]);
    }
    let Some(name) = args.first().filter(|n| COMMANDS.contains(&n.as_str())) else {
        eprintln!("not a command of an emulated switch: {args:?}");
        return 127;
    };
    let Some(dir) = std::env::var_os("MLT_DEVICE") else {
        eprintln!("MLT_DEVICE is not set (sshd sets it for an emulated switch)");
        return 127;
    };
    let device = Device::at(Path::new(&dir));
    let mut stdin = String::new();
    if name == "cli" && std::env::var_os("SSH_ORIGINAL_COMMAND").is_none() {
        std::io::stdin()
            .read_to_string(&mut stdin)
            .expect("stdin is readable");
    }
    let command = std::env::var("SSH_ORIGINAL_COMMAND").unwrap_or_else(|_| args.join(" "));
    device.pause_if_asked(&format!("{command}\n{stdin}"));
    let mut out = device.run(args, &stdin);
    let reads = ["show running-config", "sonic-cfggen -d", "nv config show"];
    if reads
        .iter()
        .any(|r| format!("{command}\n{stdin}").contains(r))
    {
        for text in device.faults().print {
            out.stdout.push_str(&text);
        }
    }
    let warning = "warning: this emulated switch was asked to be chatty\n";
    let chatter = warning.repeat(device.faults().stderr_bytes.div_ceil(warning.len()));
    eprint!("{chatter}");
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    std::io::stdout().flush().ok();
    if out.drop_connection {
        device.kill_sshd();
    }
    out.status
}

/// What one command printed and how it ended.
#[derive(Debug, Default)]
pub struct Reply {
    pub stdout: String,
    pub stderr: String,
    pub status: i32,
    /// Die (with the SSH server) once the reply is out.
    pub drop_connection: bool,
}

impl Reply {
    pub fn out(text: impl Into<String>) -> Reply {
        Reply {
            stdout: text.into(),
            ..Reply::default()
        }
    }

    pub fn fail(status: i32, message: impl Into<String>) -> Reply {
        Reply {
            stderr: message.into(),
            status,
            ..Reply::default()
        }
    }
}

/// The faults a test injected.
#[derive(Debug, Default)]
pub struct Faults {
    reject: Vec<String>,
    ignore: Vec<String>,
    pause: Vec<String>,
    print: Vec<String>,
    stderr_bytes: usize,
    pub drop_after_commit: bool,
}

impl Faults {
    pub fn rejects(&self, command: &str) -> bool {
        self.reject.iter().any(|t| command.contains(t.as_str()))
    }

    pub fn ignores(&self, command: &str) -> bool {
        self.ignore.iter().any(|t| command.contains(t.as_str()))
    }
}

/// One emulated switch: its directory and vendor.
pub struct Device {
    pub dir: PathBuf,
    pub vendor: String,
}

impl Device {
    pub fn at(dir: &Path) -> Device {
        let vendor = fs::read_to_string(dir.join("vendor")).expect("the device has a vendor");
        Device {
            dir: dir.to_path_buf(),
            vendor: vendor.trim().to_string(),
        }
    }

    /// Creates an emulated switch of `vendor` in `dir` running `initial` — a
    /// configuration in the vendor's own form. `dir/bin/` holds its commands: links to
    /// `emulator`, the `mltctl-lab-switch` binary (an absolute path). Links, not scripts
    /// that exec it: a command then costs one small program's start, not a shell's too.
    pub fn install(dir: &Path, vendor: &str, initial: &str, emulator: &Path) -> Device {
        assert!(emulator.is_absolute(), "{} is absolute", emulator.display());
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::write(dir.join("vendor"), vendor).unwrap();
        for name in COMMANDS {
            let command = dir.join("bin").join(name);
            let _ = fs::remove_file(&command);
            std::os::unix::fs::symlink(emulator, &command).unwrap();
        }
        let device = Device::at(dir);
        match vendor {
            "eos" => eos::install(&device, initial),
            "onyx" => onyx::install(&device, initial),
            "cumulus" => nvue::install(&device, initial),
            "sonic" => sonic::install(&device, initial),
            other => panic!("no emulation for {other}"),
        }
        device
    }

    /// What the switch runs now, as it would print it.
    pub fn running(&self) -> String {
        match self.vendor.as_str() {
            "eos" => eos::running(self),
            "onyx" => onyx::running(self),
            "cumulus" => nvue::running(self),
            "sonic" => sonic::running(self),
            other => panic!("no emulation for {other}"),
        }
    }

    /// The file that holds what the switch runs; it changes when that does.
    pub fn running_file(&self) -> PathBuf {
        self.dir.join(match self.vendor.as_str() {
            "cumulus" => "applied",
            "sonic" => "config_db.json",
            _ => "running-config",
        })
    }

    /// The queueing the switch runs, as its data plane enforces it.
    pub fn qos(&self) -> crate::qos::SwitchQos {
        match self.vendor.as_str() {
            "eos" => eos::qos(self),
            "sonic" => sonic::qos(self),
            "cumulus" => nvue::qos(self),
            "onyx" => onyx::qos(self),
            _ => crate::qos::SwitchQos::default(),
        }
    }

    /// What the switch would run after a reboot.
    pub fn startup(&self) -> String {
        let file = match self.vendor.as_str() {
            "eos" | "onyx" => "startup-config",
            "cumulus" => "startup",
            _ => "startup.json",
        };
        self.read(file).unwrap_or_default()
    }

    /// Sessions, checkpoints, timers and pending revisions a finished change should
    /// not leave behind.
    pub fn leftovers(&self) -> Vec<String> {
        self.state()
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| {
                ["sessions/", "checkpoints/", "timers/"]
                    .iter()
                    .any(|dir| name.starts_with(dir))
                    || name == "pending"
                    || name == "confirm-previous"
            })
            .collect()
    }

    /// Every file of the switch's state, for byte-for-byte comparisons (as text, so
    /// that a failed comparison reads well).
    pub fn state(&self) -> Vec<(String, String)> {
        let mut files = Vec::new();
        collect(&self.dir, &self.dir, &mut files);
        files.retain(|(name, _)| {
            !name.starts_with("bin/")
                && ![
                    "lock",
                    "sshd.pid",
                    "sshd.log",
                    "sshd_config",
                    "faults",
                    "paused",
                    "resume",
                    DATAPLANE,
                    "dataplane.log",
                ]
                .contains(&name.as_str())
                && !name.starts_with("ssh_host")
        });
        files
    }

    /// Gives the switch a data plane: from its next command on, the network namespace
    /// its commands run in forwards by the routes it runs (see [`crate::dataplane`]).
    pub fn enable_dataplane(&self) {
        self.write(DATAPLANE, "");
    }

    /// Makes the kernel of this namespace forward by the routes the switch runs, if it
    /// has a data plane; a failure is kept in `dataplane.log`.
    fn sync_dataplane(&self) {
        if !self.dir.join(DATAPLANE).exists() {
            return;
        }
        // A lab switch's commands run in its own namespace; never touch this machine's.
        let namespace = |pid: &str| fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        if namespace("self") == namespace("1") {
            self.write(
                "dataplane.log",
                "not in the switch's network namespace: its routes were not installed\n",
            );
            return;
        }
        let routes = crate::dataplane::running_routes(&self.vendor, &self.running());
        match crate::dataplane::install(&routes) {
            Ok(()) => {
                self.remove("dataplane.log");
            }
            Err(e) => self.write("dataplane.log", &format!("{e}\n")),
        }
    }

    pub fn set_faults(&self, lines: &[&str]) {
        fs::write(self.dir.join("faults"), lines.join("\n")).unwrap();
    }

    pub fn faults(&self) -> Faults {
        let text = fs::read_to_string(self.dir.join("faults")).unwrap_or_default();
        let mut faults = Faults::default();
        for line in text.lines() {
            if let Some(t) = line.strip_prefix("reject: ") {
                faults.reject.push(t.to_string());
            } else if let Some(t) = line.strip_prefix("ignore: ") {
                faults.ignore.push(t.to_string());
            } else if let Some(t) = line.strip_prefix("print: ") {
                faults.print.push(t.replace("\\n", "\n"));
            } else if let Some(bytes) = line
                .strip_prefix("stderr: ")
                .and_then(|t| t.trim().parse().ok())
            {
                faults.stderr_bytes = bytes;
            } else if let Some(t) = line.strip_prefix("pause: ") {
                faults.pause.push(t.to_string());
            } else if line.trim() == "drop-after-commit" {
                faults.drop_after_commit = true;
            }
        }
        faults
    }

    /// The `pause` fault: waits for the test's `resume` when `command` asks for it.
    fn pause_if_asked(&self, command: &str) {
        if !self
            .faults()
            .pause
            .iter()
            .any(|t| command.contains(t.as_str()))
        {
            return;
        }
        fs::write(self.dir.join("paused"), command).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !self.dir.join("resume").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn read(&self, name: &str) -> Option<String> {
        fs::read_to_string(self.dir.join(name)).ok()
    }

    /// Replaces a state file atomically.
    pub fn write(&self, name: &str, text: &str) {
        let path = self.dir.join(name);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).unwrap();
        }
        let partial = path.with_extension("partial");
        fs::write(&partial, text).unwrap();
        fs::rename(&partial, &path).unwrap();
    }

    pub fn remove(&self, name: &str) -> bool {
        fs::remove_file(self.dir.join(name)).is_ok()
    }

    /// Runs one command with the switch's state locked.
    pub fn run(&self, argv: &[String], stdin: &str) -> Reply {
        let _lock = self.lock();
        let reply = self.run_locked(argv, stdin);
        // Under the lock: what the data plane forwards by is what the switch runs now.
        self.sync_dataplane();
        reply
    }

    fn run_locked(&self, argv: &[String], stdin: &str) -> Reply {
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        match args.as_slice() {
            ["sudo", rest @ ..] if rest.first().is_some_and(|c| COMMANDS.contains(c)) => {
                let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
                self.run_locked(&rest, stdin)
            }
            ["cli", ..] => {
                let script = std::env::var("SSH_ORIGINAL_COMMAND")
                    .map(|c| format!("{c}\n"))
                    .unwrap_or_else(|_| stdin.to_string());
                match self.vendor.as_str() {
                    "eos" => eos::cli(self, &script),
                    "onyx" => onyx::cli(self, &script),
                    _ => Reply::fail(127, "cli: not a CLI switch\n"),
                }
            }
            ["nv", rest @ ..] => nvue::nv(self, rest),
            ["sonic-cfggen" | "config" | "systemd-run" | "systemctl", ..] => {
                sonic::command(self, &args)
            }
            ["show", ..] if self.vendor == "sonic" => sonic::command(self, &args),
            ["timer-expired", name] => match self.vendor.as_str() {
                "eos" => eos::timer_expired(self, name),
                "cumulus" => nvue::timer_expired(self),
                _ => Reply::fail(1, "no such timer action\n"),
            },
            _ => Reply::fail(127, format!("{}: command not found\n", argv.join(" "))),
        }
    }

    fn lock(&self) -> File {
        let file = File::create(self.dir.join("lock")).unwrap();
        // SAFETY: flock on a file descriptor we own; blocks until the lock is ours.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock");
        file
    }

    /// Starts a timer: after `seconds`, `action` runs unless [`Device::cancel_timer`]
    /// removed the timer first.
    pub fn arm_timer(&self, name: &str, seconds: u64, action: &[&str]) {
        let token = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let record = serde_json::json!({"token": token, "action": action});
        self.write(&format!("timers/{name}.json"), &record.to_string());
        // The timer outlives this command, as a switch's timers outlive a session; init
        // reaps it.
        #[allow(clippy::zombie_processes)]
        Command::new(std::env::current_exe().unwrap())
            .args([TIMER_FLAG, self.dir.to_str().unwrap(), name, &token])
            .arg(seconds.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("the timer process starts");
    }

    /// Stops a timer; false if there was none.
    pub fn cancel_timer(&self, name: &str) -> bool {
        self.remove(&format!("timers/{name}.json"))
    }

    pub fn timer_pending(&self, name: &str) -> bool {
        self.dir.join(format!("timers/{name}.json")).exists()
    }

    /// The switch goes away: its SSH server first (so that nobody can reconnect), then
    /// the session this command runs in.
    fn kill_sshd(&self) {
        let listener: i32 = self
            .read("sshd.pid")
            .and_then(|p| p.trim().parse().ok())
            .expect("sshd wrote its pid file");
        // SAFETY: sending signals to the processes of this emulated switch.
        unsafe { libc::kill(listener, libc::SIGKILL) };
        let mut pid = parent_of(std::process::id() as i32);
        while pid > 1 && pid != listener {
            let next = parent_of(pid);
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.starts_with("sshd") {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            pid = next;
        }
    }
}

fn parent_of(pid: i32) -> i32 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces; fields after its closing parenthesis are fixed.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(0)
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .to_string();
        if path.is_dir() && !path.is_symlink() {
            collect(root, &path, out);
        } else if path.is_file() && !path.is_symlink() {
            let bytes = fs::read(&path).unwrap();
            out.push((
                name,
                String::from_utf8(bytes).expect("state files are text"),
            ));
        }
    }
}

/// A timer process: `DIR NAME TOKEN SECONDS`.
fn run_timer(args: &[String]) -> i32 {
    let [dir, name, token, seconds] = args else {
        return 2;
    };
    let dir = Path::new(dir);
    let file = format!("timers/{name}.json");
    let due = std::time::Instant::now() + Duration::from_secs(seconds.parse().unwrap_or(0));
    // A cancelled timer (or a removed switch) ends the process early.
    while std::time::Instant::now() < due {
        if !dir.join(&file).exists() {
            return 0;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let device = Device::at(dir);
    let _lock = device.lock();
    let Some(record) = device.read(&file) else {
        return 0;
    };
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    if record["token"] != token.as_str() {
        return 0;
    }
    device.remove(&file);
    let action: Vec<String> = record["action"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let status = device.run_locked(&action, "").status;
    device.sync_dataplane();
    status
}

/// `hh:mm:ss`, `Ns`, `Nm`, `Nh` or bare minutes, in seconds.
pub fn duration_seconds(text: &str) -> Option<u64> {
    if let [h, m, s] = text.split(':').collect::<Vec<_>>().as_slice() {
        return Some(
            h.parse::<u64>().ok()? * 3600 + m.parse::<u64>().ok()? * 60 + s.parse::<u64>().ok()?,
        );
    }
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number.parse().ok()?;
    match unit {
        "s" => Some(n),
        "m" | "" => Some(n * 60),
        "h" => Some(n * 3600),
        _ => None,
    }
}

/// Expands `1-3,5` into 1, 2, 3, 5.
/// A number list as switches take it; like a switch, refuses numbers past what any of
/// its lists hold (a few thousand ports, VLANs or values).
pub fn numbers(list: &str) -> Option<Vec<u32>> {
    const LARGEST: u32 = 4095;
    let mut out = Vec::new();
    for part in list.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => (part.parse().ok()?, part.parse().ok()?),
        };
        if b > LARGEST {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_command_is_the_name_it_was_called_by_or_else_the_first_argument() {
        let linked = line(&["/lab/devices/leaf1/bin/nv", "config", "show"]);
        assert_eq!(called_as(&linked), line(&["nv", "config", "show"]));
        let on_path = line(&["config", "apply-patch", "/tmp/p.json"]);
        assert_eq!(called_as(&on_path), on_path);
        let by_own_name = line(&["/usr/bin/mltctl-lab-switch", "cli"]);
        assert_eq!(called_as(&by_own_name), line(&["cli"]));
        let timer = line(&["mltctl-lab-switch", TIMER_FLAG, "/d", "t", "tok", "60"]);
        assert_eq!(called_as(&timer)[0], TIMER_FLAG);
        assert!(called_as(&line(&["mltctl-lab-switch"])).is_empty());
        assert!(called_as(&[]).is_empty());
    }
}
