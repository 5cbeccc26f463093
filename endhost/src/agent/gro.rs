//! The NIC's receive offload for DPDK over the kernel interface: af_packet and af_xdp
//! read frames as the NIC received them, and a frame GRO merged (up to 64 KiB) is larger
//! than the device's buffers (af_packet truncates it, the transport drops it as
//! malformed). Read and set through the ethtool ioctl (`ethtool -K NIC gro off`).

use std::io;
use std::os::fd::AsFd;

use endhost_core::host::{Step, StepStatus};
use mlt_common::ethtool::{self, GGRO, OneValue, SGRO};

fn ethtool(nic: &str, cmd: OneValue, data: u32) -> io::Result<u32> {
    ethtool::value(ethtool::socket()?.as_fd(), nic, cmd, data)
}

/// The step: GRO is off on `nic`, or is turned off (or, in check mode, would be).
pub fn step(nic: &str, check: bool) -> Step {
    const NAME: &str = "gro";
    let action = format!("turn GRO off on {nic} (ethtool -K {nic} gro off): DPDK reads its frames");
    let on = match ethtool(nic, GGRO, 0) {
        Ok(on) => on != 0,
        // A NIC without the feature merges nothing.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => false,
        Err(e) => return Step::failed(NAME, format!("read {nic}'s GRO"), format!("ethtool: {e}")),
    };
    if !on {
        return Step::new(NAME, format!("GRO is off on {nic}"), StepStatus::Ok);
    }
    if check {
        return Step::new(NAME, action, StepStatus::WouldChange);
    }
    match ethtool(nic, SGRO, 0).and_then(|_| ethtool(nic, GGRO, 0)) {
        Ok(0) => Step::new(NAME, action, StepStatus::Changed),
        Ok(_) => Step::failed(NAME, action, "the NIC keeps GRO on"),
        Err(e) => Step::failed(NAME, action, format!("ethtool: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_mode_says_it_would_turn_gro_off_and_changes_nothing() {
        // lo merges what it receives (GRO on) on Linux.
        assert_eq!(ethtool("lo", GGRO, 0).unwrap(), 1);
        let step = step("lo", true);
        assert_eq!(step.status, StepStatus::WouldChange, "{step:?}");
        assert!(step.action.contains("gro off"), "{step:?}");
        assert_eq!(ethtool("lo", GGRO, 0).unwrap(), 1, "unchanged");
    }

    #[test]
    fn a_nic_that_does_not_exist_fails_naming_it() {
        let step = step("nosuchnic0", true);
        assert_eq!(step.status, StepStatus::Failed, "{step:?}");
        assert!(step.action.contains("nosuchnic0"), "{step:?}");
    }
}
