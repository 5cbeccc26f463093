//! Collectives and point-to-point operations over the protocol core, sans I/O.
//!
//! The [`Engine`] owns an [`Endpoint`] and the operations in flight — any number at
//! once (buckets), told apart by tensor id and round. Each rank numbers the rounds of a
//! tensor in call order, so ranks that call the same collectives in the same order
//! agree on every message id.
//!
//! Loss semantics: gradients missing from a reduction add nothing (zeros); values
//! missing from an all-gather keep what the buffer held (the previous values).
//!
//! The loss bound p is on the result: at most p of each rank's result values are not
//! exact. A value passes through several messages on its way (a ring's 2(g − 1) steps;
//! a shard's g − 1 contributions and its way back from the server), and a loss in any
//! of them reaches it, so each message may lose p divided by that depth
//! ([`message_bound`]). Messages of one value line up packet for packet (each step
//! sends the range the step before received), so the losses of a value's messages add
//! up, never more; the result's mask of inexact values ([`crate::proto::Inexact`]) gives
//! [`Done::exact`].
//!
//! Timeouts: an operation that makes no progress (no transfer completes) for
//! `phase_ms` fails with an error naming what it waits for — a dead peer never hangs a
//! collective. With `early_exit` (off by default), the protocol core also ends a
//! receive early once its sender's first pass is over and the missing data has not come
//! within a grace learned from recent recoveries (see [`crate::proto`]).

pub mod schedule;

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use crate::config::{Collective, Timeouts};
use crate::proto::{Buffer, Endpoint, Event, Inexact, LayerMap, Place, Region};
use crate::wire::MessageId;
use schedule::{Direction, Transfer};

/// The step number of point-to-point messages.
pub const POINT_TO_POINT: u16 = u16::MAX;

/// Collectives are pipelined in pieces of about this many values (1 MiB), at most
/// this many pieces per transfer: enough that a step's tail (the last packets'
/// queueing, a probe's round trip, retransmissions) overlaps the next step's start,
/// few enough that per-message control traffic stays small.
pub const SLICE_ELEMS: usize = 1 << 18;
const MAX_SLICES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Algorithm {
    Ring,
    Transpose,
    /// Sharded parameter server: shards on these ranks (members of the group).
    Ps {
        servers: Vec<u16>,
    },
}

impl Algorithm {
    /// The job's `collective` over all of its `world_size` ranks (every rank a shard
    /// server of the parameter server).
    pub fn of_job(collective: Collective, world_size: u16) -> Algorithm {
        match collective {
            Collective::Ring => Algorithm::Ring,
            Collective::Transpose => Algorithm::Transpose,
            Collective::Ps => Algorithm::Ps {
                servers: (0..world_size).collect(),
            },
        }
    }
}

/// An allreduce (sum) of this rank's `data` over a group.
#[derive(Debug, Clone)]
pub struct Allreduce {
    pub tensor: u32,
    pub data: Vec<f32>,
    pub algorithm: Algorithm,
    /// Ranks taking part, this one included; `None`: every rank of the job.
    pub group: Option<Vec<u16>>,
    /// Each member's weight (in group order); the result is Σ wᵢ·xᵢ. `None`: all 1.
    pub weights: Option<Vec<f32>>,
    /// (first element, layer) breakpoints, for tagging; empty: all layer 0.
    pub layers: Vec<(usize, u16)>,
    pub loss_bound: f64,
}

pub type OpId = u64;

/// A finished operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub op: OpId,
    pub result: Result<Done, OpError>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub data: Vec<f32>,
    /// The smallest fraction delivered over the operation's receives (1 if none).
    pub delivered: f64,
    /// The fraction of the result's values no loss reached (at least 1 − the loss
    /// bound, unless a receive ended early).
    pub exact: f64,
    pub elapsed_ns: u64,
}

/// Each message's loss bound when at most `loss_bound` of the result may be inexact:
/// the bound divided by how many messages' losses can reach one result value.
pub fn message_bound(loss_bound: f64, algorithm: &Algorithm, members: usize) -> f64 {
    let depth = match algorithm {
        Algorithm::Ring => 2 * members.saturating_sub(1),
        // A shard takes g − 1 contributions, then goes back to every member.
        Algorithm::Transpose | Algorithm::Ps { .. } => members,
    };
    loss_bound / depth.max(1) as f64
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OpError(pub String);

struct Op {
    tensor: u32,
    round: u32,
    what: String,
    buffer: Buffer,
    /// The buffer's values a loss reached.
    inexact: Inexact,
    layers: LayerMap,
    /// Each message's loss bound.
    loss_bound: f64,
    transfers: Vec<Transfer>,
    done: Vec<bool>,
    started: Vec<bool>,
    delivered: f64,
    began_ns: u64,
    progress_ns: u64,
}

impl Op {
    fn id(&self, step: u16) -> MessageId {
        MessageId {
            tensor: self.tensor,
            round: self.round,
            step,
        }
    }

    fn finished(&self) -> bool {
        self.done.iter().all(|&d| d)
    }
}

/// What an operation starts from.
struct Start {
    tensor: u32,
    round: u32,
    what: String,
    data: Vec<f32>,
    layers: Vec<(usize, u16)>,
    /// Each message's.
    loss_bound: f64,
    transfers: Vec<Transfer>,
}

/// The protocol core plus the operations running on it.
pub struct Engine {
    endpoint: Endpoint,
    timeouts: Timeouts,
    ops: HashMap<OpId, Op>,
    /// (direction, peer, message) → operation and transfer index.
    index: HashMap<(Direction, u16, MessageId), (OpId, usize)>,
    next_op: OpId,
    rounds: HashMap<(u32, Option<(u16, Direction)>), u32>,
    completions: VecDeque<Completion>,
    /// Peers whose control connection is gone, and why: nothing involving them can
    /// finish any more.
    lost: HashMap<u16, String>,
    /// The pipeline's piece size, in values.
    slice_elems: usize,
}

impl Engine {
    pub fn new(endpoint: Endpoint, timeouts: Timeouts) -> Engine {
        Engine {
            endpoint,
            timeouts,
            ops: HashMap::new(),
            index: HashMap::new(),
            next_op: 1,
            rounds: HashMap::new(),
            completions: VecDeque::new(),
            lost: HashMap::new(),
            slice_elems: SLICE_ELEMS,
        }
    }

    /// Pipelines collectives in pieces of about `elems` values instead of
    /// [`SLICE_ELEMS`]. Every rank of a job must use the same size.
    pub fn with_slice_elems(mut self, elems: usize) -> Engine {
        self.slice_elems = elems.max(1);
        self
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    fn round(&mut self, tensor: u32, peer: Option<(u16, Direction)>) -> u32 {
        let counter = self.rounds.entry((tensor, peer)).or_insert(0);
        let round = *counter;
        *counter = counter.wrapping_add(1);
        round
    }

    fn new_op_id(&mut self) -> OpId {
        let id = self.next_op;
        self.next_op += 1;
        id
    }

    fn fail_now(&mut self, message: String) -> OpId {
        let op = self.new_op_id();
        self.completions.push_back(Completion {
            op,
            result: Err(OpError(message)),
        });
        op
    }

    /// Starts an allreduce; its completion comes from [`Engine::poll_completion`].
    pub fn allreduce(&mut self, now: u64, spec: Allreduce) -> OpId {
        let config = self.endpoint.config();
        let (me_rank, world) = (config.rank, config.world);
        let group = spec.group.clone().unwrap_or_else(|| (0..world).collect());
        let Some(me) = group.iter().position(|&r| r == me_rank) else {
            return self.fail_now(format!("rank {me_rank} is not in the group {group:?}"));
        };
        if group.iter().any(|&r| r >= world) || has_duplicates(&group) {
            return self.fail_now(format!("group {group:?} has unknown or repeated ranks"));
        }
        let mut data = spec.data;
        if let Some(weights) = &spec.weights {
            if weights.len() != group.len() {
                return self.fail_now(format!(
                    "{} weights for a group of {}",
                    weights.len(),
                    group.len()
                ));
            }
            let w = weights[me];
            data.iter_mut().for_each(|x| *x *= w);
        }
        let transfers = match &spec.algorithm {
            Algorithm::Ring => schedule::ring(&group, me, data.len()),
            Algorithm::Transpose => schedule::sharded(&group, &group, me, data.len()),
            Algorithm::Ps { servers } => {
                if servers.is_empty() || servers.iter().any(|s| !group.contains(s)) {
                    return self.fail_now(format!("servers {servers:?} are not all in the group"));
                }
                schedule::sharded(&group, servers, me, data.len())
            }
        };
        let slices = schedule::slices(&transfers, self.slice_elems, MAX_SLICES, POINT_TO_POINT);
        let transfers = schedule::pipelined(transfers, slices);
        let round = self.round(spec.tensor, None);
        let what = format!(
            "allreduce of tensor {} (round {round}, {:?})",
            spec.tensor, spec.algorithm
        );
        self.start(
            now,
            Start {
                tensor: spec.tensor,
                round,
                what,
                data,
                layers: spec.layers,
                loss_bound: message_bound(spec.loss_bound, &spec.algorithm, group.len()),
                transfers,
            },
        )
    }

    /// Sends `data` to `peer` as the next message of `tensor` between the two (MLT's
    /// post_send). Layer `layer` decides its priority.
    pub fn post_send(
        &mut self,
        now: u64,
        peer: u16,
        tensor: u32,
        data: Vec<f32>,
        layer: u16,
    ) -> OpId {
        let what = format!("send of tensor {tensor} to rank {peer}");
        let layers = vec![(0, layer)];
        self.point_to_point(now, peer, tensor, Direction::Send, what, data, layers, 0.0)
    }

    /// Receives the next message of `tensor` from `peer`, `len` values, done once all
    /// but `loss_bound` of it is in (MLT's post_recv).
    pub fn post_recv(
        &mut self,
        now: u64,
        peer: u16,
        tensor: u32,
        len: usize,
        loss_bound: f64,
    ) -> OpId {
        let what = format!("receive of tensor {tensor} from rank {peer}");
        let data = vec![0.0; len];
        self.point_to_point(
            now,
            peer,
            tensor,
            Direction::Recv,
            what,
            data,
            Vec::new(),
            loss_bound,
        )
    }

    /// One message of `tensor` to or from `peer`, numbered in call order per pair and
    /// direction.
    #[allow(clippy::too_many_arguments)]
    fn point_to_point(
        &mut self,
        now: u64,
        peer: u16,
        tensor: u32,
        direction: Direction,
        what: String,
        data: Vec<f32>,
        layers: Vec<(usize, u16)>,
        loss_bound: f64,
    ) -> OpId {
        let round = self.round(tensor, Some((peer, direction)));
        let transfer = Transfer {
            direction,
            peer,
            step: POINT_TO_POINT,
            start: 0,
            len: data.len(),
            place: Place::Copy,
            after: Vec::new(),
        };
        self.start(
            now,
            Start {
                tensor,
                round,
                what,
                data,
                layers,
                loss_bound,
                transfers: vec![transfer],
            },
        )
    }

    fn start(&mut self, now: u64, start: Start) -> OpId {
        let Start {
            tensor,
            round,
            what,
            data,
            layers,
            loss_bound,
            transfers,
        } = start;
        let id = self.new_op_id();
        let count = transfers.len();
        let op = Op {
            tensor,
            round,
            what,
            buffer: Rc::new(std::cell::RefCell::new(data)),
            inexact: Inexact::default(),
            layers: Rc::new(layers),
            loss_bound,
            transfers,
            done: vec![false; count],
            started: vec![false; count],
            delivered: 1.0,
            began_ns: now,
            progress_ns: now,
        };
        for (i, t) in op.transfers.iter().enumerate() {
            self.index
                .insert((t.direction, t.peer, op.id(t.step)), (id, i));
        }
        let gone = op
            .transfers
            .iter()
            .find_map(|t| self.lost.get(&t.peer).map(|why| (t.peer, why.clone())));
        self.ops.insert(id, op);
        match gone {
            Some((peer, why)) => self.fail(id, format!("rank {peer} is gone ({why})")),
            None => self.advance(now, id),
        }
        id
    }

    /// Starts every transfer whose dependencies are done; completes the operation when
    /// everything is.
    fn advance(&mut self, now: u64, op_id: OpId) {
        let Some(op) = self.ops.get_mut(&op_id) else {
            return;
        };
        for i in 0..op.transfers.len() {
            if op.started[i] || !op.transfers[i].after.iter().all(|&a| op.done[a]) {
                continue;
            }
            op.started[i] = true;
            let t = &op.transfers[i];
            let region = Region {
                buffer: op.buffer.clone(),
                start: t.start,
                len: t.len,
                inexact: op.inexact.clone(),
            };
            let id = op.id(t.step);
            match t.direction {
                Direction::Send => self
                    .endpoint
                    .post_send(t.peer, id, region, op.layers.clone()),
                Direction::Recv => {
                    self.endpoint
                        .post_recv(t.peer, id, region, t.place, op.loss_bound)
                }
            }
        }
        if op.finished() {
            let op = self.ops.remove(&op_id).expect("present");
            self.finish(now, op_id, op);
        }
    }

    fn finish(&mut self, now: u64, op_id: OpId, op: Op) {
        for t in &op.transfers {
            let id = op.id(t.step);
            self.index.remove(&(t.direction, t.peer, id));
            if t.direction == Direction::Recv {
                self.endpoint.release_recv(t.peer, id);
            }
        }
        let receives = op.transfers.iter().any(|t| t.direction == Direction::Recv);
        let Op {
            buffer,
            inexact,
            delivered,
            began_ns,
            ..
        } = op;
        let data = match Rc::try_unwrap(buffer) {
            Ok(cell) => cell.into_inner(),
            Err(shared) => shared.borrow().clone(),
        };
        let values = data.len();
        let exact_values = values - inexact.borrow().count(0..values);
        // A send has no result of its own to count.
        if receives {
            self.endpoint
                .count_result(values as u64, exact_values as u64);
        }
        let exact = if values == 0 {
            1.0
        } else {
            exact_values as f64 / values as f64
        };
        self.completions.push_back(Completion {
            op: op_id,
            result: Ok(Done {
                data,
                delivered,
                exact,
                elapsed_ns: now.saturating_sub(began_ns),
            }),
        });
    }

    fn fail(&mut self, op_id: OpId, message: String) {
        if let Some(op) = self.ops.remove(&op_id) {
            for t in &op.transfers {
                self.index.remove(&(t.direction, t.peer, op.id(t.step)));
            }
            self.endpoint.cancel(op.tensor, op.round);
            self.completions.push_back(Completion {
                op: op_id,
                result: Err(OpError(format!("{}: {message}", op.what))),
            });
        }
    }

    /// Moves completions from the endpoint into the operations.
    fn collect_events(&mut self, now: u64) {
        while let Some(event) = self.endpoint.poll_event() {
            let (key, delivered) = match event {
                Event::SendDone { peer, id } => ((Direction::Send, peer, id), None),
                Event::RecvDone {
                    peer,
                    id,
                    delivered,
                } => ((Direction::Recv, peer, id), Some(delivered)),
            };
            let Some(&(op_id, i)) = self.index.get(&key) else {
                continue;
            };
            let Some(op) = self.ops.get_mut(&op_id) else {
                continue;
            };
            op.done[i] = true;
            if let Some(d) = delivered {
                op.delivered = op.delivered.min(d);
            }
            op.progress_ns = now;
            self.advance(now, op_id);
        }
    }

    pub fn handle_datagram(&mut self, now: u64, from: Option<u16>, tos: u8, bytes: &[u8]) {
        self.endpoint.handle_datagram(now, from, tos, bytes);
        self.collect_events(now);
    }

    pub fn handle_control(&mut self, now: u64, peer: u16, message: crate::proto::Control) {
        self.endpoint.handle_control(now, peer, message);
        self.collect_events(now);
    }

    /// The control connection to `peer` is gone: operations still waiting on it cannot
    /// finish. (A peer that finished everything with us and left is fine.)
    pub fn peer_lost(&mut self, peer: u16, why: &str) {
        self.lost.insert(peer, why.to_string());
        let affected: Vec<OpId> = self
            .ops
            .iter()
            .filter(|(_, op)| {
                op.transfers
                    .iter()
                    .enumerate()
                    .any(|(i, t)| t.peer == peer && !op.done[i])
            })
            .map(|(id, _)| *id)
            .collect();
        for op in affected {
            self.fail(op, format!("rank {peer} is gone ({why})"));
        }
    }

    /// The hard deadline: operations without progress for `phase_ms` fail.
    pub fn handle_timeout(&mut self, now: u64) {
        self.endpoint.handle_timeout(now);
        self.collect_events(now);
        let hard = u64::from(self.timeouts.phase_ms) * 1_000_000;
        let failed: Vec<(OpId, String)> = self
            .ops
            .iter()
            .filter(|(_, op)| now.saturating_sub(op.progress_ns) >= hard)
            .map(|(&id, op)| (id, waiting_for(op)))
            .collect();
        for (op_id, waiting) in failed {
            self.fail(
                op_id,
                format!("no progress for {} ms: {waiting}", self.timeouts.phase_ms),
            );
        }
    }

    /// The earliest time [`Engine::handle_timeout`] has work.
    pub fn next_timeout(&self) -> Option<u64> {
        let hard = u64::from(self.timeouts.phase_ms) * 1_000_000;
        let ops = self.ops.values().map(|op| op.progress_ns + hard);
        ops.chain(self.endpoint.next_timeout()).min()
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// Queues a class probe burst (see [`crate::proto::class_probe`]).
    pub fn probe_class(&mut self, dscp: u8, per_path: u32, to: Option<u16>) -> u64 {
        self.endpoint.probe_class(dscp, per_path, to)
    }

    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<crate::proto::Transmit> {
        self.endpoint.poll_transmit(now, buf)
    }

    pub fn poll_control(&mut self) -> Option<(u16, crate::proto::Control)> {
        self.endpoint.poll_control()
    }

    /// Operations in flight.
    pub fn busy(&self) -> usize {
        self.ops.len()
    }
}

fn has_duplicates(ranks: &[u16]) -> bool {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).any(|w| w[0] == w[1])
}

/// What an operation still waits for, for error messages.
fn waiting_for(op: &Op) -> String {
    let mut waits: Vec<String> = op
        .transfers
        .iter()
        .enumerate()
        .filter(|(i, _)| op.started[*i] && !op.done[*i])
        .map(|(_, t)| match t.direction {
            Direction::Recv => format!("data from rank {} (step {})", t.peer, t.step),
            Direction::Send => format!("rank {} to take step {}", t.peer, t.step),
        })
        .collect();
    waits.dedup();
    if waits.is_empty() {
        "nothing started".into()
    } else {
        format!("waiting for {}", waits.join(", "))
    }
}
