//! Parsing a large inventory's YAML in parts on every core, each part's node tree read
//! (and freed) as soon as it is parsed, with every node's line and column.
//!
//! The YAML parser runs on one thread at ~8 MB/s, and its tree of a 16,384-host
//! inventory (5.7 MB) takes 165 MB. The text is cut at every line that starts a
//! top-level key, and where a line starts an entry of a top-level list (not right after
//! an empty entry), about evenly, into a few parts per thread; a part of list entries
//! only may be read without a tree ([`ReadLists`]). Each part is parsed with a newline
//! for every line before it (so lines and columns are those of
//! the whole file; character positions are not, and nothing reports them), a part that
//! continues a list with the list's key on the line above its first entry. The reader
//! is told which parts continue a list; the parts' top-level keys must join into one
//! mapping. Any doubt parses the whole text instead: a line at column 0 that is not a
//! plain key, a list entry, a comment or blank; a block scalar (an empty one ends
//! differently at a part's end) or a lone CR anywhere; a part that does not parse (a
//! quoted or flow value running across a cut); a key in two parts; a part continuing a
//! key whose value in the part before is not a list; padding that would add more
//! newlines than the text has bytes. Every problem is therefore reported by the whole
//! parse.

use marked_yaml::{LoadError, LoaderOptions, Node};
use rayon::prelude::*;

/// Reads a part without its tree when it holds list entries only: given the source,
/// the part's text (padded as for its tree) and the key of the list it continues, its
/// top-level keys and what `read` would give for its tree; None leaves it to the tree.
pub type ReadLists<'a, R> =
    &'a (dyn Fn(usize, &str, Option<&str>) -> Option<(Vec<String>, R)> + Sync);

/// Below this, the whole text is parsed on one thread: splitting would not pay.
const PARALLEL_FROM_BYTES: usize = 512 << 10;
/// Parts per thread: each part's tree is read and freed before the thread parses its
/// next, so about this many times fewer nodes exist at once than in the whole tree
/// (16,384 hosts: 165 MB of it). Each part also reads a newline per line before it.
const PARTS_PER_THREAD: usize = 4;
const MAX_PARTS: usize = 32;

/// How an inventory is read: a duplicate key is an error.
pub(super) fn options() -> LoaderOptions {
    LoaderOptions::default().error_on_duplicate_keys(true)
}

/// The number of parts to cut a text in on this machine.
pub fn default_parts() -> usize {
    (rayon::current_num_threads() * PARTS_PER_THREAD).min(MAX_PARTS)
}

/// `read` of each part's node tree, in the text's order: a part's tree is a top-level
/// mapping, and `read` is told whether its first key continues the list the part
/// before ended with. The parts are about `parts` of them (one, the whole text, for a
/// small text or on any doubt); their trees are read on the pool as they are parsed and
/// never all exist at once. A syntax error is the whole parse's.
pub fn read_each<R: Send>(
    source: usize,
    text: &str,
    parts: usize,
    read: &(dyn Fn(&Node, bool) -> R + Sync),
    lists: Option<ReadLists<R>>,
) -> Result<Vec<R>, LoadError> {
    if text.len() >= PARALLEL_FROM_BYTES
        && parts > 1
        && let Some(cuts) = cuts(text, parts)
        && padding(text, &cuts) <= text.len()
        && let Some(read) = read_parts(source, text, &cuts, read, lists)
    {
        return Ok(read);
    }
    let root = marked_yaml::parse_yaml_with_options(source, text, options())?;
    let read = read(&root, false);
    // Freeing a large tree takes a while (16,384 hosts: 0.18 s); the pool does it.
    rayon::spawn(move || drop(root));
    Ok(vec![read])
}

/// The newlines the parts' padding adds up to: at most the text's length, or parsing
/// in parts could cost many times one parse (blank lines before a short inventory).
fn padding(text: &str, cuts: &[Cut]) -> usize {
    let (mut lines, mut from, mut total) = (0, 0, 0);
    for cut in cuts {
        let Some(between) = text.as_bytes().get(from..cut.at) else {
            return usize::MAX;
        };
        lines += between.iter().filter(|b| **b == b'\n').count();
        from = cut.at;
        total += lines;
    }
    total
}

/// Where a part after the first begins.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cut<'t> {
    /// Byte offset of the line.
    at: usize,
    /// Spaces before its first character: the part before ends after them, as the node
    /// that ends there ends at the character after them in the whole parse.
    indent: usize,
    /// The top-level key whose list the part continues, when it begins at an entry.
    continues: Option<&'t str>,
}

/// Where to cut `text` into `parts` of about equal size, at lines that start a
/// top-level key or an entry (after the first) of a top-level list. None when some line
/// leaves doubt, or when there is nothing to cut.
fn cuts(text: &str, parts: usize) -> Option<Vec<Cut<'_>>> {
    let mut candidates = Vec::new();
    // The top-level key above, and the column of its list's entries once seen (None:
    // not yet; Some(None): its value is not a block list).
    let mut section: Option<(&str, Option<Option<usize>>)> = None;
    // Whether the line above was an entry with nothing on its line: if it is empty, its
    // null takes its place from the next token, which a part ending there does not have.
    let mut after_bare_entry = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        // The parser also ends a line at a lone CR, which the cuts would not count.
        let lone_cr = line.trim_end_matches(['\r', '\n']).contains('\r');
        // A block scalar ends at the next token whole, at the end of a part parsed alone:
        // an empty one reads as "" one way and "\n" the other.
        if lone_cr || opens_block_scalar(line) {
            return None;
        }
        let content = line.trim_start_matches(' ');
        if content.trim_end().is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        let entry = content.starts_with("- ") || content.trim_end() == "-";
        let bare = entry && {
            let rest = content[1..].trim();
            rest.is_empty() || rest.starts_with('#')
        };
        let follows_bare = std::mem::replace(&mut after_bare_entry, bare);
        if indent == 0 && !entry {
            let key = plain_key(line)?;
            if section.is_some() {
                candidates.push(Cut {
                    at,
                    indent,
                    continues: None,
                });
            }
            section = Some((key, None));
            continue;
        }
        let (key, entries) = section.as_mut()?;
        match entries {
            None => *entries = Some(entry.then_some(indent)),
            Some(Some(column)) if *column == indent && entry && !follows_bare => {
                candidates.push(Cut {
                    at,
                    indent,
                    continues: Some(*key),
                })
            }
            Some(_) => {}
        }
    }
    // Every section starts a part too, so a small section (fabric, training) is parsed
    // alone and the lists' parts hold entries only (read without a tree: `ReadLists`).
    let sections = candidates.iter().copied().filter(|c| c.continues.is_none());
    let mut cuts: Vec<Cut> = (1..parts)
        .filter_map(|i| {
            let target = text.len() * i / parts;
            candidates
                .iter()
                .copied()
                .min_by_key(|c| c.at.abs_diff(target))
        })
        .chain(sections)
        .collect();
    cuts.sort_by_key(|c| c.at);
    cuts.dedup();
    (!cuts.is_empty()).then_some(cuts)
}

/// Whether `line` may end with a block scalar's header (`|` or `>`, then chomping and
/// indentation indicators, then perhaps a comment). A quoted value ending so counts too:
/// a false alarm only parses the text whole.
fn opens_block_scalar(line: &str) -> bool {
    let value = line.split(" #").next().unwrap_or(line).trim_end();
    let header = value.trim_end_matches(|c: char| c == '-' || c == '+' || c.is_ascii_digit());
    value.len() - header.len() <= 2 && (header.ends_with('|') || header.ends_with('>'))
}

/// The plain mapping key `line` starts with (`name:` then a space or the line's end).
fn plain_key(line: &str) -> Option<&str> {
    let name_end = line
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        .unwrap_or(line.len());
    let rest = &line.as_bytes()[name_end..];
    let plain = name_end > 0
        && line.as_bytes()[0].is_ascii_alphabetic()
        && rest.first() == Some(&b':')
        && matches!(rest.get(1), None | Some(b' ' | b'\n' | b'\r'));
    plain.then(|| &line[..name_end])
}

/// The part of `text` that begins at `cut` and ends at `end`, padded to be parsed alone
/// with the lines and columns of the whole text.
fn padded_part(text: &str, cut: &Cut, end: usize) -> String {
    let lines_before = text.as_bytes()[..cut.at].iter().filter(|b| **b == b'\n');
    let mut part = "\n".repeat(lines_before.count());
    if let Some(key) = cut.continues {
        // The list's key on the line above the part's first entry.
        part.pop();
        part.push_str(key);
        part.push_str(":\n");
    }
    part.push_str(&text[cut.at..end]);
    part
}

/// A part's top-level keys, and whether the last holds a list (which the next part may
/// continue).
struct Keys {
    names: Vec<String>,
    ends_in_list: bool,
}

/// The top-level keys of a part's tree, if it is a mapping whose first key, when the
/// part continues a list, is that list's.
fn top_keys(root: &Node, cut: &Cut) -> Option<Keys> {
    let top = root.as_mapping()?;
    let names: Vec<String> = top.keys().map(|k| k.as_str().to_owned()).collect();
    if let Some(key) = cut.continues {
        let first = names.first()?;
        let continued = top.get_node(first)?.as_sequence().is_some();
        if first != key || !continued {
            return None;
        }
    }
    let last = names.last().and_then(|k| top.get_node(k.as_str()));
    Some(Keys {
        ends_in_list: last.is_some_and(|v| v.as_sequence().is_some()),
        names,
    })
}

/// Whether the parts' keys join into one mapping: each key in one part only, but for a
/// list a part continues, which the part before ended with (as a list: a key whose
/// value is not one reads the entries below it otherwise whole, as a scalar's lines).
fn join_up(keys: &[Keys], cuts: &[Cut]) -> bool {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (i, part) in keys.iter().enumerate() {
        let continued = i > 0 && cuts[i - 1].continues.is_some();
        if continued {
            let before = &keys[i - 1];
            if !before.ends_in_list || before.names.last() != part.names.first() {
                return false;
            }
        }
        let own = if continued {
            &part.names[1..]
        } else {
            &part.names[..]
        };
        if !own.iter().all(|k| seen.insert(k.as_str())) {
            return false;
        }
    }
    true
}

fn read_parts<R: Send>(
    source: usize,
    text: &str,
    cuts: &[Cut],
    read: &(dyn Fn(&Node, bool) -> R + Sync),
    lists: Option<ReadLists<R>>,
) -> Option<Vec<R>> {
    let parts = spans(text, cuts);
    let read: Vec<(Keys, R)> = parts
        .par_iter()
        .with_max_len(1)
        .map(|&(cut, end)| {
            let part = padded_part(text, cut, end);
            if let Some((names, read)) = lists.and_then(|lists| lists(source, &part, cut.continues))
            {
                return Some((
                    Keys {
                        names,
                        ends_in_list: true,
                    },
                    read,
                ));
            }
            let root = marked_yaml::parse_yaml_with_options(source, part, options()).ok()?;
            let keys = top_keys(&root, cut)?;
            // The part's tree is freed here, before this thread parses another.
            Some((keys, read(&root, cut.continues.is_some())))
        })
        .collect::<Option<_>>()?;
    let (keys, read): (Vec<Keys>, Vec<R>) = read.into_iter().unzip();
    join_up(&keys, cuts).then_some(read)
}

/// Each part's cut (the first's at 0) and end: the part before a cut ends after the
/// cut line's indentation, as the node that ends there does in the whole parse.
fn spans<'c, 't>(text: &str, cuts: &'c [Cut<'t>]) -> Vec<(&'c Cut<'t>, usize)> {
    const FIRST: Cut<'static> = Cut {
        at: 0,
        indent: 0,
        continues: None,
    };
    let ends = cuts.iter().map(|c| c.at + c.indent);
    std::iter::once(&FIRST)
        .chain(cuts)
        .zip(ends.chain(std::iter::once(text.len())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(text: &str) -> Node {
        marked_yaml::parse_yaml_with_options(0, text, options()).unwrap()
    }

    /// The parts' trees joined into one mapping, continued lists appended to, spanning
    /// from the first part's start to the last's end.
    fn in_parts(text: &str, parts: usize) -> Option<Node> {
        let cuts = cuts(text, parts)?;
        let trees = read_parts(
            0,
            text,
            &cuts,
            &|root, continues| (root.clone(), continues),
            None,
        )?;
        let mut trees = trees.into_iter();
        let (Node::Mapping(mut whole), false) = trees.next()? else {
            return None;
        };
        for (root, continues) in trees {
            let Node::Mapping(mut part) = root else {
                return None;
            };
            let end = part.span().end().copied();
            let mut entries = std::mem::take(&mut *part).into_iter();
            if continues {
                let (key, Node::Sequence(mut more)) = entries.next()? else {
                    return None;
                };
                let Some(Node::Sequence(list)) = whole.get_mut(key.as_str()) else {
                    return None;
                };
                list.span_mut().set_end(more.span().end().copied());
                list.append(&mut more);
            }
            whole.extend(entries);
            whole.span_mut().set_end(end);
        }
        Some(Node::Mapping(whole))
    }

    /// The same nodes with the same lines and columns. (A node's equality leaves its
    /// span out; its debug form shows it, character positions included, which parts do
    /// not keep.)
    fn same_tree(a: &Node, b: &Node) -> bool {
        let shown = |n: &Node| {
            let text = format!("{n:?}");
            let mut out = String::with_capacity(text.len());
            for piece in text.split("character: ") {
                out.push_str(piece.trim_start_matches(|c: char| c.is_ascii_digit()));
            }
            out
        };
        a == b && shown(a) == shown(b)
    }

    const INVENTORY: &str = "# an inventory\nfabric:\n  name: x  # its name\n\n\
        racks:\n  - {name: r1, subnet: 10.1.0.0/24}\n  - name: r2\n    note: \"two\n      lines\"\n\n\
        # hosts follow\nhosts:\n- name: h1\n  cores: [2, 3]\n  ports:\n  - a\n  - b\n\
        - name: \"h\u{e9}2\"\n  mgmt: {address: 10.0.0.2}\n- name: h3\n\
        training:\n  loss_bound: 0.01\n  layers:\n    - 1\n    - 2\n";

    #[test]
    fn parts_give_the_tree_lines_and_columns_of_the_whole() {
        let mut seen = Vec::new();
        for parts in 2..=8 {
            let cuts = cuts(INVENTORY, parts).expect("places to cut");
            seen.extend(cuts.iter().map(|c| c.continues));
            let joined = in_parts(INVENTORY, parts).expect("parts parse");
            assert!(same_tree(&joined, &whole(INVENTORY)), "{parts} parts");
        }
        // Cut at section keys and inside lists, both kinds.
        assert!(seen.contains(&None));
        assert!(seen.contains(&Some("racks")) && seen.contains(&Some("hosts")));
    }

    #[test]
    fn a_generated_fabric_parses_alike_in_parts() {
        let size = crate::generate::FabricSize {
            spines: 2,
            leaves: 4,
            hosts_per_leaf: 4,
            layers: 8,
            params_per_layer: 1000,
        };
        let text = crate::generate::fabric_yaml(size).unwrap();
        for parts in [2, 3, 7] {
            let joined = in_parts(&text, parts).expect("cut");
            assert!(same_tree(&joined, &whole(&text)), "{parts} parts");
        }
    }

    #[test]
    fn doubt_is_left_to_the_whole_parse() {
        // A line at column 0 that is not a plain key or a list entry.
        assert_eq!(cuts("a: 1\n---\nb: 2\n", 2), None);
        assert_eq!(cuts("a: [1,\n2]\nb: 2\n", 2), None);
        assert_eq!(cuts("\"a\": 1\nb: 2\n", 2), None);
        // A quoted or flow value running across a cut: that part does not parse.
        assert_eq!(in_parts("a: \"one\nb: two\"\nc: 3\n", 2), None);
        assert_eq!(in_parts("a: [1,\n  2\nb: 2]\n", 2), None);
        assert_eq!(in_parts("a:\n  - \"x\n  - y\"\n  - z\n", 3), None);
        // A key in two parts.
        assert_eq!(in_parts("a: 1\nb: 2\na: 3\n", 3), None);
        // Entries below a key whose value is not a list: whole, a scalar's lines.
        let scalar = format!("a: 1\nlinks: TBD\n{}", "  - [x, y]\n".repeat(40));
        assert!(matches!(
            whole(&scalar).as_mapping().unwrap().get_node("links"),
            Some(Node::Scalar(_))
        ));
        assert_eq!(in_parts(&scalar, 4), None);
        // Padding that would cost more than the text: blank lines before the cuts.
        let keys: String = (1..=10).map(|i| format!("k{i}: 1\n")).collect();
        let padded = format!("{}{keys}", "\n".repeat(60));
        let padded_cuts = cuts(&padded, 8).unwrap();
        assert!(padding(&padded, &padded_cuts) > padded.len());
        // A block scalar anywhere (an empty one before a cut would read as a newline).
        for header in ["|", ">", "|-", "|+", ">2", "|2- # kept"] {
            let text = format!("a:\n  - x: {header}\n  - y: 1\nb: 2\n");
            assert_eq!(cuts(&text, 3), None, "{header}");
        }
        // An empty entry just above a cut: its null would take its place from the end
        // of the part (the next line's start) rather than from the next entry.
        let empty = "racks:\n  - x: 1\n  -\n  - x: 2\n  - # none\n  - x: 3\n  - x: 4\n";
        for parts in 2..=4 {
            let joined = in_parts(empty, parts).expect("cut");
            assert!(same_tree(&joined, &whole(empty)), "{parts} parts");
        }
        // A lone CR, which the parser counts as a line's end.
        assert_eq!(cuts("a: 1 # x\ry: 2\nb: 2\n", 2), None);
        assert!(cuts("a: 1\r\nb: 2\r\n", 2).is_some());
        // `read_each` then gives what the whole parse gives: its error.
        let twice = format!("a: 1\nb: \"{}\"\na: 3\n", "x".repeat(PARALLEL_FROM_BYTES));
        let (Err(split), Err(alone)) = (
            read_each(0, &twice, 3, &|_, _| (), None),
            marked_yaml::parse_yaml_with_options(0, twice.as_str(), options()),
        ) else {
            panic!("a duplicate key is an error");
        };
        assert_eq!(format!("{split:?}"), format!("{alone:?}"));
    }
}
