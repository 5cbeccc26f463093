//! Selective reduce: Algorithm 3's decision step over BAG and BPAWR.

use std::collections::HashMap;

use super::bag::bag;
use super::bpawr::{Knobs, Verdict, bpawr};
use super::cdf::RuntimeCdf;
use super::policy::{Policy, Roster};
use super::{Launch, SyncKind, WorkerId};

/// Algorithm 3 without its loop: the driver calls [`Policy::decide`] after every ready
/// report and after every Δt without one (`GetReadyWorkerID(Δt)` returning nil).
#[derive(Debug)]
pub struct SelectiveReduce {
    roster: Roster,
    knobs: Knobs,
    /// c: every c-th synchronization is a full weighted allreduce of all workers. `None`:
    /// never (the document's evaluation does not give c; its baselines have none).
    full_every: Option<u64>,
    /// k: synchronizations launched so far.
    rounds: u64,
    cdf: RuntimeCdf,
    /// Learn F from observed rounds (cold start) or keep the given one (warm start).
    learn: bool,
    /// Workers a wait-and-replace verdict holds back: since when, and the last ready
    /// report at that moment.
    held: HashMap<WorkerId, (f64, u64)>,
    wasted: f64,
}

impl SelectiveReduce {
    /// `cdf` is F_Φ when known (warm start); pass an empty one and `learn = true` for a
    /// cold start.
    pub fn new(knobs: Knobs, full_every: Option<u64>, cdf: RuntimeCdf, learn: bool) -> Self {
        Self {
            roster: Roster::default(),
            knobs,
            full_every: full_every.filter(|&c| c > 0),
            rounds: 0,
            cdf,
            learn,
            held: HashMap::new(),
            wasted: 0.0,
        }
    }

    /// Synchronizations launched so far (k).
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    fn launch(&mut self, members: Vec<WorkerId>, kind: SyncKind, now: f64) -> Launch {
        self.account_waiting(&members, now);
        self.rounds += 1;
        self.roster.launch(members, kind)
    }

    /// A held worker's wait was wasted when nobody who became ready after it was held
    /// joined its group.
    fn account_waiting(&mut self, members: &[WorkerId], now: f64) {
        let newest = members
            .iter()
            .filter_map(|&w| self.roster.arrival(w))
            .max()
            .unwrap_or(0);
        for w in members {
            if let Some((since, arrivals_then)) = self.held.remove(w)
                && newest <= arrivals_then
            {
                self.wasted += now - since;
            }
        }
    }
}

impl Policy for SelectiveReduce {
    fn roster(&self) -> &Roster {
        &self.roster
    }

    fn roster_mut(&mut self) -> &mut Roster {
        &mut self.roster
    }

    fn observe(&mut self, compute_seconds: f64) {
        if self.learn {
            self.cdf.record(compute_seconds);
        }
    }

    fn wasted_wait_seconds(&self) -> f64 {
        self.wasted
    }

    fn leave(&mut self, worker: WorkerId) {
        self.held.remove(&worker);
        self.roster.leave(worker);
    }

    fn decide(&mut self, now: f64) -> Vec<Launch> {
        let ready = self.roster.queue().len();
        // Lines 5–7. The listing never advances k after a full round, which would make
        // every round full; it counts here like any other synchronization.
        if let Some(c) = self.full_every
            && self.rounds.is_multiple_of(c)
        {
            if ready == self.roster.len() && ready > 0 {
                let everyone = self.roster.queue().collect();
                return vec![self.launch(everyone, SyncKind::Full, now)];
            }
            return Vec::new();
        }
        // Line 8: strictly more than p ready. When workers have left and p or fewer
        // remain, all of them together are enough: otherwise the job would stop.
        let live = self.roster.len();
        let knobs = Knobs {
            min_group: self.knobs.min_group.min(live),
            ..self.knobs
        };
        if ready <= knobs.min_group && ready < live {
            return Vec::new();
        }
        let mut training = self.roster.computing(now);
        let mut groups = bag(&self.roster.ready_members(), knobs.min_group, knobs.eta);
        let mut launches = Vec::new();
        for i in 0..groups.len() {
            let verdict = bpawr(&mut training, &groups[i], &knobs, &self.cdf);
            match verdict {
                Verdict::Launch => {
                    let members = groups[i].iter().filter_map(|m| m.id).collect();
                    launches.push(self.launch(members, SyncKind::Partial, now));
                }
                Verdict::WaitAndReplace { kept, replaced } => {
                    let arrivals = self.roster.arrivals();
                    for m in &kept {
                        let id = m.id.expect("groups hold real workers");
                        self.held.entry(id).or_insert((now, arrivals));
                    }
                    if i + 1 < groups.len() {
                        groups[i] = kept;
                        groups[i + 1].extend(replaced);
                    }
                }
                Verdict::Wait => {}
            }
        }
        launches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(min_group: usize) -> Knobs {
        Knobs {
            min_group,
            eta: 0.3,
            theta: 1.0,
            delta_t: 1.0,
            model_bits: 5.0,
        }
    }

    /// Figure 3: w1..w5 ready at 1, 2, 3, 3 and 13 s; bandwidths 1, 5, 1, 6, 1; v = 5,
    /// p = 2 (Algorithm 3 needs more than p ready). Runs the controller as the driver
    /// would and returns the launches with their times.
    fn figure_3(learn: bool, cdf: RuntimeCdf) -> Vec<(f64, Vec<WorkerId>)> {
        let bandwidth = [1.0, 5.0, 1.0, 6.0, 1.0];
        let ready_at = [1.0, 2.0, 3.0, 3.0, 13.0];
        let mut policy = SelectiveReduce::new(knobs(2), None, cdf, learn);
        for w in 1..=5u32 {
            policy.join(w, bandwidth[w as usize - 1], 0.0);
        }
        let mut launched = Vec::new();
        for t in [1.0, 2.0, 3.0] {
            for w in 1..=5u32 {
                if ready_at[w as usize - 1] == t {
                    policy.ready(w, bandwidth[w as usize - 1], t);
                }
            }
            for launch in policy.decide(t) {
                launched.push((t, launch.members));
            }
        }
        launched
    }

    #[test]
    fn figure_3_groups_by_bandwidth_at_three_seconds() {
        // F known in advance from the figure's own round times.
        let cdf = RuntimeCdf::from_samples([1.0, 2.0, 3.0, 3.0, 13.0], 16);
        assert_eq!(
            figure_3(false, cdf),
            vec![(3.0, vec![2, 4]), (3.0, vec![1, 3])]
        );
    }

    #[test]
    fn a_slow_group_waits_for_an_expected_fast_worker_and_takes_it() {
        // p = 2. Ready at 1 s: 1 (bandwidth 10), 2 (1), 3 (1); BAG makes one group of all
        // three (after the p-th the threshold is 0.7). Worker 4 (10) is computing and
        // certain to be ready within Δt: g* = {1, expected} would save
        // 2·5/1 − 2·5/10 = 9 s > θ·Δt = 1 s, so the group waits.
        let certain = RuntimeCdf::from_samples([0.5], 8);
        let mut policy = SelectiveReduce::new(knobs(2), None, certain, false);
        for (w, b) in [(1, 10.0), (2, 1.0), (3, 1.0), (4, 10.0), (5, 1.0)] {
            policy.join(w, b, 0.0);
        }
        for (w, b) in [(1, 10.0), (2, 1.0), (3, 1.0)] {
            policy.ready(w, b, 1.0);
        }
        assert!(policy.decide(1.0).is_empty());
        // Worker 4 arrives: {1, 4} and {2, 3} launch, and worker 1's wait paid off.
        policy.ready(4, 10.0, 1.5);
        let members: Vec<Vec<WorkerId>> =
            policy.decide(1.5).into_iter().map(|l| l.members).collect();
        assert_eq!(members, vec![vec![1, 4], vec![2, 3]]);
        assert_eq!(policy.wasted_wait_seconds(), 0.0);
    }

    #[test]
    fn a_wait_nobody_joins_is_counted_as_wasted() {
        let certain = RuntimeCdf::from_samples([0.5], 8);
        let mut policy = SelectiveReduce::new(knobs(2), None, certain, false);
        for (w, b) in [(1, 10.0), (2, 1.0), (3, 1.0), (4, 10.0)] {
            policy.join(w, b, 0.0);
        }
        for w in 1..=3 {
            policy.ready(w, if w == 1 { 10.0 } else { 1.0 }, 1.0);
        }
        assert!(policy.decide(1.0).is_empty());
        // Worker 4 leaves instead of arriving; the next decision launches without it.
        policy.leave(4);
        let launches = policy.decide(2.0);
        assert_eq!(launches[0].members, vec![1, 2, 3]);
        // Worker 1 was held from 1 s to 2 s and nobody new joined.
        assert_eq!(policy.wasted_wait_seconds(), 1.0);
    }

    #[test]
    fn every_c_th_round_is_a_full_allreduce_of_everyone() {
        let cdf = RuntimeCdf::from_samples([100.0], 8);
        let mut policy = SelectiveReduce::new(knobs(1), Some(3), cdf, false);
        for w in 0..4 {
            policy.join(w, 1.0, 0.0);
        }
        // k = 0: only a full round, once all four are ready.
        for w in 0..3 {
            policy.ready(w, 1.0, 1.0);
        }
        assert!(policy.decide(1.0).is_empty());
        policy.ready(3, 1.0, 1.0);
        let full = policy.decide(1.0);
        assert_eq!(full.len(), 1);
        assert_eq!(full[0].kind, SyncKind::Full);
        assert_eq!(full[0].members, vec![0, 1, 2, 3]);
        policy.finished(&full[0].members, 2.0);
        // k = 1, 2: partial rounds (more than p = 1 ready).
        let mut partial = 0;
        for t in [3.0, 4.0] {
            policy.ready(0, 1.0, 1.0);
            policy.ready(1, 1.0, 1.0);
            for launch in policy.decide(t) {
                assert_eq!(launch.kind, SyncKind::Partial);
                partial += 1;
                policy.finished(&launch.members, t + 0.5);
            }
        }
        assert_eq!(partial, 2);
        assert_eq!(policy.rounds(), 3);
        // k = 3: full again; two ready are not enough.
        policy.ready(0, 1.0, 1.0);
        policy.ready(1, 1.0, 1.0);
        assert!(policy.decide(5.0).is_empty());
    }

    #[test]
    fn when_p_or_fewer_workers_remain_all_of_them_synchronize() {
        let cdf = RuntimeCdf::from_samples([0.5], 8);
        let mut policy = SelectiveReduce::new(knobs(3), None, cdf, false);
        for w in 0..4 {
            policy.join(w, 1.0, 0.0);
        }
        policy.leave(3);
        policy.ready(0, 1.0, 1.0);
        policy.ready(1, 1.0, 1.0);
        assert!(policy.decide(1.0).is_empty());
        policy.ready(2, 1.0, 1.0);
        assert_eq!(policy.decide(1.0)[0].members, vec![0, 1, 2]);
    }

    #[test]
    fn cold_start_learns_the_distribution_from_reported_rounds() {
        let mut policy = SelectiveReduce::new(knobs(2), None, RuntimeCdf::new(16), true);
        policy.join(1, 1.0, 0.0);
        policy.ready(1, 1.0, 0.25);
        assert_eq!(policy.cdf.at(0.3), 1.0);
        let mut warm =
            SelectiveReduce::new(knobs(2), None, RuntimeCdf::from_samples([9.0], 4), false);
        warm.join(1, 1.0, 0.0);
        warm.ready(1, 1.0, 0.25);
        assert_eq!(warm.cdf.at(0.3), 0.0);
    }
}
