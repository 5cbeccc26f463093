//! What a run shows while it works: a live progress bar on a terminal, one plain line
//! per device otherwise, JSON Lines with `--json`. Results go to standard output, the
//! progress bar to standard error.

use std::io::{self, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::{DeviceResult, Event, Status};
pub use mlt_common::outcome::Summary;

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
    /// Every change on its own line, not folded.
    verbose: bool,
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
            verbose: false,
            check,
            bar,
            in_flight: Vec::new(),
        }
    }

    pub fn verbose(&mut self, verbose: bool) {
        self.verbose = verbose;
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

    /// The last word of a run; `unconfirmed`: how many changes of which run wait for
    /// `mltctl confirm`.
    pub fn finish(
        &mut self,
        summary: &Summary,
        seconds: f64,
        journal: &str,
        unconfirmed: Option<(usize, &str)>,
    ) -> io::Result<()> {
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
                #[serde(skip_serializing_if = "Option::is_none")]
                unconfirmed: Option<usize>,
                #[serde(skip_serializing_if = "Option::is_none")]
                run: Option<&'a str>,
            }
            return json_line(&Last {
                event: "summary",
                check: self.check,
                summary,
                seconds,
                journal,
                unconfirmed: unconfirmed.map(|(n, _)| n),
                run: unconfirmed.map(|(_, run)| run),
            });
        }
        let changed = if self.check {
            "would change"
        } else {
            "changed"
        };
        let total = summary.total();
        let mut rare = String::new();
        if summary.interrupted > 0 {
            rare.push_str(&format!(", {} interrupted", summary.interrupted));
        }
        if summary.skipped > 0 {
            rare.push_str(&format!(", {} skipped", summary.skipped));
        }
        let mut text = format!(
            "{total} switch(es): {} ok, {} {changed}, {} failed, {} unreachable{rare} ({seconds:.1} s); journal: {journal}\n",
            summary.ok, summary.changed, summary.failed, summary.unreachable
        );
        if let Some((count, run)) = unconfirmed {
            text.push_str(&format!(
                "{count} change(s) of run {run} wait for a confirm: test traffic, then \
                 `mltctl confirm` keeps them and `mltctl rollback --to {run}` undoes them; \
                 unconfirmed, they revert by themselves\n"
            ));
        }
        print_text(&text)
    }

    fn device_text(&self, r: &DeviceResult) -> String {
        let detail = match (r.status, self.check) {
            (Status::Ok, _) => "no change".to_string(),
            (Status::Changed, true) => format!("{} change(s) would be made", r.change_count),
            (Status::Changed, false) => match &r.unconfirmed {
                Some(note) => format!(
                    "{} change(s) made and verified, NOT confirmed ({note})",
                    r.change_count
                ),
                None => format!("{} change(s) made, verified and confirmed", r.change_count),
            },
            (Status::Failed | Status::Unreachable | Status::Interrupted | Status::Skipped, _) => r
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
        if self.diff && r.change_count > 0 {
            let folded;
            let changes = if self.verbose {
                &r.changes
            } else {
                folded = switch_config::fold::fold(&r.changes);
                &folded
            };
            for change in changes {
                text.push_str(&format!("    {change}\n"));
            }
            text.push_str("  commands:\n");
            for line in r.commands.lines() {
                text.push_str(&format!("    {line}\n"));
            }
            match &r.switch_diff {
                Some(own) => {
                    text.push_str("  the switch's own diff:\n");
                    for line in own.lines() {
                        text.push_str(&format!("    {line}\n"));
                    }
                }
                None if r.vendor == switch_config::Vendor::Onyx => text.push_str(
                    "  the switch's own diff: none (Onyx has no candidate configuration)\n",
                ),
                None => {}
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
