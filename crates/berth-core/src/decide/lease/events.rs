//! Lifecycle events: firing a due event moves the lease and its reservations along
//! PENDING -> ACTIVE -> TERMINATED; a failed action moves them to ERROR with the reason.
//!
//! Firing is idempotent: an event that is not due, already fired, or whose lease is gone
//! decides nothing, so a retried or duplicated firing (another replica got there first) is
//! harmless.

use crate::catalog::Catalog;
use crate::change::{Change, record};
use crate::decide::fence;
use crate::model::id::LeaseId;
use crate::model::lease::{
    EventKind, EventStatus, IdleRelease, Lease, ReservationSpec, ReservationStatus, Transition,
};
use crate::model::time::Instant;
use crate::rejection::Rejection;

fn mark(lease: &mut Lease, kind: EventKind, status: EventStatus, now: Instant) {
    if let Some(event) = lease.events.iter_mut().find(|e| e.kind == kind) {
        event.status = status;
        event.updated_at = now;
    }
}

fn set_reservations(lease: &mut Lease, status: ReservationStatus, now: Instant) {
    for reservation in &mut lease.reservations {
        if reservation.status != ReservationStatus::Error {
            reservation.status = status;
        }
        reservation.updated_at = now;
    }
}

/// Applies one event to `lease` and returns the record of it.
fn apply(lease: &mut Lease, kind: EventKind, now: Instant) -> Change {
    match kind {
        EventKind::StartLease => {
            // A lease in error stays in error; a start fires once.
            if let Ok(status) = lease.status.next(Transition::Start) {
                lease.status = status;
            }
            set_reservations(lease, ReservationStatus::Active, now);
        }
        EventKind::BeforeEndLease
        | EventKind::PreemptionNotice
        | EventKind::ClaimExpiry
        | EventKind::NodeClaimExpiry
        | EventKind::Lapse
        | EventKind::IdleNotice
        | EventKind::IdleRelease => {}
        EventKind::EndLease => {
            // A lease in error stays in error; an end fires once.
            if let Ok(status) = lease.status.next(Transition::End) {
                lease.status = status;
            }
            set_reservations(lease, ReservationStatus::Deleted, now);
        }
    }
    mark(lease, kind, EventStatus::Done, now);
    lease.updated_at = now;
    let due = lease.event(kind).map_or(now, |e| e.at);
    record(
        lease,
        &format!("lease.event.{}", kind.as_str()),
        now,
        serde_json::json!({"status": lease.status.as_str(), "due": due.as_micros()}),
    )
}

/// What starting or ending a lease changes in Placement: its fence goes up at the start and
/// comes down at the end (when it was up).
fn fence_changes(catalog: &Catalog, lease: &Lease, kind: EventKind, now: Instant) -> Vec<Change> {
    match kind {
        EventKind::StartLease => fence::raise(catalog, lease),
        EventKind::EndLease => fence::lower(catalog, lease, now),
        EventKind::BeforeEndLease
        | EventKind::PreemptionNotice
        | EventKind::ClaimExpiry
        | EventKind::NodeClaimExpiry
        | EventKind::Lapse
        | EventKind::IdleNotice
        | EventKind::IdleRelease => Vec::new(),
    }
}

/// Fires `kind` of lease `id` if it is due at `now` and not fired yet: a lease's own events and
/// its preemption notice ([`crate::decide::lifecycle::fire_event`] fires any due event). An
/// event due after a later one of the same lease never fires after it: firing `end_lease` first
/// fires the start and before-end events still undone, in order, so a lease whose whole window
/// passed while berth was down still goes PENDING -> ACTIVE -> TERMINATED.
pub fn fire_lease_event(
    catalog: &Catalog,
    id: LeaseId,
    kind: EventKind,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let Some(current) = catalog.lease(id) else {
        return Ok(Vec::new());
    };
    // A hold or a waitlisted lease has no lifecycle of its own but its lapse.
    if current.status.is_parked() {
        return Ok(Vec::new());
    }
    if kind == EventKind::PreemptionNotice {
        return Ok(notice(catalog, current, now));
    }
    if matches!(kind, EventKind::IdleNotice | EventKind::IdleRelease) {
        return Ok(idle(catalog, current, kind, now));
    }
    let due = current
        .event(kind)
        .is_some_and(|e| e.status == EventStatus::Undone && e.at <= now);
    if !due {
        return Ok(Vec::new());
    }
    let mut lease = current.clone();
    let mut changes = Vec::new();
    let order = [
        EventKind::StartLease,
        EventKind::BeforeEndLease,
        EventKind::EndLease,
    ];
    let upto = order.iter().position(|k| *k == kind).unwrap_or(0);
    let mut fired = Vec::new();
    for earlier in &order[..=upto] {
        let undone = lease
            .event(*earlier)
            .is_some_and(|e| e.status == EventStatus::Undone);
        if undone && (*earlier == kind || *earlier == EventKind::StartLease) {
            changes.push(apply(&mut lease, *earlier, now));
            fired.push(*earlier);
        } else if undone && kind == EventKind::EndLease {
            // The warning is moot once the lease ends.
            mark(&mut lease, *earlier, EventStatus::Done, now);
        }
    }
    // A lease that starts and ends in one decision never raises its fence.
    let started = fired.contains(&EventKind::StartLease);
    let ended = fired.contains(&EventKind::EndLease);
    match (started, ended) {
        (true, false) => {
            let evicted = fence::evictions(catalog, &lease);
            changes.extend(fence::preemption_records(
                &lease,
                &evicted,
                "consumer.evicted",
                now,
            ));
            changes.extend(evicted.into_iter().map(|uuid| Change::ConsumerSet {
                uuid,
                consumer: None,
            }));
            lease.preemption_noticed = true;
            changes.extend(fence_changes(catalog, &lease, EventKind::StartLease, now));
        }
        (false, true) => changes.extend(fence_changes(catalog, &lease, EventKind::EndLease, now)),
        _ => {}
    }
    changes.push(Change::LeaseSet {
        id,
        lease: Some(Box::new(lease)),
    });
    Ok(changes)
}

/// Records that the action of `kind` failed for good: the event and the lease go to ERROR with
/// `reason`. The lease keeps what it holds until it ends or is deleted.
pub fn fail_event(
    catalog: &Catalog,
    id: LeaseId,
    kind: EventKind,
    reason: &str,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    let Some(current) = catalog.lease(id) else {
        return Ok(Vec::new());
    };
    let mut lease = current.clone();
    mark(&mut lease, kind, EventStatus::Error, now);
    lease.status = lease
        .status
        .next(Transition::Fail)
        .expect("invariant: any lease can fail");
    lease.set_status_reason(Some(format!("{}: {reason}", kind.as_str()).into()));
    lease.updated_at = now;
    for reservation in &mut lease.reservations {
        reservation.status = ReservationStatus::Error;
        reservation.updated_at = now;
    }
    Ok(vec![
        record(
            &lease,
            &format!("lease.event.{}", kind.as_str()),
            now,
            serde_json::json!({"status": "ERROR", "reason": reason}),
        ),
        Change::LeaseSet {
            id,
            lease: Some(Box::new(lease)),
        },
    ])
}

/// Tells the preemptible consumers a lease will evict at its start, once, when the notice is
/// due.
fn notice(catalog: &Catalog, current: &Lease, now: Instant) -> Vec<Change> {
    if current.notice_at().is_none_or(|at| at > now) {
        return Vec::new();
    }
    let mut lease = current.clone();
    lease.preemption_noticed = true;
    let evicted = fence::evictions(catalog, &lease);
    let mut changes =
        fence::preemption_records(&lease, &evicted, "consumer.preemption_notice", now);
    changes.push(Change::LeaseSet {
        id: lease.id,
        lease: Some(Box::new(lease)),
    });
    changes
}

/// The unconsumed-lease release of a started lease, when `kind` is its next step and due:
/// the notice records `lease.idle_notice` (with when the release comes); the release ends the
/// lease now, as its end event would, and records `lease.idle_release` with the reason. A lease
/// a consumer presents now is marked consumed instead, and neither follows.
fn idle(catalog: &Catalog, current: &Lease, kind: EventKind, now: Instant) -> Vec<Change> {
    let due = current
        .idle_due()
        .is_some_and(|(at, next)| next == kind && at <= now);
    // The start fires first (it is due no later, and sorts first at one instant).
    if !due || !current.started() {
        return Vec::new();
    }
    let mut lease = current.clone();
    let in_use = lease
        .reservations
        .iter()
        .any(|r| !catalog.consumers_of_reservation(r.id).is_empty());
    let Some(after) = lease.idle().map(|idle| idle.after) else {
        return Vec::new();
    };
    let after_s = after.as_micros() / 1_000_000;
    let release_at = lease.start + after;
    let mut changes = Vec::new();
    if in_use {
        if let Some(idle) = lease.idle_mut() {
            idle.consumed = true;
        }
    } else if kind == EventKind::IdleNotice {
        if let Some(idle) = lease.idle_mut() {
            idle.noticed = true;
        }
        changes.push(record(
            &lease,
            "lease.idle_notice",
            now,
            serde_json::json!({
                "release_at": release_at.as_micros(),
                "reason": format!("nothing has consumed the lease since it started; it is \
                    released {after_s} s after its start unless a consumer presents it"),
            }),
        ));
    } else {
        let reason = format!("released: nothing consumed it within {after_s} s of its start");
        // The window closes now; the end event fires here, the warning before it is moot.
        for event in &mut lease.events {
            if event.kind == EventKind::EndLease {
                event.at = now;
            }
        }
        lease.end = now;
        mark(
            &mut lease,
            EventKind::BeforeEndLease,
            EventStatus::Done,
            now,
        );
        changes.push(apply(&mut lease, EventKind::EndLease, now));
        changes.extend(fence_changes(catalog, &lease, EventKind::EndLease, now));
        lease.set_status_reason(Some(reason.as_str().into()));
        changes.push(record(
            &lease,
            "lease.idle_release",
            now,
            serde_json::json!({"reason": reason}),
        ));
    }
    changes.push(Change::LeaseSet {
        id: lease.id,
        lease: Some(Box::new(lease)),
    });
    changes
}

/// Puts the operator's unconsumed-lease release `policy` on each lease `changes` create (one
/// `catalog` does not hold yet) that has something a consumer can present: a host or instance
/// reservation (an address alone is never consumed through Placement).
pub fn stamp_idle_release(catalog: &Catalog, changes: &mut [Change], policy: IdleRelease) {
    for change in changes {
        if let Change::LeaseSet {
            id,
            lease: Some(lease),
        } = change
            && lease.idle().is_none()
            && catalog.lease(*id).is_none()
            && lease
                .reservations
                .iter()
                .any(|r| !matches!(r.spec, ReservationSpec::FloatingIp { .. }))
        {
            lease.set_idle(Some(policy));
        }
    }
}
