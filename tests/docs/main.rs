//! The README and the book (`docs/`) against the code, so they cannot drift: commands
//! that parse, a command reference and exit codes that are the binaries', an inventory
//! reference that is the loader's, and citations of pages, sections and files that
//! exist.

#[path = "../common/mod.rs"]
mod common;

mod book;
mod commands;
mod inventory;
mod references;
mod shell;
