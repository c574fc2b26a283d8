//! Wire types of the Placement API (`/placement`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

pub use crate::common::Link;

/// The one version of the API in the version document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "PlacementVersion")]
pub struct Version {
    /// `v1.0`.
    pub id: String,
    /// The highest microversion served, for example `1.39`.
    pub max_version: String,
    /// The lowest microversion served, `1.0`.
    pub min_version: String,
    /// `CURRENT`.
    pub status: String,
    /// `self`.
    pub links: Vec<Link>,
}

/// `GET /placement`: the version document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "PlacementVersionList")]
pub struct VersionList {
    /// The versions served.
    pub versions: Vec<Version>,
}

/// A resource provider as Placement returns it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ResourceProvider {
    /// The uuid.
    pub uuid: Uuid,
    /// The name.
    pub name: String,
    /// The generation.
    pub generation: u64,
    /// Links to sub-resources.
    pub links: Vec<Link>,
    /// Parent (from 1.14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_provider_uuid: Option<Option<Uuid>>,
    /// Root (from 1.14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_provider_uuid: Option<Uuid>,
}

/// `GET /resource_providers`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ResourceProviderList {
    /// The providers.
    pub resource_providers: Vec<ResourceProvider>,
}

/// `POST /resource_providers`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateResourceProvider {
    /// Name, 1 to 200 characters.
    pub name: String,
    /// Requested uuid.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Parent (1.14).
    #[serde(default)]
    pub parent_provider_uuid: Option<String>,
}

/// `PUT /resource_providers/{uuid}`. `parent_provider_uuid` distinguishes absent from `null`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateResourceProvider {
    /// New name.
    pub name: String,
    /// New parent (1.14); `Some(None)` is an explicit `null`.
    #[serde(default, with = "double_option")]
    #[schemars(with = "Option<String>")]
    pub parent_provider_uuid: Option<Option<String>>,
}

/// One inventory record on the wire; every field but `total` has a default.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InventoryRecord {
    /// Total units.
    pub total: i64,
    /// Reserved units.
    #[serde(default)]
    pub reserved: Option<i64>,
    /// Smallest allocation.
    #[serde(default)]
    pub min_unit: Option<i64>,
    /// Largest allocation.
    #[serde(default)]
    pub max_unit: Option<i64>,
    /// Allocation granularity.
    #[serde(default)]
    pub step_size: Option<i64>,
    /// Overcommit ratio.
    #[serde(default)]
    pub allocation_ratio: Option<f64>,
}

/// An inventory record as returned, with every field present.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct InventoryOut {
    /// Total units.
    pub total: u64,
    /// Reserved units.
    pub reserved: u64,
    /// Smallest allocation.
    pub min_unit: u64,
    /// Largest allocation.
    pub max_unit: u64,
    /// Allocation granularity.
    pub step_size: u64,
    /// Overcommit ratio.
    pub allocation_ratio: f64,
}

/// `GET /resource_providers/{uuid}/inventories`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Inventories {
    /// The provider's generation.
    pub resource_provider_generation: u64,
    /// Records by class.
    pub inventories: BTreeMap<String, InventoryOut>,
}

/// `PUT /resource_providers/{uuid}/inventories`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutInventories {
    /// The generation the caller last saw.
    pub resource_provider_generation: u64,
    /// The full new set.
    pub inventories: BTreeMap<String, InventoryRecord>,
}

/// `POST /resource_providers/{uuid}/inventories`: one record plus its class.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostInventory {
    /// The class.
    pub resource_class: String,
    /// Accepted and not checked, as Placement does: creating an inventory is not a change
    /// to one the caller has seen.
    #[serde(default)]
    pub resource_provider_generation: Option<i64>,
    /// Total units.
    pub total: i64,
    /// Reserved units.
    #[serde(default)]
    pub reserved: Option<i64>,
    /// Smallest allocation.
    #[serde(default)]
    pub min_unit: Option<i64>,
    /// Largest allocation.
    #[serde(default)]
    pub max_unit: Option<i64>,
    /// Allocation granularity.
    #[serde(default)]
    pub step_size: Option<i64>,
    /// Overcommit ratio.
    #[serde(default)]
    pub allocation_ratio: Option<f64>,
}

/// `PUT /resource_providers/{uuid}/inventories/{class}`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutInventory {
    /// The generation the caller last saw.
    pub resource_provider_generation: u64,
    /// Total units.
    pub total: i64,
    /// Reserved units.
    #[serde(default)]
    pub reserved: Option<i64>,
    /// Smallest allocation.
    #[serde(default)]
    pub min_unit: Option<i64>,
    /// Largest allocation.
    #[serde(default)]
    pub max_unit: Option<i64>,
    /// Allocation granularity.
    #[serde(default)]
    pub step_size: Option<i64>,
    /// Overcommit ratio.
    #[serde(default)]
    pub allocation_ratio: Option<f64>,
}

/// `PUT /resource_providers/{uuid}/traits`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutTraits {
    /// The generation the caller last saw.
    pub resource_provider_generation: u64,
    /// The full new set.
    pub traits: Vec<String>,
}

/// `PUT /resource_providers/{uuid}/aggregates` from 1.19.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutAggregates {
    /// The generation the caller last saw.
    pub resource_provider_generation: u64,
    /// The full new set.
    pub aggregates: Vec<String>,
}

/// `POST /resource_classes`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateResourceClass {
    /// The custom class name.
    pub name: String,
}

/// Deserializes `Option<Option<T>>` so that an explicit `null` is `Some(None)`.
pub mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Serializes the inner option.
    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    /// Wraps whatever is present, `null` included, in `Some`.
    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

/// A provider reference in the pre-1.12 allocation format.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderRef {
    /// The provider's uuid.
    pub uuid: String,
}

/// One allocation in the pre-1.12 list format.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListAllocation {
    /// The provider.
    pub resource_provider: ProviderRef,
    /// Amounts by class.
    pub resources: BTreeMap<String, i64>,
}

/// `PUT /allocations/{consumer}` before 1.12.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutAllocationsList {
    /// The allocations.
    pub allocations: Vec<ListAllocation>,
    /// Owning project (required from 1.8).
    #[serde(default)]
    pub project_id: Option<String>,
    /// Owning user (required from 1.8).
    #[serde(default)]
    pub user_id: Option<String>,
}

/// One provider's part of a consumer's allocations in the dict format (1.12).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DictAllocation {
    /// Amounts by class.
    pub resources: BTreeMap<String, i64>,
    /// Accepted and ignored, as Placement does (clients send back what they read).
    #[serde(default, skip_serializing)]
    pub generation: Option<serde_json::Value>,
}

/// A consumer's allocations in the dict format (1.12), as in `PUT /allocations/{consumer}` and
/// each value of `POST /allocations`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsumerAllocations {
    /// Allocations by provider uuid.
    pub allocations: BTreeMap<String, DictAllocation>,
    /// Owning project.
    #[serde(default)]
    pub project_id: Option<String>,
    /// Owning user.
    #[serde(default)]
    pub user_id: Option<String>,
    /// Expected consumer generation (1.28); `Some(None)` is an explicit `null`.
    #[serde(default, with = "double_option")]
    #[schemars(with = "Option<u64>")]
    pub consumer_generation: Option<Option<u64>>,
    /// Consumer type (1.38).
    #[serde(default)]
    pub consumer_type: Option<String>,
    /// Request-group mappings (1.34), accepted and ignored.
    #[serde(default)]
    pub mappings: Option<serde_json::Value>,
}

/// `GET /resource_providers/{uuid}/inventories/{class}`: one record and the provider's
/// generation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Inventory {
    /// The provider's generation.
    pub resource_provider_generation: u64,
    /// The record.
    #[serde(flatten)]
    pub record: InventoryOut,
}

/// `GET /resource_providers/{uuid}/usages`: what is used of each class the provider has.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderUsages {
    /// The provider's generation.
    pub resource_provider_generation: u64,
    /// Units used by class, zero for an unused class.
    pub usages: BTreeMap<String, u64>,
}

/// `GET /usages` (1.9): what a project (and optionally a user) holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Usages {
    /// Units by class, grouped by consumer type from 1.38.
    pub usages: UsagesBy,
}

/// The usages of `GET /usages`, flat before 1.38 and by consumer type from 1.38.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum UsagesBy {
    /// Before 1.38: units by class.
    Class(BTreeMap<String, u64>),
    /// From 1.38: by consumer type (`unknown` for untyped consumers).
    ConsumerType(BTreeMap<String, ConsumerTypeUsage>),
}

/// The usages of one consumer type (1.38).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ConsumerTypeUsage {
    /// How many consumers of the type hold something.
    pub consumer_count: u64,
    /// Units by class.
    #[serde(flatten)]
    pub classes: BTreeMap<String, u64>,
}

/// `GET /traits`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TraitList {
    /// The trait names.
    pub traits: Vec<String>,
}

/// `GET /resource_providers/{uuid}/traits`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderTraits {
    /// The provider's trait names.
    pub traits: Vec<String>,
    /// The provider's generation.
    pub resource_provider_generation: u64,
}

/// `GET /resource_providers/{uuid}/aggregates` (1.1).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderAggregates {
    /// The aggregates the provider is a member of.
    pub aggregates: Vec<Uuid>,
    /// The provider's generation (from 1.19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_provider_generation: Option<u64>,
}

/// `PUT /resource_providers/{uuid}/aggregates`: a bare list before 1.19, with the generation
/// from 1.19.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum AggregatesRequest {
    /// Before 1.19: the aggregate uuids.
    List(Vec<String>),
    /// From 1.19.
    WithGeneration(PutAggregates),
}

/// A resource class.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ResourceClass {
    /// Its name, standard or `CUSTOM_`.
    pub name: String,
    /// `self`.
    pub links: Vec<Link>,
}

/// `GET /resource_classes`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ResourceClassList {
    /// Every class, standard ones first.
    pub resource_classes: Vec<ResourceClass>,
}

/// `PUT /allocations/{consumer}`: the list format before 1.12, the dict format from 1.12.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum AllocationsRequest {
    /// From 1.12.
    Dict(ConsumerAllocations),
    /// Before 1.12.
    List(PutAllocationsList),
}

/// `POST /allocations` (1.13): several consumers' allocations, by consumer uuid.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct AllocationsBatch(pub BTreeMap<String, ConsumerAllocations>);

/// `POST /reshaper` (1.30): inventories and allocations replaced atomically.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reshape {
    /// The full new inventories of each provider named, by provider uuid.
    pub inventories: BTreeMap<String, PutInventories>,
    /// The new allocations of each consumer named, by consumer uuid.
    pub allocations: BTreeMap<String, ConsumerAllocations>,
}

/// One provider's part of a consumer's allocations, as returned.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderPart {
    /// The provider's generation (`null` if it is gone).
    pub generation: Option<u64>,
    /// Amounts by class.
    pub resources: BTreeMap<String, u64>,
}

/// `GET /allocations/{consumer}`; a consumer without allocations has only `allocations`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ConsumerAllocationsOut {
    /// Allocations by provider uuid.
    pub allocations: BTreeMap<String, ProviderPart>,
    /// Owning project (from 1.12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Owning user (from 1.12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// The consumer's generation (from 1.28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_generation: Option<u64>,
    /// The consumer's type, `unknown` when it has none (from 1.38).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_type: Option<String>,
}

/// One consumer's part of a provider's allocations.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ConsumerPart {
    /// Amounts by class.
    pub resources: BTreeMap<String, u64>,
    /// The consumer's generation (from 1.28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_generation: Option<u64>,
}

/// `GET /resource_providers/{uuid}/allocations`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderAllocations {
    /// Allocations by consumer uuid.
    pub allocations: BTreeMap<String, ConsumerPart>,
    /// The provider's generation.
    pub resource_provider_generation: u64,
}

/// `GET /allocation_candidates` (1.10).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct AllocationCandidates {
    /// The allocations that would satisfy the request, one per candidate.
    pub allocation_requests: Vec<AllocationRequest>,
    /// Every provider of every tree a candidate uses, by uuid.
    pub provider_summaries: BTreeMap<String, ProviderSummary>,
}

/// One candidate: a body `PUT /allocations/{consumer}` accepts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct AllocationRequest {
    /// What to allocate on each provider.
    pub allocations: CandidateAllocations,
    /// Which providers satisfy each request group, by suffix (from 1.34).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mappings: Option<BTreeMap<String, Vec<Uuid>>>,
}

/// A candidate's allocations: a list before 1.12, by provider uuid from 1.12.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum CandidateAllocations {
    /// From 1.12: by provider uuid.
    Dict(BTreeMap<String, CandidateResources>),
    /// Before 1.12.
    List(Vec<CandidateListAllocation>),
}

/// The resources of one provider in a candidate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CandidateResources {
    /// Amounts by class.
    pub resources: BTreeMap<String, u64>,
}

/// The provider a candidate's list-format allocation names.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CandidateProvider {
    /// The provider's uuid.
    pub uuid: Uuid,
}

/// One allocation of a candidate in the list format (before 1.12).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CandidateListAllocation {
    /// The provider.
    pub resource_provider: CandidateProvider,
    /// Amounts by class.
    pub resources: BTreeMap<String, u64>,
}

/// What a provider has and uses, in a candidates answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderSummary {
    /// Capacity and use by class: the classes requested before 1.27, every class from 1.27.
    pub resources: BTreeMap<String, ClassSummary>,
    /// The provider's traits (from 1.17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traits: Option<Vec<String>>,
    /// Its parent, `null` for a root (from 1.29).
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<Uuid>")]
    pub parent_provider_uuid: Option<Option<Uuid>>,
    /// Its tree's root (from 1.29).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_provider_uuid: Option<Uuid>,
}

/// A class's capacity and use on a provider.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ClassSummary {
    /// Total less reserved, times the allocation ratio.
    pub capacity: u64,
    /// Units allocated.
    pub used: u64,
}
