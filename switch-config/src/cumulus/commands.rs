//! Splits `nv config show -o commands` output into commands.
//!
//! NVUE quotes a value the shell way, and a value may span lines (a snippet's
//! `content '…'` holds a whole file), so a command ends at a newline outside quotes,
//! not at every newline.

/// One command and the line it starts on (1-based).
pub(super) struct Command<'a> {
    pub line: usize,
    pub text: &'a str,
}

/// The commands of `text`, or the line of a quote that never closes.
pub(super) fn commands(text: &str) -> Result<Vec<Command<'_>>, usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut found = Vec::new();
    let mut quote = Quote::None;
    let mut escaped = false;
    let mut start = 0;
    let mut start_line = 1;
    let mut line = 1;
    let mut quote_line = 1;
    for (at, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else {
            match (quote, c) {
                (Quote::None | Quote::Double, '\\') => escaped = true,
                (Quote::None, '\'') => (quote, quote_line) = (Quote::Single, line),
                (Quote::None, '"') => (quote, quote_line) = (Quote::Double, line),
                (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::None,
                (Quote::None, '\n') => {
                    found.push(Command {
                        line: start_line,
                        text: &text[start..at],
                    });
                    start = at + 1;
                    start_line = line + 1;
                }
                _ => {}
            }
        }
        if c == '\n' {
            line += 1;
        }
    }
    if quote != Quote::None {
        return Err(quote_line);
    }
    if start < text.len() {
        found.push(Command {
            line: start_line,
            text: &text[start..],
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<(usize, &str)> {
        commands(text)
            .unwrap()
            .into_iter()
            .map(|c| (c.line, c.text))
            .collect()
    }

    #[test]
    fn a_quoted_value_keeps_its_newlines() {
        let text = "nv set a\nnv set snippet content 'x\ny \"q\"\n'\nnv set b 'it'\\''s'\nnv set c";
        assert_eq!(
            split(text),
            [
                (1, "nv set a"),
                (2, "nv set snippet content 'x\ny \"q\"\n'"),
                (5, "nv set b 'it'\\''s'"),
                (6, "nv set c"),
            ]
        );
    }

    #[test]
    fn double_quotes_and_escaped_newlines_join_lines() {
        assert_eq!(
            split("nv set d \"a\\\"\nb\"\nnv set e x\\\ny\n"),
            [(1, "nv set d \"a\\\"\nb\""), (3, "nv set e x\\\ny")]
        );
    }

    #[test]
    fn an_open_quote_is_reported_where_it_opens() {
        assert_eq!(commands("nv set a\nnv set b 'x\ny\n").err(), Some(2));
    }
}
