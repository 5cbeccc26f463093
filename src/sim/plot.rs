//! `mltctl sim --plot FILE.svg`: each metric against n, one row of charts per trace, a
//! line per scheme through the medians with min–max whiskers. Plain SVG: five small line
//! charts need no plotting library or fonts.

use std::fmt::Write;

use endhost_core::sync::policy::Scheme;

use super::Metrics;
use super::report::Sweep;

const PANEL_W: f64 = 260.0;
const PANEL_H: f64 = 200.0;
const MARGIN: f64 = 48.0;
const COLORS: [&str; 3] = ["#555555", "#d95f02", "#1b9e77"];
const TITLES: [&str; 5] = [
    "avg sync time (s)",
    "avg sync scale",
    "total sync",
    "total iteration",
    "wasted wait (ms)",
];

pub fn svg(sweep: &Sweep) -> String {
    let mut traces: Vec<_> = sweep.rows.iter().map(|r| r.trace).collect();
    traces.dedup();
    let width = MARGIN + Metrics::NAMES.len() as f64 * (PANEL_W + MARGIN);
    let height = 40.0 + traces.len() as f64 * (PANEL_H + 2.0 * MARGIN);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, scheme) in Scheme::ALL.iter().enumerate() {
        let x = MARGIN + i as f64 * 160.0;
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="20" x2="{}" y2="20" stroke="{}" stroke-width="2"/><text x="{}" y="24">{}</text>"#,
            x + 24.0,
            COLORS[i],
            x + 30.0,
            scheme.name()
        );
    }
    for (t, trace) in traces.iter().enumerate() {
        let top = 40.0 + t as f64 * (PANEL_H + 2.0 * MARGIN) + MARGIN / 2.0;
        for (m, metric) in Metrics::NAMES.iter().enumerate() {
            let left = MARGIN + m as f64 * (PANEL_W + MARGIN);
            let scale = if *metric == "wasted_wait" { 1e3 } else { 1.0 };
            let rows: Vec<_> = sweep.rows.iter().filter(|r| r.trace == *trace).collect();
            let xs: Vec<f64> = rows.iter().map(|r| r.workers as f64).collect();
            let (x_lo, x_hi) = bounds(&xs);
            let ys: Vec<f64> = rows
                .iter()
                .flat_map(|r| [r.min.get(metric) * scale, r.max.get(metric) * scale])
                .collect();
            let (_, y_hi) = bounds(&ys);
            let y_hi = if y_hi > 0.0 { y_hi * 1.05 } else { 1.0 };
            let px = |x: f64| left + (x - x_lo) / (x_hi - x_lo).max(1.0) * PANEL_W;
            let py = |y: f64| top + PANEL_H - y / y_hi * PANEL_H;
            let _ = writeln!(
                out,
                r##"<rect x="{left}" y="{top}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#999"/><text x="{left}" y="{}" font-weight="bold">{} — {}</text>"##,
                top - 6.0,
                trace.name(),
                TITLES[m]
            );
            for tick in 0..=4 {
                let y = y_hi * tick as f64 / 4.0;
                let _ = writeln!(
                    out,
                    r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                    left - 4.0,
                    py(y) + 4.0,
                    short(y)
                );
            }
            let mut workers: Vec<usize> = rows.iter().map(|r| r.workers).collect();
            workers.dedup();
            for n in &workers {
                let _ = writeln!(
                    out,
                    r#"<text x="{}" y="{}" text-anchor="middle">{n}</text>"#,
                    px(*n as f64),
                    top + PANEL_H + 14.0
                );
            }
            for (s, scheme) in Scheme::ALL.iter().enumerate() {
                let points: Vec<String> = rows
                    .iter()
                    .filter(|r| r.scheme == *scheme)
                    .map(|r| {
                        let x = px(r.workers as f64);
                        let _ = writeln!(
                            out,
                            r#"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{}"/>"#,
                            py(r.min.get(metric) * scale),
                            py(r.max.get(metric) * scale),
                            COLORS[s]
                        );
                        format!("{x:.1},{:.1}", py(r.median.get(metric) * scale))
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
                    points.join(" "),
                    COLORS[s]
                );
            }
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" text-anchor="middle">workers (n)</text>"#,
                left + PANEL_W / 2.0,
                top + PANEL_H + 30.0
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

fn bounds(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

fn short(y: f64) -> String {
    if y >= 1000.0 {
        format!("{:.0}", y)
    } else if y >= 10.0 {
        format!("{:.1}", y)
    } else {
        format!("{:.2}", y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::report::sweep;
    use crate::sim::{Setup, Trace};

    #[test]
    fn one_chart_per_trace_and_metric_with_a_line_per_scheme() {
        let template = Setup {
            duration: 5.0,
            ..Setup::paper(40, Trace::Cnn)
        };
        let result = sweep(
            &template,
            &[Trace::Cnn, Trace::Transformer],
            &[20, 40],
            2,
            1,
            || {},
        );
        let svg = svg(&result);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2 * 5 * 3);
        assert_eq!(svg.matches("Transformer-like — ").count(), 5);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
