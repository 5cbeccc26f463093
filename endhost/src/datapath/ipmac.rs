//! Next-hop MACs for a datapath that writes its own Ethernet headers: the `IP=MAC`
//! file (OptiReduce's `dpdk.cfg` format, rendered by `mltctl plan --host NAME
//! --ipmac`), or, without one, each peer's `next_hop_mac` from the configuration.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::Path;

use endhost_core::addr::MacAddr;
use endhost_core::config::TransportConfig;

/// Parses `IP=MAC` lines; blank lines and `#` comments are allowed. Errors name the
/// line.
pub fn parse(text: &str) -> Result<HashMap<Ipv4Addr, MacAddr>, String> {
    let mut map = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |why: String| format!("line {}: {why}", n + 1);
        let (ip, mac) = line
            .split_once('=')
            .ok_or_else(|| at(format!("`{line}` is not IP=MAC")))?;
        let ip: Ipv4Addr = ip
            .trim()
            .parse()
            .map_err(|_| at(format!("`{}` is not an IPv4 address", ip.trim())))?;
        let mac: MacAddr = mac
            .trim()
            .parse()
            .map_err(|_| at(format!("`{}` is not a MAC address", mac.trim())))?;
        if let Some(before) = map.insert(ip, mac)
            && before != mac
        {
            return Err(at(format!("{ip} is mapped to {before} and to {mac}")));
        }
    }
    Ok(map)
}

/// The MAC to put on frames to each address `config` sends to (every peer's IP and
/// path addresses). With a file, the file must have every one of them.
pub fn next_hops(
    config: &TransportConfig,
    file: Option<&Path>,
) -> Result<HashMap<Ipv4Addr, MacAddr>, String> {
    let destinations = config.peers.iter().flat_map(|peer| {
        std::iter::once((peer.ip, peer.next_hop_mac))
            .chain(peer.paths.iter().map(|&p| (p, peer.next_hop_mac)))
    });
    let Some(file) = file else {
        return Ok(destinations.collect());
    };
    let text = mlt_common::input::read_text(file, mlt_common::input::MAX_FILE_BYTES)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let map = parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut missing: Vec<String> = destinations
        .filter(|(ip, _)| !map.contains_key(ip))
        .map(|(ip, _)| ip.to_string())
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        return Err(format!(
            "{} has no MAC for {}",
            file.display(),
            missing.join(", ")
        ));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_comments_and_mistakes() {
        let map =
            parse("# peers\n10.0.0.2=02:00:00:00:00:02\n\n10.1.0.2 = 02:00:00:00:00:fe\n").unwrap();
        assert_eq!(map.len(), 2);
        assert_eq!(
            map[&"10.1.0.2".parse().unwrap()].to_string(),
            "02:00:00:00:00:fe"
        );
        assert_eq!(
            parse("10.0.0.2=02:00:00:00:00:02\n10.0.0.3\n").unwrap_err(),
            "line 2: `10.0.0.3` is not IP=MAC"
        );
        assert!(
            parse("10.0.0=02:00:00:00:00:02")
                .unwrap_err()
                .contains("IPv4")
        );
        assert!(parse("10.0.0.2=02:00:00").unwrap_err().contains("MAC"));
        assert!(
            parse("10.0.0.2=02:00:00:00:00:02\n10.0.0.2=02:00:00:00:00:03")
                .unwrap_err()
                .starts_with("line 2: 10.0.0.2 is mapped to")
        );
    }
}
