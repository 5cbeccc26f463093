//! The corpus of malformed and foreign datagrams (`tests/corpus/malformed/`): each is
//! dropped, counted under the reason its file name starts with, and changes nothing.
//! `ENDHOST_WRITE_CORPUS=1` rewrites the corpus from the cases below; the fuzz target
//! (`fuzz/`) starts from it too.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use endhost_core::config::{RateControl, Tagging};
use endhost_core::proto::{Control, Endpoint, EndpointConfig, Place, Region};
use endhost_core::wire::{Flags, HEADER_LEN, Header, Kind, MessageId, Packet};

const LEN: usize = 1000;

/// An endpoint (rank 0 of job 7) receiving 1,000 values from rank 1, the buffer, and
/// the handle its READY gave the sender.
fn endpoint() -> (Endpoint, Rc<RefCell<Vec<f32>>>, u32) {
    let config = EndpointConfig {
        job: 7,
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
        early_exit: false,
        handle_seed: 0,
    };
    let mut endpoint = Endpoint::new(config, 0);
    let buffer = Rc::new(RefCell::new(vec![0.0f32; LEN]));
    let region = Region::new(buffer.clone(), 0, LEN);
    endpoint.post_recv(1, id(), region, Place::Add, 0.0);
    let Some((1, Control::Ready { handle, .. })) = endpoint.poll_control() else {
        panic!("the receive says READY");
    };
    (endpoint, buffer, handle)
}

fn id() -> MessageId {
    MessageId {
        tensor: 3,
        round: 0,
        step: 0,
    }
}

/// A valid first packet of the posted receive; cases edit it.
fn valid() -> (Header, Vec<u8>) {
    let payload_elems = (1500 - 28 - HEADER_LEN) / 4;
    let header = Header {
        kind: Kind::Data,
        flags: Flags(Flags::ACK_REQUEST),
        job_tag: 7,
        rank: 1,
        length: (payload_elems * 4) as u16,
        message: endpoint().2,
        sequence: 0,
    };
    (header, emit(&header, payload_elems * 4))
}

fn emit(header: &Header, payload: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; HEADER_LEN + payload];
    Packet::new_unchecked(&mut bytes[..]).emit(header);
    for (i, b) in bytes[HEADER_LEN..].iter_mut().enumerate() {
        *b = (i % 7) as u8 + 1;
    }
    bytes
}

fn cases() -> Vec<(&'static str, Vec<u8>)> {
    let (header, good) = valid();
    let with = |edit: &dyn Fn(&mut Header)| {
        let mut h = header;
        edit(&mut h);
        emit(&h, usize::from(header.length))
    };
    let poke = |at: usize, value: u8| {
        let mut b = good.clone();
        b[at] = value;
        b
    };
    vec![
        ("truncated-empty", Vec::new()),
        ("truncated-one-byte", vec![0x4d]),
        ("truncated-header", good[..HEADER_LEN - 1].to_vec()),
        ("truncated-payload", good[..good.len() - 1].to_vec()),
        ("foreign-magic", poke(0, 0x00)),
        ("foreign-version", poke(1, 9)),
        // Version 3's kind was four bits: its data packets do not parse as ours.
        ("foreign-version-3", poke(1, 3)),
        // A version 1 packet (36-byte header) of the same job.
        ("foreign-version-1", {
            let mut b = good.clone();
            b[..4].copy_from_slice(&[0x4d, 0x4c, 1, 0x10]);
            b
        }),
        (
            "foreign-text",
            b"GET / HTTP/1.1\r\nHost: example\r\n\r\nxxxxxxxxxxxxxxxxxxxxxxxx".to_vec(),
        ),
        ("malformed-kind", poke(2, 0xe0)), // kind 7: none
        (
            "malformed-length-not-whole-values",
            with(&|h| h.length -= 2),
        ),
        (
            "malformed-empty-data",
            emit(
                &Header {
                    length: 0,
                    ..header
                },
                0,
            ),
        ),
        ("malformed-ack-with-payload", with(&|h| h.kind = Kind::Ack)),
        ("foreign_job-another-job", with(&|h| h.job_tag = 8)),
        ("unknown_rank-beyond-the-job", with(&|h| h.rank = 9)),
        ("unknown_rank-ourselves", with(&|h| h.rank = 0)),
        ("out_of_range-sequence", with(&|h| h.sequence = 999)),
        (
            "out_of_range-sequence-far",
            with(&|h| h.sequence = u32::MAX),
        ),
        ("out_of_range-short-length", {
            let mut h = header;
            h.length -= 4;
            emit(&h, usize::from(h.length))
        }),
        (
            "late-unknown-message",
            with(&|h| h.message = h.message.wrapping_add(1)),
        ),
        ("late-unknown-sender", with(&|h| h.rank = 2)),
    ]
}

fn corpus() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/corpus/malformed"
    ))
}

#[test]
fn every_malformed_datagram_is_dropped_and_counted_under_its_reason() {
    if std::env::var_os("ENDHOST_WRITE_CORPUS").is_some() {
        for (name, bytes) in cases() {
            std::fs::write(corpus().join(format!("{name}.bin")), bytes).unwrap();
        }
    }
    let mut files: Vec<_> = std::fs::read_dir(corpus()).unwrap().flatten().collect();
    files.sort_by_key(|f| f.file_name());
    assert_eq!(files.len(), cases().len(), "the corpus matches the cases");
    for file in files {
        let name = file.file_name().to_string_lossy().to_string();
        let reason = name.split('-').next().unwrap();
        let bytes = std::fs::read(file.path()).unwrap();
        let (mut endpoint, buffer, _) = endpoint();
        // From the address of the rank it names: the reasons here are the packet's own.
        let from = Packet::new_checked(&bytes[..]).ok().map(|p| p.rank());
        endpoint.handle_datagram(10, from, 0, &bytes);
        let counters = endpoint.counters();
        let d = &counters.dropped;
        let late: u64 = counters.peers.iter().map(|p| p.late).sum();
        let counted = match reason {
            "truncated" => d.truncated,
            "foreign" => d.foreign,
            "malformed" => d.malformed,
            "foreign_job" => d.foreign_job,
            "unknown_rank" => d.unknown_rank,
            "out_of_range" => d.out_of_range,
            "late" => late,
            other => panic!("{name}: unknown reason {other}"),
        };
        assert_eq!(counted, 1, "{name}: {counters:?}");
        assert_eq!(d.total() + late, 1, "{name}: counted once");
        assert!(
            buffer.borrow().iter().all(|&v| v == 0.0),
            "{name} changed the buffer"
        );
        assert!(
            endpoint.poll_event().is_none(),
            "{name} completed something"
        );
    }
    // The valid packet the cases start from, from an address that is not rank 1's
    // (rank 2's, or no peer's), is dropped and counted: the rank field is a claim.
    for from in [Some(2), None] {
        let (mut endpoint, buffer, _) = endpoint();
        endpoint.handle_datagram(10, from, 0, &valid().1);
        let counters = endpoint.counters();
        assert_eq!(counters.dropped.wrong_source, 1, "from {from:?}");
        assert_eq!(counters.dropped.total(), 1, "from {from:?}");
        assert!(buffer.borrow().iter().all(|&v| v == 0.0));
    }
    // And from rank 1's address it is accepted.
    let (mut endpoint, buffer, _) = endpoint();
    endpoint.handle_datagram(10, Some(1), 0, &valid().1);
    assert_eq!(endpoint.counters().dropped.total(), 0);
    assert!(buffer.borrow()[0] != 0.0);
    // It asked for an acknowledgement: one goes back, echoing its message and sequence.
    let mut out = [0u8; 64];
    let ack = endpoint.poll_transmit(11, &mut out).expect("an ACK");
    let ack = Packet::new_checked(&out[..ack.len]).unwrap();
    assert_eq!(ack.kind(), Some(Kind::Ack));
    assert_eq!((ack.message(), ack.sequence()), (valid().0.message, 0));
}
