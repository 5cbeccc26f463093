//! The lab's forwarder: one process and one thread for every switch's data plane
//! ([`switch`]). Each switch has a raw socket on every data port, in its namespace; the
//! thread reads every port in batches, routes, queues each frame on its egress port as
//! the switch's running configuration says ([`crate::queueing`]: DSCP → queue,
//! RED/ECN, strict priority, the port rate), and sends what left the queues in
//! batches. GSO super-frames cross whole and are queued segment by segment
//! ([`superframe`]), so the lab carries its line rate on a small machine while every
//! frame the wire would carry is queued, marked or dropped on its own. It re-reads a
//! switch's configuration when it changes and writes the queues' counters to
//! `counters/NAME.json` for `lab status`. A fault can be set on it: the hosts' cables
//! losing a share of the frames (`lab loss`, [`crate::fabric::loss_file`]).
//!
//! Time: the queues run on the ports' model clock, every arrival and departure at its
//! exact time in order (as [`crate::arrivals`] runs them); a thread wakes at most
//! every [`TICK`] and then does all that fell due, so a frame leaves up to a tick late
//! in real time but its queueing is as exact as in the simulation. A thread per core,
//! each with its share of the switches: a frame sent to a switch of the same thread
//! is in that switch's socket when the thread looks; the kernel's work of delivering
//! frames (a host's TCP receive among it) is shared by the cores.

mod sockets;
mod superframe;
mod switch;

use std::fs;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use super::fabric::{LabError, Member, layout, loss, qos_off_file};
use sockets::Inbox;
use switch::{PortShape, Switch};

/// Bytes one port's queues may hold together unless `lab up --buffer` says: a
/// generous buffer (the lab does not model how a switch shares its buffer between
/// ports; each port may use all of it).
pub const PORT_BUFFER_BYTES: u64 = 4 << 20;
/// Real-time priority of the forwarder: a port's clock must not wait for the senders
/// and receivers this machine also runs (low, so that sshd and the kernel's own
/// real-time threads go first).
const THREAD_PRIORITY: libc::c_int = 10;
/// The least time between two rounds of work: what fell due in between is done
/// together (a wake-up per frame would cost more than the frames). 100 µs, not 50:
/// on two cores the wake-ups took the CPU the hosts need (gloo's 4 MiB ring through
/// the lab, alternating runs: 77.4% and 72.9% of line rate at 50 µs, 83.1% and 82.5%
/// at 100 µs); the queueing keeps its exact model time either way.
pub const TICK: Duration = Duration::from_micros(100);
/// The longest the thread sleeps with nothing to do.
const IDLE: Duration = Duration::from_millis(20);

/// Runs the forwarder of the lab in `dir` until it is killed: a thread per core (at
/// most one per switch), each with its share of the switches.
pub fn run(dir: &Path) -> Result<(), LabError> {
    let layout = layout(dir)?;
    let shape = PortShape {
        rate: layout.rate_mbps.saturating_mul(1_000_000),
        buffer_bytes: layout.buffer_bytes.unwrap_or(PORT_BUFFER_BYTES),
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(layout.switches.len())
        .max(1);
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let members: Vec<Member> = (layout.switches.iter().skip(t))
                .step_by(threads)
                .cloned()
                .collect();
            let hosts = layout.hosts.clone();
            let dir = dir.to_path_buf();
            std::thread::spawn(move || {
                let mut switches = Vec::new();
                for member in &members {
                    // A switch's sockets are opened in its namespace and stay bound to it.
                    let cabled: Vec<&Member> = (hosts.iter())
                        .filter(|h| h.cable.as_ref().is_some_and(|c| c.leaf == member.name))
                        .collect();
                    let opened = enter_namespace(&member.namespace).and_then(|()| {
                        let device = dir.join("devices").join(&member.name);
                        let counters = dir.join("counters").join(format!("{}.json", member.name));
                        let mut switch =
                            Switch::open(&device, &counters, &qos_off_file(&dir), shape)?;
                        switch.watch_hosts(&member.namespace, &cabled)?;
                        Ok(switch)
                    });
                    match opened {
                        Ok(switch) => switches.push(switch),
                        // A switch without its data plane is no lab: the whole forwarder
                        // ends, and `lab status` shows it.
                        Err(e) => {
                            eprintln!("mltctl lab forward: {}: {e}", member.name);
                            std::process::exit(1);
                        }
                    }
                }
                real_time_priority();
                forward(&mut switches, &dir)
            })
        })
        .collect();
    for worker in workers {
        match worker.join() {
            Ok(result) => result?,
            Err(_) => return Err(LabError::Refused("a forwarder thread panicked".into())),
        }
    }
    Ok(())
}

/// Forwards for `switches` of the lab in `dir` until the process ends.
fn forward(switches: &mut [Switch], dir: &Path) -> Result<(), LabError> {
    let clock = Instant::now();
    let since_start = |at: Instant| at.duration_since(clock).as_nanos() as u64;
    let mut inbox = Inbox::new();
    let mut waiting: Vec<libc::pollfd> = switches
        .iter()
        .flat_map(Switch::sockets)
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut last_check = clock;
    let mut last_stats = clock;
    loop {
        let round = Instant::now();
        if round - last_check >= Duration::from_millis(200) {
            let loss = loss(dir);
            for switch in switches.iter_mut() {
                switch.reload_if_changed();
                switch.follow_host_nics();
                switch.set_loss(loss);
            }
            last_check = round;
        }
        if round - last_stats >= Duration::from_millis(500) {
            switches.iter().for_each(Switch::write_counters);
            last_stats = round;
        }
        let now = since_start(round);
        // Which sockets hold frames: one call, not a read of each.
        poll(&mut waiting, 0);
        let mut ready = waiting.iter().map(|p| p.revents & libc::POLLIN != 0);
        for switch in switches.iter_mut() {
            let mine: Vec<bool> = ready.by_ref().take(switch.sockets().count()).collect();
            switch.receive(&mut inbox, now, &mine);
        }
        for switch in switches.iter_mut() {
            switch.advance(now);
            switch.transmit(now);
        }
        // At least a tick between rounds: what comes meanwhile waits in the sockets.
        let busy = round.elapsed();
        if busy < TICK {
            std::thread::sleep(TICK - busy);
        }
        let now = since_start(Instant::now());
        let next = switches.iter().filter_map(Switch::next_event).min();
        let wait = next.map_or(IDLE.as_nanos() as u64, |at| at.saturating_sub(now));
        if wait > 0 {
            poll(&mut waiting, wait.min(IDLE.as_nanos() as u64));
        }
    }
}

/// Waits up to `nanos` for a frame on any socket; `revents` says which have one.
fn poll(sockets: &mut [libc::pollfd], nanos: u64) {
    let timeout = libc::timespec {
        tv_sec: (nanos / 1_000_000_000) as libc::time_t,
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid array of pollfd for its length; no signal mask.
    let ready = unsafe {
        libc::ppoll(
            sockets.as_mut_ptr(),
            sockets.len() as libc::nfds_t,
            &timeout,
            std::ptr::null(),
        )
    };
    if ready <= 0 {
        return;
    }
    for pollfd in sockets.iter() {
        if pollfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            // A port went down: reading the error clears it (or poll would report it
            // again at once, forever).
            let mut error: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: SO_ERROR into an int we own.
            unsafe {
                libc::getsockopt(
                    pollfd.fd,
                    libc::SOL_SOCKET,
                    libc::SO_ERROR,
                    (&mut error as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
        }
    }
}

/// Runs the calling thread under SCHED_FIFO: pacing then follows the port's clock even
/// on a busy machine (without it, a busy sender delayed the forwarder enough to
/// multiply the losses at a port loaded to 0.9 several times over;
/// docs/src/results/lab.md). The kernel's real-time throttling still leaves others 5%
/// of each core. Refused (no CAP_SYS_NICE, a cgroup without real-time budget): it says so and
/// forwards anyway.
fn real_time_priority() {
    let param = libc::sched_param {
        sched_priority: THREAD_PRIORITY,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!(
            "mltctl lab forward: no real-time priority ({}); pacing will follow this \
             machine's load",
            std::io::Error::last_os_error()
        );
    }
}

fn enter_namespace(namespace: &str) -> Result<(), LabError> {
    let path = Path::new("/run/netns").join(namespace);
    let file = fs::File::open(&path).map_err(|source| LabError::Io {
        what: format!("cannot open {}", path.display()),
        source,
    })?;
    // SAFETY: setns on a namespace file we hold open; it changes only this thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(LabError::Io {
            what: format!("cannot enter {namespace}"),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}
