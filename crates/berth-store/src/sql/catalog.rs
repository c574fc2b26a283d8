//! The inventory catalog's tables: reading every row back into [`CatalogRows`], what each change
//! persists as, and the catalog sequence number.

use super::backend::{Conn, SqlBackend, execute, fetch_all, fetch_one, uuid_column};
use super::driver::{Args as _, Columns as _, SqlQuery};
use super::{document, idempotency, lease};
use crate::codec::{self, corrupt, decode_u64, encode_instant, encode_u64};
use crate::port::StoreError;
use berth_core::catalog::CatalogRows;
use berth_core::model::provider::ProviderRow;
use berth_core::{
    AggregateRecord, AttrValue, Change, Consumer, HostRecord, Instant, Inventory, ResourceClass,
};
use berth_core::{ProviderId, ReservationId};
use std::collections::BTreeMap;
use uuid::Uuid;

/// The sequence number of the last committed catalog write.
#[tracing::instrument(skip_all)]
pub(super) async fn seq<B: SqlBackend>(conn: &mut Conn<B>) -> Result<u64, StoreError> {
    let row = fetch_one::<B>(conn, sqlx::query(B::SQL.catalog_seq)).await?;
    decode_u64(row.column("catalog_seq")?)
}

/// Bumps the catalog sequence number with `statement` and returns the new one.
#[tracing::instrument(skip_all)]
pub(super) async fn bump_seq<B: SqlBackend>(
    conn: &mut Conn<B>,
    statement: &'static str,
) -> Result<u64, StoreError> {
    let row = fetch_one::<B>(conn, sqlx::query(statement)).await?;
    decode_u64(row.column("catalog_seq")?)
}

/// Reads every catalog row, sorted as [`CatalogRows::normalize`] sorts them.
#[tracing::instrument(skip_all)]
pub(super) async fn load<B: SqlBackend>(conn: &mut Conn<B>) -> Result<CatalogRows, StoreError> {
    let mut rows = CatalogRows {
        seq: seq::<B>(conn).await?,
        ..CatalogRows::default()
    };
    load_providers::<B>(conn, &mut rows).await?;
    load_inventories::<B>(conn, &mut rows).await?;
    load_provider_sets::<B>(conn, &mut rows).await?;
    load_hosts::<B>(conn, &mut rows).await?;
    load_custom_names::<B>(conn, &mut rows).await?;
    load_aggregates::<B>(conn, &mut rows).await?;
    load_consumers::<B>(conn, &mut rows).await?;
    lease::load::<B>(conn, &mut rows).await?;
    document::load::<B>(conn, &mut rows).await?;
    rows.normalize();
    Ok(rows)
}

#[tracing::instrument(skip_all)]
async fn load_providers<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.providers)).await? {
        rows.providers.push(ProviderRow {
            id: row.column("id")?,
            uuid: ProviderId::new(uuid_column::<B>(&row, "uuid")?),
            name: row.column("name")?,
            parent: B::read_uuid(&row, "parent_uuid")?.map(ProviderId::new),
            root: ProviderId::new(uuid_column::<B>(&row, "root_uuid")?),
            generation: decode_u64(row.column("generation")?)?,
            availability_zone: row.column("availability_zone")?,
            created_at: Instant::from_micros(row.column("created_at")?),
            updated_at: Instant::from_micros(row.column("updated_at")?),
        });
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn load_inventories<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.inventories)).await? {
        let units = [
            decode_u64(row.column("min_unit")?)?,
            decode_u64(row.column("max_unit")?)?,
            decode_u64(row.column("step_size")?)?,
        ];
        let record = Inventory::new(
            decode_u64(row.column("total")?)?,
            decode_u64(row.column("reserved")?)?,
            units,
            row.column("allocation_ratio")?,
            berth_core::model::inventory::FullReservation::Allowed,
        )
        .map_err(|_| corrupt("inventory"))?;
        rows.inventories.push((
            ProviderId::new(uuid_column::<B>(&row, "provider_uuid")?),
            codec::decode_class(row.text("resource_class")?)?,
            record,
        ));
    }
    Ok(())
}

/// Reads the providers' traits, aggregates and attributes.
#[tracing::instrument(skip_all)]
async fn load_provider_sets<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.provider_traits)).await? {
        rows.traits.push((
            ProviderId::new(uuid_column::<B>(&row, "provider_uuid")?),
            codec::decode_trait(row.text("trait")?)?,
        ));
    }
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.provider_aggregates)).await? {
        rows.aggregates.push((
            ProviderId::new(uuid_column::<B>(&row, "provider_uuid")?),
            uuid_column::<B>(&row, "aggregate_uuid")?,
        ));
    }
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.provider_attributes)).await? {
        let value = codec::decode_attribute(row.text("kind")?, row.column("value")?)?;
        rows.attributes.push((
            ProviderId::new(uuid_column::<B>(&row, "provider_uuid")?),
            row.column("key")?,
            value,
        ));
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn load_hosts<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.hosts)).await? {
        let host = HostRecord {
            hypervisor_type: row.column("hypervisor_type")?,
            service_name: row.column("service_name")?,
            reservable: row.column("reservable")?,
            enrolled_at: Instant::from_micros(row.column("created_at")?),
        };
        rows.hosts.push((
            ProviderId::new(uuid_column::<B>(&row, "provider_uuid")?),
            host,
        ));
    }
    Ok(())
}

/// Reads the custom resource classes and traits.
#[tracing::instrument(skip_all)]
async fn load_custom_names<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.resource_classes)).await? {
        rows.resource_classes
            .push(codec::decode_class(row.text("name")?)?);
    }
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.custom_traits)).await? {
        rows.custom_traits
            .push(codec::decode_trait(row.text("name")?)?);
    }
    Ok(())
}

/// Reads the aggregates berth describes, with their metadata.
#[tracing::instrument(skip_all)]
async fn load_aggregates<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let mut records: BTreeMap<Uuid, AggregateRecord> = BTreeMap::new();
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.aggregates)).await? {
        let record = AggregateRecord {
            name: row.column("name")?,
            metadata: BTreeMap::new(),
        };
        records.insert(uuid_column::<B>(&row, "uuid")?, record);
    }
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.aggregate_metadata)).await? {
        let record = records
            .get_mut(&uuid_column::<B>(&row, "aggregate_uuid")?)
            .ok_or_else(|| corrupt("aggregate metadata"))?;
        record
            .metadata
            .insert(row.column("key")?, row.column("value")?);
    }
    rows.aggregate_records = records.into_iter().collect();
    Ok(())
}

/// Reads every consumer with its allocations.
#[tracing::instrument(skip_all)]
async fn load_consumers<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let mut consumers: BTreeMap<Uuid, Consumer> = BTreeMap::new();
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.consumers)).await? {
        let consumer = Consumer {
            project_id: row.column("project_id")?,
            user_id: row.column("user_id")?,
            consumer_type: row.column("consumer_type")?,
            generation: decode_u64(row.column("generation")?)?,
            allocations: BTreeMap::new(),
            reservation: B::read_uuid(&row, "reservation_id")?.map(ReservationId::new),
            created_at: Instant::from_micros(row.column("created_at")?),
            updated_at: Instant::from_micros(row.column("updated_at")?),
        };
        consumers.insert(uuid_column::<B>(&row, "uuid")?, consumer);
    }
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.allocations)).await? {
        let consumer = consumers
            .get_mut(&uuid_column::<B>(&row, "consumer_uuid")?)
            .ok_or_else(|| corrupt("allocation consumer"))?;
        consumer
            .allocations
            .entry(ProviderId::new(uuid_column::<B>(&row, "provider_uuid")?))
            .or_default()
            .insert(
                codec::decode_class(row.text("resource_class")?)?,
                decode_u64(row.column("used")?)?,
            );
    }
    rows.consumers = consumers.into_iter().collect();
    Ok(())
}

/// Writes one change.
#[tracing::instrument(skip_all)]
pub(super) async fn persist<B: SqlBackend>(
    conn: &mut Conn<B>,
    change: &Change,
    now: Instant,
) -> Result<(), StoreError> {
    let now = encode_instant(now);
    match change {
        Change::ProviderCreated(row) => insert_provider::<B>(conn, row).await,
        Change::ProviderUpdated(row) => update_provider::<B>(conn, row).await,
        Change::ProviderDeleted(uuid) => {
            let query = sqlx::query(B::SQL.delete_provider).arg(B::uuid(uuid.uuid()));
            execute::<B>(conn, query).await
        }
        Change::InventoriesReplaced { uuid, inventories } => {
            replace_inventories::<B>(conn, uuid.uuid(), inventories, now).await
        }
        Change::TraitsReplaced { uuid, traits } => {
            let statements = (B::SQL.delete_provider_traits, B::SQL.insert_provider_trait);
            replace_provider_rows::<B, _>(conn, uuid.uuid(), statements, traits, |query, name| {
                query.arg(name.as_str()).arg(now).arg(now)
            })
            .await
        }
        Change::AggregatesReplaced { uuid, aggregates } => {
            let statements = (
                B::SQL.delete_provider_aggregates,
                B::SQL.insert_provider_aggregate,
            );
            replace_provider_rows::<B, _>(conn, uuid.uuid(), statements, aggregates, |query, id| {
                query.arg(B::uuid(*id)).arg(now).arg(now)
            })
            .await
        }
        Change::AttributesReplaced { uuid, attributes } => {
            replace_attributes::<B>(conn, uuid.uuid(), attributes, now).await
        }
        Change::HostSet { uuid, host } => {
            set_host::<B>(conn, uuid.uuid(), host.as_ref(), now).await
        }
        Change::ConsumerSet { uuid, consumer } => {
            set_consumer::<B>(conn, *uuid, consumer.as_ref(), now).await
        }
        Change::AggregateDescribed { uuid, record } => {
            describe_aggregate::<B>(conn, *uuid, record.as_ref(), now).await
        }
        Change::ResourceClassCreated(class) => {
            let query = sqlx::query(B::SQL.insert_resource_class)
                .arg(class.as_str())
                .arg(now)
                .arg(now);
            execute::<B>(conn, query).await
        }
        Change::ResourceClassDeleted(class) => {
            let query = sqlx::query(B::SQL.delete_resource_class).arg(class.as_str());
            execute::<B>(conn, query).await
        }
        Change::TraitCreated(name) => {
            let query = sqlx::query(B::SQL.insert_custom_trait)
                .arg(name.as_str())
                .arg(now)
                .arg(now);
            execute::<B>(conn, query).await
        }
        Change::TraitDeleted(name) => {
            let query = sqlx::query(B::SQL.delete_custom_trait).arg(name.as_str());
            execute::<B>(conn, query).await
        }
        Change::LeaseSet { id, lease } => lease::set_lease::<B>(conn, *id, lease.as_deref()).await,
        Change::FloatingIpSet { id, fip } => {
            lease::set_floating_ip::<B>(conn, *id, fip.as_ref()).await
        }
        Change::LeaseRecorded(record) => lease::append_record::<B>(conn, record).await,
        Change::PropertyPrivacy { name, private } => {
            lease::set_property_privacy::<B>(conn, name, *private, now).await
        }
        Change::IdempotencySet { key, record } => {
            idempotency::set::<B>(conn, key, record.as_deref()).await
        }
        Change::FlavorSet { .. }
        | Change::ProviderCloudSet { .. }
        | Change::PolicySet(_)
        | Change::BudgetSet { .. }
        | Change::InstanceSet { .. }
        | Change::PoolSet { .. }
        | Change::SubscriptionSet { .. }
        | Change::DeliverySet { .. }
        | Change::OutboxCursor(_)
        | Change::ProviderConditionSet { .. }
        | Change::NodeSet { .. }
        | Change::ClaimSet { .. } => document::persist::<B>(conn, change).await,
    }
}

#[tracing::instrument(skip_all)]
async fn insert_provider<B: SqlBackend>(
    conn: &mut Conn<B>,
    row: &ProviderRow,
) -> Result<(), StoreError> {
    let query = sqlx::query(B::SQL.insert_provider)
        .arg(row.id)
        .arg(B::uuid(row.uuid.uuid()))
        .arg(row.name.as_str())
        .arg(row.parent.map(|parent| B::uuid(parent.uuid())))
        .arg(B::uuid(row.root.uuid()))
        .arg(encode_u64(row.generation))
        .arg(row.availability_zone.as_deref())
        .arg(encode_instant(row.created_at))
        .arg(encode_instant(row.updated_at));
    execute::<B>(conn, query).await
}

#[tracing::instrument(skip_all)]
pub(super) async fn update_provider<B: SqlBackend>(
    conn: &mut Conn<B>,
    row: &ProviderRow,
) -> Result<(), StoreError> {
    let query = sqlx::query(B::SQL.update_provider)
        .arg(row.name.as_str())
        .arg(row.parent.map(|parent| B::uuid(parent.uuid())))
        .arg(B::uuid(row.root.uuid()))
        .arg(encode_u64(row.generation))
        .arg(row.availability_zone.as_deref())
        .arg(encode_instant(row.updated_at))
        .arg(B::uuid(row.uuid.uuid()));
    execute::<B>(conn, query).await
}

/// Replaces a provider's rows in one of its tables (inventories, traits, aggregates,
/// attributes): deletes them all with the first statement, then inserts one row per item with
/// the second, binding the provider's uuid and then what `bind` binds of the item.
#[tracing::instrument(skip_all)]
async fn replace_provider_rows<B: SqlBackend, T>(
    conn: &mut Conn<B>,
    uuid: Uuid,
    (delete, insert): (&'static str, &'static str),
    items: impl IntoIterator<Item = T> + Send,
    bind: impl for<'q> Fn(SqlQuery<'q, B::Db>, T) -> SqlQuery<'q, B::Db> + Send,
) -> Result<(), StoreError> {
    execute::<B>(conn, sqlx::query(delete).arg(B::uuid(uuid))).await?;
    for item in items {
        let query = bind(sqlx::query(insert).arg(B::uuid(uuid)), item);
        execute::<B>(conn, query).await?;
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn replace_inventories<B: SqlBackend>(
    conn: &mut Conn<B>,
    uuid: Uuid,
    inventories: &BTreeMap<ResourceClass, Inventory>,
    now: i64,
) -> Result<(), StoreError> {
    let statements = (B::SQL.delete_inventories, B::SQL.insert_inventory);
    replace_provider_rows::<B, _>(conn, uuid, statements, inventories, |query, item| {
        let (class, record) = item;
        query
            .arg(class.as_str())
            .arg(encode_u64(record.total()))
            .arg(encode_u64(record.reserved()))
            .arg(encode_u64(record.min_unit()))
            .arg(encode_u64(record.max_unit()))
            .arg(encode_u64(record.step_size()))
            .arg(record.allocation_ratio())
            .arg(now)
            .arg(now)
    })
    .await
}

#[tracing::instrument(skip_all)]
async fn replace_attributes<B: SqlBackend>(
    conn: &mut Conn<B>,
    uuid: Uuid,
    attributes: &BTreeMap<String, AttrValue>,
    now: i64,
) -> Result<(), StoreError> {
    let statements = (
        B::SQL.delete_provider_attributes,
        B::SQL.insert_provider_attribute,
    );
    replace_provider_rows::<B, _>(conn, uuid, statements, attributes, |query, item| {
        let (key, value) = item;
        let (kind, text) = codec::encode_attribute(value);
        query
            .arg(key.as_str())
            .arg(kind)
            .arg(text)
            .arg(now)
            .arg(now)
    })
    .await
}

/// Enrolls or updates the host record of a provider, or removes it (`None`).
#[tracing::instrument(skip_all)]
async fn set_host<B: SqlBackend>(
    conn: &mut Conn<B>,
    uuid: Uuid,
    host: Option<&HostRecord>,
    now: i64,
) -> Result<(), StoreError> {
    let query = match host {
        Some(host) => sqlx::query(B::SQL.upsert_host)
            .arg(B::uuid(uuid))
            .arg(host.hypervisor_type.as_deref())
            .arg(host.service_name.as_deref())
            .arg(host.reservable)
            .arg(encode_instant(host.enrolled_at))
            .arg(now),
        None => sqlx::query(B::SQL.delete_host).arg(B::uuid(uuid)),
    };
    execute::<B>(conn, query).await
}

/// Replaces what berth records about one aggregate (`None` removes it).
#[tracing::instrument(skip_all)]
async fn describe_aggregate<B: SqlBackend>(
    conn: &mut Conn<B>,
    uuid: Uuid,
    record: Option<&AggregateRecord>,
    now: i64,
) -> Result<(), StoreError> {
    let query = sqlx::query(B::SQL.delete_aggregate).arg(B::uuid(uuid));
    execute::<B>(conn, query).await?;
    let Some(record) = record else { return Ok(()) };
    let query = sqlx::query(B::SQL.insert_aggregate)
        .arg(B::uuid(uuid))
        .arg(record.name.as_deref())
        .arg(now)
        .arg(now);
    execute::<B>(conn, query).await?;
    for (key, value) in &record.metadata {
        let query = sqlx::query(B::SQL.insert_aggregate_metadata)
            .arg(B::uuid(uuid))
            .arg(key.as_str())
            .arg(value.as_str())
            .arg(now)
            .arg(now);
        execute::<B>(conn, query).await?;
    }
    Ok(())
}

/// Replaces a consumer and its allocations (`None` removes both).
#[tracing::instrument(skip_all)]
pub(super) async fn set_consumer<B: SqlBackend>(
    conn: &mut Conn<B>,
    uuid: Uuid,
    consumer: Option<&Consumer>,
    now: i64,
) -> Result<(), StoreError> {
    let query = sqlx::query(B::SQL.delete_consumer).arg(B::uuid(uuid));
    execute::<B>(conn, query).await?;
    let Some(consumer) = consumer else {
        return Ok(());
    };
    let query = sqlx::query(B::SQL.insert_consumer)
        .arg(B::uuid(uuid))
        .arg(consumer.project_id.as_str())
        .arg(consumer.user_id.as_str())
        .arg(consumer.consumer_type.as_deref())
        .arg(consumer.reservation.map(|id| B::uuid(id.uuid())))
        .arg(encode_u64(consumer.generation))
        .arg(encode_instant(consumer.created_at))
        .arg(encode_instant(consumer.updated_at));
    execute::<B>(conn, query).await?;
    for (provider, class, used) in consumer.entries() {
        let query = sqlx::query(B::SQL.insert_allocation)
            .arg(B::uuid(uuid))
            .arg(B::uuid(provider.uuid()))
            .arg(class.as_str())
            .arg(encode_u64(used))
            .arg(now)
            .arg(now);
        execute::<B>(conn, query).await?;
    }
    Ok(())
}
