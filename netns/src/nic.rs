//! A NIC's offloads, read and set through the ethtool ioctl (`ethtool -k` / `-K`) on a
//! socket opened in the NIC's namespace, so a program in another namespace can watch
//! and change them without starting `ethtool` each time.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::{Namespace, NetnsError};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
// The legacy one-value commands (linux/ethtool.h); the kernel maps them onto features.
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GGRO: u32 = 0x2b;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

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
                    // SAFETY: a plain socket, owned at once; any socket carries the ioctl.
                    let fd = unsafe {
                        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
                    };
                    if fd < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // SAFETY: fd was just opened and is owned here only.
                    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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
        self.ethtool(ETHTOOL_GGRO, 0).map(|on| on != 0)
    }

    /// Checksum, TCP segmentation and generic segmentation offload on or off together:
    /// off, the kernel segments and checksums a GSO frame before the NIC sends it.
    pub fn set_segmentation(&self, on: bool) -> io::Result<()> {
        // Segmentation needs checksum offload: on, checksums first; off, them last.
        let order = if on {
            [ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO]
        } else {
            [ETHTOOL_SGSO, ETHTOOL_STSO, ETHTOOL_STXCSUM]
        };
        for cmd in order {
            self.ethtool(cmd, u32::from(on))?;
        }
        Ok(())
    }

    fn ethtool(&self, cmd: u32, data: u32) -> io::Result<u32> {
        let mut value = EthtoolValue { cmd, data };
        // SAFETY: ifreq is plain data.
        let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
        if self.name.len() >= request.ifr_name.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "NIC name too long",
            ));
        }
        for (dst, src) in request.ifr_name.iter_mut().zip(self.name.bytes()) {
            *dst = src as libc::c_char;
        }
        request.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
        // SAFETY: a valid socket, ifreq and the ethtool value it points at.
        if unsafe { libc::ioctl(self.socket.as_raw_fd(), SIOCETHTOOL, &mut request) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(value.data)
    }
}
