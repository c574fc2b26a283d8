//! SQL of the lease tables: leases as JSON documents, the floating IPs registered for
//! reservation, and the append-only lifecycle record.

use crate::map_err;
use berth_core::Instant;
use berth_core::catalog::CatalogRows;
use berth_core::model::lease::{FloatingIp, Lease, LeaseRecord};
use berth_store::StoreError;
use berth_store::codec::{decode_lease, decode_u64, encode_bound, encode_instant, encode_lease};
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

/// Reads every lease and floating IP into `rows`.
#[tracing::instrument(skip_all)]
pub(crate) async fn load(
    conn: &mut PgConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    rows.leases = load_leases(conn).await?;
    rows.floating_ips = load_floating_ips(conn).await?;
    rows.private_properties =
        sqlx::query_scalar("SELECT name FROM resource_properties WHERE private")
            .fetch_all(&mut *conn)
            .await
            .map_err(map_err)?;
    Ok(())
}

/// Reads every lease in one query, decoding each document as its row arrives (the rows are
/// never held together; only the decoded leases are).
#[tracing::instrument(skip_all)]
async fn load_leases(conn: &mut PgConnection) -> Result<Vec<Arc<Lease>>, StoreError> {
    sqlx::query("SELECT document FROM leases")
        .try_map(|row: PgRow| {
            let document: &str = row.try_get(0)?;
            decode_lease(document).map(Arc::new).map_err(carry)
        })
        .fetch_all(&mut *conn)
        .await
        .map_err(lift)
}

#[tracing::instrument(skip_all)]
async fn load_floating_ips(conn: &mut PgConnection) -> Result<Vec<FloatingIp>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, network_id, subnet_id, address, reservable, created_at, updated_at
         FROM floating_ips",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(rows
        .iter()
        .map(|row| FloatingIp {
            id: row.get("id"),
            network_id: row.get("network_id"),
            subnet_id: row.get("subnet_id"),
            address: row.get("address"),
            reservable: row.get("reservable"),
            created_at: Instant::from_micros(row.get("created_at")),
            updated_at: Instant::from_micros(row.get("updated_at")),
        })
        .collect())
}

/// Writes a lease's whole new state, or deletes it (`None`).
#[tracing::instrument(skip_all)]
pub(crate) async fn set_lease(
    conn: &mut PgConnection,
    id: Uuid,
    lease: Option<&Lease>,
) -> Result<(), StoreError> {
    match lease {
        Some(lease) => sqlx::query(
            "INSERT INTO leases
             (id, project_id, status, start_at, end_at, document, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id,
             status = excluded.status, start_at = excluded.start_at, end_at = excluded.end_at,
             document = excluded.document, updated_at = excluded.updated_at",
        )
        .bind(id)
        .bind(&lease.project_id)
        .bind(lease.status.as_str())
        .bind(encode_instant(lease.start))
        .bind(encode_instant(lease.end))
        .bind(encode_lease(lease))
        .bind(encode_instant(lease.created_at))
        .bind(encode_instant(lease.updated_at)),
        None => sqlx::query("DELETE FROM leases WHERE id = $1").bind(id),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Registers or updates a floating IP, or removes it (`None`).
#[tracing::instrument(skip_all)]
pub(crate) async fn set_floating_ip(
    conn: &mut PgConnection,
    id: Uuid,
    fip: Option<&FloatingIp>,
) -> Result<(), StoreError> {
    match fip {
        Some(fip) => sqlx::query(
            "INSERT INTO floating_ips
             (id, network_id, subnet_id, address, reservable, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (id) DO UPDATE SET network_id = excluded.network_id,
             subnet_id = excluded.subnet_id, address = excluded.address,
             reservable = excluded.reservable, updated_at = excluded.updated_at",
        )
        .bind(id)
        .bind(&fip.network_id)
        .bind(&fip.subnet_id)
        .bind(&fip.address)
        .bind(fip.reservable)
        .bind(encode_instant(fip.created_at))
        .bind(encode_instant(fip.updated_at)),
        None => sqlx::query("DELETE FROM floating_ips WHERE id = $1").bind(id),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Appends one entry to the lifecycle record.
#[tracing::instrument(skip_all)]
pub(crate) async fn append_record(
    conn: &mut PgConnection,
    record: &LeaseRecord,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO lease_records (lease_id, kind, at, details) VALUES ($1, $2, $3, $4)")
        .bind(record.lease_id)
        .bind(&record.kind)
        .bind(encode_instant(record.at))
        .bind(&record.details)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// A lifecycle record entry with its sequence number, from a `lease_records` row.
fn decode_record(row: &PgRow) -> Result<(u64, LeaseRecord), StoreError> {
    let record = LeaseRecord {
        lease_id: row.get("lease_id"),
        kind: row.get("kind"),
        at: Instant::from_micros(row.get("at")),
        details: row.get("details"),
    };
    Ok((decode_u64(row.get("seq"))?, record))
}

/// The lifecycle record of one lease, oldest first.
#[tracing::instrument(skip_all)]
pub(crate) async fn records_of(
    conn: &mut PgConnection,
    lease: Uuid,
) -> Result<Vec<LeaseRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT seq, lease_id, kind, at, details FROM lease_records
         WHERE lease_id = $1 ORDER BY seq",
    )
    .bind(lease)
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?;
    rows.iter()
        .map(|row| decode_record(row).map(|(_, record)| record))
        .collect()
}

/// At most `limit` entries of the lifecycle record after `seq`, oldest first.
#[tracing::instrument(skip_all)]
pub(crate) async fn records_after(
    conn: &mut PgConnection,
    seq: u64,
    limit: usize,
) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
    let rows = sqlx::query(
        "SELECT seq, lease_id, kind, at, details FROM lease_records
         WHERE seq > $1 ORDER BY seq LIMIT $2",
    )
    .bind(encode_bound(seq))
    .bind(encode_bound(limit))
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?;
    rows.iter().map(decode_record).collect()
}

/// Marks a host property private, or public (by removing its row).
#[tracing::instrument(skip_all)]
pub(crate) async fn set_property_privacy(
    conn: &mut PgConnection,
    name: &str,
    private: bool,
    now: i64,
) -> Result<(), StoreError> {
    match private {
        true => sqlx::query(
            "INSERT INTO resource_properties (name, private, updated_at) VALUES ($1, TRUE, $2)
             ON CONFLICT (name) DO UPDATE SET private = TRUE, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(now),
        false => sqlx::query("DELETE FROM resource_properties WHERE name = $1").bind(name),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}
