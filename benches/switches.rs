//! `cargo bench --bench switches`: rendering and diffing 1,000 switch configurations.
//!
//! Generates a fabric of 8 spines and 992 leaves (4 hosts each; vendors rotate through
//! SONiC, EOS, Cumulus and Onyx), then in one run and side by side:
//! - the real binary: `mltctl render --out DIR` (a new, empty DIR each run), then `mltctl
//!   diff --running DIR` against the first run's files (no differences), wall time and
//!   peak resident memory of each run;
//! - in this process, given the plan: rendering all 1,000, diffing all 1,000 against the
//!   rendered text, and both together.
//!
//! Prints a table and, last, one JSON line. Optional: `--runs N` (default 5).

mod common;

use std::path::Path;

use common::{Scratch, command_row, command_row_each, print, runs_from_args, step_row};
use mltctl::generate::{FabricSize, fabric_yaml};
use mltctl::inventory;
use mltctl::plan::Plan;
use mltctl::switches;

const GOAL_MS: f64 = 2000.0;
const GOAL_PEAK_MIB: f64 = 300.0;

fn main() {
    let runs = runs_from_args(5);
    let scratch = Scratch::new("switches");
    let file = scratch.0.join("fabric-1000.yaml");
    let size = FabricSize {
        spines: 8,
        leaves: 992,
        hosts_per_leaf: 4,
        layers: 161,
        params_per_layer: 158_000,
    };
    std::fs::write(&file, fabric_yaml(size).expect("generate")).expect("write inventory");
    // Each render writes into a new, empty directory (render leaves files that already
    // hold their configuration alone, which would skip the writing); the diff reads the
    // first.
    let out = |run: usize| scratch.0.join(format!("rendered-{run}"));
    let binary = Path::new(env!("CARGO_BIN_EXE_mltctl"));
    let inv = file.to_str().unwrap();
    let dir = out(0).to_str().unwrap().to_string();

    let plan = Plan::build(&inventory::load(&file).expect("the generated fabric is valid"));
    assert_eq!(plan.switches.len(), 1000);
    let rendered = switches::render_all(&plan).unwrap_or_else(|e| panic!("{e:?}"));
    let running: Vec<&str> = rendered.iter().map(|r| r.text.as_str()).collect();
    let diff_everything = || {
        let diffs: Vec<_> = plan
            .switches
            .iter()
            .zip(&running)
            .map(|(s, text)| switch_config::diff(&s.intent, Some(text)).unwrap())
            .collect();
        assert!(diffs.iter().all(|d| d.changes.is_empty()));
        diffs
    };

    let rows = vec![
        command_row_each(
            "mltctl render -i FABRIC --out EMPTY-DIR",
            binary,
            runs,
            |run| {
                let dir = out(run).to_str().unwrap().to_string();
                vec![
                    "render".into(),
                    "-i".into(),
                    inv.into(),
                    "--out".into(),
                    dir,
                ]
            },
        ),
        command_row(
            "mltctl diff -i FABRIC --running DIR",
            binary,
            &["diff", "-i", inv, "--running", &dir],
            runs,
        ),
        step_row("  in process: render 1000 (all cores)", runs, || {
            switches::render_all(&plan).unwrap()
        }),
        step_row("  in process: diff 1000 (one core)", runs, diff_everything),
        step_row(
            "  in process: render + diff from files (all cores)",
            runs,
            {
                let mut run = runs;
                move || {
                    run += 1;
                    let rendered = switches::render_all(&plan).unwrap();
                    switches::write_all(&out(run), &rendered).unwrap();
                    switches::diff_all(&plan, &out(run))
                }
            },
        ),
    ];
    let total_ms = rows[0].median_ms + rows[1].median_ms;
    let peak = rows[0]
        .peak_rss_mib
        .unwrap()
        .max(rows[1].peak_rss_mib.unwrap());
    let met = total_ms < GOAL_MS && peak < GOAL_PEAK_MIB;
    let title = format!(
        "switches benchmark: 1000 switches (8 spines, 992 leaves), {} configuration bytes; {runs} runs each\n\
         render + diff, end to end (each includes reading the inventory and planning): {total_ms:.0} ms, \
         peak {peak:.1} MiB; goal < {GOAL_MS} ms and < {GOAL_PEAK_MIB} MiB: {}",
        rendered.iter().map(|r| r.text.len()).sum::<usize>(),
        if met { "met" } else { "NOT met" }
    );
    print(
        &title,
        &rows,
        serde_json::json!({"benchmark": "switches", "switches": 1000, "render_plus_diff_ms": total_ms, "goal_met": met}),
    );
}
