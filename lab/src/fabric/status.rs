//! What a running lab's members are doing: namespace, SSH, routes, queueing, counters.

use std::fs;
use std::net::{Ipv4Addr, TcpStream};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::{LabError, layout};
use crate::emulator::Device;
use mlt_netns::Namespace;

/// How a member of a running lab is.
#[derive(Debug, Serialize)]
pub struct MemberStatus {
    pub name: String,
    pub kind: &'static str,
    pub namespace: bool,
    pub ssh: bool,
    /// (switches) The static routes its namespace forwards by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub static_routes: Option<usize>,
    /// (switches) Why its data plane could not follow its configuration, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataplane_error: Option<String>,
    /// (switches) The queueing its running configuration holds, as the lab reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<crate::qos::SwitchQos>,
    /// (switches) The forwarder's counters: per port the eight queues' packets, bytes,
    /// ECN marks, drops by reason and peak depth; frames without a route or neighbour
    /// (`no_route`, `no_neighbour`), not sent (`send_failed`), beyond a port's backlog
    /// (`overrun`) and lost to `lab loss` on the hosts' cables (`lost`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<serde_json::Value>,
}

pub fn status(dir: &Path) -> Result<Vec<MemberStatus>, LabError> {
    let layout = layout(dir)?;
    let mut out = Vec::new();
    for (kind, member) in layout
        .switches
        .iter()
        .map(|m| ("switch", m))
        .chain(layout.hosts.iter().map(|m| ("host", m)))
    {
        let namespace = Namespace::named(&member.namespace).exists();
        let ssh = member.mgmt.parse::<Ipv4Addr>().is_ok_and(|a| {
            TcpStream::connect_timeout(&(a, 22).into(), Duration::from_millis(300)).is_ok()
        });
        let (static_routes, dataplane_error) = if kind == "switch" && namespace {
            let routes = Namespace::named(&member.namespace)
                .ip(&["-4", "route", "show", "proto", "static"])
                .map(|r| {
                    r.lines()
                        .filter(|l| !l.starts_with(char::is_whitespace))
                        .count()
                })
                .ok();
            let log =
                fs::read_to_string(dir.join("devices").join(&member.name).join("dataplane.log"))
                    .ok()
                    .map(|t| t.trim().to_string());
            (routes, log)
        } else {
            (None, None)
        };
        let device = dir.join("devices").join(&member.name);
        let qos =
            (kind == "switch" && device.join("vendor").exists()).then(|| Device::at(&device).qos());
        let counters =
            fs::read_to_string(dir.join("counters").join(format!("{}.json", member.name)))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
        out.push(MemberStatus {
            name: member.name.clone(),
            kind,
            namespace,
            ssh,
            static_routes,
            dataplane_error,
            qos,
            counters,
        });
    }
    Ok(out)
}
