//! The usage history: adding a commit's closed segments and reading those a report's period
//! overlaps. The history is append-only and never loaded with the catalog.

use super::backend::{Conn, SqlBackend, execute, fetch_all, uuid_column};
use super::driver::{Args as _, Columns as _};
use crate::codec::{corrupt, decode_u64, encode_instant, encode_u64};
use crate::port::StoreError;
use berth_core::model::ledger::Window;
use berth_core::model::usage::{UsageKind, UsageSegment, UsageSource};
use berth_core::{Instant, ProviderId, ReservationId, ResourceClass};

/// Adds `segments` as the commit `seq`'s, in one statement whatever their number.
#[tracing::instrument(skip_all, fields(segments = segments.len()))]
pub(super) async fn record<B: SqlBackend>(
    conn: &mut Conn<B>,
    seq: u64,
    segments: &[UsageSegment],
) -> Result<(), StoreError> {
    if segments.is_empty() {
        return Ok(());
    }
    let rows: Vec<_> = segments
        .iter()
        .map(|s| {
            (
                s.source.kind(),
                s.source.uuid().to_string(),
                s.kind.as_str(),
                s.project_id.as_str(),
                s.reservation.map(|r| r.uuid().to_string()),
                s.provider.uuid().to_string(),
                s.class.as_str(),
                encode_u64(s.amount),
                encode_instant(s.since),
                s.until.map(encode_instant),
            )
        })
        .collect();
    let rows = serde_json::to_string(&rows).map_err(|e| StoreError::Backend(Box::new(e)))?;
    let query = sqlx::query(B::SQL.usage_insert)
        .arg(rows)
        .arg(encode_u64(seq));
    execute::<B>(conn, query).await
}

/// At most `limit` segments that overlap `period` written by the commits up to `seq`, in the
/// order they were written.
#[tracing::instrument(skip_all)]
pub(super) async fn overlapping<B: SqlBackend>(
    conn: &mut Conn<B>,
    period: Window,
    seq: u64,
    limit: usize,
) -> Result<Vec<UsageSegment>, StoreError> {
    let query = sqlx::query(B::SQL.usage_overlapping)
        .arg(encode_instant(period.end()))
        .arg(encode_instant(period.start()))
        .arg(encode_u64(seq))
        .arg(i64::try_from(limit).unwrap_or(i64::MAX));
    let rows = fetch_all::<B>(conn, query).await?;
    let mut segments = Vec::with_capacity(rows.len());
    for row in rows {
        let id: i64 = row.column("id")?;
        let source =
            UsageSource::parse(row.text("source_kind")?, uuid_column::<B>(&row, "source")?)
                .ok_or_else(|| corrupt("usage source kind"))?;
        let kind = UsageKind::parse(row.text("kind")?).ok_or_else(|| corrupt("usage kind"))?;
        let class =
            ResourceClass::parse(row.text("resource_class")?).ok_or_else(|| corrupt("class"))?;
        segments.push((
            id,
            UsageSegment {
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
            },
        ));
    }
    // Ids grow as rows are written: ordered by them, the segments read as written.
    segments.sort_unstable_by_key(|(id, _)| *id);
    Ok(segments.into_iter().map(|(_, segment)| segment).collect())
}
