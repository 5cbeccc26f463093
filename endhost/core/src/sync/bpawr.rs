//! BPAWR, bandwidth- and progress-aware waiting and replacement (Algorithm 2).

use super::bag::bag;
use super::cdf::RuntimeCdf;
use super::{Member, WorkerId, transfer_bound};

/// A worker still computing its round, which BPAWR may decide to wait for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InTraining {
    pub id: WorkerId,
    pub bandwidth: f64,
    /// Seconds since it started its current round (t_i).
    pub elapsed: f64,
}

/// The knobs Algorithms 2 and 3 share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knobs {
    /// p: the smallest group that may synchronize.
    pub min_group: usize,
    /// η: how far below a group's p-th bandwidth BAG still extends it.
    pub eta: f64,
    /// θ: how many waiting slots a replacement must save to be worth it.
    pub theta: f64,
    /// Δt: the waiting slot, seconds.
    pub delta_t: f64,
    /// v: the model's size in bits.
    pub model_bits: f64,
}

/// What to do with one group now.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Fewer than p members: wait for more ready workers.
    Wait,
    /// Waiting Δt for faster workers should save more than θ·Δt: keep these members
    /// waiting and hand the slower ones (g_Δ) to the next group.
    WaitAndReplace {
        kept: Vec<Member>,
        replaced: Vec<Member>,
    },
    /// Synchronize now.
    Launch,
}

/// Algorithm 2 for `group`. `training` is 𝕊: workers BPAWR examines are removed from it,
/// so that no two groups count on the same worker.
///
/// The listing returns `True` on line 17 (replace) and `False` on line 19, while Algorithm 3
/// launches the group when the flag is true; read literally, a group where nothing is worth
/// replacing would never launch. The text settles it: on line 17 the group waits and
/// replaces, on line 19 it goes ahead without waiting. [`Verdict`] names the three outcomes.
///
/// p_i = F(t_i + Δt) as line 26 and Eq. 4 give it; k = ⌊Σ p_i⌋ expected workers, with the
/// p-weighted mean bandwidth of the candidates.
pub fn bpawr(
    training: &mut Vec<InTraining>,
    group: &[Member],
    knobs: &Knobs,
    cdf: &RuntimeCdf,
) -> Verdict {
    if group.len() < knobs.min_group {
        return Verdict::Wait;
    }
    let bottleneck = min_bandwidth(group);
    let mut expected = 0.0;
    let mut weighted_bandwidth = 0.0;
    training.retain(|worker| {
        if worker.bandwidth > bottleneck {
            let p = cdf.at(worker.elapsed + knobs.delta_t);
            expected += p;
            weighted_bandwidth += p * worker.bandwidth;
            false
        } else {
            true
        }
    });
    let k = expected.floor() as usize;
    let mut candidates = group.to_vec();
    if k > 0 {
        let bandwidth = weighted_bandwidth / expected;
        candidates.extend(std::iter::repeat_n(
            Member {
                id: None,
                bandwidth,
            },
            k,
        ));
    }
    let mut regrouped = bag(&candidates, knobs.min_group, knobs.eta).into_iter();
    let best = regrouped.next().expect("the group is not empty");
    let saved = transfer_bound(knobs.model_bits, bottleneck)
        - transfer_bound(knobs.model_bits, min_bandwidth(&best));
    if saved > knobs.theta * knobs.delta_t {
        // BAG's groups partition its input: g's members outside g* are in the others.
        let real = |m: &Member| m.id.is_some();
        Verdict::WaitAndReplace {
            kept: best.into_iter().filter(real).collect(),
            replaced: regrouped.flatten().filter(real).collect(),
        }
    } else {
        Verdict::Launch
    }
}

fn min_bandwidth(group: &[Member]) -> f64 {
    group
        .iter()
        .map(|m| m.bandwidth)
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: WorkerId, bandwidth: f64) -> Member {
        Member {
            id: Some(id),
            bandwidth,
        }
    }

    fn knobs() -> Knobs {
        // Figure 3: v = 5 units, p = 2; Δt = 1 s.
        Knobs {
            min_group: 2,
            eta: 0.3,
            theta: 1.0,
            delta_t: 1.0,
            model_bits: 5.0,
        }
    }

    #[test]
    fn a_group_below_p_waits_and_leaves_the_training_set_alone() {
        let mut training = vec![InTraining {
            id: 9,
            bandwidth: 10.0,
            elapsed: 0.0,
        }];
        let cdf = RuntimeCdf::from_samples([0.5], 8);
        let verdict = bpawr(&mut training, &[member(1, 1.0)], &knobs(), &cdf);
        assert_eq!(verdict, Verdict::Wait);
        assert_eq!(training.len(), 1);
    }

    #[test]
    fn figure_3_waits_for_the_fast_workers_instead_of_syncing_with_a_slow_one() {
        // At 2 s w1 (bandwidth 1) and w2 (5) are ready; w3 (1) and w4 (6) are computing and
        // certainly done within the next second; w5 (1) is the straggler.
        let mut training = vec![
            InTraining {
                id: 3,
                bandwidth: 1.0,
                elapsed: 2.0,
            },
            InTraining {
                id: 4,
                bandwidth: 6.0,
                elapsed: 2.0,
            },
            InTraining {
                id: 5,
                bandwidth: 1.0,
                elapsed: 2.0,
            },
        ];
        let group = [member(2, 5.0), member(1, 1.0)];
        // With a distribution where w4 is certain to be ready within Δt:
        let certain = RuntimeCdf::from_samples([2.5], 8);
        let verdict = bpawr(&mut training, &group, &knobs(), &certain);
        // g* = {w2, expected(6)}: 2·5/1 − 2·5/5 = 8 s saved > θ·Δt = 1 s.
        assert_eq!(
            verdict,
            Verdict::WaitAndReplace {
                kept: vec![member(2, 5.0)],
                replaced: vec![member(1, 1.0)]
            }
        );
        // Only the worker faster than the bottleneck was examined (and is now spoken for).
        let left: Vec<WorkerId> = training.iter().map(|w| w.id).collect();
        assert_eq!(left, vec![3, 5]);
        // With the figure's own round times, F(2 + 1) = 0.8 rounds down to no expected
        // worker: go now.
        let rounds = RuntimeCdf::from_samples([1.0, 2.0, 3.0, 3.0, 13.0], 8);
        let mut training = vec![InTraining {
            id: 4,
            bandwidth: 6.0,
            elapsed: 2.0,
        }];
        assert_eq!(
            bpawr(&mut training, &group, &knobs(), &rounds),
            Verdict::Launch
        );
    }

    #[test]
    fn a_saving_below_theta_slots_launches_now() {
        let mut training = vec![InTraining {
            id: 3,
            bandwidth: 6.0,
            elapsed: 0.0,
        }];
        let certain = RuntimeCdf::from_samples([0.1], 8);
        let group = [member(1, 5.0), member(2, 5.0)];
        // Replacing a 5 by a 6 saves 2·5/5 − 2·5/6 ≈ 0.33 s < θ·Δt = 1 s.
        assert_eq!(
            bpawr(&mut training, &group, &knobs(), &certain),
            Verdict::Launch
        );
        let eager = Knobs {
            theta: 0.1,
            ..knobs()
        };
        let mut training = vec![InTraining {
            id: 3,
            bandwidth: 6.0,
            elapsed: 0.0,
        }];
        // p = 2 and BAG keeps both 5s with the 6 (5 ≥ 6·0.7): nothing to replace, and
        // the bottleneck is unchanged, so nothing is saved.
        assert_eq!(
            bpawr(&mut training, &group, &eager, &certain),
            Verdict::Launch
        );
    }
}
