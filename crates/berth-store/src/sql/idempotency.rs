//! The idempotency keys: loading them with the catalog and writing or deleting one.

use super::backend::{Conn, SqlBackend, execute, fetch_all, uuid_column};
use super::driver::{Args as _, Columns as _};
use crate::codec::encode_instant;
use crate::port::StoreError;
use berth_core::Instant;
use berth_core::catalog::CatalogRows;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};

/// Reads every idempotency key into `rows`.
#[tracing::instrument(skip_all)]
pub(super) async fn load<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    for row in fetch_all::<B>(conn, sqlx::query(B::SQL.idempotency_keys)).await? {
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
        rows.idempotency.push((key, record));
    }
    Ok(())
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
