//! SQL of the idempotency keys: loading them with the catalog and writing or deleting one.

use crate::catalog::parse_uuid;
use crate::map_err;
use berth_core::Instant;
use berth_core::catalog::CatalogRows;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use berth_store::StoreError;
use berth_store::codec::encode_instant;
use sqlx::{Row, SqliteConnection};

/// Reads every idempotency key into `rows`.
#[tracing::instrument(skip_all)]
pub(crate) async fn load(
    conn: &mut SqliteConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let stored = sqlx::query(
        "SELECT project_id, route, idempotency_key, fingerprint, object_id, created_at
         FROM idempotency_keys",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?;
    for row in stored {
        let key = IdempotencyKey {
            project_id: row.get("project_id"),
            route: row.get("route"),
            key: row.get("idempotency_key"),
        };
        let record = IdempotencyRecord {
            fingerprint: row.get("fingerprint"),
            object_id: parse_uuid(row.get("object_id"))?,
            created_at: Instant::from_micros(row.get("created_at")),
        };
        rows.idempotency.push((key, record));
    }
    Ok(())
}

/// Records a key (replacing an expired record of it), or deletes it.
#[tracing::instrument(skip_all)]
pub(crate) async fn set(
    conn: &mut SqliteConnection,
    key: &IdempotencyKey,
    record: Option<&IdempotencyRecord>,
) -> Result<(), StoreError> {
    match record {
        Some(record) => sqlx::query(
            "INSERT INTO idempotency_keys
             (project_id, route, idempotency_key, fingerprint, object_id, created_at)
             VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT (project_id, route, idempotency_key) DO UPDATE
             SET fingerprint = excluded.fingerprint, object_id = excluded.object_id,
                 created_at = excluded.created_at",
        )
        .bind(&key.project_id)
        .bind(&key.route)
        .bind(&key.key)
        .bind(&record.fingerprint)
        .bind(record.object_id.to_string())
        .bind(encode_instant(record.created_at)),
        None => sqlx::query(
            "DELETE FROM idempotency_keys
             WHERE project_id = ? AND route = ? AND idempotency_key = ?",
        )
        .bind(&key.project_id)
        .bind(&key.route)
        .bind(&key.key),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}
