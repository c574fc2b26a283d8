//! The lease tables: leases as JSON documents, the floating IPs registered for reservation, the
//! private host properties, and the append-only lifecycle record.

use super::backend::{Conn, SqlBackend, execute, fetch_all, uuid_column};
use super::driver::{Args as _, Columns as _};
use crate::codec::{decode_u64, encode_bound, encode_instant, encode_lease};
use crate::port::StoreError;
use berth_core::Instant;
use berth_core::LeaseId;
use berth_core::catalog::CatalogRows;
use berth_core::model::lease::{FloatingIp, Lease, LeaseRecord};
use sqlx::Database;
use uuid::Uuid;

/// Reads every lease, floating IP and private property into `rows`.
#[tracing::instrument(skip_all)]
pub(super) async fn load<B: SqlBackend>(
    conn: &mut Conn<B>,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    rows.leases = B::load_leases(conn).await?;
    rows.floating_ips = load_floating_ips::<B>(conn).await?;
    rows.private_properties = fetch_all::<B>(conn, sqlx::query(B::SQL.private_properties))
        .await?
        .iter()
        .map(|row| row.column("name"))
        .collect::<Result<_, _>>()?;
    Ok(())
}

#[tracing::instrument(skip_all)]
async fn load_floating_ips<B: SqlBackend>(
    conn: &mut Conn<B>,
) -> Result<Vec<FloatingIp>, StoreError> {
    fetch_all::<B>(conn, sqlx::query(B::SQL.floating_ips))
        .await?
        .iter()
        .map(|row| {
            Ok(FloatingIp {
                id: uuid_column::<B>(row, "id")?,
                network_id: row.column("network_id")?,
                subnet_id: row.column("subnet_id")?,
                address: row.column("address")?,
                reservable: row.column("reservable")?,
                created_at: Instant::from_micros(row.column("created_at")?),
                updated_at: Instant::from_micros(row.column("updated_at")?),
            })
        })
        .collect()
}

/// Writes a lease's whole new state, or deletes it (`None`).
#[tracing::instrument(skip_all)]
pub(super) async fn set_lease<B: SqlBackend>(
    conn: &mut Conn<B>,
    id: LeaseId,
    lease: Option<&Lease>,
) -> Result<(), StoreError> {
    let query = match lease {
        Some(lease) => sqlx::query(B::SQL.upsert_lease)
            .arg(B::uuid(id.uuid()))
            .arg(&*lease.project_id)
            .arg(lease.status.as_str())
            .arg(encode_instant(lease.start))
            .arg(encode_instant(lease.end))
            .arg(encode_lease(lease))
            .arg(encode_instant(lease.created_at))
            .arg(encode_instant(lease.updated_at)),
        None => sqlx::query(B::SQL.delete_lease).arg(B::uuid(id.uuid())),
    };
    execute::<B>(conn, query).await
}

/// Registers or updates a floating IP, or removes it (`None`).
#[tracing::instrument(skip_all)]
pub(super) async fn set_floating_ip<B: SqlBackend>(
    conn: &mut Conn<B>,
    id: Uuid,
    fip: Option<&FloatingIp>,
) -> Result<(), StoreError> {
    let query = match fip {
        Some(fip) => sqlx::query(B::SQL.upsert_floating_ip)
            .arg(B::uuid(id))
            .arg(fip.network_id.as_str())
            .arg(fip.subnet_id.as_deref())
            .arg(fip.address.as_str())
            .arg(fip.reservable)
            .arg(encode_instant(fip.created_at))
            .arg(encode_instant(fip.updated_at)),
        None => sqlx::query(B::SQL.delete_floating_ip).arg(B::uuid(id)),
    };
    execute::<B>(conn, query).await
}

/// Appends one entry to the lifecycle record.
#[tracing::instrument(skip_all)]
pub(super) async fn append_record<B: SqlBackend>(
    conn: &mut Conn<B>,
    record: &LeaseRecord,
) -> Result<(), StoreError> {
    let query = sqlx::query(B::SQL.append_record)
        .arg(B::uuid(record.lease_id.uuid()))
        .arg(record.kind.as_str())
        .arg(encode_instant(record.at))
        .arg(record.details.as_str());
    execute::<B>(conn, query).await
}

/// A lifecycle record entry with its sequence number, from a `lease_records` row.
fn decode_record<B: SqlBackend>(
    row: &<B::Db as Database>::Row,
) -> Result<(u64, LeaseRecord), StoreError> {
    let record = LeaseRecord {
        lease_id: LeaseId::new(uuid_column::<B>(row, "lease_id")?),
        kind: row.column("kind")?,
        at: Instant::from_micros(row.column("at")?),
        details: row.column("details")?,
    };
    Ok((decode_u64(row.column("seq")?)?, record))
}

/// The lifecycle record of one lease, oldest first.
#[tracing::instrument(skip_all)]
pub(super) async fn records_of<B: SqlBackend>(
    conn: &mut Conn<B>,
    lease: LeaseId,
) -> Result<Vec<LeaseRecord>, StoreError> {
    let query = sqlx::query(B::SQL.records_of).arg(B::uuid(lease.uuid()));
    fetch_all::<B>(conn, query)
        .await?
        .iter()
        .map(|row| decode_record::<B>(row).map(|(_, record)| record))
        .collect()
}

/// At most `limit` entries of the lifecycle record after `seq`, oldest first.
#[tracing::instrument(skip_all)]
pub(super) async fn records_after<B: SqlBackend>(
    conn: &mut Conn<B>,
    seq: u64,
    limit: usize,
) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
    let query = sqlx::query(B::SQL.records_after)
        .arg(encode_bound(seq))
        .arg(encode_bound(limit));
    fetch_all::<B>(conn, query)
        .await?
        .iter()
        .map(decode_record::<B>)
        .collect()
}

/// Marks a host property private, or public (by removing its row).
#[tracing::instrument(skip_all)]
pub(super) async fn set_property_privacy<B: SqlBackend>(
    conn: &mut Conn<B>,
    name: &str,
    private: bool,
    now: i64,
) -> Result<(), StoreError> {
    let query = match private {
        true => sqlx::query(B::SQL.upsert_private_property)
            .arg(name)
            .arg(now),
        false => sqlx::query(B::SQL.delete_private_property).arg(name),
    };
    execute::<B>(conn, query).await
}
