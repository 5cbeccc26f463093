//! Values and helpers shared by the vendors.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::Serialize;

use crate::items::{Change, Items};
use crate::{EcnThresholds, Error, StaticRoute, SwitchIntent};
use mlt_common::redact::{one_line, shown};

/// Where a static route sends packets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NextHops {
    /// One or more next-hop addresses (several: ECMP).
    Via(BTreeSet<Ipv4Addr>),
    /// Dropped (Null0, blackhole).
    Discard,
    /// A form the plan never uses (an interface, a mix), kept as written so it can be
    /// removed exactly.
    Foreign(Vec<String>),
}

impl NextHops {
    pub fn of(route: &StaticRoute) -> NextHops {
        if route.next_hops.is_empty() {
            NextHops::Discard
        } else {
            NextHops::Via(route.next_hops.iter().copied().collect())
        }
    }

    /// Adds one more next hop as a running configuration lists it.
    pub fn add(self, hop: NextHop) -> NextHops {
        match (self, hop) {
            (NextHops::Via(mut set), NextHop::Address(a)) => {
                set.insert(a);
                NextHops::Via(set)
            }
            (NextHops::Discard, NextHop::Discard) => NextHops::Discard,
            (current, hop) => {
                let mut forms = current.forms();
                forms.push(hop.to_string());
                NextHops::Foreign(forms)
            }
        }
    }

    /// Each next hop as a vendor writes it (a discard is `discard`).
    pub fn forms(&self) -> Vec<String> {
        match self {
            NextHops::Via(set) => set.iter().map(|a| address_text(*a)).collect(),
            NextHops::Discard => vec![DISCARD.into()],
            NextHops::Foreign(forms) => forms.clone(),
        }
    }
}

impl fmt::Display for NextHops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NextHops::Discard => f.write_str(DISCARD),
            other => write!(f, "via {}", other.forms().join(",")),
        }
    }
}

/// How [`NextHops::forms`] writes a discard.
const DISCARD: &str = "discard";

/// `a` in dotted decimal, as `Display` writes it, without the formatting machinery (a
/// large fabric's configurations hold hundreds of thousands of next hops).
fn address_text(a: Ipv4Addr) -> String {
    let mut text = String::with_capacity(15);
    for (i, octet) in a.octets().into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        if octet >= 100 {
            text.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            text.push(char::from(b'0' + octet / 10 % 10));
        }
        text.push(char::from(b'0' + octet % 10));
    }
    text
}

/// One next hop as a running configuration lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextHop {
    Address(Ipv4Addr),
    Discard,
    Other(String),
}

impl NextHop {
    /// Reads a next hop; `discard_words` are the vendor's names for a null route.
    pub fn parse(text: &str, discard_words: &[&str]) -> NextHop {
        if discard_words.iter().any(|w| w.eq_ignore_ascii_case(text)) {
            NextHop::Discard
        } else {
            text.parse()
                .map_or_else(|_| NextHop::Other(text.to_string()), NextHop::Address)
        }
    }

    fn into_hops(self) -> NextHops {
        match self {
            NextHop::Address(a) => NextHops::Via([a].into()),
            NextHop::Discard => NextHops::Discard,
            NextHop::Other(o) => NextHops::Foreign(vec![o]),
        }
    }
}

impl fmt::Display for NextHop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NextHop::Address(a) => write!(f, "{a}"),
            NextHop::Discard => f.write_str(DISCARD),
            NextHop::Other(o) => f.write_str(o),
        }
    }
}

/// Records one static route line into `routes`, merging the next hops of repeated lines.
pub fn add_route<K: Ord>(routes: &mut Items<K, NextHops>, key: K, hop: NextHop) {
    let merged = match routes.remove(&key) {
        Some(hops) => hops.add(hop),
        None => hop.into_hops(),
    };
    routes.insert(key, merged);
}

/// The route lines of one prefix to remove and to add, for templates (one entry per
/// prefix, not per line: a leaf's full configuration has hundreds of lines). A template
/// sees `[prefix, remove, add]`: an array, not an object, so no field name is made for
/// each of a fabric's hundreds of thousands of routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteChange {
    pub prefix: Ipv4Net,
    /// Next-hop addresses, `discard`, or foreign forms as the switch wrote them; after
    /// [`RouteChange::written`], as the vendor writes them.
    pub remove: Vec<String>,
    pub add: Vec<String>,
}

impl Serialize for RouteChange {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let prefix = format!(
            "{}/{}",
            address_text(self.prefix.addr()),
            self.prefix.prefix_len()
        );
        (prefix, &self.remove, &self.add).serialize(serializer)
    }
}

impl RouteChange {
    /// The change with its next hops as the vendor writes them: a discard as the
    /// vendor's word `discard` (Null0, blackhole), every other hop through `word` (so a
    /// template lays out each line as it is).
    pub fn written(self, discard: &str, word: impl Fn(String) -> String) -> RouteChange {
        let write = |hops: Vec<String>| -> Vec<String> {
            hops.into_iter()
                .map(|hop| {
                    if hop == DISCARD {
                        discard.to_string()
                    } else {
                        word(hop)
                    }
                })
                .collect()
        };
        RouteChange {
            prefix: self.prefix,
            remove: write(self.remove),
            add: write(self.add),
        }
    }
}

/// What turns `from` into `to` for `prefix`, or `None` when they hold the same hops.
/// Hops in the order of their text.
pub fn route_change(
    prefix: Ipv4Net,
    from: Option<&NextHops>,
    to: Option<&NextHops>,
) -> Option<RouteChange> {
    let forms = |hops: Option<&NextHops>| -> Vec<String> {
        let mut forms = hops.map(NextHops::forms).unwrap_or_default();
        forms.sort_unstable();
        forms.dedup();
        forms
    };
    let (from, to) = (forms(from), forms(to));
    let missing_from = |these: &[String], other: &[String]| -> Vec<String> {
        (these.iter())
            .filter(|f| other.binary_search(f).is_err())
            .cloned()
            .collect()
    };
    let change = RouteChange {
        prefix,
        remove: missing_from(&from, &to),
        add: missing_from(&to, &from),
    };
    (!change.remove.is_empty() || !change.add.is_empty()).then_some(change)
}

/// The plan's routes by prefix; two routes for one prefix would be a planning bug.
pub fn planned_routes(intent: &SwitchIntent) -> BTreeMap<Ipv4Net, NextHops> {
    let mut routes = BTreeMap::new();
    for route in &intent.routes {
        let previous = routes.insert(route.prefix, NextHops::of(route));
        assert!(
            previous.is_none(),
            "{}: two routes for {}",
            intent.name,
            route.prefix
        );
    }
    routes
}

/// Items a change list wants present, in key order: every key added or modified.
pub fn wanted<K, V>(changes: &[Change<K, V>]) -> impl Iterator<Item = (&K, &V)> {
    changes
        .iter()
        .filter_map(|c| c.to().map(|to| (c.key(), to)))
}

/// The traffic class a DSCP value falls in when nothing maps it: its three high bits,
/// the default of EOS, Cumulus and Onyx.
pub fn default_class(dscp: u8) -> u8 {
    dscp >> 3
}

/// DSCP values are 0–63.
pub const MAX_DSCP: u32 = 63;
/// Traffic classes, switch priorities and queues of EOS, Cumulus and Onyx are 0–7.
pub const MAX_CLASS: u32 = 7;

/// Reads `4`, `4,5,7` or `0-7` (or a mix) into the numbers listed, none above `max`
/// (the domain the list names): text from a device can never make this expand more
/// than that domain holds. The error quotes the offending part and gives the limit.
pub fn number_list(text: &str, max: u32) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let number = |word: &str| {
            let n: u32 = word
                .trim()
                .parse()
                .map_err(|_| format!("{} is not a number or a range", shown(part)))?;
            if n > max {
                return Err(format!(
                    "{} goes beyond {max}, the largest value this list may hold",
                    shown(part)
                ));
            }
            Ok(n)
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("{} is an empty range", shown(part)));
                }
                out.extend(a..=b);
            }
            None => out.push(number(part)?),
        }
        if out.len() > 8 * (max as usize + 1) {
            return Err(format!(
                "a list of more than {} values where {max} is the largest",
                8 * (max + 1)
            ));
        }
    }
    Ok(out)
}

/// `values` as contiguous runs, written `a` or `a-b`.
pub fn ranges<N: Copy + Ord + Into<u32>>(values: &[N]) -> Vec<String> {
    let mut sorted: Vec<u32> = values.iter().map(|&v| v.into()).collect();
    sorted.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out
}

/// DSCP values grouped by the class they map to, in class order.
pub fn dscps_by_class<'a>(pairs: impl Iterator<Item = (u8, u8)> + 'a) -> BTreeMap<u8, Vec<u8>> {
    let mut groups: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    for (dscp, class) in pairs {
        groups.entry(class).or_default().push(dscp);
    }
    groups
}

/// Fails when the plan gives `queue` a limit its switch's OS cannot hold
/// ([`crate::Vendor::no_queue_limit`]); the plan leaves it out for such switches.
pub fn check_no_limit(intent: &SwitchIntent, queue: u8, ecn: &EcnThresholds) -> Result<(), Error> {
    match (ecn.limit_bytes, intent.vendor.no_queue_limit()) {
        (Some(bytes), Some(why)) => Err(unexpressible(
            intent,
            format!("queue {queue} limit {bytes} bytes"),
            why,
        )),
        _ => Ok(()),
    }
}

/// An error for an intent item `vendor` has no way to express.
pub fn unexpressible(
    intent: &SwitchIntent,
    item: impl Into<String>,
    why: impl Into<String>,
) -> Error {
    Error::Unexpressible {
        switch: intent.name.clone(),
        vendor: intent.vendor,
        item: one_line(&item.into()),
        why: why.into(),
    }
}

/// Refuses a running configuration of CLI lines (EOS, Onyx) that is in another form:
/// JSON or YAML saved under the wrong name would otherwise read as an empty switch.
pub fn expect_cli_text(intent: &SwitchIntent, running: &str, form: &str) -> Result<(), Error> {
    let Some((index, first)) = running
        .lines()
        .enumerate()
        .find(|(_, l)| !l.trim().is_empty())
    else {
        return Ok(());
    };
    let first = first.trim_start();
    let other = if first.starts_with('{') || first.starts_with('[') {
        Some("JSON")
    } else if first.starts_with("---") || first.starts_with("- ") {
        Some("YAML")
    } else {
        None
    };
    match other {
        Some(kind) => Err(parse_error(
            intent,
            index + 1,
            format!("this is {kind}; expected {form}"),
        )),
        None => Ok(()),
    }
}

/// An error for line `line` (1-based) of a running configuration.
pub fn parse_error(intent: &SwitchIntent, line: usize, message: impl Into<String>) -> Error {
    Error::Parse {
        switch: intent.name.clone(),
        vendor: intent.vendor,
        line,
        message: one_line(&message.into()),
    }
}

/// Queues and traffic classes a vendor numbers 0–7 only.
pub fn check_eight_queues(intent: &SwitchIntent) -> Result<(), Error> {
    let classes = intent.qos.tc_to_queue.len();
    if let Some(q) = intent.qos.queues.iter().find(|q| q.queue > 7) {
        return Err(unexpressible(
            intent,
            format!("queue {}", q.queue),
            "queues are numbered 0-7",
        ));
    }
    if classes > 8 {
        return Err(unexpressible(
            intent,
            format!("{classes} traffic classes"),
            "traffic classes are numbered 0-7",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for octets in [
            [0, 0, 0, 0],
            [10, 1, 0, 9],
            [172, 16, 100, 10],
            [255, 99, 199, 200],
        ] {
            let a = Ipv4Addr::from(octets);
            assert_eq!(address_text(a), a.to_string());
        }
    }

    #[test]
    fn a_route_change_lists_hops_in_text_order_and_is_written_in_the_vendors_words() {
        let via = |hops: &[[u8; 4]]| NextHops::Via(hops.iter().map(|&h| h.into()).collect());
        let prefix: Ipv4Net = "10.1.0.0/17".parse().unwrap();
        let old = via(&[[172, 16, 0, 2], [172, 16, 0, 10]]);
        let new = via(&[[172, 16, 0, 10], [172, 16, 0, 12], [172, 16, 0, 4]]);
        let change = route_change(prefix, Some(&old), Some(&new)).unwrap();
        assert_eq!(change.remove, ["172.16.0.2"]);
        assert_eq!(change.add, ["172.16.0.12", "172.16.0.4"]);
        assert_eq!(route_change(prefix, Some(&new), Some(&new)), None);
        let dropped = route_change(prefix, Some(&old), Some(&NextHops::Discard)).unwrap();
        let written = dropped.written("Null0", |hop| format!("<{hop}>"));
        assert_eq!(written.add, ["Null0"]);
        assert_eq!(written.remove, ["<172.16.0.10>", "<172.16.0.2>"]);
    }

    #[test]
    fn number_lists_and_ranges() {
        assert_eq!(number_list("4", 7), Ok(vec![4]));
        assert_eq!(number_list("4,5,7", 7), Ok(vec![4, 5, 7]));
        assert_eq!(number_list("0-3,6", 63), Ok(vec![0, 1, 2, 3, 6]));
        assert!(number_list("3-1", 7).is_err());
        assert!(number_list("x", 7).is_err());
    }

    #[test]
    fn lists_never_reach_past_their_domain() {
        assert_eq!(
            number_list("0-4294967295", MAX_DSCP).unwrap_err(),
            "`0-4294967295` goes beyond 63, the largest value this list may hold"
        );
        assert!(number_list("0-99999999999", MAX_CLASS).is_err());
        assert!(number_list("8", MAX_CLASS).is_err());
        assert_eq!(number_list("0-63", MAX_DSCP).unwrap().len(), 64);
        // Repeats cannot blow it up either.
        let repeated = vec!["0-63"; 1000].join(",");
        assert!(number_list(&repeated, MAX_DSCP).is_err());
        assert_eq!(ranges(&[5u8, 0, 1, 2, 7, 8]), ["0-2", "5", "7-8"]);
    }

    #[test]
    fn a_route_change_removes_and_adds_only_what_differs() {
        let prefix: Ipv4Net = "10.0.0.0/24".parse().unwrap();
        let from = NextHops::Via(["10.1.0.1".parse().unwrap(), "10.1.0.2".parse().unwrap()].into());
        let to = NextHops::Via(["10.1.0.2".parse().unwrap(), "10.1.0.3".parse().unwrap()].into());
        let change = route_change(prefix, Some(&from), Some(&to)).unwrap();
        assert_eq!(
            (change.remove, change.add),
            (vec!["10.1.0.1".to_string()], vec!["10.1.0.3".to_string()])
        );
        let discard = route_change(prefix, None, Some(&NextHops::Discard)).unwrap();
        assert_eq!(discard.add, ["discard"]);
        assert!(discard.remove.is_empty());
        assert_eq!(route_change(prefix, Some(&to), Some(&to)), None);
    }

    #[test]
    fn repeated_route_lines_merge_into_ecmp() {
        let mut routes: Items<u8, NextHops> = Items::new();
        add_route(&mut routes, 1, NextHop::parse("10.1.0.1", &["Null0"]));
        add_route(&mut routes, 1, NextHop::parse("10.1.0.2", &["Null0"]));
        add_route(&mut routes, 2, NextHop::parse("null0", &["Null0"]));
        add_route(&mut routes, 3, NextHop::parse("Ethernet1", &["Null0"]));
        assert_eq!(routes[&1].to_string(), "via 10.1.0.1,10.1.0.2");
        assert_eq!(routes[&2], NextHops::Discard);
        assert_eq!(routes[&3].to_string(), "via Ethernet1");
    }
}
