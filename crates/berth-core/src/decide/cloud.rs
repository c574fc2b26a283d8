//! Provider clouds: registering one (Promise's `add-provider`) and removing it.
//!
//! The server has already authenticated against the cloud's Keystone and found its services
//! before it asks: the decision only keeps the catalog's provider ids and registrations unique.
//!
//! Synchronising one: the server reads the cloud's Placement (off the writer lock) into a
//! [`RemoteSnapshot`], and [`sync`] turns it into the changes that differ; [`unreachable`]
//! records a failed read.

use crate::catalog::{Catalog, provider_cloud_of};
use crate::change::{Change, record};
use crate::limits::{
    PROVIDER_CLOUD_ERROR_LEN_MAX, PROVIDER_CLOUD_PROVIDERS_MAX, PROVIDER_CLOUDS_MAX,
    PROVIDER_NAME_LEN_MAX, TREE_DEPTH_MAX,
};
use crate::model::cloud::{
    PROVIDER_CLOUD_ATTRIBUTE, ProviderCloud, REMOTE_GENERATION_ATTRIBUTE, REMOTE_UUID_ATTRIBUTE,
    RemoteDetails, RemoteProvider, RemoteSnapshot, SyncState, local_provider_uuid,
};
use crate::model::id::{LeaseId, ProviderId};
use crate::model::inventory::{FullReservation, Inventory};
use crate::model::lease::Lease;
use crate::model::name::{ResourceClass, TraitName, is_custom_name};
use crate::model::provider::{
    AttrValue, HostRecord, Provider, ProviderCondition, ProviderRow, ProviderStatus,
};
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Registers `cloud`. Its id must be new, no registered cloud may have the same Keystone
/// endpoint, user, project and region (the same cloud twice would count its capacity twice),
/// and at most [`PROVIDER_CLOUDS_MAX`] are registered.
pub fn add_provider_cloud(
    catalog: &Catalog,
    cloud: ProviderCloud,
) -> Result<Vec<Change>, Rejection> {
    if catalog.provider_cloud(cloud.id).is_some() {
        return Err(Rejection::ProviderCloudExists(cloud.id));
    }
    if catalog.provider_clouds().count() >= PROVIDER_CLOUDS_MAX {
        return Err(Rejection::TooMany("provider clouds"));
    }
    let same = catalog.provider_clouds().find(|c| {
        c.auth_url == cloud.auth_url
            && c.username == cloud.username
            && c.project == cloud.project
            && c.region == cloud.region
    });
    if let Some(same) = same {
        return Err(Rejection::ProviderCloudExists(same.id));
    }
    Ok(vec![Change::ProviderCloudSet {
        id: cloud.id,
        cloud: Some(cloud),
    }])
}

/// Removes the cloud `id` and the providers imported from it. While leases hold its capacity or
/// consumers allocate on its providers, it is refused ([`Rejection::ProviderCloudInUse`])
/// unless `force`d: then the leases are told (`lease.provider_removed` in their lifecycle
/// record) and keep the providers they hold, out of service and berth's own from now on (an
/// admin deletes them once nothing holds them); the others are deleted.
pub fn remove_provider_cloud(
    catalog: &Catalog,
    id: Uuid,
    force: bool,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let cloud = catalog
        .provider_cloud(id)
        .ok_or(Rejection::ProviderCloudNotFound(id))?;
    let flagged = flag_leases(
        catalog,
        id,
        "lease.provider_removed",
        now,
        &serde_json::json!({"provider": id, "state": "removed"}),
    );
    let allocated = catalog
        .cloud_providers(id)
        .filter(|p| p.has_usage())
        .count();
    if !force && (!flagged.is_empty() || allocated > 0) {
        return Err(Rejection::ProviderCloudInUse {
            cloud: id,
            leases: flagged.len(),
            allocated,
        });
    }
    let nothing = RemoteSnapshot::default();
    let mut sync = Sync::new(catalog, cloud, &nothing, now);
    sync.remove_gone(&removed_reason(id));
    let mut changes = flagged;
    changes.extend(sync.changes);
    changes.push(Change::ProviderCloudSet { id, cloud: None });
    Ok(changes)
}

/// The reason an imported provider that leases still held when its cloud was removed is out of
/// service.
pub fn removed_reason(cloud: Uuid) -> String {
    format!("provider cloud {cloud} was removed")
}

/// The reason an imported provider is out of service while its cloud cannot be reached.
pub fn unreachable_reason(cloud: Uuid) -> String {
    format!("provider cloud {cloud} is unreachable")
}

/// The reason an imported provider that its cloud no longer lists, but that leases still hold,
/// is out of service.
pub fn gone_reason(cloud: Uuid) -> String {
    format!("provider cloud {cloud} no longer lists this provider")
}

/// Brings the providers imported from cloud `id` in line with what its Placement listed
/// (`snapshot`): providers new there are created (with their details), those whose details were
/// read get only what differs, those gone are deleted (or taken out of service while a lease
/// holds them), and a cloud that was unknown is known again (its providers return to service).
/// A snapshot equal to what berth imported changes nothing.
///
/// Remote usages count as reserved here: each class's `reserved` is the remote `reserved` plus
/// what the remote consumers use (in units of capacity, so divided by the allocation ratio,
/// rounded up), capped at `total`; berth's own answers then count the remote usage as taken.
/// A remote consumer that is also a consumer here (an instance berth placed on the provider
/// and wrote into the cloud's Placement) is counted once, here, as the allocation it is.
pub fn sync(
    catalog: &Catalog,
    id: Uuid,
    snapshot: &RemoteSnapshot,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let cloud = catalog
        .provider_cloud(id)
        .ok_or(Rejection::ProviderCloudNotFound(id))?;
    if snapshot.providers.len() > PROVIDER_CLOUD_PROVIDERS_MAX {
        return Err(Rejection::TooMany("remote providers"));
    }
    let mut sync = Sync::new(catalog, cloud, snapshot, now);
    for remote in sync.ordered() {
        sync.import(remote);
    }
    sync.remove_gone(&gone_reason(id));
    sync.known_again();
    Ok(sync.changes)
}

/// Records that cloud `id` could not be reached (`error`): its capacity is unknown from now,
/// its providers are out of service (kept by the leases that hold them, offered to no new
/// one). Once unknown, only a different error is written.
pub fn unreachable(
    catalog: &Catalog,
    id: Uuid,
    error: &str,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let cloud = catalog
        .provider_cloud(id)
        .ok_or(Rejection::ProviderCloudNotFound(id))?;
    let error: String = error.chars().take(PROVIDER_CLOUD_ERROR_LEN_MAX).collect();
    let mut record = cloud.clone();
    if cloud.sync.state == SyncState::Unknown {
        if cloud.sync.last_error.as_deref() == Some(error.as_str()) {
            return Ok(Vec::new());
        }
        record.sync.last_error = Some(error);
        return Ok(vec![Change::ProviderCloudSet {
            id,
            cloud: Some(record),
        }]);
    }
    record.sync.state = SyncState::Unknown;
    record.sync.since = Some(now);
    record.sync.last_error = Some(error.clone());
    let mut changes = vec![Change::ProviderCloudSet {
        id,
        cloud: Some(record),
    }];
    let details = serde_json::json!({"provider": id, "state": "unknown", "reason": error});
    changes.extend(flag_leases(
        catalog,
        id,
        "lease.provider_unreachable",
        now,
        &details,
    ));
    for provider in catalog.cloud_providers(id).filter(|p| p.is_up()) {
        changes.push(Change::ProviderConditionSet {
            uuid: provider.uuid(),
            condition: Some(ProviderCondition {
                status: ProviderStatus::Down,
                reason: Some(unreachable_reason(id)),
                since: now,
            }),
        });
    }
    Ok(changes)
}

/// The refusal of a request that did not fit in `zone` (`None`: any) while capacity there is a
/// provider cloud's that cannot be reached: the first such cloud, by id.
pub fn unreachable_refusal(catalog: &Catalog, zone: Option<&str>) -> Option<Rejection> {
    catalog
        .provider_clouds()
        .filter(|c| c.sync.state == SyncState::Unknown)
        .filter(|c| zone.is_none_or(|z| c.region.as_deref() == Some(z)))
        .find(|c| catalog.cloud_providers(c.id).next().is_some())
        .map(|c| Rejection::ProviderCloudUnreachable {
            cloud: c.id,
            reason: c.sync.last_error.clone().unwrap_or_default(),
        })
}

/// One synchronisation's work: the changes so far and what they already made.
struct Sync<'a> {
    catalog: &'a Catalog,
    cloud: &'a ProviderCloud,
    remote: BTreeMap<Uuid, &'a RemoteProvider>,
    now: Instant,
    changes: Vec<Change>,
    next_id: i64,
    classes: BTreeSet<ResourceClass>,
    traits: BTreeSet<TraitName>,
}

impl<'a> Sync<'a> {
    fn new(
        catalog: &'a Catalog,
        cloud: &'a ProviderCloud,
        snapshot: &'a RemoteSnapshot,
        now: Instant,
    ) -> Sync<'a> {
        Sync {
            catalog,
            cloud,
            remote: snapshot.providers.iter().map(|p| (p.uuid, p)).collect(),
            now,
            changes: Vec::new(),
            next_id: catalog.next_provider_id(),
            classes: BTreeSet::new(),
            traits: BTreeSet::new(),
        }
    }

    fn local(&self, remote: Uuid) -> ProviderId {
        ProviderId::new(local_provider_uuid(self.cloud.id, remote))
    }

    /// The remote parent of `remote`, when the listing has it (else it is taken as a root).
    fn parent(&self, remote: &RemoteProvider) -> Option<Uuid> {
        remote.parent.filter(|p| self.remote.contains_key(p))
    }

    /// The remote providers, parents before their children (a cycle or a chain deeper than
    /// [`TREE_DEPTH_MAX`] is cut there: the provider is taken as a root).
    fn ordered(&self) -> Vec<&'a RemoteProvider> {
        let mut by_depth: Vec<(usize, &'a RemoteProvider)> = self
            .remote
            .values()
            .map(|p| (self.ancestry(p).len(), *p))
            .collect();
        by_depth.sort_by_key(|(depth, p)| (*depth, p.uuid));
        by_depth.into_iter().map(|(_, p)| p).collect()
    }

    /// The remote ancestors of `remote`, nearest first, within [`TREE_DEPTH_MAX`].
    fn ancestry(&self, remote: &RemoteProvider) -> Vec<Uuid> {
        let mut out = Vec::new();
        let mut at = self.parent(remote);
        while let Some(parent) = at {
            if out.len() >= TREE_DEPTH_MAX || out.contains(&parent) || parent == remote.uuid {
                return Vec::new();
            }
            out.push(parent);
            at = self.remote.get(&parent).and_then(|p| self.parent(p));
        }
        out
    }

    /// The local name of `remote`: the cloud's id and the remote name, or the remote uuid when
    /// that is too long or taken by another provider.
    fn name(&self, remote: &RemoteProvider, local: ProviderId) -> String {
        let name = format!("{}:{}", self.cloud.id, remote.name);
        let free = self
            .catalog
            .provider_by_name(&name)
            .is_none_or(|p| p.uuid() == local);
        match name.chars().count() <= PROVIDER_NAME_LEN_MAX && free {
            true => name,
            false => format!("{}:{}", self.cloud.id, remote.uuid),
        }
    }

    fn row(&mut self, remote: &RemoteProvider, current: Option<&Provider>) -> ProviderRow {
        let uuid = self.local(remote.uuid);
        let ancestry = self.ancestry(remote);
        let parent = ancestry.first().map(|p| self.local(*p));
        let root = ancestry.last().map_or(uuid, |r| self.local(*r));
        let (id, created_at) = match current {
            Some(p) => (p.id(), p.created_at()),
            None => {
                self.next_id += 1;
                (self.next_id - 1, self.now)
            }
        };
        ProviderRow {
            id,
            uuid,
            name: self.name(remote, uuid),
            parent,
            root,
            // berth's own: a new provider starts at the remote generation, and what changes
            // it here moves it on (see `import`).
            generation: current.map_or(remote.generation, Provider::generation),
            availability_zone: self.cloud.region.clone(),
            created_at,
            updated_at: self.now,
        }
    }

    fn import(&mut self, remote: &RemoteProvider) {
        let uuid = self.local(remote.uuid);
        let current = self.catalog.provider(uuid);
        if current.is_some_and(|p| provider_cloud_of(p) != Some(self.cloud.id)) {
            return;
        }
        let row = self.row(remote, current);
        match current {
            None => {
                let Some(details) = &remote.details else {
                    return;
                };
                self.changes.push(Change::ProviderCreated(row));
                self.details(uuid, None, details, remote);
            }
            Some(p) => {
                let mut was = p.row();
                was.updated_at = row.updated_at;
                let before = self.changes.len();
                if let Some(details) = &remote.details {
                    self.details(uuid, Some(p), details, remote);
                }
                // Any change moves the generation on, as a write through Placement would.
                if was != row || self.changes.len() > before {
                    let row = ProviderRow {
                        generation: p.generation() + 1,
                        ..row
                    };
                    self.changes.insert(before, Change::ProviderUpdated(row));
                }
            }
        }
    }

    fn details(
        &mut self,
        uuid: ProviderId,
        current: Option<&Provider>,
        details: &RemoteDetails,
        remote: &RemoteProvider,
    ) {
        let inventories = self.inventories(details);
        if current.is_none_or(|p| *p.inventories() != inventories) {
            self.changes.push(Change::InventoriesReplaced {
                uuid,
                inventories: inventories.clone(),
            });
        }
        let traits = self.traits(details);
        if current.is_none_or(|p| *p.traits() != traits) {
            self.changes.push(Change::TraitsReplaced { uuid, traits });
        }
        if current.is_none_or(|p| *p.aggregates() != details.aggregates) {
            self.changes.push(Change::AggregatesReplaced {
                uuid,
                aggregates: details.aggregates.clone(),
            });
        }
        let attributes = BTreeMap::from([
            (
                PROVIDER_CLOUD_ATTRIBUTE.to_owned(),
                AttrValue::String(self.cloud.id.to_string()),
            ),
            (
                REMOTE_UUID_ATTRIBUTE.to_owned(),
                AttrValue::String(remote.uuid.to_string()),
            ),
            (
                REMOTE_GENERATION_ATTRIBUTE.to_owned(),
                AttrValue::Number(remote.generation as f64),
            ),
        ]);
        if current.is_none_or(|p| *p.attributes() != attributes) {
            self.changes
                .push(Change::AttributesReplaced { uuid, attributes });
        }
        // A root with processors is a host Promise reservations and Blazar leases may take.
        let vcpu = ResourceClass::parse("VCPU").expect("a standard class");
        let host =
            (self.ancestry(remote).is_empty() && inventories.contains_key(&vcpu)).then(|| {
                HostRecord {
                    hypervisor_type: None,
                    service_name: Some(remote.name.clone()),
                    reservable: true,
                    enrolled_at: current
                        .and_then(|p| p.host().map(|h| h.enrolled_at))
                        .unwrap_or(self.now),
                }
            });
        if current.map_or(host.is_some(), |p| p.host() != host.as_ref()) {
            self.changes.push(Change::HostSet { uuid, host });
        }
    }

    /// The local inventories of `details`, remote usage counted as reserved; custom classes
    /// berth does not know are created, records berth cannot take are left out.
    fn inventories(&mut self, details: &RemoteDetails) -> BTreeMap<ResourceClass, Inventory> {
        let mut out = BTreeMap::new();
        for (class, record) in &details.inventories {
            let used: u64 = details
                .allocations
                .iter()
                .filter(|(consumer, _)| self.catalog.consumer(**consumer).is_none())
                .filter_map(|(_, amounts)| amounts.get(class))
                .sum();
            let ratio = record.allocation_ratio;
            let used_units = match ratio > 0.0 {
                true => (used as f64 / ratio).ceil() as u64,
                false => used,
            };
            let reserved = record.reserved.saturating_add(used_units).min(record.total);
            let Ok(inventory) = Inventory::new(
                record.total,
                reserved,
                record.units,
                ratio,
                FullReservation::Allowed,
            ) else {
                continue;
            };
            if !self.catalog.has_resource_class(class) {
                if !is_custom_name(class.as_str()) {
                    continue;
                }
                if self.classes.insert(class.clone()) {
                    self.changes
                        .push(Change::ResourceClassCreated(class.clone()));
                }
            }
            out.insert(class.clone(), inventory);
        }
        out
    }

    /// The traits of `details` berth can keep: custom traits it does not know are created,
    /// standard traits it does not know are left out.
    fn traits(&mut self, details: &RemoteDetails) -> BTreeSet<TraitName> {
        let mut out = BTreeSet::new();
        for name in &details.traits {
            if !self.catalog.has_trait(name) {
                if !is_custom_name(name.as_str()) {
                    continue;
                }
                if self.traits.insert(name.clone()) {
                    self.changes.push(Change::TraitCreated(name.clone()));
                }
            }
            out.insert(name.clone());
        }
        out
    }

    /// Deletes the imported providers the cloud no longer lists, children first; one a lease
    /// holds, or with allocations, is taken out of service instead, for `reason`.
    fn remove_gone(&mut self, reason: &str) {
        let listed: BTreeSet<ProviderId> = self.remote.keys().map(|r| self.local(*r)).collect();
        let mut gone: Vec<&Provider> = self
            .catalog
            .cloud_providers(self.cloud.id)
            .filter(|p| !listed.contains(&p.uuid()))
            .collect();
        gone.sort_by_key(|p| std::cmp::Reverse(depth(self.catalog, p)));
        let gone_uuids: BTreeSet<ProviderId> = gone.iter().map(|p| p.uuid()).collect();
        for provider in gone {
            let uuid = provider.uuid();
            let kept_children = self
                .catalog
                .children(uuid)
                .any(|c| !gone_uuids.contains(&c.uuid()));
            let held = self.catalog.leases_holding(uuid).next().is_some();
            if held || provider.has_usage() || kept_children {
                if provider.condition().and_then(|c| c.reason.as_deref()) != Some(reason) {
                    self.changes.push(Change::ProviderConditionSet {
                        uuid,
                        condition: Some(ProviderCondition {
                            status: ProviderStatus::Down,
                            reason: Some(reason.to_owned()),
                            since: self.now,
                        }),
                    });
                }
                continue;
            }
            if provider.condition().is_some() {
                self.changes.push(Change::ProviderConditionSet {
                    uuid,
                    condition: None,
                });
            }
            self.changes.push(Change::ProviderDeleted(uuid));
        }
    }

    /// A cloud that was pending or unknown is known again: its record says so, and the
    /// providers taken out of service because it could not be reached return. A cloud already
    /// known records the time only when something changed.
    fn known_again(&mut self) {
        let mut record = self.cloud.clone();
        if self.cloud.sync.state != SyncState::Ok {
            record.sync.state = SyncState::Ok;
            record.sync.since = Some(self.now);
            record.sync.last_error = None;
            if self.cloud.sync.state == SyncState::Unknown {
                let details = serde_json::json!({"provider": self.cloud.id, "state": "ok"});
                let flagged = flag_leases(
                    self.catalog,
                    self.cloud.id,
                    "lease.provider_restored",
                    self.now,
                    &details,
                );
                self.changes.extend(flagged);
            }
            let reason = unreachable_reason(self.cloud.id);
            for provider in self.catalog.cloud_providers(self.cloud.id) {
                if provider.condition().and_then(|c| c.reason.as_deref()) == Some(&reason) {
                    self.changes.push(Change::ProviderConditionSet {
                        uuid: provider.uuid(),
                        condition: None,
                    });
                }
            }
        } else if self.changes.is_empty() {
            return;
        }
        record.sync.last_success = Some(self.now);
        self.changes.push(Change::ProviderCloudSet {
            id: self.cloud.id,
            cloud: Some(record),
        });
    }
}

/// An entry `kind` in the lifecycle record of each lease holding capacity on cloud `id`'s
/// providers (so its subscribers are notified of the cloud's state), once a lease, by id.
fn flag_leases(
    catalog: &Catalog,
    id: Uuid,
    kind: &str,
    now: Instant,
    details: &serde_json::Value,
) -> Vec<Change> {
    let mut leases: BTreeMap<LeaseId, &Lease> = BTreeMap::new();
    for provider in catalog.cloud_providers(id) {
        for lease in catalog
            .leases_holding(provider.uuid())
            .filter(|l| l.holds_capacity())
        {
            leases.insert(lease.id, lease);
        }
    }
    leases
        .values()
        .map(|lease| record(lease, kind, now, details.clone()))
        .collect()
}

/// How deep `provider` is in its tree (a root is 0).
fn depth(catalog: &Catalog, provider: &Provider) -> usize {
    let mut depth = 0;
    let mut at = provider.parent();
    while let Some(parent) = at
        && depth < TREE_DEPTH_MAX
    {
        depth += 1;
        at = catalog.provider(parent).and_then(Provider::parent);
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cloud::{CloudKind, CloudProject, RemoteInventory};
    use crate::model::time::Instant;

    fn cloud(id: u128, user: &str) -> ProviderCloud {
        ProviderCloud {
            id: Uuid::from_u128(id),
            kind: CloudKind::Openstack,
            auth_url: "http://keystone:5000/v3".to_owned(),
            username: user.to_owned(),
            project: CloudProject {
                id: None,
                name: Some("promise".to_owned()),
            },
            region: Some("RegionOne".to_owned()),
            placement_url: "http://placement:8778".to_owned(),
            compute_url: None,
            sealed_credentials: "sealed".to_owned(),
            created_at: Instant::from_micros(1),
            sync: Default::default(),
        }
    }

    #[test]
    fn a_cloud_is_registered_once_and_removed() {
        let mut catalog = Catalog::default();
        let changes = add_provider_cloud(&catalog, cloud(1, "promise_user")).expect("added");
        catalog.apply(&changes);
        assert_eq!(catalog.provider_clouds().count(), 1);
        assert_eq!(
            add_provider_cloud(&catalog, cloud(1, "other")),
            Err(Rejection::ProviderCloudExists(Uuid::from_u128(1)))
        );
        assert_eq!(
            add_provider_cloud(&catalog, cloud(2, "promise_user")),
            Err(Rejection::ProviderCloudExists(Uuid::from_u128(1))),
            "the same cloud, user and project under another id"
        );
        let other = add_provider_cloud(&catalog, cloud(2, "other")).expect("another user");
        catalog.apply(&other);
        let removed =
            remove_provider_cloud(&catalog, Uuid::from_u128(1), false, Instant::from_micros(0))
                .expect("removed");
        catalog.apply(&removed);
        assert!(catalog.provider_cloud(Uuid::from_u128(1)).is_none());
        assert_eq!(
            remove_provider_cloud(&catalog, Uuid::from_u128(1), false, Instant::from_micros(0)),
            Err(Rejection::ProviderCloudNotFound(Uuid::from_u128(1)))
        );
        catalog.check_invariants().expect("invariants");
    }

    #[test]
    fn at_most_provider_clouds_max_are_registered() {
        let mut catalog = Catalog::default();
        for n in 0..PROVIDER_CLOUDS_MAX {
            let user = format!("user{n}");
            let changes = add_provider_cloud(&catalog, cloud(n as u128 + 1, &user)).expect("room");
            catalog.apply(&changes);
        }
        assert_eq!(catalog.provider_clouds().count(), PROVIDER_CLOUDS_MAX);
        assert_eq!(
            add_provider_cloud(&catalog, cloud(10_000, "one more")),
            Err(Rejection::TooMany("provider clouds"))
        );
        let removed =
            remove_provider_cloud(&catalog, Uuid::from_u128(1), false, Instant::from_micros(0))
                .expect("removed");
        catalog.apply(&removed);
        add_provider_cloud(&catalog, cloud(10_000, "one more")).expect("room again");
    }

    fn registered() -> Catalog {
        let mut catalog = Catalog::default();
        let changes = add_provider_cloud(&catalog, cloud(1, "promise_user")).expect("added");
        catalog.apply(&changes);
        catalog
    }

    fn class(name: &str) -> ResourceClass {
        ResourceClass::parse(name).expect("class")
    }

    fn remote(n: u128, generation: u64, vcpus: u64, used: u64) -> RemoteProvider {
        RemoteProvider {
            uuid: Uuid::from_u128(n),
            name: format!("compute-{n}"),
            generation,
            parent: None,
            details: Some(RemoteDetails {
                inventories: BTreeMap::from([(
                    class("VCPU"),
                    RemoteInventory {
                        total: vcpus,
                        reserved: 0,
                        units: [1, vcpus, 1],
                        allocation_ratio: 1.0,
                    },
                )]),
                allocations: BTreeMap::from([(
                    Uuid::from_u128(0xc0),
                    BTreeMap::from([(class("VCPU"), used)]),
                )]),
                traits: BTreeSet::from([TraitName::parse("CUSTOM_GOLD").expect("trait")]),
                aggregates: BTreeSet::from([Uuid::from_u128(99)]),
            }),
        }
    }

    fn sync_at(catalog: &mut Catalog, snapshot: &RemoteSnapshot, micros: i64) -> Vec<Change> {
        let changes = sync(
            catalog,
            Uuid::from_u128(1),
            snapshot,
            Instant::from_micros(micros),
        )
        .expect("sync");
        catalog.apply(&changes);
        catalog.check_invariants().expect("invariants");
        changes
    }

    #[test]
    fn a_sync_imports_the_remote_providers_and_then_only_what_differs() {
        let mut catalog = registered();
        let cloud = Uuid::from_u128(1);
        let mut child = remote(3, 1, 4, 0);
        child.parent = Some(Uuid::from_u128(2));
        let snapshot = RemoteSnapshot {
            providers: vec![child.clone(), remote(2, 5, 16, 6)],
        };
        sync_at(&mut catalog, &snapshot, 10);
        let local = ProviderId::new(local_provider_uuid(cloud, Uuid::from_u128(2)));
        let provider = catalog.provider(local).expect("imported");
        assert_eq!(provider.name(), format!("{cloud}:compute-2"));
        assert_eq!(provider.generation(), 5, "the remote generation");
        assert_eq!(provider.availability_zone(), Some("RegionOne"));
        let vcpu = provider.inventories()[&class("VCPU")];
        assert_eq!(
            (vcpu.total(), vcpu.reserved()),
            (16, 6),
            "remote usage counts"
        );
        assert!(
            provider.host().is_some_and(|h| h.reservable),
            "a root with VCPU is a host"
        );
        assert!(catalog.has_trait(&TraitName::parse("CUSTOM_GOLD").expect("trait")));
        let child_local = ProviderId::new(local_provider_uuid(cloud, Uuid::from_u128(3)));
        let imported = catalog.provider(child_local).expect("child");
        assert_eq!(imported.parent(), Some(local));
        assert!(imported.host().is_none(), "a child is no host");
        assert_eq!(catalog.cloud_providers(cloud).count(), 2);
        let record = catalog.provider_cloud(cloud).expect("cloud");
        assert_eq!(record.sync.state, SyncState::Ok);
        assert_eq!(record.sync.last_success, Some(Instant::from_micros(10)));

        // The same again, with or without details: nothing.
        assert_eq!(sync_at(&mut catalog, &snapshot, 20), Vec::new());
        let listed_only = RemoteSnapshot {
            providers: snapshot
                .providers
                .iter()
                .map(|p| RemoteProvider {
                    details: None,
                    ..p.clone()
                })
                .collect(),
        };
        assert_eq!(sync_at(&mut catalog, &listed_only, 30), Vec::new());

        // One usage changed: its inventory, the generation it has there, its own generation
        // and the cloud's time only.
        let changed = RemoteSnapshot {
            providers: vec![
                RemoteProvider {
                    details: None,
                    ..child.clone()
                },
                remote(2, 6, 16, 10),
            ],
        };
        let changes = sync_at(&mut catalog, &changed, 40);
        assert_eq!(changes.len(), 4, "{changes:?}");
        assert!(matches!(changes[0], Change::ProviderUpdated(ref row) if row.generation == 6));
        assert!(matches!(changes[1], Change::InventoriesReplaced { uuid, .. } if uuid == local));
        assert!(matches!(changes[2], Change::AttributesReplaced { uuid, .. } if uuid == local));
        assert!(matches!(changes[3], Change::ProviderCloudSet { .. }));
        let moved = catalog.provider(local).expect("kept");
        assert_eq!(crate::catalog::remote_generation(moved), Some(6));
        let vcpu = catalog.provider(local).expect("kept").inventories()[&class("VCPU")];
        assert_eq!(vcpu.reserved(), 10);

        // The child gone from the listing: deleted.
        let shrunk = RemoteSnapshot {
            providers: vec![remote(2, 6, 16, 10)],
        };
        let changes = sync_at(&mut catalog, &shrunk, 50);
        assert!(
            changes.contains(&Change::ProviderDeleted(child_local)),
            "{changes:?}"
        );
        assert!(catalog.provider(child_local).is_none());
    }

    #[test]
    fn an_unreachable_cloud_is_out_of_service_until_a_sync_succeeds() {
        let mut catalog = registered();
        let cloud = Uuid::from_u128(1);
        let snapshot = RemoteSnapshot {
            providers: vec![remote(2, 1, 8, 0)],
        };
        sync_at(&mut catalog, &snapshot, 10);
        let local = ProviderId::new(local_provider_uuid(cloud, Uuid::from_u128(2)));
        assert!(unreachable_refusal(&catalog, None).is_none());

        let changes = unreachable(
            &catalog,
            cloud,
            "connection refused",
            Instant::from_micros(20),
        )
        .expect("ok");
        catalog.apply(&changes);
        let record = catalog.provider_cloud(cloud).expect("cloud");
        assert_eq!(record.sync.state, SyncState::Unknown);
        assert_eq!(record.sync.since, Some(Instant::from_micros(20)));
        assert_eq!(record.sync.last_success, Some(Instant::from_micros(10)));
        assert!(!catalog.provider(local).expect("kept").is_up());
        assert_eq!(
            unreachable_refusal(&catalog, Some("RegionOne")),
            Some(Rejection::ProviderCloudUnreachable {
                cloud,
                reason: "connection refused".to_owned()
            })
        );
        assert!(unreachable_refusal(&catalog, Some("RegionTwo")).is_none());
        assert_eq!(
            unreachable(
                &catalog,
                cloud,
                "connection refused",
                Instant::from_micros(30)
            ),
            Ok(Vec::new()),
            "the same failure again writes nothing"
        );

        let changes = sync_at(
            &mut catalog,
            &RemoteSnapshot {
                providers: vec![RemoteProvider {
                    details: None,
                    ..remote(2, 1, 8, 0)
                }],
            },
            40,
        );
        assert!(!changes.is_empty());
        assert!(
            catalog.provider(local).expect("kept").is_up(),
            "back in service"
        );
        let record = catalog.provider_cloud(cloud).expect("cloud");
        assert_eq!(record.sync.state, SyncState::Ok);
        assert_eq!(record.sync.last_error, None);
        assert!(unreachable_refusal(&catalog, None).is_none());
    }

    #[test]
    fn berths_own_consumers_are_counted_once_and_a_held_cloud_goes_only_by_force() {
        use crate::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations_with};
        use crate::query::presentation::FencePolicy;
        let mut catalog = registered();
        let cloud = Uuid::from_u128(1);
        sync_at(
            &mut catalog,
            &RemoteSnapshot {
                providers: vec![remote(2, 1, 8, 0)],
            },
            10,
        );
        let local = ProviderId::new(local_provider_uuid(cloud, Uuid::from_u128(2)));
        // berth places a consumer of 2 VCPU there and writes it into the cloud.
        let own = Uuid::from_u128(0xbe);
        let write = ConsumerWrite {
            consumer: own,
            project_id: "p".to_owned(),
            user_id: "u".to_owned(),
            consumer_type: Some("INSTANCE".to_owned()),
            generation: ConsumerGeneration::New,
            allocations: BTreeMap::from([(local, BTreeMap::from([(class("VCPU"), 2)]))]),
            reservation: None,
        };
        let changes = set_allocations_with(
            &catalog,
            &[write],
            Instant::from_micros(15),
            FencePolicy::Enforced,
        )
        .expect("fits");
        catalog.apply(&changes);
        // The cloud now lists it beside a consumer of its own (3 VCPU): only those 3 are
        // the cloud's usage here.
        let mut listed = remote(2, 2, 8, 3);
        if let Some(details) = listed.details.as_mut() {
            details
                .allocations
                .insert(own, BTreeMap::from([(class("VCPU"), 2)]));
        }
        sync_at(
            &mut catalog,
            &RemoteSnapshot {
                providers: vec![listed],
            },
            20,
        );
        let provider = catalog.provider(local).expect("kept");
        assert_eq!(provider.inventories()[&class("VCPU")].reserved(), 3);
        assert_eq!(provider.used(&class("VCPU")), 2);

        // Allocated there: refused unless forced, with the counts.
        assert_eq!(
            remove_provider_cloud(&catalog, cloud, false, Instant::from_micros(30)),
            Err(Rejection::ProviderCloudInUse {
                cloud,
                leases: 0,
                allocated: 1
            })
        );
        let changes =
            remove_provider_cloud(&catalog, cloud, true, Instant::from_micros(30)).expect("forced");
        catalog.apply(&changes);
        catalog.check_invariants().expect("invariants");
        assert!(catalog.provider_cloud(cloud).is_none());
        let kept = catalog.provider(local).expect("kept while allocated");
        assert!(!kept.is_up());
        assert_eq!(
            kept.condition().and_then(|c| c.reason.clone()),
            Some(removed_reason(cloud))
        );
    }
}
