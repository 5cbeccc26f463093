//! The routes a lab switch runs: read from its running configuration in the vendor's
//! own syntax (independently of mltctl's parsers) for the forwarder
//! ([`super::forwarder`]), and kept in the kernel of the switch's network namespace
//! after every command it runs (under its lock, protocol `static`), so that what the
//! switch sends itself — and `lab status` — follows them too.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use ipnet::Ipv4Net;

/// A static route a switch runs: to next hops (several: ECMP), or discarded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    pub prefix: Ipv4Net,
    pub next_hops: BTreeSet<Ipv4Addr>,
    pub discard: bool,
}

/// The static routes of a running configuration of `vendor`.
pub fn running_routes(vendor: &str, running: &str) -> Vec<Route> {
    let mut routes: BTreeMap<Ipv4Net, Route> = BTreeMap::new();
    let mut add = |prefix: Ipv4Net, hop: Hop| {
        let route = routes.entry(prefix.trunc()).or_insert_with(|| Route {
            prefix: prefix.trunc(),
            next_hops: BTreeSet::new(),
            discard: false,
        });
        match hop {
            Hop::Via(address) => {
                route.next_hops.insert(address);
            }
            Hop::Discard => route.discard = true,
        }
    };
    match vendor {
        "sonic" => {
            let Ok(db) = serde_json::from_str::<serde_json::Value>(running) else {
                return Vec::new();
            };
            let Some(table) = db.get("STATIC_ROUTE").and_then(|t| t.as_object()) else {
                return Vec::new();
            };
            for (key, fields) in table {
                // `vrf|prefix` or `prefix`, in the default VRF only.
                let prefix = match key.split_once('|') {
                    Some(("default", p)) => p,
                    Some(_) => continue,
                    None => key.as_str(),
                };
                let Ok(prefix) = prefix.parse() else { continue };
                let list = |name: &str| -> Vec<String> {
                    fields
                        .get(name)
                        .and_then(|v| v.as_str())
                        .map(|s| s.split(',').map(|w| w.trim().to_string()).collect())
                        .unwrap_or_default()
                };
                let (hops, blackholes) = (list("nexthop"), list("blackhole"));
                for (i, hop) in hops.iter().enumerate() {
                    if blackholes.get(i).is_some_and(|b| b == "true") {
                        add(prefix, Hop::Discard);
                    } else if let Ok(address) = hop.parse() {
                        add(prefix, Hop::Via(address));
                    }
                }
                if hops.is_empty() && blackholes.iter().any(|b| b == "true") {
                    add(prefix, Hop::Discard);
                }
            }
        }
        "eos" | "onyx" => {
            for line in running.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                // `ip route [vrf default] P/L HOP`; Onyx also `A /L HOP` (and prints the
                // VRF).
                let rest = match words.as_slice() {
                    ["ip", "route", "vrf", "default", rest @ ..] => rest,
                    ["ip", "route", "vrf", ..] => continue,
                    ["ip", "route", rest @ ..] => rest,
                    _ => continue,
                };
                let (prefix, hop) = match rest {
                    [prefix, hop] => (prefix.to_string(), *hop),
                    [address, length, hop] if length.starts_with('/') => {
                        (format!("{address}{length}"), *hop)
                    }
                    _ => continue,
                };
                let Ok(prefix) = prefix.parse() else { continue };
                if hop.eq_ignore_ascii_case("null0") {
                    add(prefix, Hop::Discard);
                } else if let Ok(address) = hop.parse() {
                    add(prefix, Hop::Via(address));
                }
            }
        }
        "cumulus" => {
            for line in running.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let [
                    "nv",
                    "set",
                    "vrf",
                    "default",
                    "router",
                    "static",
                    prefix,
                    "via",
                    hop,
                    ..,
                ] = words.as_slice()
                {
                    let Ok(prefix) = prefix.parse() else { continue };
                    if *hop == "blackhole" {
                        add(prefix, Hop::Discard);
                    } else if let Ok(address) = hop.parse() {
                        add(prefix, Hop::Via(address));
                    }
                }
            }
        }
        _ => {}
    }
    routes.into_values().collect()
}

enum Hop {
    Via(Ipv4Addr),
    Discard,
}

/// Makes this network namespace's kernel hold exactly `routes` as its static routes.
pub fn install(routes: &[Route]) -> Result<(), String> {
    let shown = Command::new("ip")
        .args(["-4", "-j", "route", "show", "proto", "static"])
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if !shown.status.success() {
        return Err(format!(
            "ip route show: {}",
            String::from_utf8_lossy(&shown.stderr).trim()
        ));
    }
    let present: Vec<serde_json::Value> = serde_json::from_slice(&shown.stdout)
        .map_err(|e| format!("ip route show printed no JSON: {e}"))?;
    let wanted: BTreeSet<String> = routes.iter().map(|r| r.prefix.to_string()).collect();
    let mut batch = String::new();
    for route in present {
        let Some(dst) = route["dst"].as_str() else {
            continue;
        };
        let dst = match dst {
            "default" => "0.0.0.0/0".to_string(),
            d if d.contains('/') => d.to_string(),
            d => format!("{d}/32"),
        };
        if !wanted.contains(&dst) {
            batch.push_str(&format!("route del {dst} proto static\n"));
        }
    }
    for route in routes {
        let prefix = route.prefix;
        if route.discard || route.next_hops.is_empty() {
            batch.push_str(&format!("route replace blackhole {prefix} proto static\n"));
            continue;
        }
        let hops: Vec<String> = route
            .next_hops
            .iter()
            .map(|h| format!("nexthop via {h}"))
            .collect();
        batch.push_str(&format!(
            "route replace {prefix} proto static {}\n",
            hops.join(" ")
        ));
    }
    if batch.is_empty() {
        return Ok(());
    }
    // -force: a route whose next hop is not reachable yet fails alone.
    let mut child = Command::new("ip")
        .args(["-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(batch.as_bytes())
            .map_err(|e| format!("cannot write to ip: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("ip did not finish: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(routes: &[Route]) -> Vec<String> {
        routes
            .iter()
            .map(|r| {
                let hops: Vec<String> = r.next_hops.iter().map(|h| h.to_string()).collect();
                match r.discard {
                    true => format!("{} discard", r.prefix),
                    false => format!("{} via {}", r.prefix, hops.join(",")),
                }
            })
            .collect()
    }

    #[test]
    fn every_vendor_s_static_routes_are_read_in_its_own_syntax() {
        let eos = "hostname s\nip route 10.1.1.0/24 172.16.0.3\nip route 10.200.0.8/30 Null0\n";
        assert_eq!(
            shown(&running_routes("eos", eos)),
            ["10.1.1.0/24 via 172.16.0.3", "10.200.0.8/30 discard"]
        );
        let onyx = "   ip route vrf default 10.1.1.0/24 172.16.0.4\nip route 10.1.1.0 /24 172.16.0.6\n\
                    ip route 10.200.0.4 /30 null0\nip route vrf mgmt 0.0.0.0/0 192.0.2.1\n";
        assert_eq!(
            shown(&running_routes("onyx", onyx)),
            [
                "10.1.1.0/24 via 172.16.0.4,172.16.0.6",
                "10.200.0.4/30 discard"
            ]
        );
        let nvue = "nv set vrf default router static 10.1.2.0/24 address-family ipv4-unicast\n\
                    nv set vrf default router static 10.1.2.0/24 via 172.16.0.0 type ipv4-address\n\
                    nv set vrf default router static 10.1.2.0/24 via 172.16.0.2 type ipv4-address\n\
                    nv set vrf default router static 10.200.0.0/30 via blackhole type blackhole\n\
                    nv set vrf mgmt router static 0.0.0.0/0 via 192.0.2.1 type ipv4-address\n";
        assert_eq!(
            shown(&running_routes("cumulus", nvue)),
            [
                "10.1.2.0/24 via 172.16.0.0,172.16.0.2",
                "10.200.0.0/30 discard"
            ]
        );
        let sonic = r#"{"STATIC_ROUTE": {
            "default|10.1.1.0/24": {"nexthop": "172.16.0.1,172.16.0.3"},
            "10.200.0.0/30": {"nexthop": "", "blackhole": "true"},
            "mgmt|0.0.0.0/0": {"nexthop": "192.0.2.1"}}}"#;
        assert_eq!(
            shown(&running_routes("sonic", sonic)),
            [
                "10.1.1.0/24 via 172.16.0.1,172.16.0.3",
                "10.200.0.0/30 discard"
            ]
        );
    }
}
