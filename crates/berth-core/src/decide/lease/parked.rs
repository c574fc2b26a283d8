//! Holds and waitlisted leases (berth): leases parked in `HELD` (what an availability search
//! offered, fenced in the ledger for a while) or `WAITING` (a lease that did not fit, kept
//! holding nothing). A hold is turned into a lease by `hold_id` in one decision; a waitlisted
//! lease is admitted as asked when capacity frees, in first-come order; either lapses once at
//! its `lapses_at`.

use super::checks::{bad, wanted};
use super::create::{NewLease, assemble, create_lease, create_lease_with, window_of};
use crate::catalog::Catalog;
use crate::change::{Change, record};
use crate::decide::admission::{self, Search};
use crate::limits;
use crate::model::id::{LeaseId, ReservationId};
use crate::model::lease::{Lease, LeaseEvents, LeaseStatus, ReservationSpec, Transition};
use crate::model::ledger::Window;
use crate::model::time::Instant;
use crate::rejection::{Refusal, Rejection};

/// Holds what `new` asks for over its window until `lapses_at` (capped at the window's end):
/// admission as asked (no search: this runs under the writer lock), then the lease is parked
/// in `HELD`, with no lifecycle events of its own. Refused when the project already keeps
/// [`limits::HOLDS_PER_PROJECT_MAX`] open holds.
pub fn create_hold(
    catalog: &Catalog,
    new: &NewLease,
    lapses_at: Instant,
    now: Instant,
) -> Result<(Vec<Change>, Lease), Rejection> {
    if catalog.open_holds(&new.project_id) >= limits::HOLDS_PER_PROJECT_MAX {
        return Err(Rejection::TooManyHolds {
            max: limits::HOLDS_PER_PROJECT_MAX,
        });
    }
    let (_, mut lease) = create_lease(catalog, new, now, &Search::NONE)?;
    lease.status = LeaseStatus::Held;
    lease.events = LeaseEvents::default();
    lease.lapses_at = Some(lapses_at.min(lease.end));
    let details = serde_json::json!({
        "status": lease.status.as_str(),
        "lapses_at": lease.lapses_at.map(Instant::as_micros),
    });
    let changes = vec![
        record(&lease, "lease.hold", now, details),
        Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease.clone())),
        },
    ];
    Ok((changes, lease))
}

/// Turns hold `hold` into the lease `new`, in one decision: the lease is admitted as asked
/// without counting the hold, and the hold is removed, so the held capacity is never free in
/// between. The lease must ask for what was held or less (a window within the hold's, as many
/// reservations, each of the same kind, filters and size with no larger amount), else
/// [`Rejection::HoldMismatch`]; a hold of another project, or a lease that is no hold, is a bad
/// `hold_id`.
pub fn create_lease_from_hold(
    catalog: &Catalog,
    new: &NewLease,
    hold: LeaseId,
    now: Instant,
) -> Result<(Vec<Change>, Lease), Rejection> {
    let held = catalog
        .lease(hold)
        .filter(|l| *l.project_id == *new.project_id)
        .ok_or_else(|| bad(format!("hold_id: no hold {hold} in this project")))?;
    match held.status {
        LeaseStatus::Held => {}
        LeaseStatus::Expired => {
            return Err(Rejection::HoldMismatch(format!(
                "hold_id: the hold {hold} lapsed"
            )));
        }
        _ => return Err(bad(format!("hold_id: lease {hold} is not a hold"))),
    }
    within(held, new)?;
    let excluding: Vec<ReservationId> = held.reservations.iter().map(|r| r.id).collect();
    let (created, lease) = create_lease_with(catalog, new, now, &Search::NONE, &excluding)?;
    let mut changes = vec![
        record(
            held,
            "lease.hold.used",
            now,
            serde_json::json!({"lease_id": lease.id.uuid()}),
        ),
        Change::LeaseSet {
            id: held.id,
            lease: None,
        },
    ];
    changes.extend(created);
    Ok((changes, lease))
}

/// Whether `new` asks for what `held` holds, or less.
fn within(held: &Lease, new: &NewLease) -> Result<(), Rejection> {
    if new.start < held.start || new.end > held.end {
        return Err(Rejection::HoldMismatch(
            "the lease's window is not within the hold's".into(),
        ));
    }
    if new.reservations.len() != held.reservations.len() {
        return Err(Rejection::HoldMismatch(format!(
            "the hold has {} reservations, the lease asks for {}",
            held.reservations.len(),
            new.reservations.len()
        )));
    }
    for (idx, (held, (_, asked))) in held.reservations.iter().zip(&new.reservations).enumerate() {
        if !spec_within(&held.spec, asked) {
            return Err(Rejection::HoldMismatch(format!(
                "reservation {idx} asks for more than, or other than, the hold's"
            )));
        }
    }
    Ok(())
}

/// Whether `asked` is `held` with no larger amount.
fn spec_within(held: &ReservationSpec, asked: &ReservationSpec) -> bool {
    match (held, asked) {
        (
            ReservationSpec::Host {
                max: held_max,
                hypervisor_properties: held_hyp,
                resource_properties: held_res,
                ..
            },
            ReservationSpec::Host {
                max,
                hypervisor_properties,
                resource_properties,
                ..
            },
        ) => {
            max <= held_max && hypervisor_properties == held_hyp && resource_properties == held_res
        }
        (
            ReservationSpec::Instance {
                amount: held_amount,
                ..
            },
            ReservationSpec::Instance { amount, .. },
        ) => {
            let resized = |spec: &ReservationSpec| match spec {
                ReservationSpec::Instance {
                    vcpus,
                    memory_mb,
                    disk_gb,
                    affinity,
                    resource_properties,
                    ..
                } => Some((
                    *vcpus,
                    *memory_mb,
                    *disk_gb,
                    *affinity,
                    resource_properties.clone(),
                )),
                _ => None,
            };
            amount <= held_amount && resized(held) == resized(asked)
        }
        (
            ReservationSpec::FloatingIp {
                network_id: held_net,
                amount: held_amount,
                required_floatingips: held_required,
            },
            ReservationSpec::FloatingIp {
                network_id,
                amount,
                required_floatingips,
            },
        ) => {
            amount <= held_amount
                && network_id == held_net
                && required_floatingips
                    .iter()
                    .all(|fip| held_required.contains(fip))
        }
        _ => false,
    }
}

/// Creates `new` as asked or, when it does not fit, keeps it waitlisted until `wait_until`
/// (capped at its end): `WAITING`, holding nothing, with the refusal (the most that fits; the
/// counter-offer is searched after the lock) beside it. Every other refusal stands.
pub fn create_or_wait(
    catalog: &Catalog,
    new: &NewLease,
    wait_until: Instant,
    now: Instant,
) -> Result<(Vec<Change>, Lease, Option<Refusal>), Rejection> {
    let refusal = match create_lease(catalog, new, now, &Search::NONE) {
        Ok((changes, lease)) => return Ok((changes, lease, None)),
        Err(Rejection::DoesNotFit(refusal)) => refusal,
        Err(other) => return Err(other),
    };
    let (window, before_end) = window_of(new)?;
    let mut lease = assemble(new, window, before_end, &admission::Granted::default(), now);
    lease.status = LeaseStatus::Waiting;
    lease.lapses_at = Some(wait_until.min(lease.end));
    let details = serde_json::json!({
        "status": lease.status.as_str(),
        "wait_until": lease.lapses_at.map(Instant::as_micros),
    });
    let changes = vec![
        record(&lease, "lease.create", now, details),
        Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease.clone())),
        },
    ];
    Ok((changes, lease, Some(*refusal)))
}

/// Admits the first waitlisted lease that fits now, in first-come order (by creation), trying
/// at most `budget` of them; returns its changes (none when none fits) and the attempts made.
///
/// The order is fair: a lease is tried only when no earlier waitlisted lease whose window
/// overlaps its own was tried and did not fit, so a later, smaller request never takes
/// capacity ahead of a larger one waiting for the same time; leases waiting for other times
/// pass freely. A lease that fits but would take its project past its budget
/// ([`crate::decide::budget::takes`]) keeps waiting without holding up the others: what stops
/// it is its own project's budget, not capacity anyone else may take first. Each attempt is
/// admission as asked, no search: this runs under the writer lock, after a batch's decisions,
/// and looks at the first [`crate::limits::WAITLIST_SCAN_MAX`] waitlisted leases only.
pub fn admit_waiting(catalog: &Catalog, now: Instant, budget: usize) -> (Vec<Change>, usize) {
    let mut blocked: Vec<Window> = Vec::new();
    let mut attempts = 0;
    for lease in catalog.waiting().take(crate::limits::WAITLIST_SCAN_MAX) {
        if attempts >= budget {
            break;
        }
        let window = lease.window();
        if window.end() <= now || lease.lapses_at.is_some_and(|at| at <= now) {
            // Lapses at its due event.
            continue;
        }
        if blocked.iter().any(|w| w.overlaps(&window)) {
            blocked.push(window);
            continue;
        }
        attempts += 1;
        match admit(catalog, lease, window, now) {
            Some(changes) if crate::decide::budget::takes(catalog, &changes, now) => {
                return (changes, attempts);
            }
            Some(_) => {}
            None => blocked.push(window),
        }
    }
    (Vec::new(), attempts)
}

/// Admits the waitlisted `lease` as asked over `window`, when it fits.
fn admit(catalog: &Catalog, lease: &Lease, window: Window, now: Instant) -> Option<Vec<Change>> {
    let want = wanted(catalog, lease.reservations.iter().map(|r| (&r.spec, None))).ok()?;
    let granted = admission::admit_or_offer(catalog, window, &want, &[], &Search::NONE).ok()?;
    let mut admitted = lease.clone();
    admitted.status = lease.status.next(Transition::Admit).ok()?;
    admitted.lapses_at = None;
    for (idx, reservation) in admitted.reservations.iter_mut().enumerate() {
        reservation.hosts = granted.hosts.get(idx).map_or(&[][..], |h| &h[..]).into();
        reservation.floating_ips = granted
            .floating_ips
            .get(idx)
            .map_or(&[][..], |f| &f[..])
            .into();
        reservation.updated_at = now;
    }
    admitted.updated_at = now;
    Some(vec![
        record(
            &admitted,
            "lease.admitted",
            now,
            serde_json::json!({"status": admitted.status.as_str(), "from": "WAITING"}),
        ),
        Change::LeaseSet {
            id: admitted.id,
            lease: Some(Box::new(admitted)),
        },
    ])
}

/// Lapses hold or waitlisted lease `id` when its `lapses_at` has come: a hold frees what it
/// held, a waitlisted lease stops waiting; either ends `EXPIRED` and the lifecycle record says
/// so (`lease.hold.lapsed`, `lease.wait.expired`). Idempotent: a lease not parked, not due or
/// gone decides nothing.
pub fn lapse(catalog: &Catalog, id: LeaseId, now: Instant) -> Vec<Change> {
    let Some(current) = catalog.lease(id) else {
        return Vec::new();
    };
    if !current.status.is_parked() || current.lapses_at.is_none_or(|at| at > now) {
        return Vec::new();
    }
    let Ok(status) = current.status.next(Transition::Lapse) else {
        return Vec::new();
    };
    let kind = match current.status {
        LeaseStatus::Held => "lease.hold.lapsed",
        _ => "lease.wait.expired",
    };
    let mut lease = current.clone();
    lease.status = status;
    lease.lapses_at = None;
    lease.settle(now);
    lease.updated_at = now;
    vec![
        record(
            &lease,
            kind,
            now,
            serde_json::json!({"status": lease.status.as_str(), "from": current.status.as_str()}),
        ),
        Change::LeaseSet {
            id,
            lease: Some(Box::new(lease)),
        },
    ]
}
