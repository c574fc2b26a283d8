//! Wire types of the Placement API (`/placement`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

pub use crate::common::Link;

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
