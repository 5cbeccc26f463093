//! Test and benchmark tooling, kept apart from the transport: network-namespace
//! fabrics and veth pairs ([`netns`]), and the benchmarks `endhost bench` runs
//! ([`bench`]).

pub mod bench;
pub mod netns;
