//! The journal on disk: its file, its key, and the chain that ties its lines to the key.
//!
//! - The file is opened without following a link and must be this user's regular
//!   file. Writers hold an exclusive `flock` while they check what others appended
//!   since they last looked and append their own line; readers hold a shared one, so
//!   nobody sees half a line.
//! - The key file (`<journal>.key`, 0600) holds the secret and the seal: the length and
//!   SHA-256 of the lines written before the journal had a key (journals of older
//!   mltctl versions), made with the key. Those lines must stay exactly as sealed.
//! - Every later line is `{"chain":"<hex>",…}`: HMAC-SHA-256 under the secret of the
//!   previous line's MAC (the seal's SHA-256 for the first) and the line's own text.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use mlt_common::files::{self, Access};
use mlt_common::input::{self, InputError};
use sha2::{Digest, Sha256};

use super::{Entry, JournalError, MAX_JOURNAL_BYTES};

/// What a chained line starts with; its MAC (64 hex digits) and `",` follow.
pub const CHAIN_PREFIX: &str = "{\"chain\":\"";

const SECRET_BYTES: usize = 32;
/// The key file: the secret, then the seal's length (big-endian) and SHA-256.
const KEY_FILE_BYTES: usize = SECRET_BYTES + 8 + 32;

/// Where the key of the journal at `path` is kept: beside it, its name and `.key`.
pub fn key_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// The journal's secret and seal.
pub struct Key {
    secret: [u8; SECRET_BYTES],
    /// Bytes of the lines before the key, and their SHA-256.
    sealed_len: u64,
    sealed_sha256: [u8; 32],
}

impl Key {
    /// The key of the journal at `path`, if it has one: a regular file of this user that
    /// nobody else can read.
    fn load(path: &Path) -> Result<Option<Key>, JournalError> {
        let key_path = key_path(path);
        let no_key = |why: String| JournalError::NoKey {
            path: path.to_path_buf(),
            key: key_path.clone(),
            why,
        };
        let meta = match std::fs::symlink_metadata(&key_path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(no_key(e.to_string())),
        };
        if !meta.is_file() || meta.uid() != files::effective_uid() || meta.mode() & 0o077 != 0 {
            return Err(no_key(format!(
                "it must be a regular file of this user with mode 0600 (it is mode {:04o}, uid {})",
                meta.mode() & 0o7777,
                meta.uid()
            )));
        }
        let bytes = input::read_bytes(&key_path, 4096).map_err(|e| no_key(e.to_string()))?;
        if bytes.len() != KEY_FILE_BYTES {
            return Err(no_key(format!(
                "it holds {} bytes, not {KEY_FILE_BYTES}",
                bytes.len()
            )));
        }
        let (secret, rest) = bytes.split_at(SECRET_BYTES);
        let (length, sha256) = rest.split_at(8);
        Ok(Some(Key {
            secret: secret.try_into().expect("split at its size"),
            sealed_len: u64::from_be_bytes(length.try_into().expect("8 bytes")),
            sealed_sha256: sha256.try_into().expect("32 bytes"),
        }))
    }

    /// A new key for the journal at `path`, sealing its first `sealed` bytes.
    fn make(path: &Path, sealed: &[u8]) -> Result<Key, JournalError> {
        let mut secret = [0u8; SECRET_BYTES];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut secret);
        let key = Key {
            secret,
            sealed_len: sealed.len() as u64,
            sealed_sha256: Sha256::digest(sealed).into(),
        };
        let mut bytes = key.secret.to_vec();
        bytes.extend_from_slice(&key.sealed_len.to_be_bytes());
        bytes.extend_from_slice(&key.sealed_sha256);
        files::write(&key_path(path), &bytes, Access::Private)?;
        Ok(key)
    }

    /// The MAC of a line whose text after `{` is `body`, chained from `previous`.
    pub fn mac(&self, previous: &str, body: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length");
        mac.update(previous.as_bytes());
        mac.update(b"\n");
        mac.update(body.as_bytes());
        hex(&mac.finalize().into_bytes())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How far the journal is checked: bytes and lines, and the last line's MAC.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    offset: u64,
    lines: usize,
    last: String,
}

/// What checking a stretch of the journal found.
#[derive(Debug, Default)]
pub struct Contents {
    pub entries: Vec<Entry>,
    pub unchained: usize,
    /// A last line without its newline (a crash while writing it).
    pub cut_short: bool,
}

/// Checks `bytes`, the journal from `chain.offset` on, and moves `chain` past every
/// whole line. From the start, the sealed lines are checked against `key`'s seal (all
/// lines, without a key, must be unchained); every other line must carry its MAC.
fn check(
    path: &Path,
    bytes: &[u8],
    key: Option<&Key>,
    chain: &mut Chain,
) -> Result<Contents, JournalError> {
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut checked = Contents {
        cut_short: whole < bytes.len(),
        ..Contents::default()
    };
    let tampered = |line: usize, why: String| JournalError::Tampered {
        path: path.to_path_buf(),
        line,
        why,
    };
    let mut sealed_end = 0;
    if chain.offset == 0
        && let Some(key) = key
    {
        let sealed = usize::try_from(key.sealed_len)
            .ok()
            .and_then(|n| bytes[..whole].get(..n));
        let Some(sealed) = sealed.filter(|s| Sha256::digest(s)[..] == key.sealed_sha256) else {
            return Err(tampered(
                1,
                "the lines written before it had a key are not as they were sealed".into(),
            ));
        };
        sealed_end = sealed.len();
        chain.last = hex(&key.sealed_sha256);
    }
    let text = input::text(bytes[..whole].to_vec()).map_err(|e| match e {
        InputError::NotUtf8 { line, .. } => tampered(chain.lines + line, "not UTF-8 text".into()),
        other => JournalError::Read {
            path: path.to_path_buf(),
            source: other,
        },
    })?;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        chain.lines += 1;
        let number = chain.lines;
        let line = line.trim_end_matches('\n');
        if line.trim().is_empty() {
            continue;
        }
        let entry_text = match (line.strip_prefix(CHAIN_PREFIX), key) {
            (_, _) if start < sealed_end => {
                checked.unchained += 1;
                line.to_string()
            }
            (None, None) => {
                checked.unchained += 1;
                line.to_string()
            }
            (Some(_), None) => {
                return Err(JournalError::NoKey {
                    path: path.to_path_buf(),
                    key: key_path(path),
                    why: "there is no key".into(),
                });
            }
            (None, Some(_)) => return Err(tampered(number, "it carries no MAC".into())),
            (Some(rest), Some(key)) => {
                let (mac, body) = rest
                    .split_once("\",")
                    .filter(|(mac, _)| mac.len() == 64)
                    .ok_or_else(|| tampered(number, "its MAC field is malformed".into()))?;
                let expected = key.mac(&chain.last, body);
                if mac != expected {
                    return Err(tampered(
                        number,
                        "its MAC does not follow from the line before".into(),
                    ));
                }
                chain.last = expected;
                format!("{{{body}")
            }
        };
        let entry: Entry = serde_json::from_str(&entry_text)
            .map_err(|e| tampered(number, format!("not a journal entry ({e})")))?;
        if mlt_common::names::check_name(&entry.run).is_err() {
            return Err(tampered(number, "its run id is not a name".into()));
        }
        // Journals before the state directory recorded `--check` runs too; those
        // changed nothing and are not runs.
        if !entry.check {
            checked.entries.push(entry);
        }
    }
    chain.offset += whole as u64;
    Ok(checked)
}

/// Reads `file` from `from` to its end, at most [`MAX_JOURNAL_BYTES`] in all.
fn read_from(path: &Path, file: &mut File, from: u64) -> Result<Vec<u8>, JournalError> {
    let io_error = |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    };
    file.seek(SeekFrom::Start(from)).map_err(io_error)?;
    let mut bytes = Vec::new();
    let limit = MAX_JOURNAL_BYTES.saturating_sub(from);
    Read::by_ref(file)
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    if bytes.len() as u64 > limit {
        return Err(JournalError::Read {
            path: path.to_path_buf(),
            source: InputError::TooLarge {
                limit: MAX_JOURNAL_BYTES,
            },
        });
    }
    Ok(bytes)
}

/// Opens the journal for reading: never through a link; a FIFO, a device or a
/// directory refused at once. `None` when there is none.
fn open_for_reading(path: &Path) -> Result<Option<File>, JournalError> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(files::FileError::Symlink {
                path: path.to_path_buf(),
            }
            .into());
        }
        Err(source) => {
            return Err(JournalError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let kind = file
        .metadata()
        .map_err(|source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .file_type();
    if !kind.is_file() {
        return Err(JournalError::Read {
            path: path.to_path_buf(),
            source: InputError::NotAFile(files::describe(&kind)),
        });
    }
    Ok(Some(file))
}

/// Every entry of the journal at `path` (none if there is none), checked, under a
/// shared lock.
pub fn read(path: &Path) -> Result<Contents, JournalError> {
    let Some(mut file) = open_for_reading(path)? else {
        return Ok(Contents::default());
    };
    file.lock_shared().map_err(|source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = read_from(path, &mut file, 0)?;
    let key = Key::load(path)?;
    check(path, &bytes, key.as_ref(), &mut Chain::default())
}

/// The journal open for appending: its file, key and how far it is checked.
pub struct Store {
    path: PathBuf,
    file: File,
    key: Key,
    chain: Chain,
}

impl Store {
    /// Opens (creating them if needed) the journal at `path` and its key, and checks
    /// every line; a last line cut short by a crash is removed.
    pub fn open(path: &Path) -> Result<Store, JournalError> {
        let mut file = files::open_append(path, Access::Private)?;
        let io_error = |source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        };
        // A journal an older mltctl made readable by all becomes this user's alone.
        if file.metadata().map_err(io_error)?.mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io_error)?;
        }
        file.lock().map_err(io_error)?;
        let bytes = read_from(path, &mut file, 0)?;
        let key = match Key::load(path)? {
            Some(key) => key,
            None => {
                // Lines of older versions are sealed as they are; a chained line with no
                // key is an error (check says so) rather than a reason for a new key.
                check(path, &bytes, None, &mut Chain::default())?;
                let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                Key::make(path, &bytes[..whole])?
            }
        };
        let mut store = Store {
            path: path.to_path_buf(),
            file,
            key,
            chain: Chain::default(),
        };
        store.catch_up(&bytes)?;
        store.file.unlock().map_err(io_error)?;
        Ok(store)
    }

    /// Checks what was written after `chain.offset` (`bytes`) and removes a last line
    /// cut short. The caller holds the lock.
    fn catch_up(&mut self, bytes: &[u8]) -> Result<(), JournalError> {
        let checked = check(&self.path, bytes, Some(&self.key), &mut self.chain)?;
        if checked.cut_short {
            self.file
                .set_len(self.chain.offset)
                .map_err(|source| JournalError::Io {
                    path: self.path.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// Appends `entry`: under the lock, after checking what other runs appended since.
    pub fn append(&mut self, entry: &Entry) -> Result<(), JournalError> {
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| JournalError::Io { path, source }
        };
        self.file.lock().map_err(io_error(&self.path))?;
        let appended = self.append_locked(entry);
        let unlocked = self.file.unlock().map_err(io_error(&self.path));
        appended.and(unlocked)
    }

    fn append_locked(&mut self, entry: &Entry) -> Result<(), JournalError> {
        let since = read_from(&self.path, &mut self.file, self.chain.offset)?;
        self.catch_up(&since)?;
        let path = self.path.clone();
        let io_error = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        let text = serde_json::to_string(entry).map_err(|e| io_error(io::Error::other(e)))?;
        let body = text.strip_prefix('{').unwrap_or(&text);
        let mac = self.key.mac(&self.chain.last, body);
        let line = format!("{CHAIN_PREFIX}{mac}\",{body}\n");
        self.file.write_all(line.as_bytes()).map_err(io_error)?;
        // On disk before the run goes on: a run cut short keeps its record.
        self.file.sync_data().map_err(io_error)?;
        self.chain.offset += line.len() as u64;
        self.chain.lines += 1;
        self.chain.last = mac;
        Ok(())
    }
}
