//! Port names in each vendor's own naming. They reach CLI lines and shell commands on
//! switches, so a port that breaks its vendor's form is refused, never escaped.

use crate::Vendor;

/// Checks a port name in `vendor`'s own naming; the error gives the form expected.
pub fn check_port_name(vendor: Vendor, name: &str) -> Result<(), String> {
    let (ok, form) = match vendor {
        Vendor::Sonic => (
            numbered(name, &["Ethernet"], 1),
            "EthernetN (SONiC's front-panel ports, such as Ethernet0)",
        ),
        Vendor::Eos => (
            numbered(name, &["Ethernet", "Port-Channel"], 3),
            "EthernetN, EthernetN/M or EthernetN/M/K, or Port-ChannelN",
        ),
        Vendor::Cumulus => (
            linux_port(name),
            "a Linux interface name of up to 15 letters, digits, `-`, `_` or `.` starting with a letter (such as swp1 or swp1s0)",
        ),
        Vendor::Onyx => (
            numbered(name, &["Eth"], 3) && name.contains('/'),
            "EthS/P or EthS/P/N (such as Eth1/5)",
        ),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "is not a port name in {vendor}'s naming; expected {form}"
        ))
    }
}

/// `PREFIX` followed by 1 to `parts` slash-separated numbers of at most 4 digits.
fn numbered(name: &str, prefixes: &[&str], parts: usize) -> bool {
    let Some(rest) = prefixes.iter().find_map(|p| name.strip_prefix(p)) else {
        return false;
    };
    let numbers: Vec<&str> = rest.split('/').collect();
    numbers.len() <= parts
        && numbers
            .iter()
            .all(|n| (1..=4).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Cumulus ports are Linux netdevs, and NVUE commands go through a shell: the kernel's
/// rule (under 16 bytes) on a shell-safe alphabet.
fn linux_port(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_by_vendor() {
        let cases = [
            (Vendor::Sonic, "Ethernet0", true),
            (Vendor::Sonic, "Ethernet1/1", false),
            (Vendor::Eos, "Ethernet1/1", true),
            (Vendor::Eos, "Ethernet3/1/1", true),
            (Vendor::Eos, "Port-Channel10", true),
            (Vendor::Eos, "Ethernet1\nusername x privilege 15", false),
            (Vendor::Eos, "Ethernet", false),
            (Vendor::Cumulus, "swp1", true),
            (Vendor::Cumulus, "swp1s0", true),
            (Vendor::Cumulus, "swp1;reboot", false),
            (Vendor::Cumulus, "averyveryverylongname", false),
            (Vendor::Onyx, "Eth1/5", true),
            (Vendor::Onyx, "Eth1/1/2", true),
            (Vendor::Onyx, "Eth1", false),
            (Vendor::Onyx, "Ethernet1/5", false),
        ];
        for (vendor, name, ok) in cases {
            assert_eq!(
                check_port_name(vendor, name).is_ok(),
                ok,
                "{vendor} {name:?}"
            );
        }
    }
}
