//! Changes folded for a person to read: lines that differ only in one number and make
//! the same change become one line with a number list (`DSCP 0-7,9-15 traffic class:
//! 1 -> 0` for sixteen lines), in numeric order, not text order. Programs get the full
//! list; this is only how it is shown.

use std::collections::HashMap;
use std::fmt::Write;

use crate::ChangeLine;

/// A piece of an item's name: text, or a number that may vary between folded lines.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Token {
    Text(String),
    Numbers(Vec<u32>),
}

/// One line being folded.
struct Line {
    tokens: Vec<Token>,
    from: Option<String>,
    to: Option<String>,
    dscp_map: bool,
}

/// `lines` folded: each run of equal changes to items that differ in one number becomes
/// one line, lines of one kind of item in numeric order, kinds in the order they came.
pub fn fold(lines: &[ChangeLine]) -> Vec<ChangeLine> {
    let mut family_order: HashMap<String, usize> = HashMap::new();
    let mut folded: Vec<Line> = lines
        .iter()
        .map(|line| Line {
            tokens: tokens(&line.item),
            from: line.from.clone(),
            to: line.to.clone(),
            dscp_map: line.dscp_map,
        })
        .collect();
    for line in &folded {
        let next = family_order.len();
        family_order.entry(family(&line.tokens)).or_insert(next);
    }
    folded.sort_by(|a, b| {
        family_order[&family(&a.tokens)]
            .cmp(&family_order[&family(&b.tokens)])
            .then_with(|| natural(&a.tokens, &b.tokens))
    });
    let most = folded
        .iter()
        .map(|l| numbers_in(&l.tokens))
        .max()
        .unwrap_or(0);
    // The last number first: `QUEUE|Ethernet0|1-7` before `QUEUE|Ethernet0,4|1-7`.
    for from_end in 0..most {
        folded = fold_at(folded, from_end);
    }
    folded
        .into_iter()
        .map(|line| ChangeLine {
            item: line.tokens.iter().map(token_text).collect(),
            from: line.from,
            to: line.to,
            dscp_map: line.dscp_map,
        })
        .collect()
}

/// Merges lines equal in everything but their `from_end`-th number from the end; the
/// merged line stands where the first of them stood.
fn fold_at(lines: Vec<Line>, from_end: usize) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::with_capacity(lines.len());
    let mut index_of: HashMap<String, usize> = HashMap::new();
    for line in lines {
        let Some(at) = position(&line.tokens, from_end) else {
            out.push(line);
            continue;
        };
        let mut key = String::new();
        for (i, token) in line.tokens.iter().enumerate() {
            if i == at {
                key.push('\u{0}');
            } else {
                key.push_str(&token_text(token));
            }
            key.push('\u{1}');
        }
        let _ = write!(key, "{:?}{:?}{}", line.from, line.to, line.dscp_map);
        match index_of.get(&key) {
            Some(&first) => {
                let Token::Numbers(more) = &line.tokens[at] else {
                    unreachable!("position() only finds numbers")
                };
                if let Token::Numbers(numbers) = &mut out[first].tokens[at] {
                    numbers.extend(more);
                    numbers.sort_unstable();
                    numbers.dedup();
                }
            }
            None => {
                index_of.insert(key, out.len());
                out.push(line);
            }
        }
    }
    out
}

/// Splits an item's name into text and foldable numbers: digit runs that are not part
/// of an address, a prefix length, a port name like `Ethernet1/1`, a range or list the
/// switch already wrote (`Ethernet0|0-7`) or a zero-padded code.
fn tokens(item: &str) -> Vec<Token> {
    let chars: Vec<char> = item.chars().collect();
    let mut out = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let run: String = chars[start..i].iter().collect();
            let joined = |c: Option<&char>| c.is_some_and(|c| ".:/-,".contains(*c));
            let padded = run.len() > 1 && run.starts_with('0');
            match run.parse::<u32>() {
                Ok(n)
                    if !padded
                        && !joined(start.checked_sub(1).map(|p| &chars[p]))
                        && !joined(chars.get(i)) =>
                {
                    if !text.is_empty() {
                        out.push(Token::Text(std::mem::take(&mut text)));
                    }
                    out.push(Token::Numbers(vec![n]));
                }
                _ => text.push_str(&run),
            }
        } else {
            text.push(chars[i]);
            i += 1;
        }
    }
    if !text.is_empty() {
        out.push(Token::Text(text));
    }
    out
}

/// The item's name up to its first number: what kind of item it is.
fn family(tokens: &[Token]) -> String {
    match tokens.first() {
        Some(Token::Text(text)) => text.clone(),
        _ => String::new(),
    }
}

fn numbers_in(tokens: &[Token]) -> usize {
    tokens
        .iter()
        .filter(|t| matches!(t, Token::Numbers(_)))
        .count()
}

/// The index of the `from_end`-th number from the end.
fn position(tokens: &[Token], from_end: usize) -> Option<usize> {
    tokens
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, t)| matches!(t, Token::Numbers(_)))
        .nth(from_end)
        .map(|(i, _)| i)
}

/// Text compares as text, numbers as numbers.
fn natural(a: &[Token], b: &[Token]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let order = match (x, y) {
            (Token::Numbers(x), Token::Numbers(y)) => x.cmp(y),
            (Token::Text(x), Token::Text(y)) => x.cmp(y),
            (Token::Numbers(_), Token::Text(_)) => std::cmp::Ordering::Less,
            (Token::Text(_), Token::Numbers(_)) => std::cmp::Ordering::Greater,
        };
        if order.is_ne() {
            return order;
        }
    }
    a.len().cmp(&b.len())
}

/// `0-7,9,11-15`.
fn token_text(token: &Token) -> String {
    match token {
        Token::Text(text) => text.clone(),
        Token::Numbers(numbers) => crate::text::ranges(numbers).join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(item: &str, from: Option<&str>, to: Option<&str>) -> ChangeLine {
        ChangeLine {
            item: item.into(),
            from: from.map(String::from),
            to: to.map(String::from),
            dscp_map: false,
        }
    }

    fn shown(lines: &[ChangeLine]) -> Vec<String> {
        fold(lines).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn equal_changes_fold_into_number_lists_in_numeric_order() {
        // Text order, as a map keyed by strings gives it.
        let mut lines: Vec<ChangeLine> = (0..24)
            .map(|d| d.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|d| {
                let to = if d == "8" || d == "16" { "7" } else { "0" };
                line(&format!("DSCP_TO_TC_MAP|MLT {d}"), None, Some(to))
            })
            .collect();
        lines.insert(0, line("DSCP_TO_TC_MAP|MLT", None, Some("present")));
        assert_eq!(
            shown(&lines),
            [
                "+ DSCP_TO_TC_MAP|MLT: present",
                "+ DSCP_TO_TC_MAP|MLT 0-7,9-15,17-23: 0",
                "+ DSCP_TO_TC_MAP|MLT 8,16: 7",
            ]
        );
    }

    #[test]
    fn different_changes_stay_apart_and_kinds_keep_their_order() {
        let lines = [
            line("tx-queue 2 ECN", None, Some("9216 bytes")),
            line("tx-queue 1 ECN", None, Some("18432 bytes")),
            line("tx-queue 10 ECN", None, Some("9216 bytes")),
            line("DSCP 3 traffic class", Some("1"), Some("0")),
            line("DSCP 2 traffic class", Some("2"), Some("0")),
        ];
        assert_eq!(
            shown(&lines),
            [
                "+ tx-queue 1 ECN: 18432 bytes",
                "+ tx-queue 2,10 ECN: 9216 bytes",
                "~ DSCP 2 traffic class: 2 -> 0",
                "~ DSCP 3 traffic class: 1 -> 0",
            ]
        );
    }

    #[test]
    fn a_second_number_folds_after_the_last() {
        let mut lines = Vec::new();
        for port in [4, 0] {
            for queue in 1..=3 {
                lines.push(line(
                    &format!("QUEUE|Ethernet{port}|{queue} scheduler"),
                    None,
                    Some("MLT_STRICT"),
                ));
                lines.push(line(
                    &format!("QUEUE|Ethernet{port}|{queue} wred_profile"),
                    None,
                    Some(&format!("MLT_Q{queue}")),
                ));
            }
        }
        assert_eq!(
            shown(&lines),
            [
                "+ QUEUE|Ethernet0,4|1-3 scheduler: MLT_STRICT",
                "+ QUEUE|Ethernet0,4|1 wred_profile: MLT_Q1",
                "+ QUEUE|Ethernet0,4|2 wred_profile: MLT_Q2",
                "+ QUEUE|Ethernet0,4|3 wred_profile: MLT_Q3",
            ]
        );
    }

    #[test]
    fn addresses_port_names_and_padded_codes_never_fold() {
        let lines = [
            line("route 10.1.1.0/24", None, Some("via 172.16.0.3")),
            line("route 10.1.2.0/24", None, Some("via 172.16.0.3")),
            line("interface Ethernet1/1 service-profile", None, Some("MLT")),
            line("interface Ethernet2/1 service-profile", None, Some("MLT")),
            line("code 07", None, Some("x")),
            line("code 08", None, Some("x")),
            line("BUFFER_QUEUE|Ethernet0|0-7", Some("shared"), None),
            line("BUFFER_QUEUE|Ethernet0|1-7", Some("shared"), None),
        ];
        assert_eq!(fold(&lines).len(), lines.len());
        let all: Vec<String> = fold(&lines).iter().map(|l| l.item.clone()).collect();
        for l in &lines {
            assert!(all.contains(&l.item), "{all:?}");
        }
    }
}
