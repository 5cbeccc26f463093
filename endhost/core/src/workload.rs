//! The self-test workload of `endhost run`: inputs every rank can predict, so each rank
//! checks its own result.
//!
//! Rank r's value k is (r + 1)·m(k), where m is constant over each run of 256 values
//! and takes one of 64 levels 1, 1 + 1/16, …, 4 15/16, picked by a multiplicative hash
//! of the run: magnitudes vary from packet to packet with few ties, so a quantile of
//! packet means splits packets as it would real gradients (importance tagging). Every
//! level is a multiple of 1/16 below 5, so every partial sum is exact in f32 for up to
//! 600 ranks; the exact sum is n(n+1)/2 · m(k).

/// Rank `rank`'s input of `values` values.
pub fn input(rank: u32, values: usize) -> Vec<f32> {
    (0..values)
        .map(|k| (rank as f32 + 1.0) * magnitude(k))
        .collect()
}

fn magnitude(k: usize) -> f32 {
    let run = (k / 256) as u32;
    let level = run.wrapping_mul(0x9E37_79B1) >> 26;
    1.0 + level as f32 / 16.0
}

/// The fraction of `result` equal to the exact sum over `world` ranks.
pub fn exact_fraction(result: &[f32], world: u32) -> f64 {
    if result.is_empty() {
        return 1.0;
    }
    let total = (world * (world + 1) / 2) as f32;
    let exact = result
        .iter()
        .enumerate()
        .filter(|(k, v)| **v == total * magnitude(*k))
        .count();
    exact as f64 / result.len() as f64
}

/// `layers` equal runs of layers over `values` values, for tagging.
pub fn layer_map(values: usize, layers: u16) -> Vec<(usize, u16)> {
    let layers = layers.max(1);
    (0..layers)
        .map(|l| (usize::from(l) * values / usize::from(layers), l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_of_every_rank_are_exact_and_others_are_not() {
        let world = 4;
        let mut sum = vec![0.0f32; 2000];
        for r in 0..world {
            for (s, v) in sum.iter_mut().zip(input(r, 2000)) {
                *s += v;
            }
        }
        assert_eq!(exact_fraction(&sum, world), 1.0);
        sum[0] = 0.0;
        assert_eq!(exact_fraction(&sum, world), 1999.0 / 2000.0);
        assert_eq!(layer_map(100, 4), vec![(0, 0), (25, 1), (50, 2), (75, 3)]);
    }
}
