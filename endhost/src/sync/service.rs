//! The controller service: workers connect over TCP and exchange JSON lines with it.
//!
//! The messages are in [`endhost_core::sync::protocol`]. A worker whose connection
//! closes leaves every decision from then on.
//!
//! A connection must say hello within [`HELLO_TIMEOUT`] and, when the controller has a
//! token, present it; lines are bounded ([`super::lines`]); anything else closes it.
//! The accept loop outlives a full file table (EMFILE): it waits and goes on.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use endhost_core::sync::policy::Policy;
use endhost_core::sync::protocol::{FromWorker, ToWorker};
use endhost_core::sync::{Launch, WorkerId};
use serde::Serialize;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::lines::next_line;

/// How long a new connection may take to say hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Who may join: workers presenting this shared token (none: anyone who connects).
#[derive(Clone, Default)]
pub struct Access {
    pub token: Option<String>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token itself, in a log or an error.
        let token = if self.token.is_some() { "set" } else { "none" };
        f.debug_struct("Access").field("token", &token).finish()
    }
}

impl Access {
    fn admits(&self, presented: Option<&str>) -> bool {
        match (&self.token, presented) {
            (None, _) => true,
            (Some(token), Some(given)) => constant_time_eq(token.as_bytes(), given.as_bytes()),
            (Some(_), None) => false,
        }
    }
}

/// Equality that takes as long for a near miss as for a wild guess.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A launch as the controller logs it: when, on its clock.
#[derive(Clone, Debug, Serialize)]
pub struct Logged<'a> {
    pub at_seconds: f64,
    #[serde(flatten)]
    pub launch: &'a Launch,
}

enum Event {
    Joined {
        rank: WorkerId,
        bandwidth: f64,
        tx: UnboundedSender<ToWorker>,
        connection: u64,
    },
    Message {
        connection: u64,
        message: FromWorker,
    },
    Gone {
        connection: u64,
    },
}

/// Serves workers on `listener` with `policy`, deciding after every ready report and every
/// `delta_t` without one (Algorithm 3's loop). `on_launch` sees every decision. Runs until
/// the task is dropped.
pub async fn serve(
    listener: TcpListener,
    access: Access,
    mut policy: Box<dyn Policy>,
    delta_t: Duration,
    mut on_launch: impl FnMut(f64, &Launch) + Send,
) -> std::io::Result<()> {
    let (events_tx, mut events) = unbounded_channel();
    tokio::spawn(accept(listener, access, events_tx));
    let start = Instant::now();
    let clock = move || start.elapsed().as_secs_f64();
    let mut workers: HashMap<u64, (WorkerId, UnboundedSender<ToWorker>)> = HashMap::new();
    loop {
        let deadline = tokio::time::Instant::now() + delta_t;
        // Wait for a ready report (or a departure, which may unblock an all reduce) for at
        // most Δt; other messages are handled on the way.
        loop {
            let event = match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(event)) => event,
                Ok(None) => return Ok(()),
                Err(_) => break,
            };
            if handle(event, &mut *policy, &mut workers, clock()) {
                break;
            }
        }
        let now = clock();
        for launch in policy.decide(now) {
            on_launch(now, &launch);
            for (rank, tx) in workers.values() {
                if launch.members.contains(rank) {
                    let _ = tx.send(ToWorker::Launch(launch.clone()));
                }
            }
        }
    }
}

/// Applies one event; true when it calls for a decision.
fn handle(
    event: Event,
    policy: &mut dyn Policy,
    workers: &mut HashMap<u64, (WorkerId, UnboundedSender<ToWorker>)>,
    now: f64,
) -> bool {
    match event {
        Event::Joined {
            rank,
            bandwidth,
            tx,
            connection,
        } => {
            if workers.values().any(|(r, _)| *r == rank) {
                let _ = tx.send(ToWorker::Error(format!("rank {rank} is already connected")));
                return false;
            }
            policy.join(rank, bandwidth, now);
            workers.insert(connection, (rank, tx));
            false
        }
        Event::Message {
            connection,
            message,
        } => {
            let Some((rank, _)) = workers.get(&connection) else {
                return false;
            };
            match message {
                FromWorker::Ready {
                    compute_seconds,
                    bandwidth_bps,
                } => {
                    policy.ready(*rank, bandwidth_bps, compute_seconds);
                    true
                }
                FromWorker::Done { .. } => {
                    policy.roster_mut().resume(*rank, now);
                    false
                }
                FromWorker::Hello { .. } => false,
            }
        }
        Event::Gone { connection } => match workers.remove(&connection) {
            Some((rank, _)) => {
                policy.leave(rank);
                true
            }
            None => false,
        },
    }
}

/// Accepts connections for as long as the service runs. A failed accept (most often a
/// full file table: EMFILE, ENFILE) is logged once per streak and retried after a pause
/// that grows to a second, so the controller neither spins nor stops.
async fn accept(listener: TcpListener, access: Access, events: UnboundedSender<Event>) {
    let mut next = 0u64;
    let mut pause = Duration::ZERO;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                pause = Duration::ZERO;
                let _ = stream.set_nodelay(true);
                next += 1;
                tokio::spawn(connection(stream, next, access.clone(), events.clone()));
            }
            Err(e) => {
                if pause.is_zero() {
                    eprintln!("controller: cannot accept a connection ({e}); retrying");
                }
                pause = (pause * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                tokio::time::sleep(pause).await;
            }
        }
        if events.is_closed() {
            return;
        }
    }
}

async fn connection(stream: TcpStream, id: u64, access: Access, events: UnboundedSender<Event>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let (tx, mut outgoing): (_, UnboundedReceiver<ToWorker>) = unbounded_channel();
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            let closing = matches!(message, ToWorker::Error(_));
            let mut line = serde_json::to_vec(&message).expect("serializable");
            line.push(b'\n');
            if write.write_all(&line).await.is_err() || closing {
                break;
            }
        }
    });
    let refuse = |tx: UnboundedSender<ToWorker>, why: String| {
        let _ = tx.send(ToWorker::Error(why));
    };
    // The hello, under its deadline and the token check.
    let hello = tokio::time::timeout(HELLO_TIMEOUT, next_line(&mut reader)).await;
    let joined = match hello {
        Err(_) => Err(format!("no hello within {} s", HELLO_TIMEOUT.as_secs())),
        Ok(Err(e)) => Err(format!("bad message: {e}")),
        Ok(Ok(None)) => Err(String::new()),
        Ok(Ok(Some(line))) => match serde_json::from_str::<FromWorker>(&line) {
            Ok(FromWorker::Hello {
                rank,
                bandwidth_bps,
                token,
            }) if access.admits(token.as_deref()) => Ok((rank, bandwidth_bps)),
            Ok(FromWorker::Hello { .. }) => Err("wrong or missing token".into()),
            Ok(_) => Err("say hello first".into()),
            Err(e) => Err(format!("bad message: {e}")),
        },
    };
    match joined {
        Ok((rank, bandwidth)) => {
            let joined = Event::Joined {
                rank,
                bandwidth,
                tx,
                connection: id,
            };
            if events.send(joined).is_ok() {
                relay(&mut reader, id, &events).await;
            }
            let _ = events.send(Event::Gone { connection: id });
        }
        Err(why) if why.is_empty() => drop(tx),
        Err(why) => refuse(tx, why),
    }
    // Every sender is gone now (ours above, the service's when the worker left), so the
    // writer ends once it has sent what was queued.
    let _ = writer.await;
}

/// Passes a joined worker's messages on until it closes or sends something unreadable
/// (which the service answers by dropping it: its sender goes, the connection closes).
async fn relay(
    reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    id: u64,
    events: &UnboundedSender<Event>,
) {
    while let Ok(Some(line)) = next_line(reader).await {
        let Ok(message) = serde_json::from_str::<FromWorker>(&line) else {
            return;
        };
        let event = Event::Message {
            connection: id,
            message,
        };
        if events.send(event).is_err() {
            return;
        }
    }
}
