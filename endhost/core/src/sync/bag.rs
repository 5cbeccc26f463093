//! BAG, bandwidth-aware grouping (Algorithm 1 of the Selective Reduce document).

use super::Member;

/// Splits `ready` into groups: sorted by bandwidth, non-increasing, each group takes its
/// first `p` workers unconditionally, then every following worker whose bandwidth is at
/// least (1 − η) times that of the p-th, then the next group starts.
///
/// The document's listing tests `len(g) ≤ p` on line 6, which would put p + 1 workers in a
/// group before the threshold applies; its own Figure 3 example (p = 2 giving {w2, w4} and
/// {w1, w3}) and its text ("select p workers to generate a group") need `len(g) < p`,
/// which is what this does.
///
/// Ties in bandwidth keep the input order (the ready queue's arrival order). O(n log n).
pub fn bag(ready: &[Member], p: usize, eta: f64) -> Vec<Vec<Member>> {
    let p = p.max(1);
    let mut sorted = ready.to_vec();
    sorted.sort_by(|a, b| b.bandwidth.total_cmp(&a.bandwidth));
    let mut groups = Vec::new();
    let mut group: Vec<Member> = Vec::new();
    let mut threshold = 0.0;
    for worker in sorted {
        if group.len() < p {
            threshold = worker.bandwidth * (1.0 - eta);
            group.push(worker);
        } else if worker.bandwidth >= threshold {
            group.push(worker);
        } else {
            groups.push(std::mem::take(&mut group));
            threshold = worker.bandwidth * (1.0 - eta);
            group.push(worker);
        }
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(bandwidths: &[f64]) -> Vec<Member> {
        bandwidths
            .iter()
            .enumerate()
            .map(|(i, &bandwidth)| Member {
                id: Some(i as u32 + 1),
                bandwidth,
            })
            .collect()
    }

    fn ids(groups: &[Vec<Member>]) -> Vec<Vec<u32>> {
        groups
            .iter()
            .map(|g| g.iter().map(|m| m.id.unwrap()).collect())
            .collect()
    }

    #[test]
    fn figure_3_splits_four_ready_workers_by_bandwidth() {
        // Figure 3: w1 and w3 have bandwidth 1, w2 and w4 at least 5 (the bandwidth-aware
        // split's groups take 10 s and 2 s with v = 5).
        let ready = workers(&[1.0, 5.0, 1.0, 6.0]);
        assert_eq!(ids(&bag(&ready, 2, 0.3)), vec![vec![4, 2], vec![1, 3]]);
    }

    #[test]
    fn a_group_grows_past_p_while_bandwidth_stays_within_eta() {
        // p = 2: 10, 9 start the group (threshold 9 · 0.7 = 6.3); 7 joins; 6 starts the next.
        let ready = workers(&[10.0, 9.0, 7.0, 6.0, 5.0, 1.0]);
        assert_eq!(
            ids(&bag(&ready, 2, 0.3)),
            vec![vec![1, 2, 3], vec![4, 5], vec![6]]
        );
    }

    #[test]
    fn eta_zero_gives_groups_of_p_and_equal_bandwidths_extend() {
        let ready = workers(&[8.0, 4.0, 2.0, 1.0, 1.0]);
        assert_eq!(ids(&bag(&ready, 2, 0.0)), vec![vec![1, 2], vec![3, 4, 5]]);
    }

    #[test]
    fn fewer_than_p_make_one_short_group_and_none_make_none() {
        assert_eq!(ids(&bag(&workers(&[3.0]), 4, 0.3)), vec![vec![1]]);
        assert!(bag(&[], 4, 0.3).is_empty());
    }
}
