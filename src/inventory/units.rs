//! Port speeds as admins write them.

/// Parses `100G`, `25Gbps`, `400g`, `1000M` or a bare number of Mbit/s into Mbit/s.
pub fn parse_speed_mbps(text: &str) -> Result<u64, String> {
    let err = || format!("`{text}` is not a port speed (write it like 100G, 25G, 400G or 1000M)");
    let lower = text.trim().to_ascii_lowercase();
    let without_bps = lower.strip_suffix("bps").unwrap_or(&lower);
    let (digits, scale) = match without_bps.as_bytes().last() {
        Some(b'g') => (&without_bps[..without_bps.len() - 1], 1000),
        Some(b'm') => (&without_bps[..without_bps.len() - 1], 1),
        _ => (without_bps, 1),
    };
    let value: u64 = digits.parse().map_err(|_| err())?;
    match value.checked_mul(scale) {
        Some(mbps) if mbps > 0 => Ok(mbps),
        _ => Err(err()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_in_common_spellings() {
        assert_eq!(parse_speed_mbps("100G"), Ok(100_000));
        assert_eq!(parse_speed_mbps("25Gbps"), Ok(25_000));
        assert_eq!(parse_speed_mbps("400g"), Ok(400_000));
        assert_eq!(parse_speed_mbps("1000M"), Ok(1000));
        assert_eq!(parse_speed_mbps("10000"), Ok(10_000));
        for bad in ["", "G", "fast", "0G", "-1G", "1.5G"] {
            assert!(parse_speed_mbps(bad).is_err(), "{bad} was accepted");
        }
    }
}
