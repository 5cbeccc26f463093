//! `mltctl groups`: DS-Sync groups per iteration, checked to mix every host.

use serde::Serialize;

use super::{Failure, InventoryArg, load, planned, print, print_json};

/// Plan DS-Sync groups: which hosts average their models together, per iteration.
///
/// From the racks: each iteration, a rack's hosts form an intra-rack group except
/// one representative per rack; representatives form the inter-rack group; the
/// racks' hosts take turns as representative. Contention splits the affected group
/// (see --contention). The pattern repeats with the printed period; it is checked to
/// mix every host (λ₂ of one period's averaging product below 1). The JSON lists,
/// per iteration, every group and, per rank, the index of its group.
#[derive(clap::Args)]
#[command(after_help = super::EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub inventory: InventoryArg,
    /// Reported contention, repeatable: `rack:NAME` (the rack's inter-rack link is
    /// slowed by other traffic) or `host:NAME` (the host's NIC is shared).
    #[arg(long, value_name = "rack:NAME|host:NAME")]
    pub contention: Vec<String>,
    /// Print the pattern as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let (inventory, contention, json) = (&args.inventory.inventory, &args.contention, args.json);
    use mltctl::plan::groups::{Contention, Pattern, Rack};
    let plan = planned(&load(inventory)?)?;
    let racks = Rack::of_plan(&plan);
    let mut reported = Contention::default();
    for item in contention {
        match item.split_once(':') {
            Some(("rack", name)) => {
                let rack = plan
                    .racks
                    .iter()
                    .position(|r| r.name == name)
                    .ok_or_else(|| {
                        Failure::Usage(format!("--contention {item}: no rack named `{name}`"))
                    })?;
                reported.racks.insert(rack);
            }
            Some(("host", name)) => {
                let rank = plan.host_rank(name).ok_or_else(|| {
                    Failure::Usage(format!("--contention {item}: no host named `{name}`"))
                })?;
                reported.workers.insert(plan.hosts[rank].rank);
            }
            _ => {
                return Err(Failure::Usage(format!(
                    "--contention {item}: expected rack:NAME or host:NAME"
                )));
            }
        }
    }
    let pattern = Pattern::divide_and_shuffle(&racks, &reported);
    if json {
        #[derive(Serialize)]
        struct Output<'a> {
            #[serde(flatten)]
            pattern: &'a Pattern,
            hosts: Vec<&'a str>,
            /// [rank][iteration]: the index of the rank's group, or null.
            group_of: Vec<Vec<Option<usize>>>,
        }
        print_json(&Output {
            pattern: &pattern,
            hosts: plan.hosts.iter().map(|h| h.name.as_str()).collect(),
            group_of: (0..pattern.workers as u32)
                .map(|r| pattern.group_of(r))
                .collect(),
        })?;
    } else {
        let name = |rank: &u32| plan.hosts[*rank as usize].name.as_str();
        let mut out = format!(
            "{} hosts in {} racks; period {} iterations; mixing: {} (λ₂ = {:.6})\n",
            pattern.workers,
            racks.len(),
            pattern.period,
            if pattern.mixing.connected {
                "every host reached"
            } else {
                "DISCONNECTED"
            },
            pattern.mixing.second_eigenvalue
        );
        for it in &pattern.iterations {
            let groups: Vec<String> = it
                .groups
                .iter()
                .map(|g| {
                    let names: Vec<&str> = g.ranks.iter().map(name).collect();
                    format!("{} [{}]", g.kind.label(), names.join(" "))
                })
                .collect();
            out.push_str(&format!("{:>4}: {}\n", it.iteration, groups.join(", ")));
        }
        print(&out)?;
    }
    if !pattern.mixing.connected {
        let apart: Vec<&str> = pattern
            .unreached()
            .into_iter()
            .map(|r| plan.hosts[r as usize].name.as_str())
            .collect();
        return Err(anyhow::anyhow!(
            "this pattern never mixes every host (λ₂ = {:.6}): {} never average with {}; \
             do not use it. Report contention only where it is (a contended host or rack \
             still needs a partner), or give the racks more hosts",
            pattern.mixing.second_eigenvalue,
            apart.join(", "),
            plan.hosts[0].name
        )
        .into());
    }
    Ok(())
}
