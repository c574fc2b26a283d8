//! Flavors, the reservation policy, instances and planned capacity changes (pools).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// A flavor of the catalogue.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Flavor {
    /// Its id (given by the admin, or generated).
    pub id: String,
    /// Its unique name.
    pub name: String,
    /// Virtual CPUs.
    pub vcpus: u64,
    /// Memory, MB.
    pub ram: u64,
    /// Root disk, GB.
    pub disk: u64,
    /// CPU architecture, when it matters.
    pub cpu_architecture: Option<String>,
    /// Extra specs, echoed.
    pub extra_specs: BTreeMap<String, String>,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
}

/// `POST /promise/flavors` and `GET /promise/flavors/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FlavorEnvelope {
    /// The flavor.
    pub flavor: Flavor,
}

/// `GET /promise/flavors`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct FlavorList {
    /// Every flavor.
    pub flavors: Vec<Flavor>,
}

/// The request of `POST /promise/flavors`: the members of [`Flavor`] that a client sets, flat
/// or under `flavor`. Counts are JSON numbers or numeric strings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFlavor {
    /// The same members, nested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<Box<CreateFlavor>>,
    /// Its id (generated when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<serde_json::Value>,
    /// Its unique name (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<serde_json::Value>,
    /// Virtual CPUs (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<serde_json::Value>,
    /// Memory, MB (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<serde_json::Value>,
    /// Root disk, GB (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<serde_json::Value>,
    /// CPU architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_architecture: Option<serde_json::Value>,
    /// Extra specs: strings (numbers and booleans are taken as text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_specs: Option<serde_json::Value>,
}

/// The reservation policy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Policy {
    /// A reservation must start within this many days from now.
    #[serde(rename = "max-future-start-range")]
    pub max_future_start_range: Option<u32>,
    /// A reservation must end within this many days from now.
    #[serde(rename = "max-future-end-range")]
    pub max_future_end_range: Option<u32>,
    /// A reservation may last at most this many hours.
    #[serde(rename = "max-duration")]
    pub max_duration: Option<u32>,
    /// Minutes after the start when capacity not yet allocated is released.
    pub expiry: Option<u32>,
    /// Whether a higher-priority request may displace lower-priority reservations.
    pub preemption: bool,
}

/// `GET` and `PUT /promise/policy`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PolicyEnvelope {
    /// The policy.
    pub reservation: Policy,
}

/// The request of `PUT /promise/policy`, flat or under `reservation`: a number sets a limit,
/// `null` removes it, an absent member keeps it. Numbers may be numeric strings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPolicy {
    /// The same members, nested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Box<SetPolicy>>,
    /// Days within which a reservation must start.
    #[serde(
        rename = "max-future-start-range",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_future_start_range: Option<serde_json::Value>,
    /// Days within which a reservation must end.
    #[serde(
        rename = "max-future-end-range",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_future_end_range: Option<serde_json::Value>,
    /// Hours a reservation may last.
    #[serde(
        rename = "max-duration",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_duration: Option<serde_json::Value>,
    /// Minutes after the start when capacity not yet allocated is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<serde_json::Value>,
    /// Whether preemption is on (`true`/`false`, as JSON or text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<serde_json::Value>,
}

/// An instance created against a reservation or from unreserved capacity.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Instance {
    /// Its id.
    #[serde(rename = "instance-id")]
    pub instance_id: Uuid,
    /// `active` while it holds its allocations, `deleted` once they are gone.
    pub status: String,
    /// Its name.
    pub name: String,
    /// The flavor it was made from.
    pub flavor: String,
    /// The image, echoed.
    pub image: Option<String>,
    /// The reservation it draws on.
    #[serde(rename = "reservation-id")]
    pub reservation_id: Option<Uuid>,
    /// The host it was placed on.
    pub host: Uuid,
    /// Owning project.
    #[serde(rename = "project-id")]
    pub project_id: String,
    /// `high` when it draws on a reservation, else `low`.
    pub priority: String,
    /// When it was created (RFC 3339, UTC).
    #[serde(rename = "created-on")]
    pub created_on: String,
}

/// `GET /promise/instances`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InstanceList {
    /// The instances the caller may see.
    pub instances: Vec<Instance>,
}

/// The members of the `create-instance` answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InstanceCreated {
    /// The new instance's id.
    #[serde(rename = "instance-id")]
    pub instance_id: Uuid,
    /// The new instance.
    pub instance: Instance,
}

/// What a refused `create-instance` adds to the problem document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InstanceRejected {
    /// `rejected`.
    pub status: String,
}

/// The request of `POST /promise/create-instance`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CreateInstance {
    /// Its name (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<serde_json::Value>,
    /// The flavor's id or name (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<serde_json::Value>,
    /// The image, echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<serde_json::Value>,
    /// The reservation to draw on (a uuid, possibly `ResourceReservation:`-prefixed).
    #[serde(
        rename = "reservation-id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reservation_id: Option<serde_json::Value>,
    /// The zone to place it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<serde_json::Value>,
    /// The provider cloud to place it on (its `provider-id`, possibly `ResourceProvider:`-
    /// prefixed): berth also writes its allocation into that cloud's Placement.
    #[serde(
        rename = "provider-id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<serde_json::Value>,
    /// The seed's form of `provider-id`: `ResourceProvider:<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
}

/// The request of `POST /promise/destroy-instance`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DestroyInstance {
    /// The instance (required).
    #[serde(
        rename = "instance-id",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub instance_id: Option<serde_json::Value>,
}

/// One change of a planned capacity change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PoolDelta {
    /// The provider.
    pub provider: Uuid,
    /// The resource class.
    pub resource_class: String,
    /// Added (positive) or removed (negative).
    pub delta: i64,
}

/// A planned capacity change (`increase-capacity` or `decrease-capacity`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Pool {
    /// Its id.
    #[serde(rename = "pool-id")]
    pub pool_id: Uuid,
    /// The source as the client named it.
    pub source: String,
    /// When it applies (RFC 3339, UTC).
    pub start: String,
    /// Until when; `null`: for ever.
    pub end: Option<String>,
    /// Per provider and class, the amount added or removed.
    pub changes: Vec<PoolDelta>,
    /// Reservations it leaves short.
    pub affected: Vec<Uuid>,
    /// When it was made (RFC 3339, UTC).
    #[serde(rename = "created-on")]
    pub created_on: String,
}

/// `GET /promise/pools/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PoolEnvelope {
    /// The change.
    pub pool: Pool,
}

/// `GET /promise/pools`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PoolList {
    /// Every planned change.
    pub pools: Vec<Pool>,
}

/// The members of the `increase-capacity` and `decrease-capacity` answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CapacityChanged {
    /// The change's id.
    #[serde(rename = "pool-id")]
    pub pool_id: Uuid,
    /// The change.
    pub pool: Pool,
    /// Reservations it leaves short.
    pub affected: Vec<Uuid>,
    /// Members of `capacity` taken but not applied (`instances`, `addresses`).
    pub ignored: Vec<String>,
}

/// The request of `POST /promise/increase-capacity` and `/promise/decrease-capacity`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ChangeCapacity {
    /// Where: `ResourceProvider:<uuid>`, a zone, or `ResourcePool:<id>` (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
    /// The amounts: `cores`, `ram`, `gigabytes` (`instances` and `addresses` are ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<serde_json::Value>,
    /// When it applies (RFC 3339, `YYYY-MM-DD HH:MM` or `now`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<serde_json::Value>,
    /// Until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<serde_json::Value>,
    /// Decrease even when reservations are left short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<serde_json::Value>,
}
