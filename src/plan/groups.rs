//! DS-Sync's divide-and-shuffle pattern (Wang et al., DS-Sync §III-B;
//! docs/src/design/sync.md#ds-sync-groups-from-the-topology): which workers average
//! their models together in each iteration, from the racks.
//!
//! Every iteration, the workers of a rack form an intra-rack group, except one
//! representative per rack; the representatives form the inter-rack group. The racks'
//! workers take turns as representative, so information crosses racks. When contention
//! is reported:
//! - on a rack's inter-rack link: that rack's representative leaves the large inter-rack
//!   group and averages with one regular representative only, a partner that changes
//!   every iteration;
//! - on a worker's NIC: the worker never represents its rack and, when the rack has
//!   enough workers, averages with one regular rack-mate (changing every iteration)
//!   while the rest form the large intra-rack group.
//!
//! The pattern repeats with period B (the longest rotation); within one period every
//! worker of a rack represents it at least once. Averaging within groups is a doubly
//! stochastic W_k; the period is sound when ∏ W_k mixes everyone: we check that the
//! groups of one period connect all workers and report λ₂ of PᵀP for P = W_{B−1}⋯W₀
//! (the squared contraction of the distance to consensus per period, Lemma IV.1),
//! which is below 1 exactly then.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// A rack's workers, by rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Rack {
    pub name: String,
    pub ranks: Vec<u32>,
}

impl Rack {
    /// The plan's racks with their hosts' ranks.
    pub fn of_plan(plan: &super::Plan) -> Vec<Rack> {
        plan.racks
            .iter()
            .enumerate()
            .map(|(i, rack)| Rack {
                name: rack.name.clone(),
                ranks: plan
                    .hosts
                    .iter()
                    .filter(|h| h.rack == i)
                    .map(|h| h.rank)
                    .collect(),
            })
            .collect()
    }
}

/// Reported contention.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Contention {
    /// Racks (indices) whose inter-rack link is slowed by other traffic.
    pub racks: BTreeSet<usize>,
    /// Workers (ranks) whose NIC is shared with another job.
    pub workers: BTreeSet<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    IntraRack,
    /// A worker with a contended NIC and one rack-mate.
    IntraRackPair,
    InterRack,
    /// A contended rack's representative and one regular representative.
    InterRackPair,
    /// A contended worker with no rack-mate free to average with (its only rack-mate
    /// represents the rack) and a rotating worker of another rack.
    CrossRackPair,
}

impl GroupKind {
    pub fn label(self) -> &'static str {
        match self {
            GroupKind::IntraRack => "intra-rack",
            GroupKind::IntraRackPair => "intra-rack pair",
            GroupKind::InterRack => "inter-rack",
            GroupKind::InterRackPair => "inter-rack pair",
            GroupKind::CrossRackPair => "cross-rack pair",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    pub kind: GroupKind,
    /// The rack, for intra-rack groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Ascending.
    pub ranks: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Iteration {
    pub iteration: usize,
    /// Groups of two or more workers; a worker in none keeps its own model.
    pub groups: Vec<Group>,
}

/// One period of the pattern; iteration t of training uses `iterations[t % period]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pattern {
    pub workers: usize,
    pub period: usize,
    pub iterations: Vec<Iteration>,
    pub mixing: Mixing,
}

/// Whether one period's averaging reaches consensus.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Mixing {
    /// The groups of one period connect every worker.
    pub connected: bool,
    /// λ₂(PᵀP), P the product of one period's averaging matrices: below 1 when
    /// connected, 1 when not.
    pub second_eigenvalue: f64,
}

impl Pattern {
    /// The pattern for `racks` (ranks 0..n, each in one rack) under `contention`.
    ///
    /// When every rack has at most two workers, a rack's non-representative has nobody
    /// to average with inside the rack, and representatives rotating in lockstep would
    /// split the workers into classes that never meet (with racks of two: the first
    /// workers at even iterations, the second at odd ones). The period is then doubled,
    /// the second half shifting rack r's rotation by r, which joins the classes.
    pub fn divide_and_shuffle(racks: &[Rack], contention: &Contention) -> Pattern {
        let workers = racks.iter().map(|r| r.ranks.len()).sum();
        let base = period(racks, contention);
        let build = |halves: usize| {
            let iterations = (0..base * halves)
                .map(|t| Iteration {
                    iteration: t,
                    groups: iteration(racks, contention, t, t / base),
                })
                .collect();
            Pattern::from_iterations(workers, iterations)
        };
        let pattern = build(1);
        if pattern.mixing.connected {
            return pattern;
        }
        let doubled = build(2);
        if doubled.mixing.connected {
            doubled
        } else {
            pattern
        }
    }

    /// A pattern from explicit groups (ranks below `workers`), with its mixing checked.
    pub fn from_iterations(workers: usize, iterations: Vec<Iteration>) -> Pattern {
        let mixing = mixing(workers, &iterations);
        Pattern {
            workers,
            period: iterations.len(),
            iterations,
            mixing,
        }
    }

    /// Ranks whose averaging never reaches rank 0's over one period, ascending (empty
    /// when the pattern mixes).
    pub fn unreached(&self) -> Vec<u32> {
        let mut reached = BTreeSet::from([0u32]);
        loop {
            let before = reached.len();
            for g in self.iterations.iter().flat_map(|it| &it.groups) {
                if g.ranks.iter().any(|r| reached.contains(r)) {
                    reached.extend(g.ranks.iter().copied());
                }
            }
            if reached.len() == before {
                break;
            }
        }
        (0..self.workers as u32)
            .filter(|r| !reached.contains(r))
            .collect()
    }

    /// For each iteration, the index of each rank's group (`None`: on its own).
    pub fn group_of(&self, rank: u32) -> Vec<Option<usize>> {
        self.iterations
            .iter()
            .map(|it| it.groups.iter().position(|g| g.ranks.contains(&rank)))
            .collect()
    }
}

fn period(racks: &[Rack], contention: &Contention) -> usize {
    let regular = |rack: &Rack| {
        rack.ranks
            .iter()
            .filter(|r| !contention.workers.contains(r))
            .count()
    };
    let representatives = if racks.len() > 1 {
        racks.iter().map(|r| regular(r).max(1)).max().unwrap_or(1)
    } else {
        1
    };
    let intra = racks.iter().map(|r| r.ranks.len()).max().unwrap_or(1);
    let inter = racks.len();
    representatives.max(intra).max(inter).max(1)
}

/// The groups of iteration `t`; in the `half`-th repetition of the base period, rack r's
/// representatives rotate `r · half` places further.
fn iteration(racks: &[Rack], contention: &Contention, t: usize, half: usize) -> Vec<Group> {
    let multi_rack = racks.len() > 1;
    let mut groups = Vec::new();
    let mut representatives = Vec::new();
    for (index, rack) in racks.iter().enumerate() {
        let (delayed, regular): (Vec<u32>, Vec<u32>) = rack
            .ranks
            .iter()
            .partition(|r| contention.workers.contains(r));
        let mut members = rack.ranks.clone();
        if multi_rack && !members.is_empty() {
            let pool = if regular.is_empty() {
                &delayed
            } else {
                &regular
            };
            let representative = pool[(t + index * half) % pool.len()];
            members.retain(|&r| r != representative);
            representatives.push(representative);
        }
        intra_rack(rack, &members, &delayed, t, &mut groups);
    }
    if multi_rack {
        inter_rack(racks, &representatives, contention, t, &mut groups);
    }
    groups.retain(|g| g.ranks.len() > 1);
    if multi_rack {
        pair_stranded(racks, contention, t, &mut groups);
    }
    for g in &mut groups {
        g.ranks.sort_unstable();
    }
    groups
}

/// The rack's non-representatives: one group, or pairs for contended workers when at
/// least two regular workers are left over for the large group.
fn intra_rack(rack: &Rack, members: &[u32], delayed: &[u32], t: usize, groups: &mut Vec<Group>) {
    let slow: Vec<u32> = members
        .iter()
        .copied()
        .filter(|r| delayed.contains(r))
        .collect();
    let others: Vec<u32> = members
        .iter()
        .copied()
        .filter(|r| !delayed.contains(r))
        .collect();
    let group = |kind, ranks| Group {
        kind,
        rack: Some(rack.name.clone()),
        ranks,
    };
    if slow.is_empty() || others.len() < slow.len() + 2 {
        groups.push(group(GroupKind::IntraRack, members.to_vec()));
        return;
    }
    let partners: Vec<u32> = (0..slow.len())
        .map(|j| others[(t + j) % others.len()])
        .collect();
    for (worker, partner) in slow.iter().zip(&partners) {
        groups.push(group(GroupKind::IntraRackPair, vec![*worker, *partner]));
    }
    let rest = others
        .into_iter()
        .filter(|r| !partners.contains(r))
        .collect();
    groups.push(group(GroupKind::IntraRack, rest));
}

/// Contended workers left in no group (a two-worker rack whose other worker
/// represents it) each pair with a worker of another rack, rotating with `t`: one that
/// is on its own this iteration, or else one taken from a group of three or more so
/// that group keeps averaging. A stranded worker with
/// no such partner pairs with another stranded one; a last one stays alone (the mixing
/// check then reports the pattern).
fn pair_stranded(racks: &[Rack], contention: &Contention, t: usize, groups: &mut Vec<Group>) {
    let grouped: BTreeSet<u32> = groups
        .iter()
        .flat_map(|g| g.ranks.iter().copied())
        .collect();
    let stranded: Vec<u32> = contention
        .workers
        .iter()
        .copied()
        .filter(|w| !grouped.contains(w))
        .collect();
    if stranded.is_empty() {
        return;
    }
    let rack_of: BTreeMap<u32, usize> = racks
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.ranks.iter().map(move |&rank| (rank, i)))
        .collect();
    let mut pairs: Vec<Vec<u32>> = Vec::new();
    let mut left = Vec::new();
    for (j, &worker) in stranded.iter().enumerate() {
        let other_regular =
            |r: u32| rack_of.get(&r) != rack_of.get(&worker) && !contention.workers.contains(&r);
        // Workers of other racks on their own this iteration (a rack of two's
        // non-representative) first: pairing costs nobody a group.
        let paired: BTreeSet<u32> = pairs.iter().flatten().copied().collect();
        let alone: Vec<u32> = racks
            .iter()
            .flat_map(|r| r.ranks.iter().copied())
            .filter(|r| other_regular(*r) && !grouped.contains(r) && !paired.contains(r))
            .collect();
        if !alone.is_empty() {
            pairs.push(vec![worker, alone[(t + j) % alone.len()]]);
            continue;
        }
        let candidates: Vec<(usize, u32)> = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| {
                g.ranks.len() >= 3 && matches!(g.kind, GroupKind::IntraRack | GroupKind::InterRack)
            })
            .flat_map(|(i, g)| g.ranks.iter().map(move |&r| (i, r)))
            .filter(|&(_, r)| other_regular(r))
            .collect();
        if candidates.is_empty() {
            left.push(worker);
            continue;
        }
        let (from, partner) = candidates[(t + j) % candidates.len()];
        groups[from].ranks.retain(|&r| r != partner);
        pairs.push(vec![worker, partner]);
    }
    pairs.extend(left.chunks(2).filter(|c| c.len() == 2).map(<[u32]>::to_vec));
    for mut ranks in pairs {
        ranks.sort_unstable();
        groups.push(Group {
            kind: GroupKind::CrossRackPair,
            rack: None,
            ranks,
        });
    }
}

/// The representatives: one group, or each contended rack's with a regular one (rotating)
/// and the rest together. Contended racks beyond the regular ones pair among themselves.
fn inter_rack(
    racks: &[Rack],
    representatives: &[u32],
    contention: &Contention,
    t: usize,
    groups: &mut Vec<Group>,
) {
    let present: Vec<usize> = (0..racks.len())
        .filter(|&i| !racks[i].ranks.is_empty())
        .collect();
    let mut slow = Vec::new();
    let mut regular = Vec::new();
    for (rack, &representative) in present.iter().zip(representatives) {
        if contention.racks.contains(rack) {
            slow.push(representative);
        } else {
            regular.push(representative);
        }
    }
    let group = |kind, ranks| Group {
        kind,
        rack: None,
        ranks,
    };
    if slow.is_empty() || regular.is_empty() {
        let all = representatives.to_vec();
        if slow.is_empty() {
            groups.push(group(GroupKind::InterRack, all));
        } else {
            for pair in all.chunks(2) {
                groups.push(group(GroupKind::InterRackPair, pair.to_vec()));
            }
        }
        return;
    }
    let paired = slow.len().min(regular.len());
    let partners: Vec<u32> = (0..paired)
        .map(|j| regular[(t + j) % regular.len()])
        .collect();
    for (rep, partner) in slow.iter().zip(&partners) {
        groups.push(group(GroupKind::InterRackPair, vec![*rep, *partner]));
    }
    for pair in slow[paired..].chunks(2) {
        groups.push(group(GroupKind::InterRackPair, pair.to_vec()));
    }
    let rest = regular
        .into_iter()
        .filter(|r| !partners.contains(r))
        .collect();
    groups.push(group(GroupKind::InterRack, rest));
}

fn mixing(workers: usize, iterations: &[Iteration]) -> Mixing {
    Mixing {
        connected: connected(workers, iterations),
        second_eigenvalue: second_eigenvalue(workers, iterations),
    }
}

fn connected(workers: usize, iterations: &[Iteration]) -> bool {
    let mut parent: Vec<usize> = (0..workers).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut components = workers;
    for group in iterations.iter().flat_map(|it| &it.groups) {
        for pair in group.ranks.windows(2) {
            let (a, b) = (
                root(&mut parent, pair[0] as usize),
                root(&mut parent, pair[1] as usize),
            );
            if a != b {
                parent[a] = b;
                components -= 1;
            }
        }
    }
    components <= 1
}

/// Power iteration for the largest eigenvalue of PᵀP on the vectors orthogonal to 1
/// (P is doubly stochastic, so 1 is its top singular vector and that subspace is
/// invariant). Each step applies the averaging matrices directly: O(B·n).
fn second_eigenvalue(workers: usize, iterations: &[Iteration]) -> f64 {
    if workers < 2 {
        return 0.0;
    }
    let average = |x: &mut [f64], groups: &[Group]| {
        for g in groups {
            let mean = g.ranks.iter().map(|&r| x[r as usize]).sum::<f64>() / g.ranks.len() as f64;
            for &r in &g.ranks {
                x[r as usize] = mean;
            }
        }
    };
    let center = |x: &mut [f64]| {
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        x.iter_mut().for_each(|v| *v -= mean);
        x.iter().map(|v| v * v).sum::<f64>().sqrt()
    };
    // A fixed, irregular start so that no structure of the pattern hides from it.
    let mut x: Vec<f64> = (0..workers)
        .map(|i| ((i as f64 + 1.0) * 12.9898).sin() * 43758.5453 % 1.0)
        .collect();
    let mut norm = center(&mut x);
    let mut estimate = 0.0;
    for _ in 0..5000 {
        if norm == 0.0 {
            return 0.0;
        }
        x.iter_mut().for_each(|v| *v /= norm);
        for it in iterations {
            average(&mut x, &it.groups);
        }
        for it in iterations.iter().rev() {
            average(&mut x, &it.groups);
        }
        norm = center(&mut x);
        if (norm - estimate).abs() < 1e-13 {
            return norm;
        }
        estimate = norm;
    }
    estimate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn racks(sizes: &[usize]) -> Vec<Rack> {
        let mut next = 0;
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let ranks = (next..next + size as u32).collect();
                next += size as u32;
                Rack {
                    name: format!("r{i}"),
                    ranks,
                }
            })
            .collect()
    }

    fn groups_at(pattern: &Pattern, t: usize) -> Vec<(GroupKind, Vec<u32>)> {
        pattern.iterations[t]
            .groups
            .iter()
            .map(|g| (g.kind, g.ranks.clone()))
            .collect()
    }

    /// The first group of this kind in the iteration.
    fn first(it: &Iteration, kind: GroupKind) -> &Group {
        it.groups.iter().find(|g| g.kind == kind).unwrap()
    }

    /// Every worker is in at most one group per iteration, and one period mixes all.
    fn assert_sound(pattern: &Pattern) {
        assert!(pattern.mixing.connected && pattern.mixing.second_eigenvalue < 1.0);
        for it in &pattern.iterations {
            let mut seen = BTreeSet::new();
            for g in &it.groups {
                for r in &g.ranks {
                    assert!(
                        seen.insert(*r),
                        "rank {r} twice in iteration {}",
                        it.iteration
                    );
                }
            }
        }
    }

    #[test]
    fn one_rack_is_one_group_every_iteration() {
        let p = Pattern::divide_and_shuffle(&racks(&[4]), &Contention::default());
        assert_eq!(p.period, 4);
        for t in 0..p.period {
            assert_eq!(
                groups_at(&p, t),
                vec![(GroupKind::IntraRack, vec![0, 1, 2, 3])]
            );
        }
        assert!(p.mixing.connected);
        assert!(p.mixing.second_eigenvalue < 1e-9, "{:?}", p.mixing);
    }

    #[test]
    fn two_racks_rotate_their_representatives() {
        let p = Pattern::divide_and_shuffle(&racks(&[3, 3]), &Contention::default());
        assert_eq!(p.period, 3);
        assert_eq!(
            groups_at(&p, 0),
            vec![
                (GroupKind::IntraRack, vec![1, 2]),
                (GroupKind::IntraRack, vec![4, 5]),
                (GroupKind::InterRack, vec![0, 3]),
            ]
        );
        assert_eq!(groups_at(&p, 2)[2], (GroupKind::InterRack, vec![2, 5]));
        assert!(p.mixing.connected);
        assert!(p.mixing.second_eigenvalue < 1.0, "{:?}", p.mixing);
    }

    #[test]
    fn four_racks_every_worker_represents_its_rack_once_per_period() {
        let p = Pattern::divide_and_shuffle(&racks(&[4, 4, 4, 4]), &Contention::default());
        assert_eq!(p.period, 4);
        let mut represented = BTreeSet::new();
        for it in &p.iterations {
            let inter: Vec<_> = it
                .groups
                .iter()
                .filter(|g| g.kind == GroupKind::InterRack)
                .collect();
            assert_eq!(inter.len(), 1);
            assert_eq!(inter[0].ranks.len(), 4);
            represented.extend(inter[0].ranks.iter().copied());
        }
        assert_eq!(represented.len(), 16);
        assert_sound(&p);
    }

    #[test]
    fn uneven_racks_cover_everyone_within_the_longest_rotation() {
        let p = Pattern::divide_and_shuffle(&racks(&[2, 5, 1]), &Contention::default());
        assert_eq!(p.period, 5);
        // The one-host rack's only worker represents it every iteration.
        for it in &p.iterations {
            let inter = first(it, GroupKind::InterRack);
            assert!(inter.ranks.contains(&7));
            assert_eq!(inter.ranks.len(), 3);
        }
        assert_sound(&p);
    }

    #[test]
    fn a_contended_racks_representative_averages_with_one_regular_one_that_rotates() {
        let contention = Contention {
            racks: BTreeSet::from([0]),
            ..Contention::default()
        };
        let p = Pattern::divide_and_shuffle(&racks(&[2, 2, 2, 2]), &contention);
        let mut partners = BTreeSet::new();
        for it in &p.iterations {
            let pair: Vec<_> = it
                .groups
                .iter()
                .filter(|g| g.kind == GroupKind::InterRackPair)
                .collect();
            assert_eq!(pair.len(), 1);
            assert_eq!(pair[0].ranks.len(), 2);
            assert!(
                pair[0].ranks.iter().any(|r| *r < 2),
                "rack 0 is in the pair"
            );
            partners.insert(pair[0].ranks.iter().copied().find(|r| *r >= 2).unwrap() / 2);
            let large = first(it, GroupKind::InterRack);
            assert_eq!(large.ranks.len(), 2);
        }
        // Every regular rack took its turn with the contended one.
        assert_eq!(partners, BTreeSet::from([1, 2, 3]));
        assert_sound(&p);
    }

    #[test]
    fn a_contended_worker_never_represents_and_pairs_with_rotating_rack_mates() {
        let contention = Contention {
            workers: BTreeSet::from([0]),
            ..Contention::default()
        };
        let p = Pattern::divide_and_shuffle(&racks(&[6, 6]), &contention);
        let mut partners = BTreeSet::new();
        for it in &p.iterations {
            let inter = first(it, GroupKind::InterRack);
            assert!(!inter.ranks.contains(&0));
            let pair = first(it, GroupKind::IntraRackPair);
            assert_eq!(pair.ranks[0], 0);
            partners.insert(pair.ranks[1]);
            let large = it
                .groups
                .iter()
                .find(|g| g.kind == GroupKind::IntraRack && g.rack.as_deref() == Some("r0"))
                .unwrap();
            assert_eq!(large.ranks.len(), 3);
        }
        assert!(partners.len() >= 3, "{partners:?}");
        assert_sound(&p);
    }

    #[test]
    fn a_small_rack_keeps_its_contended_worker_in_the_one_intra_rack_group() {
        let contention = Contention {
            workers: BTreeSet::from([1]),
            ..Contention::default()
        };
        let p = Pattern::divide_and_shuffle(&racks(&[3, 3]), &contention);
        for it in &p.iterations {
            assert!(it.groups.iter().all(|g| g.kind != GroupKind::IntraRackPair));
            let intra = it
                .groups
                .iter()
                .find(|g| g.rack.as_deref() == Some("r0"))
                .unwrap();
            assert!(intra.ranks.contains(&1));
        }
    }

    /// A contended worker whose only rack-mate represents the rack is not left out: it
    /// pairs with a worker of another rack (a different one over the period), and the
    /// pattern mixes.
    #[test]
    fn a_contended_worker_in_a_rack_of_two_pairs_across_racks() {
        let contention = Contention {
            workers: BTreeSet::from([0]),
            ..Contention::default()
        };
        let p = Pattern::divide_and_shuffle(&racks(&[2, 4, 4]), &contention);
        let mut partners = BTreeSet::new();
        for it in &p.iterations {
            let pair = first(it, GroupKind::CrossRackPair);
            assert_eq!(pair.ranks.len(), 2);
            assert_eq!(pair.ranks[0], 0);
            assert!(pair.ranks[1] >= 2, "a worker of another rack: {pair:?}");
            partners.insert(pair.ranks[1]);
            // Rank 1 represents rack r0; every group keeps two or more workers.
            assert!(first(it, GroupKind::InterRack).ranks.contains(&1));
            assert!(it.groups.iter().all(|g| g.ranks.len() >= 2));
            let seen: Vec<u32> = it.groups.iter().flat_map(|g| g.ranks.clone()).collect();
            let unique: BTreeSet<u32> = seen.iter().copied().collect();
            assert_eq!(seen.len(), unique.len(), "a worker in two groups: {it:?}");
        }
        assert!(partners.len() >= 2, "{partners:?}");
        assert_sound(&p);
        // Racks of two (the lab): the stranded worker pairs with the other rack's
        // worker that does not represent it this iteration.
        for sizes in [&[2, 2][..], &[2, 2, 2]] {
            let p = Pattern::divide_and_shuffle(&racks(sizes), &contention);
            assert!(p.iterations.iter().all(|it| {
                it.groups
                    .iter()
                    .any(|g| g.kind == GroupKind::CrossRackPair && g.ranks.contains(&0))
            }));
            assert_sound(&p);
        }
    }

    #[test]
    fn racks_of_two_double_the_period_so_both_halves_meet() {
        let p = Pattern::divide_and_shuffle(&racks(&[2, 2]), &Contention::default());
        assert_eq!(p.period, 4);
        let inter: Vec<Vec<u32>> = (0..4).map(|t| groups_at(&p, t)[0].1.clone()).collect();
        assert_eq!(inter, vec![vec![0, 2], vec![1, 3], vec![0, 3], vec![1, 2]]);
        assert!(p.mixing.connected && p.mixing.second_eigenvalue < 1.0);
    }

    #[test]
    fn a_disconnected_pattern_fails_the_check() {
        let groups = |a: Vec<u32>, b: Vec<u32>| Iteration {
            iteration: 0,
            groups: vec![
                Group {
                    kind: GroupKind::IntraRack,
                    rack: None,
                    ranks: a,
                },
                Group {
                    kind: GroupKind::IntraRack,
                    rack: None,
                    ranks: b,
                },
            ],
        };
        let p = Pattern::from_iterations(
            4,
            vec![
                groups(vec![0, 1], vec![2, 3]),
                groups(vec![1, 0], vec![3, 2]),
            ],
        );
        assert!(!p.mixing.connected);
        assert_eq!(p.unreached(), [2, 3]);
        assert!(
            (p.mixing.second_eigenvalue - 1.0).abs() < 1e-9,
            "{:?}",
            p.mixing
        );
        // Shuffling one worker across makes it mix.
        let p = Pattern::from_iterations(
            4,
            vec![
                groups(vec![0, 1], vec![2, 3]),
                groups(vec![0, 2], vec![1, 3]),
            ],
        );
        assert!(p.mixing.connected);
        assert!(p.unreached().is_empty());
        assert!(p.mixing.second_eigenvalue < 1.0 - 1e-6, "{:?}", p.mixing);
    }
}
