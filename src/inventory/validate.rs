//! Semantic checks: raw sections in, a typed [`Inventory`] out, every problem reported.
//!
//! Each check reports at the place the admin has to edit. When an entry failed to
//! deserialize, references to its name are not reported again, so one mistake yields
//! one message.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Display;
use std::hash::Hash;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use endhost_core::config::{
    Collective, Datapath, DatapathKind, DpdkDriver, Importance, Ports, RateControl, Timeouts,
};
use endhost_core::{MacAddr, PciAddr};
use ipnet::Ipv4Net;
use marked_yaml::{Span, Spanned};
use switch_config::Vendor;

use super::addressing::PathLayout;
use super::layers::parse_layer_file;
use super::raw::{Item, Sections};
use super::{
    Downlink, Fabric, Host, Inventory, KeyRef, Layer, Mgmt, Nic, PinnedThreshold, Port, Rack, Role,
    Switch, ThresholdModel, Tolerance, Training, Uplink, gradient_classes, raw,
};
use crate::diag::{Reporter, start_of};
use mlt_common::names::check_name;
use mlt_common::redact::shown;
use mlt_common::units::Rate;
use switch_config::ports::check_port_name;

mod devices;
mod fields;
mod links;
mod training;

use fields::{is_env_name, is_host_address, is_mgmt_address, is_user_name, overlaps};
use links::Reserved;

/// The largest switch buffer (1 TiB; real ones hold tens of MB): thresholds and their
/// sums stay far from overflow.
const MAX_BUFFER_BYTES: u64 = 1 << 40;
/// The most hosts a job has: the transport carries ranks and the job's size in 16 bits.
const MAX_HOSTS: usize = u16::MAX as usize;
/// Largest queue count a switch may declare (and so the most priorities a plan uses).
const MAX_QUEUES: u64 = 16;
/// When the inventory does not say, use at most this many queues (the usual 8).
const DEFAULT_PRIORITIES: u8 = 8;
/// Control traffic gets EF, gradient classes 32, 33, … unless the inventory says.
const DEFAULT_CONTROL_DSCP: u8 = 46;
const DEFAULT_GRADIENT_DSCP_BASE: u8 = 32;

pub fn validate(path: &Path, s: Sections, report: &mut Reporter) -> Option<Inventory> {
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut v = Validator {
        report,
        broken: s.broken_names,
        failed: s.malformed,
        base_dir,
        // Every host's NIC and switch port may hold an address: room for all at once.
        ips: HashMap::with_capacity(
            s.hosts.len()
                + s.switches
                    .iter()
                    .map(|i| i.value.ports.len())
                    .sum::<usize>(),
        ),
        macs: HashMap::with_capacity(s.hosts.len()),
    };
    let fabric = s.fabric.as_ref().and_then(|f| v.fabric(f));
    let pool_span = s.fabric.as_ref().map(|f| *f.path_pool.span());
    let default_mgmt = s.defaults.mgmt.unwrap_or_default();
    if let Some(address) = &default_mgmt.address {
        let msg = "`defaults.mgmt.address` would give every device one address; give each switch and host its own";
        v.error(address.span(), msg);
    }
    let racks = v.racks(&s.racks, fabric.as_ref());
    let reserved = Reserved::new(
        racks
            .iter()
            .map(|(_, r)| (r.subnet, format!("the subnet of rack {}", r.name)))
            .chain(
                fabric
                    .as_ref()
                    .map(|f| (f.path_pool, "the path pool".to_string())),
            )
            .collect(),
    );
    v.unique_device_names(&s.switches, &s.hosts);
    let named_racks = Racks::of(&racks);
    let switches = v.switches(&s.switches, &named_racks, &default_mgmt, &reserved);
    let hosts = v.hosts(&s.hosts, &named_racks, &default_mgmt);
    v.unique_mgmt(&switches, &hosts);
    let rack_leaves = v.rack_leaves(&racks, &switches);
    let (uplinks, downlinks) = v.links(&s.links, &switches, &hosts);
    v.every_host_linked(&hosts, &downlinks, &racks, &switches);
    v.racks_reach_each_other(&racks, &rack_leaves, &switches, &hosts, &uplinks);
    if let (Some(fabric), Some(span)) = (&fabric, pool_span) {
        v.path_pool_fits(fabric, &span, racks.len(), &switches, &hosts);
    }
    let training = s.training.as_ref().and_then(|t| v.training(t, &switches));
    // Every raw entry is read; freeing them takes a while at scale (16,384 hosts: ~60
    // ms), so the pool does it while the plan is built.
    let raw = (s.racks, s.switches, s.hosts, s.links);
    rayon::spawn(move || drop(raw));

    // Assemble only when everything above held; indices between sections are then valid.
    if v.report.has_errors() {
        return None;
    }
    let racks = racks
        .into_iter()
        .zip(rack_leaves)
        .map(|((_, rack), leaf)| leaf.map(|leaf| Rack { leaf, ..rack }))
        .collect::<Option<Vec<_>>>()?;
    Some(Inventory {
        path: path.to_path_buf(),
        fabric: fabric?,
        racks,
        switches: switches.into_iter().map(|(_, s)| s).collect(),
        hosts: hosts.into_iter().map(|(_, h)| h).collect(),
        uplinks,
        downlinks,
        training: training?,
    })
}

/// An entry that validated, with the span of its name for later messages.
type Named<T> = (Span, T);

/// The racks that validated, and their indices by name (the first of a name; a
/// duplicate is reported where it is defined): every switch and host names its rack.
struct Racks<'a> {
    list: &'a [Named<Rack>],
    by_name: HashMap<&'a str, usize>,
}

impl<'a> Racks<'a> {
    fn of(list: &'a [Named<Rack>]) -> Racks<'a> {
        let by_name = first_index(list.iter().map(|(_, rack)| rack.name.as_str()));
        Racks { list, by_name }
    }
}

/// Each name's index in `names`; of a name given twice, the first (the duplicate is
/// reported where it is given).
fn first_index<'a>(
    names: impl DoubleEndedIterator<Item = &'a str> + ExactSizeIterator,
) -> HashMap<&'a str, usize> {
    names.enumerate().rev().map(|(i, name)| (name, i)).collect()
}

struct Validator<'r> {
    report: &'r mut Reporter,
    /// Names whose entries failed; references to them are not reported again.
    broken: HashSet<String>,
    /// Kinds of entries of which at least one failed; checks over all entries of such a
    /// kind would only report consequences, so they are skipped.
    failed: HashSet<&'static str>,
    base_dir: PathBuf,
    /// Every address owned by something, with its owner and line.
    ips: HashMap<Ipv4Addr, (String, usize)>,
    macs: HashMap<MacAddr, (String, usize)>,
}

/// What a `node:port` link end names.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Device {
    Switch(usize),
    Host(usize),
}

#[cfg(test)]
mod tests {
    use marked_yaml::{Marker, Span, Spanned};

    use super::*;
    use crate::diag::Reporter;

    /// A host entry on `line`.
    fn host(line: usize) -> Item<raw::Host> {
        let at = Span::new_start(Marker::new(0, 0, line, 5));
        let text = |s: String| Spanned::new(at, s);
        Item {
            span: at,
            value: raw::Host {
                name: text(format!("h{line}")),
                rack: text("r1".into()),
                mgmt: None,
                nic: raw::Nic {
                    name: text("eth0".into()),
                    pci: text("0000:3b:00.0".into()),
                    mac: text(format!("02:00:00:{:02x}:{:02x}:00", line >> 8, line & 255)),
                    ip: text("10.0.0.11".into()),
                },
                cores: vec![Spanned::new(at, 2)],
            },
        }
    }

    #[test]
    fn a_job_of_more_hosts_than_the_transports_ranks_is_refused_at_the_first_one_over() {
        let over = |hosts: usize| {
            let mut report = Reporter::default();
            report.add_source(Path::new("huge.yaml"));
            let mut v = Validator {
                report: &mut report,
                broken: HashSet::new(),
                failed: HashSet::new(),
                base_dir: PathBuf::new(),
                ips: HashMap::new(),
                macs: HashMap::new(),
            };
            let items: Vec<Item<raw::Host>> = (1..=hosts).map(host).collect();
            v.host_count(&items);
            report
                .finish()
                .0
                .into_iter()
                .map(|d| (d.line, d.message))
                .collect::<Vec<_>>()
        };
        assert_eq!(over(MAX_HOSTS), []);
        assert_eq!(
            over(MAX_HOSTS + 1),
            [(
                MAX_HOSTS + 1,
                "host h65536 is one too many: a job has at most 65535 hosts (the transport \
                 carries ranks in 16 bits)"
                    .to_string()
            )]
        );
    }
}
