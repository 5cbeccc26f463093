//! What a run shows while it works: a live progress bar on a terminal, one plain line
//! per device otherwise, JSON Lines with `--json`. Results go to standard output, the
//! progress bar to standard error.

use std::io::{self, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::{DeviceResult, Event, Status};
pub use crate::outcome::Summary;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Progress bar and text (standard error is a terminal).
    Terminal,
    /// Text lines only.
    Plain,
    /// One JSON object per line: `started`, `device`, then `summary`.
    Json,
}

pub struct Reporter {
    style: Style,
    /// Print each device's changes and commands.
    diff: bool,
    check: bool,
    bar: Option<ProgressBar>,
    in_flight: Vec<String>,
}

impl Reporter {
    pub fn new(style: Style, devices: usize, diff: bool, check: bool) -> Reporter {
        let bar = (style == Style::Terminal).then(|| {
            let bar =
                ProgressBar::with_draw_target(Some(devices as u64), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed}] {bar:30} {pos}/{len} {wide_msg}",
                )
                .expect("a valid progress template"),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Reporter {
            style,
            diff,
            check,
            bar,
            in_flight: Vec::new(),
        }
    }

    pub fn event(&mut self, event: &Event) -> io::Result<()> {
        match event {
            Event::Started(device) => {
                self.in_flight.push(device.clone());
                if self.style == Style::Json {
                    return json_line(&serde_json::json!({"event": "started", "device": device}));
                }
            }
            Event::Finished(result) => {
                self.in_flight.retain(|d| d != &result.device);
                if self.style == Style::Json {
                    return json_line(&Tagged {
                        event: "device",
                        body: result,
                    });
                }
                let text = self.device_text(result);
                match &self.bar {
                    Some(bar) => {
                        bar.inc(1);
                        bar.suspend(|| print_text(&text))?;
                    }
                    None => print_text(&text)?,
                }
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_message(self.in_flight.join(", "));
        }
        Ok(())
    }

    /// The last word of a run.
    pub fn finish(&mut self, summary: &Summary, seconds: f64, journal: &str) -> io::Result<()> {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.style == Style::Json {
            #[derive(Serialize)]
            struct Last<'a> {
                event: &'static str,
                check: bool,
                #[serde(flatten)]
                summary: &'a Summary,
                seconds: f64,
                journal: &'a str,
            }
            return json_line(&Last {
                event: "summary",
                check: self.check,
                summary,
                seconds,
                journal,
            });
        }
        let changed = if self.check {
            "would change"
        } else {
            "changed"
        };
        let total = summary.total();
        let interrupted = if summary.interrupted > 0 {
            format!(", {} interrupted", summary.interrupted)
        } else {
            String::new()
        };
        print_text(&format!(
            "{total} switch(es): {} ok, {} {changed}, {} failed, {} unreachable{interrupted} ({seconds:.1} s); journal: {journal}\n",
            summary.ok, summary.changed, summary.failed, summary.unreachable
        ))
    }

    fn device_text(&self, r: &DeviceResult) -> String {
        let detail = match (r.status, self.check) {
            (Status::Ok, _) => "no change".to_string(),
            (Status::Changed, true) => format!("{} change(s) would be made", r.changes.len()),
            (Status::Changed, false) => {
                format!("{} change(s) made, verified and confirmed", r.changes.len())
            }
            (Status::Failed | Status::Unreachable | Status::Interrupted, _) => r
                .message
                .clone()
                .unwrap_or_else(|| "no reason given".into()),
        };
        let status = if self.check && r.status == Status::Changed {
            "would change".to_string()
        } else {
            r.status.to_string()
        };
        let mut text = format!(
            "{status:<12} {} ({}, {}): {detail} [{:.1} s]\n",
            r.device, r.vendor, r.endpoint, r.seconds
        );
        if self.diff && !r.changes.is_empty() {
            for change in &r.changes {
                text.push_str(&format!("    {change}\n"));
            }
            text.push_str("  commands:\n");
            for line in r.commands.lines() {
                text.push_str(&format!("    {line}\n"));
            }
        }
        text
    }
}

#[derive(Serialize)]
struct Tagged<'a, T: Serialize> {
    event: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

fn json_line<T: Serialize>(value: &T) -> io::Result<()> {
    let mut line = serde_json::to_string(value).map_err(io::Error::other)?;
    line.push('\n');
    print_text(&line)
}

fn print_text(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}
