//! The controller service: workers connect over TCP and exchange JSON lines with it.
//!
//! Worker → controller: `{"hello":{"rank":R,"bandwidth_bps":B}}` once, then
//! `{"ready":{"compute_seconds":S,"bandwidth_bps":B}}` after each round's computation and
//! `{"done":{"sync":N}}` when its synchronization is over. Controller → worker:
//! `{"launch":{...}}` ([`Launch`]) or `{"error":"..."}` before it closes the connection.
//! A worker whose connection closes leaves every decision from then on.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::policy::Policy;
use super::{Launch, WorkerId};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromWorker {
    Hello {
        rank: WorkerId,
        bandwidth_bps: f64,
    },
    Ready {
        compute_seconds: f64,
        bandwidth_bps: f64,
    },
    Done {
        sync: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToWorker {
    Launch(Launch),
    Error(String),
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
    mut policy: Box<dyn Policy>,
    delta_t: Duration,
    mut on_launch: impl FnMut(f64, &Launch) + Send,
) -> std::io::Result<()> {
    let (events_tx, mut events) = unbounded_channel();
    tokio::spawn(accept(listener, events_tx));
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

async fn accept(listener: TcpListener, events: UnboundedSender<Event>) {
    let mut next = 0u64;
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        next += 1;
        tokio::spawn(connection(stream, next, events.clone()));
    }
}

async fn connection(stream: TcpStream, id: u64, events: UnboundedSender<Event>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
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
    let mut tx = Some(tx);
    while let Ok(Some(line)) = lines.next_line().await {
        let message = match serde_json::from_str::<FromWorker>(&line) {
            Ok(message) => message,
            Err(e) => {
                if let Some(tx) = &tx {
                    let _ = tx.send(ToWorker::Error(format!("bad message: {e}")));
                }
                break;
            }
        };
        let event = match (message, tx.take()) {
            (
                FromWorker::Hello {
                    rank,
                    bandwidth_bps,
                },
                Some(tx),
            ) => Event::Joined {
                rank,
                bandwidth: bandwidth_bps,
                tx,
                connection: id,
            },
            (message, None) => Event::Message {
                connection: id,
                message,
            },
            (_, Some(early)) => {
                let _ = early.send(ToWorker::Error("say hello first".into()));
                break;
            }
        };
        if events.send(event).is_err() {
            break;
        }
    }
    let _ = events.send(Event::Gone { connection: id });
    let _ = writer.await;
}
