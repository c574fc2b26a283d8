//! Wire types of the bare-metal API (`/baremetal/v1`): its version documents, nodes, node claims
//! and Ironic allocations.

use crate::common::Link;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// One version of the bare-metal API as Ironic describes it, with its microversion range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BaremetalVersion")]
pub struct Version {
    /// `v1`.
    pub id: String,
    /// `CURRENT`.
    pub status: String,
    /// The lowest microversion, `1.1`.
    pub min_version: String,
    /// The highest microversion.
    pub version: String,
    /// Where the version's root is.
    pub links: Vec<Link>,
}

/// `GET /baremetal/`: Ironic's root, the versions served.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BaremetalRoot")]
pub struct VersionList {
    /// `OpenStack Ironic API`.
    pub name: String,
    /// What the API is.
    pub description: String,
    /// The versions served.
    pub versions: Vec<Version>,
    /// The version a client gets by default.
    pub default_version: Version,
}

/// `GET /baremetal/v1`: Ironic's `/v1` root, which names itself and its microversion range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "BaremetalV1")]
pub struct VersionRoot {
    /// `v1`.
    pub id: String,
    /// `CURRENT`.
    pub status: String,
    /// The version with its microversion range.
    pub version: Version,
    /// Where the version's root is.
    pub links: Vec<Link>,
    /// The resources served: links to `nodes`.
    pub nodes: Vec<Link>,
    /// Links to `allocations`.
    pub allocations: Vec<Link>,
}

/// A node as the API shows it. Another project's claim on it shows as `claimed` without its id.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Node {
    /// The node's uuid (its provider's).
    pub uuid: Uuid,
    /// Its unique name.
    pub name: String,
    /// The class of the one unit it offers, for example `baremetal.gold`.
    pub resource_class: String,
    /// `enroll`, `manageable`, `available`, `active`, ...
    pub provision_state: String,
    /// Whether the node is in maintenance (down or marked so).
    pub maintenance: bool,
    /// Why, when it is.
    pub maintenance_reason: Option<String>,
    /// The instance deployed on it.
    pub instance_uuid: Option<Uuid>,
    /// Whether a live claim holds it.
    pub claimed: bool,
    /// That claim, when the caller may see it.
    pub claim_uuid: Option<Uuid>,
    /// The Ironic allocation holding it, when the caller may see it.
    pub allocation_uuid: Option<Uuid>,
    /// Typed properties: strings, numbers and booleans.
    pub properties: Map<String, Value>,
    /// Its traits.
    pub traits: Vec<String>,
    /// Its availability zone.
    pub availability_zone: Option<String>,
    /// When it was enrolled (RFC 3339, UTC).
    pub created_at: String,
    /// When it last changed (RFC 3339, UTC).
    pub updated_at: String,
    /// `self`.
    pub links: Vec<Link>,
    /// After a change (`PATCH`): the leases it healed or degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<crate::status::LeaseEffects>,
}

/// `GET /baremetal/v1/nodes`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct NodeList {
    /// The nodes the filters select.
    pub nodes: Vec<Node>,
}

/// A node claim (the spec's "reservation" of a node for an instance).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Claim {
    /// The claim's uuid.
    pub uuid: Uuid,
    /// The node it holds.
    pub node_uuid: Uuid,
    /// The instance it holds the node for.
    pub instance_uuid: Uuid,
    /// The project that holds it.
    pub project_id: String,
    /// When it was made (RFC 3339, UTC).
    pub created_at: String,
    /// When it last changed (RFC 3339, UTC).
    pub updated_at: String,
    /// When it expires unless the node is deployed (RFC 3339, UTC).
    pub expires_at: String,
    /// `self`.
    pub links: Vec<Link>,
}

/// `POST /baremetal/v1/reservations` and `GET /baremetal/v1/reservations/{uuid}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ClaimEnvelope {
    /// The claim.
    pub reservation: Claim,
}

/// `GET /baremetal/v1/reservations`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ClaimList {
    /// The claims the caller may see.
    pub reservations: Vec<Claim>,
}

/// `POST /baremetal/v1/nodes`: enrol a node. Unknown fields are refused; `driver`, which
/// Ironic's clients send, is accepted and ignored (berth drives no hardware).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrolNode {
    /// The node's uuid; generated when absent.
    #[serde(default)]
    pub uuid: Option<Uuid>,
    /// Its unique name; the uuid when absent.
    #[serde(default)]
    pub name: Option<String>,
    /// The class of the one unit it offers, for example `baremetal.gold`.
    pub resource_class: String,
    /// Typed properties: strings, numbers and booleans.
    #[serde(default)]
    pub properties: Option<Map<String, Value>>,
    /// Its traits.
    #[serde(default)]
    pub traits: Option<Vec<String>>,
    /// Its availability zone.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// Where it starts: `enroll` unless said.
    #[serde(default)]
    pub provision_state: Option<String>,
    /// Ironic's hardware type (`fake-hardware`, `ipmi`, ...): accepted and ignored.
    #[serde(default)]
    pub driver: Option<String>,
}

/// `PUT /baremetal/v1/nodes/{node}/maintenance`: put a node into maintenance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMaintenance {
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `PUT /baremetal/v1/nodes/{node}/states/provision`: an Ironic provision action.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProvisionTarget {
    /// `manage`, `provide`, or `deleted` (tear an active node down).
    pub target: String,
}

/// An Ironic allocation: a node picked for a workload (the first eligible node of a class),
/// held until the allocation is deleted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Allocation {
    /// Its uuid.
    pub uuid: Uuid,
    /// Its unique name.
    pub name: Option<String>,
    /// The node it holds (`None` when it failed).
    pub node_uuid: Option<Uuid>,
    /// `active` (it holds a node) or `error` (no node fitted).
    pub state: String,
    /// Why it failed.
    pub last_error: Option<String>,
    /// The Ironic resource class asked for.
    pub resource_class: String,
    /// The nodes it could take (empty: any node of the class).
    pub candidate_nodes: Vec<Uuid>,
    /// The traits the node had to have.
    pub traits: Vec<String>,
    /// Free-form data.
    pub extra: Map<String, Value>,
    /// The project that owns it.
    pub owner: Option<String>,
    /// When it was made (RFC 3339, UTC).
    pub created_at: String,
    /// When it last changed (RFC 3339, UTC), `None` if never.
    pub updated_at: Option<String>,
    /// `self` and `bookmark`.
    pub links: Vec<Link>,
}

/// `GET /baremetal/v1/allocations`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct AllocationList {
    /// The allocations the filters keep, in uuid order.
    pub allocations: Vec<Value>,
    /// The next page, when this one is full (Ironic's `limit` and `marker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `POST /baremetal/v1/allocations`: allocate the first eligible node of a class (among the
/// candidates), or backfill an allocation for a deployed `node`. Unknown fields are refused.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAllocation {
    /// The Ironic resource class; required unless `node` is given.
    #[serde(default)]
    pub resource_class: Option<String>,
    /// The nodes it may take, by uuid or name.
    #[serde(default)]
    pub candidate_nodes: Option<Vec<String>>,
    /// The traits the node must have.
    #[serde(default)]
    pub traits: Option<Vec<String>>,
    /// A unique name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its uuid; generated when absent.
    #[serde(default)]
    pub uuid: Option<Uuid>,
    /// Free-form data.
    #[serde(default)]
    pub extra: Option<Map<String, Value>>,
    /// The owning project (an admin's choice; a member's allocations are its project's).
    #[serde(default)]
    pub owner: Option<String>,
    /// Backfill an allocation for this node (uuid or name), already deployed.
    #[serde(default)]
    pub node: Option<String>,
}

/// One operation of a JSON Patch (RFC 6902) on a node: `add`, `replace` or `remove` on `/name`,
/// `/properties/<key>`, `/traits`, `/maintenance`, `/maintenance_reason` or `/provision_state`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PatchOperation {
    /// `add`, `replace` or `remove`.
    pub op: String,
    /// The member it changes.
    pub path: String,
    /// The new value (not for `remove`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

/// `POST /baremetal/v1/nodes/{node}/deploy`: deploy an instance with the caller's live claim.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DeployNode {
    /// The claim that holds the node.
    pub reservation_uuid: Uuid,
    /// The instance it was claimed for.
    pub instance_uuid: Uuid,
}

/// `POST /baremetal/v1/reservations`: claim the first eligible node of a list, or any node of a
/// class with the traits; unknown fields are refused.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateClaim {
    /// The instance the node is claimed for.
    pub instance_uuid: Uuid,
    /// The candidate nodes, in order of preference (or give `resource_class`).
    #[serde(default)]
    pub node_uuid: Option<Vec<Uuid>>,
    /// Any node of this class (instead of `node_uuid`).
    #[serde(default)]
    pub resource_class: Option<String>,
    /// With a class: the traits the node must have.
    #[serde(default)]
    pub traits: Option<Vec<String>>,
    /// How long the claim holds the node before deployment, 1 to 604,800 seconds.
    #[serde(default)]
    pub ttl: Option<u64>,
}
