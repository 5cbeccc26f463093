//! What the README, the book and the code cite exists: pages and their sections, files
//! and folders of the tree. The design brief outside the repository is never cited.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::book::{Page, book, pages, relative};
use crate::common::root;

/// Folders a citation of the tree starts with.
const TOP: &[&str] = &[
    ".ci",
    "benches",
    "common",
    "docs",
    "endhost",
    "fuzz",
    "inventory",
    "lab",
    "netns",
    "playbooks",
    "scripts",
    "src",
    "switch-config",
    "templates",
    "tests",
];

/// Source files whose comments may cite the book, walked from the root.
fn sources() -> Vec<PathBuf> {
    let skip = ["target", ".git", "book", "corpus", "artifacts"];
    let kinds = ["rs", "py", "c", "h", "toml", "sh", "tera", "yml", "yaml"];
    let mut files = Vec::new();
    let mut dirs = vec![root().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable directory") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                if !skip.contains(&name.as_ref()) {
                    dirs.push(path);
                }
            } else if path
                .extension()
                .is_some_and(|e| kinds.contains(&e.to_string_lossy().as_ref()))
                || in_dir(&path, ".ci")
                || in_dir(&path, "scripts")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Whether `path` is directly in a folder named `dir` (scripts without an extension).
fn in_dir(path: &Path, dir: &str) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .is_some_and(|name| name == dir)
}

/// Anchors of every page, by path relative to the root.
fn anchors() -> HashMap<String, BTreeSet<String>> {
    pages()
        .iter()
        .map(|p| {
            (
                p.path.display().to_string(),
                p.anchors().into_iter().collect(),
            )
        })
        .collect()
}

/// Whether `target` (a path relative to the root, with an optional `#anchor`) exists.
fn check(target: &str, anchors: &HashMap<String, BTreeSet<String>>) -> Result<(), String> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let normal = normalise(Path::new(path));
    if !root().join(&normal).exists() {
        return Err(format!("{path} does not exist"));
    }
    if let Some(anchor) = anchor {
        let key = normal.display().to_string();
        match anchors.get(&key) {
            Some(known) if known.contains(anchor) => {}
            Some(_) => return Err(format!("{key} has no section #{anchor}")),
            None => return Err(format!("{key} is not a page of the book")),
        }
    }
    Ok(())
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The book's pages and sections that a text cites as `docs/…md#anchor`.
fn book_citations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("docs/src/") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_alphanumeric() || "/._#-".contains(c)))
            .unwrap_or(tail.len());
        let cited = tail[..end].trim_end_matches(['.', '-']);
        if cited.contains(".md") || !cited.contains('.') {
            found.push(cited.to_string());
        }
        rest = &tail[end..];
    }
    found
}

#[test]
fn the_code_cites_only_the_book_and_what_exists() {
    let anchors = anchors();
    let design_brief = ["DESIGN ", "§"].concat();
    let outside = ["..", "/shared/"].concat();
    let seeds = ["shared/", "seeds/"].concat();
    let notes = ["shared/", "reference/"].concat();
    let mut problems = Vec::new();
    for file in sources() {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let name = relative(&file);
        for (n, line) in text.lines().enumerate() {
            let at = format!("{name}:{}", n + 1);
            for stale in [&design_brief, &outside, &seeds, &notes] {
                if line.contains(stale.as_str()) {
                    problems.push(format!(
                        "{at}: cites `{stale}`, which is not in this repository; cite the book (docs/src/design/)"
                    ));
                }
            }
            for cited in book_citations(line) {
                if let Err(e) = check(&cited, &anchors) {
                    problems.push(format!("{at}: {e}"));
                }
            }
            for path in tree_paths(comment(&file, line)) {
                if !in_tree_from(&path, &bases_of(&file)) {
                    problems.push(format!("{at}: `{path}` is not in the tree"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_link_of_the_readme_and_the_book_resolves() {
    let anchors = anchors();
    let mut problems = Vec::new();
    for page in pages() {
        let here = page.path.parent().unwrap_or(Path::new("")).to_path_buf();
        for (dest, offset) in page.links() {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let target = match dest.strip_prefix('#') {
                Some(anchor) => format!("{}#{anchor}", page.path.display()),
                None => here.join(&dest).display().to_string(),
            };
            if let Err(e) = check(&target, &anchors) {
                problems.push(format!("{}: link {dest}: {e}", page.at(offset)));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The places in the tree a line of code or a comment names: runs of path characters
/// that start with a top folder and a `/`. Another repository's path is written
/// `repo:path` and left alone; a path that a `{` continues (a format string) is a
/// prefix, and a part in capitals (`running_VENDOR`) a placeholder.
fn tree_paths(line: &str) -> Vec<String> {
    let pathy = |c: char| c.is_alphanumeric() || "/._-<>*".contains(c);
    let mut found = Vec::new();
    for (at, _) in line.char_indices() {
        let before = line[..at].chars().next_back();
        if before.is_some_and(|c| pathy(c) || c == ':') {
            continue;
        }
        let rest = &line[at..];
        let Some(top) = TOP.iter().find(|t| rest.starts_with(&format!("{t}/"))) else {
            continue;
        };
        let end = rest.find(|c: char| !pathy(c)).unwrap_or(rest.len());
        let mut path = rest[..end].trim_end_matches(['.', '-']).to_string();
        if rest[end..].starts_with('{') {
            path.push('*');
        }
        if path.len() > top.len() + 1 {
            found.push(path);
        }
    }
    found
}

/// Whether a path (with `<name>`, `*` or capitalised placeholder parts) names something
/// in the tree, read from any of `bases`.
fn in_tree_from(path: &str, bases: &[PathBuf]) -> bool {
    let placeholder = |part: &str| {
        let upper: String = part.chars().filter(|c| c.is_ascii_uppercase()).collect();
        upper.len() >= 3 && part.contains(&upper)
    };
    let pattern: String = path
        .trim_end_matches('/')
        .split('/')
        .map(|part| {
            if part.starts_with('<') && part.ends_with('>') {
                "*".to_string()
            } else if placeholder(part) {
                let upper: String = part.chars().filter(|c| c.is_ascii_uppercase()).collect();
                part.replace(&upper, "*")
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/");
    bases.iter().any(|base| {
        let full = base.join(&pattern).display().to_string();
        glob::glob(&full).map(|m| m.count()).unwrap_or(0) > 0
    })
}

fn in_tree(path: &str) -> bool {
    in_tree_from(path, &[root().to_path_buf()])
}

/// The comment on a line of source, where citations live (a path in code is the
/// tests' to check, by using it).
fn comment<'a>(file: &Path, line: &'a str) -> &'a str {
    let c_like = file
        .extension()
        .is_some_and(|e| ["rs", "c", "h"].contains(&e.to_string_lossy().as_ref()));
    let marker = if c_like { "//" } else { "#" };
    match line.find(marker) {
        Some(at) => &line[at..],
        None if c_like && line.trim_start().starts_with('*') => line,
        None => "",
    }
}

/// Where a source file's relative paths may start: the root, its own folder, and its
/// package's folder (the nearest with a Cargo.toml).
fn bases_of(file: &Path) -> Vec<PathBuf> {
    let dir = file.parent().unwrap_or(root()).to_path_buf();
    let package = dir
        .ancestors()
        .find(|d| d.join("Cargo.toml").exists())
        .unwrap_or(root())
        .to_path_buf();
    vec![root().to_path_buf(), dir, package]
}

/// Whether a code span names a place in the tree, such as `src/plan/thresholds/mod.rs` or
/// `switch-config/src/<vendor>/`.
fn tree_path(span: &str) -> Option<String> {
    let first = span.split('/').next()?;
    let pathlike = span.contains('/')
        && TOP.contains(&first)
        && span
            .chars()
            .all(|c| c.is_alphanumeric() || "/._-<>*".contains(c));
    pathlike.then(|| span.trim_end_matches('/').to_string())
}

#[test]
fn every_path_the_readme_and_the_book_name_is_in_the_tree() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        for (span, offset) in page.code_spans() {
            let Some(path) = tree_path(&span) else {
                continue;
            };
            checked += 1;
            if !in_tree(&path) {
                problems.push(format!("{}: `{span}` is not in the tree", page.at(offset)));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 50, "only {checked} paths found");
}

#[test]
fn the_summary_lists_every_page_of_the_book() {
    let summary = Page::read("docs/src/SUMMARY.md");
    let listed: BTreeSet<String> = summary
        .links()
        .into_iter()
        .map(|(dest, _)| format!("docs/src/{dest}"))
        .collect();
    let pages: BTreeSet<String> = book()
        .into_iter()
        .filter(|p| p != "docs/src/SUMMARY.md")
        .collect();
    let missing: Vec<_> = pages.difference(&listed).collect();
    let dangling: Vec<_> = listed.difference(&pages).collect();
    assert!(
        missing.is_empty() && dangling.is_empty(),
        "docs/src/SUMMARY.md: pages not listed {missing:?}; listed but absent {dangling:?}"
    );
}

#[test]
fn the_readme_is_short() {
    let lines = Page::read("README.md").text.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; the rest belongs in the book"
    );
}
