//! Provider status (up, down, maintenance), shared by the Placement and Blazar surfaces and the
//! dashboard: the request that changes it, the condition shown, and what a change did to leases.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `PUT .../status`: `{"status": "up"|"down"|"maintenance", "reason": "..."}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusChange {
    /// `up`, `down` or `maintenance`.
    pub status: String,
    /// Why, shown beside the status.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A provider's status, reason and since when.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Condition {
    /// `up`, `down` or `maintenance`.
    pub status: String,
    /// Why it is not up, if said.
    pub reason: Option<String>,
    /// Since when it is not up (Blazar's lease time format).
    pub since: Option<String>,
}

/// What a status change did to leases.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct LeaseEffects {
    /// Leases not yet started, moved whole onto other hosts.
    pub healed: Vec<Uuid>,
    /// Leases not yet started that could not be moved whole.
    pub degraded: Vec<Uuid>,
    /// Running leases that lost what they held on the provider (left in place).
    pub flagged: Vec<Uuid>,
    /// Leases whose missing resources returned with the provider.
    pub restored: Vec<Uuid>,
}

/// A provider's condition as its status routes answer it: after a change (`PUT`), with what the
/// change did to leases.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderCondition {
    /// Status, reason and since when.
    #[serde(flatten)]
    pub condition: Condition,
    /// After a change: what it did to leases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<LeaseEffects>,
}
