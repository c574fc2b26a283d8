//! Leases PostgreSQL's way: every lease read at start-up in one query, each document decoded
//! as its row arrives; a batch's leases and lifecycle records written in one statement, their
//! columns bound as arrays.

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

/// Writes the new states of `leases` (each id once) and appends `records` in their order (the
/// record's sequence follows it), in one statement: the two tables share no key, so neither
/// waits for the other, and an empty list writes nothing.
pub(crate) async fn write_leases(
    conn: &mut PgConnection,
    leases: &[(LeaseId, &Lease)],
    records: &[&LeaseRecord],
) -> Result<(), StoreError> {
    if leases.is_empty() && records.is_empty() {
        return Ok(());
    }
    let query = sqlx::query(
        "WITH written AS (
            INSERT INTO leases
                (id, project_id, status, start_at, end_at, document, created_at, updated_at)
            SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::int8[], $5::int8[],
                $6::text[], $7::int8[], $8::int8[])
            ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id,
            status = excluded.status, start_at = excluded.start_at, end_at = excluded.end_at,
            document = excluded.document, updated_at = excluded.updated_at)
        INSERT INTO lease_records (lease_id, kind, at, details)
        SELECT lease_id, kind, at, details
        FROM UNNEST($9::uuid[], $10::text[], $11::int8[], $12::text[])
            WITH ORDINALITY AS r (lease_id, kind, at, details, n)
        ORDER BY n",
    );
    bind_records(bind_leases(query, leases), records)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// A statement as built and bound, before it runs.
type Query<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Binds the columns of `leases` as the next eight parameters.
fn bind_leases<'q>(query: Query<'q>, leases: &[(LeaseId, &'q Lease)]) -> Query<'q> {
    let column = |f: fn(&Lease) -> i64| leases.iter().map(|(_, l)| f(l)).collect::<Vec<_>>();
    let ids: Vec<Uuid> = leases.iter().map(|(id, _)| id.uuid()).collect();
    let projects: Vec<&str> = leases.iter().map(|(_, l)| &*l.project_id).collect();
    let statuses: Vec<&str> = leases.iter().map(|(_, l)| l.status.as_str()).collect();
    let documents: Vec<String> = leases.iter().map(|(_, l)| encode_lease(l)).collect();
    query
        .bind(ids)
        .bind(projects)
        .bind(statuses)
        .bind(column(|l| encode_instant(l.start)))
        .bind(column(|l| encode_instant(l.end)))
        .bind(documents)
        .bind(column(|l| encode_instant(l.created_at)))
        .bind(column(|l| encode_instant(l.updated_at)))
}

/// Binds the columns of `records` as the next four parameters.
fn bind_records<'q>(query: Query<'q>, records: &[&'q LeaseRecord]) -> Query<'q> {
    let ids: Vec<Uuid> = records.iter().map(|r| r.lease_id.uuid()).collect();
    let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
    let at: Vec<i64> = records.iter().map(|r| encode_instant(r.at)).collect();
    let details: Vec<&str> = records.iter().map(|r| r.details.as_str()).collect();
    query.bind(ids).bind(kinds).bind(at).bind(details)
}
