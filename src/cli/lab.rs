//! `mltctl lab`: a fabric on this machine to rehearse on (`up`, `status`, `down`), and
//! the emulated switches' commands.

use std::path::PathBuf;

use anyhow::Context;
use mlt_common::files::Access;
use mlt_common::units::{self, Rate, Size};
use mltctl::lab::LabShape;
use mltctl_lab::fabric::{self, Spec};

use super::{Failure, print, print_json};

/// A lab on this machine: emulated switches and namespace hosts to rehearse on.
///
/// `lab up` makes, in network namespaces (root needed): per switch an emulation of its
/// vendor's OS (SONiC config_db and GCU, EOS sessions with commit timers, NVUE revisions
/// with --confirm, Onyx CLI) behind a real OpenSSH server, per host a namespace with
/// sshd and the NIC the inventory names, cabled to its leaf; a management bridge joins
/// them to this machine. It writes an inventory, a key and known_hosts, so every mltctl
/// command works on the lab as on a real fabric. This is an emulation, not switches:
/// a forwarder routes by the static routes each switch runs and queues by the QoS it
/// runs (DSCP → queue, strict priority, RED/ECN, queue limits) at --rate per port,
/// following every commit, confirm, rollback and revert timer.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(clap::Subcommand)]
pub enum LabCommand {
    Up(UpArgs),
    /// Per switch and host: its namespace, whether SSH answers, and (switches) the
    /// static routes its data plane forwards by and the queueing its running
    /// configuration holds (per port with --json). Exit 5 when a part is missing.
    Status(StatusArgs),
    /// Remove the lab: every process in its namespaces, the namespaces, cables, bridge
    /// and directory (also after a crash).
    Down(DirArgs),
    /// Switch the enforcement of every switch's queueing off (one queue per port without
    /// RED, at the port rate: a baseline to measure against) or back on. The switches'
    /// configurations are not touched.
    Qos(QosArgs),
    Loss(LossArgs),
    Forward(ForwardArgs),
}

/// Make every host's cable lose a share of the IPv4 frames it carries into the fabric,
/// at random (a faulty link, as a training job meets it), or stop. Each frame on the
/// wire is lost on its own (a GSO super-frame loses some of its segments), at the leaf
/// port the host is cabled to, before any queue; so every path between two hosts loses
/// this share. ARP and frames to a switch's own addresses (a ping of the gateway) are
/// never lost. The forwarder follows it within about 0.2 s; `lab status` counts the
/// frames lost.
#[derive(clap::Args)]
pub struct LossArgs {
    /// The share lost: a percentage (1%, 0.5%) up to 50%, or `off` (or 0).
    #[arg(value_name = "SHARE", value_parser = lab_loss)]
    pub share: f64,
    #[command(flatten)]
    pub dir: DirArgs,
}

#[derive(clap::Args)]
pub struct QosArgs {
    /// on: the forwarder queues as each switch's running configuration says; off: it
    /// ignores that.
    #[arg(value_enum)]
    pub state: QosState,
    #[command(flatten)]
    pub dir: DirArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum QosState {
    On,
    Off,
}

/// Run the lab's data plane (`lab up` starts it; not for people).
#[derive(clap::Args)]
#[command(hide = true)]
pub struct ForwardArgs {
    #[command(flatten)]
    pub dir: DirArgs,
}

/// Bring a lab up.
#[derive(clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The lab's name: prefixes its namespaces and interfaces (1-8 lowercase letters or
    /// digits).
    #[arg(long, default_value = "mltlab")]
    pub name: String,
    /// Spine switches.
    #[arg(long, default_value_t = 2)]
    pub spines: usize,
    /// Leaf switches, one rack each.
    #[arg(long, default_value_t = 2)]
    pub leaves: usize,
    /// Hosts behind each leaf.
    #[arg(long, default_value_t = 2)]
    pub hosts_per_leaf: usize,
    /// Switch operating systems to rotate through, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "sonic,eos,cumulus,onyx")]
    pub vendors: Vec<switch_config::Vendor>,
    /// Every port's rate (1G, 100M, …): switch ports are shaped to it and the inventory
    /// gives it as every port's speed. 1 Mbit/s to 100 Gbit/s.
    #[arg(long, value_name = "RATE", default_value = "1G", value_parser = lab_rate)]
    pub rate: Rate,
    /// Every switch's buffer (192KiB, 4MiB, …): the inventory gives it as
    /// `buffer_bytes` (so the plan fits its thresholds in it) and each port may queue
    /// that much (shallow buffers: a few ms of the port rate). Whole KiB, 16 KiB to
    /// 1 GiB. Default: the generated inventory's buffers, and 4 MiB per port.
    #[arg(long, value_name = "SIZE", value_parser = lab_buffer)]
    pub buffer: Option<Size>,
    /// The fabric's MTU in bytes, 576 to 9216: the inventory's `fabric.mtu`, so every
    /// host NIC, the transport's packets and the plan's frames are this size (the
    /// switch ports carry 9,216). The lab's forwarder spends its CPU per frame, so
    /// jumbo frames (9000, as training fabrics run) let it carry more of the rate.
    #[arg(long, value_name = "BYTES", default_value_t = 1500,
          value_parser = clap::value_parser!(u16).range(576..=9216))]
    pub mtu: u16,
}

#[derive(clap::Args)]
pub struct DirArgs {
    /// The lab's directory: its inventory, key, known_hosts and switches' state.
    #[arg(
        long,
        visible_alias = "out",
        value_name = "DIR",
        default_value = "mltlab"
    )]
    pub dir: PathBuf,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Print JSON.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// Print each switch's per-port, per-queue counters (packets, ECN marks, drops by
    /// reason: not_ect, red, full) in the Prometheus text format.
    #[arg(long)]
    pub prometheus: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    match args.command {
        LabCommand::Up(args) => up(args),
        LabCommand::Status(args) => status(args),
        LabCommand::Down(args) => {
            fabric::down(&args.dir, &mut |line| eprintln!("mltctl lab: {line}"))
                .context("lab down")?;
            Ok(())
        }
        LabCommand::Qos(args) => {
            fabric::layout(&args.dir.dir).context("lab qos")?;
            let marker = fabric::qos_off_file(&args.dir.dir);
            match args.state {
                QosState::Off => mlt_common::files::write(&marker, b"", Access::Private)
                    .with_context(|| format!("cannot write {}", marker.display()))?,
                QosState::On => match std::fs::remove_file(&marker) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(anyhow::Error::from(e).context("lab qos on").into()),
                },
            }
            Ok(())
        }
        LabCommand::Loss(args) => {
            fabric::layout(&args.dir.dir).context("lab loss")?;
            let file = fabric::loss_file(&args.dir.dir);
            if args.share > 0.0 {
                mlt_common::files::write(&file, args.share.to_string().as_bytes(), Access::Private)
                    .with_context(|| format!("cannot write {}", file.display()))?;
            } else {
                match std::fs::remove_file(&file) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(anyhow::Error::from(e).context("lab loss off").into()),
                }
            }
            Ok(())
        }
        LabCommand::Forward(args) => {
            mltctl_lab::forwarder::run(&args.dir.dir).context("lab forward")?;
            Ok(())
        }
    }
}

/// `--rate`: 1 Mbit/s to 100 Gbit/s.
fn lab_rate(text: &str) -> Result<Rate, String> {
    let rate: Rate = text.parse().map_err(|e: units::UnitError| e.to_string())?;
    if rate.mbps() > 100_000 {
        return Err(format!("`{text}` is above 100 Gbit/s"));
    }
    Ok(rate)
}

/// `--buffer`: whole KiB, 16 KiB to 1 GiB.
fn lab_buffer(text: &str) -> Result<Size, String> {
    let size: Size = text.parse().map_err(|e: units::UnitError| e.to_string())?;
    if !size.bytes().is_multiple_of(1024) || !(16 << 10..=1 << 30).contains(&size.bytes()) {
        return Err(format!("`{text}` is not whole KiB from 16 KiB to 1 GiB"));
    }
    Ok(size)
}

/// `lab loss`: a percentage from 0% to 50%, `0`, or `off`; as a fraction.
fn lab_loss(text: &str) -> Result<f64, String> {
    if text == "off" || text == "0" {
        return Ok(0.0);
    }
    let percent: f64 = text
        .strip_suffix('%')
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| format!("`{text}` is not a percentage (1%, 0.5%) or `off`"))?;
    if !(0.0..=50.0).contains(&percent) {
        return Err(format!("`{text}` is not from 0% to 50%"));
    }
    Ok(percent / 100.0)
}

/// The emulated switches' commands, installed next to mltctl.
const SWITCH_BINARY: &str = "mltctl-lab-switch";

fn up(args: UpArgs) -> Result<(), Failure> {
    let dir = std::path::absolute(&args.dir.dir).context("cannot resolve --dir")?;
    let mltctl = std::env::current_exe().context("cannot find mltctl's own path")?;
    let spec = Spec {
        name: args.name.clone(),
        dir: dir.clone(),
        rate_mbps: args.rate.mbps(),
        buffer_bytes: args.buffer.map(Size::bytes),
        switch: mltctl.with_file_name(SWITCH_BINARY),
        mltctl,
    };
    let shape = LabShape {
        spines: args.spines,
        leaves: args.leaves,
        hosts_per_leaf: args.hosts_per_leaf,
        vendors: args.vendors,
        rate_mbps: spec.rate_mbps,
        buffer_bytes: spec.buffer_bytes,
        mtu: args.mtu,
    };
    let topology = |dir: &std::path::Path| {
        mltctl::lab::inventory(&args.name, dir, &fabric::key_file(dir), &shape)
    };
    let layout = fabric::up(&spec, &topology, &mut |line| {
        eprintln!("mltctl lab: {line}")
    })
    .map_err(|e| match e {
        fabric::LabError::Refused(why) => Failure::Usage(why),
        other => Failure::Error(other.into()),
    })?;
    let vendors: Vec<String> = layout
        .switches
        .iter()
        .filter_map(|s| s.vendor.clone())
        .collect();
    print(&format!(
        "lab `{name}` is up in {dir}: {switches} emulated switches ({vendors}), {hosts} hosts.\n\
         It is an emulation for rehearsal: switches forward by the routes and queue by the\n\
         QoS they run, at the port rate, and count every half second (so verify's\n\
         window can be 1 s). Work on it as on a fabric:\n\
         \n  export MLTCTL_INVENTORY={dir}/inventory.yaml MLTCTL_KNOWN_HOSTS={dir}/known_hosts \\\n\
         \x20        MLTCTL_REMOTE_DIR={dir}/remote MLTCTL_VERIFY_WINDOW=1\n\
         \x20 mltctl play playbooks/site.yml\n\
         \x20 mltctl lab status --dir {dir}\n\
         \x20 mltctl lab down --dir {dir}\n",
        name = layout.name,
        dir = dir.display(),
        switches = layout.switches.len(),
        vendors = vendors.join(", "),
        hosts = layout.hosts.len(),
    ))?;
    Ok(())
}

fn status(args: StatusArgs) -> Result<(), Failure> {
    let members = fabric::status(&args.dir.dir).context("lab status")?;
    if args.prometheus {
        print!("{}", mltctl::lab::prometheus(&members));
    } else if args.json {
        print_json(&members)?;
    } else {
        let mut text = String::new();
        for m in &members {
            let routes = m
                .static_routes
                .map(|n| format!(", runs {n} static route(s)"))
                .unwrap_or_default();
            let queueing = m
                .qos
                .as_ref()
                .map(|q| {
                    let ports: Vec<&mltctl_lab::qos::PortQos> =
                        q.ports.values().chain(q.default.as_ref()).collect();
                    let curves = ports
                        .iter()
                        .flat_map(|p| p.queues.values())
                        .filter(|q| {
                            q.mark.is_some() || q.drop_not_ect.is_some() || q.drop_all.is_some()
                        })
                        .count();
                    format!(
                        ", queueing configured on {} port(s){} with {curves} RED/ECN queue(s)",
                        q.ports.len(),
                        if q.default.is_some() {
                            " and all others"
                        } else {
                            ""
                        }
                    )
                })
                .unwrap_or_default();
            let error = m
                .dataplane_error
                .as_deref()
                .map(|e| format!(", data plane error: {e}"))
                .unwrap_or_default();
            let forwarded = m
                .counters
                .as_ref()
                .map(|c| {
                    let total = |field: &str| -> u64 {
                        c["ports"]
                            .as_object()
                            .into_iter()
                            .flat_map(|ports| ports.values())
                            .filter_map(|queues| queues.as_array())
                            .flatten()
                            .filter_map(|q| q[field].as_u64())
                            .sum()
                    };
                    let lost = c["lost"].as_u64().unwrap_or(0);
                    format!(
                        "; queued {} packet(s) to send, {} ECN-marked, dropped {} Not-ECT, {} by RED, {} full{}",
                        total("packets"),
                        total("marked"),
                        total("dropped_not_ect"),
                        total("dropped_red"),
                        total("dropped_full"),
                        if lost > 0 {
                            format!("; hosts' cables lost {lost} frame(s) (`lab loss`)")
                        } else {
                            String::new()
                        }
                    )
                })
                .unwrap_or_default();
            text.push_str(&format!(
                "{:<10} {:<6} namespace {}, ssh {}{routes}{queueing}{forwarded}{error}\n",
                m.name,
                m.kind,
                if m.namespace { "up" } else { "MISSING" },
                if m.ssh { "answers" } else { "DOES NOT ANSWER" },
            ));
        }
        print(&text)?;
    }
    let healthy = members.iter().all(|m| m.namespace && m.ssh);
    if healthy {
        Ok(())
    } else {
        Err(Failure::SwitchesUnreachable)
    }
}

#[cfg(test)]
mod tests {
    use super::lab_loss;

    #[test]
    fn loss_is_a_percentage_or_off() {
        assert_eq!(lab_loss("1%"), Ok(0.01));
        assert_eq!(lab_loss("0.5%"), Ok(0.005));
        assert_eq!(lab_loss("off"), Ok(0.0));
        assert_eq!(lab_loss("0"), Ok(0.0));
        for bad in ["1", "0.01", "60%", "-1%", "x%", ""] {
            assert!(lab_loss(bad).is_err(), "{bad}");
        }
    }
}
