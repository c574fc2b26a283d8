//! SQL of the inventory catalog tables: loading every row, persisting each change, and the
//! catalog sequence number.

use crate::{lease, map_err};
use berth_core::catalog::CatalogRows;
use berth_core::model::provider::ProviderRow;
use berth_core::{
    AggregateRecord, AttrValue, Change, Consumer, HostRecord, Instant, Inventory, ResourceClass,
    TraitName,
};
use berth_store::StoreError;
use berth_store::codec::{self, corrupt, decode_u64, encode_instant, encode_u64};
use sqlx::{Row, SqliteConnection};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

pub(crate) fn parse_uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|_| corrupt("uuid"))
}

#[tracing::instrument(skip_all)]
pub(crate) async fn seq(conn: &mut SqliteConnection) -> Result<u64, StoreError> {
    let seq: i64 = sqlx::query_scalar("SELECT catalog_seq FROM berth_meta WHERE id = 1")
        .fetch_one(conn)
        .await
        .map_err(map_err)?;
    decode_u64(seq)
}

#[tracing::instrument(skip_all)]
pub(crate) async fn bump_seq(conn: &mut SqliteConnection) -> Result<u64, StoreError> {
    let seq: i64 = sqlx::query_scalar(
        "UPDATE berth_meta SET catalog_seq = catalog_seq + 1 WHERE id = 1 RETURNING catalog_seq",
    )
    .fetch_one(conn)
    .await
    .map_err(map_err)?;
    decode_u64(seq)
}

/// Reads every catalog row, sorted as [`CatalogRows::normalize`] sorts them.
#[tracing::instrument(skip_all)]
pub(crate) async fn load(conn: &mut SqliteConnection) -> Result<CatalogRows, StoreError> {
    let mut rows = CatalogRows {
        seq: seq(conn).await?,
        ..CatalogRows::default()
    };
    load_providers(conn, &mut rows).await?;
    load_inventories(conn, &mut rows).await?;
    load_provider_sets(conn, &mut rows).await?;
    load_hosts(conn, &mut rows).await?;
    load_custom_names(conn, &mut rows).await?;
    load_aggregates(conn, &mut rows).await?;
    load_consumers(conn, &mut rows).await?;
    lease::load(conn, &mut rows).await?;
    crate::promise::load(conn, &mut rows).await?;
    crate::idempotency::load(conn, &mut rows).await?;
    rows.normalize();
    Ok(rows)
}

#[tracing::instrument(skip_all)]
async fn load_providers(
    conn: &mut SqliteConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let providers = sqlx::query(
        "SELECT id, uuid, name, parent_uuid, root_uuid, generation, availability_zone, created_at, updated_at
         FROM resource_providers ORDER BY id",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?;
    for row in providers {
        let parent: Option<String> = row.get("parent_uuid");
        rows.providers.push(ProviderRow {
            id: row.get("id"),
            uuid: parse_uuid(row.get("uuid"))?,
            name: row.get("name"),
            parent: parent.as_deref().map(parse_uuid).transpose()?,
            root: parse_uuid(row.get("root_uuid"))?,
            generation: decode_u64(row.get("generation"))?,
            availability_zone: row.get("availability_zone"),
            created_at: Instant::from_micros(row.get("created_at")),
            updated_at: Instant::from_micros(row.get("updated_at")),
        });
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn load_inventories(
    conn: &mut SqliteConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let inventories = sqlx::query(
        "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
         FROM inventories",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?;
    for row in inventories {
        let units = [
            decode_u64(row.get("min_unit"))?,
            decode_u64(row.get("max_unit"))?,
            decode_u64(row.get("step_size"))?,
        ];
        let record = Inventory::new(
            decode_u64(row.get("total"))?,
            decode_u64(row.get("reserved"))?,
            units,
            row.get("allocation_ratio"),
            berth_core::model::inventory::FullReservation::Allowed,
        )
        .map_err(|_| corrupt("inventory"))?;
        rows.inventories.push((
            parse_uuid(row.get("provider_uuid"))?,
            codec::decode_class(row.get("resource_class"))?,
            record,
        ));
    }
    Ok(())
}

/// Reads the providers' traits, aggregates and attributes.
#[tracing::instrument(skip_all)]
async fn load_provider_sets(
    conn: &mut SqliteConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in sqlx::query("SELECT provider_uuid, trait FROM provider_traits")
        .fetch_all(&mut *conn)
        .await
        .map_err(map_err)?
    {
        rows.traits.push((
            parse_uuid(row.get("provider_uuid"))?,
            codec::decode_trait(row.get("trait"))?,
        ));
    }
    for row in sqlx::query("SELECT provider_uuid, aggregate_uuid FROM provider_aggregates")
        .fetch_all(&mut *conn)
        .await
        .map_err(map_err)?
    {
        rows.aggregates.push((
            parse_uuid(row.get("provider_uuid"))?,
            parse_uuid(row.get("aggregate_uuid"))?,
        ));
    }
    for row in sqlx::query("SELECT provider_uuid, key, kind, value FROM provider_attributes")
        .fetch_all(&mut *conn)
        .await
        .map_err(map_err)?
    {
        let kind: String = row.get("kind");
        let value = codec::decode_attribute(&kind, row.get("value"))?;
        rows.attributes
            .push((parse_uuid(row.get("provider_uuid"))?, row.get("key"), value));
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn load_hosts(conn: &mut SqliteConnection, rows: &mut CatalogRows) -> Result<(), StoreError> {
    for row in sqlx::query(
        "SELECT provider_uuid, hypervisor_type, service_name, reservable, created_at FROM hosts",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?
    {
        let host = HostRecord {
            hypervisor_type: row.get("hypervisor_type"),
            service_name: row.get("service_name"),
            reservable: row.get("reservable"),
            enrolled_at: Instant::from_micros(row.get("created_at")),
        };
        rows.hosts
            .push((parse_uuid(row.get("provider_uuid"))?, host));
    }
    Ok(())
}

/// Reads the custom resource classes and traits.
#[tracing::instrument(skip_all)]
async fn load_custom_names(
    conn: &mut SqliteConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in sqlx::query("SELECT name FROM resource_classes")
        .fetch_all(&mut *conn)
        .await
        .map_err(map_err)?
    {
        rows.resource_classes
            .push(codec::decode_class(row.get("name"))?);
    }
    for row in sqlx::query("SELECT name FROM traits")
        .fetch_all(&mut *conn)
        .await
        .map_err(map_err)?
    {
        rows.custom_traits
            .push(codec::decode_trait(row.get("name"))?);
    }
    Ok(())
}

/// Writes one change.
#[tracing::instrument(skip_all)]
pub(crate) async fn persist(
    conn: &mut SqliteConnection,
    change: &Change,
    now: Instant,
) -> Result<(), StoreError> {
    let now = encode_instant(now);
    match change {
        Change::ProviderCreated(row) => insert_provider(conn, row).await,
        Change::ProviderUpdated(row) => update_provider(conn, row).await,
        Change::ProviderDeleted(uuid) => {
            sqlx::query("DELETE FROM resource_providers WHERE uuid = ?")
                .bind(uuid.to_string())
                .execute(&mut *conn)
                .await
                .map_err(map_err)?;
            Ok(())
        }
        Change::InventoriesReplaced { uuid, inventories } => {
            replace_inventories(conn, *uuid, inventories, now).await
        }
        Change::TraitsReplaced { uuid, traits } => replace_traits(conn, *uuid, traits, now).await,
        Change::AggregatesReplaced { uuid, aggregates } => {
            replace_aggregates(conn, *uuid, aggregates, now).await
        }
        Change::AttributesReplaced { uuid, attributes } => {
            replace_attributes(conn, *uuid, attributes, now).await
        }
        Change::HostSet { uuid, host } => set_host(conn, *uuid, host.as_ref(), now).await,
        Change::ConsumerSet { uuid, consumer } => {
            set_consumer(conn, *uuid, consumer.as_ref(), now).await
        }
        Change::AggregateDescribed { uuid, record } => {
            describe_aggregate(conn, *uuid, record.as_ref(), now).await
        }
        Change::ResourceClassCreated(class) => {
            sqlx::query(
                "INSERT INTO resource_classes (name, created_at, updated_at) VALUES (?, ?, ?)",
            )
            .bind(class.as_str())
            .bind(now)
            .bind(now)
            .execute(&mut *conn)
            .await
            .map_err(map_err)?;
            Ok(())
        }
        Change::ResourceClassDeleted(class) => {
            sqlx::query("DELETE FROM resource_classes WHERE name = ?")
                .bind(class.as_str())
                .execute(&mut *conn)
                .await
                .map_err(map_err)?;
            Ok(())
        }
        Change::TraitCreated(name) => {
            sqlx::query("INSERT INTO traits (name, created_at, updated_at) VALUES (?, ?, ?)")
                .bind(name.as_str())
                .bind(now)
                .bind(now)
                .execute(&mut *conn)
                .await
                .map_err(map_err)?;
            Ok(())
        }
        Change::TraitDeleted(name) => {
            sqlx::query("DELETE FROM traits WHERE name = ?")
                .bind(name.as_str())
                .execute(&mut *conn)
                .await
                .map_err(map_err)?;
            Ok(())
        }
        Change::LeaseSet { id, lease } => lease::set_lease(conn, *id, lease.as_deref()).await,
        Change::FloatingIpSet { id, fip } => lease::set_floating_ip(conn, *id, fip.as_ref()).await,
        Change::LeaseRecorded(record) => lease::append_record(conn, record).await,
        Change::PropertyPrivacy { name, private } => {
            lease::set_property_privacy(conn, name, *private, now).await
        }
        Change::IdempotencySet { key, record } => {
            crate::idempotency::set(conn, key, record.as_ref()).await
        }
        Change::FlavorSet { .. }
        | Change::PolicySet(_)
        | Change::InstanceSet { .. }
        | Change::PoolSet { .. }
        | Change::SubscriptionSet { .. }
        | Change::DeliverySet { .. }
        | Change::OutboxCursor(_)
        | Change::ProviderConditionSet { .. }
        | Change::NodeSet { .. }
        | Change::ClaimSet { .. } => crate::promise::persist(conn, change).await.map(|_| ()),
    }
}

#[tracing::instrument(skip_all)]
async fn insert_provider(conn: &mut SqliteConnection, row: &ProviderRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO resource_providers
         (id, uuid, name, parent_uuid, root_uuid, generation, availability_zone, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(row.id)
    .bind(row.uuid.to_string())
    .bind(&row.name)
    .bind(row.parent.map(|p| p.to_string()))
    .bind(row.root.to_string())
    .bind(encode_u64(row.generation))
    .bind(&row.availability_zone)
    .bind(encode_instant(row.created_at))
    .bind(encode_instant(row.updated_at))
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn update_provider(conn: &mut SqliteConnection, row: &ProviderRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE resource_providers
         SET name = ?, parent_uuid = ?, root_uuid = ?, generation = ?, availability_zone = ?, updated_at = ?
         WHERE uuid = ?",
    )
    .bind(&row.name)
    .bind(row.parent.map(|p| p.to_string()))
    .bind(row.root.to_string())
    .bind(encode_u64(row.generation))
    .bind(&row.availability_zone)
    .bind(encode_instant(row.updated_at))
    .bind(row.uuid.to_string())
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn replace_inventories(
    conn: &mut SqliteConnection,
    uuid: Uuid,
    inventories: &BTreeMap<ResourceClass, Inventory>,
    now: i64,
) -> Result<(), StoreError> {
    let uuid = uuid.to_string();
    sqlx::query("DELETE FROM inventories WHERE provider_uuid = ?")
        .bind(&uuid)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    for (class, record) in inventories {
        sqlx::query(
            "INSERT INTO inventories
             (provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio,
              created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&uuid)
        .bind(class.as_str())
        .bind(encode_u64(record.total()))
        .bind(encode_u64(record.reserved()))
        .bind(encode_u64(record.min_unit()))
        .bind(encode_u64(record.max_unit()))
        .bind(encode_u64(record.step_size()))
        .bind(record.allocation_ratio())
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn replace_traits(
    conn: &mut SqliteConnection,
    uuid: Uuid,
    traits: &BTreeSet<TraitName>,
    now: i64,
) -> Result<(), StoreError> {
    let uuid = uuid.to_string();
    sqlx::query("DELETE FROM provider_traits WHERE provider_uuid = ?")
        .bind(&uuid)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    for name in traits {
        sqlx::query(
            "INSERT INTO provider_traits (provider_uuid, trait, created_at, updated_at) VALUES (?, ?, ?, ?)",
        )
        .bind(&uuid)
        .bind(name.as_str())
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn replace_aggregates(
    conn: &mut SqliteConnection,
    uuid: Uuid,
    aggregates: &BTreeSet<Uuid>,
    now: i64,
) -> Result<(), StoreError> {
    let uuid = uuid.to_string();
    sqlx::query("DELETE FROM provider_aggregates WHERE provider_uuid = ?")
        .bind(&uuid)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    for aggregate in aggregates {
        sqlx::query(
            "INSERT INTO provider_aggregates (provider_uuid, aggregate_uuid, created_at, updated_at) VALUES (?, ?, ?, ?)",
        )
        .bind(&uuid)
        .bind(aggregate.to_string())
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn replace_attributes(
    conn: &mut SqliteConnection,
    uuid: Uuid,
    attributes: &BTreeMap<String, AttrValue>,
    now: i64,
) -> Result<(), StoreError> {
    let uuid = uuid.to_string();
    sqlx::query("DELETE FROM provider_attributes WHERE provider_uuid = ?")
        .bind(&uuid)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    for (key, value) in attributes {
        let (kind, text) = codec::encode_attribute(value);
        sqlx::query(
            "INSERT INTO provider_attributes (provider_uuid, key, kind, value, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&uuid)
        .bind(key)
        .bind(kind)
        .bind(text)
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    Ok(())
}

/// Enrolls or updates the host record of a provider, or removes it (`None`).
#[tracing::instrument(skip_all)]
async fn set_host(
    conn: &mut SqliteConnection,
    uuid: Uuid,
    host: Option<&HostRecord>,
    now: i64,
) -> Result<(), StoreError> {
    match host {
        Some(host) => sqlx::query(
            "INSERT INTO hosts (provider_uuid, hypervisor_type, service_name, reservable, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT (provider_uuid) DO UPDATE SET hypervisor_type = excluded.hypervisor_type,
             service_name = excluded.service_name, reservable = excluded.reservable, updated_at = excluded.updated_at",
        )
        .bind(uuid.to_string())
        .bind(&host.hypervisor_type)
        .bind(&host.service_name)
        .bind(host.reservable)
        .bind(encode_instant(host.enrolled_at))
        .bind(now),
        None => sqlx::query("DELETE FROM hosts WHERE provider_uuid = ?").bind(uuid.to_string()),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Reads the aggregates berth describes, with their metadata.
#[tracing::instrument(skip_all)]
async fn load_aggregates(
    conn: &mut SqliteConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let mut records: BTreeMap<Uuid, AggregateRecord> = BTreeMap::new();
    for row in sqlx::query("SELECT uuid, name FROM aggregates")
        .fetch_all(&mut *conn)
        .await
        .map_err(map_err)?
    {
        let record = AggregateRecord {
            name: row.get("name"),
            metadata: BTreeMap::new(),
        };
        records.insert(parse_uuid(row.get("uuid"))?, record);
    }
    for row in sqlx::query("SELECT aggregate_uuid, key, value FROM aggregate_metadata")
        .fetch_all(&mut *conn)
        .await
        .map_err(map_err)?
    {
        let record = records
            .get_mut(&parse_uuid(row.get("aggregate_uuid"))?)
            .ok_or_else(|| corrupt("aggregate metadata"))?;
        record.metadata.insert(row.get("key"), row.get("value"));
    }
    rows.aggregate_records = records.into_iter().collect();
    Ok(())
}

/// Replaces what berth records about one aggregate (`None` removes it).
#[tracing::instrument(skip_all)]
async fn describe_aggregate(
    conn: &mut SqliteConnection,
    uuid: Uuid,
    record: Option<&AggregateRecord>,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM aggregates WHERE uuid = ?")
        .bind(uuid.to_string())
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    let Some(record) = record else { return Ok(()) };
    sqlx::query("INSERT INTO aggregates (uuid, name, created_at, updated_at) VALUES (?, ?, ?, ?)")
        .bind(uuid.to_string())
        .bind(&record.name)
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    for (key, value) in &record.metadata {
        sqlx::query(
            "INSERT INTO aggregate_metadata (aggregate_uuid, key, value, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(uuid.to_string())
        .bind(key)
        .bind(value)
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    Ok(())
}

/// Reads every consumer with its allocations.
#[tracing::instrument(skip_all)]
async fn load_consumers(
    conn: &mut SqliteConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let mut consumers: BTreeMap<Uuid, Consumer> = BTreeMap::new();
    for row in sqlx::query(
        "SELECT uuid, project_id, user_id, consumer_type, reservation_id, generation, created_at, updated_at FROM consumers",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?
    {
        let consumer = Consumer {
            project_id: row.get("project_id"),
            user_id: row.get("user_id"),
            consumer_type: row.get("consumer_type"),
            generation: decode_u64(row.get("generation"))?,
            allocations: BTreeMap::new(),
            reservation: row
                .get::<Option<String>, _>("reservation_id")
                .map(|text| parse_uuid(&text))
                .transpose()?,
            created_at: Instant::from_micros(row.get("created_at")),
            updated_at: Instant::from_micros(row.get("updated_at")),
        };
        consumers.insert(parse_uuid(row.get("uuid"))?, consumer);
    }
    for row in
        sqlx::query("SELECT consumer_uuid, provider_uuid, resource_class, used FROM allocations")
            .fetch_all(&mut *conn)
            .await
            .map_err(map_err)?
    {
        let consumer = consumers
            .get_mut(&parse_uuid(row.get("consumer_uuid"))?)
            .ok_or_else(|| corrupt("allocation consumer"))?;
        consumer
            .allocations
            .entry(parse_uuid(row.get("provider_uuid"))?)
            .or_default()
            .insert(
                codec::decode_class(row.get("resource_class"))?,
                decode_u64(row.get("used"))?,
            );
    }
    rows.consumers = consumers.into_iter().collect();
    Ok(())
}

/// Replaces a consumer and its allocations (`None` removes both).
#[tracing::instrument(skip_all)]
async fn set_consumer(
    conn: &mut SqliteConnection,
    uuid: Uuid,
    consumer: Option<&Consumer>,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM consumers WHERE uuid = ?")
        .bind(uuid.to_string())
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    let Some(consumer) = consumer else {
        return Ok(());
    };
    sqlx::query(
        "INSERT INTO consumers (uuid, project_id, user_id, consumer_type, reservation_id, generation, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(uuid.to_string())
    .bind(&consumer.project_id)
    .bind(&consumer.user_id)
    .bind(&consumer.consumer_type)
    .bind(consumer.reservation.map(|r| r.to_string()))
    .bind(encode_u64(consumer.generation))
    .bind(encode_instant(consumer.created_at))
    .bind(encode_instant(consumer.updated_at))
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    for (provider, class, used) in consumer.entries() {
        sqlx::query(
            "INSERT INTO allocations (consumer_uuid, provider_uuid, resource_class, used, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(uuid.to_string())
        .bind(provider.to_string())
        .bind(class.as_str())
        .bind(encode_u64(used))
        .bind(now)
        .bind(now)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    Ok(())
}
