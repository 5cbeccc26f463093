//! Packet tagging (MLT §4.2.2): the DSCP of a packet's layer class, and the ECN-capable
//! mark for important packets.
//!
//! Layer i of L is in class ⌊i·C/L⌋ (the plan's `classes` say which DSCP each class
//! has). A packet is important when the mean |gradient| of its elements exceeds a
//! threshold taken once per send, of that send's own values as they are when it starts
//! (reduced, in a ring's later steps or from a server): the configured quantile (default
//! the median) of the same per-packet means over a sample of the send's packets, by
//! rank, so a send of n packets marks ⌈(1 − quantile)·n⌉ of them. Comparing a packet's
//! mean with a quantile of packet means (not of single elements, whose median almost
//! every packet mean exceeds) sends about `quantile` of the packets Not-ECT — the θ the
//! plan's thresholds are solved for — in every send, whatever the reduction did to its
//! scale. Packets of zeros are never important.

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

/// Packets sampled for the threshold, at least (all of them when the send has fewer):
/// enough that the marked fraction lands within a few points of 1 − quantile.
pub const MIN_SAMPLED_PACKETS: usize = 1024;

/// The importance threshold of a send: of the mean |g| over its packets of
/// `packet_elems` values, sampled evenly (`sample_fraction` of the packets, at least
/// [`MIN_SAMPLED_PACKETS`]), ⌈(1 − quantile)·n⌉ of the n sampled lie above it. A send
/// of up to that many packets is sampled whole, so exactly that many of its packets
/// are important (fewer where means tie, none whose values are zero).
pub fn threshold(values: &[f32], packet_elems: usize, quantile: f64, sample_fraction: f64) -> f32 {
    let packet_elems = packet_elems.max(1);
    let packets = values.len().div_ceil(packet_elems);
    if packets == 0 {
        return f32::INFINITY;
    }
    let wanted = ((packets as f64 * sample_fraction.clamp(0.0, 1.0)).ceil() as usize)
        .max(MIN_SAMPLED_PACKETS)
        .min(packets);
    let mut means: Vec<f32> = (0..wanted)
        .map(|k| {
            let packet = k * packets / wanted;
            let start = packet * packet_elems;
            mean_magnitude(&values[start..(start + packet_elems).min(values.len())])
        })
        .collect();
    let above = ((1.0 - quantile.clamp(0.0, 1.0)) * wanted as f64).ceil() as usize;
    match above {
        0 => f32::INFINITY,
        n if n >= wanted => f32::NEG_INFINITY,
        n => {
            let (_, value, _) = means.select_nth_unstable_by(wanted - n - 1, f32::total_cmp);
            *value
        }
    }
}

/// Lanes of the sum of magnitudes: independent partial sums the compiler keeps in
/// vector registers (one running sum is a chain of dependent adds, a few cycles each:
/// a third of a datapath thread's time in an all-to-all).
const LANES: usize = 16;

fn mean_magnitude(values: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest: f32 = chunks.remainder().iter().map(|v| v.abs()).sum();
    for chunk in chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane += v.abs();
        }
    }
    (lanes.iter().sum::<f32>() + rest) / values.len() as f32
}

/// Whether a packet of `values` is important: its mean |g| above `threshold`, and not
/// zero (a zero contribution, a tensor of zeros: nothing of it matters more).
pub fn important(values: &[f32], threshold: f32) -> bool {
    if values.is_empty() {
        return false;
    }
    let mean = mean_magnitude(values);
    mean > threshold && mean >= f32::MIN_POSITIVE
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
    fn the_threshold_is_a_quantile_of_packet_means() {
        // Ten packets of two values whose means are 0, 10, ..., 90.
        let tensor: Vec<f32> = (0..10)
            .flat_map(|p| [p as f32 * 10.0 - 1.0, -(p as f32 * 10.0 + 1.0)])
            .map(|v| if v == -1.0 { 0.0 } else { v })
            .collect();
        let marked = |values: &[f32], threshold: f32| {
            values.chunks(2).filter(|p| important(p, threshold)).count()
        };
        // Nine packets at the median: ⌈4.5⌉ above 40.
        assert_eq!(threshold(&tensor[2..], 2, 0.5, 0.05), 40.0);
        assert_eq!(marked(&tensor[2..], 40.0), 5);
        // Quantile 0 marks every packet but the one of zeros; quantile 1 none.
        assert_eq!(marked(&tensor, threshold(&tensor, 2, 0.0, 1.0)), 9);
        assert_eq!(threshold(&tensor, 2, 1.0, 1.0), f32::INFINITY);
        assert!(important(&[600.0, -700.0], 500.0));
        assert!(!important(&[100.0, -200.0], 500.0));
        assert!(!important(&[0.0, 0.0], f32::NEG_INFINITY));
        assert_eq!(threshold(&[], 2, 0.5, 0.05), f32::INFINITY);
    }

    #[test]
    fn small_sends_mark_their_share_by_rank_and_zeros_mark_nothing() {
        for packets in 1..=10usize {
            for quantile in [0.1, 0.25, 0.5, 0.75, 0.9] {
                // Packet means in a shuffled order, all different.
                let values: Vec<f32> = (0..packets * 3)
                    .map(|i| ((i / 3) * 7 % 11) as f32 + 1.0)
                    .collect();
                let t = threshold(&values, 3, quantile, 0.05);
                let marked = values.chunks(3).filter(|p| important(p, t)).count();
                let expected = ((1.0 - quantile) * packets as f64).ceil() as usize;
                assert_eq!(marked, expected, "{packets} packets at quantile {quantile}");
                let zeros = vec![0.0f32; packets * 3];
                let t = threshold(&zeros, 3, quantile, 0.05);
                assert_eq!(zeros.chunks(3).filter(|p| important(p, t)).count(), 0);
            }
        }
    }

    /// A small deterministic generator (xorshift) for the property test's data.
    struct Rng(u64);

    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }

        fn laplace(&mut self) -> f64 {
            let u = self.uniform() - 0.5;
            -u.signum() * (1.0 - 2.0 * u.abs()).ln()
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// i.i.d. normal, i.i.d. Laplace, and normal values whose scale changes from
        /// packet to packet: about 1 − quantile of the packets go ECN-capable.
        #[test]
        fn the_marked_fraction_is_one_minus_the_quantile(
            kind in 0u8..3,
            quantile in 0.1f64..0.9,
            packets in 50usize..4000,
            seed in 1u64..u64::MAX,
        ) {
            const ELEMS: usize = 367;
            let mut rng = Rng(seed);
            let mut tensor = Vec::with_capacity(packets * ELEMS);
            for _ in 0..packets {
                let scale = if kind == 2 { (rng.uniform() * 6.0 - 3.0).exp() } else { 1.0 };
                for _ in 0..ELEMS {
                    let value = if kind == 1 { rng.laplace() } else { rng.normal() };
                    tensor.push((value * scale) as f32);
                }
            }
            let threshold = threshold(&tensor, ELEMS, quantile, 0.05);
            let marked = tensor
                .chunks(ELEMS)
                .filter(|packet| important(packet, threshold))
                .count();
            let fraction = marked as f64 / packets as f64;
            proptest::prop_assert!(
                (fraction - (1.0 - quantile)).abs() <= 0.05,
                "kind {kind}: {fraction} marked at quantile {quantile}"
            );
        }
    }

    /// The lanes' sum is the mean of the magnitudes at every length: shorter than the
    /// lanes, exactly them, and with a remainder.
    #[test]
    fn the_mean_magnitude_is_the_mean_at_every_length() {
        for len in [1, 7, 16, 17, 366, 1000] {
            let values: Vec<f32> = (0..len).map(|i| (i as f32 - 100.5) / 3.0).collect();
            let exact = values.iter().map(|v| f64::from(v.abs())).sum::<f64>() / len as f64;
            let mean = f64::from(mean_magnitude(&values));
            assert!(
                (mean - exact).abs() <= exact * 1e-6,
                "{len}: {mean} vs {exact}"
            );
        }
    }
}
