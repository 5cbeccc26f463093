//! `--limit` patterns, as Ansible admins write them: names, globs and groups, joined by
//! commas; `&pattern` narrows, `!pattern` excludes.
//!
//! Groups: `all`, `leaf`, `spine`, `rack:NAME` and `vendor:NAME` (NAME may be a glob),
//! and the vendor names `sonic`, `eos`, `cumulus`, `onyx`. Anything else is a glob over
//! switch names (`leaf*`, `spine[12]`). A pattern that matches no switch is an error,
//! so a typing mistake never turns into a run that silently does nothing.

use switch_config::Vendor;

use crate::inventory::Role;
use crate::plan::SwitchPlan;

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
    Role(Role),
    Rack(glob::Pattern),
    Vendor(glob::Pattern),
    Name(glob::Pattern),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    #[error("--limit: `{0}` is not a valid pattern: {1}")]
    Invalid(String, String),
    #[error("--limit: `{0}` matches no switch")]
    NoMatch(String),
    #[error("--limit: no switch is left")]
    Empty,
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

    /// The indices of the switches selected, in plan order. Without patterns: all.
    pub fn apply(&self, switches: &[SwitchPlan]) -> Result<Vec<usize>, SelectError> {
        for (op, pattern) in &self.terms {
            if !switches.iter().any(|s| pattern.matches(s)) {
                let prefix = match op {
                    Op::Union => "",
                    Op::Intersect => "&",
                    Op::Exclude => "!",
                };
                return Err(SelectError::NoMatch(format!("{prefix}{pattern}")));
            }
        }
        let any_union = self.terms.iter().any(|(op, _)| *op == Op::Union);
        let selected: Vec<usize> = switches
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                let with = |op: Op| self.terms.iter().filter(move |(o, _)| *o == op);
                (!any_union || with(Op::Union).any(|(_, p)| p.matches(s)))
                    && with(Op::Intersect).all(|(_, p)| p.matches(s))
                    && !with(Op::Exclude).any(|(_, p)| p.matches(s))
            })
            .map(|(i, _)| i)
            .collect();
        if selected.is_empty() {
            return Err(SelectError::Empty);
        }
        Ok(selected)
    }
}

impl Pattern {
    fn matches(&self, s: &SwitchPlan) -> bool {
        match self {
            Pattern::All => true,
            Pattern::Role(role) => s.role == *role,
            Pattern::Rack(glob) => s.rack.as_deref().is_some_and(|r| glob.matches(r)),
            Pattern::Vendor(glob) => glob.matches(s.intent.vendor.as_str()),
            Pattern::Name(glob) => glob.matches(&s.intent.name),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::All => f.write_str("all"),
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
        let picked = Selection::parse(&limits)?.apply(&plan.switches)?;
        Ok(picked
            .into_iter()
            .map(|i| plan.switches[i].intent.name.clone())
            .collect())
    }

    #[test]
    fn names_groups_globs_intersections_and_exclusions() {
        let plan = lab();
        let all = ["spine1", "spine2", "leaf1", "leaf2"];
        assert_eq!(names(&plan, &[]).unwrap(), all);
        assert_eq!(names(&plan, &["all"]).unwrap(), all);
        assert_eq!(names(&plan, &["leaf"]).unwrap(), ["leaf1", "leaf2"]);
        assert_eq!(
            names(&plan, &["spine,rack:r1"]).unwrap(),
            ["spine1", "spine2", "leaf1"]
        );
        assert_eq!(names(&plan, &["*2"]).unwrap(), ["spine2", "leaf2"]);
        assert_eq!(
            names(&plan, &["all", "!leaf*"]).unwrap(),
            ["spine1", "spine2"]
        );
        assert_eq!(
            names(&plan, &["!sonic"]).unwrap(),
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
