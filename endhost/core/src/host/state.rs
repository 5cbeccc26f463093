//! The difference between what a host's kernel has and what its plan wants, as a list
//! of changes the agent can apply and undo. Pure: no netlink here.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::plan::HostNetworkPlan;
use crate::addr::MacAddr;

/// The data NIC's state as read from the kernel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub mtu: u16,
    pub mac: Option<MacAddr>,
    pub addresses: Vec<ObservedAddress>,
    pub neighbours: Vec<ObservedNeighbour>,
    /// IPv4 routes of the main table.
    pub routes: Vec<ObservedRoute>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObservedAddress {
    pub net: Ipv4Net,
    /// Carries the agent's protocol number.
    pub ours: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObservedNeighbour {
    pub ip: Ipv4Addr,
    pub mac: Option<MacAddr>,
    /// NUD_PERMANENT: configured by someone, not learned by ARP.
    pub permanent: bool,
    pub ours: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObservedRoute {
    pub prefix: Ipv4Net,
    pub via: Option<Ipv4Addr>,
    pub ours: bool,
}

/// One change to the host, in the order the agent applies them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Change {
    SetMtu {
        from: u16,
        to: u16,
    },
    AddAddress {
        net: Ipv4Net,
    },
    /// Add or replace a static neighbour; `previous` is the MAC of the agent's own
    /// entry it replaces (an ARP-learned entry is simply overwritten).
    SetNeighbour {
        ip: Ipv4Addr,
        mac: MacAddr,
        previous: Option<MacAddr>,
    },
    SetRoute {
        prefix: Ipv4Net,
        via: Ipv4Addr,
        previous: Option<Ipv4Addr>,
    },
    RemoveRoute {
        prefix: Ipv4Net,
        via: Ipv4Addr,
    },
    RemoveNeighbour {
        ip: Ipv4Addr,
        mac: MacAddr,
    },
    RemoveAddress {
        net: Ipv4Net,
    },
}

impl Change {
    /// The change that undoes this one.
    pub fn inverse(self) -> Change {
        match self {
            Change::SetMtu { from, to } => Change::SetMtu { from: to, to: from },
            Change::AddAddress { net } => Change::RemoveAddress { net },
            Change::RemoveAddress { net } => Change::AddAddress { net },
            Change::SetNeighbour {
                ip,
                mac,
                previous: None,
            } => Change::RemoveNeighbour { ip, mac },
            Change::SetNeighbour {
                ip,
                mac,
                previous: Some(previous),
            } => Change::SetNeighbour {
                ip,
                mac: previous,
                previous: Some(mac),
            },
            Change::RemoveNeighbour { ip, mac } => Change::SetNeighbour {
                ip,
                mac,
                previous: None,
            },
            Change::SetRoute {
                prefix,
                via,
                previous: None,
            } => Change::RemoveRoute { prefix, via },
            Change::SetRoute {
                prefix,
                via,
                previous: Some(previous),
            } => Change::SetRoute {
                prefix,
                via: previous,
                previous: Some(via),
            },
            Change::RemoveRoute { prefix, via } => Change::SetRoute {
                prefix,
                via,
                previous: None,
            },
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::SetMtu { from, to } => write!(f, "~ mtu {from} -> {to}"),
            Change::AddAddress { net } => write!(f, "+ address {net}"),
            Change::RemoveAddress { net } => write!(f, "- address {net}"),
            Change::SetNeighbour {
                ip,
                mac,
                previous: None,
            } => write!(f, "+ neighbour {ip} lladdr {mac}"),
            Change::SetNeighbour {
                ip,
                mac,
                previous: Some(old),
            } => write!(f, "~ neighbour {ip} lladdr {old} -> {mac}"),
            Change::RemoveNeighbour { ip, mac } => write!(f, "- neighbour {ip} lladdr {mac}"),
            Change::SetRoute {
                prefix,
                via,
                previous: None,
            } => write!(f, "+ route {prefix} via {via}"),
            Change::SetRoute {
                prefix,
                via,
                previous: Some(old),
            } => write!(f, "~ route {prefix} via {old} -> {via}"),
            Change::RemoveRoute { prefix, via } => write!(f, "- route {prefix} via {via}"),
        }
    }
}

/// An entry someone else configured that contradicts the plan; the agent does not
/// change it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict(pub String);

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What must change for the host to match `plan`, or what stands in the way.
pub fn diff(plan: &HostNetworkPlan, observed: &Observed) -> Result<Vec<Change>, Vec<Conflict>> {
    let mut changes = Vec::new();
    let mut conflicts = Vec::new();
    if let Some(mac) = observed.mac
        && mac != plan.mac
    {
        conflicts.push(Conflict(format!(
            "{} has MAC {mac}, but the inventory says {}: peers would send to the wrong MAC",
            plan.nic, plan.mac
        )));
    }
    if observed.mtu != plan.mtu {
        changes.push(Change::SetMtu {
            from: observed.mtu,
            to: plan.mtu,
        });
    }
    for &net in &plan.addresses {
        if !observed.addresses.iter().any(|a| a.net == net) {
            changes.push(Change::AddAddress { net });
        }
    }
    // Indexed: a host's MAC map holds every peer address (tens of thousands on a
    // large fabric).
    let mut observed_neighbours = HashMap::with_capacity(observed.neighbours.len());
    for n in &observed.neighbours {
        observed_neighbours.entry(n.ip).or_insert(n);
    }
    let planned_neighbours: HashSet<Ipv4Addr> = plan.neighbours.iter().map(|n| n.ip).collect();
    for want in &plan.neighbours {
        let (ip, mac) = (want.ip, want.mac);
        match observed_neighbours.get(&ip) {
            Some(n) if n.mac == Some(mac) && n.permanent => {}
            Some(n) if n.permanent && !n.ours => conflicts.push(Conflict(format!(
                "{} has a static neighbour {ip} lladdr {} that mltctl did not create; the plan wants {mac}",
                plan.nic,
                n.mac.map_or("none".into(), |m| m.to_string())
            ))),
            Some(n) => changes.push(Change::SetNeighbour {
                ip,
                mac,
                previous: n.mac.filter(|_| n.ours),
            }),
            None => changes.push(Change::SetNeighbour {
                ip,
                mac,
                previous: None,
            }),
        }
    }
    for want in &plan.routes {
        let (prefix, via) = (want.prefix, want.via);
        match observed.routes.iter().find(|r| r.prefix == prefix) {
            Some(r) if r.via == Some(via) => {}
            Some(r) if !r.ours => conflicts.push(Conflict(format!(
                "a route to {prefix} {} exists that mltctl did not create; the plan wants via {via}",
                r.via.map_or("(no gateway)".into(), |v| format!("via {v}"))
            ))),
            found => changes.push(Change::SetRoute {
                prefix,
                via,
                previous: found.and_then(|r| r.via),
            }),
        }
    }
    for r in observed.routes.iter().filter(|r| r.ours) {
        if let (false, Some(via)) = (plan.routes.iter().any(|p| p.prefix == r.prefix), r.via) {
            changes.push(Change::RemoveRoute {
                prefix: r.prefix,
                via,
            });
        }
    }
    for n in observed.neighbours.iter().filter(|n| n.ours) {
        if let (false, Some(mac)) = (planned_neighbours.contains(&n.ip), n.mac) {
            changes.push(Change::RemoveNeighbour { ip: n.ip, mac });
        }
    }
    for a in observed.addresses.iter().filter(|a| a.ours) {
        if !plan.addresses.contains(&a.net) {
            changes.push(Change::RemoveAddress { net: a.net });
        }
    }
    if conflicts.is_empty() {
        Ok(changes)
    } else {
        Err(conflicts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::plan::{Neighbour, Route};

    fn mac(last: u8) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0, last])
    }

    fn plan() -> HostNetworkPlan {
        HostNetworkPlan {
            host: "h1".into(),
            nic: "eth1".into(),
            mac: mac(11),
            mtu: 9000,
            addresses: vec![
                "10.1.1.11/24".parse().unwrap(),
                "10.200.0.1/32".parse().unwrap(),
            ],
            neighbours: vec![
                Neighbour {
                    ip: "10.1.1.1".parse().unwrap(),
                    mac: mac(1),
                },
                Neighbour {
                    ip: "10.1.1.12".parse().unwrap(),
                    mac: mac(12),
                },
            ],
            routes: vec![Route {
                prefix: "10.200.0.0/16".parse().unwrap(),
                via: "10.1.1.1".parse().unwrap(),
            }],
            dpdk: None,
            af_xdp_queues: None,
            no_gro: false,
        }
    }

    /// The state a host has after the plan was applied.
    fn applied(plan: &HostNetworkPlan) -> Observed {
        Observed {
            mtu: plan.mtu,
            mac: Some(plan.mac),
            addresses: plan
                .addresses
                .iter()
                .map(|&net| ObservedAddress { net, ours: true })
                .collect(),
            neighbours: plan
                .neighbours
                .iter()
                .map(|n| ObservedNeighbour {
                    ip: n.ip,
                    mac: Some(n.mac),
                    permanent: true,
                    ours: true,
                })
                .collect(),
            routes: plan
                .routes
                .iter()
                .map(|r| ObservedRoute {
                    prefix: r.prefix,
                    via: Some(r.via),
                    ours: true,
                })
                .collect(),
        }
    }

    /// Applies changes to an observed state the way the kernel would.
    fn apply(mut state: Observed, changes: &[Change]) -> Observed {
        for &change in changes {
            match change {
                Change::SetMtu { to, .. } => state.mtu = to,
                Change::AddAddress { net } => {
                    state.addresses.push(ObservedAddress { net, ours: true })
                }
                Change::RemoveAddress { net } => state.addresses.retain(|a| a.net != net),
                Change::SetNeighbour { ip, mac, .. } => {
                    state.neighbours.retain(|n| n.ip != ip);
                    state.neighbours.push(ObservedNeighbour {
                        ip,
                        mac: Some(mac),
                        permanent: true,
                        ours: true,
                    });
                }
                Change::RemoveNeighbour { ip, .. } => state.neighbours.retain(|n| n.ip != ip),
                Change::SetRoute { prefix, via, .. } => {
                    state.routes.retain(|r| r.prefix != prefix);
                    state.routes.push(ObservedRoute {
                        prefix,
                        via: Some(via),
                        ours: true,
                    });
                }
                Change::RemoveRoute { prefix, .. } => state.routes.retain(|r| r.prefix != prefix),
            }
        }
        state
    }

    #[test]
    fn a_bare_nic_gets_everything_and_a_second_run_changes_nothing() {
        let plan = plan();
        let bare = Observed {
            mtu: 1500,
            mac: Some(plan.mac),
            ..Observed::default()
        };
        let changes = diff(&plan, &bare).unwrap();
        let text: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            text,
            [
                "~ mtu 1500 -> 9000",
                "+ address 10.1.1.11/24",
                "+ address 10.200.0.1/32",
                "+ neighbour 10.1.1.1 lladdr 02:00:00:00:00:01",
                "+ neighbour 10.1.1.12 lladdr 02:00:00:00:00:0c",
                "+ route 10.200.0.0/16 via 10.1.1.1",
            ]
        );
        let after = apply(bare.clone(), &changes);
        assert_eq!(diff(&plan, &after).unwrap(), []);
        let inverses: Vec<Change> = changes.iter().rev().map(|c| c.inverse()).collect();
        assert_eq!(apply(after, &inverses), bare);
    }

    #[test]
    fn entries_dropped_from_the_plan_are_removed_only_if_ours() {
        let mut plan = plan();
        let mut observed = applied(&plan);
        observed.neighbours.push(ObservedNeighbour {
            ip: "10.1.1.50".parse().unwrap(),
            mac: Some(mac(50)),
            permanent: true,
            ours: false,
        });
        observed.addresses.push(ObservedAddress {
            net: "192.168.9.9/24".parse().unwrap(),
            ours: false,
        });
        plan.neighbours.pop();
        plan.addresses.pop();
        let changes = diff(&plan, &observed).unwrap();
        assert_eq!(
            changes,
            [
                Change::RemoveNeighbour {
                    ip: "10.1.1.12".parse().unwrap(),
                    mac: mac(12)
                },
                Change::RemoveAddress {
                    net: "10.200.0.1/32".parse().unwrap()
                },
            ]
        );
    }

    #[test]
    fn arp_learned_entries_are_overwritten_and_foreign_static_ones_refused() {
        let plan = plan();
        let mut observed = applied(&plan);
        observed.neighbours[1] = ObservedNeighbour {
            ip: "10.1.1.12".parse().unwrap(),
            mac: Some(mac(99)),
            permanent: false,
            ours: false,
        };
        assert_eq!(
            diff(&plan, &observed).unwrap(),
            [Change::SetNeighbour {
                ip: "10.1.1.12".parse().unwrap(),
                mac: mac(12),
                previous: None
            }]
        );
        observed.neighbours[1].permanent = true;
        observed.routes[0] = ObservedRoute {
            prefix: "10.200.0.0/16".parse().unwrap(),
            via: Some("10.1.1.254".parse().unwrap()),
            ours: false,
        };
        let conflicts = diff(&plan, &observed).unwrap_err();
        assert_eq!(conflicts.len(), 2, "{conflicts:?}");
        assert!(conflicts[0].0.contains("10.1.1.12"), "{}", conflicts[0]);
        assert!(
            conflicts[1].0.contains("via 10.1.1.254"),
            "{}",
            conflicts[1]
        );
    }

    #[test]
    fn a_nic_with_another_mac_is_refused() {
        let plan = plan();
        let mut observed = applied(&plan);
        observed.mac = Some(mac(77));
        let conflicts = diff(&plan, &observed).unwrap_err();
        assert!(conflicts[0].0.contains("wrong MAC"), "{}", conflicts[0]);
    }

    #[test]
    fn our_own_entries_are_replaced_and_the_inverse_restores_them() {
        let plan = plan();
        let mut observed = applied(&plan);
        observed.routes[0].via = Some("10.1.1.2".parse().unwrap());
        let changes = diff(&plan, &observed).unwrap();
        assert_eq!(
            changes,
            [Change::SetRoute {
                prefix: "10.200.0.0/16".parse().unwrap(),
                via: "10.1.1.1".parse().unwrap(),
                previous: Some("10.1.1.2".parse().unwrap())
            }]
        );
        let after = apply(observed.clone(), &changes);
        assert_eq!(apply(after, &[changes[0].inverse()]), observed);
    }
}
