//! Problems found in input files, each with the place it was found.

use std::fmt;
use std::path::{Path, PathBuf};

use marked_yaml::{Marker, Span};
use mlt_common::redact::clean;
use serde::Serialize;

/// One problem, printed as `file:line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

/// Every problem found in one run, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// Collects problems against the files they came from.
///
/// Markers carry a source number; `sources[n]` is the file that number stands for.
#[derive(Debug, Default)]
pub struct Reporter {
    sources: Vec<PathBuf>,
    found: Vec<Diagnostic>,
}

impl Reporter {
    /// Registers a file and returns the source number its markers must carry.
    pub fn add_source(&mut self, path: &Path) -> usize {
        self.sources.push(path.to_path_buf());
        self.sources.len() - 1
    }

    /// Records a problem. Its message may quote what was written there: it is kept to
    /// one line and anything that looks like key material is redacted.
    pub fn error_at(&mut self, mark: Marker, message: impl Into<String>) {
        let file = self.sources.get(mark.source()).cloned().unwrap_or_default();
        self.found.push(Diagnostic {
            file,
            line: mark.line(),
            column: mark.column(),
            message: clean(&message.into()).replace('\n', "\\n"),
        });
    }

    pub fn error(&mut self, span: &Span, message: impl Into<String>) {
        self.error_at(start_of(span), message);
    }

    pub fn has_errors(&self) -> bool {
        !self.found.is_empty()
    }

    /// All problems, ordered by file, line and column.
    pub fn finish(mut self) -> Diagnostics {
        self.found.sort();
        self.found.dedup();
        Diagnostics(self.found)
    }
}

/// Where a span starts; spans from the loader always have a start, others point at 1:1.
pub fn start_of(span: &Span) -> Marker {
    span.start()
        .copied()
        .unwrap_or_else(|| Marker::new(0, 0, 1, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_come_out_in_file_order() {
        let mut r = Reporter::default();
        let inv = r.add_source(Path::new("lab.yaml"));
        r.error_at(Marker::new(inv, 0, 9, 3), "second");
        r.error_at(Marker::new(inv, 0, 2, 5), "first");
        assert!(r.has_errors());
        let d = r.finish();
        assert_eq!(d.to_string(), "lab.yaml:2:5: first\nlab.yaml:9:3: second\n");
    }
}
