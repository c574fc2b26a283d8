//! The inventory catalog: every provider with its inventories, usages, traits, aggregates and
//! attributes, plus the custom resource classes and traits, held in memory and indexed.
//!
//! The catalog is rebuilt from storage at start-up and changed only by [`Catalog::apply`], with
//! the same [`Change`]s the store has just committed. It owns no I/O.

use crate::change::Change;
use crate::model::consumer::Consumer;
use crate::model::fence::Fence;
use crate::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use crate::model::inventory::Inventory;
use crate::model::lease::{EventKind, FloatingIp, Lease};
use crate::model::ledger::Ledger;
use crate::model::name::{self, ResourceClass, TraitName};
use crate::model::provider::{AggregateRecord, AttrValue, HostRecord, Provider, ProviderRow};
use crate::model::time::Instant;
use indexmap::IndexMap;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use uuid::Uuid;

/// Everything storage holds about the catalog, as flat rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogRows {
    /// The change sequence number the rows were read at.
    pub seq: u64,
    /// Providers, in any order.
    pub providers: Vec<ProviderRow>,
    /// `(provider, class, record)`.
    pub inventories: Vec<(Uuid, ResourceClass, Inventory)>,
    /// `(provider, trait)`.
    pub traits: Vec<(Uuid, TraitName)>,
    /// `(provider, aggregate)`.
    pub aggregates: Vec<(Uuid, Uuid)>,
    /// `(provider, key, value)`.
    pub attributes: Vec<(Uuid, String, AttrValue)>,
    /// `(provider, host)`.
    pub hosts: Vec<(Uuid, HostRecord)>,
    /// `(provider, condition)` of providers out of service.
    pub conditions: Vec<(Uuid, crate::model::provider::ProviderCondition)>,
    /// `(provider, node)` of bare-metal nodes.
    pub nodes: Vec<(Uuid, crate::model::baremetal::NodeRecord)>,
    /// Node claims.
    pub claims: Vec<crate::model::baremetal::NodeClaim>,
    /// Custom resource classes.
    pub resource_classes: Vec<ResourceClass>,
    /// Custom traits.
    pub custom_traits: Vec<TraitName>,
    /// Described aggregates.
    pub aggregate_records: Vec<(Uuid, AggregateRecord)>,
    /// Consumers with their allocations.
    pub consumers: Vec<(Uuid, Consumer)>,
    /// Leases, shared: the catalog keeps them as they are (a loaded lease is never copied).
    pub leases: Vec<Arc<Lease>>,
    /// Floating IPs registered for reservation.
    pub floating_ips: Vec<FloatingIp>,
    /// Host properties marked private.
    pub private_properties: Vec<String>,
    /// Flavors.
    pub flavors: Vec<crate::model::promise::Flavor>,
    /// The reservation policy, when one was set.
    pub policy: Option<crate::model::promise::Policy>,
    /// Instances created through Promise.
    pub instances: Vec<crate::model::promise::PromiseInstance>,
    /// Planned capacity changes.
    pub pools: Vec<crate::model::promise::CapacityPool>,
    /// Subscriptions.
    pub subscriptions: Vec<crate::model::notify::Subscription>,
    /// Deliveries pending or dead.
    pub deliveries: Vec<crate::model::notify::Delivery>,
    /// The outbox sequence number expanded up to.
    pub outbox_cursor: u64,
    /// Idempotency keys with what their first request created.
    pub idempotency: Vec<(IdempotencyKey, IdempotencyRecord)>,
}

impl CatalogRows {
    /// Sorts every list so that two row sets with the same content compare equal.
    pub fn normalize(&mut self) {
        self.providers.sort_by_key(|row| row.id);
        self.inventories
            .sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        self.traits.sort();
        self.aggregates.sort();
        self.attributes
            .sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        self.hosts.sort_by_key(|h| h.0);
        self.conditions.sort_by_key(|c| c.0);
        self.nodes.sort_by_key(|n| n.0);
        self.claims.sort_by_key(|c| c.uuid);
        self.resource_classes.sort();
        self.custom_traits.sort();
        self.aggregate_records.sort_by_key(|a| a.0);
        self.consumers.sort_by_key(|c| c.0);
        self.leases.sort_by_key(|l| l.id);
        self.floating_ips.sort_by_key(|f| f.id);
        self.private_properties.sort();
        self.flavors.sort_by(|a, b| a.id.cmp(&b.id));
        self.instances.sort_by_key(|i| i.id);
        self.pools.sort_by_key(|p| p.id);
        self.subscriptions.sort_by_key(|s| s.id);
        self.deliveries.sort_by(|a, b| a.id.cmp(&b.id));
        self.idempotency.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

/// The in-memory catalog.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    seq: u64,
    providers: IndexMap<Uuid, Provider>,
    by_name: HashMap<String, Uuid>,
    by_id: HashMap<i64, Uuid>,
    custom_classes: BTreeSet<ResourceClass>,
    custom_traits: BTreeSet<TraitName>,
    aggregates: BTreeMap<Uuid, AggregateRecord>,
    consumers: HashMap<Uuid, Consumer>,
    /// Parent to children, in creation order; only parents with children have an entry.
    children: HashMap<Uuid, Vec<Uuid>>,
    /// Providers with the sharing trait.
    sharing: BTreeSet<Uuid>,
    /// One shared instance of every class name in inventories and usages.
    classes: std::collections::HashSet<ResourceClass>,
    next_id: i64,
    /// Shared, so that copying the catalog (the writers' working copy) does not copy leases;
    /// the map itself is shared too until one of the copies changes a lease.
    leases: Arc<HashMap<Uuid, Arc<Lease>>>,
    /// What the leases hold, indexed by host and time.
    ledger: Ledger,
    /// Lifecycle events not yet fired, by due time (shared between copies until one changes).
    due: Arc<BTreeSet<(Instant, EventKind, Uuid)>>,
    floating_ips: IndexMap<Uuid, FloatingIp>,
    private_properties: BTreeSet<String>,
    /// Reservation to the lease holding it (shared between copies until one changes).
    reservation_leases: Arc<HashMap<Uuid, Uuid>>,
    /// Reservation to the consumers presenting it.
    reserved_consumers: HashMap<Uuid, BTreeSet<Uuid>>,
    /// Flavors by id.
    flavors: BTreeMap<String, crate::model::promise::Flavor>,
    /// The reservation policy, once one was set.
    policy: Option<crate::model::promise::Policy>,
    /// Instances created through Promise, by id.
    instances: BTreeMap<Uuid, crate::model::promise::PromiseInstance>,
    /// Planned capacity changes, by id.
    pools: BTreeMap<Uuid, crate::model::promise::CapacityPool>,
    /// Providers some planned capacity change touches, with the pools touching each.
    pooled: HashMap<Uuid, BTreeSet<Uuid>>,
    /// Subscriptions, by id.
    subscriptions: BTreeMap<Uuid, crate::model::notify::Subscription>,
    /// Deliveries pending or dead, by notification id.
    deliveries: BTreeMap<String, crate::model::notify::Delivery>,
    /// The outbox sequence number expanded up to.
    outbox_cursor: u64,
    /// Node claims, by uuid.
    claims: BTreeMap<Uuid, crate::model::baremetal::NodeClaim>,
    /// Node to the claim on it.
    node_claims: HashMap<Uuid, Uuid>,
    /// Claims by expiry (the lifecycle engine releases them), apart from the leases' events so
    /// that claim churn never copies the shared lease index.
    claim_due: BTreeSet<(Instant, Uuid)>,
    /// Idempotency records, shared between copies until one changes.
    idempotency: Arc<IdempotencyIndex>,
}

/// Idempotency records by key, and by age for pruning.
#[derive(Debug, Clone, Default)]
struct IdempotencyIndex {
    records: HashMap<IdempotencyKey, IdempotencyRecord>,
    by_age: BTreeSet<(Instant, IdempotencyKey)>,
}

impl IdempotencyIndex {
    fn set(&mut self, key: &IdempotencyKey, record: Option<&IdempotencyRecord>) {
        if let Some(old) = self.records.remove(key) {
            self.by_age.remove(&(old.created_at, key.clone()));
        }
        if let Some(record) = record {
            self.by_age.insert((record.created_at, key.clone()));
            self.records.insert(key.clone(), record.clone());
        }
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

    /// Rebuilds the catalog from storage rows. Rows naming unknown providers are a storage bug.
    pub fn from_rows(rows: CatalogRows) -> Catalog {
        let mut catalog = Catalog::new();
        catalog.seq = rows.seq;
        let mut providers = rows.providers;
        providers.sort_by_key(|row| row.id);
        for row in providers {
            catalog.insert_provider(row);
        }
        for (uuid, class, record) in rows.inventories {
            let class = catalog.intern(&class);
            catalog.provider_mut(uuid).inventories.insert(class, record);
        }
        for (uuid, name) in rows.traits {
            catalog.provider_mut(uuid).traits.insert(name);
        }
        let sharing: Vec<Uuid> = catalog
            .providers
            .values()
            .filter(|p| is_sharing(p))
            .map(|p| p.uuid)
            .collect();
        catalog.sharing.extend(sharing);
        for (uuid, aggregate) in rows.aggregates {
            catalog.provider_mut(uuid).aggregates.insert(aggregate);
        }
        for (uuid, key, value) in rows.attributes {
            catalog.provider_mut(uuid).attributes.insert(key, value);
        }
        for (uuid, host) in rows.hosts {
            catalog.provider_mut(uuid).host = Some(host);
        }
        for (uuid, condition) in rows.conditions {
            catalog.provider_mut(uuid).condition = Some(condition);
        }
        for (uuid, node) in rows.nodes {
            catalog.provider_mut(uuid).node = Some(node);
        }
        for claim in rows.claims {
            catalog.insert_claim(claim);
        }
        catalog.custom_classes = rows.resource_classes.into_iter().collect();
        catalog.custom_traits = rows.custom_traits.into_iter().collect();
        catalog.aggregates = rows.aggregate_records.into_iter().collect();
        for (uuid, consumer) in rows.consumers {
            catalog.insert_consumer(uuid, consumer);
        }
        for fip in rows.floating_ips {
            catalog.floating_ips.insert(fip.id, fip);
        }
        catalog.load_leases(rows.leases);
        catalog.private_properties = rows.private_properties.into_iter().collect();
        catalog.flavors = rows
            .flavors
            .into_iter()
            .map(|f| (f.id.clone(), f))
            .collect();
        catalog.policy = rows.policy;
        catalog.instances = rows.instances.into_iter().map(|i| (i.id, i)).collect();
        for pool in rows.pools {
            catalog.insert_pool(pool);
        }
        catalog.subscriptions = rows.subscriptions.into_iter().map(|s| (s.id, s)).collect();
        catalog.deliveries = rows
            .deliveries
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect();
        catalog.outbox_cursor = rows.outbox_cursor;
        let mut idempotency = IdempotencyIndex::default();
        for (key, record) in &rows.idempotency {
            idempotency.set(key, Some(record));
        }
        catalog.idempotency = Arc::new(idempotency);
        debug_assert!(catalog.check_invariants().is_ok());
        catalog
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

    /// The id the next new provider gets.
    pub fn next_provider_id(&self) -> i64 {
        self.next_id
    }

    /// Number of providers.
    pub fn len(&self) -> usize {
        self.providers.len()
    }

    /// Whether there are no providers.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// All providers in creation order.
    pub fn providers(&self) -> impl Iterator<Item = &Provider> {
        self.providers.values()
    }

    /// One provider by uuid.
    pub fn provider(&self, uuid: Uuid) -> Option<&Provider> {
        self.providers.get(&uuid)
    }

    /// One provider by name.
    pub fn provider_by_name(&self, name: &str) -> Option<&Provider> {
        self.by_name
            .get(name)
            .and_then(|uuid| self.providers.get(uuid))
    }

    /// One provider by internal id.
    pub fn provider_by_id(&self, id: i64) -> Option<&Provider> {
        self.by_id
            .get(&id)
            .and_then(|uuid| self.providers.get(uuid))
    }

    /// Direct children of a provider, in creation order.
    pub fn children(&self, uuid: Uuid) -> impl Iterator<Item = &Provider> {
        self.children.get(&uuid).into_iter().flatten().map(|child| {
            self.providers
                .get(child)
                .expect("invariant: children exist")
        })
    }

    /// Whether any provider has a parent.
    pub fn has_nested(&self) -> bool {
        !self.children.is_empty()
    }

    /// Providers that share their inventory through aggregates (`MISC_SHARES_VIA_AGGREGATE`).
    pub fn sharing_providers(&self) -> impl Iterator<Item = &Provider> {
        self.sharing.iter().map(|uuid| {
            self.providers
                .get(uuid)
                .expect("invariant: sharing providers exist")
        })
    }

    /// The providers of the tree rooted at `root`, parents before children.
    pub fn tree(&self, root: Uuid) -> Vec<&Provider> {
        let Some(top) = self.providers.get(&root) else {
            return Vec::new();
        };
        let mut out = vec![top];
        let mut idx = 0;
        // Bounded: each provider is pushed once because the tree has no cycles.
        while idx < out.len() {
            let current = out[idx].uuid;
            out.extend(self.children(current));
            idx += 1;
            assert!(
                out.len() <= self.providers.len(),
                "invariant: provider trees are acyclic"
            );
        }
        out
    }

    /// Root providers, in creation order.
    pub fn roots(&self) -> impl Iterator<Item = &Provider> {
        self.providers.values().filter(|p| p.parent.is_none())
    }

    /// The provider and all its descendants, parents before children.
    pub fn subtree(&self, uuid: Uuid) -> Vec<Uuid> {
        let mut out = vec![uuid];
        let mut idx = 0;
        // Bounded: each provider is pushed at most once because the tree has no cycles.
        while idx < out.len() {
            let current = out[idx];
            out.extend(self.children(current).map(|child| child.uuid));
            idx += 1;
            assert!(
                out.len() <= self.providers.len(),
                "invariant: provider trees are acyclic"
            );
        }
        out
    }

    /// Whether a resource class exists (standard or custom).
    pub fn has_resource_class(&self, class: &ResourceClass) -> bool {
        class.is_standard() || self.custom_classes.contains(class)
    }

    /// Custom resource classes.
    pub fn custom_resource_classes(&self) -> &BTreeSet<ResourceClass> {
        &self.custom_classes
    }

    /// Whether a trait exists (standard or custom).
    pub fn has_trait(&self, name: &TraitName) -> bool {
        name.is_standard() || self.custom_traits.contains(name)
    }

    /// All traits, standard and custom, sorted.
    pub fn all_traits(&self) -> Vec<&str> {
        let mut names: Vec<&str> = name::standard_traits().to_vec();
        names.extend(self.custom_traits.iter().map(TraitName::as_str));
        names.sort_unstable();
        names
    }

    /// One consumer.
    pub fn consumer(&self, uuid: Uuid) -> Option<&Consumer> {
        self.consumers.get(&uuid)
    }

    /// Every consumer, in no particular order.
    pub fn consumers(&self) -> impl Iterator<Item = (Uuid, &Consumer)> {
        self.consumers
            .iter()
            .map(|(uuid, consumer)| (*uuid, consumer))
    }

    /// What berth records about an aggregate, if anything.
    pub fn aggregate(&self, uuid: Uuid) -> Option<&AggregateRecord> {
        self.aggregates.get(&uuid)
    }

    /// The described aggregate with this name.
    pub fn aggregate_by_name(&self, name: &str) -> Option<(Uuid, &AggregateRecord)> {
        self.aggregates
            .iter()
            .find(|(_, r)| r.name.as_deref() == Some(name))
            .map(|(u, r)| (*u, r))
    }

    /// Whether any provider has the trait.
    pub fn trait_in_use(&self, name: &TraitName) -> bool {
        self.providers.values().any(|p| p.traits.contains(name))
    }

    /// Whether any provider has inventory of the class.
    pub fn resource_class_in_use(&self, class: &ResourceClass) -> bool {
        self.providers
            .values()
            .any(|p| p.inventories.contains_key(class))
    }

    /// Applies committed changes, in order.
    pub fn apply(&mut self, changes: &[Change]) {
        for change in changes {
            self.apply_one(change);
        }
    }

    fn apply_one(&mut self, change: &Change) {
        match change {
            Change::ProviderCreated(row) => self.insert_provider(row.clone()),
            Change::ProviderUpdated(row) => self.update_provider(row),
            Change::ProviderDeleted(uuid) => self.delete_provider(*uuid),
            Change::InventoriesReplaced { uuid, inventories } => {
                let interned = inventories
                    .iter()
                    .map(|(class, record)| (self.intern(class), *record))
                    .collect();
                self.provider_mut(*uuid).inventories = interned;
            }
            Change::TraitsReplaced { uuid, traits } => {
                let provider = self.provider_mut(*uuid);
                provider.traits = traits.clone();
                match is_sharing(provider) {
                    true => self.sharing.insert(*uuid),
                    false => self.sharing.remove(uuid),
                };
            }
            Change::AggregatesReplaced { uuid, aggregates } => {
                self.provider_mut(*uuid).aggregates = aggregates.clone();
            }
            Change::AttributesReplaced { uuid, attributes } => {
                self.provider_mut(*uuid).attributes = attributes.clone();
            }
            Change::HostSet { uuid, host } => self.provider_mut(*uuid).host = host.clone(),
            Change::AggregateDescribed {
                uuid,
                record: Some(record),
            } => {
                self.aggregates.insert(*uuid, record.clone());
            }
            Change::AggregateDescribed { uuid, record: None } => {
                self.aggregates.remove(uuid);
            }
            Change::ConsumerSet { uuid, consumer } => {
                self.remove_consumer(*uuid);
                if let Some(consumer) = consumer {
                    self.insert_consumer(*uuid, consumer.clone());
                }
            }
            Change::ResourceClassCreated(class) => {
                self.custom_classes.insert(class.clone());
            }
            Change::ResourceClassDeleted(class) => {
                self.custom_classes.remove(class);
            }
            Change::TraitCreated(name) => {
                self.custom_traits.insert(name.clone());
            }
            Change::TraitDeleted(name) => {
                self.custom_traits.remove(name);
            }
            Change::LeaseSet { id, lease } => {
                self.remove_lease(*id);
                if let Some(lease) = lease {
                    self.insert_lease((**lease).clone());
                }
            }
            Change::FloatingIpSet { id, fip: Some(fip) } => {
                self.floating_ips.insert(*id, fip.clone());
            }
            Change::FloatingIpSet { id, fip: None } => {
                self.floating_ips.shift_remove(id);
            }
            Change::LeaseRecorded(_) => {}
            Change::NodeSet { .. }
            | Change::ClaimSet { .. }
            | Change::ProviderConditionSet { .. } => self.apply_health(change),
            Change::FlavorSet { .. }
            | Change::PolicySet(_)
            | Change::PoolSet { .. }
            | Change::InstanceSet { .. }
            | Change::SubscriptionSet { .. }
            | Change::DeliverySet { .. }
            | Change::OutboxCursor(_) => self.apply_promise(change),
            Change::IdempotencySet { key, record } => {
                Arc::make_mut(&mut self.idempotency).set(key, record.as_ref());
            }
            Change::PropertyPrivacy { name, private } => {
                match private {
                    true => self.private_properties.insert(name.clone()),
                    false => self.private_properties.remove(name),
                };
            }
        }
    }

    /// Applies a change to providers' conditions, node records or node claims.
    fn apply_health(&mut self, change: &Change) {
        match change {
            Change::NodeSet { uuid, node } => {
                // Removing the record of a provider deleted in the same decision is a no-op.
                if let Some(provider) = self.providers.get_mut(uuid) {
                    provider.node.clone_from(node);
                }
            }
            Change::ClaimSet { uuid, claim } => {
                self.remove_claim(*uuid);
                if let Some(claim) = claim {
                    self.insert_claim(claim.clone());
                }
            }
            Change::ProviderConditionSet { uuid, condition } => {
                // Removing the condition of a provider deleted in the same decision is a no-op.
                if let Some(provider) = self.providers.get_mut(uuid) {
                    provider.condition.clone_from(condition);
                }
            }
            _ => {}
        }
    }

    /// Applies a change to the Promise objects (flavors, policy, pools, instances,
    /// subscriptions, deliveries, the outbox cursor).
    fn apply_promise(&mut self, change: &Change) {
        match change {
            Change::FlavorSet { id, flavor } => match flavor {
                Some(flavor) => {
                    self.flavors.insert(id.clone(), flavor.clone());
                }
                None => {
                    self.flavors.remove(id);
                }
            },
            Change::PolicySet(policy) => self.policy = Some(policy.clone()),
            Change::PoolSet { id, pool } => {
                self.remove_pool(*id);
                if let Some(pool) = pool {
                    self.insert_pool(pool.clone());
                }
            }
            Change::InstanceSet { id, instance } => match instance {
                Some(instance) => {
                    self.instances.insert(*id, instance.clone());
                }
                None => {
                    self.instances.remove(id);
                }
            },
            Change::SubscriptionSet { id, subscription } => match subscription {
                Some(s) => {
                    self.subscriptions.insert(*id, s.clone());
                }
                None => {
                    self.subscriptions.remove(id);
                }
            },
            Change::DeliverySet { id, delivery } => match delivery {
                Some(d) => {
                    self.deliveries.insert(id.clone(), d.clone());
                }
                None => {
                    self.deliveries.remove(id);
                }
            },
            Change::OutboxCursor(seq) => self.outbox_cursor = self.outbox_cursor.max(*seq),
            _ => {}
        }
    }

    /// Inserts every stored lease at once: the ledger is bulk-built on a second thread
    /// ([`Ledger::from_holds`]) while this one builds the lease indexes (sorted, then
    /// bulk-loaded), and fences are computed once per host at the end. Same result as inserting
    /// the leases one by one.
    fn load_leases(&mut self, leases: Vec<Arc<Lease>>) {
        let ledger = std::thread::scope(|scope| {
            let building = scope.spawn(|| {
                Ledger::from_holds(leases.iter().flat_map(|lease| lease.holds_by_reservation()))
            });
            let mut due: Vec<(Instant, EventKind, Uuid)> = leases
                .iter()
                .flat_map(|l| l.pending_events().map(move |(at, kind)| (at, kind, l.id)))
                .collect();
            due.sort_unstable();
            debug_assert!(
                self.due.is_empty(),
                "leases are loaded into a fresh catalog"
            );
            self.due = Arc::new(due.into_iter().collect());
            let mut reservation_leases = HashMap::with_capacity(leases.len());
            let mut by_id = HashMap::with_capacity(leases.len());
            for lease in &leases {
                for reservation in &lease.reservations {
                    reservation_leases.insert(reservation.id, lease.id);
                }
                by_id.insert(lease.id, Arc::clone(lease));
            }
            self.reservation_leases = Arc::new(reservation_leases);
            self.leases = Arc::new(by_id);
            building
                .join()
                .expect("invariant: building the ledger does not panic")
        });
        let touched = ledger.hosts().collect();
        self.ledger = ledger;
        self.refence(touched);
    }

    /// Inserts a lease, its holds and its due events, and recomputes its hosts' fences.
    fn insert_lease(&mut self, lease: Lease) {
        let mut touched = BTreeSet::new();
        for hold in lease.holds() {
            touched.insert(hold.host);
            self.ledger.add(hold);
        }
        let reservation_leases = Arc::make_mut(&mut self.reservation_leases);
        for reservation in &lease.reservations {
            reservation_leases.insert(reservation.id, lease.id);
        }
        Arc::make_mut(&mut self.due).extend(
            lease
                .pending_events()
                .map(|(at, kind)| (at, kind, lease.id)),
        );
        let previous = Arc::make_mut(&mut self.leases).insert(lease.id, Arc::new(lease));
        assert!(
            previous.is_none(),
            "invariant: a lease is removed before it is replaced"
        );
        self.refence(touched);
    }

    fn remove_lease(&mut self, id: Uuid) {
        // Looked up first, so that removing a lease that is not there copies no shared map.
        let Some(lease) = self.leases.get(&id).cloned() else {
            return;
        };
        Arc::make_mut(&mut self.leases).remove(&id);
        let mut touched = BTreeSet::new();
        for reservation in &lease.reservations {
            touched.extend(
                self.ledger
                    .remove(reservation.id)
                    .into_iter()
                    .map(|h| h.host),
            );
            Arc::make_mut(&mut self.reservation_leases).remove(&reservation.id);
        }
        self.refence(touched);
        for (at, kind) in lease.pending_events() {
            Arc::make_mut(&mut self.due).remove(&(at, kind, id));
        }
    }

    /// Recomputes the fence of the providers among `hosts` (floating IPs are not providers);
    /// a provider nested under a host held whole is held whole with it.
    fn refence(&mut self, hosts: BTreeSet<Uuid>) {
        for host in hosts {
            if !self.providers.contains_key(&host) {
                continue;
            }
            let fence = Fence::of(&self.ledger, host);
            let amounts = fence
                .amounts
                .into_iter()
                .map(|(class, n)| (self.intern(&class), n))
                .collect();
            for nested in self.subtree(host).into_iter().skip(1) {
                if let Some(child) = self.providers.get_mut(&nested) {
                    child.fence.whole = fence.whole;
                }
            }
            if let Some(provider) = self.providers.get_mut(&host) {
                provider.fence = Fence {
                    whole: fence.whole,
                    amounts,
                };
            }
        }
    }

    /// The lease holding a reservation.
    pub fn lease_of_reservation(&self, reservation: Uuid) -> Option<&Lease> {
        self.reservation_leases
            .get(&reservation)
            .and_then(|id| self.leases.get(id))
            .map(|lease| &**lease)
    }

    /// The leases holding something on `provider`, now or later.
    pub fn leases_holding(&self, provider: Uuid) -> impl Iterator<Item = &Lease> {
        let ids: BTreeSet<Uuid> = self
            .ledger
            .holds_on(provider, crate::model::ledger::Window::ALWAYS)
            .into_iter()
            .filter_map(|hold| self.reservation_leases.get(&hold.reservation).copied())
            .collect();
        ids.into_iter()
            .filter_map(|id| self.leases.get(&id).map(|lease| &**lease))
    }

    /// Every reservation some consumer presents.
    pub fn presented_reservations(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.reserved_consumers.keys().copied()
    }

    /// The consumers presenting a reservation.
    pub fn consumers_of_reservation(&self, reservation: Uuid) -> Vec<Uuid> {
        self.reserved_consumers
            .get(&reservation)
            .map(|set| set.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Units of `class` on `provider` that the consumers of `reservation` other than `except`
    /// hold.
    pub fn reserved_use(
        &self,
        reservation: Uuid,
        provider: Uuid,
        class: &ResourceClass,
        except: Uuid,
    ) -> u64 {
        self.reserved_consumers
            .get(&reservation)
            .into_iter()
            .flatten()
            .filter(|c| **c != except)
            .filter_map(|c| self.consumers.get(c))
            .map(|c| c.amount(provider, class))
            .sum()
    }

    /// One lease.
    pub fn lease(&self, id: Uuid) -> Option<&Lease> {
        self.leases.get(&id).map(|lease| &**lease)
    }

    /// Every lease, in no particular order.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.values().map(|lease| &**lease)
    }

    /// What the leases hold, by host and time.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The lifecycle event due first: `(due, kind, lease)`, or a node claim's expiry
    /// `(expires_at, NodeClaimExpiry, claim)`.
    pub fn next_due(&self) -> Option<(Instant, EventKind, Uuid)> {
        let claim = self
            .claim_due
            .first()
            .map(|(at, id)| (*at, EventKind::NodeClaimExpiry, *id));
        match (self.due.first().copied(), claim) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lifecycle events (and node claim expiries) due at or before `now`, earliest first (ends
    /// before starts at the same instant, so back-to-back leases hand over cleanly).
    pub fn due_events(&self, now: Instant) -> Vec<(Instant, EventKind, Uuid)> {
        let mut due: Vec<(Instant, EventKind, Uuid)> = self
            .due
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .copied()
            .collect();
        if self.claim_due.first().is_some_and(|(at, _)| *at <= now) {
            due.extend(
                self.claim_due
                    .iter()
                    .take_while(|(at, _)| *at <= now)
                    .map(|(at, id)| (*at, EventKind::NodeClaimExpiry, *id)),
            );
            due.sort_unstable();
        }
        due
    }

    /// Node claims, by uuid.
    pub fn claims(&self) -> impl Iterator<Item = &crate::model::baremetal::NodeClaim> {
        self.claims.values()
    }

    /// A node claim.
    pub fn claim(&self, uuid: Uuid) -> Option<&crate::model::baremetal::NodeClaim> {
        self.claims.get(&uuid)
    }

    /// The claim on a node, expired or not.
    pub fn claim_on(&self, node: Uuid) -> Option<&crate::model::baremetal::NodeClaim> {
        self.node_claims
            .get(&node)
            .and_then(|uuid| self.claims.get(uuid))
    }

    fn insert_claim(&mut self, claim: crate::model::baremetal::NodeClaim) {
        self.node_claims.insert(claim.node_uuid, claim.uuid);
        self.claim_due.insert((claim.expires_at, claim.uuid));
        self.claims.insert(claim.uuid, claim);
    }

    fn remove_claim(&mut self, uuid: Uuid) {
        if let Some(claim) = self.claims.remove(&uuid) {
            self.node_claims.remove(&claim.node_uuid);
            self.claim_due.remove(&(claim.expires_at, uuid));
        }
    }

    /// Floating IPs registered for reservation, in registration order.
    pub fn floating_ips(&self) -> impl Iterator<Item = &FloatingIp> {
        self.floating_ips.values()
    }

    /// Whether a host property is marked private.
    pub fn is_private_property(&self, name: &str) -> bool {
        self.private_properties.contains(name)
    }

    /// One floating IP.
    pub fn floating_ip(&self, id: Uuid) -> Option<&FloatingIp> {
        self.floating_ips.get(&id)
    }

    /// Every flavor, by id.
    pub fn flavors(&self) -> impl Iterator<Item = &crate::model::promise::Flavor> {
        self.flavors.values()
    }

    /// One flavor, by id or else by name.
    pub fn flavor(&self, id_or_name: &str) -> Option<&crate::model::promise::Flavor> {
        self.flavors
            .get(id_or_name)
            .or_else(|| self.flavors.values().find(|f| f.name == id_or_name))
    }

    /// The reservation policy.
    pub fn policy(&self) -> &crate::model::promise::Policy {
        static DEFAULT: std::sync::LazyLock<crate::model::promise::Policy> =
            std::sync::LazyLock::new(crate::model::promise::Policy::default);
        self.policy.as_ref().unwrap_or(&DEFAULT)
    }

    /// Every instance created through Promise, by id.
    pub fn instances(&self) -> impl Iterator<Item = &crate::model::promise::PromiseInstance> {
        self.instances.values()
    }

    /// One instance created through Promise.
    pub fn instance(&self, id: Uuid) -> Option<&crate::model::promise::PromiseInstance> {
        self.instances.get(&id)
    }

    /// The live Promise instances created against `lease`, by id: the consumers presenting
    /// its reservations that are its instances (found through the reservation index, not by
    /// scanning every instance).
    pub fn instances_of(&self, lease: &Lease) -> Vec<&crate::model::promise::PromiseInstance> {
        let mut found: Vec<&crate::model::promise::PromiseInstance> = lease
            .reservations
            .iter()
            .filter_map(|r| self.reserved_consumers.get(&r.id))
            .flatten()
            .filter_map(|id| self.instances.get(id))
            .filter(|i| i.reservation == Some(lease.id))
            .collect();
        found.sort_by_key(|i| i.id);
        found.dedup_by_key(|i| i.id);
        found
    }

    /// Every subscription, by id.
    pub fn subscriptions(&self) -> impl Iterator<Item = &crate::model::notify::Subscription> {
        self.subscriptions.values()
    }

    /// One subscription.
    pub fn subscription(&self, id: Uuid) -> Option<&crate::model::notify::Subscription> {
        self.subscriptions.get(&id)
    }

    /// Every delivery pending or dead, by notification id.
    pub fn deliveries(&self) -> impl Iterator<Item = &crate::model::notify::Delivery> {
        self.deliveries.values()
    }

    /// One delivery.
    pub fn delivery(&self, id: &str) -> Option<&crate::model::notify::Delivery> {
        self.deliveries.get(id)
    }

    /// The outbox sequence number expanded into deliveries up to.
    pub fn outbox_cursor(&self) -> u64 {
        self.outbox_cursor
    }

    /// Every planned capacity change, by id.
    pub fn pools(&self) -> impl Iterator<Item = &crate::model::promise::CapacityPool> {
        self.pools.values()
    }

    /// One planned capacity change.
    pub fn pool(&self, id: Uuid) -> Option<&crate::model::promise::CapacityPool> {
        self.pools.get(&id)
    }

    /// Whether a planned capacity change starts or ends in `(from, to]`: the only way capacity
    /// moves with time alone, without a committed change.
    pub fn capacity_changes_between(&self, from: Instant, to: Instant) -> bool {
        let inside = |t: Instant| from < t && t <= to;
        self.pools
            .values()
            .any(|p| inside(p.start) || inside(p.end))
    }

    /// The planned changes of `class` on `provider` that overlap `window`, as
    /// `(window, delta)`.
    pub fn capacity_changes(
        &self,
        provider: Uuid,
        class: &ResourceClass,
        window: crate::model::ledger::Window,
    ) -> Vec<(crate::model::ledger::Window, i64)> {
        let Some(ids) = self.pooled.get(&provider) else {
            return Vec::new();
        };
        ids.iter()
            .filter_map(|id| self.pools.get(id))
            .filter(|pool| pool.window().overlaps(&window))
            .flat_map(|pool| {
                pool.deltas
                    .iter()
                    .filter(|(p, c, _)| *p == provider && c == class.as_str())
                    .map(|(_, _, delta)| (pool.window(), *delta))
            })
            .collect()
    }

    /// The least the planned changes add to `class` on `provider` at any instant of `window`
    /// (negative when a decrease applies at some instant; positive only when increases cover
    /// the whole window).
    pub fn capacity_change_min(
        &self,
        provider: Uuid,
        class: &ResourceClass,
        window: crate::model::ledger::Window,
    ) -> i64 {
        if self.pooled.is_empty() {
            return 0;
        }
        let changes = self.capacity_changes(provider, class, window);
        if changes.is_empty() {
            return 0;
        }
        let mut instants: Vec<Instant> = vec![window.start];
        for (w, _) in &changes {
            instants.extend([w.start, w.end].into_iter().filter(|t| window.contains(*t)));
        }
        instants
            .into_iter()
            .map(|t| {
                changes
                    .iter()
                    .filter(|(w, _)| w.contains(t))
                    .map(|(_, d)| *d)
                    .sum::<i64>()
            })
            .min()
            .unwrap_or(0)
    }

    /// Whether a planned decrease applies to `provider` at some instant of `window`.
    pub fn capacity_decreased(&self, provider: Uuid, window: crate::model::ledger::Window) -> bool {
        !self.pooled.is_empty()
            && self.pooled.get(&provider).is_some_and(|ids| {
                ids.iter().filter_map(|id| self.pools.get(id)).any(|pool| {
                    pool.window().overlaps(&window)
                        && pool.deltas.iter().any(|(p, _, d)| *p == provider && *d < 0)
                })
            })
    }

    fn insert_pool(&mut self, pool: crate::model::promise::CapacityPool) {
        for (provider, _, _) in &pool.deltas {
            self.pooled.entry(*provider).or_default().insert(pool.id);
        }
        self.pools.insert(pool.id, pool);
    }

    fn remove_pool(&mut self, id: Uuid) {
        let Some(pool) = self.pools.remove(&id) else {
            return;
        };
        for (provider, _, _) in &pool.deltas {
            if let Some(ids) = self.pooled.get_mut(provider) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.pooled.remove(provider);
                }
            }
        }
    }

    fn update_provider(&mut self, row: &ProviderRow) {
        let old_name = self.provider_mut(row.uuid).name.clone();
        if old_name != row.name {
            self.by_name.remove(&old_name);
            self.by_name.insert(row.name.clone(), row.uuid);
        }
        let old_parent = self.provider_mut(row.uuid).parent;
        if old_parent != row.parent {
            if let Some(old) = old_parent {
                self.unlink_child(old, row.uuid);
            }
            if let Some(new) = row.parent {
                self.children.entry(new).or_default().push(row.uuid);
            }
        }
        let provider = self.provider_mut(row.uuid);
        assert_eq!(
            provider.id, row.id,
            "invariant: a provider's id never changes"
        );
        provider.name = row.name.clone();
        provider.parent = row.parent;
        provider.root = row.root;
        provider.generation = row.generation;
        provider.availability_zone = row.availability_zone.clone();
        provider.updated_at = row.updated_at;
    }

    fn delete_provider(&mut self, uuid: Uuid) {
        let provider = self
            .providers
            .shift_remove(&uuid)
            .expect("invariant: deleted provider exists");
        self.by_name.remove(&provider.name);
        self.by_id.remove(&provider.id);
        self.sharing.remove(&uuid);
        assert!(
            !self.children.contains_key(&uuid),
            "invariant: a deleted provider has no children"
        );
        if let Some(parent) = provider.parent {
            self.unlink_child(parent, uuid);
        }
    }

    fn unlink_child(&mut self, parent: Uuid, child: Uuid) {
        let siblings = self
            .children
            .get_mut(&parent)
            .expect("invariant: a child is listed under its parent");
        siblings.retain(|c| *c != child);
        if siblings.is_empty() {
            self.children.remove(&parent);
        }
    }

    fn insert_provider(&mut self, row: ProviderRow) {
        if let Some(parent) = row.parent {
            self.children.entry(parent).or_default().push(row.uuid);
        }
        assert!(
            !self.providers.contains_key(&row.uuid),
            "invariant: provider uuids are unique"
        );
        assert!(
            !self.by_name.contains_key(&row.name),
            "invariant: provider names are unique"
        );
        self.by_name.insert(row.name.clone(), row.uuid);
        self.by_id.insert(row.id, row.uuid);
        self.next_id = self.next_id.max(row.id + 1);
        let whole = row
            .parent
            .and_then(|parent| self.providers.get(&parent))
            .is_some_and(|parent| parent.fence.whole);
        let mut provider = Provider::from_row(row);
        provider.fence.whole = whole;
        self.providers.insert(provider.uuid, provider);
    }

    fn intern(&mut self, class: &ResourceClass) -> ResourceClass {
        match self.classes.get(class) {
            Some(shared) => shared.clone(),
            None => {
                self.classes.insert(class.clone());
                class.clone()
            }
        }
    }

    /// The shared instance of a class name, for pointer lookups with
    /// [`Provider::inventory_interned`]; a class no inventory has comes back as it is.
    pub fn interned_class(&self, class: &ResourceClass) -> ResourceClass {
        self.classes
            .get(class)
            .cloned()
            .unwrap_or_else(|| class.clone())
    }

    fn insert_consumer(&mut self, uuid: Uuid, consumer: Consumer) {
        let preemptible = is_preemptible(&consumer);
        for (provider, class, amount) in consumer.entries() {
            let class = self.intern(class);
            let found = self.provider_mut(provider);
            if consumer.reservation.is_some() {
                *found.reserved_usages.entry(class.clone()).or_insert(0) += amount;
            }
            if preemptible {
                *found.preemptible_usages.entry(class.clone()).or_insert(0) += amount;
            }
            *found.usages.entry(class).or_insert(0) += amount;
        }
        if let Some(reservation) = consumer.reservation {
            self.reserved_consumers
                .entry(reservation)
                .or_default()
                .insert(uuid);
        }
        let previous = self.consumers.insert(uuid, consumer);
        assert!(
            previous.is_none(),
            "invariant: a consumer is removed before it is replaced"
        );
    }

    fn remove_consumer(&mut self, uuid: Uuid) {
        let Some(consumer) = self.consumers.remove(&uuid) else {
            return;
        };
        let reserved = consumer.reservation.is_some();
        let preemptible = is_preemptible(&consumer);
        for (provider, class, amount) in consumer.entries() {
            let found = self.provider_mut(provider);
            for (usages, applies) in [
                (&mut found.usages, true),
                (&mut found.reserved_usages, reserved),
                (&mut found.preemptible_usages, preemptible),
            ] {
                if !applies {
                    continue;
                }
                let used = usages
                    .get_mut(class)
                    .expect("invariant: a held amount is counted in usage");
                *used = used
                    .checked_sub(amount)
                    .expect("invariant: usage covers every held amount");
                if *used == 0 {
                    usages.remove(class);
                }
            }
        }
        if let Some(reservation) = consumer.reservation
            && let Some(set) = self.reserved_consumers.get_mut(&reservation)
        {
            set.remove(&uuid);
            if set.is_empty() {
                self.reserved_consumers.remove(&reservation);
            }
        }
    }

    fn provider_mut(&mut self, uuid: Uuid) -> &mut Provider {
        self.providers
            .get_mut(&uuid)
            .expect("invariant: changes name existing providers")
    }

    /// The catalog as flat rows, each list sorted; the inverse of [`Catalog::from_rows`].
    pub fn to_rows(&self) -> CatalogRows {
        let mut rows = CatalogRows {
            seq: self.seq,
            ..CatalogRows::default()
        };
        for provider in self.providers.values() {
            let uuid = provider.uuid;
            rows.providers.push(provider.row());
            rows.inventories.extend(
                provider
                    .inventories
                    .iter()
                    .map(|(c, r)| (uuid, c.clone(), *r)),
            );
            rows.traits
                .extend(provider.traits.iter().map(|t| (uuid, t.clone())));
            rows.aggregates
                .extend(provider.aggregates.iter().map(|a| (uuid, *a)));
            rows.attributes.extend(
                provider
                    .attributes
                    .iter()
                    .map(|(k, v)| (uuid, k.clone(), v.clone())),
            );
            rows.hosts
                .extend(provider.host.iter().map(|h| (uuid, h.clone())));
            rows.conditions
                .extend(provider.condition.iter().map(|c| (uuid, c.clone())));
            rows.nodes
                .extend(provider.node.iter().map(|n| (uuid, n.clone())));
        }
        rows.resource_classes = self.custom_classes.iter().cloned().collect();
        rows.custom_traits = self.custom_traits.iter().cloned().collect();
        rows.aggregate_records = self
            .aggregates
            .iter()
            .map(|(u, r)| (*u, r.clone()))
            .collect();
        rows.consumers = self
            .consumers
            .iter()
            .map(|(u, c)| (*u, c.clone()))
            .collect();
        rows.leases = self.leases.values().map(Arc::clone).collect();
        rows.floating_ips = self.floating_ips.values().cloned().collect();
        rows.private_properties = self.private_properties.iter().cloned().collect();
        rows.flavors = self.flavors.values().cloned().collect();
        rows.policy = self.policy.clone();
        rows.instances = self.instances.values().cloned().collect();
        rows.pools = self.pools.values().cloned().collect();
        rows.subscriptions = self.subscriptions.values().cloned().collect();
        rows.deliveries = self.deliveries.values().cloned().collect();
        rows.outbox_cursor = self.outbox_cursor;
        rows.claims = self.claims.values().cloned().collect();
        rows.idempotency = self
            .idempotency
            .records
            .iter()
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        rows.normalize();
        rows
    }

    /// Usage of every provider and class equals the sum of what consumers hold there, and every
    /// held amount sits on an existing provider with inventory of its class.
    fn check_usage(&self) -> Result<(), String> {
        let mut counted: HashMap<(Uuid, &ResourceClass), u64> = HashMap::new();
        for (uuid, consumer) in &self.consumers {
            for (provider, class, amount) in consumer.entries() {
                let Some(holder) = self.providers.get(&provider) else {
                    return Err(format!(
                        "consumer {uuid} holds capacity on a missing provider {provider}"
                    ));
                };
                if !holder.inventories.contains_key(class) {
                    return Err(format!(
                        "consumer {uuid} holds {} without inventory on {provider}",
                        class.as_str()
                    ));
                }
                *counted.entry((provider, class)).or_insert(0) += amount;
            }
        }
        for provider in self.providers.values() {
            for (class, used) in &provider.usages {
                if counted.get(&(provider.uuid, class)) != Some(used) {
                    return Err(format!(
                        "usage of {} on {} differs from its consumers",
                        class.as_str(),
                        provider.uuid
                    ));
                }
            }
        }
        if counted.len()
            != self
                .providers
                .values()
                .map(|p| p.usages.len())
                .sum::<usize>()
        {
            return Err("a held amount is missing from usage".into());
        }
        Ok(())
    }

    /// Every claim holds an existing node, and no node is held by two claims.
    fn check_claims(&self) -> Result<(), String> {
        for claim in self.claims.values() {
            if self
                .provider(claim.node_uuid)
                .and_then(Provider::node)
                .is_none()
            {
                return Err(format!("claim {} holds a missing node", claim.uuid));
            }
            if self.node_claims.get(&claim.node_uuid) != Some(&claim.uuid) {
                return Err(format!("claim {} is not indexed by its node", claim.uuid));
            }
        }
        if self.node_claims.len() != self.claims.len() {
            return Err("two claims hold one node".into());
        }
        Ok(())
    }

    /// Every idempotency record is indexed by its age, and nothing else is.
    fn check_idempotency(&self) -> Result<(), String> {
        let index = &self.idempotency;
        if index.by_age.len() != index.records.len() {
            return Err("the idempotency age index is out of step".into());
        }
        for (at, key) in &index.by_age {
            if index.records.get(key).map(|r| r.created_at) != Some(*at) {
                return Err(format!("idempotency key {:?} is misindexed", key.key));
            }
        }
        Ok(())
    }

    /// The record of an idempotency key, live or expired.
    pub fn idempotency_record(&self, key: &IdempotencyKey) -> Option<&IdempotencyRecord> {
        self.idempotency.records.get(key)
    }

    /// Every idempotency record, in no order.
    pub fn idempotency_records(
        &self,
    ) -> impl Iterator<Item = (&IdempotencyKey, &IdempotencyRecord)> {
        self.idempotency.records.iter()
    }

    /// Keys whose record expired by `now`, oldest first.
    pub fn idempotency_expired(&self, now: Instant) -> impl Iterator<Item = &IdempotencyKey> {
        self.idempotency
            .by_age
            .iter()
            .take_while(move |(at, key)| {
                self.idempotency
                    .records
                    .get(key)
                    .is_some_and(|r| r.created_at == *at && !r.is_live(now))
            })
            .map(|(_, key)| key)
    }

    /// Checks every structural invariant; O(n). Used after every step in tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_claims()?;
        self.check_idempotency()?;
        if self.by_name.len() != self.providers.len() || self.by_id.len() != self.providers.len() {
            return Err("name or id index out of step with providers".into());
        }
        let listed: usize = self.children.values().map(Vec::len).sum();
        let nested = self
            .providers
            .values()
            .filter(|p| p.parent.is_some())
            .count();
        if listed != nested
            || self.children.iter().any(|(parent, kids)| {
                kids.iter()
                    .any(|k| self.providers.get(k).and_then(|p| p.parent) != Some(*parent))
            })
        {
            return Err("the children index is out of step with parents".into());
        }
        let sharing: BTreeSet<Uuid> = self
            .providers
            .values()
            .filter(|p| is_sharing(p))
            .map(|p| p.uuid)
            .collect();
        if sharing != self.sharing {
            return Err("the sharing index is out of step with traits".into());
        }
        self.check_usage()?;
        let held: usize = self.leases.values().map(|l| l.holds().len()).sum();
        if held != self.ledger.len() {
            return Err("the ledger is out of step with the leases".into());
        }
        let mut names = BTreeSet::new();
        for name in self
            .aggregates
            .values()
            .filter_map(|record| record.name.as_ref())
        {
            if !names.insert(name) {
                return Err(format!("two aggregates are named {name}"));
            }
        }
        for provider in self.providers.values() {
            if let Some(parent) = provider.parent {
                let Some(parent) = self.providers.get(&parent) else {
                    return Err(format!("{} has a missing parent", provider.uuid));
                };
                if parent.root != provider.root {
                    return Err(format!(
                        "{} has a root different from its parent's",
                        provider.uuid
                    ));
                }
            } else if provider.root != provider.uuid {
                return Err(format!(
                    "root provider {} is not its own root",
                    provider.uuid
                ));
            }
            if provider.host.is_some() && provider.parent.is_some() {
                return Err(format!(
                    "nested provider {} is enrolled as a host",
                    provider.uuid
                ));
            }
            for class in provider.inventories.keys() {
                if !self.has_resource_class(class) {
                    return Err(format!(
                        "{} has inventory of unknown class {}",
                        provider.uuid,
                        class.as_str()
                    ));
                }
            }
            for name in &provider.traits {
                if !self.has_trait(name) {
                    return Err(format!(
                        "{} has unknown trait {}",
                        provider.uuid,
                        name.as_str()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A provider's attributes as a sorted map, for callers building attribute changes.
pub type Attributes = BTreeMap<String, AttrValue>;

/// Whether a provider has the sharing trait.
/// Whether a consumer is best-effort work a reservation may evict (preemptible, presenting no
/// reservation).
fn is_preemptible(consumer: &Consumer) -> bool {
    consumer.reservation.is_none()
        && consumer.consumer_type.as_deref() == Some(crate::model::consumer::PREEMPTIBLE)
}

fn is_sharing(provider: &Provider) -> bool {
    provider
        .traits
        .iter()
        .any(|t| t.as_str() == crate::model::provider::SHARING_TRAIT)
}
