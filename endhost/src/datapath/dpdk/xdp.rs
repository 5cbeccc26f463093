//! Our XDP program for DPDK's `net_af_xdp` PMD (`dpdk-sys/csrc/xdp_redirect.bpf.c`,
//! built by dpdk-sys with clang): it redirects only UDP to the job's data port to the
//! PMD's AF_XDP sockets and passes everything else to the kernel, so the NIC keeps its
//! kernel interface for ARP, SSH and the transport's control channel. The datapath
//! writes the data port into a copy of the object and names it in the vdev
//! (`xdp_prog=`); the PMD loads it when the port's queues are set up and detaches it
//! when the port closes.

use std::path::{Path, PathBuf};

/// The magic that marks the program's configuration in its read-only data.
const MAGIC: &[u8; 8] = b"MLTXDPv1";

/// Whether `vdev` is an af_xdp device that needs our program (it names none).
pub fn wants_program(vdev: &str) -> bool {
    vdev.starts_with("net_af_xdp") && super::eal::vdev_arg(vdev, "xdp_prog=").is_none()
}

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

/// The program written for the PMD to load, in a directory of its own that only this
/// user may enter (a root process writing a guessable path in /tmp could be sent
/// through a symlink); both removed when dropped (the PMD has loaded it by then).
pub struct ProgramFile {
    dir: PathBuf,
    path: PathBuf,
}

impl ProgramFile {
    pub fn write(under: &Path, program: &[u8]) -> std::io::Result<ProgramFile> {
        use std::io::Write;
        use std::os::unix::fs::DirBuilderExt;
        // Named by the process only: one datapath a process, and no name from a
        // configuration in a path.
        let dir = under.join(format!("endhost-xdp-{}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let file = ProgramFile {
            path: dir.join("xdp_redirect.o"),
            dir,
        };
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file.path)?
            .write_all(program)?;
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ProgramFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
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
        let under = std::env::temp_dir();
        let file = ProgramFile::write(&under, b"program").unwrap();
        assert_eq!(std::fs::read(file.path()).unwrap(), b"program");
        let dir = file.path().parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // A second writer in this process is refused, not followed.
        assert!(ProgramFile::write(&under, b"other").is_err());
        drop(file);
        assert!(!dir.exists());
    }

    #[test]
    fn only_af_xdp_devices_without_a_program_get_ours() {
        assert!(wants_program("net_af_xdp0,iface=eth0"));
        assert!(!wants_program("net_af_xdp0,iface=eth0,xdp_prog=/x.o"));
        assert!(!wants_program("net_af_packet0,iface=eth0"));
    }
}
