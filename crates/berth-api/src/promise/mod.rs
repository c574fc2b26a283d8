//! Wire types of the OPNFV Promise interface (`/promise`): the ETSI-style capacity and
//! reservation endpoints, Promise's RPC endpoints and their `{"result", "message"}` envelope,
//! flavors, the reservation policy, instances, planned capacity changes, subscriptions and the
//! provider clouds registered with `add-provider`.
//!
//! Member names follow Promise: camelCase on the ETSI endpoints, kebab-case on the RPC ones.

mod admin;
mod asks;
mod capacity;
mod input;
mod providers;
mod reservations;
mod subscriptions;

pub use admin::*;
pub use asks::*;
pub use capacity::*;
pub use input::*;
pub use providers::*;
pub use reservations::*;
pub use subscriptions::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The answer of a Promise RPC: `{"result": "ok", "message": ..., ...}` with the members of
/// `data` alongside.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RpcAnswer<T> {
    /// `ok`.
    pub result: String,
    /// What was done.
    pub message: String,
    /// The RPC's own members.
    #[serde(flatten)]
    pub data: T,
}

impl<T> RpcAnswer<T> {
    /// The `ok` answer with `message` and `data`.
    pub fn ok(message: impl Into<String>, data: T) -> RpcAnswer<T> {
        RpcAnswer {
            result: "ok".to_owned(),
            message: message.into(),
            data,
        }
    }
}

/// No members of its own (an RPC answer that only says what was done).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Nothing {}

/// What a failed RPC adds to the problem document: Promise's `result` (`conflict` for 409,
/// else `error`) and `message`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RpcFailure {
    /// `conflict` or `error`.
    pub result: String,
    /// The problem's detail.
    pub message: String,
}

/// A time window (RFC 3339, UTC).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeWindow {
    /// Its start.
    pub start_time: String,
    /// Its end.
    pub end_time: String,
}
