//! The vocabulary every crate of mltctl shares.
//!
//! - [`input`]: reading a file someone gave us, bounded and regular.
//! - [`files`]: making files and directories that no other user can redirect, replace
//!   or read: scratch directories, output files, append-only logs, locks and trusted
//!   directories.

pub mod files;
pub mod input;
