//! Reading a file a user or a device gave us: a regular file only (a FIFO would block,
//! `/dev/zero` would never end), no larger than the caller's limit, UTF-8 with the place
//! of the first byte that is not, and without a byte-order mark.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest configuration, plan or IP=MAC file endhost reads (a host of a 2,048-host
/// fabric has a network plan of a few MB).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Why a file could not be read as text.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not a regular file (it is {0})")]
    NotAFile(&'static str),
    #[error("larger than {limit} bytes, the most this input may be")]
    TooLarge { limit: u64 },
    #[error("not UTF-8 text: line {line}, column {column}")]
    NotUtf8 { line: usize, column: usize },
}

/// Reads `path` as UTF-8 text of at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, InputError> {
    text(read_bytes(path, limit)?)
}

/// Reads the regular file `path` whole, if it holds at most `limit` bytes.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer; on a regular file
    // it changes nothing.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(InputError::NotAFile(crate::files::describe(&kind)));
    }
    let mut bytes = Vec::new();
    // One byte past the limit tells a file at the limit from one that grew past it.
    Read::by_ref(&mut &file)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLarge { limit });
    }
    Ok(bytes)
}

/// `bytes` as text without a byte-order mark, or where the first bad byte is.
pub fn text(mut bytes: Vec<u8>) -> Result<String, InputError> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
        InputError::NotUtf8 {
            line: good.iter().filter(|&&b| b == b'\n').count() + 1,
            column,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> crate::files::TempDir {
        crate::files::scratch_dir("mlt-input-").unwrap()
    }

    #[test]
    fn text_files_within_the_limit_are_read_without_a_bom() {
        let dir = scratch();
        let path = dir.path().join("bom.yaml");
        std::fs::write(&path, b"\xEF\xBB\xBFfabric: {}\n").unwrap();
        assert_eq!(read_text(&path, 100).unwrap(), "fabric: {}\n");
        assert!(matches!(
            read_text(&path, 5),
            Err(InputError::TooLarge { limit: 5 })
        ));
    }

    #[test]
    fn a_bad_byte_is_placed_by_line_and_column() {
        let err = text(b"ok\nh\xC3\xA9\xFFx\n".to_vec()).unwrap_err();
        assert!(
            matches!(err, InputError::NotUtf8 { line: 2, column: 3 }),
            "{err}"
        );
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_at_once() {
        let dir = scratch();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let cases = [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (Path::new("/"), "a directory"),
        ];
        for (path, kind) in cases {
            let err = read_text(path, 1 << 20).unwrap_err();
            assert!(matches!(err, InputError::NotAFile(k) if k == kind), "{err}");
        }
    }
}
