//! A NIC's offloads, read and set through the ethtool ioctl (`ethtool -k` / `-K`) on a
//! socket opened in the NIC's namespace, so a program in another namespace can watch
//! and change them without starting `ethtool` each time.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use mlt_common::ethtool::{self, GGRO, OneValue, SGSO, STSO, STXCSUM};

use crate::{Namespace, NetnsError};

/// A NIC of a namespace.
pub struct Nic {
    socket: OwnedFd,
    name: String,
}

impl Nic {
    /// NIC `name` of `namespace`.
    pub fn open(namespace: &Namespace, name: &str) -> Result<Nic, NetnsError> {
        let path = format!("/run/netns/{}", namespace.name());
        let fail = |what: &str, e: io::Error| NetnsError::Other(format!("{what}: {e}"));
        let file = std::fs::File::open(&path).map_err(|e| fail(&path, e))?;
        // A thread of its own enters the namespace: the caller's stays where it is.
        let socket = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: setns on a namespace file held open; it moves this thread only.
                    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    ethtool::socket()
                })
                .join()
                .map_err(|_| io::Error::other("the thread that entered the namespace panicked"))?
        })
        .map_err(|e| fail(&format!("cannot reach {name} in {}", namespace.name()), e))?;
        Ok(Nic {
            socket,
            name: name.to_string(),
        })
    }

    /// Whether the NIC merges what it receives (GRO).
    pub fn gro(&self) -> io::Result<bool> {
        self.ethtool(GGRO, 0).map(|on| on != 0)
    }

    /// Checksum, TCP segmentation and generic segmentation offload on or off together:
    /// off, the kernel segments and checksums a GSO frame before the NIC sends it.
    pub fn set_segmentation(&self, on: bool) -> io::Result<()> {
        // Segmentation needs checksum offload: on, checksums first; off, them last.
        let order = if on {
            [STXCSUM, STSO, SGSO]
        } else {
            [SGSO, STSO, STXCSUM]
        };
        for cmd in order {
            self.ethtool(cmd, u32::from(on))?;
        }
        Ok(())
    }

    fn ethtool(&self, cmd: OneValue, data: u32) -> io::Result<u32> {
        ethtool::value(self.socket.as_fd(), &self.name, cmd, data)
    }
}
