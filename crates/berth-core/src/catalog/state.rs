//! The catalog's state: every index it keeps, and its sequence number.

use crate::model::baremetal::NodeClaim;
use crate::model::cloud::ProviderCloud;
use crate::model::consumer::Consumer;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::{EventKind, FloatingIp, Lease};
use crate::model::ledger::Ledger;
use crate::model::name::{ResourceClass, TraitName};
use crate::model::notify::{Delivery, Subscription};
use crate::model::promise::{CapacityPool, Flavor, Policy, PromiseInstance};
use crate::model::provider::{AggregateRecord, Provider};
use crate::model::time::Instant;
use indexmap::IndexMap;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use uuid::Uuid;

/// The in-memory catalog. Its indexes are seen only by the modules of `catalog`: everything
/// else reads it through its methods and changes it through [`Catalog::apply`].
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub(super) seq: u64,
    pub(super) providers: IndexMap<ProviderId, Provider>,
    pub(super) by_name: HashMap<String, ProviderId>,
    pub(super) by_id: HashMap<i64, ProviderId>,
    pub(super) custom_classes: BTreeSet<ResourceClass>,
    pub(super) custom_traits: BTreeSet<TraitName>,
    pub(super) aggregates: BTreeMap<Uuid, AggregateRecord>,
    pub(super) consumers: HashMap<Uuid, Consumer>,
    /// Parent to children, in creation order; only parents with children have an entry.
    pub(super) children: HashMap<ProviderId, Vec<ProviderId>>,
    /// Providers with the sharing trait.
    pub(super) sharing: BTreeSet<ProviderId>,
    /// One shared instance of every class name in inventories and usages.
    pub(super) classes: HashSet<ResourceClass>,
    /// One shared copy of every project and user id the leases name (at most
    /// [`Catalog::OWNERS_MAX`]).
    pub(super) owners: HashSet<Arc<str>>,
    pub(super) next_id: i64,
    /// Every lease, found by its id. The lease indexes below are persistent maps (`imbl`):
    /// copying the catalog (a search's snapshot, the writers' working copy) shares them whole,
    /// and a change to one copy copies only the path to what it changes, so the first write
    /// after a copy costs as much as any other, whatever the number of leases. A set ordered by
    /// the lease's own id rather than a map, so that an entry is one pointer.
    pub(super) leases: imbl::OrdSet<ByLeaseId>,
    /// What the leases hold, indexed by host and time.
    pub(super) ledger: Ledger,
    /// Every lease with an event not yet fired, once, by its first such event: `(due, kind,
    /// lease)` (shared between copies until one changes). The lease's other pending events are
    /// read from the lease.
    pub(super) due: imbl::OrdSet<(Instant, EventKind, LeaseId)>,
    /// Open holds (leases in `HELD`) per project, for the per-project limit.
    pub(super) open_holds: Arc<HashMap<Arc<str>, u32>>,
    /// Waitlisted leases (in `WAITING`) in first-come order: `(created, lease)`.
    pub(super) waiting: imbl::OrdSet<(Instant, LeaseId)>,
    /// The occurrences of each series (berth), in order: series id to `(index, lease)`; only
    /// series with an occurrence left have an entry.
    pub(super) series: imbl::OrdMap<Uuid, BTreeSet<(u32, LeaseId)>>,
    pub(super) floating_ips: IndexMap<Uuid, FloatingIp>,
    pub(super) private_properties: BTreeSet<String>,
    /// Reservation to the lease holding it.
    pub(super) reservation_leases: imbl::OrdMap<ReservationId, Arc<Lease>>,
    /// Reservation to the consumers presenting it.
    pub(super) reserved_consumers: HashMap<ReservationId, BTreeSet<Uuid>>,
    /// Flavors by id.
    pub(super) flavors: BTreeMap<String, Flavor>,
    /// Registered provider clouds by id.
    pub(super) clouds: BTreeMap<Uuid, ProviderCloud>,
    /// The reservation policy, once one was set.
    pub(super) policy: Option<Policy>,
    /// Budgets, by project.
    pub(super) budgets: BTreeMap<String, crate::model::budget::Budget>,
    /// Instances created through Promise, by id.
    pub(super) instances: BTreeMap<Uuid, PromiseInstance>,
    /// Planned capacity changes, by id.
    pub(super) pools: BTreeMap<Uuid, CapacityPool>,
    /// Providers some planned capacity change touches, with the pools touching each.
    pub(super) pooled: HashMap<ProviderId, BTreeSet<Uuid>>,
    /// Subscriptions, by id.
    pub(super) subscriptions: BTreeMap<Uuid, Subscription>,
    /// Deliveries pending or dead, by notification id.
    pub(super) deliveries: BTreeMap<String, Delivery>,
    /// The outbox sequence number expanded up to.
    pub(super) outbox_cursor: u64,
    /// Node claims, by uuid.
    pub(super) claims: BTreeMap<Uuid, NodeClaim>,
    /// Node to the claim on it.
    pub(super) node_claims: HashMap<ProviderId, Uuid>,
    /// Claims by expiry (the lifecycle engine releases them), apart from the leases' events so
    /// that claim churn never copies the shared lease index.
    pub(super) claim_due: BTreeSet<(Instant, Uuid)>,
}

/// A lease in the catalog's lease set: ordered and compared by its id, and found by it.
#[derive(Debug, Clone)]
pub(super) struct ByLeaseId(pub(super) Arc<Lease>);

impl PartialEq for ByLeaseId {
    fn eq(&self, other: &ByLeaseId) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ByLeaseId {}

impl PartialOrd for ByLeaseId {
    fn partial_cmp(&self, other: &ByLeaseId) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByLeaseId {
    fn cmp(&self, other: &ByLeaseId) -> std::cmp::Ordering {
        // As the ids order, so that the set is searched by id (`Borrow<LeaseId>`).
        self.0.id.cmp(&other.0.id)
    }
}

impl std::borrow::Borrow<LeaseId> for ByLeaseId {
    fn borrow(&self) -> &LeaseId {
        &self.0.id
    }
}

impl Catalog {
    /// An empty catalog at sequence 0.
    pub fn new() -> Catalog {
        Catalog {
            next_id: 1,
            ..Catalog::default()
        }
    }

    /// The change sequence number this catalog reflects.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Records that the catalog now reflects storage sequence `seq`.
    pub fn set_seq(&mut self, seq: u64) {
        assert!(seq >= self.seq, "the catalog sequence never goes back");
        self.seq = seq;
    }
}
