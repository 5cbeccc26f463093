//! A launched transport: `endhost serve` joins the job once and then serves collectives
//! to the host's processes over a Unix socket, so a training process needs no part of
//! the transport in its own address space. The messages are in
//! [`endhost_core::daemon`].

pub mod metrics;
mod region;
mod server;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Instant;

use endhost_core::daemon::{AllreduceReply, ProbeReply, Request, TransportStatus};
use mlt_common::files::{self, Access};
use serde::Deserialize;

pub use server::{Limits, serve};

/// A blocking client of a launched transport.
pub struct Client {
    reader: BufReader<UnixStream>,
}

impl Client {
    pub fn connect(socket: &Path) -> io::Result<Client> {
        Ok(Client {
            reader: BufReader::new(UnixStream::connect(socket)?),
        })
    }

    fn request(&mut self, request: &Request) -> io::Result<()> {
        let mut line = serde_json::to_vec(request).map_err(io::Error::other)?;
        line.push(b'\n');
        self.reader.get_mut().write_all(&line)
    }

    fn reply<T: for<'de> Deserialize<'de>>(&mut self) -> io::Result<T> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the transport closed the connection",
            ));
        }
        serde_json::from_str(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    pub fn status(&mut self) -> io::Result<TransportStatus> {
        self.request(&Request::Status)?;
        self.reply()
    }

    /// Sends a class probe burst (see [`Request::Probe`]).
    pub fn probe(&mut self, class: u8, per_path: u32, to: Option<u16>) -> io::Result<ProbeReply> {
        self.request(&Request::Probe {
            class,
            per_path,
            to,
        })?;
        self.reply()
    }

    /// Allreduces `data` in place with every other rank's n-th call.
    pub fn allreduce(&mut self, data: &mut [f32], layer: u16) -> io::Result<AllreduceReply> {
        self.request(&Request::Allreduce {
            values: data.len() as u64,
            layer,
        })?;
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.reader.get_mut().write_all(&bytes)?;
        let reply: AllreduceReply = self.reply()?;
        if reply.error.is_none() {
            let mut bytes = vec![0u8; data.len() * 4];
            self.reader.read_exact(&mut bytes)?;
            for (v, b) in data.iter_mut().zip(bytes.chunks_exact(4)) {
                *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        Ok(reply)
    }
}

/// Starts `endhost` again with `args` as a process of its own (its own process group,
/// so the SSH session that started it can end), output appended to `log`. Returns its
/// pid once written to `pid_file`.
pub fn detach(args: &[std::ffi::OsString], log: &Path, pid_file: &Path) -> io::Result<u32> {
    use std::os::unix::process::CommandExt;
    // Never through a link, and only this user's file: the log is in the transport's
    // own directory, but a file is what it must be.
    let out = files::open_append(log, Access::Private).map_err(io::Error::other)?;
    let context =
        |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let exe = std::env::current_exe().map_err(context("cannot find endhost's own path".into()))?;
    let child = std::process::Command::new(&exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .map_err(context(format!("cannot run {}", exe.display())))?;
    write_pid(pid_file, child.id())
        .map_err(context(format!("cannot write {}", pid_file.display())))?;
    Ok(child.id())
}

/// Writes `pid` to `path` atomically, through a new temporary file of an unguessable
/// name (a detaching parent and the transport it started both write the pid; neither
/// can take the other's temporary file away, nor can anyone plant one).
pub fn write_pid(path: &Path, pid: u32) -> io::Result<()> {
    files::write(path, format!("{pid}\n").as_bytes(), Access::Readable).map_err(io::Error::other)
}

/// The pid in `pid_file`, if that process is still a running `endhost serve`.
pub fn running(pid_file: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let serving = args.iter().any(|a| *a == b"serve")
        && args
            .first()
            .is_some_and(|exe| exe.ends_with(b"endhost") || exe.ends_with(b"endhost (deleted)"));
    // A zombie has an empty cmdline: it is not running.
    serving.then_some(pid)
}

/// Stops the transport `pid_file` names: SIGTERM, then SIGKILL after `grace`. Returns
/// the pid stopped, or None if none was running. Removes the pid file either way.
pub fn stop(pid_file: &Path, grace: std::time::Duration) -> io::Result<Option<u32>> {
    let Some(pid) = running(pid_file) else {
        let _ = std::fs::remove_file(pid_file);
        return Ok(None);
    };
    // The process's start time tells it from a later one that reuses its pid.
    let started = process_state(pid).map(|(_, started)| started);
    let ended = || match process_state(pid) {
        None => true,
        Some((state, start)) => matches!(state, 'Z' | 'X') || Some(start) != started,
    };
    let signal = |sig| {
        // SAFETY: kill(2) on a pid we just checked is an endhost serve.
        if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
        Ok(())
    };
    let wait_for_end = |limit: std::time::Duration| {
        let deadline = Instant::now() + limit;
        while !ended() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        ended()
    };
    signal(libc::SIGTERM)?;
    if !wait_for_end(grace) {
        signal(libc::SIGKILL)?;
        if !wait_for_end(std::time::Duration::from_secs(5)) {
            return Err(io::Error::other(format!(
                "process {pid} did not end after SIGKILL"
            )));
        }
    }
    let _ = std::fs::remove_file(pid_file);
    Ok(Some(pid))
}

/// Process `pid`'s state letter and start time (clock ticks after boot), from
/// /proc/PID/stat; None when there is no such process. `stop` waits for state Z (or X,
/// or the process gone), not for the cmdline to empty: an exiting process drops its
/// memory, and with it its cmdline, before it closes its files, and a transport started
/// next must find the old one's ports free.
fn process_state(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold any byte:
    // state is the first of them, the start time the twentieth.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let started = fields.nth(18)?.parse().ok()?;
    Some((state, started))
}

/// Waits until the transport behind `socket` answers, or its process (in `pid_file`)
/// is gone, or `timeout` passes.
pub fn wait_ready(
    socket: &Path,
    pid_file: Option<&Path>,
    timeout: std::time::Duration,
) -> Result<TransportStatus, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match Client::connect(socket).and_then(|mut c| c.status()) {
            Ok(status) => return Ok(status),
            Err(e) => e,
        };
        if let Some(pid_file) = pid_file
            && running(pid_file).is_none()
        {
            return Err(format!(
                "the transport is not running (no live process in {})",
                pid_file.display()
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the transport did not answer on {} within {} s: {last}",
                socket.display(),
                timeout.as_secs()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_child_is_a_zombie_until_reaped_and_keeps_its_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let (state, started) = process_state(pid).expect("a running child");
        // Running, sleeping, or (on a loaded machine, mid-exec) in disk sleep: alive.
        assert!(matches!(state, 'S' | 'R' | 'D'), "{state}");
        // SAFETY: kill(2) on our own child, which is not reaped yet.
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while process_state(pid).is_some_and(|(s, _)| s != 'Z') && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(process_state(pid), Some(('Z', started)));
        child.wait().unwrap();
        assert_eq!(process_state(pid), None);
    }
}
