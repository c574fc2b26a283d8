//! The fence's rules: reserved capacity kept from consumers that present no reservation, and
//! the Placement objects that show it.
//!
//! What a provider's fence holds is derived from the ledger
//! ([`Fence`](crate::model::fence::Fence), kept on each provider by the catalog): the whole provider while a host reservation holds it now or later, and per
//! class the peak that instance reservations hold from now on. An unreserved allocation is
//! never given fenced capacity, because it has no end: it would still be there when the
//! reservation needs the capacity.
//!
//! A consumer presents a reservation by naming it (`reservation`), by allocating the
//! reservation's resource class (`CUSTOM_RESERVATION_<ID>`), or, for a host reservation, by
//! allocating on a host the reservation holds from the lease's own project. Its allocations then
//! count against the reservation: only while the lease is active, only on the reservation's
//! hosts, and never more than was reserved ([`crate::query::presentation`]). Whether unreserved
//! consumers are kept out at all is the
//! [`FencePolicy`](crate::query::presentation::FencePolicy), which allocation candidates (a read)
//! apply too.
//!
//! While a reservation is active its fence is also visible in Placement terms: an aggregate per
//! reservation (its id, metadata `reservation: <id>`), and for instance reservations the
//! resource class `CUSTOM_RESERVATION_<ID>` with one unit per reserved slot on each host.
//! Reservable hosts belong to the freepool aggregate
//! [`FREEPOOL_AGGREGATE`](crate::model::fence::FREEPOOL_AGGREGATE).

use crate::catalog::Catalog;
use crate::change::Change;
use crate::model::consumer::PREEMPTIBLE;
use crate::model::fence::{reservation_aggregate, reservation_class};
use crate::model::id::ProviderId;
use crate::model::inventory::{FullReservation, Inventory};
use crate::model::lease::{Lease, Reservation, ReservationSpec};
use crate::model::name::ResourceClass;
use crate::model::provider::AggregateRecord;
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Checks unreserved allocations against the fence: `(provider, class) -> (before, after)` are
/// the amounts unreserved, non-preemptible writers held before and will hold after.
pub fn check_unreserved(
    catalog: &Catalog,
    totals: &BTreeMap<(ProviderId, ResourceClass), (u64, u64)>,
) -> Result<(), Rejection> {
    for ((provider, class), (before, after)) in totals {
        if after <= before {
            continue;
        }
        let Some(found) = catalog.provider(*provider) else {
            continue;
        };
        let fence = found.fence();
        if fence.is_empty() {
            continue;
        }
        let Some(record) = found.inventories().get(class) else {
            continue;
        };
        let taken = found.used_unreserved(class) - before.min(&found.used_unreserved(class));
        if fence.whole || (taken + after) as f64 > record.capacity_exact() {
            return Err(Rejection::Fenced {
                provider: *provider,
                class: class.as_str().to_owned(),
            });
        }
    }
    Ok(())
}

/// What a lease's fence changes on one host: aggregates joined and left, reservation classes
/// set (to a slot count) and removed.
#[derive(Default)]
struct HostEdit {
    join: BTreeSet<Uuid>,
    leave: BTreeSet<Uuid>,
    set: BTreeMap<ResourceClass, u64>,
    unset: BTreeSet<ResourceClass>,
}

/// Which reservation-class inventories an edit may remove.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    /// Only those no consumer uses.
    Unused,
    /// All of them (their consumers are removed in the same decision).
    Everything,
}

/// One `AggregatesReplaced` and one `InventoriesReplaced` per host that changes, each computed
/// once from all of the lease's edits (so two reservations on one host do not undo each other).
fn emit(catalog: &Catalog, edits: BTreeMap<ProviderId, HostEdit>, release: Release) -> Vec<Change> {
    let mut changes = Vec::new();
    for (host, edit) in edits {
        let Some(provider) = catalog.provider(host) else {
            continue;
        };
        let mut aggregates = provider.aggregates().clone();
        aggregates.extend(edit.join);
        aggregates.retain(|a| !edit.leave.contains(a));
        if &aggregates != provider.aggregates() {
            changes.push(Change::AggregatesReplaced {
                uuid: host,
                aggregates,
            });
        }
        let mut inventories = provider.inventories().clone();
        inventories.retain(|class, _| {
            !edit.unset.contains(class) || (release == Release::Unused && provider.used(class) > 0)
        });
        for (class, slots) in edit.set {
            let record = Inventory::new(slots, 0, [1, slots, 1], 1.0, FullReservation::Refused)
                .expect("invariant: a slot count is a valid inventory");
            inventories.insert(class, record);
        }
        if &inventories != provider.inventories() {
            changes.push(Change::InventoriesReplaced {
                uuid: host,
                inventories,
            });
        }
    }
    changes
}

fn fenced(reservation: &Reservation) -> bool {
    !matches!(reservation.spec, ReservationSpec::FloatingIp { .. })
}

fn instances(reservation: &Reservation) -> bool {
    matches!(reservation.spec, ReservationSpec::Instance { .. })
}

/// The changes that make a starting lease's reservations visible in Placement: an aggregate per
/// reservation on each of its hosts and, for instance reservations, the reservation's class
/// with a unit per slot.
pub fn raise(catalog: &Catalog, lease: &Lease) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut edits: BTreeMap<ProviderId, HostEdit> = BTreeMap::new();
    for reservation in lease.reservations.iter().filter(|r| fenced(r)) {
        changes.push(Change::AggregateDescribed {
            uuid: reservation_aggregate(reservation.id),
            record: Some(AggregateRecord {
                name: None,
                metadata: BTreeMap::from([("reservation".to_owned(), reservation.id.to_string())]),
            }),
        });
        let class = reservation_class(reservation.id);
        if instances(reservation) && !catalog.has_resource_class(&class) {
            changes.push(Change::ResourceClassCreated(class.clone()));
        }
        for (host, slots) in &reservation.hosts {
            let edit = edits.entry(*host).or_default();
            edit.join.insert(reservation_aggregate(reservation.id));
            if instances(reservation) {
                edit.set.insert(class.clone(), u64::from(*slots));
            }
        }
    }
    changes.extend(emit(catalog, edits, Release::Unused));
    changes
}

fn terminated(lease: &Lease, reservation: &Reservation, consumer: Uuid, now: Instant) -> Change {
    let details = serde_json::json!({
        "consumer": consumer,
        "reservation": reservation.id,
        "reason": "the reservation ended",
    });
    crate::change::record(lease, "consumer.terminated", now, details)
}

/// The changes that end a lease in Placement: the consumers still allocated against its
/// reservations are removed (each recorded as terminated), then its classes and aggregates.
pub fn lower(catalog: &Catalog, lease: &Lease, now: Instant) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut edits: BTreeMap<ProviderId, HostEdit> = BTreeMap::new();
    let mut classes = Vec::new();
    for reservation in lease.reservations.iter().filter(|r| fenced(r)) {
        for consumer in catalog.consumers_of_reservation(reservation.id) {
            changes.push(terminated(lease, reservation, consumer, now));
            changes.push(Change::ConsumerSet {
                uuid: consumer,
                consumer: None,
            });
        }
        let class = reservation_class(reservation.id);
        for provider in catalog.providers().filter(|p| {
            p.aggregates()
                .contains(&reservation_aggregate(reservation.id))
                || p.inventories().contains_key(&class)
        }) {
            let edit = edits.entry(provider.uuid()).or_default();
            edit.leave.insert(reservation_aggregate(reservation.id));
            edit.unset.insert(class.clone());
        }
        classes.push(class);
    }
    // Every user of a reservation class presents the reservation, so once its consumers are
    // removed (above, in the same decision) the class is unused everywhere.
    changes.extend(emit(catalog, edits, Release::Everything));
    for class in classes
        .into_iter()
        .filter(|c| catalog.custom_resource_classes().contains(c))
    {
        changes.push(Change::ResourceClassDeleted(class));
    }
    for reservation in lease
        .reservations
        .iter()
        .filter(|r| catalog.aggregate(reservation_aggregate(r.id)).is_some())
    {
        changes.push(Change::AggregateDescribed {
            uuid: reservation_aggregate(reservation.id),
            record: None,
        });
    }
    changes
}

/// The changes that move a running lease's fence from what `old` held to what `new` holds:
/// hosts a reservation left lose its aggregate and class (unless consumers still use the class
/// there), hosts it holds get them with the new slot counts.
pub fn resync(catalog: &Catalog, old: &Lease, new: &Lease) -> Vec<Change> {
    let mut edits: BTreeMap<ProviderId, HostEdit> = BTreeMap::new();
    for (before, after) in old.reservations.iter().zip(&new.reservations) {
        if !fenced(after) {
            continue;
        }
        let class = reservation_class(after.id);
        for (host, _) in &before.hosts {
            let edit = edits.entry(*host).or_default();
            edit.leave.insert(reservation_aggregate(before.id));
            edit.unset.insert(class.clone());
        }
        for (host, slots) in &after.hosts {
            let edit = edits.entry(*host).or_default();
            edit.leave.remove(&reservation_aggregate(after.id));
            edit.unset.remove(&class);
            edit.join.insert(reservation_aggregate(after.id));
            if instances(after) {
                edit.set.insert(class.clone(), u64::from(*slots));
            }
        }
    }
    emit(catalog, edits, Release::Unused)
}

/// The preemptible consumers a starting lease evicts, in eviction order: on each host a host
/// reservation holds, all of them; on each host an instance reservation holds, the newest
/// first until the reservation's share is free. (Preemptible consumers have no priority of
/// their own yet, so newest first is the whole order.)
pub fn evictions(catalog: &Catalog, lease: &Lease) -> Vec<Uuid> {
    let mut borrowers: Vec<(Uuid, &crate::model::consumer::Consumer)> = catalog
        .consumers()
        .filter(|(_, c)| c.consumer_type.as_deref() == Some(PREEMPTIBLE) && c.reservation.is_none())
        .collect();
    borrowers.sort_by_key(|(uuid, c)| std::cmp::Reverse((c.created_at, *uuid)));
    let mut out: Vec<Uuid> = Vec::new();
    for reservation in lease.reservations.iter().filter(|r| fenced(r)) {
        for (host, slots) in &reservation.hosts {
            let Some(provider) = catalog.provider(*host) else {
                continue;
            };
            let on_host: Vec<(Uuid, &crate::model::consumer::Consumer)> = borrowers
                .iter()
                .filter(|(uuid, c)| !out.contains(uuid) && c.allocations.contains_key(host))
                .copied()
                .collect();
            let Some(share) = reservation.spec.instance_amounts(u64::from(*slots)) else {
                out.extend(on_host.iter().map(|(uuid, _)| *uuid));
                continue;
            };
            let mut freed: BTreeMap<&ResourceClass, u64> = BTreeMap::new();
            let short = |freed: &BTreeMap<&ResourceClass, u64>| {
                share.iter().any(|(class, need)| {
                    let capacity = provider
                        .inventories()
                        .get(class)
                        .map_or(0, Inventory::capacity);
                    let used = provider.used(class) - freed.get(class).copied().unwrap_or(0);
                    capacity.saturating_sub(used) < *need
                })
            };
            for (uuid, consumer) in on_host {
                if !short(&freed) {
                    break;
                }
                for (class, amount) in consumer.allocations.get(host).into_iter().flatten() {
                    *freed.entry(class).or_insert(0) += amount;
                }
                out.push(uuid);
            }
        }
    }
    out
}

/// Records of a notice (`consumer.preemption_notice`) or an eviction (`consumer.evicted`).
pub fn preemption_records(
    lease: &Lease,
    consumers: &[Uuid],
    kind: &str,
    now: Instant,
) -> Vec<Change> {
    consumers
        .iter()
        .map(|consumer| {
            let details = serde_json::json!({
                "consumer": consumer,
                "evicted_at": lease.start.as_micros(),
                "reason": "a reservation needs the capacity it borrowed",
            });
            crate::change::record(lease, kind, now, details)
        })
        .collect()
}
