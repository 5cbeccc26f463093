//! What the transport counts: per peer and per class, and the packets it refused.

use serde::{Deserialize, Serialize};

use crate::wire::WireError;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PeerCounters {
    pub rank: u16,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub packets_retransmitted: u64,
    pub duplicates: u64,
    /// Data for a message already complete (after STOP) or not known.
    pub late: u64,
    pub acks_sent: u64,
    pub acks_received: u64,
    pub rate_mbps: f64,
    pub srtt_us: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ClassCounters {
    pub class: u8,
    pub packets_sent: u64,
    /// Of those, sent ECN-capable (important).
    pub important_sent: u64,
    /// important_sent / packets_sent: about 1 − the importance quantile.
    pub important_fraction: f64,
}

/// The collectives' results: how many values, and how many of them no loss reached.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ResultCounters {
    pub values: u64,
    pub exact_values: u64,
    /// exact_values / values (1 before any result).
    pub exact_fraction: f64,
}

/// Datagrams dropped before reaching any message, by reason.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Dropped {
    pub truncated: u64,
    pub foreign: u64,
    pub malformed: u64,
    pub foreign_job: u64,
    pub unknown_rank: u64,
    /// From an address that is not the rank's it names (or no peer's at all).
    pub wrong_source: u64,
    pub out_of_range: u64,
}

impl Dropped {
    pub fn wire(&mut self, e: WireError) {
        match e {
            WireError::Truncated => self.truncated += 1,
            WireError::Foreign => self.foreign += 1,
            WireError::Malformed => self.malformed += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.truncated
            + self.foreign
            + self.malformed
            + self.foreign_job
            + self.unknown_rank
            + self.wrong_source
            + self.out_of_range
    }
}

/// Where the host's link time went, as the endpoint saw it between its polls: sending
/// (the NIC still sending what it was handed, or waiting for the line rate's next
/// tokens), holding data back because every
/// destination's rate control said wait, or with nothing to send (waiting for a
/// READY, a STOP, a probe's answer, or a peer's data for the next step).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct LinkTime {
    pub busy_ns: u64,
    pub rate_limited_ns: u64,
    pub idle_ns: u64,
    /// Of `busy_ns`, line time lost because the driver polled later than the pacer's
    /// burst allowance (tokens the full bucket could not hold while data waited): a
    /// late timer, or the datapath thread waiting for a CPU.
    pub late_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Counters {
    pub peers: Vec<PeerCounters>,
    pub classes: Vec<ClassCounters>,
    pub dropped: Dropped,
    /// Receives that ended short of their loss bound (early exit).
    pub bound_missed: u64,
    pub probes_sent: u64,
    /// Probes that came before their message's last packet, answered when it landed
    /// (or half a probe floor later): a bitmap sent at once would have asked again for
    /// the packets in flight behind the probe.
    pub probes_held: u64,
    pub bitmaps_sent: u64,
    /// Bitmaps refused: ranges out of order, overlapping, empty or past the message.
    pub bitmaps_rejected: u64,
    pub link: LinkTime,
    pub results: ResultCounters,
    /// Class probes sent (`mltctl verify`), every DSCP together.
    pub class_probes_sent: u64,
    /// What arrived from peers, by DSCP (those that saw any), with the CE marks the
    /// switches set.
    pub arrivals: Vec<DscpArrivals>,
}

/// Datagrams that arrived from peers with one DSCP: data and acknowledgements, and
/// class probes apart; of each, how many a switch marked CE.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DscpArrivals {
    pub dscp: u8,
    pub packets: u64,
    pub ce: u64,
    pub probes: u64,
    pub probes_ce: u64,
}

impl Counters {
    pub fn new(world: u16) -> Counters {
        Counters {
            peers: (0..world)
                .map(|rank| PeerCounters {
                    rank,
                    ..PeerCounters::default()
                })
                .collect(),
            classes: Vec::new(),
            ..Counters::default()
        }
    }

    pub fn class(&mut self, class: u8) -> &mut ClassCounters {
        let i = match self.classes.iter().position(|c| c.class == class) {
            Some(i) => i,
            None => {
                self.classes.push(ClassCounters {
                    class,
                    ..ClassCounters::default()
                });
                self.classes.sort_by_key(|c| c.class);
                self.classes
                    .iter()
                    .position(|c| c.class == class)
                    .expect("just added")
            }
        };
        &mut self.classes[i]
    }
}
