//! `--limit` patterns, as Ansible admins write them: names, globs and groups, joined by
//! commas; `&pattern` narrows, `!pattern` excludes. One selection covers switches and
//! hosts alike, so a playbook passes the same `--limit` to every step.
//!
//! Groups: `all`, `switches`, `hosts`, `leaf`, `spine`, `rack:NAME` (a rack's leaf and
//! hosts) and `vendor:NAME` (NAME may be a glob), and the vendor names `sonic`, `eos`,
//! `cumulus`, `onyx`. Anything else is a glob over switch and host names (`leaf*`,
//! `h[12]`). A pattern that matches nothing is an error, so a typing mistake never
//! turns into a run that silently does nothing.

use switch_config::Vendor;

use crate::inventory::Role;
use crate::plan::Plan;

/// A parsed `--limit` expression.
#[derive(Debug)]
pub struct Selection {
    terms: Vec<(Op, Pattern)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Intersect,
    Exclude,
}

#[derive(Debug)]
enum Pattern {
    All,
    Switches,
    Hosts,
    Role(Role),
    Rack(glob::Pattern),
    Vendor(glob::Pattern),
    Name(glob::Pattern),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    #[error("--limit: `{0}` is not a valid pattern: {1}")]
    Invalid(String, String),
    #[error("--limit: `{0}` matches no switch or host")]
    NoMatch(String),
    #[error("--limit: nothing is left")]
    Empty,
}

/// What a selection picked: indices into [`Plan::switches`] and [`Plan::hosts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub switches: Vec<usize>,
    pub hosts: Vec<usize>,
}

/// A switch or a host, as patterns see it.
struct Member<'a> {
    name: &'a str,
    host: bool,
    role: Option<Role>,
    rack: Option<&'a str>,
    vendor: Option<&'a str>,
}

impl Selection {
    /// Parses patterns; several `--limit` values are one comma-separated list.
    pub fn parse(limits: &[String]) -> Result<Selection, SelectError> {
        let mut terms = Vec::new();
        for word in limits.iter().flat_map(|l| l.split(',')) {
            let word = word.trim();
            if word.is_empty() {
                continue;
            }
            let (op, text) = match word.split_at(1) {
                ("!", rest) => (Op::Exclude, rest),
                ("&", rest) => (Op::Intersect, rest),
                _ => (Op::Union, word),
            };
            let glob = |g: &str| {
                glob::Pattern::new(g).map_err(|e| SelectError::Invalid(word.into(), e.to_string()))
            };
            let pattern = match text {
                "all" | "*" => Pattern::All,
                "switches" => Pattern::Switches,
                "hosts" => Pattern::Hosts,
                "leaf" | "leaves" => Pattern::Role(Role::Leaf),
                "spine" | "spines" => Pattern::Role(Role::Spine),
                _ if text.parse::<Vendor>().is_ok() => Pattern::Vendor(glob(text)?),
                _ => match text.split_once(':') {
                    Some(("rack", name)) => Pattern::Rack(glob(name)?),
                    Some(("vendor", name)) => Pattern::Vendor(glob(name)?),
                    _ => Pattern::Name(glob(text)?),
                },
            };
            terms.push((op, pattern));
        }
        Ok(Selection { terms })
    }

    /// The switches and hosts selected, in plan order. Without patterns: all.
    pub fn select(&self, plan: &Plan) -> Result<Selected, SelectError> {
        let switches = plan.switches.iter().map(|s| Member {
            name: &s.intent.name,
            host: false,
            role: Some(s.role),
            rack: s.rack.as_deref(),
            vendor: Some(s.intent.vendor.as_str()),
        });
        let hosts = plan.hosts.iter().map(|h| Member {
            name: &h.name,
            host: true,
            role: None,
            rack: Some(&plan.racks[h.rack].name),
            vendor: None,
        });
        let members: Vec<Member> = switches.chain(hosts).collect();
        for (op, pattern) in &self.terms {
            if !members.iter().any(|m| pattern.matches(m)) {
                let prefix = match op {
                    Op::Union => "",
                    Op::Intersect => "&",
                    Op::Exclude => "!",
                };
                return Err(SelectError::NoMatch(format!("{prefix}{pattern}")));
            }
        }
        let any_union = self.terms.iter().any(|(op, _)| *op == Op::Union);
        let picked = |m: &Member| {
            let with = |op: Op| self.terms.iter().filter(move |(o, _)| *o == op);
            (!any_union || with(Op::Union).any(|(_, p)| p.matches(m)))
                && with(Op::Intersect).all(|(_, p)| p.matches(m))
                && !with(Op::Exclude).any(|(_, p)| p.matches(m))
        };
        let count = plan.switches.len();
        let mut selected = Selected {
            switches: Vec::new(),
            hosts: Vec::new(),
        };
        for (i, member) in members.iter().enumerate().filter(|(_, m)| picked(m)) {
            if member.host {
                selected.hosts.push(i - count);
            } else {
                selected.switches.push(i);
            }
        }
        if selected.switches.is_empty() && selected.hosts.is_empty() {
            return Err(SelectError::Empty);
        }
        Ok(selected)
    }
}

impl Pattern {
    fn matches(&self, m: &Member) -> bool {
        match self {
            Pattern::All => true,
            Pattern::Switches => !m.host,
            Pattern::Hosts => m.host,
            Pattern::Role(role) => m.role == Some(*role),
            Pattern::Rack(glob) => m.rack.is_some_and(|r| glob.matches(r)),
            Pattern::Vendor(glob) => m.vendor.is_some_and(|v| glob.matches(v)),
            Pattern::Name(glob) => glob.matches(m.name),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::All => f.write_str("all"),
            Pattern::Switches => f.write_str("switches"),
            Pattern::Hosts => f.write_str("hosts"),
            Pattern::Role(role) => write!(f, "{role}"),
            Pattern::Rack(glob) => write!(f, "rack:{glob}"),
            Pattern::Vendor(glob) => write!(f, "vendor:{glob}"),
            Pattern::Name(glob) => write!(f, "{glob}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory;
    use crate::plan::Plan;

    fn lab() -> Plan {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory/lab.yaml");
        Plan::build(&inventory::load(std::path::Path::new(path)).unwrap())
    }

    fn names(plan: &Plan, limits: &[&str]) -> Result<Vec<String>, SelectError> {
        let limits: Vec<String> = limits.iter().map(|l| l.to_string()).collect();
        let picked = Selection::parse(&limits)?.select(plan)?;
        Ok(picked
            .switches
            .into_iter()
            .map(|i| plan.switches[i].intent.name.clone())
            .chain(picked.hosts.into_iter().map(|i| plan.hosts[i].name.clone()))
            .collect())
    }

    #[test]
    fn names_groups_globs_intersections_and_exclusions() {
        let plan = lab();
        let all = ["spine1", "spine2", "leaf1", "leaf2", "h1", "h2", "h3", "h4"];
        assert_eq!(names(&plan, &[]).unwrap(), all);
        assert_eq!(names(&plan, &["all"]).unwrap(), all);
        assert_eq!(names(&plan, &["leaf"]).unwrap(), ["leaf1", "leaf2"]);
        assert_eq!(
            names(&plan, &["spine,rack:r1"]).unwrap(),
            ["spine1", "spine2", "leaf1", "h1", "h2"]
        );
        assert_eq!(names(&plan, &["*2"]).unwrap(), ["spine2", "leaf2", "h2"]);
        assert_eq!(
            names(&plan, &["switches", "!leaf*"]).unwrap(),
            ["spine1", "spine2"]
        );
        assert_eq!(names(&plan, &["hosts", "!h[12]"]).unwrap(), ["h3", "h4"]);
        assert_eq!(
            names(&plan, &["switches", "!sonic"]).unwrap(),
            ["spine2", "leaf1", "leaf2"]
        );
        assert_eq!(names(&plan, &["spine", "&vendor:eos"]).unwrap(), ["spine2"]);
        assert_eq!(names(&plan, &["leaf2"]).unwrap(), ["leaf2"]);
    }

    #[test]
    fn a_pattern_matching_nothing_is_an_error() {
        let plan = lab();
        assert_eq!(
            names(&plan, &["leaf9"]),
            Err(SelectError::NoMatch("leaf9".into()))
        );
        assert_eq!(
            names(&plan, &["rack:r3"]),
            Err(SelectError::NoMatch("rack:r3".into()))
        );
        assert_eq!(names(&plan, &["leaf", "!leaf*"]), Err(SelectError::Empty));
        assert!(matches!(
            names(&plan, &["leaf["]),
            Err(SelectError::Invalid(..))
        ));
    }
}
