//! The launched transport's side of the Unix socket: requests from the host's training
//! processes, their shared regions, and the rounds that sum several local ranks'
//! contributions before one allreduce across hosts.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant};

use endhost_core::collective::Done;
use endhost_core::daemon::{
    AllreduceReply, Attached, MAX_VALUES, ProbeReply, Request, TransportStatus,
};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Mutex, oneshot};

use super::region::SharedRegion;
use crate::transport::Transport;

/// What the socket's clients may make the transport hold, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From a request's first byte to its last (its line and its values): a client
    /// that starts a request and stalls is cut off. Idle time between requests is free.
    pub request_timeout: Duration,
    /// Bytes every connection together may make the transport hold: request values
    /// (from their first byte until the reply) and shared regions.
    pub client_bytes: u64,
}

impl Limits {
    /// What a host needs at most: each local rank a region and a request of the
    /// largest allreduce.
    pub fn for_local_ranks(local_ranks: u32) -> Limits {
        Limits {
            request_timeout: Duration::from_secs(30),
            client_bytes: u64::from(local_ranks.max(1)) * 2 * MAX_VALUES * 4,
        }
    }
}

struct ServerState {
    transport: Transport,
    limits: Limits,
    /// Bytes of [`Limits::client_bytes`] held now.
    held: Cell<u64>,
    /// The next tensor id; held for the whole allreduce so ranks agree on the order.
    next_tensor: Mutex<u32>,
    rounds: RefCell<Rounds>,
    /// Which local ranks a connection holds: one connection each.
    claimed: RefCell<Vec<bool>>,
    /// Connections open now, at most [`MAX_CONNECTIONS`].
    connections: std::cell::Cell<usize>,
}

/// More connections than a host's training processes and their tools need; past it a
/// new one is closed at once. What they hold together is bounded by
/// [`Limits::client_bytes`].
const MAX_CONNECTIONS: usize = 64;

/// A share of [`Limits::client_bytes`], given back when dropped.
struct Held {
    shared: Rc<ServerState>,
    bytes: u64,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shared.held.set(self.shared.held.get() - self.bytes);
    }
}

/// Takes `bytes` of the clients' budget, or says why not.
fn hold(shared: &Rc<ServerState>, bytes: u64) -> Result<Held, String> {
    let held = shared.held.get();
    if held.saturating_add(bytes) > shared.limits.client_bytes {
        return Err(format!(
            "{bytes} bytes would take the transport's clients past their budget of {} \
             bytes ({held} held now; endhost serve --client-memory)",
            shared.limits.client_bytes
        ));
    }
    shared.held.set(held + bytes);
    Ok(Held {
        shared: Rc::clone(shared),
        bytes,
    })
}

/// What a round's members get back: one result for all.
type Outcome = Rc<Result<Done, String>>;

/// The allreduces local ranks have asked for and the host has not yet run: the n-th
/// of every local rank make round n.
struct Rounds {
    /// Each local rank's next round.
    next: Vec<u64>,
    /// Local ranks whose process left (its connection closed) and has not attached
    /// again: rounds stop waiting for them.
    departed: Vec<bool>,
    /// The first round each local rank takes part in: a process that came back after
    /// leaving owes nothing to the rounds before it.
    joined_at: Vec<u64>,
    open: HashMap<u64, Round>,
}

impl Rounds {
    fn new(members: usize) -> Rounds {
        Rounds {
            next: vec![0; members],
            departed: vec![false; members],
            joined_at: vec![0; members],
            open: HashMap::new(),
        }
    }

    /// Round `seq` if every local rank has given its part, left, or joined after it;
    /// taken out of `open`.
    fn take_if_ready(&mut self, seq: u64) -> Option<Round> {
        let round = self.open.get(&seq)?;
        let ready = round.parts.iter().enumerate().all(|(rank, part)| {
            part.is_some() || self.departed[rank] || seq < self.joined_at[rank]
        });
        if ready { self.open.remove(&seq) } else { None }
    }

    /// Local rank `rank`'s process left: every open round it has not given its part
    /// to fails for the others (the host still takes part, with zeros). Returns the
    /// rounds now ready, in order.
    fn depart(&mut self, rank: usize) -> Vec<(u64, Round)> {
        self.departed[rank] = true;
        let mut missing: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, round)| round.parts[rank].is_none())
            .map(|(seq, _)| *seq)
            .collect();
        missing.sort_unstable();
        for seq in &missing {
            if let Some(round) = self.open.get_mut(seq) {
                round.spoiled.get_or_insert_with(|| left(rank, *seq));
            }
        }
        missing
            .into_iter()
            .filter_map(|seq| self.take_if_ready(seq).map(|round| (seq, round)))
            .collect()
    }

    /// Local rank `rank` attaches: a process that comes back after leaving starts at
    /// the host's newest round, not at the rounds the others already gave up on (they
    /// were failed when it left, and no longer wait for it).
    fn arrive(&mut self, rank: usize) {
        if std::mem::take(&mut self.departed[rank]) {
            let newest = self.next.iter().copied().max().unwrap_or(0);
            self.next[rank] = newest;
            self.joined_at[rank] = newest;
        }
    }
}

fn left(rank: usize, seq: u64) -> String {
    format!(
        "allreduce {seq}: local rank {rank}'s process left (its connection closed) before \
         giving its part; relaunch the job's processes"
    )
}

struct Round {
    parts: Vec<Option<Vec<f32>>>,
    layers: Vec<(usize, u16)>,
    loss_bound: Option<f64>,
    waiters: Vec<oneshot::Sender<Outcome>>,
    /// Why the round cannot run (its members disagree), told to every member.
    spoiled: Option<String>,
}

/// One allreduce as a local rank asks for it.
struct Contribution {
    local_rank: usize,
    data: Vec<f32>,
    layers: Vec<(usize, u16)>,
    loss_bound: Option<f64>,
}

/// Serves `listener` until the future `stop` completes. The transport is not `Sync`,
/// so clients are tasks of one thread.
/// With `metrics`, Prometheus scrapes are answered there too ([`super::metrics`]).
pub async fn serve(
    transport: Transport,
    listener: UnixListener,
    metrics: Option<tokio::net::TcpListener>,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) -> Transport {
    let local_ranks = transport.config().job.local_ranks.max(1) as usize;
    let shared = Rc::new(ServerState {
        transport,
        limits,
        held: Cell::new(0),
        next_tensor: Mutex::new(0),
        rounds: RefCell::new(Rounds::new(local_ranks)),
        claimed: RefCell::new(vec![false; local_ranks]),
        connections: std::cell::Cell::new(0),
    });
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    Ok((stream, _)) = accept(metrics.as_ref()) => {
                        let shared = Rc::clone(&shared);
                        tokio::task::spawn_local(async move {
                            let rank = shared.transport.config().rank;
                            let text = async {
                                let counters = shared.transport.counters().await.ok()?;
                                Some(super::metrics::exposition(rank, &counters))
                            };
                            let _ = super::metrics::answer(stream, text).await;
                        });
                    }
                    accepted = listener.accept() => {
                        if let Ok((stream, _)) = accepted
                            && shared.connections.get() < MAX_CONNECTIONS
                        {
                            shared.connections.set(shared.connections.get() + 1);
                            let shared = Rc::clone(&shared);
                            tokio::task::spawn_local(async move {
                                // A client that sends garbage or leaves is its own problem.
                                let _ = client(stream, &shared).await;
                                shared.connections.set(shared.connections.get() - 1);
                            });
                        }
                    }
                }
            }
        })
        .await;
    // Dropping the set cancels clients still connected; their allreduces are the
    // transport's to finish or time out.
    drop(local);
    match Rc::try_unwrap(shared) {
        Ok(shared) => shared.transport,
        Err(_) => unreachable!("every client task was dropped with the set"),
    }
}

/// The next scrape on `metrics`; never, without one.
async fn accept(
    metrics: Option<&tokio::net::TcpListener>,
) -> io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    match metrics {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// One connection: which local rank it attached as (without one, a transport serving
/// one local rank treats it as rank 0) and its region.
struct Connection {
    reader: BufReader<UnixStream>,
    local_rank: Option<usize>,
    /// The region and its share of the clients' budget.
    region: Option<(SharedRegion, Held)>,
}

async fn client(stream: UnixStream, shared: &Rc<ServerState>) -> io::Result<()> {
    let mut c = Connection {
        reader: BufReader::new(stream),
        local_rank: None,
        region: None,
    };
    let result = serve_client(&mut c, shared).await;
    if let Some(rank) = c.local_rank {
        shared.claimed.borrow_mut()[rank] = false;
        // With one local rank every round runs as it comes: nobody waits for it, and
        // a later unattached client (`endhost allreduce`) is rank 0 too.
        if shared.claimed.borrow().len() > 1 {
            let ready = shared.rounds.borrow_mut().depart(rank);
            for (_, round) in ready {
                finish(shared, round);
            }
        }
    }
    result
}

async fn serve_client(c: &mut Connection, shared: &Rc<ServerState>) -> io::Result<()> {
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    let late = || {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "a request did not arrive whole within the request timeout",
        )
    };
    loop {
        // Between requests a client may wait as long as it likes; once one starts, it
        // must arrive whole in time.
        if c.reader.fill_buf().await?.is_empty() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + shared.limits.request_timeout;
        let line = tokio::time::timeout_at(deadline, crate::lines::next_line(&mut c.reader))
            .await
            .map_err(|_| late())?
            .map_err(|e| invalid(e.to_string()))?;
        let Some(line) = line else {
            return Ok(());
        };
        let request: Request = serde_json::from_str(&line).map_err(|e| invalid(e.to_string()))?;
        match request {
            Request::Status => {
                let status = status(shared).await;
                write_line(c.reader.get_mut(), &status).await?;
            }
            Request::Attach { local_rank, bytes } => attach(c, shared, local_rank, bytes).await?,
            Request::Probe {
                class,
                per_path,
                to,
            } => {
                let reply = probe(shared, class, per_path, to).await;
                write_line(c.reader.get_mut(), &reply).await?;
            }
            Request::Allreduce { values, layer } => {
                // The values follow the line: a request that cannot be served closes
                // the connection after its answer.
                let held = if values > MAX_VALUES {
                    Err(format!(
                        "{values} values is above the limit of {MAX_VALUES}"
                    ))
                } else {
                    hold(shared, values * 4)
                };
                let _held = match held {
                    Ok(held) => held,
                    Err(error) => {
                        write_line(c.reader.get_mut(), &failed(error, 0.0)).await?;
                        return Ok(());
                    }
                };
                let mut bytes = vec![0u8; values as usize * 4];
                tokio::time::timeout_at(deadline, c.reader.read_exact(&mut bytes))
                    .await
                    .map_err(|_| late())??;
                let data = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                drop(bytes);
                let started = Instant::now();
                let outcome = match local_rank_of(c, shared) {
                    Ok(local_rank) => {
                        let layers = vec![(0, layer)];
                        contribute(
                            shared,
                            Contribution {
                                local_rank,
                                data,
                                layers,
                                loss_bound: None,
                            },
                        )
                        .await
                    }
                    Err(e) => Rc::new(Err(e)),
                };
                let answer = async {
                    write_line(c.reader.get_mut(), &reply(&outcome, started)).await?;
                    if let Ok(done) = &*outcome {
                        write_values(c.reader.get_mut(), &done.data).await?;
                    }
                    io::Result::Ok(())
                };
                within(shared.limits.request_timeout, answer).await?;
            }
            Request::AllreduceShared {
                values,
                layers,
                loss_bound,
            } => {
                let started = Instant::now();
                let outcome = match shared_request(c, shared, values, layers, loss_bound) {
                    Ok((contribution, _held)) => contribute(shared, contribution).await,
                    Err(e) => Rc::new(Err(e)),
                };
                if let (Ok(done), Some((region, _))) = (&*outcome, &c.region) {
                    region.write(&done.data);
                }
                let answer = reply(&outcome, started);
                let write = write_line(c.reader.get_mut(), &answer);
                within(shared.limits.request_timeout, write).await?;
            }
        }
    }
}

async fn status(shared: &ServerState) -> TransportStatus {
    let config = shared.transport.config();
    TransportStatus {
        host: config.local.name.clone(),
        rank: config.rank,
        world_size: config.job.world_size,
        local_ranks: config.job.local_ranks.max(1),
        job_id: config.job.job_id,
        datapath: config.job.datapath.kind,
        loss_bound: config.job.loss_bound,
        layers: config.job.tagging.layers,
        pid: std::process::id(),
        allreduces: u64::from(*shared.next_tensor.lock().await),
        classes: config.job.tagging.classes.clone(),
        control_dscp: config.job.tagging.control_dscp,
        mtu: config.job.mtu,
        path_addresses: config.local.path_addresses.clone(),
    }
}

/// Queues a class probe burst with the DSCP this transport runs for `class`.
async fn probe(shared: &ServerState, class: u8, per_path: u32, to: Option<u16>) -> ProbeReply {
    let config = shared.transport.config();
    let Some(tag) = config.job.tagging.classes.iter().find(|t| t.class == class) else {
        return ProbeReply {
            error: Some(format!("this transport has no class {class}")),
            dscp: 0,
            queued: 0,
            arrivals: Vec::new(),
        };
    };
    match shared.transport.probe_class(tag.dscp, per_path, to).await {
        Ok((queued, arrivals)) => ProbeReply {
            error: None,
            dscp: tag.dscp,
            queued,
            arrivals,
        },
        Err(e) => ProbeReply {
            error: Some(e.to_string()),
            dscp: tag.dscp,
            queued: 0,
            arrivals: Vec::new(),
        },
    }
}

/// Gives the connection a region of `bytes` (replacing its last) and makes it local
/// rank `local_rank`.
async fn attach(
    c: &mut Connection,
    shared: &Rc<ServerState>,
    local_rank: u32,
    bytes: u64,
) -> io::Result<()> {
    let local_ranks = shared.rounds.borrow().next.len();
    let refuse = |error: String| Attached {
        error: Some(error),
        bytes: 0,
    };
    let reply = if local_rank as usize >= local_ranks {
        refuse(format!(
            "local rank {local_rank} is not one of this host's {local_ranks} (training.launcher.procs_per_host)"
        ))
    } else if c.local_rank.is_some_and(|r| r != local_rank as usize) {
        refuse("a connection cannot change its local rank".into())
    } else if c.local_rank.is_none() && shared.claimed.borrow()[local_rank as usize] {
        refuse(format!(
            "local rank {local_rank} is attached already (each process needs its own LOCAL_RANK)"
        ))
    } else if bytes == 0 || bytes > MAX_VALUES * 4 || !bytes.is_multiple_of(4) {
        refuse(format!(
            "a region of {bytes} bytes: give a multiple of 4 up to {}",
            MAX_VALUES * 4
        ))
    } else {
        // The region it replaces is given back first.
        c.region = None;
        let made = hold(shared, bytes).and_then(|held| {
            SharedRegion::new(bytes as usize)
                .map(|region| (region, held))
                .map_err(|e| format!("cannot make a shared region of {bytes} bytes: {e}"))
        });
        match made {
            Ok((region, held)) => {
                if c.local_rank.is_none() {
                    shared.rounds.borrow_mut().arrive(local_rank as usize);
                }
                c.local_rank = Some(local_rank as usize);
                shared.claimed.borrow_mut()[local_rank as usize] = true;
                let mut line = serde_json::to_vec(&Attached { error: None, bytes })
                    .map_err(io::Error::other)?;
                line.push(b'\n');
                region.send(c.reader.get_mut(), &line).await?;
                c.region = Some((region, held));
                return Ok(());
            }
            Err(e) => refuse(e),
        }
    };
    write_line(c.reader.get_mut(), &reply).await
}

fn local_rank_of(c: &Connection, shared: &ServerState) -> Result<usize, String> {
    match c.local_rank {
        Some(rank) => Ok(rank),
        None if shared.rounds.borrow().next.len() == 1 => Ok(0),
        None => Err("this transport serves several local ranks: attach with yours first".into()),
    }
}

/// A local rank's contribution read from its region, with the copy's share of the
/// clients' budget.
fn shared_request(
    c: &Connection,
    shared: &Rc<ServerState>,
    values: u64,
    layers: Vec<(u64, u16)>,
    loss_bound: Option<f64>,
) -> Result<(Contribution, Held), String> {
    let Some((region, _)) = &c.region else {
        return Err("no shared region: attach first".into());
    };
    let local_rank = local_rank_of(c, shared)?;
    if values > region.values() as u64 {
        return Err(format!(
            "{values} values do not fit the attached region of {}",
            region.values()
        ));
    }
    if let Some(p) = loss_bound
        && !(0.0..1.0).contains(&p)
    {
        return Err(format!("loss bound {p}: give at least 0 and below 1"));
    }
    let ascending = layers.windows(2).all(|w| w[0].0 < w[1].0);
    if !ascending || layers.last().is_some_and(|l| l.0 >= values.max(1)) {
        return Err("layers: give (first value, layer) pairs, ascending, inside the values".into());
    }
    let held = hold(shared, values * 4)?;
    let contribution = Contribution {
        local_rank,
        data: region.read(values as usize),
        layers: layers
            .into_iter()
            .map(|(at, layer)| (at as usize, layer))
            .collect(),
        loss_bound,
    };
    Ok((contribution, held))
}

/// Adds a local rank's contribution to its round; once every local rank has given its
/// part (or left), the round's allreduce runs in a task of its own and every member
/// gets its outcome.
async fn contribute(shared: &Rc<ServerState>, contribution: Contribution) -> Outcome {
    let (tx, rx) = oneshot::channel();
    let ready = {
        let mut rounds = shared.rounds.borrow_mut();
        let members = rounds.next.len();
        let seq = rounds.next[contribution.local_rank];
        rounds.next[contribution.local_rank] += 1;
        let departed = rounds.departed.iter().position(|d| *d);
        let round = rounds.open.entry(seq).or_insert_with(|| Round {
            parts: vec![None; members],
            layers: contribution.layers.clone(),
            loss_bound: contribution.loss_bound,
            waiters: Vec::new(),
            spoiled: departed.map(|rank| left(rank, seq)),
        });
        if let Some(first) = round.parts.iter().flatten().next()
            && (first.len() != contribution.data.len()
                || round.layers != contribution.layers
                || round.loss_bound != contribution.loss_bound)
        {
            round.spoiled = Some(format!(
                "allreduce {seq}: this host's local ranks asked for different allreduces \
                 (sizes, layers or loss bounds differ)"
            ));
        }
        round.parts[contribution.local_rank] = Some(contribution.data);
        round.waiters.push(tx);
        rounds.take_if_ready(seq)
    };
    if let Some(round) = ready {
        finish(shared, round);
    }
    rx.await
        .unwrap_or_else(|_| Rc::new(Err("the round was abandoned".into())))
}

/// Runs a ready round in a task of its own (so no member's connection carries it) and
/// tells every member its outcome. Rounds take their tensor ids in the order they
/// became ready.
fn finish(shared: &Rc<ServerState>, round: Round) {
    let shared = Rc::clone(shared);
    if let Some(why) = round.spoiled {
        // The members hear why at once; the other hosts run this allreduce, so the
        // host takes part with zeros and the next one is the same collective
        // everywhere. Only the length is kept.
        let outcome: Outcome = Rc::new(Err(why));
        for waiter in round.waiters {
            let _ = waiter.send(Rc::clone(&outcome));
        }
        let values = round.parts.iter().flatten().next().map_or(0, Vec::len);
        drop(round.parts);
        tokio::task::spawn_local(async move {
            let mut next = shared.next_tensor.lock().await;
            let spec = shared
                .transport
                .allreduce_spec(*next, vec![0.0; values], Vec::new(), None);
            *next = next.wrapping_add(1);
            let _ = shared.transport.allreduce(spec).await;
        });
        return;
    }
    tokio::task::spawn_local(async move {
        let mut next = shared.next_tensor.lock().await;
        let tensor = *next;
        *next = next.wrapping_add(1);
        // In local-rank order, so the sum is the same bits on every run.
        let mut parts = round.parts.into_iter().flatten();
        let mut data = parts.next().unwrap_or_default();
        for part in parts {
            for (sum, v) in data.iter_mut().zip(part) {
                *sum += v;
            }
        }
        let spec = shared
            .transport
            .allreduce_spec(tensor, data, round.layers, round.loss_bound);
        let outcome: Outcome = Rc::new(
            shared
                .transport
                .allreduce(spec)
                .await
                .map_err(|e| e.to_string()),
        );
        // Held until here: one collective at a time, in the same order on every host.
        drop(next);
        for waiter in round.waiters {
            let _ = waiter.send(Rc::clone(&outcome));
        }
    });
}

/// The reply to an allreduce: on success the collective's own time in the transport
/// (without the handoff either side), on failure the time until it failed.
fn reply(outcome: &Result<Done, String>, started: Instant) -> AllreduceReply {
    match outcome {
        Ok(done) => AllreduceReply {
            error: None,
            delivered: done.delivered,
            exact: done.exact,
            seconds: done.elapsed_ns as f64 / 1e9,
        },
        Err(e) => failed(e.clone(), started.elapsed().as_secs_f64()),
    }
}

fn failed(error: String, seconds: f64) -> AllreduceReply {
    AllreduceReply {
        error: Some(error),
        delivered: 0.0,
        exact: 0.0,
        seconds,
    }
}

/// `write` (an answer to a client), given up after `limit`: a client that does not
/// read its answers holds nothing longer than that.
async fn within(
    limit: Duration,
    write: impl std::future::Future<Output = io::Result<()>>,
) -> io::Result<()> {
    tokio::time::timeout(limit, write).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the client did not read its answer within the request timeout",
        )
    })?
}

/// `values` as little-endian f32, a chunk at a time (no copy of the whole result).
async fn write_values(stream: &mut UnixStream, values: &[f32]) -> io::Result<()> {
    let mut chunk = Vec::with_capacity(64 << 10);
    for part in values.chunks(16 << 10) {
        chunk.clear();
        chunk.extend(part.iter().flat_map(|v| v.to_le_bytes()));
        stream.write_all(&chunk).await?;
    }
    Ok(())
}

async fn write_line<T: Serialize>(stream: &mut UnixStream, value: &T) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(members: usize) -> Rounds {
        Rounds::new(members)
    }

    fn give(rounds: &mut Rounds, rank: usize) -> u64 {
        let seq = rounds.next[rank];
        rounds.next[rank] += 1;
        let members = rounds.next.len();
        let round = rounds.open.entry(seq).or_insert_with(|| Round {
            parts: vec![None; members],
            layers: Vec::new(),
            loss_bound: None,
            waiters: Vec::new(),
            spoiled: None,
        });
        round.parts[rank] = Some(vec![1.0]);
        seq
    }

    #[test]
    fn a_round_waits_for_every_local_rank_that_has_not_left() {
        let mut r = rounds(2);
        let seq = give(&mut r, 0);
        assert!(r.take_if_ready(seq).is_none());
        give(&mut r, 1);
        assert!(
            r.take_if_ready(seq)
                .is_some_and(|round| round.spoiled.is_none())
        );
    }

    #[test]
    fn leaving_fails_the_rounds_still_waiting_for_the_one_who_left() {
        let mut r = rounds(3);
        // Rank 1 gave rounds 0 and 1 and left; rank 0 gave round 0 to 2; rank 2 none.
        give(&mut r, 1);
        give(&mut r, 1);
        for _ in 0..3 {
            give(&mut r, 0);
        }
        assert!(r.depart(1).is_empty(), "rank 2 has still to give its parts");
        assert!(r.open[&0].spoiled.is_none() && r.open[&1].spoiled.is_none());
        assert!(
            r.open[&2]
                .spoiled
                .as_ref()
                .unwrap()
                .contains("local rank 1")
        );
        // Rank 2 catches up: rounds 0 and 1 hold rank 1's parts and run; round 2 no
        // longer waits for rank 1.
        for seq in 0..3 {
            assert_eq!(give(&mut r, 2), seq);
            assert!(r.take_if_ready(seq).is_some(), "round {seq}");
        }
    }

    #[test]
    fn leaving_releases_the_rounds_the_others_wait_in() {
        let mut r = rounds(2);
        give(&mut r, 0);
        let ready = r.depart(1);
        assert_eq!(ready.len(), 1);
        assert!(ready[0].1.spoiled.is_some());
        assert!(r.open.is_empty());
    }

    #[test]
    fn rounds_before_a_returning_process_do_not_wait_for_it() {
        let mut r = rounds(3);
        // Rank 2 left; rank 0 gave rounds 0..=5, rank 1 rounds 0..=4.
        r.depart(2);
        for _ in 0..6 {
            give(&mut r, 0);
        }
        for seq in 0..5 {
            give(&mut r, 1);
            assert!(r.take_if_ready(seq).is_some(), "round {seq}");
        }
        // Rank 2 comes back at round 6; round 5 still runs once rank 1 gives it.
        r.arrive(2);
        assert_eq!(r.next[2], 6);
        assert!(
            r.take_if_ready(5).is_none(),
            "rank 1 has still to give round 5"
        );
        assert_eq!(give(&mut r, 1), 5);
        assert!(r.take_if_ready(5).is_some());
        // Round 6 waits for all three again.
        give(&mut r, 0);
        give(&mut r, 1);
        assert!(r.take_if_ready(6).is_none());
        give(&mut r, 2);
        assert!(r.take_if_ready(6).is_some());
    }

    #[test]
    fn a_process_that_comes_back_starts_at_the_hosts_newest_round() {
        let mut r = rounds(2);
        give(&mut r, 0);
        give(&mut r, 1);
        give(&mut r, 0);
        r.depart(1);
        r.arrive(1);
        assert_eq!(r.next, vec![2, 2]);
        assert!(!r.departed[1]);
        // A first attach changes nothing.
        r.arrive(0);
        assert_eq!(r.next, vec![2, 2]);
    }
}
