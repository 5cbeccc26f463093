//! Text shown to a person or written to the journal: secrets recognised and removed,
//! control characters made visible. Messages quote what was wrong with an input, and
//! the input may be a key pasted into the wrong field or a device's error output, so
//! every message passes through [`clean`] before it is printed or recorded.

/// What replaces a value that looks like key material.
pub const REDACTED: &str = "[redacted: looks like a key or password hash]";

/// `text` with every word that looks like key material replaced, everything from a PEM
/// or OpenSSH key header on removed, and control characters (ANSI escapes, newlines
/// inside a one-line message) shown as escapes.
pub fn clean(text: &str) -> String {
    let (text, cut) = match text.find("-----BEGIN") {
        Some(at) => (&text[..at], true),
        None => (text, false),
    };
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if looks_secret(word) {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() || "`'\"(),;".contains(c) {
            flush(&mut word, &mut out);
            match c {
                '\n' | '\t' | ' ' => out.push(c),
                c if c.is_control() => out.extend(c.escape_default()),
                c => out.push(c),
            }
        } else if c.is_control() {
            word.extend(c.escape_default());
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    if cut {
        out.push_str(REDACTED);
    }
    out
}

/// `value` for a one-line message: quoted with backticks, control characters escaped,
/// cut after 80 characters, or redacted when it looks like key material.
pub fn shown(value: &str) -> String {
    if looks_secret(value) || value.contains("-----BEGIN") {
        return REDACTED.to_string();
    }
    let escaped: String = value.chars().flat_map(char::escape_default).collect();
    match escaped.char_indices().nth(80) {
        Some((cut, _)) => format!("`{}…`", &escaped[..cut]),
        None => format!("`{escaped}`"),
    }
}

/// `text` on one line: control characters (newlines among them) shown as escapes, key
/// material redacted; for errors that name an item as written.
pub fn one_line(text: &str) -> String {
    clean(text)
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// Whether one word looks like a secret: key headers, crypt(3) password hashes, and
/// long base64 runs that mix letters and digits as keys and tokens do.
pub fn looks_secret(word: &str) -> bool {
    if word.contains("PRIVATE KEY") || word.contains("-----BEGIN") {
        return true;
    }
    // A host key's fingerprint, as OpenSSH prints it, is public and is what an admin
    // checks a new key by.
    if let Some(digest) = word.strip_prefix("SHA256:")
        && digest.len() == 43
        && digest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    {
        return false;
    }
    let hash_prefixes = [
        "$1$", "$2a$", "$2b$", "$2y$", "$5$", "$6$", "$y$", "$gy$", "$7$",
    ];
    if hash_prefixes.iter().any(|p| word.contains(p)) {
        return true;
    }
    let run = word
        .split(|c: char| !(c.is_ascii_alphanumeric() || "+/=".contains(c)))
        .max_by_key(|run| run.len())
        .unwrap_or("");
    run.len() >= 32
        && run.bytes().any(|b| b.is_ascii_digit())
        && run.bytes().any(|b| b.is_ascii_uppercase())
        && run.bytes().any(|b| b.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----";

    #[test]
    fn a_host_key_fingerprint_is_shown() {
        let fingerprint = "SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s";
        assert_eq!(
            clean(&format!("key ({fingerprint})")),
            format!("key ({fingerprint})")
        );
        let longer = format!("{fingerprint}Q8m0W3pVt7Ll9aQkJcXyZr0Tt5aZ1");
        assert!(clean(&longer).contains(REDACTED));
    }

    #[test]
    fn keys_and_hashes_are_redacted() {
        let message = format!("`{KEY}` is not an environment variable name");
        let cleaned = clean(&message);
        assert!(!cleaned.contains("b3BlbnNzaC1"), "{cleaned}");
        assert!(cleaned.contains(REDACTED));
        let shadow = "root:$6$Zx9kq1$Q8m0W3pVt7Ll9aQkJcXyZr0Tt/5aZ1.:19700:0:99999:7:::";
        assert!(!clean(&format!("line 1: {shadow}")).contains("Q8m0W3"));
        let token = "ghp_1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX";
        assert_eq!(
            clean(&format!("token {token}")),
            format!("token {REDACTED}")
        );
        assert_eq!(shown(KEY), REDACTED);
    }

    #[test]
    fn ordinary_words_and_control_characters() {
        assert_eq!(
            clean("host leaf1 (10.0.0.1:22): Ethernet1/1 refused"),
            "host leaf1 (10.0.0.1:22): Ethernet1/1 refused"
        );
        assert_eq!(clean("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(shown("leaf\nusername x"), "`leaf\\nusername x`");
        assert!(shown(&"a".repeat(200)).ends_with("…`"));
    }
}
