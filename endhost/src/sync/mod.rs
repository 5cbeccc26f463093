//! The Selective Reduce controller at run time, over TCP: the service that drives a
//! policy of [`endhost_core::sync`] with the workers' reports ([`service`]), a
//! worker's side of its protocol ([`client`]), and a training worker ([`worker`]).

pub mod client;
pub mod service;
pub mod worker;
