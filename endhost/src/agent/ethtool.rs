//! The ethtool ioctl (`SIOCETHTOOL`): one command structure (linux/ethtool.h) in and
//! out, for a NIC of this thread's namespace.

use std::io;
use std::os::fd::AsRawFd;

const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// Runs the ethtool command `data` holds (its first field is the command) on `nic`.
///
/// # Safety
/// `T` must be the `repr(C)` structure the command in its first field takes.
pub unsafe fn ethtool<T>(nic: &str, data: &mut T) -> io::Result<()> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    // Any socket carries the ioctl; it binds nothing.
    let socket = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)?;
    // SAFETY: ifreq is plain data.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    if nic.len() >= request.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NIC name too long",
        ));
    }
    for (dst, src) in request.ifr_name.iter_mut().zip(nic.bytes()) {
        *dst = src as libc::c_char;
    }
    request.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: a valid socket, ifreq and, by the caller, the structure the command takes.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL, &mut request) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
