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
    /// Print the reply as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let reply = Client::connect(&args.socket)
        .and_then(|mut client| client.probe(args.class, args.per_path, args.to))
        .with_context(|| format!("no transport answers on {}", args.socket.display()))?;
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
