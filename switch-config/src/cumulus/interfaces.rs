//! NVUE interface id lists, as `nv config show -o commands` folds them: `swp1-2,32`
//! (a number alone reuses the name before it), `lo,swp51-54,vlan10,20,30`,
//! `swp1-64,swp1s0-3` (breakout ports keep their own name).

/// Whether the id list `list` names `port`. Nothing is expanded, so a list from a
/// device costs its own length whatever ranges it holds.
pub(super) fn covers(list: &str, port: &str) -> bool {
    let (port_name, port_number) = split(port);
    let port_number = port_number.parse::<u64>().ok();
    let mut name = "";
    list.split(',').any(|part| {
        let (part_name, numbers) = split(part);
        if !part_name.is_empty() {
            name = part_name;
        }
        if numbers.is_empty() {
            return part == port;
        }
        let (low, high) = numbers.split_once('-').unwrap_or((numbers, numbers));
        match (low.parse::<u64>(), high.parse::<u64>(), port_number) {
            (Ok(low), Ok(high), Some(n)) => name == port_name && (low..=high).contains(&n),
            _ => false,
        }
    })
}

/// `swp1s0-3` → (`swp1s`, `0-3`): the name and the trailing numbers or range.
fn split(id: &str) -> (&str, &str) {
    let at = id
        .rfind(|c: char| !(c.is_ascii_digit() || c == '-'))
        .map_or(0, |i| i + 1);
    id.split_at(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_lists_name_their_members() {
        assert!(covers("swp31-32", "swp31"));
        assert!(covers("swp1-2,32", "swp32"));
        assert!(!covers("swp1-2,32", "swp3"));
        assert!(covers("lo,swp51-54,vlan10,20,30", "vlan20"));
        assert!(!covers("lo,swp51-54,vlan10,20,30", "swp20"));
        assert!(covers("swp1-64,swp1s0-3", "swp1s2"));
        assert!(!covers("swp1-64,swp1s0-3", "swp1s4"));
        assert!(covers("lo,bond1", "lo"));
        assert!(!covers("swp31", "swp3"));
        assert!(!covers("swp1-18446744073709551616", "swp2"));
    }
}
