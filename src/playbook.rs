//! Playbooks: ordered steps over the inventory, each what an `mltctl` command does, run
//! on one plan until the first one fails (`mltctl play`).
//!
//! ```yaml
//! steps:
//!   - validate
//!   - diff
//!   - apply
//!   - step: bootstrap
//!     args: [--forks, "32"]
//!   - launch
//! ```

use std::path::PathBuf;

use marked_yaml::Node;
use serde::Serialize;

use crate::plan::Plan;
use crate::select::Selection;

/// The steps a playbook may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    /// `mltctl validate`.
    Validate,
    /// The switches' differences: `mltctl apply --check --diff`.
    Diff,
    Apply,
    Bootstrap,
    Launch,
    /// Switches and hosts against the plan, each class probed: `mltctl verify`.
    Verify,
    Stop,
}

impl StepKind {
    const ALL: [(&'static str, StepKind); 7] = [
        ("validate", StepKind::Validate),
        ("diff", StepKind::Diff),
        ("apply", StepKind::Apply),
        ("bootstrap", StepKind::Bootstrap),
        ("launch", StepKind::Launch),
        ("verify", StepKind::Verify),
        ("stop", StepKind::Stop),
    ];

    pub fn name(self) -> &'static str {
        StepKind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map(|(n, _)| *n)
            .expect("every kind is named")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub kind: StepKind,
    /// More arguments for this step's command.
    pub args: Vec<String>,
}

/// A problem in the playbook file, with where it is.
#[derive(Debug, thiserror::Error)]
#[error("{}:{line}:{column}: {message}", file.display())]
pub struct PlaybookError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Reads the steps of a playbook.
pub fn parse(file: &std::path::Path, text: &str) -> Result<Vec<Step>, PlaybookError> {
    let error = |node: Option<&Node>, message: String| {
        let at = node.and_then(|n| n.span().start().copied());
        PlaybookError {
            file: file.to_path_buf(),
            line: at.map_or(1, |m| m.line()),
            column: at.map_or(1, |m| m.column()),
            message,
        }
    };
    let root = marked_yaml::parse_yaml(0, text).map_err(|e| error(None, e.to_string()))?;
    let Some(top) = root.as_mapping() else {
        return Err(error(
            Some(&root),
            "a playbook is a mapping with `steps`".into(),
        ));
    };
    if let Some((key, _)) = top.iter().find(|(k, _)| k.as_str() != "steps") {
        return Err(error(
            Some(&Node::from(key.clone())),
            format!(
                "unknown key `{}` (a playbook has only `steps`)",
                key.as_str()
            ),
        ));
    }
    let Some(steps) = top.get_sequence("steps") else {
        return Err(error(
            Some(&root),
            "`steps` is missing or not a list".into(),
        ));
    };
    let mut out = Vec::new();
    for item in steps.iter() {
        let (name_node, args) = match item {
            Node::Scalar(_) => (item.clone(), Vec::new()),
            Node::Mapping(map) => {
                if let Some((key, _)) = map
                    .iter()
                    .find(|(k, _)| !["step", "args"].contains(&k.as_str()))
                {
                    return Err(error(
                        Some(&Node::from(key.clone())),
                        format!(
                            "unknown key `{}` (a step has `step` and `args`)",
                            key.as_str()
                        ),
                    ));
                }
                let name = map
                    .get_node("step")
                    .cloned()
                    .ok_or_else(|| error(Some(item), "a step needs `step: NAME`".into()))?;
                let args = match map.get_node("args") {
                    None => Vec::new(),
                    Some(Node::Sequence(seq)) => seq
                        .iter()
                        .map(|a| match a.as_scalar().map(|s| s.as_str()) {
                            None => Err(error(Some(a), "`args` holds plain words".into())),
                            Some(word) if names_inventory(word) => Err(error(
                                Some(a),
                                format!(
                                    "`{word}`: every step works on the play's inventory \
                                     (give it to `mltctl play -i`)"
                                ),
                            )),
                            Some(word) if word == "--limit" || word.starts_with("--limit=") => {
                                Err(error(
                                    Some(a),
                                    format!(
                                        "`{word}`: every step works on the play's selection \
                                         (give it to `mltctl play --limit`)"
                                    ),
                                ))
                            }
                            Some(word) => Ok(word.to_string()),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(other) => {
                        return Err(error(Some(other), "`args` is a list of words".into()));
                    }
                };
                (name, args)
            }
            Node::Sequence(_) => {
                return Err(error(Some(item), "a step is a name or `step: NAME`".into()));
            }
        };
        let name = name_node.as_scalar().map(|s| s.as_str()).unwrap_or("");
        let Some(&(_, kind)) = StepKind::ALL.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = StepKind::ALL.iter().map(|(n, _)| *n).collect();
            return Err(error(
                Some(&name_node),
                format!("unknown step `{name}` (steps: {})", known.join(", ")),
            ));
        };
        if kind == StepKind::Validate && !args.is_empty() {
            return Err(error(
                Some(item),
                "`validate` takes no `args` (the play reads the inventory once)".into(),
            ));
        }
        out.push(Step { kind, args });
    }
    if out.is_empty() {
        return Err(error(Some(&root), "the playbook has no steps".into()));
    }
    Ok(out)
}

/// Whether a step argument would point the step at another inventory.
fn names_inventory(word: &str) -> bool {
    word == "--inventory" || word.starts_with("--inventory=") || word.starts_with("-i")
}

/// A playbook run's settings, passed to every step that takes them.
#[derive(Default)]
pub struct Run {
    pub inventory: PathBuf,
    pub check: bool,
    pub diff: bool,
    pub json: bool,
    pub limit: Vec<String>,
    /// Arguments for every step that contacts switches or hosts (SSH, --forks).
    pub reach: Vec<String>,
    /// Arguments for the switch steps (diff, apply): the state directory, the confirm
    /// timeout.
    pub switches: Vec<String>,
    /// Arguments for the host steps (bootstrap, launch, stop).
    pub hosts: Vec<String>,
}

/// What a step will do: run these arguments, or be skipped for this reason.
pub enum StepPlan {
    Command(Vec<String>),
    Skip(&'static str),
}

/// The `mltctl` arguments of `step`, or why it is skipped. `plan` tells whether the
/// limit selects any switch or host.
pub fn command(step: &Step, run: &Run, plan: &Plan) -> Result<StepPlan, String> {
    let selected = Selection::parse(&run.limit)
        .and_then(|s| s.select(plan))
        .map_err(|e| e.to_string())?;
    let switches = matches!(step.kind, StepKind::Diff | StepKind::Apply);
    let hosts = matches!(
        step.kind,
        StepKind::Bootstrap | StepKind::Launch | StepKind::Stop
    );
    if switches && selected.switches.is_empty() {
        return Ok(StepPlan::Skip("--limit selects no switch"));
    }
    if hosts && selected.hosts.is_empty() {
        return Ok(StepPlan::Skip("--limit selects no host"));
    }
    if step.kind == StepKind::Launch && selected.hosts.len() < plan.hosts.len() {
        return Ok(StepPlan::Skip(
            "a job starts with all its hosts; --limit leaves some out",
        ));
    }
    if step.kind == StepKind::Verify && selected.hosts.len() < plan.hosts.len() {
        return Ok(StepPlan::Skip(
            "verify probes through every host's transport; --limit leaves some out",
        ));
    }
    if run.check && matches!(step.kind, StepKind::Launch | StepKind::Stop) {
        return Ok(StepPlan::Skip("check mode starts and stops nothing"));
    }
    if run.check && step.kind == StepKind::Verify {
        return Ok(StepPlan::Skip(
            "check mode launches nothing for verify to probe",
        ));
    }
    let mut args = vec![
        match step.kind {
            StepKind::Diff => "apply",
            kind => kind.name(),
        }
        .to_string(),
        "--inventory".into(),
        run.inventory.display().to_string(),
    ];
    if run.json {
        args.push("--json".into());
    }
    let verify = step.kind == StepKind::Verify;
    if switches || hosts || verify {
        for limit in &run.limit {
            args.push(format!("--limit={limit}"));
        }
        args.extend(run.reach.iter().cloned());
    }
    if switches {
        args.extend(run.switches.iter().cloned());
    }
    if hosts || verify {
        args.extend(run.hosts.iter().cloned());
    }
    if step.kind == StepKind::Diff
        || (run.check && matches!(step.kind, StepKind::Apply | StepKind::Bootstrap))
    {
        args.push("--check".into());
    }
    if step.kind == StepKind::Diff
        || (run.diff && matches!(step.kind, StepKind::Apply | StepKind::Bootstrap))
    {
        args.push("--diff".into());
    }
    args.extend(step.args.iter().cloned());
    Ok(StepPlan::Command(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_names_or_mappings_and_mistakes_have_locations() {
        let file = std::path::Path::new("site.yml");
        let steps = parse(
            file,
            "steps:\n  - validate\n  - step: bootstrap\n    args: [--forks, \"8\"]\n",
        )
        .unwrap();
        assert_eq!(steps[0].kind, StepKind::Validate);
        assert_eq!(steps[1].kind, StepKind::Bootstrap);
        assert_eq!(steps[1].args, ["--forks", "8"]);
        let e = parse(file, "steps:\n  - validate\n  - deploy\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "site.yml:3:5: unknown step `deploy` (steps: validate, diff, apply, bootstrap, launch, verify, stop)"
        );
        let e = parse(file, "steps:\n  - step: apply\n    argz: []\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("site.yml:3:5: unknown key `argz`"),
            "{e}"
        );
        let e = parse(
            file,
            "steps:\n  - step: apply\n    args: [-i, other.yaml]\n",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("site.yml:3:12: `-i`: every step works on the play's inventory"),
            "{e}"
        );
        let e = parse(file, "steps:\n  - step: apply\n    args: [--limit=leaf1]\n").unwrap_err();
        assert!(e.to_string().contains("the play's selection"), "{e}");
        assert!(parse(file, "steps:\n  - step: validate\n    args: [--json]\n").is_err());
        assert!(parse(file, "stepz: []\n").is_err());
        assert!(parse(file, "steps: []\n").is_err());
    }

    #[test]
    fn launch_runs_only_when_the_limit_keeps_every_host() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory/lab.yaml");
        let plan = Plan::build(&crate::inventory::load(std::path::Path::new(path)).unwrap());
        let launch = Step {
            kind: StepKind::Launch,
            args: vec![],
        };
        let run = |limit: &[&str]| Run {
            inventory: "lab.yaml".into(),
            limit: limit.iter().map(|l| l.to_string()).collect(),
            ..Run::default()
        };
        for limit in [&[][..], &["hosts"], &["rack:r1", "rack:r2"]] {
            match command(&launch, &run(limit), &plan).unwrap() {
                StepPlan::Command(args) => assert_eq!(args[0], "launch", "{limit:?}"),
                StepPlan::Skip(why) => panic!("{limit:?} skipped launch: {why}"),
            }
        }
        for limit in [&["h1"][..], &["rack:r2"]] {
            assert!(
                matches!(
                    command(&launch, &run(limit), &plan).unwrap(),
                    StepPlan::Skip(why) if why.contains("leaves some out")
                ),
                "{limit:?}"
            );
        }
    }

    #[test]
    fn each_kind_of_step_gets_the_options_it_takes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory/lab.yaml");
        let plan = Plan::build(&crate::inventory::load(std::path::Path::new(path)).unwrap());
        let run = Run {
            inventory: "lab.yaml".into(),
            json: true,
            reach: vec!["--forks".into(), "4".into()],
            switches: vec!["--confirm-timeout".into(), "90".into()],
            hosts: vec!["--remote-dir".into(), "/srv".into()],
            ..Run::default()
        };
        let words = |kind| match command(
            &Step {
                kind,
                args: vec!["--x".into()],
            },
            &run,
            &plan,
        ) {
            Ok(StepPlan::Command(args)) => args.join(" "),
            _ => panic!("{kind:?} is skipped"),
        };
        assert_eq!(
            words(StepKind::Validate),
            "validate --inventory lab.yaml --json --x"
        );
        assert_eq!(
            words(StepKind::Diff),
            "apply --inventory lab.yaml --json --forks 4 --confirm-timeout 90 --check --diff --x"
        );
        assert_eq!(
            words(StepKind::Bootstrap),
            "bootstrap --inventory lab.yaml --json --forks 4 --remote-dir /srv --x"
        );
    }
}
