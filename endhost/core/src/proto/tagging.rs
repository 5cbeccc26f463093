//! Packet tagging (MLT §4.2.2): the DSCP of a packet's layer class, and the ECN-capable
//! mark for important packets.
//!
//! Layer i of L is in class ⌊i·C/L⌋ (the plan's `classes` say which DSCP each class
//! has). A packet is important when the mean |gradient| of its elements exceeds a
//! threshold: the configured quantile (default the median) of |g| over a sample
//! (default 5%) of the tensor, taken once per message.

use crate::config::Tagging;

/// ECN codepoint ECT(0): the switch marks such packets instead of dropping them.
pub const ECT0: u8 = 0b10;

/// Layer → DSCP, from the plan.
#[derive(Debug, Clone)]
pub struct Classes {
    dscp_of_layer: Vec<u8>,
    class_of_layer: Vec<u8>,
    control_dscp: u8,
}

impl Classes {
    pub fn new(tagging: &Tagging) -> Classes {
        let layers = tagging.layers as usize;
        let mut dscp_of_layer = vec![0; layers];
        let mut class_of_layer = vec![0; layers];
        for c in &tagging.classes {
            for layer in
                c.first_layer as usize..=(c.last_layer as usize).min(layers.saturating_sub(1))
            {
                dscp_of_layer[layer] = c.dscp;
                class_of_layer[layer] = c.class;
            }
        }
        Classes {
            dscp_of_layer,
            class_of_layer,
            control_dscp: tagging.control_dscp,
        }
    }

    /// DSCP of a layer; layers the plan does not know go to the default class (0).
    pub fn dscp(&self, layer: u16) -> u8 {
        self.dscp_of_layer
            .get(usize::from(layer))
            .copied()
            .unwrap_or(0)
    }

    pub fn class(&self, layer: u16) -> u8 {
        self.class_of_layer
            .get(usize::from(layer))
            .copied()
            .unwrap_or(0)
    }

    pub fn control_dscp(&self) -> u8 {
        self.control_dscp
    }
}

/// The IP TOS byte: DSCP in the upper six bits, ECN in the lower two.
pub fn tos(dscp: u8, important: bool) -> u8 {
    (dscp << 2) | if important { ECT0 } else { 0 }
}

/// The importance threshold of `values`: the `quantile` of |g| over every k-th value,
/// k = 1/`sample_fraction`.
pub fn threshold(values: &[f32], quantile: f64, sample_fraction: f64) -> f32 {
    if values.is_empty() {
        return 0.0;
    }
    let every = (1.0 / sample_fraction.clamp(1e-6, 1.0)).round().max(1.0) as usize;
    let mut sample: Vec<f32> = values.iter().step_by(every).map(|v| v.abs()).collect();
    let index = ((sample.len() - 1) as f64 * quantile.clamp(0.0, 1.0)).round() as usize;
    let (_, value, _) = sample.select_nth_unstable_by(index, f32::total_cmp);
    *value
}

/// Whether a packet of `values` is important: its mean |g| above `threshold`.
pub fn important(values: &[f32], threshold: f32) -> bool {
    if values.is_empty() {
        return false;
    }
    let sum: f32 = values.iter().map(|v| v.abs()).sum();
    sum / values.len() as f32 > threshold
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClassTag, Importance};

    #[test]
    fn layers_map_to_their_class_dscp() {
        let tagging = Tagging {
            control_dscp: 46,
            layers: 4,
            classes: vec![
                ClassTag {
                    class: 0,
                    dscp: 32,
                    queue: 6,
                    first_layer: 0,
                    last_layer: 1,
                },
                ClassTag {
                    class: 1,
                    dscp: 33,
                    queue: 5,
                    first_layer: 2,
                    last_layer: 3,
                },
            ],
            importance: Importance::default(),
        };
        let classes = Classes::new(&tagging);
        assert_eq!(
            (0..5).map(|l| classes.dscp(l)).collect::<Vec<_>>(),
            [32, 32, 33, 33, 0]
        );
        assert_eq!(tos(32, true), 0x82);
        assert_eq!(tos(46, false), 0xb8);
    }

    #[test]
    fn the_threshold_is_the_sampled_median_of_magnitudes() {
        let values: Vec<f32> = (0..1000)
            .map(|i| if i % 2 == 0 { i as f32 } else { -(i as f32) })
            .collect();
        // Every 20th value: 0, 20, ..., 980; median magnitude 500 (index 25 of 50 → 500).
        assert_eq!(threshold(&values, 0.5, 0.05), 500.0);
        assert!(important(&[600.0, -700.0], 500.0));
        assert!(!important(&[100.0, -200.0], 500.0));
        assert_eq!(threshold(&[], 0.5, 0.05), 0.0);
    }
}
