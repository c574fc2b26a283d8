//! Why the core refused a command. Rejections are values; each surface maps them to its own
//! status codes and error bodies.

use crate::model::baremetal::Unclaimable;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::inventory::InventoryError;
use crate::model::promise::PolicyBreach;
use crate::model::time::Instant;
use uuid::Uuid;

/// What a reservation has left for instances: their count, and the cores and memory its
/// compute reservations hold and no instance uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Room {
    /// Instances.
    pub instances: u64,
    /// VCPUs.
    pub vcpus: u64,
    /// Memory, MB.
    pub ram_mb: u64,
}

/// Every way an inventory command can be refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejection {
    /// No provider with that uuid.
    #[error("No resource provider with uuid {0} found")]
    ProviderNotFound(ProviderId),
    /// No Blazar host with that id.
    #[error("Host {0} not found")]
    HostNotFound(String),
    /// The named parent does not exist.
    #[error("parent provider UUID does not exist: {0}")]
    ParentNotFound(ProviderId),
    /// Another provider already has this name.
    #[error("Conflicting resource provider name: {0} already exists")]
    DuplicateName(String),
    /// Another provider already has this uuid.
    #[error("Conflicting resource provider uuid: {0} already exists")]
    DuplicateUuid(ProviderId),
    /// Another aggregate already has this name.
    #[error("An aggregate named {0} already exists")]
    DuplicateAggregateName(String),
    /// The name is empty or too long.
    #[error("name must be between 1 and 200 characters")]
    BadName,
    /// The new parent would make the tree a loop.
    #[error("creating loop in the provider tree is not allowed.")]
    ParentCycle,
    /// A provider named as its own parent when created.
    #[error(
        "parent provider UUID cannot be same as UUID. Please set parent provider UUID to None if there is no parent."
    )]
    ParentIsSelf,
    /// The tree would be deeper than the limit.
    #[error("the provider tree would be too deep")]
    TreeTooDeep,
    /// Re-parenting is not allowed at this microversion.
    #[error("re-parenting a provider is not currently allowed")]
    ReparentNotAllowed,
    /// Un-parenting is not allowed at this microversion.
    #[error("un-parenting a provider is not currently allowed")]
    UnparentNotAllowed,
    /// The caller's generation is stale.
    #[error(
        "resource provider generation conflict: the provider {uuid} has generation {actual}, the request gave {expected}. Please retry this request"
    )]
    GenerationConflict {
        /// The provider.
        uuid: ProviderId,
        /// What the caller sent.
        expected: u64,
        /// What is stored.
        actual: u64,
    },
    /// The provider has child providers.
    #[error("Unable to delete parent resource provider {0}: It has child resource providers.")]
    ProviderHasChildren(ProviderId),
    /// The provider has allocations.
    #[error("Unable to delete resource provider {0}: Resource provider has allocations.")]
    ProviderInUse(ProviderId),
    /// The resource class does not exist.
    #[error("No such resource class {0}")]
    UnknownResourceClass(String),
    /// One or more traits do not exist.
    #[error("No such trait(s): {0}.")]
    UnknownTraits(String),
    /// An inventory record is invalid.
    #[error("Unable to update inventory for resource provider {uuid}: {class}: {error}")]
    BadInventory {
        /// The provider.
        uuid: ProviderId,
        /// The class.
        class: String,
        /// The rule broken.
        error: InventoryError,
    },
    /// Removing this inventory would strand allocations.
    #[error("Inventory for '{class}' on resource provider '{uuid}' in use.")]
    InventoryInUse {
        /// The provider.
        uuid: ProviderId,
        /// The class.
        class: String,
    },
    /// The provider has no inventory of this class.
    #[error("No inventory of class {class} found for resource provider {uuid}")]
    InventoryNotFound {
        /// The provider.
        uuid: ProviderId,
        /// The class.
        class: String,
    },
    /// The provider already has inventory of this class (create-one).
    #[error(
        "Update conflict: Inventory for '{class}' on resource provider '{uuid}' already exists."
    )]
    InventoryExists {
        /// The provider.
        uuid: ProviderId,
        /// The class.
        class: String,
    },
    /// A custom name is required and this is not one.
    #[error("{0} is not a valid custom name: it must match CUSTOM_[A-Z0-9_]+")]
    NotCustomName(String),
    /// The resource class already exists.
    #[error("Conflicting resource class already exists: {0}")]
    ResourceClassExists(String),
    /// A standard resource class cannot be deleted or changed.
    #[error("Cannot delete standard resource class {0}")]
    ResourceClassStandard(String),
    /// The resource class is used by an inventory.
    #[error(
        "Error in delete resource class: Cannot delete resource class {0}. Class is in use in inventory."
    )]
    ResourceClassInUse(String),
    /// No such trait.
    #[error("No such trait {0}")]
    TraitNotFound(String),
    /// A standard trait cannot be deleted.
    #[error("Cannot delete standard trait {0}")]
    TraitStandard(String),
    /// The trait is associated with a provider.
    #[error("The trait {0} is in use by a resource provider.")]
    TraitInUse(String),
    /// A Blazar host is already enrolled on this provider.
    #[error("Host {0} is already enrolled")]
    HostExists(String),
    /// The name belongs to a nested provider, which cannot be a host.
    #[error("{0} is not a root resource provider and cannot be enrolled as a host")]
    HostNotRoot(String),
    /// The host has allocations or reservations.
    #[error("Host {0} is in use")]
    HostInUse(String),
    /// The host has child providers.
    #[error("Host {0} has nested resource providers; remove them first")]
    HostHasChildren(String),
    /// An attribute key or value is invalid.
    #[error("invalid attribute {key}: {reason}")]
    BadAttribute {
        /// The key.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// An update carried nothing to change.
    #[error("No data to update")]
    NothingToUpdate,
    /// An allocation names a provider that does not exist.
    #[error("Allocation for resource provider '{0}' that does not exist.")]
    AllocationProviderNotFound(ProviderId),
    /// An allocation names a class the provider has no inventory of.
    #[error(
        "Unable to allocate inventory: Inventory for '{class}' on resource provider '{provider}' invalid."
    )]
    NoInventory {
        /// The provider.
        provider: ProviderId,
        /// The class.
        class: String,
    },
    /// An allocation amount breaks `min_unit`, `max_unit` or `step_size`.
    #[error(
        "Unable to allocate inventory: Allocation for resource provider '{provider}' that does not fit the min_unit, max_unit, or step_size of {class}: {amount}"
    )]
    AllocationUnitRules {
        /// The provider.
        provider: ProviderId,
        /// The class.
        class: String,
        /// The amount asked for.
        amount: u64,
    },
    /// The provider does not have the capacity.
    #[error(
        "Unable to allocate inventory: Unable to create allocation for '{class}' on resource provider '{provider}'. The requested amount would exceed the capacity. (requested {requested}, used {used}, capacity {capacity})"
    )]
    CapacityExceeded {
        /// The provider.
        provider: ProviderId,
        /// The class.
        class: String,
        /// Units asked for beyond what the consumers held.
        requested: u64,
        /// Units used by others.
        used: u64,
        /// Usable capacity.
        capacity: u64,
    },
    /// The consumer's generation is not the one the writer expected.
    #[error("consumer generation conflict - expected {} but got {}", show(*.expected), show(*.got))]
    ConsumerGenerationConflict {
        /// The consumer.
        consumer: Uuid,
        /// The stored generation (`None` when the consumer does not exist).
        expected: Option<u64>,
        /// What the writer sent (`None` for `null`).
        got: Option<u64>,
    },
    /// The consumer has no allocations.
    #[error("No allocations for consumer '{0}'")]
    ConsumerNotFound(Uuid),
    /// A consumer appears twice in one batch.
    #[error("Consumer {0} appears more than once in the request")]
    DuplicateConsumer(Uuid),
    /// A collection is over its bound.
    #[error("too many {0}")]
    TooMany(&'static str),
    /// The request is over one of the named limits of `limits`; checked before any work.
    #[error("Request exceeds the limit {limit}: at most {max}, got {got}")]
    LimitExceeded {
        /// The limit's name (`reservations_per_lease`, `search_horizon_days`, ...).
        limit: &'static str,
        /// What it allows.
        max: u64,
        /// What was asked.
        got: u64,
    },
    /// No lease with that id (or none the caller may see).
    #[error("Lease {0} could not be found")]
    LeaseNotFound(LeaseId),
    /// A lease request or update is invalid; the text says which part and why.
    #[error("{0}")]
    BadLease(String),
    /// A lease parameter that can no longer change.
    #[error("{0}")]
    CantUpdate(String),
    /// A lease made from a hold asks for more than, or other than, what was held, or the hold
    /// lapsed; the text says which.
    #[error("The lease does not match its hold: {0}")]
    HoldMismatch(String),
    /// The project already keeps the most open holds it may.
    #[error(
        "The project already keeps {max} open holds (HOLDS_PER_PROJECT_MAX); use or release one first"
    )]
    TooManyHolds {
        /// [`crate::limits::HOLDS_PER_PROJECT_MAX`].
        max: u32,
    },
    /// The request does not fit: why, per reservation, and what would.
    #[error("{0}")]
    DoesNotFit(Box<Refusal>),
    /// A recurring lease (berth) does not fit: every occurrence that does not, with why and,
    /// for the first [`crate::limits::RECURRENCE_ALTERNATIVES_MAX`], the nearest window that
    /// fits. Nothing of the series was admitted.
    #[error("{0}")]
    SeriesDoesNotFit(Box<SeriesRefusal>),
    /// No series (berth) with that id has an occurrence left (or none the caller may see).
    #[error("Lease series {0} could not be found")]
    SeriesNotFound(Uuid),
    /// No floating IP with that id.
    #[error("Floating IP {0} could not be found")]
    FloatingIpNotFound(Uuid),
    /// The address is already registered on that network.
    #[error("Floating IP {0} is already registered")]
    FloatingIpExists(String),
    /// The reservation presented cannot be used now (unknown, ended, not started).
    #[error("Reservation {reservation} cannot be used: {reason}")]
    ReservationUnavailable {
        /// The reservation.
        reservation: ReservationId,
        /// `unknown`, `ended` or `not_started`.
        reason: &'static str,
    },
    /// The reservation presented belongs to another project.
    #[error("Reservation {0} belongs to another project")]
    ReservationForbidden(ReservationId),
    /// The lease is not shared with that project.
    #[error("Lease {lease} is not shared with project {project}")]
    ShareNotFound {
        /// The lease.
        lease: LeaseId,
        /// The project.
        project: String,
    },
    /// A project's consumers would hold more of a class inside a lease shared with it than its
    /// share's cap.
    #[error(
        "Project {project} may hold at most {cap} {class} inside lease {lease} (its share's cap); its consumers already hold {used} there"
    )]
    ShareExceeded {
        /// The lease.
        lease: LeaseId,
        /// The consuming project.
        project: String,
        /// The class.
        class: String,
        /// The share's cap of it.
        cap: u64,
        /// What the project's other consumers hold of it inside the lease.
        used: u64,
    },
    /// A budget is invalid (berth); the text names the field.
    #[error("{0}")]
    BadBudget(String),
    /// A subscription is invalid; the text names the field.
    #[error("{0}")]
    BadSubscription(String),
    /// No budget for that project (berth).
    #[error("Project {0} has no budget")]
    BudgetNotFound(String),
    /// A lease would take its project past its budget (berth).
    #[error("{0}")]
    BudgetExceeded(Box<BudgetRefusal>),
    /// The allocation asks for more than the reservation holds, or lies outside it.
    #[error(
        "Allocation of {class} on resource provider {provider} exceeds what reservation {reservation} holds"
    )]
    ReservationExceeded {
        /// The reservation.
        reservation: ReservationId,
        /// The provider.
        provider: ProviderId,
        /// The class.
        class: String,
    },
    /// The capacity is kept for reservations; an unreserved consumer cannot have it.
    #[error(
        "Unable to allocate inventory: the {class} capacity of resource provider {provider} that is left is reserved by leases"
    )]
    Fenced {
        /// The provider.
        provider: ProviderId,
        /// The class.
        class: String,
    },
    /// No host has, or could have, a property of that name.
    #[error("Resource property {0} not found")]
    PropertyNotFound(String),
    /// The floating IP is held by a lease.
    #[error("Floating IP {0} is reserved by a lease and cannot be deleted")]
    FloatingIpInUse(Uuid),
    /// The request breaks the reservation policy; `limit` names the rule.
    #[error("Policy violation ({limit}): {detail}")]
    Policy {
        /// The policy rule (`max-duration`, ...).
        limit: &'static str,
        /// What it allows.
        detail: String,
    },
    /// No flavor with that id or name.
    #[error("Flavor {0} could not be found")]
    FlavorNotFound(String),
    /// A flavor with that id or name exists.
    #[error("Flavor {0} already exists")]
    FlavorExists(String),
    /// No provider cloud with that id.
    #[error("Provider {0} could not be found")]
    ProviderCloudNotFound(Uuid),
    /// A provider cloud with that id, or with the same endpoint, user and project, exists.
    #[error("Provider {0} is already registered")]
    ProviderCloudExists(Uuid),
    /// The provider was imported from a provider cloud: only its synchronisation changes it.
    #[error(
        "Resource provider {provider} is imported from provider cloud {cloud}; change it in that cloud"
    )]
    ProviderImported {
        /// The provider.
        provider: ProviderId,
        /// The cloud it is imported from.
        cloud: Uuid,
    },
    /// The request does not fit, and capacity it could have landed on is a provider cloud's
    /// whose capacity is unknown (it could not be reached at its last synchronisation).
    #[error(
        "Provider {cloud} is unreachable: its capacity is unknown since its last successful synchronisation and new reservations on it are refused ({reason})"
    )]
    ProviderCloudUnreachable {
        /// The cloud's provider id.
        cloud: Uuid,
        /// Why it could not be reached.
        reason: String,
    },
    /// A provider cloud's Placement refused an allocation berth placed on its capacity (the
    /// capacity was taken there outside berth, or the provider is gone).
    #[error("Provider {cloud} refused the allocation: {reason}; berth reads its capacity again")]
    ProviderCloudRefused {
        /// The cloud's provider id.
        cloud: Uuid,
        /// What its Placement answered.
        reason: String,
    },
    /// A provider cloud whose capacity leases or instances still hold is not removed unless
    /// forced.
    #[error(
        "Provider {cloud} is in use: {leases} reservations hold its capacity and {allocated} of its resource providers have allocations (an admin may remove it with force)"
    )]
    ProviderCloudInUse {
        /// The cloud's provider id.
        cloud: Uuid,
        /// How many leases hold its providers.
        leases: usize,
        /// How many of its providers have allocations.
        allocated: usize,
    },
    /// No availability zone of that name.
    #[error("Zone {0} could not be found")]
    ZoneNotFound(String),
    /// No Promise instance with that id.
    #[error("Instance {0} could not be found")]
    InstanceNotFound(Uuid),
    /// No provider, zone or pool by that name to change the capacity of.
    #[error(
        "Source {0} could not be found: name a provider (ResourceProvider:<uuid> or its name), a zone (Zone:<name>) or a pool (ResourcePool:<id>)"
    )]
    SourceNotFound(String),
    /// No planned capacity change with that id.
    #[error("Pool {0} could not be found")]
    PoolNotFound(Uuid),
    /// A decrease would leave these leases short; an admin may force it.
    #[error("Decreasing the capacity would leave {} reservation(s) short: {}", .0.len(), list(.0))]
    CapacityInUse(Vec<LeaseId>),
    /// No subscription with that id (or none the caller may see).
    #[error("Subscription {0} could not be found")]
    SubscriptionNotFound(Uuid),
    /// No delivery with that notification id.
    #[error("Notification {0} could not be found")]
    DeliveryNotFound(String),
    /// An instance cannot be created; the text says why (Promise's rejection reason).
    #[error("{0}")]
    InstanceRefused(String),
    /// A reservation has no room left for an instance of the flavor; what it has left.
    #[error(
        "Reservation {reservation} has no room left for flavor {flavor}: {} instance(s), {} cores and {} MB left",
        room.instances, room.vcpus, room.ram_mb
    )]
    NoRoomLeft {
        /// The reservation (its lease).
        reservation: LeaseId,
        /// The flavor asked for.
        flavor: String,
        /// What the reservation has left.
        room: Room,
    },
    /// No bare-metal node with that uuid or name.
    #[error("Node {0} could not be found")]
    NodeNotFound(String),
    /// A bad node or claim request; the text names the field.
    #[error("{0}")]
    BadNode(String),
    /// A node cannot go from one provision state to another.
    #[error("Node {node} cannot go from {from} to {to}")]
    NodeTransition {
        /// The node.
        node: ProviderId,
        /// Its state.
        from: &'static str,
        /// The state asked for.
        to: String,
    },
    /// A node is busy (deployed, claimed or reserved); the text says how.
    #[error("{0}")]
    NodeInUse(String),
    /// No node claim with that uuid.
    #[error("Reservation {0} could not be found")]
    ClaimNotFound(Uuid),
    /// No Ironic allocation with that uuid or name (or none the caller may see).
    #[error("Allocation {0} could not be found.")]
    AllocationNotFound(String),
    /// None of the listed nodes can be claimed; why, per node, in list order.
    #[error("None of the nodes can be reserved: {}", unclaimable(.0))]
    NoNodeClaimable(Vec<Unclaimable>),
    /// A deployment without the matching live claim.
    #[error("{0}")]
    DeployRefused(String),
    /// The `Idempotency-Key` was used before, by a request that asked something else.
    #[error("Idempotency-Key {0:?} was already used for a different request")]
    IdempotencyKeyReused(String),
    /// The `Idempotency-Key`'s first request created an object that has since gone.
    #[error("The request with this Idempotency-Key created {0}, which no longer exists")]
    IdempotentObjectGone(Uuid),
}

fn unclaimable(reasons: &[Unclaimable]) -> String {
    reasons
        .iter()
        .map(|r| format!("{}: {}", r.node_uuid, r.detail))
        .collect::<Vec<_>>()
        .join("; ")
}

fn list(ids: &[LeaseId]) -> String {
    ids.iter()
        .map(LeaseId::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn show(generation: Option<u64>) -> String {
    generation.map_or_else(|| "null".to_owned(), |g| g.to_string())
}

impl From<PolicyBreach> for Rejection {
    fn from(breach: PolicyBreach) -> Rejection {
        Rejection::Policy {
            limit: breach.limit,
            detail: breach.detail,
        }
    }
}

/// Why one reservation of a request does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    /// Position of the reservation in the request.
    pub index: usize,
    /// Blazar's resource type.
    pub resource_type: &'static str,
    /// What was asked (hosts: `min`; instances and addresses: `amount`).
    pub requested: u32,
    /// The most that fits in the requested window, after the request's earlier reservations.
    pub available: u32,
    /// Machine-readable reason.
    pub reason: &'static str,
}

/// Why a recurring lease was refused: the occurrences that do not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesRefusal {
    /// How many occurrences the series has.
    pub occurrences: u32,
    /// Each occurrence that does not fit, in order.
    pub conflicts: Vec<Conflict>,
}

/// One occurrence of a refused series that does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Its place in the series, from 0.
    pub index: u32,
    /// Its window.
    pub window: crate::model::ledger::Window,
    /// Why it does not fit; `earliest_start` is the nearest start at or after its own at which
    /// it fits for the same duration (searched for the first
    /// [`crate::limits::RECURRENCE_ALTERNATIVES_MAX`] conflicts only).
    pub refusal: Refusal,
}

impl std::fmt::Display for SeriesRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of the {} occurrences do not fit; nothing was admitted",
            self.conflicts.len(),
            self.occurrences
        )?;
        let indexes: Vec<String> = self.conflicts.iter().map(|c| c.index.to_string()).collect();
        write!(f, " (occurrences {})", indexes.join(", "))
    }
}

/// Why a request was refused and what would fit instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Every reservation that does not fit.
    pub shortfalls: Vec<Shortfall>,
    /// Per reservation, in request order, the most that fits in the requested window.
    pub amounts: Vec<u32>,
    /// The earliest start within the search horizon at which the whole request fits for the
    /// same duration, if one was found.
    pub earliest_start: Option<Instant>,
    /// Whether the earliest-start search was cut by its steps or its time budget (a start
    /// within the horizon may exist that it did not try).
    pub truncated: bool,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Not enough resources available for the requested window")?;
        for s in &self.shortfalls {
            write!(
                f,
                "; reservation {} ({}): {} requested, {} available",
                s.index, s.resource_type, s.requested, s.available
            )?;
        }
        Ok(())
    }
}

/// Why a lease was refused for its project's budget, and what would fit it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRefusal {
    /// The project.
    pub project: String,
    /// The class whose limit it would pass.
    pub class: String,
    /// The budget's period.
    pub period: crate::model::budget::BudgetPeriod,
    /// The start of the period it would pass the limit in.
    pub period_start: crate::model::time::Instant,
    /// The limit, in unit-hours per period.
    pub limit_hours: u64,
    /// What the period was charged before, in unit-seconds.
    pub charged_seconds: u64,
    /// What the lease would add to it, in unit-seconds.
    pub asked_seconds: u64,
    /// The latest end (to the minute) at which the same lease fits, if one does.
    pub shorter_end: Option<crate::model::time::Instant>,
    /// The most hosts or instances of its one reservation that fit over the same window, if
    /// any do.
    pub fewer: Option<u32>,
}

impl std::fmt::Display for BudgetRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::model::budget::hours;
        write!(
            f,
            "Project {}'s budget of {} {}-hours per {} is exceeded: {:.2} are charged in that \
             {} and the lease asks {:.2} more",
            self.project,
            self.limit_hours,
            self.class,
            self.period.as_str(),
            hours(self.charged_seconds),
            self.period.as_str(),
            hours(self.asked_seconds),
        )
    }
}
