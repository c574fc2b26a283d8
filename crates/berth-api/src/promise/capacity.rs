//! Capacity queries: the ETSI-style `/promise/capacity/{kind}/query` and the RPC
//! `query-capacity`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The figures of a capacity query the `attributeSelector` keeps (all four by default).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Figures {
    /// Neither reserved nor allocated (the least over the window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    /// Held by reservations and not used by their consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<i64>,
    /// Usable capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// Used by consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<i64>,
}

/// One step of the utilization: the figures from `timestamp` until the next step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FiguresStep {
    /// When the step starts (RFC 3339, UTC).
    pub timestamp: String,
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
}

/// How many instances of the shape asked for fit over the whole window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InstancesAvailable {
    /// That number.
    pub available: u64,
}

/// `capacityInformation`: instances of a shape, or the figures of one resource type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum CapacityInformation {
    /// For a flavor or `resourceCriteria`.
    Instances(InstancesAvailable),
    /// For a resource type id.
    Figures(Figures),
}

/// A query's window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimePeriod {
    /// Its start (RFC 3339, UTC).
    pub start_time: String,
    /// Its end (RFC 3339, UTC).
    pub stop_time: String,
}

/// The answer of `/promise/capacity/{kind}/query`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityQueryResult {
    /// The zone asked about, or every zone.
    pub zone_id: Option<String>,
    /// When the answer was computed (RFC 3339, UTC).
    pub last_update: String,
    /// The window.
    pub time_period: TimePeriod,
    /// The capacity over the window.
    pub capacity_information: CapacityInformation,
    /// On request, the step function of the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<Vec<FiguresStep>>,
}

/// The capacity vector of a capacity query: one figure per member.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityLevels {
    /// Virtual CPUs.
    pub cores: i64,
    /// Memory, MB.
    pub ram: i64,
    /// Disk, GB.
    pub gigabytes: i64,
    /// Floating IP addresses.
    pub addresses: i64,
}

/// `capacity` of a `query-capacity` answer: the vector of the figure asked for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SelectedCapacity {
    /// Neither reserved nor allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<CapacityLevels>,
    /// Usable capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<CapacityLevels>,
    /// Held by reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<CapacityLevels>,
    /// Used by consumers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<CapacityLevels>,
}

/// One step of a `query-capacity` utilization.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityStep {
    /// When the step starts (RFC 3339, UTC).
    pub timestamp: String,
    /// The vector from then on.
    pub capacity: CapacityLevels,
}

/// The members of the `query-capacity` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityAnswer {
    /// The figure asked for, over the window.
    pub capacity: SelectedCapacity,
    /// The zone asked about, or every zone.
    pub zone: Option<String>,
    /// The reservations holding capacity in the window (`ResourceReservation:<id>`).
    pub collections: Vec<String>,
    /// The step function of the figure (empty unless asked for).
    pub utilization: Vec<CapacityStep>,
}
