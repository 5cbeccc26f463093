//! What several test files share: host configurations for ranks on loopback.

use std::net::Ipv4Addr;

use endhost_core::config::{
    ClassTag, Collective, Datapath, Importance, JobConfig, LocalConfig, PeerConfig, Ports,
    RateControl, Tagging, Timeouts, TransportConfig,
};

/// A job of `world` ranks, rank r on 127.0.0.(r + 1), data on `base_port`, control on
/// the next port.
pub fn configs(world: u32, base_port: u16) -> Vec<TransportConfig> {
    let ip = |r: u32| Ipv4Addr::new(127, 0, 0, 1 + r as u8);
    let job = JobConfig {
        job_id: 9,
        world_size: world,
        loss_bound: 0.0,
        collective: Collective::Ring,
        tagging: Tagging {
            control_dscp: 46,
            layers: 2,
            classes: vec![ClassTag {
                class: 0,
                dscp: 32,
                queue: 6,
                first_layer: 0,
                last_layer: 1,
            }],
            importance: Importance::default(),
        },
        // Loopback RTTs include thread wake-ups (tens of µs to ms), far above MLT's
        // datacenter thresholds.
        rate_control: RateControl {
            t_low_us: 500.0,
            t_high_us: 5_000.0,
            ..RateControl::default()
        },
        timeouts: Timeouts {
            phase_ms: 3_000,
            early_exit: false,
        },
        ports: Ports {
            data: base_port,
            control: base_port + 1,
        },
        datapath: Datapath::default(),
        mtu: 1500,
        local_ranks: 1,
    };
    (0..world)
        .map(|rank| TransportConfig {
            job: job.clone(),
            rank,
            local: LocalConfig {
                name: format!("h{rank}"),
                nic: "lo".into(),
                pci: "0000:00:00.0".parse().unwrap(),
                mac: "02:00:00:00:00:01".parse().unwrap(),
                ip: ip(rank),
                prefix_len: 8,
                line_rate_mbps: 10_000,
                path_addresses: vec![ip(rank)],
                cores: vec![],
            },
            peers: (0..world)
                .filter(|&p| p != rank)
                .map(|p| PeerConfig {
                    rank: p,
                    name: format!("h{p}"),
                    ip: ip(p),
                    next_hop_mac: "02:00:00:00:00:02".parse().unwrap(),
                    paths: vec![ip(p)],
                })
                .collect(),
            dpdk: Default::default(),
            key_file: None,
        })
        .collect()
}
