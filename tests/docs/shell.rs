//! The `mltctl` and `endhost` invocations in a shell block: enough of the shell's
//! grammar to find them (quotes, comments, line continuations, `;`, `&&`, `||`, `|`,
//! `&`, redirections, `for … do … done`, `VAR=value`, `ip netns exec NS`, `sh -c`).

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    /// A control operator or a redirection.
    Op(String),
}

fn lex(script: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("an unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(c) => w.push(c),
                        None => return Err("an unclosed double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(c) => word.get_or_insert_with(String::new).push(c),
            },
            '#' if word.is_none() => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            ';' | '&' | '|' | '>' | '<' | '\n' => {
                // `2>` is one redirection, not a word 2.
                let descriptor = matches!(c, '>' | '<')
                    && word
                        .as_deref()
                        .is_some_and(|w| w.chars().all(|d| d.is_ascii_digit()));
                if descriptor {
                    word = None;
                }
                tokens.extend(word.take().map(Token::Word));
                let mut op = c.to_string();
                if chars.peek() == Some(&c) && c != '\n' && c != ';' {
                    op.push(c);
                    chars.next();
                }
                tokens.push(Token::Op(op));
            }
            c if c.is_whitespace() => tokens.extend(word.take().map(Token::Word)),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    tokens.extend(word.take().map(Token::Word));
    Ok(tokens)
}

/// The simple commands of `script`, as words, redirections left out.
fn simple_commands(script: &str) -> Result<Vec<Vec<String>>, String> {
    let mut commands = Vec::new();
    let mut current = Vec::new();
    let mut redirect = false;
    for token in lex(script)? {
        match token {
            Token::Op(op) if op.starts_with(['>', '<']) => redirect = true,
            Token::Op(_) => commands.push(std::mem::take(&mut current)),
            Token::Word(_) if redirect => redirect = false,
            Token::Word(word) => current.push(word),
        }
    }
    commands.push(current);
    commands.retain(|c| !c.is_empty());
    Ok(commands)
}

/// A documented invocation: which binary, and its arguments.
#[derive(Debug)]
pub struct Invocation {
    pub binary: &'static str,
    pub args: Vec<String>,
}

/// Every `mltctl` and `endhost` invocation in `script`, however it is started.
pub fn invocations(script: &str) -> Result<Vec<Invocation>, String> {
    let mut found = Vec::new();
    for mut words in simple_commands(script)? {
        loop {
            let first = words.first().map(String::as_str).unwrap_or("");
            let strip = match first {
                "do" | "then" | "else" | "time" | "exec" | "env" => 1,
                "sudo" if words.get(1).is_some_and(|w| w == "-E") => 2,
                "sudo" => 1,
                "timeout" => 2,
                "ip" if words.get(1).is_some_and(|w| w == "netns")
                    && words.get(2).is_some_and(|w| w == "exec") =>
                {
                    4
                }
                "sh" | "bash" if words.get(1).is_some_and(|w| w == "-c") => {
                    let inner = words.get(2).cloned().unwrap_or_default();
                    found.extend(invocations(&inner)?);
                    words.len()
                }
                w if w.contains('=') && !w.starts_with('-') => 1,
                _ => 0,
            };
            if strip == 0 {
                break;
            }
            words.drain(..strip.min(words.len()));
        }
        let Some(program) = words.first() else {
            continue;
        };
        let binary = match program.rsplit('/').next() {
            Some("mltctl") => "mltctl",
            Some("endhost") => "endhost",
            _ => continue,
        };
        found.push(Invocation {
            binary,
            args: words[1..].to_vec(),
        });
    }
    Ok(found)
}

#[test]
fn the_shell_reader_finds_every_invocation() {
    let script = "cargo build && export PATH=$PWD:$PATH\n\
        mltctl lab up --dir /tmp/x   # a comment with mltctl in it\n\
        for h in h1 h2; do\n  ip netns exec lab-$h endhost allreduce --socket \"/tmp/$h.sock\" &\n\
        done; wait\n\
        A=1 target/release/mltctl plan -i f.yaml > out.json 2>&1\n\
        ip netns exec n sh -c \". env && \\\n  torchrun x.py\" &\n\
        mltctl confirm --limit 'leaf*' | head\n\
        sudo -E env A=1 timeout 60 endhost status --socket s";
    let got: Vec<String> = invocations(script)
        .unwrap()
        .into_iter()
        .map(|i| format!("{} {}", i.binary, i.args.join(" ")))
        .collect();
    assert_eq!(
        got,
        [
            "mltctl lab up --dir /tmp/x",
            "endhost allreduce --socket /tmp/$h.sock",
            "mltctl plan -i f.yaml",
            "mltctl confirm --limit leaf*",
            "endhost status --socket s",
        ]
    );
}
