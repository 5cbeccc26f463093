//! The plan's switches, rendered to vendor configurations and compared with what runs.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use switch_config::{Error, SwitchDiff, SwitchIntent};

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

/// Writes each configuration to `dir`, replacing files atomically.
pub fn write_all(dir: &Path, rendered: &[Rendered]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::with_capacity(rendered.len());
    for r in rendered {
        let path = dir.join(&r.file_name);
        let partial = dir.join(format!(".{}.partial", r.file_name));
        std::fs::write(&partial, &r.text)?;
        std::fs::rename(&partial, &path)?;
        written.push(path);
    }
    Ok(written)
}

/// Where a switch's saved running configuration is looked for: `<name>.<extension>`,
/// then `<name>`. `None` when neither exists: the switch is taken to be empty.
pub fn running_file(dir: &Path, intent: &SwitchIntent) -> Option<PathBuf> {
    [dir.join(file_name(intent)), dir.join(&intent.name)]
        .into_iter()
        .find(|p| p.is_file())
}

/// Why one switch could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Switch(#[from] Error),
}

/// Each switch compared with its running configuration in `dir`, on all cores.
pub fn diff_all(plan: &Plan, dir: &Path) -> Vec<Result<SwitchDiff, DiffError>> {
    plan.switches
        .par_iter()
        .map(|switch| {
            let running = match running_file(dir, &switch.intent) {
                Some(path) => Some(
                    std::fs::read_to_string(&path)
                        .map_err(|source| DiffError::Read { path, source })?,
                ),
                None => None,
            };
            Ok(switch_config::diff(&switch.intent, running.as_deref())?)
        })
        .collect()
}
