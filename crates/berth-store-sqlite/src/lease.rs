//! SQL of the lease tables: leases as JSON documents, the floating IPs registered for
//! reservation, and the append-only lifecycle record.

use crate::catalog::parse_uuid;
use crate::map_err;
use berth_core::Instant;
use berth_core::catalog::CatalogRows;
use berth_core::model::lease::{FloatingIp, Lease, LeaseRecord};
use berth_store::StoreError;
use berth_store::codec::{decode_lease, decode_u64, encode_bound, encode_instant, encode_lease};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use std::sync::Arc;
use uuid::Uuid;

/// Reads every lease and floating IP into `rows`.
#[tracing::instrument(skip_all)]
pub(crate) async fn load(
    conn: &mut SqliteConnection,
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

/// Leases read per query while loading: about half a megabyte of documents (larger chunks
/// measured no faster and made the allocator return and fault in more memory).
const LOAD_CHUNK_ROWS: i64 = 500;

/// Chunks decoded at once (each on a blocking thread) while the next one is read.
const LOAD_CHUNKS_DECODING: usize = 3;

/// Reads every lease, [`LOAD_CHUNK_ROWS`] at a time in rowid order (all within the caller's
/// transaction, so one snapshot). Each chunk comes back as one value, its documents joined by
/// the ASCII record separator (which no JSON text contains unescaped), so that a chunk crosses
/// from the driver's thread in one hand-over instead of row by row. Chunks are decoded on
/// blocking threads while the next ones are read.
#[tracing::instrument(skip_all)]
async fn load_leases(conn: &mut SqliteConnection) -> Result<Vec<Arc<Lease>>, StoreError> {
    let mut leases = Vec::new();
    let mut decoding = std::collections::VecDeque::new();
    let mut after: i64 = 0;
    loop {
        let chunk = sqlx::query(
            "SELECT group_concat(document, char(30)), max(rowid) FROM
             (SELECT rowid, document FROM leases WHERE rowid > ? ORDER BY rowid LIMIT ?)",
        )
        .bind(after)
        .bind(LOAD_CHUNK_ROWS)
        .fetch_one(&mut *conn)
        .await
        .map_err(map_err)?;
        let Some(last) = chunk.try_get::<Option<i64>, _>(1).map_err(map_err)? else {
            break;
        };
        after = last;
        decoding.push_back(tokio::task::spawn_blocking(move || decode_chunk(&chunk)));
        if decoding.len() >= LOAD_CHUNKS_DECODING
            && let Some(handle) = decoding.pop_front()
        {
            leases.extend(decoded(handle).await?);
        }
    }
    for handle in decoding {
        leases.extend(decoded(handle).await?);
    }
    Ok(leases)
}

/// The leases of one chunk of documents.
fn decode_chunk(chunk: &SqliteRow) -> Result<Vec<Arc<Lease>>, StoreError> {
    let documents: &str = chunk.try_get(0).map_err(map_err)?;
    documents
        .split('\u{1e}')
        .map(|document| decode_lease(document).map(Arc::new))
        .collect()
}

/// The outcome of a chunk's decoding.
async fn decoded(
    handle: tokio::task::JoinHandle<Result<Vec<Arc<Lease>>, StoreError>>,
) -> Result<Vec<Arc<Lease>>, StoreError> {
    handle
        .await
        .expect("invariant: decoding a chunk of leases does not panic")
}

#[tracing::instrument(skip_all)]
async fn load_floating_ips(conn: &mut SqliteConnection) -> Result<Vec<FloatingIp>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, network_id, subnet_id, address, reservable, created_at, updated_at
         FROM floating_ips",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(map_err)?;
    rows.iter()
        .map(|row| {
            Ok(FloatingIp {
                id: parse_uuid(row.get("id"))?,
                network_id: row.get("network_id"),
                subnet_id: row.get("subnet_id"),
                address: row.get("address"),
                reservable: row.get("reservable"),
                created_at: Instant::from_micros(row.get("created_at")),
                updated_at: Instant::from_micros(row.get("updated_at")),
            })
        })
        .collect()
}

/// Writes a lease's whole new state, or deletes it (`None`).
#[tracing::instrument(skip_all)]
pub(crate) async fn set_lease(
    conn: &mut SqliteConnection,
    id: Uuid,
    lease: Option<&Lease>,
) -> Result<(), StoreError> {
    match lease {
        Some(lease) => sqlx::query(
            "INSERT INTO leases
             (id, project_id, status, start_at, end_at, document, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id,
             status = excluded.status, start_at = excluded.start_at, end_at = excluded.end_at,
             document = excluded.document, updated_at = excluded.updated_at",
        )
        .bind(id.to_string())
        .bind(&lease.project_id)
        .bind(lease.status.as_str())
        .bind(encode_instant(lease.start))
        .bind(encode_instant(lease.end))
        .bind(encode_lease(lease))
        .bind(encode_instant(lease.created_at))
        .bind(encode_instant(lease.updated_at)),
        None => sqlx::query("DELETE FROM leases WHERE id = ?").bind(id.to_string()),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Registers or updates a floating IP, or removes it (`None`).
#[tracing::instrument(skip_all)]
pub(crate) async fn set_floating_ip(
    conn: &mut SqliteConnection,
    id: Uuid,
    fip: Option<&FloatingIp>,
) -> Result<(), StoreError> {
    match fip {
        Some(fip) => sqlx::query(
            "INSERT INTO floating_ips
             (id, network_id, subnet_id, address, reservable, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET network_id = excluded.network_id,
             subnet_id = excluded.subnet_id, address = excluded.address,
             reservable = excluded.reservable, updated_at = excluded.updated_at",
        )
        .bind(id.to_string())
        .bind(&fip.network_id)
        .bind(&fip.subnet_id)
        .bind(&fip.address)
        .bind(fip.reservable)
        .bind(encode_instant(fip.created_at))
        .bind(encode_instant(fip.updated_at)),
        None => sqlx::query("DELETE FROM floating_ips WHERE id = ?").bind(id.to_string()),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// Appends one entry to the lifecycle record.
#[tracing::instrument(skip_all)]
pub(crate) async fn append_record(
    conn: &mut SqliteConnection,
    record: &LeaseRecord,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO lease_records (lease_id, kind, at, details) VALUES (?, ?, ?, ?)")
        .bind(record.lease_id.to_string())
        .bind(&record.kind)
        .bind(encode_instant(record.at))
        .bind(&record.details)
        .execute(&mut *conn)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// A lifecycle record entry with its sequence number, from a `lease_records` row.
fn decode_record(row: &SqliteRow) -> Result<(u64, LeaseRecord), StoreError> {
    let record = LeaseRecord {
        lease_id: parse_uuid(row.get("lease_id"))?,
        kind: row.get("kind"),
        at: Instant::from_micros(row.get("at")),
        details: row.get("details"),
    };
    Ok((decode_u64(row.get("seq"))?, record))
}

/// The lifecycle record of one lease, oldest first.
#[tracing::instrument(skip_all)]
pub(crate) async fn records_of(
    conn: &mut SqliteConnection,
    lease: Uuid,
) -> Result<Vec<LeaseRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT seq, lease_id, kind, at, details FROM lease_records
         WHERE lease_id = ? ORDER BY seq",
    )
    .bind(lease.to_string())
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
    conn: &mut SqliteConnection,
    seq: u64,
    limit: usize,
) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
    let rows = sqlx::query(
        "SELECT seq, lease_id, kind, at, details FROM lease_records
         WHERE seq > ? ORDER BY seq LIMIT ?",
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
    conn: &mut SqliteConnection,
    name: &str,
    private: bool,
    now: i64,
) -> Result<(), StoreError> {
    match private {
        true => sqlx::query(
            "INSERT INTO resource_properties (name, private, updated_at) VALUES (?, TRUE, ?)
             ON CONFLICT (name) DO UPDATE SET private = TRUE, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(now),
        false => sqlx::query("DELETE FROM resource_properties WHERE name = ?").bind(name),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(())
}
