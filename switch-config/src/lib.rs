//! Switch configuration: the vendor-neutral intent a plan gives each switch, rendered
//! into each vendor's native configuration, and the semantic difference between that
//! intent and what a switch runs.
//!
//! Each vendor has one home, `<vendor>/` (in the manner of NAPALM drivers):
//! - `mod.rs`, the model: what the intent means in its terms ([`items`] with vendor
//!   keys, `expected`) and how to read the parts of a running configuration the plan
//!   owns (`parse`);
//! - `render.rs`: how changes are laid out — as a whole configuration or as the
//!   commands (SONiC: the JSON patch) that fix a running one — through the vendor's tera
//!   template under the project's `templates/switch/<vendor>/` (the template gets
//!   values and writes whole lines);
//! - `push.rs`: the driver that takes a change through the switch's own steps
//!   (candidate, commit with a revert timer, confirm, rollback), behind [`push`]'s
//!   interface.
//!
//! Everything else is vendor-neutral: the intent ([`intent`]), items and changes
//! ([`items`]) and vendor port names ([`ports`]); names, shell words and redaction are
//! the shared vocabulary's (`mlt_common`). Design: `docs/src/design/switches.md`.

pub mod counters;
pub mod cumulus;
pub mod eos;
mod error;
pub mod fold;
pub mod intent;
pub mod items;
pub mod onyx;
pub mod ports;
pub mod push;
pub mod sonic;
mod templates;
mod text;

use std::fmt;

use serde::Serialize;

pub use error::Error;
pub use intent::{
    EcnThresholds, QosIntent, QueueIntent, RouteKind, Scheduler, StaticRoute, SwitchIntent,
    UnknownVendor, Vendor,
};
pub use items::ChangeLine;
use items::{Change, Items};

/// One vendor's view of the plan.
trait Driver {
    type Key: Ord + Clone + fmt::Display;
    type Value: PartialEq + Clone + fmt::Display;

    /// Whether `key` decides which queue a DSCP value lands in (the DSCP and traffic
    /// class maps, their binding to ports, trust): what every switch of a fabric must
    /// run alike for spraying to keep classes apart.
    fn maps_dscp(key: &Self::Key) -> bool;

    /// What the switch must hold for `intent`, in this vendor's terms.
    fn expected(intent: &SwitchIntent) -> Result<Items<Self::Key, Self::Value>, Error>;

    /// The parts of `running` the plan owns, with the vendor's defaults filled in.
    fn parse(running: &str, intent: &SwitchIntent) -> Result<Items<Self::Key, Self::Value>, Error>;

    /// Lays `changes` out as commands (SONiC: a JSON patch) that apply them or, when
    /// `full`, as a whole configuration: every expected item, each an addition.
    fn layout(
        intent: &SwitchIntent,
        changes: &[Change<Self::Key, Self::Value>],
        full: bool,
    ) -> Result<String, Error>;
}

/// Calls `f::<D>(args)` with the vendor's driver `D`.
macro_rules! per_vendor {
    ($vendor:expr, $f:ident($($arg:expr),*)) => {
        match $vendor {
            Vendor::Sonic => $f::<sonic::Sonic>($($arg),*),
            Vendor::Eos => $f::<eos::Eos>($($arg),*),
            Vendor::Cumulus => $f::<cumulus::Cumulus>($($arg),*),
            Vendor::Onyx => $f::<onyx::Onyx>($($arg),*),
        }
    };
}

/// The file extension a vendor's configurations are saved under.
pub fn extension(vendor: Vendor) -> &'static str {
    match vendor {
        Vendor::Sonic => "json",
        Vendor::Eos | Vendor::Onyx => "cfg",
        Vendor::Cumulus => "nvue",
    }
}

/// The configuration `intent` gives its switch, in the vendor's own syntax.
pub fn render(intent: &SwitchIntent) -> Result<String, Error> {
    fn with<D: Driver>(intent: &SwitchIntent) -> Result<String, Error> {
        let additions: Vec<_> = D::expected(intent)?
            .into_iter()
            .map(|(key, to)| Change::Add { key, to })
            .collect();
        D::layout(intent, &additions, true)
    }
    per_vendor!(intent.vendor, with(intent))
}

/// The parts of `running` the plan owns, as a configuration in the vendor's own syntax
/// (defaults written out): what the journal keeps of a switch, and what `revert` can
/// put back. Nothing else of `running` — users, keys, communities — is in it.
pub fn owned(intent: &SwitchIntent, running: &str) -> Result<String, Error> {
    fn with<D: Driver>(intent: &SwitchIntent, running: &str) -> Result<String, Error> {
        let held: Vec<_> = D::parse(running, intent)?
            .into_iter()
            .map(|(key, to)| Change::Add { key, to })
            .collect();
        D::layout(intent, &held, true)
    }
    per_vendor!(intent.vendor, with(intent, running))
}

/// The push driver for `intent`'s switch. `change_id` names the session, checkpoint or
/// timer the change uses on the switch (letters, digits, `-` and `_`).
pub fn driver<'a>(intent: &'a SwitchIntent, change_id: &str) -> Box<dyn push::Device + 'a> {
    match intent.vendor {
        Vendor::Eos => Box::new(eos::push::Eos::new(change_id)),
        Vendor::Onyx => Box::new(onyx::push::Onyx::new(intent)),
        Vendor::Cumulus => Box::new(cumulus::push::Cumulus::default()),
        Vendor::Sonic => Box::new(sonic::push::Sonic::new(change_id)),
    }
}

/// Reads the queue counters of `intent`'s ports over `session`, in the vendor's own
/// print form.
pub fn read_counters(
    intent: &SwitchIntent,
    session: &mut dyn push::Session,
) -> Result<counters::Reading, counters::CountersError> {
    let reading = match intent.vendor {
        Vendor::Sonic => sonic::counters::read(intent, session),
        Vendor::Eos => eos::counters::read(intent, session),
        Vendor::Cumulus => cumulus::counters::read(intent, session),
        Vendor::Onyx => onyx::counters::read(intent, session),
    }?;
    Ok(reading.sorted())
}

/// How a switch differs from its intent, and what would fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwitchDiff {
    pub switch: String,
    pub vendor: Vendor,
    pub changes: Vec<ChangeLine>,
    /// The commands (SONiC: the JSON patch) that apply the changes; empty if none.
    pub commands: String,
}

/// How many items differ and the commands that change them, without each change's
/// line: what a run that reports only counts keeps (a spine's lines are megabytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub changes: usize,
    /// The commands (SONiC: the JSON patch) that apply the changes; empty if none.
    pub commands: String,
}

/// Compares `intent` with `running` (`None`: a switch with nothing configured).
pub fn diff(intent: &SwitchIntent, running: Option<&str>) -> Result<SwitchDiff, Error> {
    compare(intent, None, running.unwrap_or(""), Lines::Each).map(|found| found.diff(intent))
}

/// [`diff`], counted.
pub fn diff_counted(intent: &SwitchIntent, running: Option<&str>) -> Result<Counted, Error> {
    compare(intent, None, running.unwrap_or(""), Lines::Count).map(Found::counted)
}

/// How the owned parts of a switch running `current` differ from those of `saved`, and
/// the commands (SONiC: the JSON patch) that put `saved`'s back: rollback for switches
/// without one of their own, and the check that a rollback worked.
pub fn revert(intent: &SwitchIntent, saved: &str, current: &str) -> Result<SwitchDiff, Error> {
    compare(intent, Some(saved), current, Lines::Each).map(|found| found.diff(intent))
}

/// [`revert`], counted.
pub fn revert_counted(intent: &SwitchIntent, saved: &str, current: &str) -> Result<Counted, Error> {
    compare(intent, Some(saved), current, Lines::Count).map(Found::counted)
}

/// Whether a comparison writes each change's line or only counts them.
#[derive(Clone, Copy)]
enum Lines {
    Each,
    Count,
}

/// A comparison's changes: how many, their lines if asked for, and their commands.
struct Found {
    count: usize,
    lines: Vec<ChangeLine>,
    commands: String,
}

impl Found {
    fn diff(self, intent: &SwitchIntent) -> SwitchDiff {
        SwitchDiff {
            switch: intent.name.clone(),
            vendor: intent.vendor,
            changes: self.lines,
            commands: self.commands,
        }
    }

    fn counted(self) -> Counted {
        Counted {
            changes: self.count,
            commands: self.commands,
        }
    }
}

/// What turns `running` into the plan's items or, with `saved`, into the owned items
/// of that configuration, and the commands that do it.
fn compare(
    intent: &SwitchIntent,
    saved: Option<&str>,
    running: &str,
    lines: Lines,
) -> Result<Found, Error> {
    fn with<D: Driver>(
        intent: &SwitchIntent,
        saved: Option<&str>,
        running: &str,
        lines: Lines,
    ) -> Result<Found, Error> {
        let target = match saved {
            Some(saved) => D::parse(saved, intent)?,
            None => D::expected(intent)?,
        };
        let changes = items::changes(&target, &D::parse(running, intent)?);
        let commands = if changes.is_empty() {
            String::new()
        } else {
            D::layout(intent, &changes, false)?
        };
        let lines = match lines {
            Lines::Count => Vec::new(),
            Lines::Each => changes
                .iter()
                .map(|change| ChangeLine {
                    dscp_map: D::maps_dscp(change.key()),
                    ..ChangeLine::from(change)
                })
                .collect(),
        };
        Ok(Found {
            count: changes.len(),
            lines,
            commands,
        })
    }
    per_vendor!(intent.vendor, with(intent, saved, running, lines))
}
