//! What the controller and its workers say, as JSON lines over TCP.
//!
//! Worker → controller: `{"hello":{"rank":R,"bandwidth_bps":B,"token":T}}` once, then
//! `{"ready":{"compute_seconds":S,"bandwidth_bps":B}}` after each round's computation and
//! `{"done":{"sync":N}}` when its synchronization is over. Controller → worker:
//! `{"launch":{...}}` ([`Launch`]) or `{"error":"..."}` before it closes the connection.

use serde::{Deserialize, Serialize};

use super::{Launch, WorkerId};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromWorker {
    Hello {
        rank: WorkerId,
        bandwidth_bps: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
    Ready {
        compute_seconds: f64,
        bandwidth_bps: f64,
    },
    Done {
        sync: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToWorker {
    Launch(Launch),
    Error(String),
}
