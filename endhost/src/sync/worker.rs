//! A training worker driven by the controller: compute a round, report ready, run the
//! weighted group allreduce the controller launches, report done; again.
//!
//! The computation is a sleep of a given mean with deterministic jitter (a stand-in
//! for a training step); the synchronization is real when a [`Transport`] is given: a
//! weighted allreduce over exactly the launched group, checked against the known inputs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use endhost_core::collective::Algorithm;
use endhost_core::sync::Launch;

use super::client::{ClientError, ControllerClient};
use crate::Transport;

#[derive(Clone, Debug)]
pub struct WorkerOptions {
    pub controller: SocketAddr,
    pub rank: u32,
    pub bandwidth_bps: f64,
    /// Mean computation time per round.
    pub compute: Duration,
    /// Each round's computation is compute × (1 ± jitter).
    pub jitter: f64,
    pub rounds: u32,
    /// f32 values per synchronization (with a transport).
    pub values: usize,
    /// How long to wait for a launch before giving up.
    pub launch_timeout: Duration,
    /// The controller's shared token, if it has one.
    pub token: Option<String>,
}

/// One synchronization as the worker saw it.
#[derive(Clone, Debug, Serialize)]
pub struct Synced {
    pub round: u32,
    pub sync: u64,
    pub members: Vec<u32>,
    pub waited_s: f64,
    pub sync_s: f64,
    /// With a transport: the allreduce's outcome (`ok`, or why it failed).
    pub outcome: String,
}

/// Runs `options.rounds` rounds; `on_sync` sees each. Fails when the controller is gone
/// or no launch comes within the timeout; a failed allreduce (a group member died) is
/// reported in its [`Synced`] and the worker carries on.
pub async fn run(
    options: &WorkerOptions,
    transport: Option<&Transport>,
    mut on_sync: impl FnMut(&Synced),
) -> Result<u32, ClientError> {
    let mut client = ControllerClient::connect(
        options.controller,
        options.rank,
        options.bandwidth_bps,
        options.token.clone(),
    )
    .await?;
    for round in 0..options.rounds {
        let compute = compute_time(options, round);
        tokio::time::sleep(compute).await;
        client
            .ready(compute.as_secs_f64(), options.bandwidth_bps)
            .await?;
        let asked = Instant::now();
        let launch = client.next_launch(options.launch_timeout).await?;
        let waited = asked.elapsed();
        let started = Instant::now();
        let outcome = match transport {
            Some(t) => synchronize(t, &launch, options).await,
            None => "ok".to_string(),
        };
        client.done(launch.sync).await?;
        on_sync(&Synced {
            round,
            sync: launch.sync,
            members: launch.members.clone(),
            waited_s: waited.as_secs_f64(),
            sync_s: started.elapsed().as_secs_f64(),
            outcome,
        });
    }
    Ok(options.rounds)
}

/// Deterministic jitter from (rank, round): workers differ, runs repeat.
fn compute_time(options: &WorkerOptions, round: u32) -> Duration {
    let mut x =
        (u64::from(options.rank) << 32 | u64::from(round)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let unit = (x % 10_000) as f64 / 10_000.0 * 2.0 - 1.0;
    options
        .compute
        .mul_f64((1.0 + options.jitter * unit).max(0.0))
}

/// The weighted allreduce of the launch: rank r contributes r + 1 everywhere, so the
/// exact result is Σ wᵢ·(rᵢ + 1).
async fn synchronize(transport: &Transport, launch: &Launch, options: &WorkerOptions) -> String {
    let Ok(group) = launch
        .members
        .iter()
        .map(|&r| u16::try_from(r))
        .collect::<Result<Vec<u16>, _>>()
    else {
        return "a member's rank does not fit the transport".into();
    };
    let mut spec = transport.allreduce_spec(
        (launch.sync % u64::from(u32::MAX)) as u32,
        vec![options.rank as f32 + 1.0; options.values],
        Vec::new(),
        None,
    );
    spec.algorithm = Algorithm::Ring;
    spec.group = Some(group);
    spec.weights = Some(launch.weights.iter().map(|&w| w as f32).collect());
    let expected: f64 = launch
        .members
        .iter()
        .zip(&launch.weights)
        .map(|(&r, &w)| w * (f64::from(r) + 1.0))
        .sum();
    match transport.allreduce(spec).await {
        Ok(done) => {
            let exact = done
                .data
                .iter()
                .filter(|&&v| (f64::from(v) - expected).abs() <= 1e-4 * expected.max(1.0))
                .count();
            if done.delivered >= 1.0 && exact == done.data.len() {
                "ok".into()
            } else {
                format!(
                    "delivered {:.4}, {} of {} values exact",
                    done.delivered,
                    exact,
                    done.data.len()
                )
            }
        }
        Err(e) => format!("failed: {e}"),
    }
}
