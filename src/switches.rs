//! The plan's switches, rendered to vendor configurations and compared with what runs.

use std::io;
use std::path::{Component, Path, PathBuf};

use mlt_common::files::{self, Access};
use mlt_common::input::{InputError, read_text};
use rayon::prelude::*;
use switch_config::{Error, SwitchDiff, SwitchIntent, Vendor};

use crate::plan::Plan;

/// One switch's configuration, ready to be written.
pub struct Rendered {
    pub switch: String,
    pub file_name: String,
    pub text: String,
}

/// File name of a switch's configuration: `<name>.<vendor extension>`.
pub fn file_name(intent: &SwitchIntent) -> String {
    format!(
        "{}.{}",
        intent.name,
        switch_config::extension(intent.vendor)
    )
}

/// Every switch's configuration, or every reason one of them cannot be rendered.
/// Switches are rendered on all cores.
pub fn render_all(plan: &Plan) -> Result<Vec<Rendered>, Vec<Error>> {
    let results: Vec<Result<Rendered, Error>> = plan
        .switches
        .par_iter()
        .map(|switch| {
            Ok(Rendered {
                switch: switch.intent.name.clone(),
                file_name: file_name(&switch.intent),
                text: switch_config::render(&switch.intent)?,
            })
        })
        .collect();
    let mut rendered = Vec::with_capacity(results.len());
    let mut errors = Vec::new();
    for result in results {
        match result {
            Ok(r) => rendered.push(r),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(rendered)
    } else {
        Err(errors)
    }
}

/// `dir/name`, or an error when `name` is anything but one plain file name (a `/`,
/// `.`, `..` or a leading `.`): nothing named after a device may land outside `dir`.
pub fn inside(dir: &Path, name: &str) -> io::Result<PathBuf> {
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(part)), None) if part == name && !name.starts_with('.') => {
            Ok(dir.join(name))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        )),
    }
}

/// What [`write_all`] did.
pub struct Written {
    /// Every configuration's file, in the order given.
    pub paths: Vec<PathBuf>,
    /// How many of them already held exactly that configuration and were left alone.
    pub unchanged: usize,
}

/// Writes each configuration to `dir` (made if missing; a link there is refused),
/// replacing files atomically, readable by all (rendered intent holds no secret). Every
/// file name is checked before the first is written. A file that already holds its
/// configuration (same bytes, mode and owner) is left as it is, its time stamps too, so
/// tools that watch the directory see only what changed.
pub fn write_all(dir: &Path, rendered: &[Rendered]) -> io::Result<Written> {
    let paths = rendered
        .iter()
        .map(|r| inside(dir, &r.file_name))
        .collect::<io::Result<Vec<_>>>()?;
    files::output_dir(dir).map_err(io::Error::other)?;
    let contents: Vec<(&Path, &[u8])> = paths
        .par_iter()
        .zip(rendered)
        .map(|(path, r)| (path.as_path(), r.text.as_bytes()))
        .filter(|(path, bytes)| !files::holds(path, bytes, Access::Readable))
        .collect();
    files::write_many(&contents, Access::Readable).map_err(io::Error::other)?;
    let unchanged = paths.len() - contents.len();
    Ok(Written { paths, unchanged })
}

/// Files in `dir` that look like rendered configurations (`.json`, `.cfg`, `.nvue`)
/// but are not among `written`: left by an earlier inventory. Sorted by name.
pub fn stale_files(dir: &Path, written: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let rendered = |p: &Path| {
        p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            Vendor::ALL
                .iter()
                .any(|v| switch_config::extension(*v) == e)
        })
    };
    let mut stale = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() && rendered(&path) && !written.contains(&path) {
            stale.push(path);
        }
    }
    stale.sort();
    Ok(stale)
}

/// Writes `text` to `dir/name` through a new temporary file beside it, so a reader sees
/// the old file or the new, never part, and a link planted at the name is refused;
/// `name` must be a plain file name.
pub fn write_file(dir: &Path, name: &str, text: &str, access: Access) -> io::Result<PathBuf> {
    let path = inside(dir, name)?;
    files::write(&path, text.as_bytes(), access).map_err(io::Error::other)?;
    Ok(path)
}

/// Where a switch's saved running configuration is looked for: `<name>.<extension>`,
/// then `<name>`. `None` when neither exists: the switch is taken to be empty.
pub fn running_file(dir: &Path, intent: &SwitchIntent) -> io::Result<Option<PathBuf>> {
    let candidates = [inside(dir, &file_name(intent))?, inside(dir, &intent.name)?];
    Ok(candidates.into_iter().find(|p| p.exists()))
}

/// The largest running configuration read from a file or a device.
pub const MAX_RUNNING_BYTES: u64 = 64 << 20;

/// Why one switch could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: InputError,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: Error,
    },
    #[error(transparent)]
    Switch(#[from] Error),
}

/// One switch compared with its saved running configuration.
pub struct Compared {
    pub diff: SwitchDiff,
    /// The file read; `None` when there was none (the switch was taken to be empty).
    pub running: Option<PathBuf>,
}

/// Each switch compared with its running configuration in `dir`, on all cores.
pub fn diff_all(plan: &Plan, dir: &Path) -> Vec<Result<Compared, DiffError>> {
    plan.switches
        .par_iter()
        .map(|switch| {
            let path = running_file(dir, &switch.intent).map_err(|e| DiffError::Read {
                path: dir.join(&switch.intent.name),
                source: e.into(),
            })?;
            let text =
                match &path {
                    Some(path) => Some(read_text(path, MAX_RUNNING_BYTES).map_err(|source| {
                        DiffError::Read {
                            path: path.clone(),
                            source,
                        }
                    })?),
                    None => None,
                };
            let diff =
                switch_config::diff(&switch.intent, text.as_deref()).map_err(
                    |source| match &path {
                        Some(path) => DiffError::Parse {
                            path: path.clone(),
                            source,
                        },
                        None => DiffError::Switch(source),
                    },
                )?;
            Ok(Compared {
                diff,
                running: path,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_never_leave_their_directory() {
        let dir = Path::new("/srv/configs");
        assert_eq!(inside(dir, "leaf1.cfg").unwrap(), dir.join("leaf1.cfg"));
        for name in [
            "../etc/passwd",
            "./../x",
            "..",
            ".",
            ".hidden",
            "a/b",
            "/etc/x",
            "",
        ] {
            assert!(inside(dir, name).is_err(), "{name:?}");
        }
    }
}
