//! Checks of the training profile: layers, classes and DSCP values, transport settings,
//! the threshold model, and thresholds pinned by hand.

use std::collections::HashSet;

use mlt_common::input::{InputError, read_text};

use super::*;
use crate::inventory::load::MAX_INPUT_BYTES;
use crate::inventory::{Launcher, THRESHOLD_UNIT};

/// The most parameters one layer may have (a trillion), and a whole model (2^50): the
/// plan counts bytes in u64 and shares in f64, exact below 2^53.
const MAX_LAYER_PARAMS: u64 = 1 << 40;
const MAX_MODEL_PARAMS: u64 = 1 << 50;

impl Validator<'_> {
    pub(super) fn training(
        &mut self,
        t: &raw::Training,
        switches: &[Named<Switch>],
    ) -> Option<Training> {
        let job_id = self.int_or(&t.job_id, "training.job_id", 0..=u64::from(u32::MAX), 1u32);
        let layers = self.layers(&t.layers);
        let element_bytes = self.int_or(
            &t.layers.element_bytes,
            "training.layers.element_bytes",
            1..=8,
            4u32,
        );
        let loss_bound = self.float_or(
            &Some(t.loss_bound.clone()),
            "training.loss_bound",
            |p| (0.0..1.0).contains(&p),
            "at least 0 and below 1",
            0.0,
        );
        let collective = self.collective(t.collective.as_ref());
        let priorities = self.priorities(t.priorities.as_ref(), switches);
        let classes = match (priorities, &layers) {
            (Some(p), Some(layers)) => Some(gradient_classes(p, layers.len())),
            _ => None,
        };
        let dscp = self.dscp(t.dscp.as_ref(), classes);
        let importance = self.importance(t.importance.as_ref());
        let rate_control = self.rate_control(t.rate_control.as_ref());
        let timeouts = self.timeouts(t.timeouts.as_ref());
        let ports = self.transport_ports(t.ports.as_ref());
        let datapath = self.datapath(t.datapath.as_ref());
        let model = self.model(t.model.as_ref());
        let launcher = self.launcher(t.launcher.as_ref(), ports.as_ref());
        let pinned = match (&t.thresholds, classes) {
            (Some(list), Some(classes)) => self.pinned(list, classes, switches),
            (None, _) => Some(Vec::new()),
            (Some(_), None) => None,
        };
        let (control_dscp, gradient_dscp) = dscp?;
        Some(Training {
            job_id: job_id?,
            layers: layers?,
            element_bytes: element_bytes?,
            loss_bound: loss_bound?,
            collective: collective?,
            priorities: priorities?,
            control_dscp,
            gradient_dscp,
            importance: importance?,
            rate_control: rate_control?,
            timeouts: timeouts?,
            ports: ports?,
            datapath: datapath?,
            model: model?,
            pinned_thresholds: pinned?,
            launcher: launcher?,
        })
    }

    fn launcher(&mut self, l: Option<&raw::Launcher>, ports: Option<&Ports>) -> Option<Launcher> {
        let d = Launcher::default();
        let procs_per_host = self.int_or(
            &l.and_then(|l| l.procs_per_host.clone()),
            "training.launcher.procs_per_host",
            1..=256,
            d.procs_per_host,
        );
        let given = l.and_then(|l| l.master_port.clone());
        let master_port = self.int_or(
            &given,
            "training.launcher.master_port",
            1..=65535,
            d.master_port,
        )?;
        // Both listen on TCP on the first host; the data port is UDP and no clash.
        if let Some(ports) = ports
            && ports.control == master_port
        {
            let at = given.as_ref().map_or(Span::new_blank(), |p| *p.span());
            self.error(
                &at,
                format!("master_port {master_port} is the transport's control port (TCP)"),
            );
            return None;
        }
        let socket_group = l.and_then(|l| l.socket_group.as_ref());
        if let Some(group) = socket_group
            && !super::is_user_name(group)
        {
            let msg = format!(
                "{} is not a group name (up to 32 letters, digits, `_`, `.` or `-`, not starting with `-` or `.`)",
                mlt_common::redact::shown(group)
            );
            self.error(group.span(), msg);
            return None;
        }
        Some(Launcher {
            procs_per_host: procs_per_host?,
            master_port,
            socket_group: socket_group.map(|g| g.to_string()),
        })
    }

    fn layers(&mut self, l: &Spanned<raw::Layers>) -> Option<Vec<Layer>> {
        let forms = [l.sizes.is_some(), l.file.is_some(), l.count.is_some()];
        if forms.iter().filter(|f| **f).count() != 1 {
            self.error(
                l.span(),
                "`training.layers` needs exactly one of `sizes`, `file` or `count` (with `params_each`)",
            );
            return None;
        }
        if let (Some(p), None) = (&l.params_each, &l.count) {
            self.error(p.span(), "`params_each` goes with `count`");
            return None;
        }
        if let Some(sizes) = &l.sizes {
            let mut layers = Vec::with_capacity(sizes.len());
            for (i, size) in sizes.iter().enumerate() {
                let params = self.int(size, "training.layers.sizes", 1..=MAX_LAYER_PARAMS)?;
                layers.push(Layer {
                    name: format!("layer{i}"),
                    params,
                });
            }
            if layers.is_empty() {
                self.error(l.span(), "`training.layers.sizes` is empty");
                return None;
            }
            self.model_size(&layers, l.span())?;
            return Some(layers);
        }
        if let Some(file) = &l.file {
            return self.layer_file(file);
        }
        let count = l.count.as_ref()?;
        let count: usize = self.int(count, "training.layers.count", 1..=1_000_000)?;
        let Some(each) = &l.params_each else {
            self.error(l.span(), "`training.layers.count` needs `params_each`");
            return None;
        };
        let params = self.int(each, "training.layers.params_each", 1..=MAX_LAYER_PARAMS)?;
        let layers: Vec<Layer> = (0..count)
            .map(|i| Layer {
                name: format!("layer{i}"),
                params,
            })
            .collect();
        self.model_size(&layers, l.span())?;
        Some(layers)
    }

    /// The whole model's size must fit the plan's arithmetic (bytes in u64, exactly in
    /// f64): a checked sum, reported where the layers are given.
    fn model_size(&mut self, layers: &[Layer], at: &Span) -> Option<()> {
        let total = layers
            .iter()
            .try_fold(0u64, |sum, l| sum.checked_add(l.params))
            .filter(|&total| total <= MAX_MODEL_PARAMS);
        if total.is_none() {
            let msg = format!(
                "the layers add up to more than {MAX_MODEL_PARAMS} parameters, more than any \
                 model mltctl can plan for"
            );
            self.error(at, msg);
            return None;
        }
        Some(())
    }

    fn layer_file(&mut self, file: &Spanned<String>) -> Option<Vec<Layer>> {
        let path = self.base_dir.join(file.as_str());
        let text = match read_text(&path, MAX_INPUT_BYTES) {
            Ok(text) => text,
            Err(InputError::NotUtf8 { line, column }) => {
                let source = self.report.add_source(&path);
                let mark = marked_yaml::Marker::new(source, 0, line, column);
                self.report
                    .error_at(mark, "not UTF-8 text; a layer file must be UTF-8");
                return None;
            }
            Err(e) => {
                let msg = format!("cannot read layer file {}: {e}", path.display());
                self.error(file.span(), msg);
                return None;
            }
        };
        let source = self.report.add_source(&path);
        let layers = parse_layer_file(&text, source, self.report);
        if layers.is_empty() {
            let msg = format!("layer file {} lists no layers", path.display());
            self.error(file.span(), msg);
            return None;
        }
        if let Some(layer) = layers.iter().position(|l| l.params > MAX_LAYER_PARAMS) {
            let msg = format!(
                "layer file {}: layer {layer} has more than {MAX_LAYER_PARAMS} parameters",
                path.display()
            );
            self.error(file.span(), msg);
            return None;
        }
        self.model_size(&layers, file.span())?;
        Some(layers)
    }

    fn collective(&mut self, text: Option<&Spanned<String>>) -> Option<Collective> {
        let Some(text) = text else {
            return Some(Collective::Ring);
        };
        match text.as_str() {
            "ring" => Some(Collective::Ring),
            "transpose" => Some(Collective::Transpose),
            "ps" => Some(Collective::Ps),
            other => {
                let msg = format!("unknown collective `{other}` (expected ring, transpose or ps)");
                self.error(text.span(), msg);
                None
            }
        }
    }

    /// Queues the plan uses; never more than the smallest switch offers.
    fn priorities(
        &mut self,
        given: Option<&Spanned<u64>>,
        switches: &[Named<Switch>],
    ) -> Option<u8> {
        let smallest = switches.iter().min_by_key(|(_, s)| s.queues);
        if let Some(given) = given {
            let p: u8 = self.int(given, "training.priorities", 3..=MAX_QUEUES)?;
            if let Some((_, s)) = smallest.filter(|(_, s)| s.queues < p) {
                let msg = format!(
                    "training.priorities is {p} but switch {} has only {} queues",
                    s.name, s.queues
                );
                self.error(given.span(), msg);
                return None;
            }
            return Some(p);
        }
        match smallest {
            Some((span, s)) if s.queues < 3 => {
                let msg = format!(
                    "switch {} has {} queue(s); mltctl needs at least 3 (control, default and one gradient queue)",
                    s.name, s.queues
                );
                self.error(span, msg);
                None
            }
            Some((_, s)) => Some(s.queues.min(DEFAULT_PRIORITIES)),
            None => Some(DEFAULT_PRIORITIES),
        }
    }

    fn dscp(&mut self, d: Option<&raw::Dscp>, classes: Option<usize>) -> Option<(u8, Vec<u8>)> {
        let control_given = d.and_then(|d| d.control.as_ref());
        let control = self.int_or(
            &control_given.cloned(),
            "training.dscp.control",
            0..=63,
            DEFAULT_CONTROL_DSCP,
        );
        let Some(list) = d.and_then(|d| d.gradient.as_ref()) else {
            let classes = classes?;
            let gradient = (0..classes)
                .map(|c| DEFAULT_GRADIENT_DSCP_BASE + c as u8)
                .collect();
            return Some((control?, gradient));
        };
        let mut seen = HashSet::new();
        let mut gradient = Vec::with_capacity(list.len());
        for value in list.iter() {
            let dscp: u8 = self.int(value, "training.dscp.gradient", 0..=63)?;
            if Some(dscp) == control {
                let msg = format!("DSCP {dscp} is already the control DSCP");
                self.error(value.span(), msg);
                return None;
            }
            if !seen.insert(dscp) {
                self.error(value.span(), format!("DSCP {dscp} is listed twice"));
                return None;
            }
            gradient.push(dscp);
        }
        let classes = classes?;
        if gradient.len() < classes {
            let msg = format!(
                "training.dscp.gradient lists {} value(s) but the plan has {classes} gradient classes",
                gradient.len()
            );
            self.error(list.span(), msg);
            return None;
        }
        Some((control?, gradient))
    }

    fn importance(&mut self, i: Option<&raw::Importance>) -> Option<Importance> {
        let d = Importance::default();
        let quantile = self.float_or(
            &i.and_then(|i| i.quantile.clone()),
            "training.importance.quantile",
            |q| q > 0.0 && q < 1.0,
            "above 0 and below 1",
            d.quantile,
        );
        let sample_fraction = self.float_or(
            &i.and_then(|i| i.sample_fraction.clone()),
            "training.importance.sample_fraction",
            |f| f > 0.0 && f <= 1.0,
            "above 0 and at most 1",
            d.sample_fraction,
        );
        Some(Importance {
            quantile: quantile?,
            sample_fraction: sample_fraction?,
        })
    }

    fn rate_control(&mut self, r: Option<&raw::RateControl>) -> Option<RateControl> {
        let d = RateControl::default();
        let field =
            |f: fn(&raw::RateControl) -> &Option<Spanned<f64>>| r.and_then(|r| f(r).clone());
        let positive = |x: f64| x > 0.0 && x.is_finite();
        let t_low_us = self.float_or(
            &field(|r| &r.t_low_us),
            "training.rate_control.t_low_us",
            positive,
            "above 0",
            d.t_low_us,
        );
        let high = field(|r| &r.t_high_us);
        let t_high_us = self.float_or(
            &high,
            "training.rate_control.t_high_us",
            positive,
            "above 0",
            d.t_high_us,
        );
        if let (Some(low), Some(hi)) = (t_low_us, t_high_us)
            && hi <= low
        {
            let at = high.as_ref().map_or(Span::new_blank(), |h| *h.span());
            let msg =
                format!("`training.rate_control.t_high_us` ({hi}) must be above t_low_us ({low})");
            self.error(&at, msg);
            return None;
        }
        let alpha_mbps = self.float_or(
            &field(|r| &r.alpha_mbps),
            "training.rate_control.alpha_mbps",
            positive,
            "above 0",
            d.alpha_mbps,
        );
        let beta = self.float_or(
            &field(|r| &r.beta),
            "training.rate_control.beta",
            |b| b > 0.0 && b <= 1.0,
            "above 0 and at most 1",
            d.beta,
        );
        let ack_every = self.int_or(
            &r.and_then(|r| r.ack_every.clone()),
            "training.rate_control.ack_every",
            1..=65535,
            d.ack_every,
        );
        Some(RateControl {
            t_low_us: t_low_us?,
            t_high_us: t_high_us?,
            alpha_mbps: alpha_mbps?,
            beta: beta?,
            ack_every: ack_every?,
        })
    }

    fn timeouts(&mut self, t: Option<&raw::Timeouts>) -> Option<Timeouts> {
        let d = Timeouts::default();
        let phase_ms = self.int_or(
            &t.and_then(|t| t.phase_ms.clone()),
            "training.timeouts.phase_ms",
            1..=3_600_000,
            d.phase_ms,
        );
        Some(Timeouts {
            phase_ms: phase_ms?,
            early_exit: t.and_then(|t| t.early_exit).unwrap_or(d.early_exit),
        })
    }

    fn transport_ports(&mut self, p: Option<&raw::Ports>) -> Option<Ports> {
        let d = Ports::default();
        let control_given = p.and_then(|p| p.control.clone());
        let data = self.int_or(
            &p.and_then(|p| p.data.clone()),
            "training.ports.data",
            1..=65535,
            d.data,
        );
        let control = self.int_or(
            &control_given,
            "training.ports.control",
            1..=65535,
            d.control,
        );
        let (data, control) = (data?, control?);
        if data == control {
            let at = control_given
                .as_ref()
                .map_or(Span::new_blank(), |c| *c.span());
            self.error(&at, format!("data and control ports are both {data}"));
            return None;
        }
        Some(Ports { data, control })
    }

    fn datapath(&mut self, d: Option<&raw::Datapath>) -> Option<Datapath> {
        let defaults = Datapath::default();
        let kind = self.keyword(
            d.and_then(|d| d.kind.as_ref()),
            "datapath",
            &[("udp", DatapathKind::Udp), ("dpdk", DatapathKind::Dpdk)],
            defaults.kind,
        );
        let rx_queues = self.int_or(
            &d.and_then(|d| d.rx_queues.clone()),
            "training.datapath.rx_queues",
            1..=16,
            defaults.rx_queues,
        );
        let rx_ring = self.ring(
            d.and_then(|d| d.rx_ring.as_ref()),
            "rx_ring",
            defaults.rx_ring,
        );
        let tx_ring = self.ring(
            d.and_then(|d| d.tx_ring.as_ref()),
            "tx_ring",
            defaults.tx_ring,
        );
        let driver = self.keyword(
            d.and_then(|d| d.driver.as_ref()),
            "DPDK driver",
            &[
                ("vfio-pci", DpdkDriver::VfioPci),
                ("mlx5", DpdkDriver::Mlx5),
                ("af_packet", DpdkDriver::AfPacket),
                ("af_xdp", DpdkDriver::AfXdp),
            ],
            defaults.driver,
        );
        Some(Datapath {
            kind: kind?,
            rx_queues: rx_queues?,
            rx_ring: rx_ring?,
            tx_ring: tx_ring?,
            driver: driver?,
        })
    }

    /// One of two `choices` by name, or `default` when not given.
    fn keyword<T: Copy>(
        &mut self,
        given: Option<&raw::Text>,
        what: &str,
        choices: &[(&str, T)],
        default: T,
    ) -> Option<T> {
        let Some(text) = given else {
            return Some(default);
        };
        if let Some(&(_, value)) = choices.iter().find(|(name, _)| *name == text.as_str()) {
            return Some(value);
        }
        let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
        let expected = match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        let msg = format!("unknown {what} `{}` (expected {expected})", **text);
        self.error(text.span(), msg);
        None
    }

    fn ring(&mut self, given: Option<&Spanned<u64>>, field: &str, default: u16) -> Option<u16> {
        let Some(v) = given else {
            return Some(default);
        };
        if (64..=32768).contains(&**v) && v.is_power_of_two() {
            return Some(**v as u16);
        }
        let msg =
            format!("`training.datapath.{field}` must be a power of two between 64 and 32768");
        self.error(v.span(), msg);
        None
    }

    fn model(&mut self, m: Option<&raw::Model>) -> Option<ThresholdModel> {
        let d = ThresholdModel::default();
        let load = self.float_or(
            &m.and_then(|m| m.load.clone()),
            "training.model.load",
            |l| l > 0.0 && l <= 1.0,
            "above 0 and at most 1",
            d.load,
        );
        let rtt_us = self.float_or(
            &m.and_then(|m| m.rtt_us.clone()),
            "training.model.rtt_us",
            |r| r > 0.0 && r <= 1_000_000.0,
            "above 0 and at most 1000000 (1 s)",
            d.rtt_us,
        );
        let t = m.and_then(|m| m.tolerance.as_ref());
        let mut fraction =
            |get: fn(&raw::Tolerance) -> &Option<Spanned<f64>>, name: &str, default| {
                self.float_or(
                    &t.and_then(|t| get(t).clone()),
                    &format!("training.model.tolerance.{name}"),
                    |f| f > 0.0 && f < 1.0,
                    "above 0 and below 1",
                    default,
                )
            };
        let random_loss = fraction(|t| &t.random_loss, "random_loss", d.tolerance.random_loss);
        let front_layers = fraction(
            |t| &t.front_layers,
            "front_layers",
            d.tolerance.front_layers,
        );
        let back_layers = fraction(|t| &t.back_layers, "back_layers", d.tolerance.back_layers);
        let small = fraction(
            |t| &t.small_gradients,
            "small_gradients",
            d.tolerance.small_gradients,
        );
        let large = fraction(
            |t| &t.large_gradients,
            "large_gradients",
            d.tolerance.large_gradients,
        );
        Some(ThresholdModel {
            load: load?,
            rtt_us: rtt_us?,
            accept_over_tolerance: m
                .and_then(|m| m.accept_over_tolerance)
                .unwrap_or(d.accept_over_tolerance),
            tolerance: Tolerance {
                random_loss: random_loss?,
                front_layers: front_layers?,
                back_layers: back_layers?,
                small_gradients: small?,
                large_gradients: large?,
            },
        })
    }

    /// Hand-set thresholds: known classes, once each, and within every switch's buffer.
    fn pinned(
        &mut self,
        list: &[Spanned<raw::Threshold>],
        classes: usize,
        switches: &[Named<Switch>],
    ) -> Option<Vec<PinnedThreshold>> {
        let smallest = switches
            .iter()
            .map(|(_, s)| s)
            .min_by_key(|s| s.buffer_bytes);
        let mut pinned: Vec<PinnedThreshold> = Vec::with_capacity(list.len());
        let mut ok = true;
        for entry in list {
            let last = classes.saturating_sub(1) as u64;
            let class = if classes == 0 || *entry.class > last {
                let msg = format!(
                    "class {} does not exist; the plan has {classes} gradient classes (0-{last})",
                    *entry.class
                );
                self.error(entry.class.span(), msg);
                None
            } else {
                Some(*entry.class as u8)
            };
            let (mark, limit) = (*entry.mark_bytes, *entry.limit_bytes);
            for (value, field) in [
                (&entry.mark_bytes, "mark_bytes"),
                (&entry.limit_bytes, "limit_bytes"),
            ] {
                if **value % THRESHOLD_UNIT != 0 {
                    let msg = format!(
                        "{field} {} is not a whole number of KiB (1024 bytes), which every vendor can configure exactly",
                        **value
                    );
                    self.error(value.span(), msg);
                    ok = false;
                }
            }
            if limit == 0 || mark > limit {
                let msg = format!(
                    "mark_bytes ({mark}) must be at most limit_bytes ({limit}), which must be above 0"
                );
                self.error(entry.mark_bytes.span(), msg);
                ok = false;
            }
            if let Some(s) = smallest.filter(|s| limit > s.buffer_bytes) {
                let msg = format!(
                    "limit_bytes {limit} is larger than the {}-byte buffer of switch {}",
                    s.buffer_bytes, s.name
                );
                self.error(entry.limit_bytes.span(), msg);
                ok = false;
            }
            let Some(class) = class else {
                ok = false;
                continue;
            };
            if pinned.iter().any(|p| p.class == class) {
                self.error(entry.class.span(), format!("class {class} is pinned twice"));
                ok = false;
                continue;
            }
            pinned.push(PinnedThreshold {
                class,
                mark_bytes: mark,
                limit_bytes: limit,
            });
        }
        // Wide enough that no list of pinned limits can overflow it.
        let total: u128 = pinned.iter().map(|p| u128::from(p.limit_bytes)).sum();
        if let (true, Some(s), Some(last)) = (ok, smallest, list.last())
            && total > u128::from(s.buffer_bytes)
        {
            let msg = format!(
                "pinned thresholds need {total} bytes together but switch {} has a {}-byte buffer",
                s.name, s.buffer_bytes
            );
            self.error(last.span(), msg);
            ok = false;
        }
        ok.then_some(pinned)
    }
}
