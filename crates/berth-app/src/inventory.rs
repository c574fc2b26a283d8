//! Inventory use cases: providers, inventories, traits, aggregates, resource classes and hosts.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::ProviderId;
use berth_core::decide::allocation::{self, ConsumerWrite, InventoryWrite};
use berth_core::decide::inventory::{self as decide, NewHost, NewProvider, Reparenting};
use berth_core::{AggregateRecord, AttrValue, Change, Inventory, ResourceClass, TraitName};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// A provider to create; the uuid is generated when absent.
#[derive(Debug, Clone)]
pub struct CreateProvider {
    /// Requested uuid.
    pub uuid: Option<ProviderId>,
    /// Unique name.
    pub name: String,
    /// Parent provider.
    pub parent: Option<ProviderId>,
}

/// A host to enroll; see [`NewHost`] (the uuid is generated here).
#[derive(Debug, Clone)]
pub struct EnrollHost {
    /// Hypervisor host name.
    pub name: String,
    /// VCPU total.
    pub vcpus: Option<u64>,
    /// MEMORY_MB total.
    pub memory_mb: Option<u64>,
    /// DISK_GB total.
    pub local_gb: Option<u64>,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Hypervisor type.
    pub hypervisor_type: Option<String>,
    /// Service name.
    pub service_name: Option<String>,
    /// Extra capabilities.
    pub attributes: BTreeMap<String, AttrValue>,
    /// Whether leases may take the host (the freepool).
    pub reservable: bool,
}

fn with<T>(changes: Vec<Change>, value: T) -> (Vec<Change>, T) {
    (changes, value)
}

impl Berth {
    /// Creates a provider and returns its uuid.
    pub async fn create_provider(&self, cmd: CreateProvider) -> Result<ProviderId, AppError> {
        let uuid = cmd.uuid.unwrap_or_else(|| ProviderId::new(self.new_uuid()));
        let new = NewProvider {
            uuid,
            name: cmd.name,
            parent: cmd.parent,
            availability_zone: None,
        };
        self.write(move |catalog, now| {
            decide::create_provider(catalog, &new, now).map(|c| with(c, uuid))
        })
        .await
    }

    /// Renames a provider and, when `parent` is given, re-parents it (`Some(None)` un-parents).
    pub async fn update_provider(
        &self,
        uuid: ProviderId,
        name: String,
        parent: Option<Option<ProviderId>>,
        reparenting: Reparenting,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            // Keeping the parent is resolved here, over the same catalog the decision sees.
            let parent = parent.unwrap_or_else(|| {
                catalog
                    .provider(uuid)
                    .and_then(berth_core::Provider::parent)
            });
            decide::update_provider(catalog, uuid, &name, parent, reparenting, now)
                .map(|c| with(c, ()))
        })
        .await
    }

    /// Deletes a provider.
    pub async fn delete_provider(&self, uuid: ProviderId) -> Result<(), AppError> {
        self.write(move |catalog, _| decide::delete_provider(catalog, uuid).map(|c| with(c, ())))
            .await
    }

    /// Replaces all inventories of a provider.
    pub async fn set_inventories(
        &self,
        uuid: ProviderId,
        generation: u64,
        inventories: BTreeMap<ResourceClass, Inventory>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::set_inventories(catalog, uuid, Some(generation), inventories, now)
                .map(|c| with(c, ()))
        })
        .await
    }

    /// Adds one inventory record.
    pub async fn add_inventory(
        &self,
        uuid: ProviderId,
        class: ResourceClass,
        record: Inventory,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::add_inventory(catalog, uuid, class, record, now).map(|c| with(c, ()))
        })
        .await
    }

    /// Replaces one existing inventory record.
    pub async fn update_inventory(
        &self,
        uuid: ProviderId,
        generation: u64,
        class: ResourceClass,
        record: Inventory,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::update_inventory(catalog, uuid, generation, class, record, now)
                .map(|c| with(c, ()))
        })
        .await
    }

    /// Removes one inventory record, or all of them when `class` is `None`.
    pub async fn remove_inventory(
        &self,
        uuid: ProviderId,
        class: Option<ResourceClass>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::remove_inventory(catalog, uuid, class.as_ref(), now).map(|c| with(c, ()))
        })
        .await
    }

    /// Replaces the traits of a provider.
    pub async fn set_traits(
        &self,
        uuid: ProviderId,
        generation: Option<u64>,
        traits: BTreeSet<TraitName>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::set_traits(catalog, uuid, generation, traits, now).map(|c| with(c, ()))
        })
        .await
    }

    /// Replaces the aggregates of a provider.
    pub async fn set_aggregates(
        &self,
        uuid: ProviderId,
        generation: Option<u64>,
        aggregates: BTreeSet<Uuid>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::set_aggregates(catalog, uuid, generation, aggregates, now).map(|c| with(c, ()))
        })
        .await
    }

    /// Names an aggregate and sets its metadata, or forgets them (`None`).
    pub async fn describe_aggregate(
        &self,
        uuid: Uuid,
        record: Option<AggregateRecord>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, _| {
            decide::describe_aggregate(catalog, uuid, record).map(|c| with(c, ()))
        })
        .await
    }

    /// Creates a custom resource class.
    pub async fn create_resource_class(&self, name: &str) -> Result<(), AppError> {
        let name = name.to_owned();
        self.write(move |catalog, _| {
            decide::create_resource_class(catalog, &name).map(|c| with(c, ()))
        })
        .await
    }

    /// Creates a custom resource class unless it exists; returns whether it was created.
    pub async fn ensure_resource_class(&self, name: &str) -> Result<bool, AppError> {
        let name = name.to_owned();
        self.write(move |catalog, _| {
            let class = ResourceClass::parse(&name);
            match class {
                Some(class) if catalog.has_resource_class(&class) && !class.is_standard() => {
                    Ok(with(vec![], false))
                }
                _ => decide::create_resource_class(catalog, &name).map(|c| with(c, true)),
            }
        })
        .await
    }

    /// Renames a custom resource class that nothing uses (Placement's `PUT` from 1.2 to 1.6).
    pub async fn rename_resource_class(&self, from: &str, to: &str) -> Result<(), AppError> {
        let (from, to) = (from.to_owned(), to.to_owned());
        self.write(move |catalog, _| {
            decide::rename_resource_class(catalog, &from, &to).map(|c| with(c, ()))
        })
        .await
    }

    /// Deletes a custom resource class.
    pub async fn delete_resource_class(&self, name: &str) -> Result<(), AppError> {
        let name = name.to_owned();
        self.write(move |catalog, _| {
            decide::delete_resource_class(catalog, &name).map(|c| with(c, ()))
        })
        .await
    }

    /// Creates a custom trait unless it exists; returns whether it was created.
    pub async fn create_trait(&self, name: &str) -> Result<bool, AppError> {
        let name = name.to_owned();
        self.write(move |catalog, _| {
            decide::create_trait(catalog, &name).map(|c| {
                let created = !c.is_empty();
                with(c, created)
            })
        })
        .await
    }

    /// Deletes a custom trait.
    pub async fn delete_trait(&self, name: &str) -> Result<(), AppError> {
        let name = name.to_owned();
        self.write(move |catalog, _| decide::delete_trait(catalog, &name).map(|c| with(c, ())))
            .await
    }

    /// Replaces the allocations of every consumer in `writes`, atomically.
    pub async fn set_allocations(&self, writes: Vec<ConsumerWrite>) -> Result<(), AppError> {
        let policy = self.fence_policy();
        self.write(move |catalog, now| {
            allocation::set_allocations_with(catalog, &writes, now, policy).map(|c| with(c, ()))
        })
        .await
    }

    /// Removes every allocation of a consumer.
    pub async fn delete_allocations(&self, consumer: Uuid) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            allocation::delete_allocations(catalog, consumer, now).map(|c| with(c, ()))
        })
        .await
    }

    /// Replaces inventories and allocations together.
    pub async fn reshape(
        &self,
        inventories: Vec<InventoryWrite>,
        writes: Vec<ConsumerWrite>,
    ) -> Result<(), AppError> {
        let policy = self.fence_policy();
        self.write(move |catalog, now| {
            allocation::reshape_with(catalog, &inventories, &writes, now, policy)
                .map(|c| with(c, ()))
        })
        .await
    }

    /// Enrolls a host and returns its numeric id.
    pub async fn enroll_host(&self, cmd: EnrollHost) -> Result<i64, AppError> {
        let new = NewHost {
            uuid: ProviderId::new(self.new_uuid()),
            name: cmd.name,
            vcpus: cmd.vcpus,
            memory_mb: cmd.memory_mb,
            local_gb: cmd.local_gb,
            availability_zone: cmd.availability_zone,
            hypervisor_type: cmd.hypervisor_type,
            service_name: cmd.service_name,
            attributes: cmd.attributes,
            reservable: cmd.reservable,
        };
        self.write(move |catalog, now| {
            let changes = decide::enroll_host(catalog, &new, now)?;
            let id = host_id(catalog, &changes);
            Ok(with(changes, id))
        })
        .await
    }

    /// Sets or removes a host's extra capabilities.
    pub async fn update_host(
        &self,
        id: i64,
        updates: Vec<(String, Option<AttrValue>)>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::update_host(catalog, id, &updates, now).map(|c| with(c, ()))
        })
        .await
    }

    /// Un-enrolls a host and deletes its provider.
    pub async fn delete_host(&self, id: i64) -> Result<(), AppError> {
        self.write(move |catalog, _| decide::delete_host(catalog, id).map(|c| with(c, ())))
            .await
    }
}

/// The id of the host an enrolment produced: the new provider's, or the adopted one's.
fn host_id(catalog: &berth_core::Catalog, changes: &[Change]) -> i64 {
    let uuid = changes
        .iter()
        .find_map(|change| match change {
            Change::HostSet { uuid, .. } => Some(*uuid),
            _ => None,
        })
        .expect("invariant: an enrolment sets a host");
    let created = changes.iter().find_map(|change| match change {
        Change::ProviderCreated(row) => Some(row.id),
        _ => None,
    });
    created.unwrap_or_else(|| {
        catalog
            .provider(uuid)
            .expect("invariant: adopted provider exists")
            .id()
    })
}
