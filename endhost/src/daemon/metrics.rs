//! The transport's counters for Prometheus (`endhost serve --metrics ADDR`): one HTTP
//! GET answered with the OpenMetrics text prometheus-client encodes. Per class: packets
//! sent and the ECN-capable share; per peer: packets and bytes sent and received,
//! retransmissions, the rate control's rate and smoothed RTT; per DSCP: what arrived,
//! CE-marked; the results' exact fraction; dropped datagrams by reason.

use std::time::Duration;

use endhost_core::proto::Counters;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabel {
    class: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PeerLabel {
    peer: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DscpLabel {
    dscp: u8,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

type F64Gauge = Gauge<f64, AtomicU64>;

/// Registers a family under `name` and returns it for filling.
fn family<L, M>(registry: &mut Registry, name: &str, help: &str) -> Family<L, M>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
    M: Default + prometheus_client::metrics::TypedMetric + Send + Sync + std::fmt::Debug + 'static,
    M: prometheus_client::encoding::EncodeMetric,
{
    let family = Family::<L, M>::default();
    registry.register(name, help, family.clone());
    family
}

/// `counters` of rank `rank` in the OpenMetrics text format.
pub fn exposition(rank: u32, counters: &Counters) -> String {
    let mut registry = Registry::with_prefix_and_labels(
        "mlt",
        [(
            std::borrow::Cow::Borrowed("rank"),
            std::borrow::Cow::Owned(rank.to_string()),
        )]
        .into_iter(),
    );
    let r = &mut registry;
    let class_sent: Family<ClassLabel, Counter> =
        family(r, "class_packets_sent", "Data packets sent, by class");
    let class_ect: Family<ClassLabel, Counter> = family(
        r,
        "class_ect_packets_sent",
        "Data packets sent ECN-capable (important), by class",
    );
    for c in &counters.classes {
        let label = ClassLabel { class: c.class };
        class_sent.get_or_create(&label).inc_by(c.packets_sent);
        class_ect.get_or_create(&label).inc_by(c.important_sent);
    }
    let sent: Family<PeerLabel, Counter> = family(r, "peer_packets_sent", "Packets sent, by peer");
    let bytes: Family<PeerLabel, Counter> = family(r, "peer_bytes_sent", "Bytes sent, by peer");
    let received: Family<PeerLabel, Counter> =
        family(r, "peer_packets_received", "Data packets received, by peer");
    let received_bytes: Family<PeerLabel, Counter> =
        family(r, "peer_bytes_received", "Data bytes received, by peer");
    let retransmitted: Family<PeerLabel, Counter> = family(
        r,
        "peer_packets_retransmitted",
        "Packets sent again, by peer",
    );
    let rate: Family<PeerLabel, F64Gauge> = family(
        r,
        "peer_rate_mbps",
        "The rate control's sending rate towards the peer, Mbit/s",
    );
    let rtt: Family<PeerLabel, F64Gauge> =
        family(r, "peer_srtt_us", "Smoothed RTT to the peer, microseconds");
    for p in counters.peers.iter().filter(|p| u32::from(p.rank) != rank) {
        let label = PeerLabel { peer: p.rank };
        sent.get_or_create(&label).inc_by(p.packets_sent);
        bytes.get_or_create(&label).inc_by(p.bytes_sent);
        received.get_or_create(&label).inc_by(p.packets_received);
        received_bytes
            .get_or_create(&label)
            .inc_by(p.bytes_received);
        retransmitted
            .get_or_create(&label)
            .inc_by(p.packets_retransmitted);
        rate.get_or_create(&label).set(p.rate_mbps);
        if let Some(srtt) = p.srtt_us {
            rtt.get_or_create(&label).set(srtt);
        }
    }
    let arrived: Family<DscpLabel, Counter> = family(
        r,
        "arrived_packets",
        "Packets that arrived from peers, by DSCP and kind (data or probe)",
    );
    let ce: Family<DscpLabel, Counter> =
        family(r, "arrived_ce_packets", "Of those, marked CE by a switch");
    for a in &counters.arrivals {
        for (kind, packets, marked) in [("data", a.packets, a.ce), ("probe", a.probes, a.probes_ce)]
        {
            let label = DscpLabel { dscp: a.dscp, kind };
            arrived.get_or_create(&label).inc_by(packets);
            ce.get_or_create(&label).inc_by(marked);
        }
    }
    let dropped: Family<ReasonLabel, Counter> = family(
        r,
        "dropped_datagrams",
        "Datagrams refused before reaching a message, by reason",
    );
    let d = &counters.dropped;
    for (reason, n) in [
        ("truncated", d.truncated),
        ("foreign", d.foreign),
        ("malformed", d.malformed),
        ("foreign_job", d.foreign_job),
        ("unknown_rank", d.unknown_rank),
        ("wrong_source", d.wrong_source),
        ("out_of_range", d.out_of_range),
    ] {
        dropped.get_or_create(&ReasonLabel { reason }).inc_by(n);
    }
    let values = Counter::<u64>::default();
    values.inc_by(counters.results.values);
    r.register("result_values", "Values of collective results", values);
    let exact = F64Gauge::default();
    exact.set(counters.results.exact_fraction);
    r.register(
        "result_exact_fraction",
        "Of the results' values, the fraction no loss reached",
        exact,
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("a String takes it");
    text
}

/// Requests larger than this, or slower than [`REQUEST_TIMEOUT`], are cut off.
const MAX_REQUEST: usize = 8 << 10;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers one HTTP connection: `GET /metrics` with the exposition, anything else 404.
pub async fn answer(
    mut stream: TcpStream,
    exposition: impl std::future::Future<Output = Option<String>>,
) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut chunk = [0u8; 1024];
    let read = async {
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            request.extend_from_slice(&chunk[..n]);
        }
        std::io::Result::Ok(())
    };
    if tokio::time::timeout(REQUEST_TIMEOUT, read).await.is_err() {
        return Ok(());
    }
    let first = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let wanted = first.starts_with(b"GET /metrics ") || first == b"GET /metrics";
    let (status, kind, body) = if !wanted {
        ("404 Not Found", "text/plain", "try /metrics\n".to_string())
    } else if let Some(text) = exposition.await {
        (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            text,
        )
    } else {
        (
            "503 Service Unavailable",
            "text/plain",
            "the transport stopped\n".to_string(),
        )
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
