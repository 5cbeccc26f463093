//! `endhost probe`: a class probe burst through a launched transport, and what has
//! arrived from its peers so far (`mltctl verify` runs it on every host).

use std::path::PathBuf;

use anyhow::Context;
use endhost::daemon::Client;

/// Send a burst of probes with a class's DSCP to every peer (or one, --to) over every
/// path (half ECN-capable, MTU-sized), and print what arrived from peers so far, by
/// DSCP, with the CE marks switches set. The transport uses the DSCP it runs for the
/// class.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    /// The running transport's Unix socket (`serve --socket`).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// The class whose DSCP the probes carry.
    #[arg(long, value_name = "N")]
    pub class: u8,
    /// Probes to each peer on each path (0: send none, only read the arrivals; at
    /// most 100000).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub per_path: u32,
    /// Only to this peer (its rank): with every other host aiming at it, an incast that
    /// fills the queue of its leaf's port.
    #[arg(long, value_name = "RANK")]
    pub to: Option<u16>,
    /// Send at this time (Unix seconds, as `date +%s.%N` prints; at most a minute
    /// ahead), not at once: hosts aiming at one start together, so their bursts meet
    /// at its port (their clocks must agree, as NTP keeps them).
    #[arg(long, value_name = "SECONDS", value_parser = start_time)]
    pub at: Option<f64>,
    /// Print the reply as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The most `--at` may lie ahead.
const AT_MOST_AHEAD: f64 = 60.0;

fn start_time(text: &str) -> Result<f64, String> {
    let at: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a time in Unix seconds"))?;
    let ahead = at - unix_now();
    if !at.is_finite() || ahead > AT_MOST_AHEAD {
        return Err(format!(
            "{text} is {ahead:.0} s ahead of this host's clock (at most {AT_MOST_AHEAD} s)"
        ));
    }
    Ok(at)
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut client = Client::connect(&args.socket)
        .with_context(|| format!("no transport answers on {}", args.socket.display()))?;
    if let Some(at) = args.at {
        let wait = (at - unix_now()).clamp(0.0, AT_MOST_AHEAD);
        std::thread::sleep(std::time::Duration::from_secs_f64(wait));
    }
    let reply = client
        .probe(args.class, args.per_path, args.to)
        .with_context(|| format!("the transport on {} did not answer", args.socket.display()))?;
    if let Some(error) = &reply.error {
        anyhow::bail!("{error}");
    }
    if args.json {
        println!("{}", serde_json::to_string(&reply).expect("serializable"));
        return Ok(());
    }
    println!(
        "class {} (DSCP {}): {} probes queued",
        args.class, reply.dscp, reply.queued
    );
    for a in &reply.arrivals {
        println!(
            "arrived with DSCP {}: {} packets ({} CE), {} probes ({} CE)",
            a.dscp, a.packets, a.ce, a.probes, a.probes_ce
        );
    }
    Ok(())
}
