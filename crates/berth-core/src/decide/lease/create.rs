//! Creating a lease (admitted all-or-nothing, or refused with a counter-offer) and deleting one
//! (whatever it holds is released at once).

use super::checks::{bad, before_end_at, check_limits, check_name, check_window, wanted};
use crate::catalog::Catalog;
use crate::change::{Change, record};
use crate::decide::admission::{self, Granted, Search};
use crate::model::id::{LeaseId, ReservationId};
use crate::model::lease::{
    EventKind, EventStatus, Lease, LeaseEvent, LeaseEvents, LeaseStatus, Reservation,
    ReservationSpec, ReservationStatus,
};
use crate::model::ledger::Window;
use crate::model::time::{Instant, Span};
use crate::rejection::Rejection;
use uuid::Uuid;

/// A new lease, with the ids the application generated for it.
#[derive(Debug, Clone)]
pub struct NewLease {
    /// Its id.
    pub id: LeaseId,
    /// Its name.
    pub name: String,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// Window start.
    pub start: Instant,
    /// Window end.
    pub end: Instant,
    /// When `before_end_lease` fires, if not the default.
    pub before_end: Option<Instant>,
    /// Reservations with their ids.
    pub reservations: Vec<(ReservationId, ReservationSpec)>,
    /// Ids of the start, before-end and end events.
    pub event_ids: [Uuid; 3],
    /// How long before the start preemptible consumers in the way are told.
    pub notice_lead: Span,
}

/// Admits a new lease all-or-nothing, or refuses it with a counter-offer searched within
/// `search` ([`Search::NONE`] under the writer lock: the most that fits, no earliest start).
pub fn create_lease(
    catalog: &Catalog,
    new: &NewLease,
    now: Instant,
    search: &Search<'_>,
) -> Result<(Vec<Change>, Lease), Rejection> {
    create_lease_with(catalog, new, now, search, &[])
}

/// [`create_lease`], not counting the holds of the reservations in `excluding` (they are being
/// displaced in the same decision).
pub fn create_lease_with(
    catalog: &Catalog,
    new: &NewLease,
    now: Instant,
    search: &Search<'_>,
    excluding: &[ReservationId],
) -> Result<(Vec<Change>, Lease), Rejection> {
    check_limits(new.reservations.iter().map(|(_, s)| s))?;
    check_name(&new.name)?;
    let window = check_window(new.start, new.end)?;
    if window.end() <= now {
        return Err(bad("End date must be later than current date."));
    }
    catalog.policy().check(window, now)?;
    let before_end = before_end_at(window, new.before_end)?;
    let want = wanted(catalog, new.reservations.iter().map(|(_, s)| (s, None)))?;
    let granted = admission::admit_or_offer(catalog, window, &want, excluding, search)
        .map_err(|refusal| Rejection::DoesNotFit(Box::new(refusal)))?;
    let lease = assemble(new, window, before_end, &granted, now);
    let changes = vec![
        record(
            &lease,
            "lease.create",
            now,
            serde_json::json!({"status": "PENDING"}),
        ),
        Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease.clone())),
        },
    ];
    Ok((changes, lease))
}

/// The checked window of `new` and when its `before_end_lease` fires (after
/// [`create_lease_with`] accepted them).
pub(super) fn window_of(new: &NewLease) -> Result<(Window, Instant), Rejection> {
    let window = check_window(new.start, new.end)?;
    Ok((window, before_end_at(window, new.before_end)?))
}

/// The pending lease `new` is, holding what `granted` gives each reservation (nothing for one
/// it does not list).
pub(super) fn assemble(
    new: &NewLease,
    window: Window,
    before_end: Instant,
    granted: &Granted,
    now: Instant,
) -> Lease {
    let reservations = new
        .reservations
        .iter()
        .enumerate()
        .map(|(idx, (id, spec))| Reservation {
            id: *id,
            spec: spec.clone(),
            status: ReservationStatus::Pending,
            hosts: granted.hosts.get(idx).map_or(&[][..], |h| &h[..]).into(),
            floating_ips: granted
                .floating_ips
                .get(idx)
                .map_or(&[][..], |f| &f[..])
                .into(),
            missing: Box::default(),
            resources_changed: false,
            created_at: now,
            updated_at: now,
        })
        .collect();
    let event = |id: Uuid, kind: EventKind, at: Instant| LeaseEvent {
        id,
        kind,
        at,
        status: EventStatus::Undone,
        created_at: now,
        updated_at: now,
    };
    let [start_id, before_id, end_id] = new.event_ids;
    Lease {
        id: new.id,
        name: new.name.trim().into(),
        project_id: new.project_id.as_str().into(),
        user_id: new.user_id.as_str().into(),
        start: window.start(),
        end: window.end(),
        status: LeaseStatus::Pending,
        degraded: false,
        reservations,
        events: LeaseEvents::Three([
            event(start_id, EventKind::StartLease, window.start()),
            event(before_id, EventKind::BeforeEndLease, before_end),
            event(end_id, EventKind::EndLease, window.end()),
        ]),
        notice_lead: new.notice_lead,
        preemption_noticed: false,
        lapses_at: None,
        rare: Default::default(),
        created_at: now,
        updated_at: now,
    }
}

pub(super) fn lease(catalog: &Catalog, id: LeaseId) -> Result<&Lease, Rejection> {
    catalog.lease(id).ok_or(Rejection::LeaseNotFound(id))
}

/// Deletes a lease: whatever it holds is released at once.
pub fn delete_lease(
    catalog: &Catalog,
    id: LeaseId,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let current = lease(catalog, id)?;
    let mut changes = vec![record(
        current,
        "lease.delete",
        now,
        serde_json::json!({"status": current.status.as_str()}),
    )];
    if current.started() && !current.ended() {
        changes.extend(crate::decide::fence::lower(catalog, current, now));
    }
    changes.push(Change::LeaseSet { id, lease: None });
    Ok(changes)
}
