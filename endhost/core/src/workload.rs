//! The self-test workload of `endhost run`: inputs every rank can predict, so each rank
//! checks its own result.
//!
//! Rank r's value k is (r + 1)·m(k) with m(k) = 1 + ⌊k/256⌋ mod 4: magnitudes vary
//! from packet to packet, so some packets are important and some not, as with real
//! gradients. The exact sum is n(n+1)/2 · m(k).

/// Rank `rank`'s input of `values` values.
pub fn input(rank: u32, values: usize) -> Vec<f32> {
    (0..values)
        .map(|k| (rank as f32 + 1.0) * magnitude(k))
        .collect()
}

fn magnitude(k: usize) -> f32 {
    1.0 + ((k / 256) % 4) as f32
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
