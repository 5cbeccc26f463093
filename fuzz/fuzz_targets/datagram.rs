//! Any bytes as a received datagram: the header view either refuses them or gives
//! in-bounds fields, and an endpoint with receives posted never panics on them. Where
//! the input is long enough, its message field is set to one of the receives' handles
//! (chosen by the input's last byte), so data reaches the receives themselves.

#![no_main]

use std::cell::RefCell;
use std::rc::Rc;

use endhost_core::config::{RateControl, Tagging};
use endhost_core::proto::{Control, Endpoint, EndpointConfig, Place, Region};
use endhost_core::wire::{Header, MessageId, Packet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(packet) = Packet::new_checked(data) {
        let header = Header::parse(&packet).expect("a checked packet has a known kind");
        assert!(packet.total_len() <= data.len());
        assert_eq!(packet.payload().len(), usize::from(header.length));
    }
    let config = EndpointConfig {
        job: 1,
        rank: 0,
        world: 3,
        mtu: 1500,
        rate: RateControl::default(),
        line_bps: 1e9,
        tagging: Tagging {
            control_dscp: 46,
            layers: 1,
            classes: Vec::new(),
            importance: Default::default(),
        },
        paths: vec![1; 3],
        early_exit: true,
        handle_seed: 0,
    };
    let mut endpoint = Endpoint::new(config, 0);
    let buffer = Rc::new(RefCell::new(vec![0.0f32; 1000]));
    for (peer, tensor) in [(1u16, 0u32), (2, 1)] {
        let id = MessageId {
            tensor,
            round: 0,
            step: 0,
        };
        let region = Region::new(buffer.clone(), 0, 1000);
        endpoint.post_recv(peer, id, region, Place::Add, 0.0);
    }
    let mut handles = Vec::new();
    while let Some((_, control)) = endpoint.poll_control() {
        if let Control::Ready { handle, .. } = control {
            handles.push(handle);
        }
    }
    let mut datagram = data.to_vec();
    if let (Some(message), Some(&pick)) = (datagram.get_mut(8..12), data.last())
        && pick & 1 == 1
    {
        let handle = handles[usize::from(pick >> 1) % handles.len()];
        message.copy_from_slice(&handle.to_be_bytes());
    }
    // From the address of the rank it names, or (by the second-to-last byte) of none or
    // another peer's: both paths are explored.
    let from = match data.iter().rev().nth(1).map(|b| b % 3) {
        Some(0) => None,
        Some(1) => Some(1),
        _ => datagram.get(4..6).map(|r| u16::from_be_bytes([r[0], r[1]])),
    };
    // Any TOS it may arrive with (DSCP and ECN), from the third-to-last byte.
    let tos = data.iter().rev().nth(2).copied().unwrap_or_default();
    endpoint.handle_datagram(1, from, tos, &datagram);
    let mut out = [0u8; 2048];
    while endpoint.poll_transmit(2, &mut out).is_some() {}
});
