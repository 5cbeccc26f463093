//! `mltctl plan`: every setting the inventory implies, as text, JSON or one host's files.

use mltctl::plan::explain;

use super::{Failure, InventoryArg, host_rank, layer_names, load, planned, print, print_json};

/// Plan queues, thresholds, routes and host settings; changes nothing.
///
/// Without options, prints per queue the DSCP value, the layers carried, the
/// thresholds and the loss the model predicts. --explain adds what every switch and
/// host would be configured with.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Print the whole plan as JSON (for launchers and scripts).
    #[arg(long, conflicts_with = "explain")]
    pub json: bool,
    /// Also list what every switch and host would be configured with: queues, static
    /// routes, path addresses, neighbours.
    #[arg(long)]
    pub explain: bool,
    /// Print only this host's transport configuration, as JSON (what `endhost run
    /// --config` reads).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["json", "explain"])]
    pub host: Option<String>,
    /// With --host: print the host's network plan instead (what `endhost configure
    /// --plan` reads): NIC, MTU, addresses, static neighbours, routes.
    #[arg(long, requires = "host", conflicts_with = "ipmac")]
    pub network: bool,
    /// With --host: print the host's IP=MAC file instead (OptiReduce's format): every
    /// peer address and path address with its next-hop MAC.
    #[arg(long, requires = "host")]
    pub ipmac: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let Args {
        inventory,
        json,
        explain,
        host,
        network,
        ipmac,
    } = args;
    let inv = load(&inventory.inventory)?;
    let plan = planned(&inv)?;
    if let Some(name) = host {
        let rank = host_rank(&plan, &name)?;
        if network {
            let datapath = plan.job.datapath.kind;
            print_json(&mltctl::plan::hosts::network_plan(&plan, rank, datapath))?;
        } else if ipmac {
            print(&mltctl::plan::hosts::ip_mac(&plan, rank))?;
        } else {
            print_json(&plan.transport_config(rank))?;
        }
    } else if json {
        print_json(&plan)?;
    } else if explain {
        print(&explain::explain(&plan, &layer_names(&inv)))?;
    } else {
        print(&explain::overview(&plan, &layer_names(&inv)))?;
    }
    Ok(())
}
