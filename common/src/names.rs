//! What things may be called. Names are data that end up in file names, CLI lines and
//! shell commands on devices and hosts, so they are held to a small grammar and checked
//! before anything is planned: a name that breaks it is refused, never escaped.

/// The longest switch, host, rack or fabric name.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a switch, host, rack or fabric name: 1 to [`MAX_NAME_LEN`] letters, digits,
/// `-`, `_` or `.`, starting with a letter or digit (so never `.`, `..` or an option).
/// The error says which rule is broken.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("must be 1 to {MAX_NAME_LEN} characters long"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err("must start with a letter or a digit".into());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err("may hold only letters, digits, `-`, `_` and `.`".into());
    }
    Ok(())
}

/// Checks a Linux interface name by the kernel's rule (`dev_valid_name`: under
/// IFNAMSIZ = 16 bytes, not `.` or `..`, no `/`, `:` or whitespace), on printable ASCII,
/// less what a DPDK devargs string gives meaning to (`,` and `=` separate arguments,
/// brackets hold lists): the name goes into a `--vdev`.
pub fn check_ifname(name: &str) -> Result<(), &'static str> {
    if !(1..16).contains(&name.len()) {
        return Err("must be 1 to 15 characters long (IFNAMSIZ)");
    }
    if name == "." || name == ".." {
        return Err("cannot be `.` or `..`");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_graphic() && !b"/:,=[]".contains(&b))
    {
        return Err(
            "may hold only printable characters other than `/`, `:`, `,`, `=`, brackets and spaces",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_a_safe_alphabet() {
        for ok in ["leaf1", "spine-1", "r1.dc2", "h_01", "1u", &"a".repeat(64)] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../etc",
            "./x",
            "-rf",
            "a b",
            "a;b",
            "$(id)",
            "a/b",
            "a\nb",
            "é",
            &"a".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn interface_names_by_the_kernels_rule_without_devargs_characters() {
        for ok in ["eth0", "ens1f0", "swp1s0", "veth-a.1", "mgmt0@x"] {
            assert_eq!(check_ifname(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a:b",
            "a b",
            "a,b",
            "a=b",
            "a[0]",
            "abcdefghijklmnop",
        ] {
            assert!(check_ifname(bad).is_err(), "{bad:?}");
        }
    }
}
