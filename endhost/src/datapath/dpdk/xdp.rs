//! Our XDP program for DPDK's `net_af_xdp` PMD (`dpdk-sys/csrc/xdp_redirect.bpf.c`,
//! built by dpdk-sys with clang): it redirects only UDP to the job's data port to the
//! PMD's AF_XDP sockets and passes everything else to the kernel, so the NIC keeps its
//! kernel interface for ARP, SSH and the transport's control channel. The datapath
//! writes the data port into a copy of the object and names it in the vdev
//! (`xdp_prog=`); the PMD loads it when the port's queues are set up and detaches it
//! when the port closes.

use std::path::PathBuf;

use mlt_common::files::{self, Access, FileError, TempDir};

/// The magic that marks the program's configuration in its read-only data.
const MAGIC: &[u8; 8] = b"MLTXDPv1";

/// `object` (the compiled program) with `data_port` in its configuration.
pub fn program_for(object: &[u8], data_port: u16) -> Result<Vec<u8>, String> {
    let mut at = object
        .windows(MAGIC.len())
        .enumerate()
        .filter(|(_, w)| w == MAGIC)
        .map(|(i, _)| i);
    let (Some(at), None) = (at.next(), at.next()) else {
        return Err("the XDP program's configuration is not there exactly once".into());
    };
    let port = at + MAGIC.len();
    let mut program = object.to_vec();
    // The program is built for the host's byte order (-target bpf).
    program[port..port + 2].copy_from_slice(&data_port.to_ne_bytes());
    Ok(program)
}

/// The program written for the PMD to load, in a fresh scratch directory (unguessable
/// name, 0700: a root process writing a guessable path in /tmp could be sent through a
/// symlink or locked out); both removed when dropped (the PMD has loaded it by then).
pub struct ProgramFile {
    dir: TempDir,
}

impl ProgramFile {
    pub fn write(program: &[u8]) -> Result<ProgramFile, FileError> {
        let file = ProgramFile {
            dir: files::scratch_dir("endhost-xdp-")?,
        };
        files::write(&file.path(), program, Access::Private)?;
        Ok(file)
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("xdp_redirect.o")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_port_goes_after_the_magic() {
        let mut object = b"ELF....".to_vec();
        object.extend_from_slice(MAGIC);
        object.extend_from_slice(&[0, 0, 0, 0, 0xaa]);
        let program = program_for(&object, 11000).unwrap();
        let at = 7 + MAGIC.len();
        assert_eq!(&program[at..at + 2], &11000u16.to_ne_bytes());
        assert_eq!(program.len(), object.len());
        assert_eq!(program[at + 4], 0xaa);
    }

    #[test]
    fn an_object_without_the_magic_or_with_two_is_refused() {
        assert!(program_for(b"no configuration here", 1).is_err());
        let twice = [&MAGIC[..], &[0; 4], &MAGIC[..], &[0; 4]].concat();
        assert!(program_for(&twice, 1).is_err());
    }

    #[test]
    fn the_compiled_program_carries_its_configuration_and_map() {
        let object = dpdk_sys::XDP_REDIRECT_OBJECT;
        assert!(program_for(object, 11000).is_ok());
        assert!(object.windows(8).any(|w| w == b"xsks_map"));
    }

    #[test]
    fn the_file_is_private_and_goes_when_dropped() {
        use std::os::unix::fs::PermissionsExt;
        let file = ProgramFile::write(b"program").unwrap();
        assert_eq!(std::fs::read(file.path()).unwrap(), b"program");
        let dir = file.path().parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // A second writer gets a directory of its own.
        let other = ProgramFile::write(b"other").unwrap();
        assert_ne!(other.path(), file.path());
        drop(file);
        assert!(!dir.exists());
    }
}
