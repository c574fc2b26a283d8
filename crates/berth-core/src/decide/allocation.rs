//! Allocation decisions: replacing what consumers hold, checked exactly as Placement checks it.
//!
//! For every (provider, class) a write touches, each amount must respect `min_unit`, `max_unit`
//! and `step_size`, and `used - held_before + held_after` must fit in
//! `(total - reserved) * allocation_ratio`, unless the write does not increase usage there
//! (Placement tolerates writes that leave an over-committed provider no worse).

use crate::catalog::Catalog;
use crate::change::Change;
use crate::change::Decision;
use crate::decide::fence;
use crate::model::consumer::{Allocations, Consumer, PREEMPTIBLE};
use crate::model::fence::reservation_in;
use crate::model::id::{ProviderId, ReservationId};
use crate::model::name::ResourceClass;
use crate::model::provider::Provider;
use crate::model::time::Instant;
use crate::query::presentation::{
    FencePolicy, check_presented, check_share, check_within, host_reservation_for,
};
use crate::rejection::Rejection;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// The consumer generation a writer expects (Placement 1.28).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGeneration {
    /// No check (before 1.28).
    Unchecked,
    /// The consumer must not exist yet (`null`).
    New,
    /// The consumer must exist with this generation.
    Is(u64),
}

/// One consumer's new allocations.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerWrite {
    /// The consumer.
    pub consumer: Uuid,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// Consumer type, when given.
    pub consumer_type: Option<String>,
    /// The generation check.
    pub generation: ConsumerGeneration,
    /// The full new set; empty removes the consumer.
    pub allocations: Allocations,
    /// The reservation the consumer presents, if any (see [`crate::decide::fence`]).
    pub reservation: Option<ReservationId>,
}

fn check_generation(catalog: &Catalog, write: &ConsumerWrite) -> Result<(), Rejection> {
    #[cfg(feature = "planted-defects")]
    if crate::planted::planted(crate::planted::Defect::SkipGenerationCheck) {
        return Ok(());
    }
    let actual = catalog.consumer(write.consumer).map(|c| c.generation);
    let expected = match write.generation {
        ConsumerGeneration::Unchecked => return Ok(()),
        ConsumerGeneration::New => None,
        ConsumerGeneration::Is(generation) => Some(generation),
    };
    match actual == expected {
        true => Ok(()),
        false => Err(Rejection::ConsumerGenerationConflict {
            consumer: write.consumer,
            expected: actual,
            got: expected,
        }),
    }
}

fn holder<'c>(
    catalog: &'c Catalog,
    provider: ProviderId,
    class: &ResourceClass,
    amount: u64,
) -> Result<&'c Provider, Rejection> {
    let found = catalog
        .provider(provider)
        .ok_or(Rejection::AllocationProviderNotFound(provider))?;
    if !catalog.has_resource_class(class) {
        return Err(Rejection::UnknownResourceClass(class.as_str().to_owned()));
    }
    let record = found
        .inventories()
        .get(class)
        .ok_or_else(|| Rejection::NoInventory {
            provider,
            class: class.as_str().to_owned(),
        })?;
    match record.fits_unit_rules(amount) {
        true => Ok(found),
        false => Err(Rejection::AllocationUnitRules {
            provider,
            class: class.as_str().to_owned(),
            amount,
        }),
    }
}

/// Replaces the allocations of every consumer in `writes`, atomically, with the fence enforced.
pub fn set_allocations(catalog: &Catalog, writes: &[ConsumerWrite], now: Instant) -> Decision {
    set_allocations_with(catalog, writes, now, FencePolicy::Enforced)
}

/// The reservation each write presents (named, through a reservation class, or a host
/// reservation of its project on a host it allocates), checked: usable now by the consumer's
/// project, and the allocations within what it holds.
fn presented(
    catalog: &Catalog,
    write: &ConsumerWrite,
    now: Instant,
) -> Result<Option<ReservationId>, Rejection> {
    if write.allocations.is_empty() {
        return Ok(None);
    }
    let named = write
        .reservation
        .or_else(|| reservation_in(&write.allocations))
        .or_else(|| {
            write
                .allocations
                .keys()
                .find_map(|p| host_reservation_for(catalog, *p, &write.project_id, now))
        });
    let Some(reservation) = named else {
        return Ok(None);
    };
    let (lease, found) = check_presented(catalog, reservation, Some(&write.project_id), now)?;
    check_within(catalog, found, write.consumer, &write.allocations)?;
    check_share(
        catalog,
        lease,
        &write.project_id,
        write.consumer,
        &write.allocations,
    )?;
    Ok(Some(reservation))
}

/// Unreserved, non-preemptible amounts per `(provider, class)`: held before and after.
fn unreserved_totals(
    catalog: &Catalog,
    writes: &[ConsumerWrite],
    reservations: &[Option<ReservationId>],
) -> BTreeMap<(ProviderId, ResourceClass), (u64, u64)> {
    let mut totals: BTreeMap<(ProviderId, ResourceClass), (u64, u64)> = BTreeMap::new();
    for (write, reservation) in writes.iter().zip(reservations) {
        // What a borrower held is not unreserved use it may keep: it was lent, not given.
        if let Some(existing) = catalog.consumer(write.consumer)
            && existing.reservation.is_none()
            && existing.consumer_type.as_deref() != Some(PREEMPTIBLE)
        {
            for (provider, class, amount) in existing.entries() {
                totals.entry((provider, class.clone())).or_default().0 += amount;
            }
        }
        let preemptible = write.consumer_type.as_deref() == Some(PREEMPTIBLE);
        if reservation.is_some() || preemptible {
            continue;
        }
        for (provider, by_class) in &write.allocations {
            for (class, amount) in by_class {
                totals.entry((*provider, class.clone())).or_default().1 += amount;
            }
        }
    }
    totals
}

/// Replaces the allocations of every consumer in `writes`, atomically; `policy` says whether
/// unreserved consumers are kept out of fenced capacity.
pub fn set_allocations_with(
    catalog: &Catalog,
    writes: &[ConsumerWrite],
    now: Instant,
    policy: FencePolicy,
) -> Decision {
    let reservations = writes
        .iter()
        .map(|w| presented(catalog, w, now))
        .collect::<Result<Vec<_>, _>>()?;
    let mut changes = with_evictions(catalog, writes, &reservations, now)?;
    if policy == FencePolicy::Enforced {
        fence::check_unreserved(catalog, &unreserved_totals(catalog, writes, &reservations))?;
    }
    for change in &mut changes {
        if let Change::ConsumerSet {
            uuid,
            consumer: Some(consumer),
        } = change
            && let Some(idx) = writes.iter().position(|w| w.consumer == *uuid)
        {
            consumer.reservation = reservations[idx];
        }
    }
    changes.extend(consumed(catalog, &reservations));
    Ok(changes)
}

/// The leases under an unconsumed-lease release ([`crate::model::lease::IdleRelease`]) that
/// the presented `reservations` consume for the first time, marked consumed: nothing of them
/// is released any more. Their `updated_at` stays: the mark changes nothing they hold.
fn consumed(catalog: &Catalog, reservations: &[Option<ReservationId>]) -> Vec<Change> {
    let mut marked: Vec<Change> = Vec::new();
    for reservation in reservations.iter().flatten() {
        let Some(lease) = catalog.lease_of_reservation(*reservation) else {
            continue;
        };
        let first = lease.idle().is_some_and(|idle| !idle.consumed);
        let seen = marked
            .iter()
            .any(|c| matches!(c, Change::LeaseSet { id, .. } if *id == lease.id));
        if first && !seen {
            let mut lease = lease.clone();
            if let Some(idle) = lease.idle_mut() {
                idle.consumed = true;
            }
            marked.push(Change::LeaseSet {
                id: lease.id,
                lease: Some(Box::new(lease)),
            });
        }
    }
    marked
}

/// Checks capacity; when a reservation holder's write does not fit because preemptible
/// consumers borrowed the capacity, evicts them (newest first, each recorded) until it fits.
fn with_evictions(
    catalog: &Catalog,
    writes: &[ConsumerWrite],
    reservations: &[Option<ReservationId>],
    now: Instant,
) -> Decision {
    let mut all = writes.to_vec();
    let mut records = Vec::new();
    loop {
        let error = match capacity_checked(catalog, &all, now) {
            Ok(mut changes) => {
                records.append(&mut changes);
                return Ok(records);
            }
            Err(error) => error,
        };
        let Rejection::CapacityExceeded { provider, .. } = &error else {
            return Err(error);
        };
        let holder = writes
            .iter()
            .zip(reservations)
            .find(|(w, r)| r.is_some() && w.allocations.contains_key(provider));
        let Some((_, Some(reservation))) = holder else {
            return Err(error);
        };
        let Some(victim) = borrower_on(catalog, *provider, &all) else {
            return Err(error);
        };
        let lease = catalog
            .lease_of_reservation(*reservation)
            .expect("invariant: a presented reservation has a lease");
        records.extend(fence::preemption_records(
            lease,
            &[victim],
            "consumer.evicted",
            now,
        ));
        let existing = catalog
            .consumer(victim)
            .expect("invariant: borrowers exist");
        all.push(ConsumerWrite {
            consumer: victim,
            project_id: existing.project_id.clone(),
            user_id: existing.user_id.clone(),
            consumer_type: existing.consumer_type.clone(),
            generation: ConsumerGeneration::Unchecked,
            allocations: Allocations::new(),
            reservation: None,
        });
    }
}

/// The newest preemptible consumer on `provider` not already written in `writes`.
fn borrower_on(catalog: &Catalog, provider: ProviderId, writes: &[ConsumerWrite]) -> Option<Uuid> {
    catalog
        .consumers()
        .filter(|(uuid, c)| {
            c.consumer_type.as_deref() == Some(PREEMPTIBLE)
                && c.reservation.is_none()
                && c.allocations.contains_key(&provider)
                && !writes.iter().any(|w| w.consumer == *uuid)
        })
        .max_by_key(|(uuid, c)| (c.created_at, *uuid))
        .map(|(uuid, _)| uuid)
}

fn capacity_checked(catalog: &Catalog, writes: &[ConsumerWrite], now: Instant) -> Decision {
    let mut seen = BTreeSet::new();
    // (provider, class) -> (held before by these consumers, held after).
    let mut totals: BTreeMap<(ProviderId, ResourceClass), (u64, u64)> = BTreeMap::new();
    for write in writes {
        if !seen.insert(write.consumer) {
            return Err(Rejection::DuplicateConsumer(write.consumer));
        }
        check_generation(catalog, write)?;
        if let Some(existing) = catalog.consumer(write.consumer) {
            for (provider, class, amount) in existing.entries() {
                totals.entry((provider, class.clone())).or_default().0 += amount;
            }
        }
        for (provider, by_class) in &write.allocations {
            for (class, amount) in by_class {
                holder(catalog, *provider, class, *amount)?;
                totals.entry((*provider, class.clone())).or_default().1 += amount;
            }
        }
    }
    for ((provider, class), (before, after)) in &totals {
        let Some(found) = catalog.provider(*provider) else {
            continue;
        };
        let Some(record) = found.inventories().get(class) else {
            continue;
        };
        let used_after = found.used(class) - before + after;
        #[cfg(feature = "planted-defects")]
        if crate::planted::planted(crate::planted::Defect::SkipCapacityCheck) {
            continue;
        }
        if after > before && used_after as f64 > record.capacity_exact() {
            return Err(Rejection::CapacityExceeded {
                provider: *provider,
                class: class.as_str().to_owned(),
                requested: after - before,
                used: found.used(class) - before,
                capacity: record.capacity(),
            });
        }
    }
    // As Placement: the providers a write allocates from change generation; a write that
    // clears a consumer changes those it held.
    let mut touched: BTreeSet<ProviderId> = BTreeSet::new();
    for write in writes {
        match write.allocations.is_empty() {
            false => touched.extend(write.allocations.keys().copied()),
            true => touched.extend(
                catalog
                    .consumer(write.consumer)
                    .into_iter()
                    .flat_map(|c| c.entries().map(|(provider, _, _)| provider)),
            ),
        }
    }
    touched.retain(|provider| catalog.provider(*provider).is_some());
    let mut changes = Vec::with_capacity(writes.len() + touched.len());
    for write in writes {
        let existing = catalog.consumer(write.consumer);
        let consumer = (!write.allocations.is_empty()).then(|| Consumer {
            project_id: write.project_id.clone(),
            user_id: write.user_id.clone(),
            consumer_type: write
                .consumer_type
                .clone()
                .or_else(|| existing.and_then(|c| c.consumer_type.clone())),
            generation: existing.map_or(1, |c| c.generation + 1),
            allocations: write.allocations.clone(),
            reservation: None,
            created_at: existing.map_or(now, |c| c.created_at),
            updated_at: now,
        });
        if consumer.is_none() && existing.is_none() {
            continue;
        }
        changes.push(Change::ConsumerSet {
            uuid: write.consumer,
            consumer,
        });
    }
    for provider in touched {
        let found = catalog
            .provider(provider)
            .expect("invariant: touched providers exist");
        let mut row = found.row();
        row.generation += 1;
        row.updated_at = now;
        changes.push(Change::ProviderUpdated(row));
    }
    Ok(changes)
}

/// Removes every allocation of a consumer (`DELETE /allocations/{consumer}`).
pub fn delete_allocations(catalog: &Catalog, consumer: Uuid, now: Instant) -> Decision {
    let existing = catalog
        .consumer(consumer)
        .ok_or(Rejection::ConsumerNotFound(consumer))?;
    let write = ConsumerWrite {
        reservation: None,
        consumer,
        project_id: existing.project_id.clone(),
        user_id: existing.user_id.clone(),
        consumer_type: existing.consumer_type.clone(),
        generation: ConsumerGeneration::Unchecked,
        allocations: Allocations::new(),
    };
    // As Placement: deleting a consumer's allocations leaves its providers' generations as
    // they were (a write that clears them through `PUT` or `POST` changes them).
    let changes = set_allocations(catalog, &[write], now)?;
    Ok(changes
        .into_iter()
        .filter(|change| !matches!(change, Change::ProviderUpdated(_)))
        .collect())
}

/// One provider's new inventories in a reshape.
#[derive(Debug, Clone, PartialEq)]
pub struct InventoryWrite {
    /// The provider.
    pub provider: ProviderId,
    /// The generation the caller last saw.
    pub generation: u64,
    /// The full new set.
    pub inventories: BTreeMap<ResourceClass, crate::model::inventory::Inventory>,
}

/// Replaces inventories and allocations together (Placement's reshaper): consumers in `writes`
/// first release what they hold, then inventories change, then the consumers take their new
/// allocations; every check runs against the state it would see, and nothing is written unless
/// everything passes.
pub fn reshape(
    catalog: &Catalog,
    inventories: &[InventoryWrite],
    writes: &[ConsumerWrite],
    now: Instant,
) -> Decision {
    reshape_with(catalog, inventories, writes, now, FencePolicy::Enforced)
}

/// [`reshape`] with the fence policy the service runs with.
pub fn reshape_with(
    catalog: &Catalog,
    inventories: &[InventoryWrite],
    writes: &[ConsumerWrite],
    now: Instant,
    policy: FencePolicy,
) -> Decision {
    for write in writes {
        check_generation(catalog, write)?;
    }
    for write in inventories {
        let found = catalog
            .provider(write.provider)
            .ok_or(Rejection::ProviderNotFound(write.provider))?;
        if found.generation() != write.generation {
            return Err(Rejection::GenerationConflict {
                uuid: write.provider,
                expected: write.generation,
                actual: found.generation(),
            });
        }
    }
    // As Placement: the providers first keep their old inventories beside the new ones (so that
    // allocations can move onto the new classes before the old ones go), then the allocations
    // are replaced, then each provider's inventories are set to the new ones alone, which
    // refuses to remove a class still in use. Each step changes the generations it touches.
    let mut draft = catalog.clone();
    let mut changes = Vec::new();
    let mut step = |draft: &mut Catalog, batch: Vec<Change>| {
        draft.apply(&batch);
        changes.extend(batch);
    };
    let generation_of = |draft: &Catalog, provider: ProviderId| {
        draft
            .provider(provider)
            .map_or(0, crate::model::provider::Provider::generation)
    };
    for write in inventories.iter().filter(|w| !w.inventories.is_empty()) {
        let mut interim = draft
            .provider(write.provider)
            .map(|p| p.inventories().clone())
            .unwrap_or_default();
        interim.extend(write.inventories.clone());
        let batch = crate::decide::inventory::set_inventories(
            &draft,
            write.provider,
            Some(generation_of(&draft, write.provider)),
            interim,
            now,
        )?;
        step(&mut draft, batch);
    }
    let fresh: Vec<ConsumerWrite> = writes
        .iter()
        .map(|w| ConsumerWrite {
            reservation: None,
            generation: ConsumerGeneration::Unchecked,
            ..w.clone()
        })
        .collect();
    let mut taken = set_allocations_with(&draft, &fresh, now, policy)?;
    for change in &mut taken {
        // Consumers keep their history: generation and creation time continue from before.
        let Change::ConsumerSet {
            uuid,
            consumer: Some(consumer),
        } = change
        else {
            continue;
        };
        if let Some(before) = catalog.consumer(*uuid) {
            consumer.generation = before.generation + 1;
            consumer.created_at = before.created_at;
        }
    }
    step(&mut draft, taken);
    for write in inventories {
        let batch = crate::decide::inventory::set_inventories(
            &draft,
            write.provider,
            Some(generation_of(&draft, write.provider)),
            write.inventories.clone(),
            now,
        )?;
        step(&mut draft, batch);
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::inventory::{self, NewProvider};
    use crate::model::inventory::{FullReservation, Inventory};
    use proptest::prelude::*;

    const T0: Instant = Instant::from_micros(7);

    fn uuid(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn pid(n: u128) -> ProviderId {
        ProviderId::from_u128(n)
    }

    fn vcpu() -> ResourceClass {
        ResourceClass::parse("VCPU").expect("class")
    }

    /// Providers 1..=n, each with `total` VCPU at ratio 1.0 and `max_unit` 4.
    fn catalog(n: u128, total: u64) -> Catalog {
        let mut catalog = Catalog::new();
        for idx in 1..=n {
            let new = NewProvider {
                uuid: pid(idx),
                name: format!("cn{idx}"),
                parent: None,
                availability_zone: None,
            };
            let changes = inventory::create_provider(&catalog, &new, T0).expect("create");
            catalog.apply(&changes);
            let record =
                Inventory::new(total, 0, [1, 4, 1], 1.0, FullReservation::Allowed).expect("valid");
            let changes = inventory::set_inventories(
                &catalog,
                pid(idx),
                None,
                BTreeMap::from([(vcpu(), record)]),
                T0,
            )
            .expect("inventory");
            catalog.apply(&changes);
        }
        catalog
    }

    fn write(
        consumer: u128,
        generation: ConsumerGeneration,
        held: &[(u128, u64)],
    ) -> ConsumerWrite {
        let mut allocations = Allocations::new();
        for (provider, amount) in held {
            allocations
                .entry(pid(*provider))
                .or_default()
                .insert(vcpu(), *amount);
        }
        ConsumerWrite {
            reservation: None,
            consumer: uuid(1000 + consumer),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation,
            allocations,
        }
    }

    fn apply(
        catalog: &mut Catalog,
        decision: impl FnOnce(&Catalog) -> Decision,
    ) -> Result<(), Rejection> {
        let changes = decision(catalog)?;
        catalog.apply(&changes);
        catalog.check_invariants().expect("invariants");
        Ok(())
    }

    #[test]
    fn capacity_unit_rules_and_generations() {
        let mut catalog = catalog(1, 8);
        apply(&mut catalog, |c| {
            set_allocations(c, &[write(1, ConsumerGeneration::New, &[(1, 4)])], T0)
        })
        .expect("fits");
        assert_eq!(catalog.provider(pid(1)).expect("p").used(&vcpu()), 4);
        assert_eq!(catalog.provider(pid(1)).expect("p").generation(), 2);
        assert_eq!(catalog.consumer(uuid(1001)).expect("c").generation, 1);
        let over = set_allocations(
            &catalog,
            &[write(2, ConsumerGeneration::New, &[(1, 4), (1, 4)])],
            T0,
        );
        assert!(
            over.is_ok(),
            "a map holds one amount per class: the second entry replaces the first"
        );
        let too_big = set_allocations(
            &catalog,
            &[write(2, ConsumerGeneration::New, &[(1, 5)])],
            T0,
        );
        assert!(matches!(
            too_big,
            Err(Rejection::AllocationUnitRules { .. })
        ));
        apply(&mut catalog, |c| {
            set_allocations(c, &[write(2, ConsumerGeneration::New, &[(1, 4)])], T0)
        })
        .expect("last units");
        let full = set_allocations(
            &catalog,
            &[write(3, ConsumerGeneration::New, &[(1, 1)])],
            T0,
        );
        assert!(matches!(
            full,
            Err(Rejection::CapacityExceeded {
                requested: 1,
                used: 8,
                capacity: 8,
                ..
            })
        ));
        let stale = set_allocations(
            &catalog,
            &[write(1, ConsumerGeneration::Is(0), &[(1, 1)])],
            T0,
        );
        assert!(matches!(
            stale,
            Err(Rejection::ConsumerGenerationConflict {
                expected: Some(1),
                got: Some(0),
                ..
            })
        ));
        let exists = set_allocations(
            &catalog,
            &[write(1, ConsumerGeneration::New, &[(1, 1)])],
            T0,
        );
        assert!(matches!(
            exists,
            Err(Rejection::ConsumerGenerationConflict {
                expected: Some(1),
                got: None,
                ..
            })
        ));
        // Moving a consumer's units within a full provider is not an increase.
        apply(&mut catalog, |c| {
            set_allocations(c, &[write(1, ConsumerGeneration::Is(1), &[(1, 3)])], T0)
        })
        .expect("shrink");
        let unknown = set_allocations(
            &catalog,
            &[write(4, ConsumerGeneration::New, &[(9, 1)])],
            T0,
        );
        assert_eq!(unknown, Err(Rejection::AllocationProviderNotFound(pid(9))));
        apply(&mut catalog, |c| delete_allocations(c, uuid(1001), T0)).expect("delete");
        assert_eq!(catalog.provider(pid(1)).expect("p").used(&vcpu()), 4);
        assert_eq!(
            delete_allocations(&catalog, uuid(1001), T0),
            Err(Rejection::ConsumerNotFound(uuid(1001)))
        );
        assert_eq!(
            inventory::delete_provider(&catalog, pid(1)),
            Err(Rejection::ProviderInUse(pid(1)))
        );
    }

    #[test]
    fn reshape_moves_allocations_with_their_inventory() {
        let mut catalog = catalog(2, 8);
        apply(&mut catalog, |c| {
            set_allocations(c, &[write(1, ConsumerGeneration::New, &[(1, 4)])], T0)
        })
        .expect("held");
        // Move VCPU from provider 1 to provider 2: removing it alone is refused while in use.
        assert!(matches!(
            inventory::set_inventories(&catalog, pid(1), None, BTreeMap::new(), T0),
            Err(Rejection::InventoryInUse { .. })
        ));
        let generation = catalog.provider(pid(1)).expect("p1").generation();
        let inventories = [InventoryWrite {
            provider: pid(1),
            generation,
            inventories: BTreeMap::new(),
        }];
        let moved = [write(1, ConsumerGeneration::Is(1), &[(2, 4)])];
        apply(&mut catalog, |c| reshape(c, &inventories, &moved, T0)).expect("reshaped");
        assert_eq!(catalog.provider(pid(2)).expect("p2").used(&vcpu()), 4);
        assert!(
            catalog
                .provider(pid(1))
                .expect("p1")
                .inventories()
                .is_empty()
        );
        assert_eq!(catalog.consumer(uuid(1001)).expect("c").generation, 2);
        let stale = reshape(&catalog, &[], &moved, T0);
        assert!(matches!(
            stale,
            Err(Rejection::ConsumerGenerationConflict { .. })
        ));
    }

    #[test]
    fn batches_are_all_or_nothing() {
        let catalog = catalog(2, 4);
        let batch = [
            write(1, ConsumerGeneration::New, &[(1, 4)]),
            write(2, ConsumerGeneration::New, &[(2, 4), (1, 1)]),
        ];
        // The second consumer asks for one unit of a provider the first fills: nothing is written.
        let refused = set_allocations(&catalog, &batch, T0);
        assert!(matches!(refused, Err(Rejection::CapacityExceeded { .. })));
    }

    proptest! {
        /// Whatever sequence of writes is attempted, accepted ones never over-commit, and the
        /// catalog's usage always equals the sum of what consumers hold.
        #[test]
        fn accepted_writes_never_over_commit(ops in proptest::collection::vec((0u128..6, 1u128..4, 0u64..5), 1..60)) {
            let mut catalog = catalog(3, 8);
            for (consumer, provider, amount) in ops {
                let held: Vec<(u128, u64)> = if amount == 0 { vec![] } else { vec![(provider, amount)] };
                let request = [write(consumer, ConsumerGeneration::Unchecked, &held)];
                let _ = apply(&mut catalog, |c| set_allocations(c, &request, T0));
                for provider in catalog.providers() {
                    prop_assert!(provider.used(&vcpu()) <= 8);
                }
            }
        }
    }
}
