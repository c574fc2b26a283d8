//! SQL of the idempotency keys: loading them with the catalog and writing or deleting one.

use crate::map_err;
use berth_core::Instant;
use berth_core::catalog::CatalogRows;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use berth_store::StoreError;
use berth_store::codec::encode_instant;
use sqlx::{PgConnection, Row};

/// Reads every idempotency key into `rows`.
#[tracing::instrument(skip_all)]
pub(crate) async fn load(
    conn: &mut PgConnection,
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
            object_id: row.get("object_id"),
            created_at: Instant::from_micros(row.get("created_at")),
        };
        rows.idempotency.push((key, record));
    }
    Ok(())
}

/// Records a key (replacing an expired record of it), or deletes it.
#[tracing::instrument(skip_all)]
pub(crate) async fn set(
    conn: &mut PgConnection,
    key: &IdempotencyKey,
    record: Option<&IdempotencyRecord>,
) -> Result<(), StoreError> {
    match record {
        Some(record) => sqlx::query(
            "INSERT INTO idempotency_keys
             (project_id, route, idempotency_key, fingerprint, object_id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (project_id, route, idempotency_key) DO UPDATE
             SET fingerprint = excluded.fingerprint, object_id = excluded.object_id,
                 created_at = excluded.created_at",
        )
        .bind(&key.project_id)
        .bind(&key.route)
        .bind(&key.key)
        .bind(&record.fingerprint)
        .bind(record.object_id)
        .bind(encode_instant(record.created_at)),
        None => sqlx::query(
            "DELETE FROM idempotency_keys
             WHERE project_id = $1 AND route = $2 AND idempotency_key = $3",
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
