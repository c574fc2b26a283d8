//! The catalog as the flat rows storage holds, both ways.

use super::providers::is_sharing;
use super::state::Catalog;
use crate::model::baremetal::{NodeClaim, NodeRecord};
use crate::model::cloud::ProviderCloud;
use crate::model::consumer::Consumer;
use crate::model::id::ProviderId;
use crate::model::inventory::Inventory;
use crate::model::lease::{FloatingIp, Lease};
use crate::model::name::{ResourceClass, TraitName};
use crate::model::notify::{Delivery, Subscription};
use crate::model::promise::{CapacityPool, Flavor, Policy, PromiseInstance};
use crate::model::provider::{
    AggregateRecord, AttrValue, HostRecord, ProviderCondition, ProviderRow,
};
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
    pub inventories: Vec<(ProviderId, ResourceClass, Inventory)>,
    /// `(provider, trait)`.
    pub traits: Vec<(ProviderId, TraitName)>,
    /// `(provider, aggregate)`.
    pub aggregates: Vec<(ProviderId, Uuid)>,
    /// `(provider, key, value)`.
    pub attributes: Vec<(ProviderId, String, AttrValue)>,
    /// `(provider, host)`.
    pub hosts: Vec<(ProviderId, HostRecord)>,
    /// `(provider, condition)` of providers out of service.
    pub conditions: Vec<(ProviderId, ProviderCondition)>,
    /// `(provider, node)` of bare-metal nodes.
    pub nodes: Vec<(ProviderId, NodeRecord)>,
    /// Node claims.
    pub claims: Vec<NodeClaim>,
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
    pub flavors: Vec<Flavor>,
    /// Registered provider clouds.
    pub provider_clouds: Vec<ProviderCloud>,
    /// The reservation policy, when one was set.
    pub policy: Option<Policy>,
    /// Budgets.
    pub budgets: Vec<crate::model::budget::Budget>,
    /// Instances created through Promise.
    pub instances: Vec<PromiseInstance>,
    /// Planned capacity changes.
    pub pools: Vec<CapacityPool>,
    /// Subscriptions.
    pub subscriptions: Vec<Subscription>,
    /// Deliveries pending or dead.
    pub deliveries: Vec<Delivery>,
    /// The outbox sequence number expanded up to.
    pub outbox_cursor: u64,
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
        self.budgets.sort_by(|a, b| a.project_id.cmp(&b.project_id));
        self.provider_clouds.sort_by_key(|c| c.id);
        self.instances.sort_by_key(|i| i.id);
        self.pools.sort_by_key(|p| p.id);
        self.subscriptions.sort_by_key(|s| s.id);
        self.deliveries.sort_by(|a, b| a.id.cmp(&b.id));
    }
}

impl Catalog {
    /// Rebuilds the catalog from storage rows. Rows naming unknown providers are a storage bug.
    pub fn from_rows(rows: CatalogRows) -> Catalog {
        #[cfg(feature = "planted-defects")]
        let rows = forget_fired(rows);
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
        let sharing: Vec<ProviderId> = catalog
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
        catalog.clouds = rows
            .provider_clouds
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        catalog.policy = rows.policy;
        catalog.budgets = rows
            .budgets
            .into_iter()
            .map(|b| (b.project_id.clone(), b))
            .collect();
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
        debug_assert!(catalog.check_invariants().is_ok());
        catalog
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
        rows.leases = self.leases.iter().map(|l| Arc::clone(&l.0)).collect();
        rows.floating_ips = self.floating_ips.values().cloned().collect();
        rows.private_properties = self.private_properties.iter().cloned().collect();
        rows.flavors = self.flavors.values().cloned().collect();
        rows.provider_clouds = self.clouds.values().cloned().collect();
        rows.policy = self.policy.clone();
        rows.budgets = self.budgets.values().cloned().collect();
        rows.instances = self.instances.values().cloned().collect();
        rows.pools = self.pools.values().cloned().collect();
        rows.subscriptions = self.subscriptions.values().cloned().collect();
        rows.deliveries = self.deliveries.values().cloned().collect();
        rows.outbox_cursor = self.outbox_cursor;
        rows.claims = self.claims.values().cloned().collect();
        rows.normalize();
        rows
    }
}

/// The planted defect [`crate::planted::Defect::RefireAfterRecovery`]: every lease event loaded
/// is taken as not yet fired.
#[cfg(feature = "planted-defects")]
fn forget_fired(mut rows: CatalogRows) -> CatalogRows {
    use crate::model::lease::EventStatus;
    use crate::planted::{Defect, planted};
    if planted(Defect::RefireAfterRecovery) {
        for lease in &mut rows.leases {
            let lease = Arc::make_mut(lease);
            for event in &mut lease.events {
                event.status = EventStatus::Undone;
            }
        }
    }
    rows
}
