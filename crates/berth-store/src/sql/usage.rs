//! The usage history: writing a source's update and reading the segments a report's period
//! overlaps. The history is never loaded with the catalog.

use super::backend::{Conn, SqlBackend, execute, fetch_all, prune_before, uuid_column};
use super::driver::{Args as _, Columns as _};
use crate::codec::{corrupt, decode_u64, encode_instant, encode_u64};
use crate::port::StoreError;
use berth_core::model::ledger::Window;
use berth_core::model::usage::{UsageKind, UsageSegment, UsageSource, UsageUpdate};
use berth_core::{Instant, ProviderId, ReservationId, ResourceClass};
use std::collections::BTreeMap;

/// Writes a commit's updates in three statements at most, whatever their number: each cutting
/// source's segments that had not begun at its update are dropped and those running then end
/// there (one statement each over every such source), and the new segments are added in one
/// more. The
/// result equals applying the updates one by one, as [`UsageUpdate::apply_to`] does.
#[tracing::instrument(skip_all, fields(updates = updates.len()))]
pub(super) async fn record<B: SqlBackend>(
    conn: &mut Conn<B>,
    updates: &[UsageUpdate],
) -> Result<(), StoreError> {
    // Where a source is updated twice, its stored segments are cut at the earlier instant and
    // the later update acts on the earlier one's segments alone: fold them in memory.
    let mut cut: BTreeMap<UsageSource, Instant> = BTreeMap::new();
    let mut fresh = Vec::new();
    for update in updates {
        if update.cuts {
            cut.entry(update.source)
                .and_modify(|at| *at = (*at).min(update.at))
                .or_insert(update.at);
        }
        update.apply_to(&mut fresh);
    }
    // `[source_kind, source, at]` for every source; one row for every new segment.
    let sources: Vec<(&str, String, i64)> = cut
        .iter()
        .map(|(source, at)| {
            (
                source.kind(),
                source.uuid().to_string(),
                encode_instant(*at),
            )
        })
        .collect();
    if !sources.is_empty() {
        let sources = to_json(&sources)?;
        execute::<B>(
            conn,
            sqlx::query(B::SQL.usage_drop_from).arg(sources.as_str()),
        )
        .await?;
        execute::<B>(
            conn,
            sqlx::query(B::SQL.usage_close_at).arg(sources.as_str()),
        )
        .await?;
    }
    if fresh.is_empty() {
        return Ok(());
    }
    let rows: Vec<_> = fresh
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
    let rows = to_json(&rows)?;
    execute::<B>(conn, sqlx::query(B::SQL.usage_insert).arg(rows)).await?;
    Ok(())
}

/// Deletes at most `limit` segments that ended before `before`, through the `until` index.
#[tracing::instrument(skip_all)]
pub(super) async fn prune<B: SqlBackend>(
    conn: &mut Conn<B>,
    before: Instant,
    limit: usize,
) -> Result<(), StoreError> {
    prune_before::<B>(conn, B::SQL.usage_prune, before, limit).await
}

fn to_json(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Backend(Box::new(e)))
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
