//! Several transports in one process over loopback addresses (127.0.0.x): the real
//! UDP datapath and TCP control channel, no namespaces needed.

use std::time::Duration;

mod common;

use common::configs;
use endhost::{Options, Transport};
use endhost_core::collective::Algorithm;
use endhost_core::config::TransportConfig;

async fn start_all(world: u32, port: u16) -> Vec<Transport> {
    let handles: Vec<_> = configs(world, port)
        .into_iter()
        .map(|c| {
            let options = Options {
                connect_timeout: Duration::from_secs(10),
                bind: Some(c.local.ip),
            };
            tokio::task::spawn_local(Transport::start(c, options))
        })
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap().expect("the transport starts"));
    }
    out
}

#[test]
fn allreduce_over_loopback_sums_exactly_for_every_collective() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let world = 4u32;
        let transports: Vec<std::rc::Rc<Transport>> = start_all(world, 21_000)
            .await
            .into_iter()
            .map(std::rc::Rc::new)
            .collect();
        for (tensor, algorithm) in [
            Algorithm::Ring,
            Algorithm::Transpose,
            Algorithm::Ps {
                servers: vec![1, 3],
            },
        ]
        .into_iter()
        .enumerate()
        {
            let len = 300_000;
            let tasks: Vec<_> = transports
                .iter()
                .enumerate()
                .map(|(rank, t)| {
                    let t = t.clone();
                    let algorithm = algorithm.clone();
                    tokio::task::spawn_local(async move {
                        let mut spec = t.allreduce_spec(
                            tensor as u32,
                            vec![rank as f32 + 1.0; len],
                            Vec::new(),
                            None,
                        );
                        spec.algorithm = algorithm;
                        t.allreduce(spec).await
                    })
                })
                .collect();
            for task in tasks {
                let done = task.await.unwrap().expect("the allreduce succeeds");
                assert_eq!(done.delivered, 1.0);
                assert!(done.data.iter().all(|&v| v == 10.0), "{algorithm:?}");
            }
        }
        let counters = transports[0].counters().await.unwrap();
        assert!(counters.peers.iter().map(|p| p.packets_sent).sum::<u64>() > 0);
        assert_eq!(counters.dropped.total(), 0);
    });
}

#[test]
fn tiny_allreduces_with_empty_chunks_complete() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let transports: Vec<std::rc::Rc<Transport>> = start_all(4, 21_100)
            .await
            .into_iter()
            .map(std::rc::Rc::new)
            .collect();
        for round in 0..20 {
            let tasks: Vec<_> = transports
                .iter()
                .map(|t| {
                    let t = t.clone();
                    tokio::task::spawn_local(async move {
                        let mut spec = t.allreduce_spec(77, vec![1.0], Vec::new(), None);
                        spec.algorithm = Algorithm::Ring;
                        t.allreduce(spec).await
                    })
                })
                .collect();
            for task in tasks {
                let done = task
                    .await
                    .unwrap()
                    .unwrap_or_else(|e| panic!("round {round}: {e}"));
                assert_eq!(done.data, vec![4.0]);
            }
        }
    });
}

/// The receiver's application blocks its (current-thread) executor right after posting
/// a receive; the sender still gets its STOP at once, because the control channel runs
/// on the transport's own thread, not on the application's executor.
#[test]
fn control_frames_flow_while_the_application_blocks_its_executor() {
    let mut configs = configs(2, 21_200).into_iter();
    let (sender_config, receiver_config) = (configs.next().unwrap(), configs.next().unwrap());
    let options = |c: &TransportConfig| Options {
        connect_timeout: Duration::from_secs(10),
        bind: Some(c.local.ip),
    };
    let len = 100_000;
    let receiver_options = options(&receiver_config);
    let receiver = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut transport = runtime
            .block_on(Transport::start(receiver_config, receiver_options))
            .expect("the receiver starts");
        transport.post_recv(0, 5, len, 0.0).unwrap();
        // Busy with something else, never yielding to the runtime.
        std::thread::sleep(Duration::from_secs(3));
        let (_, done) = transport
            .poll_wait(Duration::from_secs(5))
            .expect("a completion");
        assert_eq!(done.unwrap().data, vec![2.5; len]);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sender_options = options(&sender_config);
    runtime.block_on(async {
        let transport = Transport::start(sender_config, sender_options)
            .await
            .expect("the sender starts");
        let started = std::time::Instant::now();
        transport.send(1, 5, vec![2.5; len], 0).await.unwrap();
        let waited = started.elapsed();
        assert!(
            waited < Duration::from_secs(2),
            "the STOP took {waited:?}: it waited for the receiver's executor"
        );
        transport.shutdown().await;
    });
    receiver.join().unwrap();
}
