//! The state changes decisions produce. The store persists them in one transaction, then the
//! catalog applies them; both see exactly the same list.

use crate::model::baremetal::{NodeClaim, NodeRecord};
use crate::model::budget::Budget;
use crate::model::cloud::ProviderCloud;
use crate::model::consumer::Consumer;
use crate::model::id::{LeaseId, ProviderId};
use crate::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use crate::model::inventory::Inventory;
use crate::model::lease::{FloatingIp, Lease, LeaseRecord};
use crate::model::name::{ResourceClass, TraitName};
use crate::model::notify::{Delivery, Subscription};
use crate::model::promise::{CapacityPool, Flavor, Policy, PromiseInstance};
use crate::model::provider::{
    AggregateRecord, AttrValue, HostRecord, ProviderCondition, ProviderRow,
};
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use uuid::Uuid;

/// The version of [`Change`]'s serde form that this build writes and reads.
pub const CHANGE_FORMAT: u16 = 1;

/// What a decision returns: the changes to persist and apply, or why it refused.
pub type Decision = Result<Vec<Change>, Rejection>;

/// One change to the inventory catalog. Each carries the full new state of what it touches.
///
/// Its serde form is the replication log's encoding (format [`CHANGE_FORMAT`]): every replica
/// applies the changes another committed by decoding them, so a renamed variant or field is a
/// new format, never an edit of this one (the store's tests pin the bytes of each variant).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Change {
    /// A new provider.
    ProviderCreated(ProviderRow),
    /// New name, parent, root, generation or zone of an existing provider.
    ProviderUpdated(ProviderRow),
    /// A provider and everything attached to it removed.
    ProviderDeleted(ProviderId),
    /// The full inventory set of a provider replaced.
    InventoriesReplaced {
        /// The provider.
        uuid: ProviderId,
        /// The new set.
        inventories: BTreeMap<ResourceClass, Inventory>,
    },
    /// The full trait set of a provider replaced.
    TraitsReplaced {
        /// The provider.
        uuid: ProviderId,
        /// The new set.
        traits: BTreeSet<TraitName>,
    },
    /// The full aggregate set of a provider replaced.
    AggregatesReplaced {
        /// The provider.
        uuid: ProviderId,
        /// The new set.
        aggregates: BTreeSet<Uuid>,
    },
    /// The full attribute set of a provider replaced.
    AttributesReplaced {
        /// The provider.
        uuid: ProviderId,
        /// The new set.
        attributes: BTreeMap<String, AttrValue>,
    },
    /// A provider enrolled as a Blazar host, or un-enrolled (`None`).
    HostSet {
        /// The provider.
        uuid: ProviderId,
        /// The host record.
        host: Option<HostRecord>,
    },
    /// An aggregate described (`Some`: name and metadata set) or forgotten (`None`).
    AggregateDescribed {
        /// The aggregate.
        uuid: Uuid,
        /// Its record.
        record: Option<AggregateRecord>,
    },
    /// A consumer's allocations replaced (`Some`), or the consumer removed with all it held (`None`).
    ConsumerSet {
        /// The consumer.
        uuid: Uuid,
        /// Its new state.
        consumer: Option<Consumer>,
    },
    /// A custom resource class created.
    ResourceClassCreated(ResourceClass),
    /// A custom resource class deleted.
    ResourceClassDeleted(ResourceClass),
    /// A custom trait created.
    TraitCreated(TraitName),
    /// A custom trait deleted.
    TraitDeleted(TraitName),
    /// A lease's whole new state (`Some`), or the lease deleted with all it held (`None`).
    LeaseSet {
        /// The lease.
        id: LeaseId,
        /// Its new state.
        lease: Option<Box<Lease>>,
    },
    /// A floating IP registered (`Some`) or removed (`None`).
    FloatingIpSet {
        /// The address's id.
        id: Uuid,
        /// Its record.
        fip: Option<FloatingIp>,
    },
    /// An entry appended to the durable lifecycle record (the notification outbox).
    LeaseRecorded(LeaseRecord),
    /// A flavor created (`Some`) or deleted (`None`).
    FlavorSet {
        /// The flavor's id.
        id: String,
        /// Its record.
        flavor: Option<Flavor>,
    },
    /// The reservation policy replaced.
    PolicySet(Policy),
    /// A project's budget set or charged (`Some`), or removed (`None`) (berth).
    BudgetSet {
        /// The project.
        project: String,
        /// Its budget.
        budget: Option<Box<Budget>>,
    },
    /// A provider cloud registered (`Some`) or removed (`None`).
    ProviderCloudSet {
        /// The cloud's provider id.
        id: Uuid,
        /// Its record.
        cloud: Option<ProviderCloud>,
    },
    /// A planned capacity change made (`Some`) or withdrawn (`None`).
    PoolSet {
        /// The pool's id.
        id: Uuid,
        /// Its record.
        pool: Option<CapacityPool>,
    },
    /// A subscription made or changed (`Some`) or removed (`None`).
    SubscriptionSet {
        /// The subscription's id.
        id: Uuid,
        /// Its record.
        subscription: Option<Subscription>,
    },
    /// A delivery queued or retried (`Some`), or delivered (`None`).
    DeliverySet {
        /// The notification id.
        id: String,
        /// Its record.
        delivery: Option<Delivery>,
    },
    /// The outbox has been expanded into deliveries up to this record sequence number.
    OutboxCursor(u64),
    /// A Promise instance recorded (`Some`) or destroyed (`None`).
    InstanceSet {
        /// The instance's id.
        id: Uuid,
        /// Its record.
        instance: Option<PromiseInstance>,
    },
    /// A provider taken out of service (`Some`) or returned to it (`None`).
    ProviderConditionSet {
        /// The provider.
        uuid: ProviderId,
        /// Why it is out of service.
        condition: Option<ProviderCondition>,
    },
    /// A provider made a bare-metal node or its record changed (`Some`), or no longer a node
    /// (`None`).
    NodeSet {
        /// The provider.
        uuid: ProviderId,
        /// Its node record.
        node: Option<NodeRecord>,
    },
    /// A node claim made or changed (`Some`), or gone (`None`: released, expired or deployed).
    ClaimSet {
        /// The claim's uuid.
        uuid: Uuid,
        /// Its record.
        claim: Option<NodeClaim>,
    },
    /// An idempotency key recorded with what its first request created (`Some`), or forgotten
    /// (`None`). Only the store keeps the records: the catalog holds none, and a decision
    /// that names a key is given the key's record as the store holds it under the writer lock.
    IdempotencySet {
        /// The key, scoped to its project and route.
        key: Arc<IdempotencyKey>,
        /// Its record.
        record: Option<Arc<IdempotencyRecord>>,
    },
    /// A host property (extra capability or host field) marked private or public.
    PropertyPrivacy {
        /// The property's name.
        name: String,
        /// Whether it is hidden from property listings unless asked for.
        private: bool,
    },
}

impl Change {
    /// Whether the change may free capacity a waitlisted lease could take: a lease deleted or
    /// changed after its creation (ended, shrunk, moved, healed, lapsed), an allocation
    /// released, a provider's inventory, condition or enrollment changed, a planned capacity
    /// change made or withdrawn. A lease's creation frees nothing.
    pub fn may_free_capacity(&self) -> bool {
        match self {
            Change::LeaseSet { lease: None, .. }
            | Change::ConsumerSet { consumer: None, .. }
            | Change::InventoriesReplaced { .. }
            | Change::ProviderConditionSet { .. }
            | Change::HostSet { .. }
            | Change::PoolSet { .. }
            | Change::ClaimSet { claim: None, .. } => true,
            Change::LeaseSet {
                lease: Some(lease), ..
            } => lease.updated_at != lease.created_at,
            _ => false,
        }
    }
}

/// An entry of `lease`'s lifecycle record, as the change that appends it. The details always
/// carry the lease's `project_id` (the record outlives the lease; notifications are routed by
/// project).
pub(crate) fn record(lease: &Lease, kind: &str, at: Instant, details: serde_json::Value) -> Change {
    record_for(lease, kind, at, details, &lease.project_id)
}

/// An entry of `lease`'s lifecycle record addressed to `project` (its `project_id`, which routes
/// notifications): the lease's own project, or one the lease is shared with.
pub(crate) fn record_for(
    lease: &Lease,
    kind: &str,
    at: Instant,
    mut details: serde_json::Value,
    project: &str,
) -> Change {
    if let serde_json::Value::Object(map) = &mut details {
        map.insert("project_id".into(), project.into());
    }
    Change::LeaseRecorded(LeaseRecord {
        lease_id: lease.id,
        kind: kind.to_owned(),
        at,
        details: details.to_string(),
    })
}
