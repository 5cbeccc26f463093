//! The ethtool ioctl (`SIOCETHTOOL`), what `ethtool -k/-K/-l/-L` do without starting
//! ethtool: one command structure (linux/ethtool.h) in and out, for a NIC of the
//! namespace a socket was opened in. The host agent and the namespace builder both
//! read and set offloads through it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// A legacy one-value command, the only kind [`value`] runs (the kernel maps them onto
/// features): only this module makes them, so a safe call cannot name a command that
/// writes a larger structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OneValue(u32);

pub const STXCSUM: OneValue = OneValue(0x17);
pub const STSO: OneValue = OneValue(0x1f);
pub const SGSO: OneValue = OneValue(0x24);
pub const GGRO: OneValue = OneValue(0x2b);
pub const SGRO: OneValue = OneValue(0x2c);

/// `struct ethtool_value`.
#[repr(C)]
struct Value {
    cmd: u32,
    data: u32,
}

/// A socket of this thread's network namespace to carry the ioctl (it binds nothing).
pub fn socket() -> io::Result<OwnedFd> {
    // SAFETY: a plain socket call; its descriptor is owned at once below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Runs the ethtool command `data` holds (its first field is the command) on `nic` of
/// `socket`'s namespace.
///
/// # Safety
/// `T` must be the `repr(C)` structure the command in its first field takes.
pub unsafe fn command<T>(socket: BorrowedFd<'_>, nic: &str, data: &mut T) -> io::Result<()> {
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
    if unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL, &mut request) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs one-value command `cmd` with `data`; the value the kernel gives back.
pub fn value(socket: BorrowedFd<'_>, nic: &str, cmd: OneValue, data: u32) -> io::Result<u32> {
    let mut value = Value { cmd: cmd.0, data };
    // SAFETY: Value is `struct ethtool_value`, what the one-value commands take.
    unsafe { command(socket, nic, &mut value) }?;
    Ok(value.data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn loopback_merges_what_it_receives() {
        let socket = socket().unwrap();
        assert_eq!(value(socket.as_fd(), "lo", GGRO, 0).unwrap(), 1);
    }

    #[test]
    fn a_name_too_long_for_the_kernel_is_refused_before_the_ioctl() {
        let socket = socket().unwrap();
        let e = value(socket.as_fd(), &"n".repeat(16), GGRO, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
