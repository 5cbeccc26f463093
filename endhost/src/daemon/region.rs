//! The shared memory a training process attaches: a sealed memfd the transport maps
//! and hands over the Unix socket, so a bucket's values cross between the processes
//! through memory instead of the socket.

use std::ffi::c_void;
use std::io;
use std::io::IoSlice;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::NonNull;

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::UnixStream;

/// A region of f32 values, mapped here and in the process that attached it.
pub struct SharedRegion {
    ptr: NonNull<c_void>,
    len: NonZeroUsize,
    fd: OwnedFd,
}

impl SharedRegion {
    /// A new zeroed region of `bytes`. Its size is sealed: the other process cannot
    /// shrink it under our mapping (which would fault on access) nor grow it.
    pub fn new(bytes: usize) -> io::Result<SharedRegion> {
        let len = NonZeroUsize::new(bytes)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an empty region"))?;
        let fd = memfd_create(
            c"mlt-allreduce",
            MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
        )?;
        nix::unistd::ftruncate(&fd, bytes as i64)?;
        fcntl(
            &fd,
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )?;
        // SAFETY: a fresh shared mapping of a file we own, of its sealed size.
        let ptr = unsafe {
            mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd.as_fd(),
                0,
            )?
        };
        Ok(SharedRegion { ptr, len, fd })
    }

    /// How many f32 it holds.
    pub fn values(&self) -> usize {
        self.len.get() / 4
    }

    /// The first `n` values (n ≤ [`SharedRegion::values`]). The other process may write
    /// meanwhile; that spoils only its own values, never our memory.
    pub fn read(&self, n: usize) -> Vec<f32> {
        assert!(n <= self.values());
        let mut out = Vec::<f32>::with_capacity(n);
        // SAFETY: the mapping holds n f32 (page-aligned), `out` has room for them, and
        // plain bytes are a valid f32 whatever the other process wrote.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().cast::<f32>(), out.as_mut_ptr(), n);
            out.set_len(n);
        }
        out
    }

    /// Writes `values` at the start (`values.len()` ≤ [`SharedRegion::values`]).
    pub fn write(&self, values: &[f32]) {
        assert!(values.len() <= self.values());
        // SAFETY: the mapping has room for them and does not overlap `values`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr(),
                self.ptr.as_ptr().cast::<f32>(),
                values.len(),
            );
        }
    }

    /// Writes `line` to `stream` with the region's memfd (SCM_RIGHTS).
    pub async fn send(&self, stream: &mut UnixStream, line: &[u8]) -> io::Result<()> {
        let fd = [self.fd.as_raw_fd()];
        let sent = loop {
            stream.writable().await?;
            let result = stream.try_io(Interest::WRITABLE, || {
                sendmsg::<()>(
                    stream.as_raw_fd(),
                    &[IoSlice::new(line)],
                    &[ControlMessage::ScmRights(&fd)],
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(io::Error::from)
            });
            match result {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        // The descriptor went with the first byte; the rest of the line is plain.
        stream.write_all(&line[sent..]).await
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // SAFETY: our own mapping, not used after this.
        let _ = unsafe { munmap(self.ptr, self.len.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_cannot_be_shrunk_by_its_other_holder() {
        let region = SharedRegion::new(4096).unwrap();
        region.write(&[1.5, -2.0]);
        assert_eq!(region.read(2), vec![1.5, -2.0]);
        let other = region.fd.try_clone().unwrap();
        assert!(nix::unistd::ftruncate(&other, 0).is_err());
        assert!(nix::unistd::ftruncate(&other, 8192).is_err());
        assert_eq!(region.values(), 1024);
    }
}
