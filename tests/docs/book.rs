//! Reading the README and the book as Markdown (pulldown-cmark, as mdBook does): pages,
//! fenced blocks, headings and their anchors, links, code spans and tables.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use crate::common::root;

/// One Markdown file, its path relative to the repository's root.
pub struct Page {
    pub path: PathBuf,
    pub text: String,
}

impl Page {
    pub fn read(relative: &str) -> Page {
        let text = std::fs::read_to_string(root().join(relative))
            .unwrap_or_else(|e| panic!("{relative}: {e}"));
        Page {
            path: PathBuf::from(relative),
            text,
        }
    }

    /// The 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> usize {
        self.text[..offset].matches('\n').count() + 1
    }

    /// `path:line`, for messages.
    pub fn at(&self, offset: usize) -> String {
        format!("{}:{}", self.path.display(), self.line(offset))
    }

    fn events(&self) -> impl Iterator<Item = (Event<'_>, std::ops::Range<usize>)> {
        Parser::new_ext(&self.text, Options::ENABLE_TABLES).into_offset_iter()
    }

    pub fn blocks(&self) -> Vec<Block> {
        let mut blocks = Vec::new();
        let mut open: Option<Block> = None;
        for (event, range) in self.events() {
            match event {
                Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                    open = Some(Block {
                        lang: info.split_whitespace().next().unwrap_or("").to_string(),
                        text: String::new(),
                        offset: range.start,
                    });
                }
                Event::Text(text) => {
                    if let Some(block) = open.as_mut() {
                        block.text.push_str(&text);
                    }
                }
                Event::End(TagEnd::CodeBlock) => blocks.extend(open.take()),
                _ => {}
            }
        }
        blocks
    }

    /// Headings in order.
    pub fn headings(&self) -> Vec<Heading> {
        let mut headings = Vec::new();
        let mut open: Option<Heading> = None;
        for (event, _) in self.events() {
            match event {
                Event::Start(Tag::Heading { .. }) => {
                    open = Some(Heading {
                        text: String::new(),
                        plain: String::new(),
                    });
                }
                Event::Text(text) => {
                    if let Some(h) = open.as_mut() {
                        h.text.push_str(&text);
                        h.plain.push_str(&text);
                    }
                }
                Event::Code(code) => {
                    if let Some(h) = open.as_mut() {
                        h.text.push_str(&format!("`{code}`"));
                        h.plain.push_str(&code);
                    }
                }
                Event::End(TagEnd::Heading(_)) => headings.extend(open.take()),
                _ => {}
            }
        }
        headings
    }

    /// The anchors mdBook gives this page's headings.
    pub fn anchors(&self) -> HashSet<String> {
        let mut anchors = HashSet::new();
        for heading in self.headings() {
            let id = anchor(&heading.plain);
            let mut unique = id.clone();
            let mut n = 1;
            while anchors.contains(&unique) {
                unique = format!("{id}-{n}");
                n += 1;
            }
            anchors.insert(unique);
        }
        anchors
    }

    /// Link destinations with their offsets.
    pub fn links(&self) -> Vec<(String, usize)> {
        self.events()
            .filter_map(|(event, range)| match event {
                Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                    Some((dest_url.to_string(), range.start))
                }
                _ => None,
            })
            .collect()
    }

    /// Inline code spans outside blocks, with their offsets.
    pub fn code_spans(&self) -> Vec<(String, usize)> {
        self.events()
            .filter_map(|(event, range)| match event {
                Event::Code(code) => Some((code.to_string(), range.start)),
                _ => None,
            })
            .collect()
    }

    /// The tables under each heading: the heading's text (code spans in backticks) and
    /// every body row's cells (likewise).
    pub fn tables(&self) -> Vec<Table> {
        let mut tables = Vec::new();
        let mut heading = String::new();
        let mut in_heading = false;
        let mut table: Option<Table> = None;
        let mut in_head = false;
        let mut row: Vec<String> = Vec::new();
        for (event, _) in self.events() {
            match event {
                Event::Start(Tag::Heading { .. }) => {
                    in_heading = true;
                    heading.clear();
                }
                Event::End(TagEnd::Heading(_)) => in_heading = false,
                Event::Start(Tag::Table(_)) => {
                    table = Some(Table {
                        heading: heading.clone(),
                        rows: Vec::new(),
                    })
                }
                Event::End(TagEnd::Table) => tables.extend(table.take()),
                Event::Start(Tag::TableHead) => in_head = true,
                Event::End(TagEnd::TableHead) => in_head = false,
                Event::Start(Tag::TableRow) => row.clear(),
                Event::End(TagEnd::TableRow) => {
                    if let Some(t) = table.as_mut() {
                        t.rows.push(std::mem::take(&mut row));
                    }
                }
                Event::Start(Tag::TableCell) if !in_head => row.push(String::new()),
                Event::Text(text) if in_heading => heading.push_str(&text),
                Event::Code(code) if in_heading => heading.push_str(&format!("`{code}`")),
                Event::Text(text) if table.is_some() && !in_head => {
                    if let Some(cell) = row.last_mut() {
                        cell.push_str(&text);
                    }
                }
                Event::Code(code) if table.is_some() && !in_head => {
                    if let Some(cell) = row.last_mut() {
                        cell.push_str(&format!("`{code}`"));
                    }
                }
                _ => {}
            }
        }
        tables
    }
}

pub struct Block {
    pub lang: String,
    pub text: String,
    pub offset: usize,
}

pub struct Heading {
    /// With code spans in backticks.
    pub text: String,
    /// As rendered.
    pub plain: String,
}

pub struct Table {
    pub heading: String,
    pub rows: Vec<Vec<String>>,
}

/// mdBook's id for a heading: alphanumerics, `_` and `-` kept (ASCII lowercased),
/// whitespace made `-`, everything else dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The book's pages (every `.md` under `docs/src`), relative to the root.
pub fn book() -> Vec<String> {
    let mut pages = Vec::new();
    let mut dirs = vec![root().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(relative(&path));
            }
        }
    }
    pages.sort();
    pages
}

/// Every README in the tree, relative to the root.
fn readmes() -> Vec<String> {
    let skip = ["target", ".git", "docs"];
    let mut found = Vec::new();
    let mut dirs = vec![root().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)
            .expect("a readable directory")
            .flatten()
        {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if !skip.contains(&name.to_string_lossy().as_ref()) {
                    dirs.push(path);
                }
            } else if name == "README.md" {
                found.push(relative(&path));
            }
        }
    }
    found.sort();
    found
}

/// Every page readers meet: the READMEs and the book.
pub fn pages() -> Vec<Page> {
    readmes()
        .into_iter()
        .chain(book())
        .map(|p| Page::read(&p))
        .collect()
}

pub fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}
