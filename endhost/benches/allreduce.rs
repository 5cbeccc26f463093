//! `cargo bench -p endhost --bench allreduce`: the transport against gloo
//! (torch.distributed, Debian's python3-torch) on 4 namespace hosts behind one bridge
//! "switch", 64 MiB per allreduce, switch ports shaped to 1 Gbit/s by tbf, side by side
//! in each setting:
//! - (a) deep switch buffers (50 ms), no loss; ours exact (p = 0);
//! - (b) deep buffers and 1% random loss (nftables, every packet); ours p = 0.01;
//! - (c) shallow switch buffers (1 ms); ours p = 0.01;
//!
//! then our transpose allreduce and sharded parameter server in (a) and (c). Each
//! system runs `--iterations` allreduces (default 20); the table gives median and p99
//! against the link-rate optimum 2(n−1)/n · S/B, and checks the goals: (a) at least as
//! fast as gloo; (b), (c) at least 90% of the optimum with p99 within 1.2× of our own
//! (a) median. Last, one JSON line with every report. Needs root.

use std::time::Instant;

use endhost::testbed::bench::{self, BenchReport, BenchSpec, T_HIGH_US, T_LOW_US};
use endhost::testbed::netns::FabricSpec;
use endhost_core::config::{Collective, RateControl};

fn spec(switch_buffer_ms: u32, loss_percent: f64, loss_bound: f64, gloo: bool) -> BenchSpec {
    BenchSpec {
        fabric: FabricSpec {
            hosts: 4,
            rate_mbit: 1000,
            host_buffer_ms: 0,
            switch_buffer_ms,
            loss_percent,
        },
        size_bytes: 64 << 20,
        iterations: iterations(),
        collective: Collective::Ring,
        loss_bound,
        rate_control: RateControl {
            t_low_us: T_LOW_US,
            t_high_us: T_HIGH_US,
            ..RateControl::default()
        },
        phase_ms: 30_000,
        gloo,
    }
}

fn iterations() -> u32 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--iterations")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(20)
}

fn run(name: &str, spec: &BenchSpec) -> BenchReport {
    let scratch = std::env::temp_dir().join(format!("endhost-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let started = Instant::now();
    let report = bench::run(spec, env!("CARGO_BIN_EXE_endhost").as_ref(), &scratch)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let _ = std::fs::remove_dir_all(&scratch);
    println!("\n{name} ({:.0} s)", started.elapsed().as_secs_f64());
    print!("{report}");
    report
}

fn ours(report: &BenchReport) -> &bench::SystemResult {
    &report.results[0]
}

fn main() {
    if let Some(why) = endhost::testbed::netns::unavailable() {
        eprintln!("allreduce benchmark skipped: {why}");
        return;
    }
    let a = run(
        "(a) deep switch buffers, no loss",
        &spec(50, 0.0, 0.0, true),
    );
    let b = run(
        "(b) deep buffers, 1% random loss",
        &spec(50, 1.0, 0.01, true),
    );
    let c = run(
        "(c) shallow switch buffers (1 ms)",
        &spec(1, 0.0, 0.01, true),
    );
    let mut others = Vec::new();
    for (collective, name) in [(Collective::Transpose, "transpose"), (Collective::Ps, "ps")] {
        for (setting, buffer, bound) in [("a", 50, 0.0), ("c", 1, 0.01)] {
            let mut s = spec(buffer, 0.0, bound, false);
            s.collective = collective;
            others.push(run(&format!("({setting}) {name}"), &s));
        }
    }

    println!("\ngoals");
    let a_median = ours(&a).median_s;
    match a.results.get(1) {
        Some(gloo) => println!(
            "(a) at least as fast as gloo: {:.3} s against {:.3} s: {}",
            a_median,
            gloo.median_s,
            verdict(a_median <= gloo.median_s)
        ),
        None => println!("(a) gloo did not run: {:?}", a.skipped),
    }
    for (name, report) in [("(b)", &b), ("(c)", &c)] {
        let r = ours(report);
        println!(
            "{name} ≥ 90% of the optimum, p99 ≤ 1.2 × (a) median ({:.3} s): {:.1}%, p99 {:.3} s: {}",
            1.2 * a_median,
            r.of_optimum * 100.0,
            r.p99_s,
            verdict(r.of_optimum >= 0.9 && r.p99_s <= 1.2 * a_median)
        );
        if let Some(gloo) = report.results.get(1) {
            println!(
                "{name} against gloo: {:.2}× faster (median)",
                gloo.median_s / r.median_s
            );
        }
    }
    let all: Vec<&BenchReport> = [&a, &b, &c].into_iter().chain(&others).collect();
    println!(
        "{}",
        serde_json::json!({ "bench": "allreduce", "reports": all })
    );
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}
