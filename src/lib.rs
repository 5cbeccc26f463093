//! mltctl: deploy an ML-aware network transport from one inventory file.
//!
//! Data flows one way: [`inventory`] (validated input) → [`plan`] (every decision,
//! vendor-neutral) → render → diff → apply → verify.

pub mod allocator;
pub mod apply;
pub mod diag;
pub mod fetch;
pub mod generate;
pub mod hosts;
pub mod interrupt;
pub mod inventory;
pub mod lab;
pub mod metrics;
pub mod parallel;
pub mod plan;
pub mod playbook;
pub mod select;
pub mod sim;
pub mod ssh;
pub mod switches;
pub mod verify;
