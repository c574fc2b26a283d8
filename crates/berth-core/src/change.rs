//! The state changes decisions produce. The store persists them in one transaction, then the
//! catalog applies them; both see exactly the same list.

use crate::consumer::Consumer;
use crate::inventory::Inventory;
use crate::lease::{FloatingIp, Lease, LeaseRecord};
use crate::name::{ResourceClass, TraitName};
use crate::provider::{AggregateRecord, AttrValue, HostRecord, ProviderRow};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// One change to the inventory catalog. Each carries the full new state of what it touches.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new provider.
    ProviderCreated(ProviderRow),
    /// New name, parent, root, generation or zone of an existing provider.
    ProviderUpdated(ProviderRow),
    /// A provider and everything attached to it removed.
    ProviderDeleted(Uuid),
    /// The full inventory set of a provider replaced.
    InventoriesReplaced {
        /// The provider.
        uuid: Uuid,
        /// The new set.
        inventories: BTreeMap<ResourceClass, Inventory>,
    },
    /// The full trait set of a provider replaced.
    TraitsReplaced {
        /// The provider.
        uuid: Uuid,
        /// The new set.
        traits: BTreeSet<TraitName>,
    },
    /// The full aggregate set of a provider replaced.
    AggregatesReplaced {
        /// The provider.
        uuid: Uuid,
        /// The new set.
        aggregates: BTreeSet<Uuid>,
    },
    /// The full attribute set of a provider replaced.
    AttributesReplaced {
        /// The provider.
        uuid: Uuid,
        /// The new set.
        attributes: BTreeMap<String, AttrValue>,
    },
    /// A provider enrolled as a Blazar host, or un-enrolled (`None`).
    HostSet {
        /// The provider.
        uuid: Uuid,
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
        id: Uuid,
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
        flavor: Option<crate::promise::Flavor>,
    },
    /// The reservation policy replaced.
    PolicySet(crate::promise::Policy),
    /// A planned capacity change made (`Some`) or withdrawn (`None`).
    PoolSet {
        /// The pool's id.
        id: Uuid,
        /// Its record.
        pool: Option<crate::promise::CapacityPool>,
    },
    /// A subscription made or changed (`Some`) or removed (`None`).
    SubscriptionSet {
        /// The subscription's id.
        id: Uuid,
        /// Its record.
        subscription: Option<crate::notify::Subscription>,
    },
    /// A delivery queued or retried (`Some`), or delivered (`None`).
    DeliverySet {
        /// The notification id.
        id: String,
        /// Its record.
        delivery: Option<crate::notify::Delivery>,
    },
    /// The outbox has been expanded into deliveries up to this record sequence number.
    OutboxCursor(u64),
    /// A Promise instance recorded (`Some`) or destroyed (`None`).
    InstanceSet {
        /// The instance's id.
        id: Uuid,
        /// Its record.
        instance: Option<crate::promise::PromiseInstance>,
    },
    /// A provider taken out of service (`Some`) or returned to it (`None`).
    ProviderConditionSet {
        /// The provider.
        uuid: Uuid,
        /// Why it is out of service.
        condition: Option<crate::provider::ProviderCondition>,
    },
    /// A provider made a bare-metal node or its record changed (`Some`), or no longer a node
    /// (`None`).
    NodeSet {
        /// The provider.
        uuid: Uuid,
        /// Its node record.
        node: Option<crate::baremetal::NodeRecord>,
    },
    /// A node claim made or changed (`Some`), or gone (`None`: released, expired or deployed).
    ClaimSet {
        /// The claim's uuid.
        uuid: Uuid,
        /// Its record.
        claim: Option<crate::baremetal::NodeClaim>,
    },
    /// An idempotency key recorded with what its first request created (`Some`), or forgotten
    /// once expired (`None`).
    IdempotencySet {
        /// The key, scoped to its project and route.
        key: crate::idempotency::IdempotencyKey,
        /// Its record.
        record: Option<crate::idempotency::IdempotencyRecord>,
    },
    /// A host property (extra capability or host field) marked private or public.
    PropertyPrivacy {
        /// The property's name.
        name: String,
        /// Whether it is hidden from property listings unless asked for.
        private: bool,
    },
}
