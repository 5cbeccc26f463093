//! Staleness weights for a weighted allreduce, as partial reduce's reference controller
//! computes them (its public demo's `exp_func` with α = 0.9; docs/src/design/sources.md).

/// The decay partial reduce uses.
pub const ALPHA: f64 = 0.9;

/// Weights for a group whose members have these local clocks (completed updates). A
/// member's staleness is `max − clock + 1`; staleness level k carries mass α^(k−1)(1 − α),
/// a level nobody is at gives its mass to the freshest level, members on one level share
/// it, and the weights are normalised to sum to 1.
pub fn staleness_weights(clocks: &[u64], alpha: f64) -> Vec<f64> {
    let Some(&freshest) = clocks.iter().max() else {
        return Vec::new();
    };
    let staleness: Vec<u64> = clocks.iter().map(|&c| freshest - c + 1).collect();
    let levels = *staleness.iter().max().expect("non-empty") as usize;
    let mut mass: Vec<f64> = (0..levels)
        .map(|k| alpha.powi(k as i32) * (1.0 - alpha))
        .collect();
    let mut at_level = vec![0usize; levels];
    for &s in &staleness {
        at_level[s as usize - 1] += 1;
    }
    for level in 1..levels {
        if at_level[level] == 0 {
            mass[0] += mass[level];
            mass[level] = 0.0;
        }
    }
    let total: f64 = mass.iter().sum();
    staleness
        .iter()
        .map(|&s| {
            let level = s as usize - 1;
            mass[level] / at_level[level] as f64 / total
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounded(weights: Vec<f64>) -> Vec<f64> {
        weights
            .into_iter()
            .map(|w| (w * 1000.0).round() / 1000.0)
            .collect()
    }

    #[test]
    fn the_reference_controllers_worked_examples() {
        // Staleness lists [1,1,1], [1,2,3], [1,1,3], [1,5,5] as clocks.
        assert_eq!(rounded(staleness_weights(&[7, 7, 7], ALPHA)), [0.333; 3]);
        assert_eq!(
            rounded(staleness_weights(&[9, 8, 7], ALPHA)),
            [0.369, 0.332, 0.299]
        );
        assert_eq!(
            rounded(staleness_weights(&[9, 9, 7], ALPHA)),
            [0.351, 0.351, 0.299]
        );
        assert_eq!(
            rounded(staleness_weights(&[9, 5, 5], ALPHA)),
            [0.840, 0.080, 0.080]
        );
    }

    #[test]
    fn weights_sum_to_one() {
        let w = staleness_weights(&[3, 17, 17, 12, 1], ALPHA);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(staleness_weights(&[], ALPHA).is_empty());
    }
}
