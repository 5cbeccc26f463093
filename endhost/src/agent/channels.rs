//! The NIC's queues for DPDK's af_xdp device: one AF_XDP socket binds one queue, and
//! the NIC's RSS spreads the data port over all its queues, so the NIC needs exactly as
//! many combined channels as the transport's RX queues (a datagram on a queue without a
//! socket would pass to the kernel and be lost). Read and set through the ethtool ioctl
//! (`ethtool -l` / `ethtool -L NIC combined N`).

use std::io;
use std::os::fd::AsFd;

use endhost_core::host::{Step, StepStatus};

const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_SCHANNELS: u32 = 0x3d;

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// A NIC's combined channels: how many it has and may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channels {
    pub combined: u32,
    pub max_combined: u32,
}

fn ethtool(nic: &str, channels: &mut EthtoolChannels) -> io::Result<()> {
    let socket = mlt_common::ethtool::socket()?;
    // SAFETY: EthtoolChannels is the structure the channel commands take.
    unsafe { mlt_common::ethtool::command(socket.as_fd(), nic, channels) }
}

/// The NIC's channels; a NIC that reports none (a veth, many virtual NICs) has one
/// queue, as DPDK's af_xdp device counts it.
pub fn read(nic: &str) -> io::Result<Channels> {
    let mut channels = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    match ethtool(nic, &mut channels) {
        Ok(()) if channels.max_combined > 0 => Ok(Channels {
            combined: channels.combined_count,
            max_combined: channels.max_combined,
        }),
        Ok(()) => Ok(Channels {
            combined: 1,
            max_combined: 1,
        }),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(Channels {
            combined: 1,
            max_combined: 1,
        }),
        Err(e) => Err(e),
    }
}

fn set_combined(nic: &str, combined: u32) -> io::Result<()> {
    let mut channels = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    ethtool(nic, &mut channels)?;
    channels.cmd = ETHTOOL_SCHANNELS;
    channels.combined_count = combined;
    ethtool(nic, &mut channels)
}

/// What the NIC needs for `want` AF_XDP queues, given what it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    AsPlanned,
    Set,
    Impossible,
}

pub fn decide(have: Channels, want: u32) -> Decision {
    if have.combined == want {
        Decision::AsPlanned
    } else if have.max_combined >= want {
        Decision::Set
    } else {
        Decision::Impossible
    }
}

/// The step: the NIC has `want` queues, or gets them (or, in check mode, would).
pub fn step(nic: &str, want: u16, check: bool) -> Step {
    const NAME: &str = "af_xdp queues";
    let want = u32::from(want);
    let have = match read(nic) {
        Ok(have) => have,
        Err(e) => {
            return Step::failed(
                NAME,
                format!("read {nic}'s queues"),
                format!("ethtool: {e}"),
            );
        }
    };
    match decide(have, want) {
        Decision::AsPlanned => Step::new(
            NAME,
            format!("{nic} has {want} queue(s), one per AF_XDP socket"),
            StepStatus::Ok,
        ),
        Decision::Set => {
            let action = format!(
                "set {nic}'s combined queues from {} to {want} (ethtool -L), one per \
                 AF_XDP socket",
                have.combined
            );
            if check {
                return Step::new(NAME, action, StepStatus::WouldChange);
            }
            match set_combined(nic, want) {
                Ok(()) => Step::new(NAME, action, StepStatus::Changed),
                Err(e) => Step::failed(NAME, action, format!("ethtool: {e}")),
            }
        }
        Decision::Impossible => Step::failed(
            NAME,
            format!("give {nic} {want} queue(s) for AF_XDP"),
            format!(
                "{nic} offers at most {} queue(s): set training.datapath.rx_queues to {} or fewer",
                have.max_combined, have.max_combined
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_as_planned_set_or_impossible() {
        let nic = |combined, max_combined| Channels {
            combined,
            max_combined,
        };
        assert_eq!(decide(nic(4, 8), 4), Decision::AsPlanned);
        assert_eq!(decide(nic(2, 16), 4), Decision::Set);
        // More queues than sockets: RSS would hand datagrams to queues nobody reads.
        assert_eq!(decide(nic(8, 8), 4), Decision::Set);
        assert_eq!(decide(nic(1, 1), 4), Decision::Impossible);
        assert_eq!(decide(nic(1, 1), 1), Decision::AsPlanned);
    }

    #[test]
    fn loopback_reports_one_queue() {
        // lo has no channels (EOPNOTSUPP): one queue, as DPDK counts it.
        let lo = read("lo").unwrap();
        assert_eq!((lo.combined, lo.max_combined), (1, 1));
        let step = step("lo", 4, true);
        assert_eq!(step.status, StepStatus::Failed, "{step:?}");
        assert!(step.reason.unwrap().contains("rx_queues to 1 or fewer"));
    }
}
