//! Recurring leases (berth): a lease request with a recurrence rule is a series of ordinary
//! leases, one per occurrence, admitted all or none in one decision; a refusal lists every
//! occurrence that does not fit. The series is renamed or cancelled as a whole here; one
//! occurrence is changed or cancelled as the lease it is.
//!
//! Occurrences never overlap one another (the rule's expansion refuses that), so each is
//! admitted against the same catalog: what one takes cannot be what another needs.

use super::create::{NewLease, create_lease, delete_lease};
use super::update::{LeaseUpdate, update_lease, update_lease_with};
use crate::catalog::Catalog;
use crate::change::{Change, record};
use crate::decide::admission::Search;
use crate::limits::{RECURRENCE_ALTERNATIVES_MAX, RECURRENCE_OCCURRENCES_MAX};
use crate::model::id::ReservationId;
use crate::model::lease::{Lease, Occurrence};
use crate::model::ledger::Window;
use crate::model::recurrence::{Recurrence, RecurrenceError};
use crate::model::time::{Instant, Span};
use crate::rejection::{Conflict, Rejection, SeriesRefusal};
use uuid::Uuid;

/// A new series: its id, its rule as sent, and one new lease per occurrence, in order (each
/// with the window [`series_windows`] gave it).
#[derive(Debug, Clone)]
pub struct NewSeries {
    /// The series' id.
    pub series_id: Uuid,
    /// The recurrence rule, as the client sent it.
    pub rule: String,
    /// The occurrences' leases, in order.
    pub occurrences: Vec<NewLease>,
}

/// The windows of the occurrences of a lease over `[start, end)` repeating by `rule`: a bad
/// rule is refused naming `recurrence`, one with too many occurrences by the limit
/// `recurrence_occurrences`.
pub fn series_windows(rule: &str, start: Instant, end: Instant) -> Result<Vec<Window>, Rejection> {
    let first = Window::new(start, end)
        .ok_or_else(|| Rejection::BadLease("End date must be later than start date.".into()))?;
    let expanded = Recurrence::parse(rule).and_then(|recurrence| recurrence.occurrences(first));
    match expanded {
        Ok(windows) => Ok(windows),
        Err(RecurrenceError::Bad(text)) => Err(Rejection::BadLease(format!("recurrence: {text}"))),
        Err(RecurrenceError::TooMany { max, got }) => Err(Rejection::LimitExceeded {
            limit: "recurrence_occurrences",
            max: u64::from(max),
            got: u64::from(got),
        }),
    }
}

/// Admits every occurrence of `new` or none. An occurrence refused for lack of capacity is
/// listed (with, for the first [`RECURRENCE_ALTERNATIVES_MAX`], the counter-offer `search`
/// allows: [`Search::NONE`] under the writer lock); any other refusal of an occurrence refuses
/// the series as it is.
pub fn create_series(
    catalog: &Catalog,
    new: &NewSeries,
    now: Instant,
    search: &Search<'_>,
) -> Result<(Vec<Change>, Vec<Lease>), Rejection> {
    let count = u32::try_from(new.occurrences.len()).unwrap_or(u32::MAX);
    assert!(count > 0, "a series has its first occurrence");
    assert!(
        count <= RECURRENCE_OCCURRENCES_MAX,
        "the expansion is bounded"
    );
    debug_assert!(
        new.occurrences.windows(2).all(|p| p[0].end <= p[1].start),
        "occurrences are in order and do not overlap"
    );
    let mut changes = Vec::new();
    let mut leases = Vec::new();
    let mut conflicts = Vec::new();
    for (idx, occurrence) in new.occurrences.iter().enumerate() {
        let index = u32::try_from(idx).expect("invariant: bounded by RECURRENCE_OCCURRENCES_MAX");
        let searched = match conflicts.len() < RECURRENCE_ALTERNATIVES_MAX {
            true => search,
            false => &Search::NONE,
        };
        match create_lease(catalog, occurrence, now, searched) {
            Ok((_, mut lease)) => {
                lease.set_series(Some(Occurrence {
                    series_id: new.series_id,
                    index,
                    count,
                    rule: new.rule.trim().into(),
                }));
                changes.push(record(
                    &lease,
                    "lease.create",
                    now,
                    serde_json::json!({
                        "status": "PENDING",
                        "series_id": new.series_id,
                        "occurrence": index,
                    }),
                ));
                changes.push(Change::LeaseSet {
                    id: lease.id,
                    lease: Some(Box::new(lease.clone())),
                });
                leases.push(lease);
            }
            Err(Rejection::DoesNotFit(refusal)) => conflicts.push(Conflict {
                index,
                window: Window::new(occurrence.start, occurrence.end)
                    .expect("invariant: an occurrence refused for capacity has a window"),
                refusal: *refusal,
            }),
            Err(other) => return Err(other),
        }
    }
    if !conflicts.is_empty() {
        return Err(Rejection::SeriesDoesNotFit(Box::new(SeriesRefusal {
            occurrences: count,
            conflicts,
        })));
    }
    assert_eq!(leases.len(), new.occurrences.len(), "all or none");
    Ok((changes, leases))
}

fn occurrences(catalog: &Catalog, series_id: Uuid) -> Result<Vec<&Lease>, Rejection> {
    let leases: Vec<&Lease> = catalog.series(series_id).collect();
    match leases.is_empty() {
        true => Err(Rejection::SeriesNotFound(series_id)),
        false => Ok(leases),
    }
}

/// Cancels every occurrence left of a series: each is deleted as a lease is, releasing what
/// it holds, in one decision.
pub fn delete_series(
    catalog: &Catalog,
    series_id: Uuid,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let mut changes = Vec::new();
    for lease in occurrences(catalog, series_id)? {
        changes.extend(delete_lease(catalog, lease.id, now)?);
    }
    Ok(changes)
}

/// Renames every occurrence left of a series, in one decision.
pub fn rename_series(
    catalog: &Catalog,
    series_id: Uuid,
    name: &str,
    now: Instant,
) -> Result<(Vec<Change>, Vec<Lease>), Rejection> {
    let update = LeaseUpdate {
        name: Some(name.to_owned()),
        ..LeaseUpdate::default()
    };
    let mut changes = Vec::new();
    let mut leases = Vec::new();
    for lease in occurrences(catalog, series_id)? {
        let (changed, renamed) = update_lease(catalog, lease.id, &update, now, &Search::NONE)?;
        changes.extend(changed);
        leases.push(renamed);
    }
    Ok((changes, leases))
}

/// Which way and how far a whole series moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shift {
    /// Later by this much.
    Later(Span),
    /// Earlier by this much.
    Earlier(Span),
}

impl Shift {
    fn apply(self, at: Instant) -> Instant {
        match self {
            Shift::Later(span) => at + span,
            Shift::Earlier(span) => at - span,
        }
    }
}

/// Moves every occurrence left of a series by `shift`, re-admitting each all or none in one
/// decision (the series' own holds set aside, as they move together). Every occurrence must
/// be pending, and they must not overlap one another (each may have been changed alone);
/// a refusal lists the occurrences that do not fit where they would go.
pub fn shift_series(
    catalog: &Catalog,
    series_id: Uuid,
    shift: Shift,
    now: Instant,
    search: &Search<'_>,
) -> Result<(Vec<Change>, Vec<Lease>), Rejection> {
    let leases = occurrences(catalog, series_id)?;
    if leases
        .iter()
        .any(|l| l.started() || !matches!(l.status, crate::model::lease::LeaseStatus::Pending))
    {
        return Err(Rejection::CantUpdate(
            "Only a series whose occurrences are all pending moves whole; change the others one by one"
                .into(),
        ));
    }
    let mut windows: Vec<(Instant, Instant)> = leases.iter().map(|l| (l.start, l.end)).collect();
    windows.sort_unstable();
    if windows.windows(2).any(|p| p[1].0 < p[0].1) {
        return Err(Rejection::CantUpdate(
            "Occurrences of this series overlap one another; move them one by one".into(),
        ));
    }
    let own: Vec<ReservationId> = leases
        .iter()
        .flat_map(|l| l.reservations.iter().map(|r| r.id))
        .collect();
    let mut changes = Vec::new();
    let mut moved = Vec::new();
    let mut conflicts = Vec::new();
    for lease in &leases {
        let update = LeaseUpdate {
            start: Some(shift.apply(lease.start)),
            end: Some(shift.apply(lease.end)),
            ..LeaseUpdate::default()
        };
        let searched = match conflicts.len() < RECURRENCE_ALTERNATIVES_MAX {
            true => search,
            false => &Search::NONE,
        };
        match update_lease_with(catalog, lease.id, &update, now, searched, &own) {
            Ok((changed, lease)) => {
                changes.extend(changed);
                moved.push(lease);
            }
            Err(Rejection::DoesNotFit(refusal)) => conflicts.push(Conflict {
                index: lease.series().map_or(0, |o| o.index),
                window: Window::new(shift.apply(lease.start), shift.apply(lease.end)).ok_or_else(
                    || Rejection::BadLease("the series moves beyond the end of time".into()),
                )?,
                refusal: *refusal,
            }),
            Err(other) => return Err(other),
        }
    }
    if !conflicts.is_empty() {
        return Err(Rejection::SeriesDoesNotFit(Box::new(SeriesRefusal {
            occurrences: u32::try_from(leases.len()).unwrap_or(u32::MAX),
            conflicts,
        })));
    }
    Ok((changes, moved))
}
