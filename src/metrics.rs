//! Switch queue counters in the Prometheus text format (prometheus-client's encoder,
//! the one `endhost serve --metrics` uses): what `mltctl verify --prometheus FILE`
//! writes for node-exporter's textfile collector and `mltctl lab status --prometheus`
//! prints. A counter the switch does not expose is left out, never written as zero.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One egress queue's counts: packets sent, marked CE, and dropped by reason.
pub struct QueueSample<'a> {
    pub switch: &'a str,
    pub port: &'a str,
    pub queue: u8,
    pub packets: Option<u64>,
    pub marked: Option<u64>,
    pub dropped: Vec<(&'static str, Option<u64>)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    switch: String,
    port: String,
    queue: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabel {
    switch: String,
    port: String,
    queue: u8,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabel {
    pub kind: &'static str,
    pub name: String,
    pub verdict: String,
}

pub type Values = Gauge<u64, AtomicU64>;
pub type Seconds = Gauge<f64, AtomicU64>;

/// A metric that takes one count: a gauge's value, or a fresh counter's total.
pub trait Measure:
    Default
    + prometheus_client::metrics::TypedMetric
    + prometheus_client::encoding::EncodeMetric
    + Send
    + Sync
    + std::fmt::Debug
    + 'static
{
    fn record(&self, n: u64);
}

impl Measure for Values {
    fn record(&self, n: u64) {
        self.set(n);
    }
}

impl Measure for Counter {
    fn record(&self, n: u64) {
        self.inc_by(n);
    }
}

/// A metrics registry for mltctl's own metrics (`mltctl_` names).
pub struct Metrics {
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            registry: Registry::with_prefix("mltctl"),
        }
    }
}

impl Metrics {
    /// The queues' counts named `<what>_packets`, `<what>_marked_packets` and
    /// `<what>_dropped_packets` (by reason), each described as `<counted>`: gauges of
    /// what grew in a window, or counters (`_total`) of what a queue counted since it
    /// started.
    pub fn queues<M: Measure>(&mut self, what: &str, counted: &str, samples: &[QueueSample<'_>]) {
        let packets = self.family::<QueueLabel, M>(
            &format!("{what}_packets"),
            &format!("Packets the queue transmitted, {counted}"),
        );
        let marked = self.family::<QueueLabel, M>(
            &format!("{what}_marked_packets"),
            &format!("Packets the queue marked CE, {counted}"),
        );
        let dropped = self.family::<DropLabel, M>(
            &format!("{what}_dropped_packets"),
            &format!("Packets the queue dropped, by reason, {counted}"),
        );
        for s in samples {
            let label = QueueLabel {
                switch: s.switch.to_string(),
                port: s.port.to_string(),
                queue: s.queue,
            };
            if let Some(n) = s.packets {
                packets.get_or_create(&label).record(n);
            }
            if let Some(n) = s.marked {
                marked.get_or_create(&label).record(n);
            }
            for (reason, n) in &s.dropped {
                if let Some(n) = n {
                    let label = DropLabel {
                        switch: label.switch.clone(),
                        port: label.port.clone(),
                        queue: s.queue,
                        reason,
                    };
                    dropped.get_or_create(&label).record(*n);
                }
            }
        }
    }

    /// A family of gauges registered under `name`, for the caller to fill.
    pub fn family<L, M>(&mut self, name: &str, help: &str) -> Family<L, M>
    where
        L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
        M: Default
            + prometheus_client::metrics::TypedMetric
            + prometheus_client::encoding::EncodeMetric
            + Send
            + Sync
            + std::fmt::Debug
            + 'static,
    {
        let family = Family::<L, M>::default();
        self.registry.register(name, help, family.clone());
        family
    }

    /// One unlabelled gauge.
    pub fn seconds(&mut self, name: &str, help: &str, value: f64) {
        let gauge = Seconds::default();
        gauge.set(value);
        self.registry.register(name, help, gauge);
    }

    pub fn text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("a String takes it");
        text
    }
}
