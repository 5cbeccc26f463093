//! The controller's state machine: who is computing, who is ready, who is synchronizing,
//! and the rule that decides the next synchronizations (selective, partial or all reduce).
//! Time is seconds on the driver's clock; nothing here reads a clock or a socket.

use serde::{Deserialize, Serialize};

use super::bpawr::InTraining;
use super::weights::{ALPHA, staleness_weights};
use super::{Launch, Member, SyncKind, WorkerId};

/// How the controller groups ready workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// Every worker, every round.
    AllReduce,
    /// The first p ready workers, as soon as there are p (Miao et al.).
    PartialReduce,
    /// BAG + BPAWR + Algorithm 3 (Luo et al.).
    SelectiveReduce,
}

impl Scheme {
    pub const ALL: [Scheme; 3] = [
        Scheme::AllReduce,
        Scheme::PartialReduce,
        Scheme::SelectiveReduce,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scheme::AllReduce => "all reduce",
            Scheme::PartialReduce => "partial reduce",
            Scheme::SelectiveReduce => "selective reduce",
        }
    }

    /// As a command line writes it: `all-reduce`, `partial-reduce`, `selective-reduce`.
    pub fn arg(self) -> &'static str {
        match self {
            Scheme::AllReduce => "all-reduce",
            Scheme::PartialReduce => "partial-reduce",
            Scheme::SelectiveReduce => "selective-reduce",
        }
    }
}

impl std::str::FromStr for Scheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scheme::ALL
            .into_iter()
            .find(|x| x.arg() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Scheme::ALL.iter().map(|x| x.arg()).collect();
                format!(
                    "unknown scheme `{s}` (expected one of: {})",
                    known.join(", ")
                )
            })
    }
}

/// A grouping rule over a [`Roster`].
pub trait Policy: Send {
    fn roster(&self) -> &Roster;
    fn roster_mut(&mut self) -> &mut Roster;
    /// Observes one round's computation time (the selective rule learns its CDF from them).
    fn observe(&mut self, _compute_seconds: f64) {}
    /// Decides which ready workers synchronize now.
    fn decide(&mut self, now: f64) -> Vec<Launch>;
    /// Seconds workers spent held back for arrivals that never joined their group.
    fn wasted_wait_seconds(&self) -> f64 {
        0.0
    }

    /// A worker joins, computing its first round from `now`.
    fn join(&mut self, worker: WorkerId, bandwidth: f64, now: f64) {
        self.roster_mut().join(worker, bandwidth, now);
    }

    /// A worker is gone: it leaves the queue and every decision from now on.
    fn leave(&mut self, worker: WorkerId) {
        self.roster_mut().leave(worker);
    }

    /// A worker finished its round's computation (it took `compute_seconds`) and reports
    /// its current bandwidth estimate (bit/s).
    fn ready(&mut self, worker: WorkerId, bandwidth: f64, compute_seconds: f64) {
        if self.roster_mut().ready(worker, bandwidth) {
            self.observe(compute_seconds);
        }
    }

    /// A launched synchronization is over; its members compute again from `now`.
    fn finished(&mut self, members: &[WorkerId], now: f64) {
        for &worker in members {
            self.roster_mut().resume(worker, now);
        }
    }
}

/// Every worker's state and the ready queue (Q), in arrival order.
#[derive(Debug, Default)]
pub struct Roster {
    workers: Workers,
    /// Ready workers with the bandwidth they reported, in arrival order.
    queue: Vec<Member>,
    next_sync: u64,
    arrivals: u64,
}

/// Workers sorted by id: decisions walk all of them, and a contiguous walk in id order
/// is both fast and deterministic.
#[derive(Debug, Default)]
struct Workers(Vec<(WorkerId, Worker)>);

impl Workers {
    fn position(&self, id: WorkerId) -> Result<usize, usize> {
        self.0.binary_search_by_key(&id, |(w, _)| *w)
    }

    fn insert(&mut self, id: WorkerId, worker: Worker) {
        match self.position(id) {
            Ok(at) => self.0[at].1 = worker,
            Err(at) => self.0.insert(at, (id, worker)),
        }
    }

    fn remove(&mut self, id: WorkerId) -> Option<Worker> {
        let at = self.position(id).ok()?;
        Some(self.0.remove(at).1)
    }

    fn get(&self, id: WorkerId) -> Option<&Worker> {
        self.position(id).ok().map(|at| &self.0[at].1)
    }

    fn get_mut(&mut self, id: WorkerId) -> Option<&mut Worker> {
        self.position(id).ok().map(|at| &mut self.0[at].1)
    }

    fn iter(&self) -> impl Iterator<Item = (WorkerId, &Worker)> {
        self.0.iter().map(|(id, w)| (*id, w))
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

#[derive(Debug)]
struct Worker {
    bandwidth: f64,
    /// Local updates so far, for staleness weights; a synchronization lifts every member
    /// to the group's freshest clock.
    clock: u64,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Computing {
        since: f64,
    },
    /// Ready since the `arrival`-th ready report.
    Ready {
        arrival: u64,
    },
    Syncing,
}

impl Roster {
    pub fn join(&mut self, worker: WorkerId, bandwidth: f64, now: f64) {
        self.leave(worker);
        self.workers.insert(
            worker,
            Worker {
                bandwidth,
                clock: 0,
                state: State::Computing { since: now },
            },
        );
    }

    pub fn leave(&mut self, worker: WorkerId) {
        if self.workers.remove(worker).is_some() {
            self.queue.retain(|m| m.id != Some(worker));
        }
    }

    /// Queues a worker that reports ready; false (and nothing changes) when it is unknown
    /// or not computing.
    pub fn ready(&mut self, worker: WorkerId, bandwidth: f64) -> bool {
        let Some(state) = self.workers.get_mut(worker) else {
            return false;
        };
        if !matches!(state.state, State::Computing { .. }) {
            return false;
        }
        self.arrivals += 1;
        state.bandwidth = bandwidth;
        state.clock += 1;
        state.state = State::Ready {
            arrival: self.arrivals,
        };
        self.queue.push(Member {
            id: Some(worker),
            bandwidth,
        });
        true
    }

    /// Starts a synchronization of these (ready) workers: they leave the queue, get their
    /// staleness weights and the group's freshest clock.
    pub fn launch(&mut self, mut members: Vec<WorkerId>, kind: SyncKind) -> Launch {
        members.sort_unstable();
        self.queue
            .retain(|m| m.id.is_none_or(|w| members.binary_search(&w).is_err()));
        let clocks: Vec<u64> = members
            .iter()
            .map(|&w| {
                self.workers
                    .get(w)
                    .expect("launched workers are known")
                    .clock
            })
            .collect();
        let freshest = clocks.iter().copied().max().unwrap_or(0);
        for w in &members {
            let worker = self
                .workers
                .get_mut(*w)
                .expect("launched workers are known");
            worker.clock = freshest;
            worker.state = State::Syncing;
        }
        let sync = self.next_sync;
        self.next_sync += 1;
        Launch {
            sync,
            kind,
            weights: staleness_weights(&clocks, ALPHA),
            members,
        }
    }

    /// A synchronizing worker computes again from `now`.
    pub fn resume(&mut self, worker: WorkerId, now: f64) {
        if let Some(w) = self.workers.get_mut(worker)
            && w.state == State::Syncing
        {
            w.state = State::Computing { since: now };
        }
    }

    /// Workers known to the controller.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.len() == 0
    }

    /// The ready queue, in arrival order.
    pub fn queue(&self) -> impl ExactSizeIterator<Item = WorkerId> + '_ {
        self.queue
            .iter()
            .map(|m| m.id.expect("the queue holds real workers"))
    }

    /// The ready workers with their bandwidths, in arrival order.
    pub fn ready_members(&self) -> Vec<Member> {
        self.queue.clone()
    }

    /// 𝕊: the workers still computing, with how long they have been at it.
    pub fn computing(&self, now: f64) -> Vec<InTraining> {
        self.workers
            .iter()
            .filter_map(|(id, w)| match w.state {
                State::Computing { since } => Some(InTraining {
                    id,
                    bandwidth: w.bandwidth,
                    elapsed: (now - since).max(0.0),
                }),
                _ => None,
            })
            .collect()
    }

    /// The arrival number of a ready worker's report (later reports have larger numbers).
    pub fn arrival(&self, worker: WorkerId) -> Option<u64> {
        match self.workers.get(worker)?.state {
            State::Ready { arrival } => Some(arrival),
            _ => None,
        }
    }

    /// How many ready reports have arrived so far.
    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }
}

/// All reduce: when every worker is ready, all of them.
#[derive(Debug, Default)]
pub struct AllReduce {
    roster: Roster,
}

impl Policy for AllReduce {
    fn roster(&self) -> &Roster {
        &self.roster
    }

    fn roster_mut(&mut self) -> &mut Roster {
        &mut self.roster
    }

    fn decide(&mut self, _now: f64) -> Vec<Launch> {
        if self.roster.is_empty() || self.roster.queue().len() < self.roster.len() {
            return Vec::new();
        }
        let everyone = self.roster.queue().collect();
        vec![self.roster.launch(everyone, SyncKind::Full)]
    }
}

/// Partial reduce: the first p ready workers, as soon as there are p.
#[derive(Debug)]
pub struct PartialReduce {
    roster: Roster,
    min_group: usize,
}

impl PartialReduce {
    pub fn new(min_group: usize) -> Self {
        Self {
            roster: Roster::default(),
            min_group: min_group.max(1),
        }
    }
}

impl Policy for PartialReduce {
    fn roster(&self) -> &Roster {
        &self.roster
    }

    fn roster_mut(&mut self) -> &mut Roster {
        &mut self.roster
    }

    fn decide(&mut self, _now: f64) -> Vec<Launch> {
        // With fewer than p workers left, all of them are a group.
        let p = self.min_group.min(self.roster.len()).max(1);
        let mut launches = Vec::new();
        while self.roster.queue().len() >= p {
            let first = self.roster.queue().take(p).collect();
            launches.push(self.roster.launch(first, SyncKind::Partial));
        }
        launches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_reduce_takes_the_first_p_in_arrival_order() {
        let mut policy = PartialReduce::new(2);
        for w in 1..=5 {
            policy.join(w, 1e9, 0.0);
        }
        policy.ready(3, 1e9, 1.0);
        assert!(policy.decide(1.0).is_empty());
        policy.ready(1, 1e9, 1.0);
        policy.ready(5, 1e9, 1.0);
        let launches = policy.decide(1.0);
        assert_eq!(launches.len(), 1);
        assert_eq!(launches[0].members, vec![1, 3]);
        assert_eq!(launches[0].weights, vec![0.5, 0.5]);
        assert_eq!(policy.roster().queue().collect::<Vec<_>>(), [5]);
        // A worker that is syncing cannot report ready again until the sync is over.
        policy.ready(1, 1e9, 1.0);
        assert_eq!(policy.roster().queue().collect::<Vec<_>>(), [5]);
        policy.finished(&launches[0].members, 2.0);
        policy.ready(1, 1e9, 1.0);
        assert_eq!(policy.decide(3.0)[0].members, vec![1, 5]);
    }

    #[test]
    fn all_reduce_waits_for_everyone_and_a_departure_unblocks_it() {
        let mut policy = AllReduce::default();
        for w in 0..3 {
            policy.join(w, 1e9, 0.0);
        }
        policy.ready(0, 1e9, 1.0);
        policy.ready(1, 1e9, 1.0);
        assert!(policy.decide(1.0).is_empty());
        policy.leave(2);
        let launch = policy.decide(1.0);
        assert_eq!(launch[0].members, vec![0, 1]);
        assert_eq!(launch[0].kind, SyncKind::Full);
    }

    #[test]
    fn weights_follow_staleness_and_a_sync_lifts_every_clock() {
        let mut policy = PartialReduce::new(2);
        policy.join(0, 1e9, 0.0);
        policy.join(1, 1e9, 0.0);
        policy.join(2, 1e9, 0.0);
        // Worker 0 completes two rounds with worker 2 before worker 1 finishes its first.
        for round in 0..2 {
            policy.ready(0, 1e9, 1.0);
            policy.ready(2, 1e9, 1.0);
            let launch = policy.decide(round as f64).remove(0);
            policy.finished(&launch.members, round as f64 + 0.5);
        }
        policy.ready(1, 1e9, 5.0);
        policy.ready(0, 1e9, 1.0);
        let launch = policy.decide(5.0).remove(0);
        assert_eq!(launch.members, vec![0, 1]);
        // Clocks 3 and 1: staleness 1 and 3.
        let w = &launch.weights;
        assert!(w[0] > w[1], "{w:?}");
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
}
