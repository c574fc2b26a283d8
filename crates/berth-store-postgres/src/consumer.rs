//! Consumers PostgreSQL's way: a batch's updated providers and its consumers written in two
//! statements whatever their number (the providers updated and the old consumers deleted; the
//! new consumers and their allocations inserted), the columns bound as arrays and unnested.

use crate::error::map_err;
use crate::provider::bind_updates;
use berth_core::model::consumer::Consumer;
use berth_core::model::provider::ProviderRow;
use berth_store::StoreError;
use berth_store::codec::{encode_instant, encode_u64};
use sqlx::PgConnection;
use uuid::Uuid;

/// Writes each provider's last row in `providers` over its stored one, then replaces each of
/// `consumers` (each uuid once) with its new state, or deletes it (`None`); new allocations are
/// stamped `now`. Two statements at most: the providers' updates with the old consumers'
/// deletion (their allocations cascade at its end), then the new consumers with their
/// allocations, if any.
pub(crate) async fn write_rows(
    conn: &mut PgConnection,
    providers: &[&ProviderRow],
    consumers: &[(Uuid, Option<&Consumer>)],
    now: i64,
) -> Result<(), StoreError> {
    let uuids: Vec<Uuid> = consumers.iter().map(|(uuid, _)| *uuid).collect();
    // Different tables: the update and the deletion touch no row of each other's, and an
    // empty list writes nothing. Planned for each batch's own rows, not cached: a statement
    // prepared once is planned generically after a few runs, and where a table was empty or
    // never analyzed then, that plan scans every row of it for each batch, and keeps doing so
    // while the table grows.
    let query = sqlx::query(
        "WITH updated AS (
            UPDATE resource_providers AS p
            SET name = u.name, parent_uuid = u.parent_uuid, root_uuid = u.root_uuid,
                generation = u.generation, availability_zone = u.availability_zone,
                updated_at = u.updated_at
            FROM UNNEST($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::int8[], $6::text[],
                $7::int8[]) AS u (uuid, name, parent_uuid, root_uuid, generation,
                availability_zone, updated_at)
            WHERE p.uuid = u.uuid)
        DELETE FROM consumers WHERE uuid = ANY($8)",
    );
    bind_updates(query, providers)
        .bind(&uuids)
        .persistent(false)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    let kept: Vec<(Uuid, &Consumer)> = consumers
        .iter()
        .filter_map(|(uuid, consumer)| consumer.map(|c| (*uuid, c)))
        .collect();
    if kept.is_empty() {
        return Ok(());
    }
    let n = kept.len();
    let (mut ids, mut projects, mut users) = (Vec::with_capacity(n), vec![], vec![]);
    let (mut types, mut reservations, mut generations) = (Vec::with_capacity(n), vec![], vec![]);
    let (mut created, mut updated) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut owners, mut providers, mut classes, mut used) = (vec![], vec![], vec![], vec![]);
    for (uuid, consumer) in &kept {
        ids.push(*uuid);
        projects.push(consumer.project_id.as_str());
        users.push(consumer.user_id.as_str());
        types.push(consumer.consumer_type.as_deref());
        reservations.push(consumer.reservation.map(|id| id.uuid()));
        generations.push(encode_u64(consumer.generation));
        created.push(encode_instant(consumer.created_at));
        updated.push(encode_instant(consumer.updated_at));
        for (provider, class, amount) in consumer.entries() {
            owners.push(*uuid);
            providers.push(provider.uuid());
            classes.push(class.as_str());
            used.push(encode_u64(amount));
        }
    }
    // One statement: the allocations' foreign key to their consumer is checked at its end,
    // once the consumers it inserts are there.
    sqlx::query(
        "WITH inserted AS (
            INSERT INTO consumers
                (uuid, project_id, user_id, consumer_type, reservation_id, generation,
                created_at, updated_at)
            SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::uuid[],
                $6::int8[], $7::int8[], $8::int8[]))
        INSERT INTO allocations
            (consumer_uuid, provider_uuid, resource_class, used, created_at, updated_at)
        SELECT consumer_uuid, provider_uuid, resource_class, used, $13, $13
        FROM UNNEST($9::uuid[], $10::uuid[], $11::text[], $12::int8[])
            AS a (consumer_uuid, provider_uuid, resource_class, used)",
    )
    .bind(ids)
    .bind(projects)
    .bind(users)
    .bind(types)
    .bind(reservations)
    .bind(generations)
    .bind(created)
    .bind(updated)
    .bind(owners)
    .bind(providers)
    .bind(classes)
    .bind(used)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(map_err)
    .map(|_| ())
}
