//! Command lines for a POSIX shell on a device or host, built so that a value can never
//! become code: every value is one quoted word, and the only unquoted text is written
//! into mltctl's source (`&'static str`). Every remote command mltctl sends goes through
//! [`ShellCommand`]; the push drivers and the host steps have no other way to exec.

use std::fmt;

/// One command line for `sh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand(String);

impl ShellCommand {
    /// Starts a command with fixed code: a program and any fixed flags.
    pub fn new(code: &'static str) -> ShellCommand {
        ShellCommand(code.to_string())
    }

    /// Starts a command whose program is a value, such as an uploaded binary's path.
    pub fn program(path: impl AsRef<str>) -> ShellCommand {
        ShellCommand(quote(path.as_ref()))
    }

    /// Appends fixed code (a flag, a redirection, an operator).
    pub fn code(mut self, code: &'static str) -> ShellCommand {
        self.0.push(' ');
        self.0.push_str(code);
        self
    }

    /// Appends `value` as one word, quoted where it needs to be.
    pub fn arg(mut self, value: impl AsRef<str>) -> ShellCommand {
        self.0.push(' ');
        self.0.push_str(&quote(value.as_ref()));
        self
    }

    /// `self && next`: `next` runs only if `self` succeeded.
    pub fn and(mut self, next: ShellCommand) -> ShellCommand {
        self.0.push_str(" && ");
        self.0.push_str(&next.0);
        self
    }

    /// `self; next`: `next` runs whatever `self` did.
    pub fn then(mut self, next: ShellCommand) -> ShellCommand {
        self.0.push_str("; ");
        self.0.push_str(&next.0);
        self
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShellCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `s` as one word for a POSIX shell: as it is when it holds only characters no shell
/// treats specially, else in single quotes.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:=@%+,".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(quote("/var/lib/mltctl/h1.json"), "/var/lib/mltctl/h1.json");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote(""), "''");
    }

    /// What `sh` makes of the command: each word it passes to printf.
    fn words(command: &ShellCommand) -> Vec<String> {
        let out = Command::new("sh")
            .arg("-c")
            .arg(command.as_str())
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{command}: {out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .split('\0')
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn hostile_values_stay_one_word() {
        let hostile = [
            "x; touch /tmp/mltctl-pwned",
            "$(id)",
            "`id`",
            "a'b\"c",
            "line\nbreak",
            "-rf",
            "* ?",
            "\\",
        ];
        for value in hostile {
            let command = ShellCommand::new("printf '%s\\0'").arg(value);
            assert_eq!(words(&command), [value], "{command}");
        }
        let chained = ShellCommand::new("printf '%s\\0'")
            .arg("a;b")
            .and(ShellCommand::new("printf '%s\\0'").arg("$(c)"))
            .then(ShellCommand::new("printf '%s\\0'").arg("d&&e"));
        assert_eq!(words(&chained), ["a;b", "$(c)", "d&&e"]);
    }
}
