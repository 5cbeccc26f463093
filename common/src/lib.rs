//! The vocabulary every crate of mltctl shares.
//!
//! - [`names`]: what switches, hosts, racks and interfaces may be called;
//! - [`shell`]: remote commands built from code and quoted values ([`shell::ShellCommand`]);
//! - [`redact`]: text shown to a person: key material removed, control characters escaped;
//! - [`units`]: rates, sizes and durations as people write them, one parser and printer;
//! - [`outcome`]: how a device or host ended a run, and a run's counts;
//! - [`input`]: reading a file someone gave us, bounded and regular;
//! - [`files`]: making files and directories that no other user can redirect, replace
//!   or read: scratch directories, output files, logs, locks and trusted directories;
//! - [`ethtool`]: a NIC's offloads and channels through the ethtool ioctl.
//!
//! No network and no async runtime: files and the ethtool ioctl are its only I/O.

pub mod ethtool;
pub mod files;
pub mod input;
pub mod names;
pub mod outcome;
pub mod redact;
pub mod shell;
pub mod units;
