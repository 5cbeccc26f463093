//! The lab: a fabric on one machine to rehearse on. Its switches are emulations (a
//! vendor's CLI behind a real OpenSSH server, see [`emulator`]), not switches; every
//! mltctl command works on the lab as on a real fabric, and nothing outside this crate
//! (and `mltctl lab`, which drives it) knows it is a lab. Its switches' queueing, fed
//! the transport's traffic at exact times ([`arrivals`]), is also the independent check
//! of the planner's loss predictions (`plan --explain`, tests/thresholds.rs).

pub mod arrivals;
pub mod dataplane;
pub mod emulator;
pub mod fabric;
pub mod forwarder;
pub mod qos;
pub mod queueing;
