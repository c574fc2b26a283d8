//! The idempotency keys: reading the records of the keys a batch names, writing or deleting
//! one, and pruning expired ones. The records are never loaded with the catalog.

use super::backend::{Conn, SqlBackend, execute, fetch_all, prune_before, uuid_column};
use super::driver::{Args as _, Columns as _};
use crate::codec::encode_instant;
use crate::port::StoreError;
use berth_core::Instant;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};

/// The records of `keys` that have one, live or expired, in no order.
#[tracing::instrument(skip_all, fields(keys = keys.len()))]
pub(super) async fn read<B: SqlBackend>(
    conn: &mut Conn<B>,
    keys: &[&IdempotencyKey],
) -> Result<Vec<(IdempotencyKey, IdempotencyRecord)>, StoreError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    // One statement for every key: a JSON array of `[project, route, key]` triples.
    let triples: Vec<[&str; 3]> = keys
        .iter()
        .map(|k| [k.project_id.as_str(), k.route.as_str(), k.key.as_str()])
        .collect();
    let json = serde_json::to_string(&triples).map_err(|e| StoreError::Backend(Box::new(e)))?;
    let query = sqlx::query(B::SQL.idempotency_keys_in).arg(json);
    let mut records = Vec::with_capacity(keys.len());
    for row in fetch_all::<B>(conn, query).await? {
        let key = IdempotencyKey {
            project_id: row.column("project_id")?,
            route: row.column("route")?,
            key: row.column("idempotency_key")?,
        };
        let record = IdempotencyRecord {
            fingerprint: row.column("fingerprint")?,
            object_id: uuid_column::<B>(&row, "object_id")?,
            created_at: Instant::from_micros(row.column("created_at")?),
        };
        records.push((key, record));
    }
    Ok(records)
}

/// Records a key (replacing an expired record of it), or deletes it.
#[tracing::instrument(skip_all)]
pub(super) async fn set<B: SqlBackend>(
    conn: &mut Conn<B>,
    key: &IdempotencyKey,
    record: Option<&IdempotencyRecord>,
) -> Result<(), StoreError> {
    let query = match record {
        Some(record) => sqlx::query(B::SQL.upsert_idempotency_key)
            .arg(key.project_id.as_str())
            .arg(key.route.as_str())
            .arg(key.key.as_str())
            .arg(record.fingerprint.as_str())
            .arg(B::uuid(record.object_id))
            .arg(encode_instant(record.created_at)),
        None => sqlx::query(B::SQL.delete_idempotency_key)
            .arg(key.project_id.as_str())
            .arg(key.route.as_str())
            .arg(key.key.as_str()),
    };
    execute::<B>(conn, query).await
}

/// Deletes at most `limit` records created before `before`, oldest first.
#[tracing::instrument(skip_all)]
pub(super) async fn prune<B: SqlBackend>(
    conn: &mut Conn<B>,
    before: Instant,
    limit: usize,
) -> Result<(), StoreError> {
    prune_before::<B>(conn, B::SQL.prune_idempotency_keys, before, limit).await
}
