//! A resource provider: anything with capacity (a host, a NUMA cell, a storage pool, a node).

use crate::model::baremetal::NodeRecord;
use crate::model::fence::Fence;
use crate::model::id::ProviderId;
use crate::model::inventory::Inventory;
use crate::model::name::{ResourceClass, TraitName};
use crate::model::time::Instant;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// The trait of providers that share their inventory through aggregates.
pub const SHARING_TRAIT: &str = "MISC_SHARES_VIA_AGGREGATE";

/// A provider's attributes as a sorted map, for callers building attribute changes.
pub type Attributes = BTreeMap<String, AttrValue>;

/// A typed attribute value (Blazar's "extra capabilities").
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum AttrValue {
    /// A string.
    String(String),
    /// A number; integers are exact up to 2^53.
    Number(f64),
    /// A boolean.
    Bool(bool),
}

/// What berth records about an aggregate for its own use. Placement treats aggregates as bare
/// uuids; berth may also name one and attach metadata (for example `reservation:<id>`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct AggregateRecord {
    /// Optional unique name.
    pub name: Option<String>,
    /// Key-value metadata.
    pub metadata: BTreeMap<String, String>,
}

/// What makes a root provider a Blazar host.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostRecord {
    /// Hypervisor type, for example `QEMU`.
    pub hypervisor_type: Option<String>,
    /// Compute service name.
    pub service_name: Option<String>,
    /// Whether leases may take the host.
    pub reservable: bool,
    /// When the host was enrolled.
    pub enrolled_at: Instant,
}

/// Whether a provider can serve: berth's own health state, set by an admin or a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderStatus {
    /// Serving.
    Up,
    /// Failed: its capacity is gone until it returns.
    Down,
    /// Taken out of service on purpose.
    Maintenance,
}

impl ProviderStatus {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderStatus::Up => "up",
            ProviderStatus::Down => "down",
            ProviderStatus::Maintenance => "maintenance",
        }
    }

    /// Parses the wire form (case-insensitive).
    pub fn parse(text: &str) -> Option<ProviderStatus> {
        [
            ProviderStatus::Up,
            ProviderStatus::Down,
            ProviderStatus::Maintenance,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

/// Why a provider is out of service (a provider without one is up).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProviderCondition {
    /// `Down` or `Maintenance`.
    pub status: ProviderStatus,
    /// What the admin or monitor said.
    pub reason: Option<String>,
    /// When it went out of service.
    pub since: Instant,
}

/// A resource provider as the catalog holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    pub(crate) id: i64,
    pub(crate) uuid: ProviderId,
    pub(crate) name: String,
    pub(crate) parent: Option<ProviderId>,
    pub(crate) root: ProviderId,
    pub(crate) generation: u64,
    pub(crate) inventories: BTreeMap<ResourceClass, Inventory>,
    pub(crate) usages: BTreeMap<ResourceClass, u64>,
    pub(crate) traits: BTreeSet<TraitName>,
    pub(crate) aggregates: BTreeSet<Uuid>,
    pub(crate) availability_zone: Option<String>,
    pub(crate) attributes: BTreeMap<String, AttrValue>,
    pub(crate) host: Option<HostRecord>,
    pub(crate) created_at: Instant,
    pub(crate) updated_at: Instant,
    /// What leases keep from unreserved consumers.
    pub(crate) fence: Fence,
    /// Units in use by consumers that present a reservation, by class.
    pub(crate) reserved_usages: BTreeMap<ResourceClass, u64>,
    /// Units in use by preemptible consumers that present no reservation, by class: best-effort
    /// work a reservation may evict, so admission does not count it.
    pub(crate) preemptible_usages: BTreeMap<ResourceClass, u64>,
    /// Why it is out of service, when it is.
    pub(crate) condition: Option<ProviderCondition>,
    /// What makes it a bare-metal node, when it is one.
    pub(crate) node: Option<NodeRecord>,
}

/// Everything needed to rebuild a provider from storage.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProviderRow {
    /// Internal integer id, stable for the life of the provider (also the Blazar host id).
    pub id: i64,
    /// The provider's uuid.
    pub uuid: ProviderId,
    /// Unique name.
    pub name: String,
    /// Parent provider, if nested.
    pub parent: Option<ProviderId>,
    /// Root of the tree (itself for a root).
    pub root: ProviderId,
    /// Optimistic-concurrency generation.
    pub generation: u64,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Creation time.
    pub created_at: Instant,
    /// Last update time.
    pub updated_at: Instant,
}

impl Provider {
    pub(crate) fn from_row(row: ProviderRow) -> Provider {
        Provider {
            id: row.id,
            uuid: row.uuid,
            name: row.name,
            parent: row.parent,
            root: row.root,
            generation: row.generation,
            inventories: BTreeMap::new(),
            usages: BTreeMap::new(),
            traits: BTreeSet::new(),
            aggregates: BTreeSet::new(),
            availability_zone: row.availability_zone,
            attributes: BTreeMap::new(),
            host: None,
            created_at: row.created_at,
            updated_at: row.updated_at,
            fence: Fence::default(),
            reserved_usages: BTreeMap::new(),
            preemptible_usages: BTreeMap::new(),
            condition: None,
            node: None,
        }
    }

    /// The row part of the provider (without inventories, traits and the rest).
    pub fn row(&self) -> ProviderRow {
        ProviderRow {
            id: self.id,
            uuid: self.uuid,
            name: self.name.clone(),
            parent: self.parent,
            root: self.root,
            generation: self.generation,
            availability_zone: self.availability_zone.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// Internal integer id (the Blazar host id of a host).
    pub fn id(&self) -> i64 {
        self.id
    }
    /// The uuid.
    pub fn uuid(&self) -> ProviderId {
        self.uuid
    }
    /// The unique name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The parent, if nested.
    pub fn parent(&self) -> Option<ProviderId> {
        self.parent
    }
    /// The root of the tree.
    pub fn root(&self) -> ProviderId {
        self.root
    }
    /// The generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// Inventory records by class.
    pub fn inventories(&self) -> &BTreeMap<ResourceClass, Inventory> {
        &self.inventories
    }
    /// Units in use by class (classes without use are absent).
    pub fn usages(&self) -> &BTreeMap<ResourceClass, u64> {
        &self.usages
    }
    /// The inventory of an interned class (see [`crate::catalog::Catalog::interned_class`]),
    /// found by pointer: the hot path of candidate searches, which reads no class name.
    pub fn inventory_interned(&self, class: &ResourceClass) -> Option<&Inventory> {
        self.inventories
            .iter()
            .find(|(key, _)| key.is_same(class))
            .map(|(_, record)| record)
    }

    /// Units of an interned class in use, found by pointer.
    pub fn used_interned(&self, class: &ResourceClass) -> u64 {
        self.usages
            .iter()
            .find(|(key, _)| key.is_same(class))
            .map_or(0, |(_, used)| *used)
    }

    /// Units of `class` in use.
    pub fn used(&self, class: &ResourceClass) -> u64 {
        self.usages.get(class).copied().unwrap_or(0)
    }
    /// Traits.
    pub fn traits(&self) -> &BTreeSet<TraitName> {
        &self.traits
    }
    /// Aggregates the provider belongs to.
    pub fn aggregates(&self) -> &BTreeSet<Uuid> {
        &self.aggregates
    }
    /// Availability zone.
    pub fn availability_zone(&self) -> Option<&str> {
        self.availability_zone.as_deref()
    }
    /// Typed attributes.
    pub fn attributes(&self) -> &BTreeMap<String, AttrValue> {
        &self.attributes
    }
    /// Host enrolment, if the provider is a Blazar host.
    pub fn host(&self) -> Option<&HostRecord> {
        self.host.as_ref()
    }
    /// Creation time.
    pub fn created_at(&self) -> Instant {
        self.created_at
    }
    /// Last update time.
    pub fn updated_at(&self) -> Instant {
        self.updated_at
    }
    /// The bare-metal node record, if the provider is a node.
    pub fn node(&self) -> Option<&NodeRecord> {
        self.node.as_ref()
    }
    /// Why the provider is out of service, when it is.
    pub fn condition(&self) -> Option<&ProviderCondition> {
        self.condition.as_ref()
    }
    /// Its health state.
    pub fn status(&self) -> ProviderStatus {
        self.condition
            .as_ref()
            .map_or(ProviderStatus::Up, |c| c.status)
    }
    /// Whether it serves (neither down nor in maintenance).
    pub fn is_up(&self) -> bool {
        self.condition.is_none()
    }
    /// What leases keep from unreserved consumers on this provider.
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Units of `class` in use by consumers that present a reservation.
    pub fn reserved_used(&self, class: &ResourceClass) -> u64 {
        self.reserved_usages.get(class).copied().unwrap_or(0)
    }

    /// Units of an interned class an unreserved consumer must treat as taken: what unreserved
    /// consumers use plus what leases keep (reserved consumers use part of that).
    pub fn used_unreserved_interned(&self, class: &ResourceClass) -> u64 {
        let reserved = self
            .reserved_usages
            .iter()
            .find(|(key, _)| key.is_same(class))
            .map_or(0, |(_, used)| *used);
        let fenced = self.fence.amount_interned(class);
        (self.used_interned(class) - reserved.min(self.used_interned(class))) + fenced
    }

    /// [`Provider::used_unreserved_interned`] by class name.
    pub fn used_unreserved(&self, class: &ResourceClass) -> u64 {
        let used = self.used(class);
        used - self.reserved_used(class).min(used) + self.fence.amount(class)
    }

    /// Whether any class has units in use.
    pub fn has_usage(&self) -> bool {
        self.usages.values().any(|&used| used > 0)
    }

    /// Units of `class` in use by preemptible consumers that present no reservation.
    pub fn preemptible_used(&self, class: &ResourceClass) -> u64 {
        self.preemptible_usages.get(class).copied().unwrap_or(0)
    }

    /// Units of `class` in use by consumers a reservation cannot evict (all but the
    /// preemptible ones).
    pub fn firm_used(&self, class: &ResourceClass) -> u64 {
        let used = self.used(class);
        match self.preemptible_usages.is_empty() {
            true => used,
            false => used - self.preemptible_used(class).min(used),
        }
    }

    /// Whether consumers a reservation cannot evict have units in use.
    pub fn has_firm_usage(&self) -> bool {
        self.usages
            .iter()
            .any(|(class, used)| *used > self.preemptible_used(class))
    }
}
