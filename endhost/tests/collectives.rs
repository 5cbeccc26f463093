//! The sans-IO core and collectives on a simulated network that loses, duplicates and
//! reorders packets: every receive gets at least 1 − p of its data, p = 0 is exact, and
//! results are sums of what was delivered — never garbage, never a value added twice.

mod sim;

use endhost_core::collective::{Algorithm, Allreduce, Completion};
use endhost_core::config::Timeouts;
use proptest::prelude::*;
use sim::{Faults, Sim, result_of};

const STRICT: Timeouts = Timeouts {
    phase_ms: 60_000,
    early_exit: false,
};

fn algorithm(code: u8, world: u16) -> Algorithm {
    match code % 3 {
        0 => Algorithm::Ring,
        1 => Algorithm::Transpose,
        _ => Algorithm::Ps {
            servers: (0..world).step_by(2).collect(),
        },
    }
}

/// Rank r contributes 2^r to every element, so a result names the ranks it sums.
fn run_allreduce(
    world: u16,
    len: usize,
    algorithm: &Algorithm,
    loss_bound: f64,
    faults: Faults,
    seed: u64,
    slice_elems: usize,
) -> Vec<Completion> {
    // The job's defaults, with room for the slowest simulated case.
    let timeouts = Timeouts {
        phase_ms: 60_000,
        ..Timeouts::default()
    };
    let mut sim = Sim::build(world, faults, seed, timeouts, slice_elems, 0.5);
    let mut ops = Vec::new();
    for rank in 0..world {
        let spec = Allreduce {
            tensor: 3,
            data: vec![(1u32 << rank) as f32; len],
            algorithm: algorithm.clone(),
            group: None,
            weights: None,
            layers: vec![(0, 0), (len / 2, 5)],
            loss_bound,
        };
        ops.push(sim.engines[usize::from(rank)].allreduce(0, spec));
    }
    let completions = sim.run(120_000_000_000);
    ops.iter()
        .enumerate()
        .map(|(rank, op)| result_of(&completions[rank], *op).clone())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn without_loss_bound_every_allreduce_is_exact(
        world in 2u16..6,
        len in 1usize..6000,
        code in 0u8..3,
        loss in 0.0f64..0.3,
        duplicate in 0.0f64..0.2,
        jitter in 0u64..200_000,
        seed in any::<u64>(),
    ) {
        let algorithm = algorithm(code, world);
        let faults = Faults { loss, duplicate, jitter_ns: jitter, drop_retransmits: false };
        let all = ((1u32 << world) - 1) as f32;
        for c in run_allreduce(world, len, &algorithm, 0.0, faults, seed, 400) {
            let done = c.result.as_ref().expect("the allreduce succeeds");
            prop_assert_eq!(done.delivered, 1.0);
            prop_assert!(done.data.iter().all(|&v| v == all));
        }
    }

    /// With the job's default timeouts (early exit off): p bounds the share of each
    /// rank's result that is not exact, and the transport knows which share that is.
    #[test]
    fn with_a_loss_bound_at_least_one_minus_p_of_the_result_is_exact(
        world in 2u16..6,
        len in 2000usize..60000,
        slice_elems in prop_oneof![Just(400usize), Just(4000), Just(1 << 20)],
        code in 0u8..3,
        p in 0.0f64..0.2,
        loss in 0.0f64..0.3,
        duplicate in 0.0f64..0.1,
        jitter in 0u64..100_000,
        seed in any::<u64>(),
    ) {
        let algorithm = algorithm(code, world);
        let faults = Faults { loss, duplicate, jitter_ns: jitter, drop_retransmits: false };
        let all = (1u32 << world) - 1;
        for c in run_allreduce(world, len, &algorithm, p, faults, seed, slice_elems) {
            let done = c.result.as_ref().expect("the allreduce succeeds");
            prop_assert!(done.delivered >= 1.0 - p - 1e-9, "delivered {}", done.delivered);
            // Each value is a sum of distinct ranks' contributions: what was delivered.
            for &v in &done.data {
                prop_assert!(v >= 0.0 && v <= all as f32 && v.fract() == 0.0, "value {}", v);
            }
            let exact = done.data.iter().filter(|&&v| v == all as f32).count();
            let exact = exact as f64 / done.data.len() as f64;
            prop_assert!(exact >= 1.0 - p - 1e-9, "{:?}: {} exact at p = {}", algorithm, exact, p);
            prop_assert_eq!(done.exact, exact, "{:?}: the transport's count", algorithm);
        }
    }
}

#[test]
fn weighted_subset_allreduce_sums_only_the_group() {
    let world = 5;
    let group = vec![0u16, 2, 3];
    let weights = vec![0.5f32, 2.0, 1.0];
    for algorithm in [
        Algorithm::Ring,
        Algorithm::Transpose,
        Algorithm::Ps { servers: vec![2] },
    ] {
        let mut sim = Sim::new(
            world,
            Faults {
                loss: 0.05,
                duplicate: 0.05,
                jitter_ns: 50_000,
                drop_retransmits: false,
            },
            9,
            STRICT,
        );
        let mut ops = Vec::new();
        for &rank in &group {
            let spec = Allreduce {
                tensor: 1,
                data: (0..1000).map(|k| (rank as f32 + 1.0) * k as f32).collect(),
                algorithm: algorithm.clone(),
                group: Some(group.clone()),
                weights: Some(weights.clone()),
                layers: Vec::new(),
                loss_bound: 0.0,
            };
            ops.push((rank, sim.engines[usize::from(rank)].allreduce(0, spec)));
        }
        let completions = sim.run(60_000_000_000);
        // 0.5·1 + 2·3 + 1·4 = 10.5 times k.
        for (rank, op) in ops {
            let done = result_of(&completions[usize::from(rank)], op)
                .result
                .clone()
                .unwrap();
            for (k, v) in done.data.iter().enumerate() {
                assert_eq!(*v, 10.5 * k as f32, "{algorithm:?}");
            }
        }
        // Ranks outside the group sent and received nothing.
        for rank in [1usize, 4] {
            let counters = sim.engines[rank].endpoint().counters();
            assert!(
                counters
                    .peers
                    .iter()
                    .all(|p| p.packets_sent == 0 && p.packets_received == 0)
            );
        }
    }
}

#[test]
fn many_buckets_in_flight_complete_independently() {
    let world = 4;
    let mut sim = Sim::new(
        world,
        Faults {
            loss: 0.02,
            duplicate: 0.0,
            jitter_ns: 20_000,
            drop_retransmits: false,
        },
        4,
        STRICT,
    );
    let mut ops = vec![Vec::new(); usize::from(world)];
    for bucket in 0..6u32 {
        for rank in 0..world {
            let spec = Allreduce {
                tensor: bucket,
                data: vec![bucket as f32 + 1.0; 3000],
                algorithm: if bucket % 2 == 0 {
                    Algorithm::Ring
                } else {
                    Algorithm::Transpose
                },
                group: None,
                weights: None,
                layers: Vec::new(),
                loss_bound: 0.0,
            };
            ops[usize::from(rank)]
                .push((bucket, sim.engines[usize::from(rank)].allreduce(0, spec)));
        }
    }
    let completions = sim.run(60_000_000_000);
    for rank in 0..usize::from(world) {
        for &(bucket, op) in &ops[rank] {
            let done = result_of(&completions[rank], op).result.clone().unwrap();
            assert!(done.data.iter().all(|&v| v == 4.0 * (bucket as f32 + 1.0)));
        }
    }
}

#[test]
fn point_to_point_send_and_receive_pair_up_in_order() {
    let mut sim = Sim::new(
        2,
        Faults {
            loss: 0.1,
            duplicate: 0.1,
            jitter_ns: 30_000,
            drop_retransmits: false,
        },
        5,
        STRICT,
    );
    let a = sim.engines[0].post_send(0, 1, 42, vec![1.0; 5000], 2);
    let b = sim.engines[0].post_send(0, 1, 42, vec![2.0; 5000], 2);
    let ra = sim.engines[1].post_recv(0, 0, 42, 5000, 0.0);
    let rb = sim.engines[1].post_recv(0, 0, 42, 5000, 0.0);
    let completions = sim.run(60_000_000_000);
    assert!(result_of(&completions[0], a).result.is_ok());
    assert!(result_of(&completions[0], b).result.is_ok());
    let first = result_of(&completions[1], ra).result.clone().unwrap();
    let second = result_of(&completions[1], rb).result.clone().unwrap();
    assert!(first.data.iter().all(|&v| v == 1.0));
    assert!(second.data.iter().all(|&v| v == 2.0));
}

#[test]
fn a_silent_peer_fails_the_collective_within_its_timeout() {
    let timeouts = Timeouts {
        phase_ms: 2_000,
        early_exit: false,
    };
    let mut sim = Sim::new(3, Faults::NONE, 1, timeouts);
    // Ranks 0 and 1 start; rank 2 never does.
    let ops: Vec<_> = (0..2u16)
        .map(|rank| {
            let spec = Allreduce {
                tensor: 0,
                data: vec![1.0; 1000],
                algorithm: Algorithm::Ring,
                group: None,
                weights: None,
                layers: Vec::new(),
                loss_bound: 0.0,
            };
            sim.engines[usize::from(rank)].allreduce(0, spec)
        })
        .collect();
    let completions = sim.run(10_000_000_000);
    for (rank, op) in ops.iter().enumerate() {
        let error = result_of(&completions[rank], *op)
            .result
            .clone()
            .unwrap_err();
        assert!(error.0.contains("no progress for 2000 ms"), "{error}");
        assert!(error.0.contains("rank"), "{error}");
    }
    assert!(sim.now <= 2_100_000_000, "failed at {} ns", sim.now);
}

#[test]
fn early_exit_ends_a_receive_short_of_its_bound_only_when_allowed() {
    // Retransmissions never arrive: 20% loss cannot be repaired.
    let faults = Faults {
        loss: 0.2,
        duplicate: 0.0,
        jitter_ns: 0,
        drop_retransmits: true,
    };
    let early_exit = Timeouts {
        phase_ms: 20_000,
        early_exit: true,
    };
    // With a bound above 0, the receive ends after the grace, short of 1 − p, counted.
    let mut sim = Sim::new(2, faults, 3, early_exit);
    let send = sim.engines[0].post_send(0, 1, 1, vec![1.0; 20_000], 0);
    let recv = sim.engines[1].post_recv(0, 0, 1, 20_000, 0.05);
    let completions = sim.run(30_000_000_000);
    let done = result_of(&completions[1], recv).result.clone().unwrap();
    assert!(done.delivered < 0.95, "delivered {}", done.delivered);
    assert!(result_of(&completions[0], send).result.is_ok());
    assert_eq!(sim.engines[1].endpoint().counters().bound_missed, 1);
    assert!(sim.now < 3_000_000_000, "ended at {} ns", sim.now);
    // With p = 0 it never does: the phase times out instead.
    let mut sim = Sim::new(
        2,
        faults,
        3,
        Timeouts {
            phase_ms: 500,
            early_exit: true,
        },
    );
    sim.engines[0].post_send(0, 1, 1, vec![1.0; 20_000], 0);
    let recv = sim.engines[1].post_recv(0, 0, 1, 20_000, 0.0);
    let completions = sim.run(30_000_000_000);
    let error = result_of(&completions[1], recv).result.clone().unwrap_err();
    assert!(error.0.contains("no progress for 500 ms"), "{error}");
    // By default (early exit off) a bound above 0 is kept too: no receive ends short.
    let mut sim = Sim::new(
        2,
        faults,
        3,
        Timeouts {
            phase_ms: 500,
            ..Timeouts::default()
        },
    );
    sim.engines[0].post_send(0, 1, 1, vec![1.0; 20_000], 0);
    let recv = sim.engines[1].post_recv(0, 0, 1, 20_000, 0.05);
    let completions = sim.run(30_000_000_000);
    let error = result_of(&completions[1], recv).result.clone().unwrap_err();
    assert!(error.0.contains("no progress for 500 ms"), "{error}");
    assert_eq!(sim.engines[1].endpoint().counters().bound_missed, 0);
}

#[test]
fn a_collective_started_after_a_peer_left_fails_at_once() {
    let mut sim = Sim::new(3, Faults::NONE, 2, STRICT);
    sim.engines[0].peer_lost(2, "closed the connection");
    let spec = Allreduce {
        tensor: 0,
        data: vec![1.0; 100],
        algorithm: Algorithm::Ring,
        group: None,
        weights: None,
        layers: Vec::new(),
        loss_bound: 0.0,
    };
    let op = sim.engines[0].allreduce(0, spec);
    let completion = sim.engines[0].poll_completion().expect("failed at once");
    assert_eq!(completion.op, op);
    let error = completion.result.unwrap_err();
    assert!(
        error.0.contains("rank 2 is gone (closed the connection)"),
        "{error}"
    );
}

/// The importance threshold belongs to the tensor, not to a pipelined piece: with the
/// front of a tensor small (×1), a thin middle band medium (×10) and the back large
/// (×100), the median packet is a medium one, so the front's packets go Not-ECT and
/// the back's ECN-capable in every step — also in the steps that send reduced values,
/// whose threshold follows how much the reduction grew them. A threshold per piece
/// would mark about half of each.
/// Runs an allreduce of `data[rank]` over the unpiped sim at `quantile` and returns
/// each send's first pass.
fn first_passes(
    algorithm: &Algorithm,
    data: Vec<Vec<f32>>,
    quantile: f64,
    seed: u64,
) -> Vec<((u16, u16, u32), sim::FirstPass)> {
    let world = data.len() as u16;
    let mut sim = Sim::unpiped(world, seed, quantile);
    let len = data[0].len();
    for (rank, data) in data.into_iter().enumerate() {
        let spec = Allreduce {
            tensor: 9,
            data,
            algorithm: algorithm.clone(),
            group: None,
            weights: None,
            layers: vec![(0, 0), (len / 2, 7)],
            loss_bound: 0.0,
        };
        sim.engines[rank].allreduce(0, spec);
    }
    sim.run(60_000_000_000);
    sim.first_passes.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Every send marks 1 − q of its packets — its own values' quantile, whatever the
    /// reduction made of their scale: exactly ⌈(1 − q)·n⌉ of n (a send of up to 1,024
    /// packets is judged whole), so within 5 points for sends of 20 packets or more.
    /// Sends of zeros (here rank 0's own contribution) mark nothing.
    #[test]
    fn every_send_marks_one_minus_the_quantile_and_zeros_nothing(
        code in 0u8..3,
        quantile in 0.1f64..0.9,
        packets_per_send in 20usize..60,
        zero_rank in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let world = 8u16;
        let algorithm = algorithm(code, world);
        let len = packets_per_send * 364 * usize::from(world);
        let mut rng = sim::Rng::new(seed);
        let mut normal = move || {
            let mut uniform = || ((rng.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            let (u, v) = (uniform(), uniform());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        };
        let data: Vec<Vec<f32>> = (0..world)
            .map(|rank| {
                if zero_rank && rank == 0 {
                    vec![0.0; len]
                } else {
                    (0..len).map(|_| normal()).collect()
                }
            })
            .collect();
        let passes = first_passes(&algorithm, data, quantile, seed);
        prop_assert!(passes.len() >= usize::from(world), "{:?}", passes);
        for (send, pass) in passes {
            if pass.zeros == pass.packets {
                prop_assert!(zero_rank && send.0 == 0, "{:?} {:?}", send, pass);
                prop_assert_eq!(pass.important, 0, "{:?}: zeros marked", send);
                continue;
            }
            let n = f64::from(pass.packets);
            let wanted = ((1.0 - quantile) * n).ceil() as u32;
            prop_assert_eq!(pass.important, wanted, "{:?} {:?}: {:?} at q {}", algorithm, send, pass, quantile);
            if pass.packets >= 20 {
                let share = f64::from(pass.important) / n;
                prop_assert!((share - (1.0 - quantile)).abs() <= 0.05, "{:?} {:?}", send, pass);
            }
        }
    }
}

#[test]
fn a_tensor_of_zeros_marks_nothing_and_small_sends_mark_by_rank() {
    for algorithm in [Algorithm::Ring, Algorithm::Transpose] {
        let passes = first_passes(&algorithm, vec![vec![0.0; 5000]; 4], 0.5, 3);
        assert!(!passes.is_empty());
        assert!(
            passes.iter().all(|(_, p)| p.important == 0),
            "{algorithm:?}: {passes:?}"
        );
        // One to three packets per send: ⌈n/2⌉ of them important.
        for packets in 1..=3usize {
            let data = (0..4u32)
                .map(|r| {
                    (0..packets * 364 * 4)
                        .map(|k| (r + 1) as f32 * (1.0 + (k / 364 * 37 % 101) as f32))
                        .collect()
                })
                .collect();
            for (send, pass) in first_passes(&algorithm, data, 0.5, 4) {
                assert_eq!(
                    pass.important,
                    pass.packets.div_ceil(2),
                    "{algorithm:?} {send:?}: {pass:?}"
                );
            }
        }
    }
}
