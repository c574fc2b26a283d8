//! Usage reports (berth): unit-hours by project and resource class over a period, added up from
//! the closed usage history the store keeps and the open usage of the catalog as of the same
//! commit ([`berth_core::query::usage`]).

use crate::error::AppError;
use crate::service::Berth;
use berth_core::limits::{USAGE_PERIOD_DAYS_MAX, USAGE_RETENTION_DAYS, USAGE_SEGMENTS_MAX};
use berth_core::model::ledger::Window;
use berth_core::model::usage::UsageSegment;
use berth_core::query::leases::find;
use berth_core::query::usage::{
    ClassUtilization, UsageTotals, lease_utilization, open, open_of_lease, report,
};
use berth_core::{LeaseId, Rejection, ReservationId, ResourceClass, Span};
use std::collections::{BTreeMap, BTreeSet};

/// A usage report: each project's and class's totals.
pub type UsageReport = BTreeMap<(String, ResourceClass), UsageTotals>;

impl Berth {
    /// The usage report over `period`, as far as now; `project` keeps one project's rows.
    /// Refused (`LimitExceeded`) for a period longer than [`USAGE_PERIOD_DAYS_MAX`] days, or
    /// one whose history holds more than [`USAGE_SEGMENTS_MAX`] segments (the work of one
    /// report is bounded), or one that begins more than [`USAGE_RETENTION_DAYS`] days ago (the
    /// history no longer holds all of it).
    pub async fn usage_report(
        &self,
        period: Window,
        project: Option<&str>,
    ) -> Result<UsageReport, AppError> {
        let days = |span: Span| {
            let day = Span::from_days(1).as_micros();
            ((span.as_micros() + day - 1) / day).unsigned_abs()
        };
        if period.duration() > Span::from_days(USAGE_PERIOD_DAYS_MAX) {
            return Err(AppError::Rejected(Rejection::LimitExceeded {
                limit: "usage_period_days",
                max: USAGE_PERIOD_DAYS_MAX.unsigned_abs(),
                got: days(period.duration()),
            }));
        }
        let now = self.now();
        if period.start() < now - Span::from_days(USAGE_RETENTION_DAYS) {
            return Err(AppError::Rejected(Rejection::LimitExceeded {
                limit: "usage_retention_days",
                max: USAGE_RETENTION_DAYS.unsigned_abs(),
                got: days(now.since(period.start())),
            }));
        }
        // The open usage of a current catalog, then the closed segments of the commits up to
        // it: whatever commits meanwhile, the two meet exactly. The open usage visits every
        // consumer and lease, so it is worked out over a snapshot on a blocking thread: it holds
        // no lock a commit waits for and no runtime worker.
        let (seq, open) = self
            .read_blocking(move |catalog| {
                (catalog.seq(), open(catalog, period, USAGE_SEGMENTS_MAX))
            })
            .await?;
        let open = open.ok_or_else(|| too_many(USAGE_SEGMENTS_MAX + 1))?;
        let segments = self.with_closed(open, period, seq).await?;
        Ok(report(&segments, period, now, project))
    }

    /// `open` (usage of a catalog at `seq`) with the closed segments of the commits up to
    /// `seq` that overlap `period`; refused when they come to more than [`USAGE_SEGMENTS_MAX`].
    async fn with_closed(
        &self,
        mut segments: Vec<UsageSegment>,
        period: Window,
        seq: u64,
    ) -> Result<Vec<UsageSegment>, AppError> {
        let left = USAGE_SEGMENTS_MAX.saturating_sub(segments.len());
        let closed = self.store.usage_segments(period, seq, left + 1).await?;
        if closed.len() > left {
            return Err(too_many(segments.len() + closed.len()));
        }
        segments.extend(closed);
        Ok(segments)
    }
}

/// The refusal of a report or utilization whose history holds `got` segments, more than
/// [`USAGE_SEGMENTS_MAX`].
fn too_many(got: usize) -> AppError {
    AppError::Rejected(Rejection::LimitExceeded {
        limit: "usage_segments",
        max: USAGE_SEGMENTS_MAX as u64,
        got: got as u64,
    })
}

/// A lease's use over time: the period counted (its window as far as now, at most
/// [`USAGE_PERIOD_DAYS_MAX`] days back) and each class's figures.
#[derive(Debug, Clone)]
pub struct LeaseUtilization {
    /// What was counted: from the lease's start until its end or now, whichever is first.
    pub period: Option<Window>,
    /// Each class the lease held or its consumers used.
    pub classes: Vec<ClassUtilization>,
}

impl Berth {
    /// How much of what lease `id` held its consumers used, over time. The lease must be one
    /// `project` sees (any, for `None`); refused as the usage report is when its history over
    /// the period holds more than [`USAGE_SEGMENTS_MAX`] segments.
    pub async fn lease_utilization(
        &self,
        id: LeaseId,
        project: Option<&str>,
    ) -> Result<LeaseUtilization, AppError> {
        let now = self.now();
        let found = self
            .read(|catalog| {
                find(catalog, id, project).map(|lease| {
                    let reservations: BTreeSet<ReservationId> =
                        lease.reservations.iter().map(|r| r.id).collect();
                    let oldest = now - Span::from_days(USAGE_PERIOD_DAYS_MAX);
                    let period = Window::new(lease.start.max(oldest), lease.end.min(now));
                    (
                        catalog.seq(),
                        reservations,
                        period,
                        open_of_lease(catalog, lease),
                    )
                })
            })
            .await?;
        let (seq, reservations, period, open) =
            found.ok_or(AppError::Rejected(Rejection::LeaseNotFound(id)))?;
        let Some(period) = period else {
            return Ok(LeaseUtilization {
                period: None,
                classes: Vec::new(),
            });
        };
        let segments = self.with_closed(open, period, seq).await?;
        Ok(LeaseUtilization {
            period: Some(period),
            classes: lease_utilization(&segments, id, &reservations, period),
        })
    }
}
