//! Recurring leases (berth): create a series (one lease per occurrence, admitted all or none
//! in one decision), rename it, cancel it. A refused series' nearest windows are searched off
//! the writer lock, over a snapshot, as a counter-offer is.

use crate::error::AppError;
use crate::leases::{CreateLease, SEARCH_HORIZON_DEFAULT, horizon_end};
use crate::service::Berth;
use berth_core::decide::admission::Search;
use berth_core::decide::lease::{self as decide, NewSeries, Shift};
use berth_core::model::lease::Lease;
use berth_core::{Catalog, Rejection};
use uuid::Uuid;

/// A recurring lease to create: the lease of its first occurrence and its rule.
#[derive(Debug, Clone)]
pub struct CreateSeries {
    /// The first occurrence, as a lease request.
    pub lease: CreateLease,
    /// The recurrence rule (an RFC 5545 RRULE subset).
    pub rule: String,
}

/// The occurrences left of a series, in order (an idempotent create's replay); `None` when none
/// is left.
fn find_series(catalog: &Catalog, id: Uuid) -> Option<Vec<Lease>> {
    let leases: Vec<Lease> = catalog.series(id).cloned().collect();
    (!leases.is_empty()).then_some(leases)
}

/// The id of a created series, which the key's record keeps.
// The idempotent write names the created object's type, here the occurrences as a `Vec`.
#[allow(clippy::ptr_arg)]
fn series_id(leases: &Vec<Lease>) -> Uuid {
    leases
        .first()
        .and_then(|lease| lease.series())
        .map(|occurrence| occurrence.series_id)
        .expect("invariant: a created series has its first occurrence")
}

impl Berth {
    /// Admits every occurrence of a recurring lease or none and returns them, in order (with
    /// an idempotency key seen before: the occurrences that key's first request created, as
    /// they are now).
    ///
    /// The rule is expanded and checked first (a bad one is refused naming `recurrence`), then
    /// admitted as [`Berth::create_lease`] admits a lease: a heavy series is tried over a
    /// snapshot first, and the decision under the writer lock searches nothing. A refusal
    /// lists the occurrences that do not fit; their nearest windows are searched after the
    /// lock.
    pub async fn create_series(&self, cmd: CreateSeries) -> Result<Vec<Lease>, AppError> {
        decide::check_limits(cmd.lease.reservations.iter())?;
        decide::check_horizon(cmd.lease.horizon)?;
        let new = self.new_series(&cmd)?;
        let last_start = new.occurrences.last().map_or(cmd.lease.start, |l| l.start);
        let horizon = horizon_end(last_start, cmd.lease.horizon);
        let now = self.now();
        let key = cmd.lease.idempotency;
        let weight = decide::admission_weight(cmd.lease.reservations.iter())
            .saturating_mul(new.occurrences.len() as u64);
        let fits = match weight <= berth_core::limits::ADMISSION_IN_PLACE_MAX {
            true => Ok(()),
            false => {
                let asked = new.clone();
                self.read_blocking(move |catalog| {
                    decide::create_series(catalog, &asked, now, &Search::NONE).map(|_| ())
                })
                .await?
            }
        };
        let fits = match fits {
            Err(_) if self.seen(key.as_ref()).await? => Ok(()),
            other => other,
        };
        let decided = new.clone();
        let result = match fits {
            Ok(()) => {
                self.write_once(key, find_series, series_id, move |catalog, now| {
                    decide::create_series(catalog, &decided, now, &Search::NONE)
                })
                .await
            }
            Err(rejection) => Err(AppError::Rejected(rejection)),
        };
        let leases = match result {
            Err(AppError::Rejected(rejection @ Rejection::SeriesDoesNotFit(_))) => {
                return Err(self.with_alternatives(rejection, new, horizon).await);
            }
            other => other?,
        };
        self.lifecycle.notify_one();
        Ok(leases)
    }

    /// The new series `cmd` asks for, with fresh ids: one new lease per occurrence, each
    /// `before_end` as far into its window as the first occurrence's.
    fn new_series(&self, cmd: &CreateSeries) -> Result<NewSeries, Rejection> {
        let first = &cmd.lease;
        let windows = decide::series_windows(&cmd.rule, first.start, first.end)?;
        let occurrences = windows
            .iter()
            .map(|window| {
                let mut new = self.new_lease(first);
                let shift = window.start().since(first.start);
                new.start = window.start();
                new.end = window.end();
                new.before_end = first.before_end.map(|at| at + shift);
                new
            })
            .collect();
        Ok(NewSeries {
            series_id: self.new_uuid(),
            rule: cmd.rule.clone(),
            occurrences,
        })
    }

    /// `rejection`, with the nearest window of each conflicting occurrence searched over a
    /// snapshot within the search budget. When the snapshot now admits the series (the
    /// catalog moved), the refusal made under the lock stands as it is.
    async fn with_alternatives(
        &self,
        rejection: Rejection,
        new: NewSeries,
        horizon: berth_core::Instant,
    ) -> AppError {
        let now = self.now();
        let searched = self
            .search(move |catalog, stop| {
                let search = crate::search::search_until(horizon, stop);
                decide::create_series(catalog, &new, now, &search).err()
            })
            .await;
        match searched {
            Ok(Some(refusal @ Rejection::SeriesDoesNotFit(_))) => AppError::Rejected(refusal),
            Ok(_) => AppError::Rejected(rejection),
            Err(error) => error,
        }
    }

    /// Cancels every occurrence left of a series, releasing what they hold.
    pub async fn delete_series(&self, id: Uuid) -> Result<(), AppError> {
        self.write(move |catalog, now| decide::delete_series(catalog, id, now).map(|c| (c, ())))
            .await?;
        self.lifecycle.notify_one();
        Ok(())
    }

    /// Renames every occurrence left of a series; returns them, in order.
    pub async fn rename_series(&self, id: Uuid, name: String) -> Result<Vec<Lease>, AppError> {
        self.write(move |catalog, now| decide::rename_series(catalog, id, &name, now))
            .await
    }

    /// Moves every occurrence left of a series by `shift`, all or none; a refusal's nearest
    /// windows are searched after the writer lock, up to `SEARCH_HORIZON_DEFAULT` past the
    /// last occurrence's new start.
    pub async fn shift_series(&self, id: Uuid, shift: Shift) -> Result<Vec<Lease>, AppError> {
        let result = self
            .write(move |catalog, now| decide::shift_series(catalog, id, shift, now, &Search::NONE))
            .await;
        let leases = match result {
            Err(AppError::Rejected(rejection @ Rejection::SeriesDoesNotFit(_))) => {
                let now = self.now();
                let searched = self
                    .search(move |catalog, stop| {
                        let last = catalog.series(id).map(|l| l.start).max().unwrap_or(now);
                        let horizon = horizon_end(last, SEARCH_HORIZON_DEFAULT);
                        let search = crate::search::search_until(shift_end(shift, horizon), stop);
                        decide::shift_series(catalog, id, shift, now, &search).err()
                    })
                    .await;
                return Err(match searched {
                    Ok(Some(refusal @ Rejection::SeriesDoesNotFit(_))) => {
                        AppError::Rejected(refusal)
                    }
                    Ok(_) => AppError::Rejected(rejection),
                    Err(error) => error,
                });
            }
            other => other?,
        };
        self.lifecycle.notify_one();
        Ok(leases)
    }

    /// The occurrences left of a series, in order, each rendered with `render`.
    pub async fn series<T>(
        &self,
        id: Uuid,
        mut render: impl FnMut(&Catalog, &Lease) -> T,
    ) -> Result<Vec<T>, AppError> {
        self.read(|catalog| catalog.series(id).map(|l| render(catalog, l)).collect())
            .await
    }
}

/// Where a search horizon that ends at `horizon` lies once the series moved by `shift`.
fn shift_end(shift: Shift, horizon: berth_core::Instant) -> berth_core::Instant {
    match shift {
        Shift::Later(span) => horizon + span,
        Shift::Earlier(span) => horizon - span,
    }
}
