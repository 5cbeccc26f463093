//! `endhost bench train`: MLT's accuracy result (Table 1) on a namespace fabric — a
//! small model trained with DDP whose gradients cross the fabric through the launched
//! transport (`endhost serve` and the mlt_transport hook) at several loss bounds, with
//! random loss at the switch, beside the same training on gloo.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{BenchSpec, collect, gloo_unavailable, host_config};
use crate::testbed::netns::{Fabric, FabricSpec};
use crate::testbed::{PYTHON, isolated_python};

/// The training script (endhost/python/examples/train_digits.py).
const TRAIN_SCRIPT: &str = include_str!("../../../python/examples/train_digits.py");
/// Where the package is in the checkout this binary was built from; used when it is
/// still there, so the bench runs the package beside it rather than an installed copy.
const PACKAGE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/python");

#[derive(Debug, Clone)]
pub struct TrainSpec {
    /// The fabric, the transport's rate control and phase timeout (its size and
    /// iterations are unused).
    pub bench: BenchSpec,
    pub loss_bounds: Vec<f64>,
    pub epochs: u32,
    pub resync_every: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Epoch {
    pub epoch: u32,
    pub accuracy: f64,
    pub seconds: f64,
    pub steps: u32,
    pub delivered_min: f64,
    pub drift: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrainRun {
    pub system: String,
    /// The transport's loss bound; `None` for gloo.
    pub loss_bound: Option<f64>,
    pub epochs: Vec<Epoch>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    pub hosts: usize,
    pub rate_mbit: u64,
    pub loss_percent: f64,
    pub switch_buffer_ms: u32,
    pub resync_every: u32,
    pub runs: Vec<TrainRun>,
}

impl TrainRun {
    fn final_accuracy(&self) -> f64 {
        self.epochs.last().map_or(0.0, |e| e.accuracy)
    }

    /// The first epoch at `target` accuracy or above.
    fn epoch_reaching(&self, target: f64) -> Option<u32> {
        self.epochs
            .iter()
            .find(|e| e.accuracy >= target)
            .map(|e| e.epoch)
    }

    fn median_seconds(&self) -> f64 {
        let mut s: Vec<f64> = self.epochs.iter().map(|e| e.seconds).collect();
        s.sort_by(f64::total_cmp);
        s.get(s.len() / 2).copied().unwrap_or(0.0)
    }
}

impl std::fmt::Display for TrainReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "digits MLP (DDP), {} hosts, links {} Mbit/s, switch buffer {} ms, {}% random loss at the switch, re-sync every {} steps",
            self.hosts, self.rate_mbit, self.switch_buffer_ms, self.loss_percent, self.resync_every
        )?;
        writeln!(
            f,
            "{:<22} {:>9} {:>9} {:>10} {:>10} {:>10} {:>11}",
            "system", "final acc", "best acc", "epoch ≥95%", "s/epoch", "delivered", "max drift"
        )?;
        for run in &self.runs {
            let best = run.epochs.iter().map(|e| e.accuracy).fold(0.0, f64::max);
            let delivered = run
                .epochs
                .iter()
                .map(|e| e.delivered_min)
                .fold(1.0, f64::min);
            let drift = run
                .epochs
                .iter()
                .filter_map(|e| e.drift)
                .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
            writeln!(
                f,
                "{:<22} {:>8.1}% {:>8.1}% {:>10} {:>10.3} {:>9.2}% {:>11}",
                run.system,
                run.final_accuracy() * 100.0,
                best * 100.0,
                run.epoch_reaching(0.95)
                    .map_or("-".into(), |e| e.to_string()),
                run.median_seconds(),
                delivered * 100.0,
                drift.map_or("-".into(), |d| format!("{d:.2e}")),
            )?;
        }
        writeln!(f, "test accuracy (%) per epoch:")?;
        write!(f, "{:>6}", "epoch")?;
        for run in &self.runs {
            write!(f, " {:>14}", run.system)?;
        }
        writeln!(f)?;
        let epochs = self.runs.iter().map(|r| r.epochs.len()).max().unwrap_or(0);
        for i in 0..epochs {
            write!(f, "{:>6}", i + 1)?;
            for run in &self.runs {
                match run.epochs.get(i) {
                    Some(e) => write!(f, " {:>14.1}", e.accuracy * 100.0)?,
                    None => write!(f, " {:>14}", "-")?,
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Runs every loss bound through the transport, then gloo, on one fabric.
pub fn run(spec: &TrainSpec, endhost: &Path, scratch: &Path) -> Result<TrainReport, String> {
    if let Some(why) = gloo_unavailable() {
        return Err(why);
    }
    let fabric_spec: &FabricSpec = &spec.bench.fabric;
    let fabric =
        Fabric::create(fabric_spec).map_err(|e| format!("cannot build the fabric: {e}"))?;
    let script = scratch.join("train_digits.py");
    std::fs::write(&script, TRAIN_SCRIPT).map_err(|e| e.to_string())?;
    let mut report = TrainReport {
        hosts: fabric_spec.hosts,
        rate_mbit: fabric_spec.rate_mbit,
        loss_percent: fabric_spec.loss_percent,
        switch_buffer_ms: fabric_spec.switch_buffer_ms,
        resync_every: spec.resync_every,
        runs: Vec::new(),
    };
    for (i, &p) in spec.loss_bounds.iter().enumerate() {
        let bench = BenchSpec {
            loss_bound: p,
            ..spec.bench.clone()
        };
        let transports = Transports::start(&fabric, &bench, endhost, scratch)?;
        let epochs = train(&fabric, spec, &script, Some(&transports), 29_500 + i as u16)
            .map_err(|e| format!("p = {p}: {e}\n{}", transports.logs()))?;
        drop(transports);
        report.runs.push(TrainRun {
            system: format!("endhost p = {p}"),
            loss_bound: Some(p),
            epochs,
        });
    }
    let port = 29_500 + spec.loss_bounds.len() as u16;
    let epochs = train(&fabric, spec, &script, None, port).map_err(|e| format!("gloo: {e}"))?;
    report.runs.push(TrainRun {
        system: "gloo".into(),
        loss_bound: None,
        epochs,
    });
    Ok(report)
}

/// `endhost serve` on every host of the fabric; stopped when dropped.
struct Transports {
    children: Vec<Child>,
    dir: PathBuf,
}

impl Transports {
    fn start(
        fabric: &Fabric,
        bench: &BenchSpec,
        endhost: &Path,
        scratch: &Path,
    ) -> Result<Transports, String> {
        let dir = scratch.join(format!("p{}", bench.loss_bound));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut transports = Transports {
            children: Vec::new(),
            dir,
        };
        let exe = endhost.to_str().ok_or("a non-UTF-8 binary path")?;
        for rank in 0..bench.fabric.hosts {
            let config = transports.file(rank, "json");
            let text = serde_json::to_string(&host_config(bench, rank)).expect("serializes");
            std::fs::write(&config, text).map_err(|e| e.to_string())?;
            let log =
                std::fs::File::create(transports.file(rank, "log")).map_err(|e| e.to_string())?;
            let child = fabric
                .command(rank, exe)
                .args(["serve", "--connect-timeout", "30", "--config"])
                .arg(&config)
                .arg("--socket")
                .arg(transports.file(rank, "sock"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("cannot start endhost serve: {e}"))?;
            transports.children.push(child);
        }
        for rank in 0..bench.fabric.hosts {
            crate::daemon::wait_ready(
                &transports.file(rank, "sock"),
                None,
                Duration::from_secs(40),
            )
            .map_err(|e| format!("host {rank}: {e}\n{}", transports.logs()))?;
        }
        Ok(transports)
    }

    fn file(&self, rank: usize, ext: &str) -> PathBuf {
        self.dir.join(format!("h{rank}.{ext}"))
    }

    fn logs(&self) -> String {
        (0..self.children.len())
            .map(|r| {
                let log = std::fs::read_to_string(self.file(r, "log")).unwrap_or_default();
                format!("--- host {r} transport log:\n{log}")
            })
            .collect()
    }
}

impl Drop for Transports {
    fn drop(&mut self) {
        for child in &self.children {
            // SAFETY: kill(2) on our own child (ip netns exec became endhost serve).
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for child in &mut self.children {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One training run on every host: through `transports` when given, else gloo.
fn train(
    fabric: &Fabric,
    spec: &TrainSpec,
    script: &Path,
    transports: Option<&Transports>,
    master_port: u16,
) -> Result<Vec<Epoch>, String> {
    let hosts = spec.bench.fabric.hosts;
    let mut children = Vec::new();
    for rank in 0..hosts {
        let package = Path::new(PACKAGE_DIR);
        let package = package.join("mlt_transport").is_dir().then_some(package);
        let mut command = fabric.command(rank, PYTHON);
        command
            .args(isolated_python(script, package))
            .args(["--epochs", &spec.epochs.to_string()])
            .args(["--resync-every", &spec.resync_every.to_string()])
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", hosts.to_string())
            .env("MASTER_ADDR", Fabric::ip(0).to_string())
            .env("MASTER_PORT", master_port.to_string())
            .env("GLOO_SOCKET_IFNAME", "eth0")
            // Four ranks on two cores: one thread each.
            .env("OMP_NUM_THREADS", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        match transports {
            Some(t) => command
                .args(["--backend", "mlt"])
                .env("MLT_SOCKET", t.file(rank, "sock")),
            None => command.args(["--backend", "gloo"]),
        };
        children.push(
            command
                .spawn()
                .map_err(|e| format!("cannot start python3: {e}"))?,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60 + 30 * u64::from(spec.epochs));
    let output = collect(children, deadline)?;
    let epochs: Vec<Epoch> = output
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    if epochs.len() != spec.epochs as usize {
        return Err(format!(
            "rank 0 reported {} of {} epochs:\n{output}",
            epochs.len(),
            spec.epochs
        ));
    }
    Ok(epochs)
}

/// The plotting script (endhost/python/examples/plot_train.py).
const PLOT_SCRIPT: &str = include_str!("../../../python/examples/plot_train.py");

/// Draws `report` to `out` (SVG or PNG, by its extension) with matplotlib.
pub fn plot(report: &TrainReport, out: &Path, scratch: &Path) -> Result<(), String> {
    let results = scratch.join("train.json");
    let script = scratch.join("plot_train.py");
    std::fs::write(&results, serde_json::to_vec(report).expect("serializes"))
        .and_then(|()| std::fs::write(&script, PLOT_SCRIPT))
        .map_err(|e| e.to_string())?;
    let done = std::process::Command::new(PYTHON)
        .args(isolated_python(&script, None))
        .arg(&results)
        .arg(out)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !done.status.success() {
        return Err(format!(
            "cannot draw {} (matplotlib: Debian package python3-matplotlib): {}",
            out.display(),
            String::from_utf8_lossy(&done.stderr).trim()
        ));
    }
    Ok(())
}
