//! `cargo bench --bench plan`: planning a large fabric, end to end and by phase.
//!
//! Generates the 16-spine, 64-leaf, 2,048-host fabric, then in one run and side by side:
//! - runs the real `mltctl` binary (`validate`, `plan`, `plan --json`) several times each,
//!   measuring wall time and the peak resident memory of every run (wait4 rusage);
//! - times the phases in this process: parse + validate, plan, JSON;
//! - at 16,384 hosts (16 spines, 512 leaves, 32 hosts a leaf: `mltctl generate`'s),
//!   `mltctl plan` and `mltctl render`, a third as many runs. Goals there: plan under
//!   0.5 s, render under 1 s, each within 300 MiB. Each render run writes into a new,
//!   empty directory (a first render: every file new); a last row renders again over
//!   the first run's files, which already hold their configurations (not a goal).
//!
//! Prints a table and, last, one JSON line. Optional: `--runs N` (default 9).

mod common;

use std::path::Path;

use common::{
    Scratch, command_row, command_row_each, large_fabric, print, runs_from_args, step_row,
};
use mltctl::inventory;
use mltctl::plan::Plan;

const GOAL_MS: f64 = 1000.0;
const GOAL_PEAK_MIB: f64 = 200.0;
const GOAL_16K_PLAN_MS: f64 = 500.0;
const GOAL_16K_RENDER_MS: f64 = 1000.0;
const GOAL_16K_PEAK_MIB: f64 = 300.0;

fn main() {
    let runs = runs_from_args(9);
    let scratch = Scratch::new("plan");
    let file = large_fabric(&scratch.0);
    let binary = Path::new(env!("CARGO_BIN_EXE_mltctl"));
    let inv = file.to_str().expect("UTF-8 path");
    let inventory = inventory::load(&file).expect("the generated fabric is valid");
    let plan = Plan::build(&inventory);
    let mut rows = vec![
        command_row(
            "mltctl validate -i FABRIC",
            binary,
            &["validate", "-i", inv],
            runs,
        ),
        command_row("mltctl plan -i FABRIC", binary, &["plan", "-i", inv], runs),
        command_row(
            "mltctl plan -i FABRIC --json",
            binary,
            &["plan", "-i", inv, "--json"],
            runs,
        ),
        step_row("  phase: read + validate inventory", runs, || {
            inventory::load(&file).unwrap()
        }),
        step_row("  phase: build plan", runs, || Plan::build(&inventory)),
        step_row("  phase: plan to JSON", runs, || {
            serde_json::to_vec(&plan).unwrap()
        }),
    ];
    let big = scratch.0.join("fabric-16384.yaml");
    let size = mltctl::generate::FabricSize {
        spines: 16,
        leaves: 512,
        hosts_per_leaf: 32,
        layers: 161,
        params_per_layer: 158_000,
    };
    std::fs::write(&big, mltctl::generate::fabric_yaml(size).expect("generate")).unwrap();
    let big = big.to_str().expect("UTF-8 path");
    let out = |run: usize| {
        let dir = scratch.0.join(format!("rendered-16384-{run}"));
        dir.to_str().expect("UTF-8 path").to_string()
    };
    let big_runs = runs.div_ceil(3);
    rows.push(command_row(
        "mltctl plan -i FABRIC-16384",
        binary,
        &["plan", "-i", big],
        big_runs,
    ));
    let render_into = |dir: String| {
        vec![
            "render".into(),
            "-i".into(),
            big.into(),
            "--out".into(),
            dir,
        ]
    };
    rows.push(command_row_each(
        "mltctl render -i FABRIC-16384 --out EMPTY-DIR",
        binary,
        big_runs,
        |run| render_into(out(run)),
    ));
    rows.push(command_row_each(
        "  again, nothing changed (--out the same DIR)",
        binary,
        big_runs,
        |_| render_into(out(0)),
    ));
    let plan_row = &rows[1];
    let met =
        plan_row.median_ms < GOAL_MS && plan_row.peak_rss_mib.is_some_and(|m| m < GOAL_PEAK_MIB);
    let within = |row: &common::Row, ms: f64| {
        row.median_ms < ms && row.peak_rss_mib.is_some_and(|m| m <= GOAL_16K_PEAK_MIB)
    };
    let met_16k = within(&rows[6], GOAL_16K_PLAN_MS) && within(&rows[7], GOAL_16K_RENDER_MS);
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    let title = format!(
        "plan benchmark: 16 spines, 64 leaves, 2048 hosts; {runs} runs each; goal for `mltctl plan`: \
         < {GOAL_MS} ms and < {GOAL_PEAK_MIB} MiB: {}\n\
         16,384 hosts, {big_runs} runs each; goals plan < {GOAL_16K_PLAN_MS} ms, render < \
         {GOAL_16K_RENDER_MS} ms, each <= {GOAL_16K_PEAK_MIB} MiB: {}",
        verdict(met),
        verdict(met_16k),
    );
    print(
        &title,
        &rows,
        serde_json::json!({"benchmark": "plan", "hosts": 2048, "goal_met": met, "goal_16384_met": met_16k}),
    );
}
