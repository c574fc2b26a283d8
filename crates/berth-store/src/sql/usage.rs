//! The usage history: writing a source's update and reading the segments a report's period
//! overlaps. The history is never loaded with the catalog.

use super::backend::{Conn, SqlBackend, execute, fetch_all, uuid_column};
use super::driver::{Args as _, Columns as _};
use crate::codec::{corrupt, decode_u64, encode_instant, encode_u64};
use crate::port::StoreError;
use berth_core::model::ledger::Window;
use berth_core::model::usage::{UsageKind, UsageSegment, UsageSource, UsageUpdate};
use berth_core::{Instant, ProviderId, ReservationId, ResourceClass};

/// Writes one source's update: drops what had not begun, ends what runs, adds the new.
#[tracing::instrument(skip_all, fields(segments = update.segments.len()))]
pub(super) async fn record<B: SqlBackend>(
    conn: &mut Conn<B>,
    update: &UsageUpdate,
) -> Result<(), StoreError> {
    let (kind, source) = (update.source.kind(), update.source.uuid());
    let at = encode_instant(update.at);
    let query = sqlx::query(B::SQL.usage_drop_from)
        .arg(kind)
        .arg(B::uuid(source))
        .arg(at);
    execute::<B>(conn, query).await?;
    let query = sqlx::query(B::SQL.usage_close_at)
        .arg(at)
        .arg(kind)
        .arg(B::uuid(source))
        .arg(at);
    execute::<B>(conn, query).await?;
    for segment in &update.segments {
        let query = sqlx::query(B::SQL.usage_insert)
            .arg(segment.source.kind())
            .arg(B::uuid(segment.source.uuid()))
            .arg(segment.kind.as_str())
            .arg(segment.project_id.as_str())
            .arg(segment.reservation.map(|r| B::uuid(r.uuid())))
            .arg(B::uuid(segment.provider.uuid()))
            .arg(segment.class.as_str())
            .arg(encode_u64(segment.amount))
            .arg(encode_instant(segment.since))
            .arg(segment.until.map(encode_instant));
        execute::<B>(conn, query).await?;
    }
    Ok(())
}

/// At most `limit` segments that overlap `period`, in the order they were written.
#[tracing::instrument(skip_all)]
pub(super) async fn overlapping<B: SqlBackend>(
    conn: &mut Conn<B>,
    period: Window,
    limit: usize,
) -> Result<Vec<UsageSegment>, StoreError> {
    let query = sqlx::query(B::SQL.usage_overlapping)
        .arg(encode_instant(period.end()))
        .arg(encode_instant(period.start()))
        .arg(i64::try_from(limit).unwrap_or(i64::MAX));
    let rows = fetch_all::<B>(conn, query).await?;
    let mut segments = Vec::with_capacity(rows.len());
    for row in rows {
        let source =
            UsageSource::parse(row.text("source_kind")?, uuid_column::<B>(&row, "source")?)
                .ok_or_else(|| corrupt("usage source kind"))?;
        let kind = UsageKind::parse(row.text("kind")?).ok_or_else(|| corrupt("usage kind"))?;
        let class =
            ResourceClass::parse(row.text("resource_class")?).ok_or_else(|| corrupt("class"))?;
        segments.push(UsageSegment {
            source,
            kind,
            project_id: row.column("project_id")?,
            reservation: B::read_uuid(&row, "reservation_id")?.map(ReservationId::new),
            provider: ProviderId::new(uuid_column::<B>(&row, "provider_id")?),
            class,
            amount: decode_u64(row.column("amount")?)?,
            since: Instant::from_micros(row.column("since")?),
            until: row
                .column::<Option<i64>>("until")?
                .map(Instant::from_micros),
        });
    }
    Ok(segments)
}
