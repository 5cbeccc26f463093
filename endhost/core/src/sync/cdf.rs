//! F_Φ(t): the distribution of a round's computation time, from observed samples.

use std::collections::VecDeque;

/// An empirical CDF over the most recent `capacity` samples (all of them when the
/// distribution is given in advance, the document's "warm start"; learned from the
/// iterations the workers report otherwise, its "cold start").
#[derive(Clone, Debug)]
pub struct RuntimeCdf {
    sorted: Vec<f64>,
    arrival: VecDeque<f64>,
    capacity: usize,
}

impl RuntimeCdf {
    /// Keeps at most this many samples, the oldest leaving first.
    pub const DEFAULT_CAPACITY: usize = 4096;

    pub fn new(capacity: usize) -> Self {
        Self {
            sorted: Vec::new(),
            arrival: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// A CDF from a known sample (warm start); further samples slide the window.
    pub fn from_samples(samples: impl IntoIterator<Item = f64>, capacity: usize) -> Self {
        let mut cdf = Self::new(capacity);
        for sample in samples {
            cdf.record(sample);
        }
        cdf
    }

    /// Adds one observed computation time (seconds). Non-finite or negative values are
    /// ignored.
    pub fn record(&mut self, seconds: f64) {
        if !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        if self.arrival.len() == self.capacity {
            let oldest = self.arrival.pop_front().expect("full");
            let at = self.sorted.partition_point(|&x| x < oldest);
            self.sorted.remove(at);
        }
        self.arrival.push_back(seconds);
        let at = self.sorted.partition_point(|&x| x <= seconds);
        self.sorted.insert(at, seconds);
    }

    /// P(T ≤ t); 0 before any sample.
    pub fn at(&self, t: f64) -> f64 {
        if self.sorted.is_empty() {
            return 0.0;
        }
        self.sorted.partition_point(|&x| x <= t) as f64 / self.sorted.len() as f64
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empirical_cdf_counts_samples_at_or_below() {
        let cdf = RuntimeCdf::from_samples([0.3, 0.1, 0.2, 0.2], 16);
        assert_eq!(cdf.at(0.05), 0.0);
        assert_eq!(cdf.at(0.1), 0.25);
        assert_eq!(cdf.at(0.2), 0.75);
        assert_eq!(cdf.at(1.0), 1.0);
        assert_eq!(RuntimeCdf::new(4).at(1.0), 0.0);
    }

    #[test]
    fn the_window_forgets_the_oldest_samples() {
        let mut cdf = RuntimeCdf::from_samples([5.0, 5.0, 5.0], 3);
        assert_eq!(cdf.at(1.0), 0.0);
        for _ in 0..3 {
            cdf.record(0.5);
        }
        assert_eq!(cdf.at(1.0), 1.0);
        assert_eq!(cdf.len(), 3);
        cdf.record(f64::NAN);
        assert_eq!(cdf.len(), 3);
    }
}
