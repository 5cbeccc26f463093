//! A simulated network for the sans-IO core: several engines, virtual time, datagrams
//! that are lost, duplicated and reordered on purpose, and a reliable in-order control
//! channel per pair (as TCP is).

#![allow(dead_code)] // each test uses its own subset

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use endhost_core::collective::{Completion, Engine, OpId};
use endhost_core::config::{ClassTag, Importance, RateControl, Tagging, Timeouts};
use endhost_core::proto::{Control, Endpoint, EndpointConfig};
use endhost_core::wire::{Flags, Kind, Packet};

/// How the network misbehaves.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub loss: f64,
    pub duplicate: f64,
    /// Extra delay, uniform in [0, jitter_ns): packets overtake each other.
    pub jitter_ns: u64,
    /// Lose every retransmission (a path that fails right after the first pass).
    pub drop_retransmits: bool,
}

impl Faults {
    pub const NONE: Faults = Faults {
        loss: 0.0,
        duplicate: 0.0,
        jitter_ns: 0,
        drop_retransmits: false,
    };
}

/// A small deterministic generator (xorshift), seeded by the test.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
}

enum Delivery {
    Datagram {
        from: u16,
        to: u16,
        tos: u8,
        bytes: Vec<u8>,
    },
    Control {
        from: u16,
        to: u16,
        message: Control,
    },
}

pub struct Sim {
    pub engines: Vec<Engine>,
    pub now: u64,
    faults: Faults,
    rng: Rng,
    latency_ns: u64,
    queue: BinaryHeap<Reverse<(u64, u64, usize)>>,
    deliveries: Vec<Option<Delivery>>,
    /// Per ordered pair, when its last control message arrives (keeps them in order).
    control_clock: Vec<Vec<u64>>,
    order: u64,
    pub datagrams_sent: u64,
    pub datagrams_lost: u64,
    /// Every send's first pass, by (sender, receiver, the receiver's handle).
    pub first_passes: BTreeMap<(u16, u16, u32), FirstPass>,
}

/// What a send's first-pass packets were.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FirstPass {
    pub packets: u32,
    /// Sent ECN-capable.
    pub important: u32,
    /// Whose values were all zero.
    pub zeros: u32,
}

pub fn tagging(layers: u32, quantile: f64) -> Tagging {
    Tagging {
        control_dscp: 46,
        layers,
        classes: vec![
            ClassTag {
                class: 0,
                dscp: 32,
                queue: 6,
                first_layer: 0,
                last_layer: layers / 2,
            },
            ClassTag {
                class: 1,
                dscp: 33,
                queue: 5,
                first_layer: layers / 2 + 1,
                last_layer: layers.saturating_sub(1),
            },
        ],
        importance: Importance {
            quantile,
            ..Importance::default()
        },
    }
}

impl Sim {
    pub fn new(world: u16, faults: Faults, seed: u64, timeouts: Timeouts) -> Sim {
        // Small pieces, so that most collectives here are pipelined.
        Sim::build(world, faults, seed, timeouts, 400, 0.5)
    }

    /// A network without faults whose collectives are not pipelined (a send per
    /// step), tagging at `quantile`.
    pub fn unpiped(world: u16, seed: u64, quantile: f64) -> Sim {
        let timeouts = Timeouts {
            phase_ms: 60_000,
            early_exit: false,
        };
        Sim::build(
            world,
            Faults::NONE,
            seed,
            timeouts,
            usize::MAX / 2,
            quantile,
        )
    }

    /// Collectives pipelined in pieces of `slice_elems` values.
    pub fn build(
        world: u16,
        faults: Faults,
        seed: u64,
        timeouts: Timeouts,
        slice_elems: usize,
        quantile: f64,
    ) -> Sim {
        let engines = (0..world)
            .map(|rank| {
                let config = EndpointConfig {
                    job: 7,
                    rank,
                    world,
                    mtu: 1500,
                    rate: RateControl::default(),
                    line_bps: 10e9,
                    tagging: tagging(8, quantile),
                    paths: vec![2; usize::from(world)],
                    early_exit: timeouts.early_exit,
                    // Each end its own handles, as with random seeds.
                    handle_seed: (seed as u32) ^ u32::from(rank).wrapping_mul(2_654_435_761),
                };
                Engine::new(Endpoint::new(config, 0), timeouts).with_slice_elems(slice_elems)
            })
            .collect();
        Sim {
            engines,
            now: 0,
            faults,
            rng: Rng::new(seed),
            latency_ns: 5_000,
            queue: BinaryHeap::new(),
            deliveries: Vec::new(),
            control_clock: vec![vec![0; usize::from(world)]; usize::from(world)],
            order: 0,
            datagrams_sent: 0,
            datagrams_lost: 0,
            first_passes: BTreeMap::new(),
        }
    }

    fn schedule(&mut self, at: u64, delivery: Delivery) {
        self.deliveries.push(Some(delivery));
        self.order += 1;
        self.queue
            .push(Reverse((at, self.order, self.deliveries.len() - 1)));
    }

    /// Moves everything the engines want to send into the network.
    fn collect_output(&mut self) {
        let mut buf = [0u8; 2048];
        for rank in 0..self.engines.len() {
            while let Some(tx) = self.engines[rank].poll_transmit(self.now, &mut buf) {
                self.datagrams_sent += 1;
                let packet =
                    Packet::new_checked(&buf[..tx.len]).expect("a packet the sim can read");
                let retransmit = packet.flags().has(Flags::RETRANSMIT);
                if packet.kind() == Some(Kind::Data) && !retransmit {
                    let pass = self
                        .first_passes
                        .entry((rank as u16, tx.peer, packet.message()))
                        .or_default();
                    pass.packets += 1;
                    pass.important += u32::from(packet.flags().has(Flags::IMPORTANT));
                    pass.zeros += u32::from(packet.payload().iter().all(|&b| b == 0));
                }
                if self.rng.chance(self.faults.loss) || (retransmit && self.faults.drop_retransmits)
                {
                    self.datagrams_lost += 1;
                    continue;
                }
                let copies = if self.rng.chance(self.faults.duplicate) {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let jitter = if self.faults.jitter_ns > 0 {
                        self.rng.next() % self.faults.jitter_ns
                    } else {
                        0
                    };
                    let at = self.now + self.latency_ns + jitter;
                    self.schedule(
                        at,
                        Delivery::Datagram {
                            from: rank as u16,
                            to: tx.peer,
                            tos: tx.tos,
                            bytes: buf[..tx.len].to_vec(),
                        },
                    );
                }
            }
            while let Some((to, message)) = self.engines[rank].poll_control() {
                let clock = &mut self.control_clock[rank][usize::from(to)];
                let at = (self.now + self.latency_ns * 2).max(*clock + 1);
                *clock = at;
                self.schedule(
                    at,
                    Delivery::Control {
                        from: rank as u16,
                        to,
                        message,
                    },
                );
            }
        }
    }

    /// Runs until every engine is idle or `limit_ns` of virtual time passed; returns
    /// each engine's completions.
    pub fn run(&mut self, limit_ns: u64) -> Vec<Vec<Completion>> {
        let mut completions = vec![Vec::new(); self.engines.len()];
        loop {
            self.collect_output();
            for (rank, engine) in self.engines.iter_mut().enumerate() {
                while let Some(c) = engine.poll_completion() {
                    completions[rank].push(c);
                }
            }
            if self.engines.iter().all(|e| e.busy() == 0) && self.queue.is_empty() {
                break;
            }
            let next_delivery = self.queue.peek().map(|Reverse((at, _, _))| *at);
            let next_timer = self.engines.iter().filter_map(Engine::next_timeout).min();
            let Some(next) = [next_delivery, next_timer].into_iter().flatten().min() else {
                break;
            };
            // Time always moves on, so a timer due "now" cannot spin the loop.
            self.now = if next > self.now { next } else { self.now + 1 };
            if self.now > limit_ns {
                break;
            }
            while let Some(&Reverse((at, _, index))) = self.queue.peek() {
                if at > self.now {
                    break;
                }
                self.queue.pop();
                match self.deliveries[index].take().expect("delivered once") {
                    Delivery::Datagram {
                        from,
                        to,
                        tos,
                        bytes,
                    } => self.engines[usize::from(to)].handle_datagram(
                        self.now,
                        Some(from),
                        tos,
                        &bytes,
                    ),
                    Delivery::Control { from, to, message } => {
                        self.engines[usize::from(to)].handle_control(self.now, from, message)
                    }
                }
            }
            for engine in &mut self.engines {
                if engine.next_timeout().is_some_and(|t| t <= self.now) {
                    engine.handle_timeout(self.now);
                }
            }
        }
        completions
    }
}

/// The single completion of `op` among `completions`.
pub fn result_of(completions: &[Completion], op: OpId) -> &Completion {
    completions
        .iter()
        .find(|c| c.op == op)
        .expect("the operation completed")
}
