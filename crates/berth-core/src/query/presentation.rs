//! Presenting a reservation: the fence policy (whether a consumer that presents none is kept
//! out of fenced capacity), which reservation an id names, whether a consumer may present it
//! now, what a request presenting it must ask for, the host reservation a consumer of its
//! project presents without naming it, and how much the consumers of a reservation may hold on
//! each of its hosts. See [`crate::decide::fence`] for the fence these rules open.

use crate::catalog::Catalog;
use crate::model::consumer::Allocations;
use crate::model::fence::{reservation_aggregate, reservation_class, reservation_of_class};
use crate::model::id::{ProviderId, ReservationId};
use crate::model::lease::{Lease, Reservation, ReservationSpec};
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Whether unreserved consumers are kept out of fenced capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FencePolicy {
    /// They are (the default).
    #[default]
    Enforced,
    /// They are not: strict Placement behaviour; callers exclude reservations themselves.
    Off,
}

/// The lease and reservation a reservation id names.
pub fn find(catalog: &Catalog, reservation: ReservationId) -> Option<(&Lease, &Reservation)> {
    let lease = catalog.lease_of_reservation(reservation)?;
    let found = lease.reservations.iter().find(|r| r.id == reservation)?;
    Some((lease, found))
}

/// Checks that `reservation` may be presented now: the lease exists, is running, and (when a
/// `project` is given: the consumer's) belongs to that project or is shared with it. Without a
/// project the caller acts for the lease's owner (a scheduler asking for candidates).
pub fn check_presented<'c>(
    catalog: &'c Catalog,
    reservation: ReservationId,
    project: Option<&str>,
    now: Instant,
) -> Result<(&'c Lease, &'c Reservation), Rejection> {
    let unavailable = |reason: &'static str| Rejection::ReservationUnavailable {
        reservation,
        reason,
    };
    let (lease, found) = find(catalog, reservation).ok_or(unavailable("unknown"))?;
    if project.is_some_and(|p| !lease.usable_by(p)) {
        return Err(Rejection::ReservationForbidden(reservation));
    }
    if lease.ended() || now >= lease.end {
        return Err(unavailable("ended"));
    }
    if !lease.started() || now < lease.start {
        return Err(unavailable("not_started"));
    }
    Ok((lease, found))
}

/// What a request presenting a reservation must ask for, to be answered inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inside {
    /// Providers in the reservation's aggregate (a host reservation; the aggregate's uuid is
    /// the reservation id).
    Aggregate(Uuid),
    /// One unit of the reservation's class, interned (an instance reservation: one slot).
    Slot(ResourceClass),
    /// Nothing Placement offers: the reservation holds floating IPs.
    Addresses,
}

/// Checks that `reservation` may be presented now by its lease's owner (a scheduler asking for
/// candidates acts for it) and says what a request presenting it must ask for.
pub fn inside(
    catalog: &Catalog,
    reservation: ReservationId,
    now: Instant,
) -> Result<Inside, Rejection> {
    let (_, found) = check_presented(catalog, reservation, None, now)?;
    Ok(match found.spec {
        ReservationSpec::Host { .. } => Inside::Aggregate(reservation_aggregate(reservation)),
        ReservationSpec::Instance { .. } => {
            Inside::Slot(catalog.interned_class(&reservation_class(reservation)))
        }
        ReservationSpec::FloatingIp { .. } => Inside::Addresses,
    })
}

/// The instance reservation a request presents, by id (`named`) or by its class among
/// `classes`: each provider offers it no more than the reservation holds there.
pub fn confined_to<'a>(
    catalog: &Catalog,
    named: Option<ReservationId>,
    classes: impl IntoIterator<Item = &'a ResourceClass>,
) -> Option<ReservationId> {
    named
        .or_else(|| classes.into_iter().find_map(reservation_of_class))
        .filter(|id| {
            find(catalog, *id)
                .is_some_and(|(_, r)| matches!(r.spec, ReservationSpec::Instance { .. }))
        })
}

/// The reservation aggregates among `aggregates` (those a request names in `member_of`):
/// providers in them are offered to the request as to their holder, unfenced.
pub fn presented_aggregates<'a>(
    catalog: &Catalog,
    aggregates: impl IntoIterator<Item = &'a Uuid>,
) -> BTreeSet<Uuid> {
    aggregates
        .into_iter()
        // A reservation's aggregate has the reservation's id.
        .filter(|aggregate| {
            catalog
                .lease_of_reservation(ReservationId::new(**aggregate))
                .is_some()
        })
        .copied()
        .collect()
}

/// The active host reservation of `project` (its own, else one shared with it) holding
/// `provider`, if there is one: a consumer of that project allocating there presents it without
/// naming it.
pub fn host_reservation_for(
    catalog: &Catalog,
    provider: ProviderId,
    project: &str,
    now: Instant,
) -> Option<ReservationId> {
    let held =
        |lease: &&Lease| lease.started() && !lease.ended() && lease.start <= now && now < lease.end;
    let on_provider = |lease: &Lease| {
        lease
            .reservations
            .iter()
            .find(|r| {
                matches!(r.spec, ReservationSpec::Host { .. })
                    && r.hosts.iter().any(|(h, _)| *h == provider)
            })
            .map(|r| r.id)
    };
    // One pass over the leases holding the provider now (a lease's holds span its window, so
    // those are every lease whose window holds `now`; the ones ahead are never read): the
    // project's own reservation answers at once, the first shared with it only if none of its
    // own is found.
    let mut shared = None;
    let holding = catalog.leases_holding_during(provider, Window::instant(now));
    for lease in holding.filter(held) {
        let own = *lease.project_id == *project;
        if !own && (shared.is_some() || lease.share_of(project).is_none()) {
            continue;
        }
        match on_provider(lease) {
            Some(id) if own => return Some(id),
            Some(id) => shared = Some(id),
            None => {}
        }
    }
    shared
}

/// What the consumers of `project` (but `except`) hold inside `lease`'s reservations, by
/// class: what a share's cap bounds.
pub fn shared_holdings(
    catalog: &Catalog,
    lease: &Lease,
    project: &str,
    except: Option<Uuid>,
) -> BTreeMap<ResourceClass, u64> {
    let mut held = BTreeMap::new();
    let consumers = lease
        .reservations
        .iter()
        .flat_map(|r| catalog.consumers_of_reservation(r.id))
        .filter(|c| Some(*c) != except)
        .filter_map(|c| catalog.consumer(c))
        .filter(|c| c.project_id == project);
    for consumer in consumers {
        for (_, class, amount) in consumer.entries() {
            *held.entry(class.clone()).or_insert(0) += amount;
        }
    }
    held
}

/// Checks a write of a consumer of `project` presenting a reservation of `lease`: when the
/// lease is shared with the project (not its own), what the project's consumers would hold of
/// each class the share caps stays within the cap.
pub fn check_share(
    catalog: &Catalog,
    lease: &Lease,
    project: &str,
    consumer: Uuid,
    allocations: &Allocations,
) -> Result<(), Rejection> {
    if *lease.project_id == *project {
        return Ok(());
    }
    let Some(share) = lease.share_of(project) else {
        return Ok(());
    };
    let held = shared_holdings(catalog, lease, project, Some(consumer));
    for (class, cap) in &share.cap {
        let asked: u64 = allocations
            .values()
            .filter_map(|by_class| by_class.get(class))
            .sum();
        if asked == 0 {
            continue;
        }
        let used = held.get(class).copied().unwrap_or(0);
        if used.saturating_add(asked) > *cap {
            return Err(Rejection::ShareExceeded {
                lease: lease.id,
                project: project.to_owned(),
                class: class.as_str().to_owned(),
                cap: *cap,
                used,
            });
        }
    }
    Ok(())
}

/// Checks allocations that count against `reservation`: only on its hosts, and (instance
/// reservations) never more than its slots hold, counting what its other consumers use.
pub fn check_within(
    catalog: &Catalog,
    reservation: &Reservation,
    consumer: Uuid,
    allocations: &Allocations,
) -> Result<(), Rejection> {
    let exceeded = |provider: ProviderId, class: &ResourceClass| Rejection::ReservationExceeded {
        reservation: reservation.id,
        provider,
        class: class.as_str().to_owned(),
    };
    for (provider, by_class) in allocations {
        if reservation.slots_on(*provider).is_none() {
            return Err(Rejection::ReservationExceeded {
                reservation: reservation.id,
                provider: *provider,
                class: "(host not in the reservation)".into(),
            });
        }
        if !matches!(reservation.spec, ReservationSpec::Instance { .. }) {
            continue;
        }
        for (class, amount) in by_class {
            let others = catalog.reserved_use(reservation.id, *provider, class, consumer);
            match limit_on(reservation, *provider, class) {
                Some(limit) if others + amount <= limit => {}
                _ => return Err(exceeded(*provider, class)),
            }
        }
    }
    Ok(())
}

/// The most of `class` the consumers of an instance reservation may hold together on `host`:
/// its share there (slots times the instance size), or its slot count for its own reservation
/// class. `None` when it does not size `class` there (another kind of reservation, another
/// class, or a host it does not hold).
pub fn limit_on(reservation: &Reservation, host: ProviderId, class: &ResourceClass) -> Option<u64> {
    let slots = reservation.slots_on(host)?;
    if reservation_of_class(class) == Some(reservation.id) {
        return Some(u64::from(slots));
    }
    reservation
        .share_on(host)?
        .into_iter()
        .find(|(c, _)| c == class)
        .map(|(_, n)| n)
}
