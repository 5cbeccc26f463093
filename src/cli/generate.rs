//! `mltctl generate`: a synthetic leaf-spine inventory, for scale tests.

use std::path::PathBuf;

use anyhow::Context;
use mlt_common::files::Access;
use mltctl::generate::{FabricSize, fabric_yaml_with};

use super::{Failure, print};

/// Write a synthetic leaf-spine inventory, for scale tests and benchmarks.
///
/// Every leaf links to every spine; vendors rotate through the --vendors list.
/// Management addresses (10.250.0.0/16) reach nothing: use it for dry runs.
#[derive(clap::Args)]
pub struct Args {
    /// Spine switches.
    #[arg(long, default_value_t = 16)]
    pub spines: usize,
    /// Leaf switches, one per rack.
    #[arg(long, default_value_t = 64)]
    pub leaves: usize,
    /// Hosts in each rack (at most 243).
    #[arg(long, default_value_t = 32)]
    pub hosts_per_leaf: usize,
    /// Layers of the training profile (all of equal size).
    #[arg(long, default_value_t = 161)]
    pub layers: usize,
    /// Parameters in each layer.
    #[arg(long, default_value_t = 158_000)]
    pub params_per_layer: u64,
    /// Switch operating systems to rotate through, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "sonic,eos,cumulus,onyx")]
    pub vendors: Vec<switch_config::Vendor>,
    /// Write here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let Args {
        spines,
        leaves,
        hosts_per_leaf,
        layers,
        params_per_layer,
        vendors,
        output,
    } = args;
    let size = FabricSize {
        spines,
        leaves,
        hosts_per_leaf,
        layers,
        params_per_layer,
    };
    // The fabric is a function of the arguments alone: whatever it cannot be is a
    // usage error (exit 2).
    let yaml = fabric_yaml_with(size, &vendors).map_err(|e| Failure::Usage(format!("{e:#}")))?;
    match output {
        Some(path) => mlt_common::files::write(&path, yaml.as_bytes(), Access::Readable)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print(&yaml)?,
    }
    Ok(())
}
