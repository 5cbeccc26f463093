//! Probes of the transport's trust model from outside, as an attacker on the same
//! machine or network would try them: a HELLO and datagrams from an address that is
//! not the rank's they claim, a job peer without the job's key, a bitmap flood, and
//! socket clients that stall or ask for more memory than the transport allows.

mod common;
#[path = "common/launched.rs"]
#[allow(dead_code)] // this binary uses part of it
mod launched;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddrV4, UdpSocket};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use endhost::{Options, Transport};
use endhost_core::proto::Control;
use endhost_core::proto::control::NONCE_LEN;
use endhost_core::wire::{Flags, HEADER_LEN, Header, Kind, Packet, job_tag};
use launched::{Launched, endhost};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Rank 0 of a two-rank job (127.0.0.1, waiting for rank 1 at 127.0.0.2) ignores a
/// process on 127.0.0.5 that says HELLO as rank 1: it gets no answer, and the real rank
/// 1 then joins. Datagrams that say they are rank 1's from 127.0.0.5 are dropped and
/// counted, never placed.
#[test]
fn a_rank_is_believed_only_from_its_own_address() {
    let configs = common::configs(2, 24_200);
    let control = SocketAddrV4::new(configs[0].local.ip, configs[0].job.ports.control);
    let data = SocketAddrV4::new(configs[0].local.ip, configs[0].job.ports.data);
    let job = configs[0].job.job_id;
    let runtime = runtime();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let start = |config: endhost_core::config::TransportConfig| {
            let options = Options {
                connect_timeout: Duration::from_secs(20),
                bind: Some(config.local.ip),
            };
            tokio::task::spawn_local(Transport::start(config, options))
        };
        let rank0 = start(configs[0].clone());
        // The impostor: rank 1's HELLO from another address of this machine.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut stream = loop {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.5:0".parse().unwrap()).unwrap();
            match socket.connect(control.into()).await {
                Ok(stream) => break stream,
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(e) => panic!("rank 0 never listened: {e}"),
            }
        };
        let mut hello = Vec::new();
        Control::Hello {
            version: endhost_core::wire::VERSION,
            job,
            rank: 1,
            nonce: [7; NONCE_LEN],
            authenticated: false,
        }
        .encode(&mut hello);
        stream.write_all(&hello).await.unwrap();
        let mut answer = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))) && answer.is_empty(),
            "the impostor got {read:?}: {answer:?}"
        );
        let rank1 = start(configs[1].clone());
        let rank0 = rank0
            .await
            .unwrap()
            .expect("rank 0 starts with the real rank 1");
        let rank1 = rank1.await.unwrap().expect("rank 1 starts");
        // A data packet in rank 1's name, from 127.0.0.5, with the job's tag.
        let spoofer = UdpSocket::bind("127.0.0.5:0").unwrap();
        let mut packet = vec![0u8; HEADER_LEN + 4];
        Packet::new_unchecked(&mut packet[..]).emit(&Header {
            kind: Kind::Data,
            flags: Flags::default(),
            job_tag: job_tag(job),
            rank: 1,
            length: 4,
            message: 1,
            sequence: 0,
        });
        for _ in 0..5 {
            spoofer.send_to(&packet, data).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let dropped = loop {
            let counters = rank0.counters().await.unwrap();
            if counters.dropped.wrong_source == 5 || Instant::now() > deadline {
                break counters.dropped;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(dropped.wrong_source, 5, "{dropped:?}");
        assert_eq!(dropped.total(), 5, "{dropped:?}");
        rank0.shutdown().await;
        rank1.shutdown().await;
    });
}

/// A socket client that starts a request and stalls is cut off after the request
/// timeout; clients together cannot make the transport hold more than its budget —
/// past it a request is refused, and once the stalled ones are cut off it is served.
#[test]
fn socket_clients_cannot_stall_the_transport_or_pin_its_memory() {
    let ranks = Launched::start_with(
        "budget",
        common::configs(1, 24_300),
        &["--request-timeout", "1", "--client-memory", "64"],
    );
    let socket = ranks.file(0, "sock");
    let status = endhost(&["status", "--socket", &socket, "--wait", "20"]);
    assert!(status.status.success(), "{status:?}\n{}", ranks.logs());
    // 8 Mi values are 32 MiB: two such requests fill the 64 MiB budget.
    let ask = |values: u64| {
        let mut client = UnixStream::connect(&socket).unwrap();
        writeln!(
            client,
            "{{\"op\":\"allreduce\",\"values\":{values},\"layer\":0}}"
        )
        .unwrap();
        client
    };
    let started = Instant::now();
    let stalled = [ask(8 << 20), ask(8 << 20)];
    // Give the transport time to take both requests' shares.
    std::thread::sleep(Duration::from_millis(200));
    let third = ask(8 << 20);
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reply = String::new();
    BufReader::new(&third).read_line(&mut reply).unwrap();
    assert!(reply.contains("budget of 67108864 bytes"), "{reply}");
    // The stalled clients are cut off after about a second.
    for mut client in stalled {
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut rest = Vec::new();
        let read = client.read_to_end(&mut rest);
        assert!(matches!(read, Ok(0)), "{read:?} {rest:?}");
    }
    let cut_after = started.elapsed();
    assert!(
        cut_after >= Duration::from_millis(900) && cut_after < Duration::from_secs(5),
        "{cut_after:?}"
    );
    // With the budget back, a whole request is served.
    let values = 1u64 << 20;
    let mut client = ask(values);
    let body: Vec<u8> = (0..values).flat_map(|_| 1.5f32.to_le_bytes()).collect();
    client.write_all(&body).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reply = String::new();
    BufReader::new(&client).read_line(&mut reply).unwrap();
    assert!(
        reply.contains("\"error\":null"),
        "{reply}\n{}",
        ranks.logs()
    );
}

/// A peer that floods the sender with bitmaps asking for every packet, over and over,
/// gets each packet resent once per bitmap at most, never more than the message; a
/// bitmap whose ranges overlap or run past the message is refused and counted.
#[test]
fn a_bitmap_flood_resends_no_more_than_the_message() {
    use endhost_core::config::{RateControl, Tagging};
    use endhost_core::proto::control::MAX_RANGES;
    use endhost_core::proto::{Endpoint, EndpointConfig, Region};
    use endhost_core::wire::MessageId;
    use std::cell::RefCell;
    use std::rc::Rc;
    let config = EndpointConfig {
        job: 1,
        rank: 0,
        world: 2,
        mtu: 1500,
        rate: RateControl::default(),
        line_bps: 100e9,
        tagging: Tagging {
            control_dscp: 46,
            layers: 1,
            classes: Vec::new(),
            importance: Default::default(),
        },
        paths: vec![1, 1],
        early_exit: false,
        handle_seed: 0,
    };
    let mut sender = Endpoint::new(config, 0);
    let packets = 100u32;
    let len = packets as usize * sender.payload_elems();
    let id = MessageId {
        tensor: 1,
        round: 0,
        step: 0,
    };
    let region = Region::new(Rc::new(RefCell::new(vec![1.0; len])), 0, len);
    sender.post_send(1, id, region, Rc::new(Vec::new()));
    sender.handle_control(0, 1, Control::Ready { id, handle: 5 });
    // Everything the sender sends in 10 ms from `now` on.
    let drain = |sender: &mut Endpoint, now: u64| {
        let mut buf = [0u8; 2048];
        let mut sent = 0;
        for tick in 1..=10_000 {
            while sender.poll_transmit(now + tick * 1_000, &mut buf).is_some() {
                sent += 1;
            }
        }
        sent
    };
    assert_eq!(drain(&mut sender, 0), packets);
    let now = 10_000_000;
    // 64 KiB frames that ask for everything, 8,192 times over, a thousand times.
    let everything = vec![(0, u32::MAX); MAX_RANGES];
    for _ in 0..1_000 {
        sender.handle_control(
            now,
            1,
            Control::Bitmap {
                id,
                missing: everything.clone(),
            },
        );
        sender.handle_control(
            now,
            1,
            Control::Bitmap {
                id,
                missing: vec![(0, packets); 2],
            },
        );
    }
    let whole = Control::Bitmap {
        id,
        missing: vec![(0, packets)],
    };
    for _ in 0..1_000 {
        sender.handle_control(now, 1, whole.clone());
    }
    assert_eq!(drain(&mut sender, now), packets, "each missing packet once");
    assert_eq!(sender.counters().bitmaps_rejected, 2_000);
}

/// With a job key, a peer that has another key or none is refused with a reason on
/// both sides; peers with the key form the job. The key file must be its owner's alone.
#[test]
fn peers_without_the_jobs_key_are_refused() {
    let scratch = mlt_common::files::scratch_dir("endhost-key-").unwrap();
    let key = |name: &str, bytes: &[u8], mode: u32| {
        let path = scratch.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
        path
    };
    let right = key("right.key", &[1; 32], 0o600);
    let wrong = key("wrong.key", &[2; 32], 0o600);
    let open = key("open.key", &[1; 32], 0o644);
    let runtime = runtime();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let start = |mut config: endhost_core::config::TransportConfig,
                     key: Option<&std::path::Path>| {
            config.key_file = key.map(std::path::Path::to_path_buf);
            let options = Options {
                connect_timeout: Duration::from_secs(2),
                bind: Some(config.local.ip),
            };
            tokio::task::spawn_local(Transport::start(config, options))
        };
        for (port, second, joins, says) in [
            (24_400, Some(right.as_path()), true, ""),
            (
                24_410,
                Some(wrong.as_path()),
                false,
                "proof of the job's key is wrong",
            ),
            (
                24_420,
                None,
                false,
                "proves a job key, and this rank has none",
            ),
        ] {
            let configs = common::configs(2, port);
            let rank0 = start(configs[0].clone(), Some(&right));
            let rank1 = start(configs[1].clone(), second).await.unwrap();
            let rank0 = rank0.await.unwrap();
            assert_eq!(rank0.is_ok(), joins, "{:?}", rank0.as_ref().err());
            match rank1 {
                Ok(t) => {
                    assert!(joins);
                    t.shutdown().await;
                    rank0.unwrap().shutdown().await;
                }
                Err(e) => {
                    assert!(!joins, "{e}");
                    assert!(e.to_string().contains(says), "{e}");
                }
            }
        }
        let configs = common::configs(2, 24_430);
        let refused = start(configs[0].clone(), Some(&open)).await.unwrap();
        let why = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(why.contains("readable by nobody else"), "{why}");
    });
}
