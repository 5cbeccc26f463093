//! The commands the README and the book show against the binaries' own definitions:
//! every invocation in a shell block parses; every flag of the synopsis exists; every
//! command is in the synopsis; the command reference is the binaries' `--help`; the
//! exit-code tables are `EXIT_CODES`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use crate::book::{Page, pages};
use crate::common::{root, text};
use crate::shell::invocations;

/// A binary of this build. endhost is another package's: it must be built, and no
/// older than its sources, or its help would be checked as it was.
fn binary(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_mltctl")).with_file_name(name);
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} is not built: build the workspace first", path.display()));
    if name == "endhost" {
        let newest = ["endhost/src", "endhost/core/src", "common/src"]
            .iter()
            .flat_map(|dir| walk(&root().join(dir)))
            .filter_map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
            .max()
            .expect("endhost has sources");
        assert!(
            built >= newest,
            "{} is older than its sources: build the workspace first",
            path.display()
        );
    }
    path
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Runs a binary with nothing from this environment that could show in its help
/// (clap prints `[env: VAR=value]`) and a fixed width, from the repository's root.
fn run(name: &str, args: &[String]) -> std::process::Output {
    // No terminal on any stream: clap would wrap help to its width.
    Command::new(binary(name))
        .args(args)
        .stdin(std::process::Stdio::null())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("COLUMNS", "100")
        .current_dir(root())
        .output()
        .expect("the binary runs")
}

fn help(name: &str, path: &[String]) -> String {
    let mut args = path.to_vec();
    args.push("--help".into());
    let out = run(name, &args);
    assert!(
        out.status.success(),
        "{name} {} --help: {}",
        path.join(" "),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The subcommands a help text lists (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// Every command of a binary as its path of subcommands, the binary itself first
/// (an empty path), depth first.
fn commands(name: &str) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    let mut todo = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let help = help(name, &path);
        let mut children: Vec<Vec<String>> = subcommands(&help)
            .into_iter()
            .map(|c| {
                let mut child = path.clone();
                child.push(c);
                child
            })
            .collect();
        children.reverse();
        todo.extend(children);
        all.push(path);
    }
    all
}

/// The long flags and short options a help text defines.
fn options(help: &str) -> BTreeSet<String> {
    let mut options = BTreeSet::new();
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        for word in line.split([' ', ',', '=']) {
            let word = word.split('<').next().unwrap_or_default();
            if word.starts_with('-') && word.len() > 1 {
                options.insert(word.to_string());
            }
        }
        // Aliases clap prints as `[aliases: --out]` after the text.
        for part in line.split("[alias").skip(1) {
            for word in part.split([' ', ',', ']', ':']) {
                if word.starts_with("--") {
                    options.insert(word.to_string());
                }
            }
        }
    }
    options
}

#[test]
fn every_documented_invocation_parses() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        for block in page.blocks() {
            if !["sh", "bash", ""].contains(&block.lang.as_str()) {
                continue;
            }
            let found = match invocations(&block.text) {
                Ok(found) => found,
                Err(e) => {
                    problems.push(format!("{}: {e}", page.at(block.offset)));
                    continue;
                }
            };
            for invocation in found {
                // Every argument is parsed and checked by clap up to `--help`, which
                // then stops before required arguments are asked for.
                let mut args = invocation.args.clone();
                args.push("--help".into());
                let out = run(invocation.binary, &args);
                checked += 1;
                if !out.status.success() {
                    problems.push(format!(
                        "{}: `{} {}` does not parse: {}",
                        page.at(block.offset),
                        invocation.binary,
                        invocation.args.join(" "),
                        text(&out.stderr).trim()
                    ));
                }
            }
        }
    }
    for page in pages() {
        for (span, offset) in page.code_spans() {
            // A whole command written inline, not a synopsis with [optional] parts.
            let inline = (span.starts_with("mltctl ") || span.starts_with("endhost "))
                && !span.contains(['[', '|', '…']);
            let Some(invocation) = inline
                .then(|| invocations(&span).ok())
                .flatten()
                .and_then(|mut found| found.pop())
            else {
                continue;
            };
            let mut args = invocation.args.clone();
            args.push("--help".into());
            checked += 1;
            if !run(invocation.binary, &args).status.success() {
                problems.push(format!("{}: `{span}` does not parse", page.at(offset)));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 80, "only {checked} invocations found");
}

/// A synopsis entry: `BIN SUBCOMMAND… syntax` and its continuation lines, description
/// (after a run of spaces) left out.
struct Synopsis {
    binary: String,
    words: Vec<String>,
    line: usize,
}

fn synopses(page: &Page) -> Vec<Synopsis> {
    let mut entries: Vec<Synopsis> = Vec::new();
    for block in page.blocks().iter().filter(|b| b.lang == "text") {
        let first_line = page.line(block.offset) + 1;
        for (i, line) in block.text.lines().enumerate() {
            let syntax = line.trim_start().split("  ").next().unwrap_or_default();
            let first = syntax.split_whitespace().next().unwrap_or_default();
            if !line.starts_with(' ') && ["mltctl", "endhost"].contains(&first) {
                entries.push(Synopsis {
                    binary: first.to_string(),
                    words: syntax
                        .split_whitespace()
                        .skip(1)
                        .map(String::from)
                        .collect(),
                    line: first_line + i,
                });
            } else if line.starts_with(' ')
                && syntax.starts_with(['[', '-', '('])
                && let Some(entry) = entries.last_mut()
            {
                entry
                    .words
                    .extend(syntax.split_whitespace().map(String::from));
            }
        }
    }
    entries
}

/// The synopsis page names every command, and only options that exist.
#[test]
fn the_synopsis_covers_every_command_with_real_options() {
    let page = Page::read("docs/src/admin/commands.md");
    let entries = synopses(&page);
    let mut problems = Vec::new();
    for name in ["mltctl", "endhost"] {
        let all = commands(name);
        let known: BTreeSet<&Vec<String>> = all.iter().collect();
        let mut documented = BTreeSet::new();
        for entry in entries.iter().filter(|e| e.binary == name) {
            let mut path = Vec::new();
            for word in &entry.words {
                let mut longer = path.clone();
                longer.push(word.clone());
                if known.contains(&longer) {
                    path = longer;
                } else {
                    break;
                }
            }
            if path.is_empty() {
                problems.push(format!("line {}: no {name} command named", entry.line));
                continue;
            }
            let options = options(&help(name, &path));
            for word in &entry.words {
                for option in word
                    .split(['[', ']', '(', ')', '|'])
                    .filter(|w| w.starts_with('-') && w.len() > 1)
                {
                    let option = option.split('=').next().unwrap_or_default();
                    if !options.contains(option) {
                        problems.push(format!(
                            "line {}: `{name} {}` has no option {option}",
                            entry.line,
                            path.join(" ")
                        ));
                    }
                }
            }
            documented.insert(path);
        }
        for path in all.iter().filter(|p| !p.is_empty()) {
            let has_children = all
                .iter()
                .any(|o| o.len() > path.len() && o.starts_with(path));
            if !has_children && !documented.contains(path) {
                problems.push(format!(
                    "`{name} {}` is not in the synopsis",
                    path.join(" ")
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/src/admin/commands.md:\n{}",
        problems.join("\n")
    );
}

const REFERENCE: &str = "docs/src/admin/cli-reference.md";

/// The command reference as the binaries print it now.
fn reference() -> String {
    let mut page = String::from(
        "# Command reference\n\n\
         Every command's `--help`, as the binaries print it at a width of 100 columns. This\n\
         page is generated: `MLTCTL_BLESS=1 cargo nextest run --test docs` rewrites it, and the\n\
         tests fail when it differs from the binaries. The synopsis by task is\n\
         [Commands](commands.md); what each exit code means is [Exit codes](exit-codes.md).\n",
    );
    for name in ["mltctl", "endhost"] {
        let top = help(name, &[]);
        let exit_codes = top.find("\nExit codes:\n").map(|at| top[at..].to_string());
        for path in commands(name) {
            let mut help = help(name, &path);
            let title = std::iter::once(name.to_string())
                .chain(path.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            // Subcommands repeat the binary's exit codes: said once, under the binary.
            if !path.is_empty()
                && let Some(codes) = &exit_codes
                && help.ends_with(codes.as_str())
            {
                help.truncate(help.len() - codes.len());
                help.push_str("\n(exit codes: as for ");
                help.push_str(name);
                help.push_str(")\n");
            }
            let level = if path.is_empty() { "##" } else { "###" };
            page.push_str(&format!("\n{level} `{title}`\n\n```text\n{help}```\n"));
        }
    }
    page
}

#[test]
fn the_command_reference_is_the_binaries_help() {
    let now = reference();
    let path = root().join(REFERENCE);
    if std::env::var_os("MLTCTL_BLESS").is_some() {
        mlt_common::files::write(&path, now.as_bytes(), mlt_common::files::Access::Readable)
            .expect("the reference is written");
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    if written != now {
        let first = written
            .lines()
            .zip(now.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(written.lines().count().min(now.lines().count()));
        panic!(
            "{REFERENCE} differs from the binaries' --help from line {}: run \
             `MLTCTL_BLESS=1 cargo nextest run --test docs` and review the diff\n  page:   {:?}\n  binary: {:?}",
            first + 1,
            written.lines().nth(first).unwrap_or("(end)"),
            now.lines().nth(first).unwrap_or("(end)"),
        );
    }
}

/// Exit codes and what each means, from a help's `Exit codes:` section, and the text
/// of its closing note (`(play) …`).
fn exit_codes(help: &str) -> (BTreeMap<String, String>, String) {
    let mut codes: BTreeMap<String, String> = BTreeMap::new();
    let mut note = String::new();
    let mut current = None;
    for line in help.lines().skip_while(|l| *l != "Exit codes:").skip(1) {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let code: String = trimmed.chars().take_while(|c| c.is_ascii_digit()).collect();
        if !code.is_empty() && indent == 2 {
            current = Some(code.clone());
            codes.insert(code.clone(), trimmed[code.len()..].trim().to_string());
        } else if trimmed.starts_with('(') && indent == 2 {
            current = None;
            note.push_str(trimmed);
        } else if let Some(code) = &current {
            let meaning = codes.get_mut(code).expect("opened");
            meaning.push(' ');
            meaning.push_str(trimmed);
        } else {
            note.push(' ');
            note.push_str(trimmed);
        }
    }
    (codes, note)
}

/// Words only: Markdown's backticks and the help's line breaks left out.
fn words(text: &str) -> String {
    text.replace('`', "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_exit_code_tables_are_the_binaries() {
    let page = Page::read("docs/src/admin/exit-codes.md");
    let tables = page.tables();
    let mut problems = Vec::new();
    for name in ["mltctl", "endhost"] {
        let (codes, note) = exit_codes(&help(name, &[]));
        assert!(codes.len() >= 4, "{name} --help lists exit codes");
        let Some(table) = tables.iter().find(|t| t.heading == name) else {
            problems.push(format!("no table under a heading `{name}`"));
            continue;
        };
        let documented: BTreeMap<String, String> = table
            .rows
            .iter()
            .map(|row| (row[0].clone(), words(row.get(1).map_or("", String::as_str))))
            .collect();
        let want: BTreeMap<String, String> =
            codes.iter().map(|(c, m)| (c.clone(), words(m))).collect();
        for (code, meaning) in &want {
            match documented.get(code) {
                Some(row) if row == meaning => {}
                Some(row) => problems.push(format!(
                    "{name} {code}: the page says \"{row}\", the binary \"{meaning}\""
                )),
                None => problems.push(format!("{name} {code}: not on the page")),
            }
        }
        for code in documented.keys().filter(|c| !want.contains_key(*c)) {
            problems.push(format!("{name} {code}: on the page, not in the binary"));
        }
        if !words(&page.text).contains(&words(&note)) {
            problems.push(format!(
                "{name}: the page does not say \"{}\"",
                words(&note)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/src/admin/exit-codes.md:\n{}",
        problems.join("\n")
    );
}
