//! A host's network, as data: the plan `mltctl` gives it ([`plan`]), the difference
//! between that plan and what the host's kernel has, as changes that can be applied and
//! undone ([`state`]), and the agent's report ([`report`]). The agent that reads and
//! writes the kernel is `endhost::agent`.

pub mod plan;
pub mod report;
pub mod state;

pub use plan::HostNetworkPlan;
pub use report::{Report, Step, StepStatus, render};
pub use state::{Change, Conflict, Observed, diff};
