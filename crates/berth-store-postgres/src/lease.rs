//! Leases PostgreSQL's way: every lease read at start-up in one query, each document decoded
//! as its row arrives; a batch's leases and lifecycle records written in one statement each,
//! their columns bound as arrays.

use crate::error::map_err;
use berth_core::LeaseId;
use berth_core::model::lease::{Lease, LeaseRecord};
use berth_store::StoreError;
use berth_store::codec::{decode_lease, encode_instant, encode_lease};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use std::sync::Arc;
use uuid::Uuid;

/// Carries a port error through a row mapper, which may only fail with a driver error.
fn carry(error: StoreError) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

/// The port error a row mapper carried out, or the mapped driver error.
fn lift(error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::Decode(inner) => match inner.downcast::<StoreError>() {
            Ok(carried) => *carried,
            Err(inner) => map_err(sqlx::Error::Decode(inner)),
        },
        other => map_err(other),
    }
}

/// Reads every lease in one query, decoding each document as its row arrives (the rows are
/// never held together; only the decoded leases are).
#[tracing::instrument(skip_all)]
pub(crate) async fn load_leases(conn: &mut PgConnection) -> Result<Vec<Arc<Lease>>, StoreError> {
    sqlx::query("SELECT document FROM leases")
        .try_map(|row: PgRow| {
            let document: &str = row.try_get(0)?;
            decode_lease(document).map(Arc::new).map_err(carry)
        })
        .fetch_all(&mut *conn)
        .await
        .map_err(lift)
}

/// Writes the new states of `leases` (each id once), then appends `records` in their order
/// (the record's sequence follows the list's order).
pub(crate) async fn write_leases(
    conn: &mut PgConnection,
    leases: &[(LeaseId, &Lease)],
    records: &[&LeaseRecord],
) -> Result<(), StoreError> {
    if !leases.is_empty() {
        let column = |f: fn(&Lease) -> i64| leases.iter().map(|(_, l)| f(l)).collect::<Vec<_>>();
        let ids: Vec<Uuid> = leases.iter().map(|(id, _)| id.uuid()).collect();
        let projects: Vec<&str> = leases.iter().map(|(_, l)| &*l.project_id).collect();
        let statuses: Vec<&str> = leases.iter().map(|(_, l)| l.status.as_str()).collect();
        let documents: Vec<String> = leases.iter().map(|(_, l)| encode_lease(l)).collect();
        let (starts, ends) = (
            column(|l| encode_instant(l.start)),
            column(|l| encode_instant(l.end)),
        );
        let created = column(|l| encode_instant(l.created_at));
        let updated = column(|l| encode_instant(l.updated_at));
        sqlx::query(
            "INSERT INTO leases
                (id, project_id, status, start_at, end_at, document, created_at, updated_at)
            SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::int8[],
                $6::text[], $7::int8[], $8::int8[])
            ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id,
            status = excluded.status, start_at = excluded.start_at, end_at = excluded.end_at,
            document = excluded.document, updated_at = excluded.updated_at",
        )
        .bind(ids)
        .bind(projects)
        .bind(statuses)
        .bind(starts)
        .bind(ends)
        .bind(documents)
        .bind(created)
        .bind(updated)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    if !records.is_empty() {
        let ids: Vec<Uuid> = records.iter().map(|r| r.lease_id.uuid()).collect();
        let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
        let at: Vec<i64> = records.iter().map(|r| encode_instant(r.at)).collect();
        let details: Vec<&str> = records.iter().map(|r| r.details.as_str()).collect();
        sqlx::query(
            "INSERT INTO lease_records (lease_id, kind, at, details)
            SELECT lease_id, kind, at, details
            FROM UNNEST($1::uuid[], $2::text[], $3::int8[], $4::text[])
                WITH ORDINALITY AS r (lease_id, kind, at, details, n)
            ORDER BY n",
        )
        .bind(ids)
        .bind(kinds)
        .bind(at)
        .bind(details)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    }
    Ok(())
}
