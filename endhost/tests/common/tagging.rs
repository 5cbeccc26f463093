//! Checking the tags of captured data-port datagrams: acknowledgements in the control
//! class (DSCP 46, no ECN), data in its layer's class (DSCP 32 + layer, one class per
//! layer in these tests) with ECT(0) exactly on important packets.

use std::collections::BTreeSet;

use endhost_core::config::{ClassTag, TransportConfig};
use endhost_core::wire::{Flags, Kind, Packet};

/// Layers of the tagging tests' jobs; run them with `--layers 4`.
pub const LAYERS: u8 = 4;

/// Gives `config` one class per layer: layer l in DSCP 32 + l, what [`Tagging`] checks.
pub fn one_class_per_layer(config: &mut TransportConfig) {
    config.job.tagging.layers = u32::from(LAYERS);
    config.job.tagging.classes = (0..LAYERS)
        .map(|class| ClassTag {
            class,
            dscp: 32 + class,
            queue: 6 - class,
            first_layer: u32::from(class),
            last_layer: u32::from(class),
        })
        .collect();
}

#[derive(Default)]
pub struct Tagging {
    pub data: u32,
    pub important: u32,
    pub acks: u32,
    pub dscps: BTreeSet<u8>,
}

impl Tagging {
    /// Checks one datagram: its UDP `payload`, sent with IP TOS byte `tos`.
    pub fn check(&mut self, tos: u8, payload: &[u8]) {
        let (dscp, ecn) = (tos >> 2, tos & 0b11);
        let packet = Packet::new_checked(payload).expect("our datagrams parse");
        if packet.kind() == Some(Kind::Ack) {
            assert_eq!(
                (dscp, ecn),
                (46, 0),
                "acknowledgements in the control class"
            );
            self.acks += 1;
            return;
        }
        self.data += 1;
        assert_eq!(
            dscp,
            32 + packet.layer() as u8,
            "the DSCP of the packet's layer"
        );
        let marked = packet.flags().has(Flags::IMPORTANT);
        assert_eq!(
            ecn,
            if marked { 0b10 } else { 0 },
            "ECT(0) exactly on important packets"
        );
        self.important += u32::from(marked);
        self.dscps.insert(dscp);
    }

    /// Enough data seen (`context` says of what), some of it important but not all, and
    /// every one of the four layer classes.
    pub fn assert_complete(&self, context: &str) {
        assert!(self.data > 500, "{} data packets {context}", self.data);
        assert!(
            self.important > 0 && self.important < self.data,
            "{} of {} important",
            self.important,
            self.data
        );
        assert_eq!(
            self.dscps.len(),
            usize::from(LAYERS),
            "every layer class seen: {:?}",
            self.dscps
        );
    }
}
