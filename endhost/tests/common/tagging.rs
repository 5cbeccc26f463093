//! Checking the tags of captured data-port datagrams: acknowledgements in the control
//! class (DSCP 46, no ECN), data in its layer's class (DSCP 32 + layer, one class per
//! layer in these tests) with ECT(0) exactly on important packets.

use std::collections::{BTreeSet, HashMap};

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
    /// Per (sender, message): the highest sequence seen so far and its DSCP.
    last: HashMap<(u16, u32), (u32, u8)>,
}

impl Tagging {
    /// Checks one datagram: its UDP `payload`, sent with IP TOS byte `tos`. The layer
    /// is not on the wire (the DSCP carries it), so the check is that every data packet
    /// is in a layer class, and that within a message the class never goes back to an
    /// earlier layer as the sequence grows (layers lie in order in the tensor).
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
        assert!(
            (32..32 + LAYERS).contains(&dscp),
            "DSCP {dscp} is a layer class's"
        );
        let key = (packet.rank(), packet.message());
        let seq = packet.sequence();
        match self.last.get(&key) {
            Some(&(last_seq, last_dscp)) if seq > last_seq => assert!(
                dscp >= last_dscp,
                "packet {seq} of a message in DSCP {dscp}, packet {last_seq} before it in {last_dscp}"
            ),
            Some(&(last_seq, last_dscp)) if seq < last_seq => assert!(
                dscp <= last_dscp,
                "packet {seq} of a message in DSCP {dscp}, packet {last_seq} after it in {last_dscp}"
            ),
            _ => {}
        }
        if self
            .last
            .get(&key)
            .is_none_or(|&(last_seq, _)| seq > last_seq)
        {
            self.last.insert(key, (seq, dscp));
        }
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
