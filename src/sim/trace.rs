//! Per-round computation times for the simulator.
//!
//! The Selective Reduce document draws them from two measured traces it reproduces from
//! Eager-SGD (its Figure 1); those measurements are not public
//! (docs/src/design/sources.md), so we use two synthetic distributions with the shapes
//! the document describes:
//!
//! - **CNN-like** (ResNet-50 on shared cloud GPUs: heterogeneity from *dynamic resource
//!   competition*): most rounds take about the same time, some are slowed by a
//!   competing job. 0.25 s × lognormal(σ = 0.05), and with probability 0.1 an extra
//!   exponential delay with mean 0.25 s (mean ≈ 0.275 s, CV ≈ 0.4, p99 ≈ 0.83 s).
//! - **Transformer-like** (WMT16: *inconsistent workloads*, sentences of varied length):
//!   a broad right-skewed spread. Lognormal with median 0.35 s and σ = 0.45 (mean ≈
//!   0.39 s, CV ≈ 0.48).
//!
//! Both are exposed as names, not tuned numbers to match the paper's plots.

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Trace {
    Cnn,
    Transformer,
}

impl Trace {
    pub fn name(self) -> &'static str {
        match self {
            Trace::Cnn => "CNN-like",
            Trace::Transformer => "Transformer-like",
        }
    }

    /// One round's computation time, seconds.
    pub fn sample(self, rng: &mut impl Rng) -> f64 {
        match self {
            Trace::Cnn => {
                let base = 0.25 * LogNormal::new(0.0, 0.05).expect("valid").sample(rng);
                let contended = rng.random_bool(0.1);
                let extra = if contended {
                    Exp::new(1.0 / 0.25).expect("valid").sample(rng)
                } else {
                    0.0
                };
                base + extra
            }
            Trace::Transformer => LogNormal::new(0.35f64.ln(), 0.45)
                .expect("valid")
                .sample(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn mean_and_cv(trace: Trace) -> (f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let xs: Vec<f64> = (0..100_000).map(|_| trace.sample(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn the_traces_have_the_documented_shape() {
        let (mean, cv) = mean_and_cv(Trace::Cnn);
        assert!((0.27..0.28).contains(&mean), "{mean}");
        assert!((0.36..0.44).contains(&cv), "{cv}");
        let (mean, cv) = mean_and_cv(Trace::Transformer);
        assert!((0.37..0.40).contains(&mean), "{mean}");
        assert!((0.44..0.52).contains(&cv), "{cv}");
    }
}
