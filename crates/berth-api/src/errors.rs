//! The error envelopes, one a surface: Placement's `errors` list, Blazar's `error_code` body,
//! Ironic's `error_message` (for the bare-metal API), and RFC 9457 problem details for berth's
//! own endpoints (Promise too).
//!
//! A Blazar or problem body may carry machine-readable members beside these (a refusal's
//! shortfalls and counter-offer, a limit, the affected leases), merged in by the server.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One error of Placement's envelope.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlacementError {
    /// The HTTP status.
    pub status: u16,
    /// The status's reason phrase.
    pub title: String,
    /// What went wrong.
    pub detail: String,
    /// The request's id (`req-<uuid>`), also in the `x-openstack-request-id` header.
    pub request_id: String,
    /// A stable code such as `placement.concurrent_update` (from microversion 1.23).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The lowest microversion served (on a 406 for an unsupported version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_version: Option<String>,
    /// The highest microversion served (on a 406 for an unsupported version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_version: Option<String>,
}

/// Placement's error envelope.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PlacementErrors {
    /// The errors, one in practice.
    pub errors: Vec<PlacementError>,
}

/// Blazar's error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BlazarError {
    /// The HTTP status.
    pub error_code: u16,
    /// What went wrong.
    pub error_message: String,
    /// The HTTP status again, as Blazar sends it.
    pub error_name: u16,
}

/// Ironic's error body, as the bare-metal API answers errors: the fault, JSON-encoded into a
/// string, as Ironic sends it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IronicError {
    /// An [`IronicFault`] as JSON text.
    pub error_message: String,
}

/// What [`IronicError::error_message`] encodes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct IronicFault {
    /// What went wrong.
    pub faultstring: String,
    /// `Client` for a 4xx answer, `Server` for a 5xx one.
    pub faultcode: String,
    /// Always null: berth shows no debugging information.
    pub debuginfo: Option<String>,
}

/// RFC 9457 problem details, for berth's own endpoints.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Problem {
    /// `https://berth.dev/errors/<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The status's reason phrase.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong.
    pub detail: String,
    /// A stable code.
    pub code: String,
    /// The request's id.
    pub request_id: String,
}

/// Why one requested item of a reservation does not fit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Shortfall {
    /// The item's position in the request.
    pub index: usize,
    /// What it asks for, for example `physical:host`.
    pub resource_type: String,
    /// How many it asks for.
    pub requested: u32,
    /// How many are free over its window.
    pub available: u32,
    /// Why, as a stable word.
    pub reason: String,
}

/// What berth offers instead: the amounts that fit now, or the earliest start of the whole.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CounterOffer {
    /// The most of each item that fits the asked window.
    pub amounts: Vec<u32>,
    /// The earliest start at which the whole request fits, if one was found.
    pub earliest_start: Option<String>,
    /// Whether the search stopped at its bound before it could answer.
    pub truncated: bool,
}

/// The members a refusal for lack of capacity adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Refusal {
    /// Each item that does not fit.
    pub reservations: Vec<Shortfall>,
    /// The counter-offer.
    pub counter_offer: CounterOffer,
}

/// The members a request over a named limit adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LimitExceeded {
    /// The limit's name.
    pub limit: String,
    /// What it allows.
    pub max: u64,
}

/// Why one node of a claim could not be taken.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct NodeRefusal {
    /// The node.
    pub node_uuid: uuid::Uuid,
    /// Why, as a stable word.
    pub reason: String,
    /// Why, in words.
    pub detail: String,
}

/// The members a refused node claim adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct NodeRefusals {
    /// Each candidate node and why it could not be taken.
    pub nodes: Vec<NodeRefusal>,
}

/// The members a refused capacity decrease adds to its error body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityInUse {
    /// The leases that hold what the change would take away.
    pub affected: Vec<uuid::Uuid>,
}
