//! Lease updates: rename; move, extend or shorten the window; change host counts, amounts and
//! (before the start) sizes and filters. Every change that touches capacity re-admits the
//! whole lease against the ledger with its own holds set aside, so a refused update changes
//! nothing.
//!
//! Rules for started and ended leases (as Blazar): an ended lease can only be renamed; a
//! started lease cannot move its start, and its reservations keep the hosts they hold (an
//! instance reservation may only change its amount, a host reservation its counts).

use super::checks::{bad, before_end_at, check_limits, check_name, check_window, wanted};
use crate::catalog::Catalog;
use crate::change::{Change, record};
use crate::decide::admission::{self, Search};
use crate::decide::fence;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::{
    Affinity, EventKind, EventStatus, Lease, LeaseStatus, Reservation, ReservationSpec,
};
use crate::model::ledger::Window;
use crate::model::time::Instant;
use crate::rejection::Rejection;
use crate::rejection::{Refusal, Shortfall};

/// Changes to a lease (`None` keeps the current value).
#[derive(Debug, Clone, Default)]
pub struct LeaseUpdate {
    /// New name.
    pub name: Option<String>,
    /// New start.
    pub start: Option<Instant>,
    /// New end.
    pub end: Option<Instant>,
    /// New before-end time.
    pub before_end: Option<Instant>,
    /// Per-reservation changes.
    pub reservations: Vec<ReservationUpdate>,
}

/// Changes to one reservation of a lease.
#[derive(Debug, Clone, Default)]
pub struct ReservationUpdate {
    /// The reservation.
    pub id: ReservationId,
    /// The resource type the client named, if any (it may not change).
    pub resource_type: Option<String>,
    /// Hosts: new minimum.
    pub min: Option<u32>,
    /// Hosts: new maximum.
    pub max: Option<u32>,
    /// Instances and addresses: new amount.
    pub amount: Option<u32>,
    /// Instances: new size.
    pub vcpus: Option<u64>,
    /// Instances: new size.
    pub memory_mb: Option<u64>,
    /// Instances: new size.
    pub disk_gb: Option<u64>,
    /// Instances: new affinity.
    pub affinity: Option<Affinity>,
    /// New host filter.
    pub hypervisor_properties: Option<String>,
    /// New resource filter.
    pub resource_properties: Option<String>,
}

fn changes_capacity(update: &LeaseUpdate) -> bool {
    update.start.is_some()
        || update.end.is_some()
        || update.before_end.is_some()
        || !update.reservations.is_empty()
}

/// The reservation's spec with `change` applied; refuses what may not change.
fn changed_spec(
    reservation: &Reservation,
    change: &ReservationUpdate,
    started: bool,
) -> Result<ReservationSpec, Rejection> {
    if let Some(kind) = &change.resource_type
        && kind != reservation.spec.resource_type()
    {
        return Err(Rejection::CantUpdate(format!(
            "Cannot change the resource_type of reservation {} from {} to {kind}",
            reservation.id,
            reservation.spec.resource_type()
        )));
    }
    let mut spec = reservation.spec.clone();
    let refuse = |field: &str| {
        Err(Rejection::CantUpdate(format!(
            "{field} of reservation {} cannot change after the lease started",
            reservation.id
        )))
    };
    match &mut spec {
        ReservationSpec::Host {
            min,
            max,
            hypervisor_properties,
            resource_properties,
            ..
        } => {
            *min = change.min.unwrap_or(*min);
            *max = change.max.unwrap_or(*max);
            for (field, new, old) in [
                (
                    "hypervisor_properties",
                    &change.hypervisor_properties,
                    hypervisor_properties,
                ),
                (
                    "resource_properties",
                    &change.resource_properties,
                    resource_properties,
                ),
            ] {
                if let Some(new) = new.as_ref().filter(|n| ***n != **old) {
                    if started {
                        return refuse(field);
                    }
                    *old = new.as_str().into();
                }
            }
        }
        ReservationSpec::Instance {
            vcpus,
            memory_mb,
            disk_gb,
            amount,
            affinity,
            resource_properties,
        } => {
            let size_changes = change.vcpus.is_some_and(|v| v != *vcpus)
                || change.memory_mb.is_some_and(|v| v != *memory_mb)
                || change.disk_gb.is_some_and(|v| v != *disk_gb)
                || change.affinity.is_some_and(|v| v != *affinity)
                || change
                    .resource_properties
                    .as_ref()
                    .is_some_and(|v| **v != **resource_properties);
            if started && size_changes {
                return refuse("Only the amount");
            }
            *vcpus = change.vcpus.unwrap_or(*vcpus);
            *memory_mb = change.memory_mb.unwrap_or(*memory_mb);
            *disk_gb = change.disk_gb.unwrap_or(*disk_gb);
            *affinity = change.affinity.unwrap_or(*affinity);
            *amount = change.amount.unwrap_or(*amount);
            if let Some(text) = &change.resource_properties {
                *resource_properties = text.as_str().into();
            }
        }
        ReservationSpec::FloatingIp { amount, .. } => {
            *amount = change.amount.unwrap_or(*amount);
        }
    }
    Ok(spec)
}

/// The new specs of every reservation of `lease`, in order (checked when they are admitted).
fn new_specs(lease: &Lease, update: &LeaseUpdate) -> Result<Vec<ReservationSpec>, Rejection> {
    for change in &update.reservations {
        if !lease.reservations.iter().any(|r| r.id == change.id) {
            return Err(bad(format!(
                "Reservation {} is not part of lease {}",
                change.id, lease.id
            )));
        }
    }
    let started = lease.started();
    let mut specs = Vec::with_capacity(lease.reservations.len());
    for reservation in &lease.reservations {
        let spec = match update.reservations.iter().find(|c| c.id == reservation.id) {
            Some(change) => changed_spec(reservation, change, started)?,
            None => reservation.spec.clone(),
        };
        specs.push(spec);
    }
    Ok(specs)
}

/// The new window, checked against the rules for started leases.
fn new_window(lease: &Lease, update: &LeaseUpdate) -> Result<Window, Rejection> {
    let start = update.start.unwrap_or(lease.start);
    if lease.started() && start != lease.start {
        return Err(bad(
            "Cannot modify the start date of already started leases",
        ));
    }
    check_window(start, update.end.unwrap_or(lease.end))
}

/// A started reservation must keep every host it holds unless it asks for less.
fn keeps_hosts(old: &Reservation, spec: &ReservationSpec, hosts: &[(ProviderId, u32)]) -> bool {
    if spec.amount() < old.spec.amount() {
        return true;
    }
    old.hosts
        .iter()
        .all(|(host, slots)| hosts.iter().any(|(h, n)| h == host && n >= slots))
}

fn moved_events(lease: &mut Lease, window: Window, before_end: Instant, now: Instant) {
    // A start moved later than the notice's lead gives notice again, at the new time.
    if !lease.started() && window.start() - lease.notice_lead > now {
        lease.preemption_noticed = false;
    }
    for event in &mut lease.events {
        let at = match event.kind {
            EventKind::StartLease => window.start(),
            EventKind::BeforeEndLease => before_end,
            EventKind::EndLease => window.end(),
            EventKind::PreemptionNotice
            | EventKind::ClaimExpiry
            | EventKind::NodeClaimExpiry
            | EventKind::Lapse
            | EventKind::IdleNotice
            | EventKind::IdleRelease => {
                continue;
            }
        };
        if at == event.at {
            continue;
        }
        if event.kind == EventKind::BeforeEndLease && event.status == EventStatus::Done && at > now
        {
            event.status = EventStatus::Undone;
        }
        event.at = at;
        event.updated_at = now;
    }
}

/// Where `before_end_lease` goes after an update: the given time, or the old offset from the
/// end kept, clamped to the start.
fn new_before_end(
    lease: &Lease,
    window: Window,
    given: Option<Instant>,
) -> Result<Instant, Rejection> {
    if given.is_some() {
        return before_end_at(window, given);
    }
    let old = lease
        .event(EventKind::BeforeEndLease)
        .map_or(lease.end, |e| e.at);
    let offset = lease.end.as_micros() - old.as_micros();
    Ok(Instant::from_micros(
        (window.end().as_micros() - offset).max(window.start().as_micros()),
    ))
}

/// Updates a lease, re-admitting it atomically when capacity is touched.
pub fn update_lease(
    catalog: &Catalog,
    id: LeaseId,
    update: &LeaseUpdate,
    now: Instant,
    search: &Search<'_>,
) -> Result<(Vec<Change>, Lease), Rejection> {
    update_lease_with(catalog, id, update, now, search, &[])
}

/// [`update_lease`], not counting the holds of the reservations in `excluding` either (they
/// move in the same decision: the other occurrences of a series shifted whole).
pub(super) fn update_lease_with(
    catalog: &Catalog,
    id: LeaseId,
    update: &LeaseUpdate,
    now: Instant,
    search: &Search<'_>,
    excluding: &[ReservationId],
) -> Result<(Vec<Change>, Lease), Rejection> {
    let current = catalog.lease(id).ok_or(Rejection::LeaseNotFound(id))?;
    if update.name.is_none() && !changes_capacity(update) {
        return Err(Rejection::NothingToUpdate);
    }
    if let Some(name) = &update.name {
        check_name(name)?;
    }
    if current.ended() && changes_capacity(update) {
        return Err(bad("Terminated leases can only be renamed"));
    }
    if changes_capacity(update)
        && matches!(
            current.status,
            LeaseStatus::Held | LeaseStatus::Waiting | LeaseStatus::Expired
        )
    {
        return Err(Rejection::CantUpdate(format!(
            "A {} lease can only be renamed: create a lease from it, or delete it",
            current.status.as_str()
        )));
    }
    let mut lease = current.clone();
    if let Some(name) = &update.name {
        lease.name = name.trim().into();
    }
    if changes_capacity(update) {
        readmit(
            catalog,
            current,
            &mut lease,
            update,
            (now, search),
            excluding,
        )?;
    }
    lease.updated_at = now;
    let mut changes = vec![record(
        &lease,
        "lease.update",
        now,
        serde_json::json!({"status": lease.status.as_str()}),
    )];
    if current.started() && !current.ended() {
        // A running lease's fence follows its new hosts and slots.
        changes.extend(fence::resync(catalog, current, &lease));
    }
    changes.push(Change::LeaseSet {
        id,
        lease: Some(Box::new(lease.clone())),
    });
    Ok((changes, lease))
}

fn readmit(
    catalog: &Catalog,
    current: &Lease,
    lease: &mut Lease,
    update: &LeaseUpdate,
    (now, search): (Instant, &Search<'_>),
    excluding: &[ReservationId],
) -> Result<(), Rejection> {
    let window = new_window(current, update)?;
    if window.end() <= now && update.end.is_some() {
        return Err(bad("End date must be later than current date."));
    }
    if window != current.window() {
        catalog.policy().check(window, now)?;
    }
    let before_end = new_before_end(current, window, update.before_end)?;
    let specs = new_specs(current, update)?;
    check_limits(specs.iter())?;
    let want = wanted(
        catalog,
        specs.iter().zip(current.reservations.iter().map(Some)),
    )?;
    let own: Vec<ReservationId> = current
        .reservations
        .iter()
        .map(|r| r.id)
        .chain(excluding.iter().copied())
        .collect();
    let granted = admission::admit_or_offer(catalog, window, &want, &own, search)
        .map_err(|refusal| Rejection::DoesNotFit(Box::new(refusal)))?;
    let started = current.started();
    let mut lost = Vec::new();
    for (idx, reservation) in lease.reservations.iter_mut().enumerate() {
        let hosts = &granted.hosts[idx];
        if started && !keeps_hosts(reservation, &specs[idx], hosts) {
            lost.push(Shortfall {
                index: idx,
                resource_type: specs[idx].resource_type(),
                requested: specs[idx].amount(),
                available: 0,
                reason: "held_hosts_unavailable",
            });
        }
        reservation.spec = specs[idx].clone();
        reservation.hosts = hosts[..].into();
        reservation.reconcile_missing();
        reservation.floating_ips = granted.floating_ips[idx][..].into();
        reservation.updated_at = now;
    }
    if !lost.is_empty() {
        let amounts = admission::largest_amounts(&lost, &want, &granted);
        return Err(Rejection::DoesNotFit(Box::new(Refusal {
            shortfalls: lost,
            amounts,
            earliest_start: None,
            truncated: false,
        })));
    }
    lease.start = window.start();
    lease.end = window.end();
    moved_events(lease, window, before_end, now);
    Ok(())
}
