//! Providers' updates PostgreSQL's way: a batch's updated providers written in one statement
//! whatever their number, the columns bound as arrays and unnested.

use crate::error::map_err;
use berth_core::model::provider::ProviderRow;
use berth_store::StoreError;
use berth_store::codec::{encode_instant, encode_u64};
use sqlx::PgConnection;
use std::collections::HashSet;

/// Writes each provider's last row in `rows` (the order they were decided in) over its stored
/// one. The names' uniqueness is checked once the statement has written every row (the
/// constraint is deferrable), so rows that swap names are written together.
pub(crate) async fn write_providers(
    conn: &mut PgConnection,
    rows: &[&ProviderRow],
) -> Result<(), StoreError> {
    let mut seen = HashSet::with_capacity(rows.len());
    let last: Vec<&ProviderRow> = rows
        .iter()
        .rev()
        .filter(|row| seen.insert(row.uuid))
        .copied()
        .collect();
    let n = last.len();
    let (mut uuids, mut names, mut parents) = (Vec::with_capacity(n), vec![], vec![]);
    let (mut roots, mut generations) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut zones, mut updated) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for row in last {
        uuids.push(row.uuid.uuid());
        names.push(row.name.as_str());
        parents.push(row.parent.map(|parent| parent.uuid()));
        roots.push(row.root.uuid());
        generations.push(encode_u64(row.generation));
        zones.push(row.availability_zone.as_deref());
        updated.push(encode_instant(row.updated_at));
    }
    // Planned for each batch's own rows, not cached: a plan made generically while the table
    // was small would scan every provider of each later batch (as for consumers).
    sqlx::query(
        "UPDATE resource_providers AS p
        SET name = u.name, parent_uuid = u.parent_uuid, root_uuid = u.root_uuid,
            generation = u.generation, availability_zone = u.availability_zone,
            updated_at = u.updated_at
        FROM UNNEST($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::int8[], $6::text[],
            $7::int8[]) AS u (uuid, name, parent_uuid, root_uuid, generation, availability_zone,
            updated_at)
        WHERE p.uuid = u.uuid",
    )
    .persistent(false)
    .bind(uuids)
    .bind(names)
    .bind(parents)
    .bind(roots)
    .bind(generations)
    .bind(zones)
    .bind(updated)
    .execute(&mut *conn)
    .await
    .map_err(map_err)
    .map(|_| ())
}
