//! Failures and maintenance: a provider taken out of service (down or in maintenance) and
//! returned to it, and what that does to the leases on it.
//!
//! Taking a host out of service, in one decision:
//! - reservations that have not started are **healed**: re-admitted over their window onto hosts
//!   in service that satisfy the same filter, affinity and zone (the hosts they keep are
//!   preferred, so only what was on the lost host moves). What cannot be placed stays on the
//!   lost host and is recorded as `missing` (how many hosts or instances), and the lease is
//!   degraded; a reservation never silently drops below what it was given;
//! - reservations already running are not moved under their workload: what they hold on the
//!   lost host is recorded as missing, the lease is degraded, and an admin may `reallocate`;
//! - every lease touched gets an entry in its lifecycle record (`lease.healed`,
//!   `lease.degraded`), which subscribers are notified of.
//!
//! Returning the host clears what was missing on it (`lease.restored`), and a lease with nothing
//! missing any more is no longer degraded.

use crate::catalog::Catalog;
use crate::change::Change;
use crate::change::record;
use crate::decide::admission::{self, Wanted};
use crate::decide::lease::filter_of;
use crate::limits::STATUS_REASON_LEN_MAX;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::{Affinity, Lease, Reservation, ReservationSpec};
use crate::model::ledger::{Hold, Window};
use crate::model::provider::{Provider, ProviderCondition, ProviderStatus};
use crate::model::time::Instant;
use crate::query::health::affected_leases;
use crate::query::missing::{self, Missing};
use crate::rejection::Rejection;
use crate::rejection::{Refusal, Shortfall};

/// What changing a provider's status did to the leases on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// Leases not yet started, moved whole onto other hosts.
    pub healed: Vec<LeaseId>,
    /// Leases not yet started that could not be moved whole (something is missing).
    pub degraded: Vec<LeaseId>,
    /// Running leases that lost what they held on the provider (left in place).
    pub flagged: Vec<LeaseId>,
    /// Leases whose missing resources returned with the provider.
    pub restored: Vec<LeaseId>,
}

/// Sets the status of provider `uuid`. Taking it out of service heals, degrades or flags the
/// leases on it; returning it restores them. Setting the status it already has changes only the
/// reason.
pub fn set_status(
    catalog: &Catalog,
    uuid: ProviderId,
    status: ProviderStatus,
    reason: Option<String>,
    now: Instant,
) -> Result<(Vec<Change>, Effects), Rejection> {
    let provider = catalog
        .provider(uuid)
        .ok_or(Rejection::ProviderNotFound(uuid))?;
    let reason = reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > STATUS_REASON_LEN_MAX)
    {
        return Err(Rejection::BadLease(format!(
            "reason is longer than {STATUS_REASON_LEN_MAX} characters"
        )));
    }
    match (provider.condition(), status) {
        (None, ProviderStatus::Up) => Ok((Vec::new(), Effects::default())),
        (Some(_), ProviderStatus::Up) => Ok(restore(catalog, provider, now)),
        (Some(old), _) => {
            let condition = ProviderCondition {
                status,
                reason,
                since: old.since,
            };
            Ok((
                vec![Change::ProviderConditionSet {
                    uuid,
                    condition: Some(condition),
                }],
                Effects::default(),
            ))
        }
        (None, _) => {
            let condition = ProviderCondition {
                status,
                reason,
                since: now,
            };
            Ok(take_out(catalog, provider, condition, now))
        }
    }
}

/// The providers out of service, with `also`.
fn out_of_service(catalog: &Catalog, also: ProviderId) -> Vec<ProviderId> {
    let mut out: Vec<ProviderId> = catalog
        .providers()
        .filter(|p| !p.is_up())
        .map(Provider::uuid)
        .collect();
    if !out.contains(&also) {
        out.push(also);
    }
    out
}

fn take_out(
    catalog: &Catalog,
    provider: &Provider,
    condition: ProviderCondition,
    now: Instant,
) -> (Vec<Change>, Effects) {
    let uuid = provider.uuid();
    let avoid = out_of_service(catalog, uuid);
    // The record is written before the catalog knows the provider is out of service.
    let going = Some((uuid, condition.status));
    let details = |lease: &Lease, active: bool| {
        serde_json::json!({
            "provider": uuid,
            "provider_name": provider.name(),
            "status": condition.status.as_str(),
            "reason": condition.reason,
            "missing_resources": missing_by_reservation(catalog, lease, going),
            "active": active,
        })
    };
    let mut effects = Effects::default();
    let mut changes = vec![Change::ProviderConditionSet {
        uuid,
        condition: Some(condition.clone()),
    }];
    // Higher priorities are healed first, then earlier starts; each sees what the earlier ones
    // were given.
    let mut leases: Vec<&Lease> = catalog
        .leases_holding(uuid)
        .filter(|l| l.holds_capacity())
        .collect();
    leases.sort_by_key(|l| (std::cmp::Reverse(l.priority()), l.start, l.id));
    let mut earlier = Earlier::default();
    for current in leases {
        let mut lease = current.clone();
        lease.updated_at = now;
        let kind = if current.started() {
            for reservation in &mut lease.reservations {
                if let Some(slots) = reservation.slots_on(uuid)
                    && !reservation.missing.iter().any(|(h, _)| *h == uuid)
                {
                    reservation.add_missing(uuid, slots);
                    reservation.updated_at = now;
                }
            }
            effects.flagged.push(lease.id);
            "lease.degraded"
        } else {
            let targets: Vec<usize> = affected(&lease, &avoid);
            let healed = heal(catalog, &lease, &targets, &avoid, lease.window(), &earlier);
            for (idx, reservation) in targets.iter().zip(healed) {
                lease.reservations[*idx] = Reservation {
                    updated_at: now,
                    ..reservation
                };
                let reservation = &lease.reservations[*idx];
                earlier.ids.push(reservation.id);
                earlier.holds.extend(reservation.holds(lease.window()));
            }
            match lease.reservations.iter().any(|r| !r.missing.is_empty()) {
                true => {
                    effects.degraded.push(lease.id);
                    "lease.degraded"
                }
                false => {
                    effects.healed.push(lease.id);
                    "lease.healed"
                }
            }
        };
        if lease.reservations.iter().any(|r| !r.missing.is_empty()) {
            lease.degraded = true;
        }
        changes.push(record(
            &lease,
            kind,
            now,
            details(&lease, current.started()),
        ));
        changes.push(Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease)),
        });
    }
    (changes, effects)
}

fn restore(catalog: &Catalog, provider: &Provider, now: Instant) -> (Vec<Change>, Effects) {
    let uuid = provider.uuid();
    let mut effects = Effects::default();
    let mut changes = vec![Change::ProviderConditionSet {
        uuid,
        condition: None,
    }];
    for current in affected_leases(catalog, uuid) {
        let missed = current
            .reservations
            .iter()
            .any(|r| r.missing.iter().any(|(h, _)| *h == uuid));
        if !missed {
            continue;
        }
        let mut lease = current.clone();
        for reservation in &mut lease.reservations {
            if reservation.clear_missing(uuid) {
                reservation.updated_at = now;
            }
        }
        // Degraded also when a host it holds has less capacity than is promised on it (its
        // inventory shrank, or a forced decrease): that does not return with this provider.
        let short = || {
            let Some(window) = Window::new(now.max(lease.start), lease.end) else {
                return false;
            };
            lease
                .reservations
                .iter()
                .flat_map(|r| r.hosts.iter().map(|(h, _)| *h))
                .filter_map(|h| catalog.provider(h))
                .any(|p| crate::decide::pools::over_capacity(catalog, p, window))
        };
        if lease.reservations.iter().all(|r| r.missing.is_empty()) && !short() {
            lease.degraded = false;
        }
        lease.updated_at = now;
        changes.push(record(
            &lease,
            "lease.restored",
            now,
            serde_json::json!({
                "provider": uuid,
                "provider_name": provider.name(),
                "degraded": lease.degraded,
                "missing_resources": missing_of(catalog, &lease),
            }),
        ));
        changes.push(Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease)),
        });
        effects.restored.push(current.id);
    }
    (changes, effects)
}

/// The reservations of `lease` that hold a host in `avoid` (floating IPs are not providers).
fn affected(lease: &Lease, avoid: &[ProviderId]) -> Vec<usize> {
    lease
        .reservations
        .iter()
        .enumerate()
        .filter(|(_, r)| r.hosts.iter().any(|(h, _)| avoid.contains(h)))
        .map(|(idx, _)| idx)
        .collect()
}

/// How many units (hosts, or instance slots) a list of `(host, slots)` counts for `spec`.
fn units(spec: &ReservationSpec, hosts: &[(ProviderId, u32)]) -> u32 {
    match spec {
        ReservationSpec::Host { .. } => hosts.len() as u32,
        _ => hosts.iter().map(|(_, n)| *n).sum(),
    }
}

/// `spec` asking for exactly `amount` hosts or instances.
fn with_amount(spec: &ReservationSpec, amount: u32) -> ReservationSpec {
    let mut spec = spec.clone();
    match &mut spec {
        ReservationSpec::Host { min, max, .. } => {
            *min = amount;
            *max = amount;
        }
        ReservationSpec::Instance { amount: a, .. }
        | ReservationSpec::FloatingIp { amount: a, .. } => {
            *a = amount;
        }
    }
    spec
}

/// What reservations healed earlier in the same decision were given (not yet in the ledger).
#[derive(Default)]
struct Earlier {
    /// Their ids (the ledger's holds of these do not count).
    ids: Vec<ReservationId>,
    /// Their new holds.
    holds: Vec<Hold>,
}

/// One reservation being healed.
struct Target<'l> {
    reservation: &'l Reservation,
    /// What it holds on hosts in service.
    kept: Vec<(ProviderId, u32)>,
    /// What it holds on hosts out of service.
    lost: Vec<(ProviderId, u32)>,
    /// How many units it holds in all.
    whole: u32,
    /// How many units this round asks for.
    amount: u32,
    /// The fewest units it may ask for: what it keeps (a reservation all on one host either
    /// moves whole or not at all).
    floor: u32,
}

/// The reservations of `lease` at `targets`, re-admitted over `window` (their own holds set
/// aside) onto hosts outside `avoid`: all of each when it fits, otherwise as much as fits, the
/// rest left where it was and recorded as missing. In `targets` order.
fn heal(
    catalog: &Catalog,
    lease: &Lease,
    targets: &[usize],
    avoid: &[ProviderId],
    window: Window,
    earlier: &Earlier,
) -> Vec<Reservation> {
    let mut plan: Vec<Target<'_>> = targets
        .iter()
        .map(|idx| {
            let reservation = &lease.reservations[*idx];
            let (lost, kept): (Vec<_>, Vec<_>) = reservation
                .hosts
                .iter()
                .partition(|(h, _)| avoid.contains(h));
            let whole = units(&reservation.spec, &reservation.hosts);
            let floor = units(&reservation.spec, &kept);
            Target {
                reservation,
                kept,
                lost,
                whole,
                amount: whole,
                floor,
            }
        })
        .collect();
    let granted = admit_most(catalog, &mut plan, avoid, window, earlier);
    plan.iter()
        .enumerate()
        .map(|(idx, target)| {
            let placed = granted
                .as_ref()
                .map_or_else(|| target.kept.clone(), |g| g[idx].clone());
            settle(catalog, target, placed)
        })
        .collect()
}

/// Admits the plan, lowering the amounts of the reservations that do not fit to what does
/// (never below what they keep), until everything fits. Per target, the hosts granted; `None`
/// when even that fails (nothing moves).
fn admit_most(
    catalog: &Catalog,
    plan: &mut [Target<'_>],
    avoid: &[ProviderId],
    window: Window,
    earlier: &Earlier,
) -> Option<Vec<Vec<(ProviderId, u32)>>> {
    let mut own: Vec<ReservationId> = plan.iter().map(|t| t.reservation.id).collect();
    own.extend(earlier.ids.iter().copied());
    for _round in 0..=plan.len() {
        let specs: Vec<ReservationSpec> = plan
            .iter()
            .map(|t| with_amount(&t.reservation.spec, t.amount))
            .collect();
        let mut wanted = Vec::with_capacity(plan.len());
        for (spec, target) in specs.iter().zip(plan.iter()) {
            wanted.push(Wanted {
                spec,
                filter: filter_of(catalog, spec).ok()?,
                current: target.kept.clone(),
                current_fips: Vec::new(),
                avoid: avoid.to_vec(),
            });
        }
        let (granted, shortfalls) =
            admission::admit_each_with(catalog, window, &wanted, &own, &earlier.holds);
        if shortfalls.is_empty() {
            return Some(granted.hosts);
        }
        for shortfall in shortfalls {
            let target = &mut plan[shortfall.index];
            let together = matches!(
                target.reservation.spec,
                ReservationSpec::Instance {
                    affinity: Affinity::SameHost,
                    ..
                }
            );
            let next = match together {
                true => target.floor,
                false => shortfall
                    .available
                    .min(target.amount.saturating_sub(1))
                    .max(target.floor),
            };
            if next >= target.amount {
                return None;
            }
            target.amount = next;
        }
    }
    None
}

/// The healed reservation: what was placed on hosts in service, plus what is still missing,
/// left on the hosts out of service it was on.
fn settle(catalog: &Catalog, target: &Target<'_>, placed: Vec<(ProviderId, u32)>) -> Reservation {
    let spec = &target.reservation.spec;
    let mut short = target.whole.saturating_sub(units(spec, &placed));
    let mut missing = Vec::new();
    for (host, slots) in &target.lost {
        if short == 0 {
            break;
        }
        let left = match spec {
            ReservationSpec::Host { .. } => 1,
            _ => (*slots).min(short),
        };
        missing.push((*host, left));
        short -= left;
    }
    let moved = placed.iter().any(|p| !target.kept.contains(p));
    let mut hosts = placed;
    hosts.extend(missing.iter().copied());
    hosts.sort_by_key(|(h, _)| catalog.provider(*h).map(Provider::id));
    let mut reservation = target.reservation.clone();
    reservation.hosts = hosts.into();
    reservation.missing = missing.into();
    reservation.resources_changed |= moved;
    reservation
}

/// Moves what the reservations of lease `lease_id` (or only `reservation`) hold on `host` to
/// other hosts in service that satisfy the same filter, affinity and zone: the admin's answer
/// to a running lease that lost a host, or a host about to be drained. All or nothing: a refusal
/// carries what would fit.
pub fn reallocate(
    catalog: &Catalog,
    host: ProviderId,
    lease_id: LeaseId,
    reservation: Option<ReservationId>,
    now: Instant,
) -> Result<(Vec<Change>, Lease), Rejection> {
    let current = catalog
        .lease(lease_id)
        .ok_or(Rejection::LeaseNotFound(lease_id))?;
    if !current.holds_capacity() {
        return Err(Rejection::CantUpdate(format!(
            "Lease {lease_id} has ended; there is nothing to reallocate"
        )));
    }
    let targets: Vec<usize> = current
        .reservations
        .iter()
        .enumerate()
        .filter(|(_, r)| reservation.is_none_or(|id| r.id == id))
        .filter(|(_, r)| r.slots_on(host).is_some())
        .map(|(idx, _)| idx)
        .collect();
    if targets.is_empty() {
        return Err(Rejection::CantUpdate(format!(
            "Lease {lease_id} holds nothing on this host"
        )));
    }
    let avoid = out_of_service(catalog, host);
    let from = match current.started() {
        true => now.max(current.start),
        false => current.start,
    };
    let window = Window::new(from, current.end).ok_or_else(|| {
        Rejection::CantUpdate(format!("Lease {lease_id} is ending; nothing to reallocate"))
    })?;
    let healed = heal(
        catalog,
        current,
        &targets,
        &avoid,
        window,
        &Earlier::default(),
    );
    let mut lease = current.clone();
    let mut shortfalls = Vec::new();
    for (idx, mut reservation) in targets.iter().copied().zip(healed) {
        let short = reservation
            .missing
            .iter()
            .filter(|(h, _)| *h == host)
            .map(|(_, n)| *n)
            .sum::<u32>();
        if short > 0 {
            let spec = &reservation.spec;
            shortfalls.push(Shortfall {
                index: idx,
                resource_type: spec.resource_type(),
                requested: units(spec, &current.reservations[idx].hosts),
                available: units(spec, &reservation.hosts) - reservation.missing_amount(),
                reason: "no_replacement",
            });
        }
        reservation.updated_at = now;
        lease.reservations[idx] = reservation;
    }
    if !shortfalls.is_empty() {
        let amounts = shortfalls.iter().map(|s| s.available).collect();
        return Err(Rejection::DoesNotFit(Box::new(Refusal {
            shortfalls,
            amounts,
            earliest_start: None,
            truncated: false,
        })));
    }
    if lease.reservations.iter().all(|r| r.missing.is_empty()) {
        lease.degraded = false;
    }
    lease.updated_at = now;
    let mut changes = vec![record(
        &lease,
        "lease.reallocated",
        now,
        serde_json::json!({
            "provider": host,
            "reservations": targets.iter().map(|i| lease.reservations[*i].id).collect::<Vec<_>>(),
            "degraded": lease.degraded,
        }),
    )];
    if current.started() {
        changes.extend(crate::decide::fence::resync(catalog, current, &lease));
    }
    changes.push(Change::LeaseSet {
        id: lease.id,
        lease: Some(Box::new(lease.clone())),
    });
    Ok((changes, lease))
}

/// What `reservation` is missing, as lease records and Blazar show it (see
/// [`crate::query::missing`]): how many hosts or instances, what that is in resources, and on
/// which hosts; `None` when nothing is.
pub fn missing_resources(
    catalog: &Catalog,
    reservation: &Reservation,
) -> Option<serde_json::Value> {
    missing_with(catalog, reservation, None)
}

/// [`missing_resources`], with `going`'s provider shown in its new status (it is being taken
/// out of service in the decision that asks).
fn missing_with(
    catalog: &Catalog,
    reservation: &Reservation,
    going: Option<(ProviderId, ProviderStatus)>,
) -> Option<serde_json::Value> {
    missing::of_reservation(catalog, reservation, going).map(|m| missing_json(&m))
}

fn missing_json(missing: &Missing) -> serde_json::Value {
    let hosts: Vec<serde_json::Value> = missing
        .hosts
        .iter()
        .map(|on| {
            serde_json::json!({
                "provider": on.provider,
                "host_id": on.host_id.map(|id| id.to_string()),
                "hypervisor_hostname": on.name,
                "status": on.status.map(ProviderStatus::as_str),
                "amount": on.amount,
            })
        })
        .collect();
    let mut value = serde_json::json!({
        "amount": missing.amount,
        "unit": missing.unit.as_str(),
        "hosts": hosts,
    });
    if let Some(amounts) = &missing.resources {
        value["resources"] = amounts
            .iter()
            .map(|(class, n)| (class.as_str().to_owned(), serde_json::json!(n)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    value
}

/// What each reservation of `lease` is missing, by reservation id (an empty object when
/// nothing is).
pub fn missing_of(catalog: &Catalog, lease: &Lease) -> serde_json::Value {
    missing_by_reservation(catalog, lease, None)
}

fn missing_by_reservation(
    catalog: &Catalog,
    lease: &Lease,
    going: Option<(ProviderId, ProviderStatus)>,
) -> serde_json::Value {
    missing::of_lease(catalog, lease, going)
        .iter()
        .map(|(id, m)| (id.to_string(), missing_json(m)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}
