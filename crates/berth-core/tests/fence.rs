//! The fence as a property, through the public API only: random leases (host and instance
//! reservations on four hosts, windows around "now"), random unreserved, preemptible and
//! presented allocation writes, lifecycle events fired in due order by a late engine, lease
//! deletions and candidate probes, each applied to a catalog. After every step: the catalog's
//! invariants hold, no provider is over-committed, unreserved consumers plus what leases fence
//! fit every host, every ACTIVE reservation could still get its full capacity, and unreserved
//! candidates offer exactly the hosts where the same unreserved write is accepted. At the end, a
//! restart (the catalog rebuilt from its rows) answers as the catalog did, and a copy of the
//! catalog changes without changing it.

use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations};
use berth_core::decide::lease::{NewLease, create_lease, delete_lease};
use berth_core::decide::lifecycle::fire_event;
use berth_core::model::consumer::PREEMPTIBLE;
use berth_core::model::consumer::{Allocations, Consumer};
use berth_core::model::fence;
use berth_core::model::lease::{
    Affinity, Lease, LeaseStatus, Reservation, ReservationSpec, instance_amounts,
};
use berth_core::model::ledger::Window;
use berth_core::model::provider::Attributes;
use berth_core::query::candidate_request::{CandidateRequest, Unanswerable, resolve};
use berth_core::query::candidates::{CandidateQuery, Group, allocation_candidates};
use berth_core::query::presentation::FencePolicy;
use berth_core::{
    Catalog, Change, Instant, LeaseId, ProviderId, Rejection, ReservationId, ResourceClass,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

/// Hosts in the world, each 8 VCPU, 16 GiB and 100 GB.
const HOSTS: u128 = 4;
/// Consumers the random writes choose from.
const CONSUMERS: usize = 8;
/// Lease projects, and a project that never holds a lease.
const PROJECTS: [&str; 2] = ["p0", "p1"];
const STRANGER: &str = "p-other";

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("a class name")
}

fn vcpu() -> ResourceClass {
    class("VCPU")
}

mod support;
use support::{TICK, World};

fn world() -> World {
    World::with_hosts(HOSTS, |_| (None, Attributes::new()))
}

/// Every reservation holding hosts, with its lease, in lease-id order; only those of active
/// leases when `active`.
fn reservations(w: &World, active: bool) -> Vec<(&Lease, &Reservation)> {
    let mut leases: Vec<&Lease> = w
        .catalog
        .leases()
        .filter(|l| !active || l.status == LeaseStatus::Active)
        .collect();
    leases.sort_by_key(|l| l.id);
    leases
        .into_iter()
        .flat_map(|l| l.reservations.iter().map(move |r| (l, r)))
        .filter(|(_, r)| !r.hosts.is_empty())
        .collect()
}

fn consumer_uuid(idx: usize) -> Uuid {
    Uuid::from_u128(0xC000 + idx as u128)
}

/// A consumer's type never changes: a preemptible consumer that turns into an instance while it
/// sits in fenced capacity is a known gap (see `a_preemptible_consumer_cannot_launder_...`).
fn consumer_type(idx: usize) -> Option<String> {
    match idx % 4 {
        3 => Some(PREEMPTIBLE.to_owned()),
        2 => None,
        _ => Some("INSTANCE".to_owned()),
    }
}

fn is_preemptible(consumer: &Consumer) -> bool {
    consumer.consumer_type.as_deref() == Some(PREEMPTIBLE)
}

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Spec {
    Hosts {
        min: u32,
        extra: u32,
    },
    Instances {
        vcpus: u64,
        memory_mb: u64,
        disk_gb: u64,
        amount: u32,
        affinity: usize,
    },
}

impl Spec {
    fn build(&self) -> ReservationSpec {
        match self {
            Spec::Hosts { min, extra } => ReservationSpec::Host {
                min: *min,
                max: min + extra,
                hypervisor_properties: String::new().into(),
                resource_properties: String::new().into(),
                before_end: "default".into(),
            },
            Spec::Instances {
                vcpus,
                memory_mb,
                disk_gb,
                amount,
                affinity,
            } => ReservationSpec::Instance {
                vcpus: *vcpus,
                memory_mb: *memory_mb,
                disk_gb: *disk_gb,
                amount: *amount,
                affinity: [Affinity::Any, Affinity::SameHost, Affinity::DifferentHosts][*affinity],
                resource_properties: String::new().into(),
            },
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// A lease from `now + start` for `len` ticks.
    Lease {
        start: i64,
        len: i64,
        project: usize,
        specs: Vec<Spec>,
    },
    /// A write that presents nothing (unless the project holds a host reservation there).
    Unreserved {
        consumer: usize,
        project: usize,
        parts: Vec<(usize, u64, u64)>,
    },
    /// A write by the holder of a reservation (or a stranger posing as one): one slot, or
    /// some of a held host, plus `extra` VCPU.
    Holder {
        consumer: usize,
        pick: usize,
        host: usize,
        extra: u64,
        named: bool,
        stranger: bool,
    },
    /// A consumer removed.
    Remove { consumer: usize },
    /// The clock moves on and the engine fires up to `budget` due events, earliest first.
    Advance { ticks: i64, budget: usize },
    /// A lease deleted.
    Delete { pick: usize },
    /// Candidates compared with writes.
    Probe {
        vcpus: u64,
        memory_mb: u64,
        preemptible: bool,
    },
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    let hosts = (1u32..3, 0u32..2).prop_map(|(min, extra)| Spec::Hosts { min, extra });
    let instances = (
        prop::sample::select(vec![2u64, 4, 6]),
        prop::sample::select(vec![2_048u64, 4_096, 8_192]),
        prop::sample::select(vec![0u64, 10]),
        1u32..4,
        0usize..3,
    )
        .prop_map(
            |(vcpus, memory_mb, disk_gb, amount, affinity)| Spec::Instances {
                vcpus,
                memory_mb,
                disk_gb,
                amount,
                affinity,
            },
        );
    prop_oneof![1 => hosts, 2 => instances]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let part = (
        0usize..HOSTS as usize,
        1u64..9,
        prop::sample::select(vec![0u64, 2_048, 8_192]),
    );
    prop_oneof![
        3 => (-1i64..3, 1i64..6, 0usize..2, prop::collection::vec(spec_strategy(), 1..3))
            .prop_map(|(start, len, project, specs)| Op::Lease { start, len, project, specs }),
        4 => (0..CONSUMERS, 0usize..3, prop::collection::vec(part, 1..3))
            .prop_map(|(consumer, project, parts)| Op::Unreserved { consumer, project, parts }),
        4 => (0..CONSUMERS, any::<usize>(), any::<usize>(), prop::sample::select(vec![0u64, 0, 0, 1, 4]), any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(consumer, pick, host, extra, named, stranger)| Op::Holder { consumer, pick, host, extra, named, stranger }),
        1 => (0..CONSUMERS).prop_map(|consumer| Op::Remove { consumer }),
        4 => (0i64..3, 1usize..4).prop_map(|(ticks, budget)| Op::Advance { ticks, budget }),
        1 => any::<usize>().prop_map(|pick| Op::Delete { pick }),
        2 => (1u64..9, prop::sample::select(vec![0u64, 4_096, 12_288]), prop::bool::weighted(0.2))
            .prop_map(|(vcpus, memory_mb, preemptible)| Op::Probe { vcpus, memory_mb, preemptible }),
    ]
}

fn new_lease(w: &mut World, start: i64, len: i64, project: usize, specs: &[Spec]) -> NewLease {
    NewLease {
        id: LeaseId::new(w.id()),
        name: "lease".into(),
        project_id: PROJECTS[project % PROJECTS.len()].into(),
        user_id: "u".into(),
        start: Instant::from_micros((w.now + start) * TICK),
        end: Instant::from_micros((w.now + start + len) * TICK),
        before_end: None,
        reservations: specs
            .iter()
            .map(|s| (ReservationId::new(w.id()), s.build()))
            .collect(),
        event_ids: [w.id(), w.id(), w.id()],
        notice_lead: berth_core::Span::from_micros(TICK),
    }
}

fn lease(
    w: &mut World,
    start: i64,
    len: i64,
    project: usize,
    specs: &[Spec],
) -> Result<(), TestCaseError> {
    let new = new_lease(w, start, len, project, specs);
    let horizon = Instant::from_micros((w.now + 200) * TICK);
    match create_lease(
        &w.catalog,
        &new,
        w.at(),
        &berth_core::decide::admission::Search::until(horizon),
    ) {
        Ok((changes, _)) => w.apply(&changes),
        Err(Rejection::DoesNotFit(_)) => {}
        // A window that is already over is refused outright.
        Err(Rejection::BadLease(_)) if start + len <= 0 => {}
        Err(other) => prop_assert!(false, "unexpected rejection {:?}", other),
    }
    Ok(())
}

/// Applies a write when it is accepted; returns whether it was.
fn write(w: &mut World, write: ConsumerWrite) -> bool {
    match set_allocations(&w.catalog, &[write], w.at()) {
        Ok(changes) => {
            w.apply(&changes);
            true
        }
        Err(_) => false,
    }
}

fn consumer_write(consumer: usize, project: &str, allocations: Allocations) -> ConsumerWrite {
    ConsumerWrite {
        consumer: consumer_uuid(consumer),
        project_id: project.to_owned(),
        user_id: "u".into(),
        consumer_type: consumer_type(consumer),
        generation: ConsumerGeneration::Unchecked,
        allocations,
        reservation: None,
    }
}

fn unreserved(w: &mut World, consumer: usize, project: usize, parts: &[(usize, u64, u64)]) {
    let mut allocations = Allocations::new();
    for (host, vcpus, memory_mb) in parts {
        let on = allocations.entry(w.hosts[*host]).or_default();
        on.insert(vcpu(), *vcpus);
        if *memory_mb > 0 {
            on.insert(class("MEMORY_MB"), *memory_mb);
        }
    }
    let project = [PROJECTS[0], PROJECTS[1], STRANGER][project % 3];
    write(w, consumer_write(consumer, project, allocations));
}

/// What a holder of `reservation` asks for on `host`.
fn holder_allocations(reservation: &Reservation, host: ProviderId, extra: u64) -> Allocations {
    let mut on = BTreeMap::new();
    match &reservation.spec {
        ReservationSpec::Instance {
            vcpus,
            memory_mb,
            disk_gb,
            ..
        } => {
            on.insert(fence::reservation_class(reservation.id), 1);
            for (class, amount) in instance_amounts(*vcpus, *memory_mb, *disk_gb, 1) {
                on.insert(class, amount);
            }
            *on.entry(vcpu()).or_insert(0) += extra;
        }
        _ => {
            on.insert(vcpu(), 1 + extra);
            on.insert(class("MEMORY_MB"), 1_024);
        }
    }
    BTreeMap::from([(host, on)])
}

fn holder(
    w: &mut World,
    consumer: usize,
    pick: (usize, usize),
    extra: u64,
    named: bool,
    stranger: bool,
) {
    let found = match reservations(w, true) {
        active if !active.is_empty() && !pick.0.is_multiple_of(4) => active,
        _ => reservations(w, false),
    };
    let Some((lease, reservation)) = found.get(pick.0 % found.len().max(1)) else {
        return;
    };
    let host = reservation.hosts[pick.1 % reservation.hosts.len()].0;
    let project = match stranger {
        true => STRANGER.to_owned(),
        false => lease.project_id.to_string(),
    };
    let mut request = consumer_write(
        consumer,
        &project,
        holder_allocations(reservation, host, extra),
    );
    request.reservation = named.then_some(reservation.id);
    write(w, request);
}

fn advance(w: &mut World, ticks: i64, budget: usize) {
    w.now += ticks;
    for _ in 0..budget {
        let Some((_, kind, id)) = w.catalog.due_events(w.at()).first().copied() else {
            break;
        };
        let changes = fire_event(&w.catalog, id, kind, w.at()).expect("a due event fires");
        w.apply(&changes);
    }
}

fn delete(w: &mut World, pick: usize) {
    let mut ids: Vec<LeaseId> = w.catalog.leases().map(|l| l.id).collect();
    ids.sort();
    let Some(id) = ids.get(pick % ids.len().max(1)).copied() else {
        return;
    };
    let changes = delete_lease(&w.catalog, id, w.at()).expect("an existing lease is deleted");
    w.apply(&changes);
}

fn step(w: &mut World, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Lease {
            start,
            len,
            project,
            specs,
        } => lease(w, *start, *len, *project, specs)?,
        Op::Unreserved {
            consumer,
            project,
            parts,
        } => unreserved(w, *consumer, *project, parts),
        Op::Holder {
            consumer,
            pick,
            host,
            extra,
            named,
            stranger,
        } => {
            holder(w, *consumer, (*pick, *host), *extra, *named, *stranger);
        }
        Op::Remove { consumer } => {
            write(w, consumer_write(*consumer, STRANGER, Allocations::new()));
        }
        Op::Advance { ticks, budget } => advance(w, *ticks, *budget),
        Op::Delete { pick } => delete(w, *pick),
        Op::Probe {
            vcpus,
            memory_mb,
            preemptible,
        } => probe(w, *vcpus, *memory_mb, *preemptible)?,
    }
    check(w)
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

/// Units of `class` on `host` held by consumers that present nothing and may not be evicted.
fn unreserved_use(catalog: &Catalog, host: ProviderId, class: &ResourceClass) -> u64 {
    catalog
        .consumers()
        .filter(|(_, c)| c.reservation.is_none() && !is_preemptible(c))
        .map(|(_, c)| c.amount(host, class))
        .sum()
}

/// No provider holds more than its capacity of any class.
fn check_no_over_commit(catalog: &Catalog) -> Result<(), TestCaseError> {
    for provider in catalog.providers() {
        for (class, used) in provider.usages() {
            let record = provider.inventories().get(class);
            prop_assert!(
                record.is_some_and(|r| *used as f64 <= r.capacity_exact()),
                "{} over-committed on {}: {} used",
                class.as_str(),
                provider.name(),
                used
            );
        }
    }
    Ok(())
}

/// What unreserved consumers hold plus what leases fence fits every host, now or later, and no
/// unreserved consumer sits on a host a host reservation holds now or later.
fn check_fence_fits(catalog: &Catalog) -> Result<(), TestCaseError> {
    for provider in catalog.providers() {
        let fenced = provider.fence();
        for (class, record) in provider.inventories() {
            let free = unreserved_use(catalog, provider.uuid(), class);
            prop_assert!(
                !(fenced.whole && free > 0),
                "{} unreserved {} on {}, a host a host reservation holds",
                free,
                class.as_str(),
                provider.name()
            );
            let total = free + fenced.amount(class);
            prop_assert!(
                total as f64 <= record.capacity_exact(),
                "{}: {} unreserved + {} fenced {} exceed the capacity",
                provider.name(),
                free,
                fenced.amount(class),
                class.as_str()
            );
        }
    }
    Ok(())
}

/// Every ACTIVE reservation could still get its full capacity: a host reservation's hosts carry
/// only its own consumers (and preemptible ones), and on each host of an instance reservation
/// the capacity left by unreserved consumers holds every slot.
fn check_active(catalog: &Catalog) -> Result<(), TestCaseError> {
    let active = catalog.leases().filter(|l| l.status == LeaseStatus::Active);
    for reservation in active.flat_map(|l| &l.reservations) {
        for (host, slots) in &reservation.hosts {
            let provider = catalog.provider(*host).expect("a held host exists");
            match &reservation.spec {
                ReservationSpec::Host { .. } => {
                    for (uuid, c) in catalog.consumers() {
                        let foreign = c.reservation != Some(reservation.id) && !is_preemptible(c);
                        prop_assert!(
                            !(foreign && c.allocations.contains_key(host)),
                            "consumer {} sits on {}, held by reservation {}",
                            uuid,
                            provider.name(),
                            reservation.id
                        );
                    }
                }
                ReservationSpec::Instance {
                    vcpus,
                    memory_mb,
                    disk_gb,
                    ..
                } => {
                    for (class, need) in
                        instance_amounts(*vcpus, *memory_mb, *disk_gb, u64::from(*slots))
                    {
                        let capacity = provider
                            .inventories()
                            .get(&class)
                            .map_or(0.0, |r| r.capacity_exact());
                        let taken = unreserved_use(catalog, *host, &class);
                        prop_assert!(
                            capacity - taken as f64 >= need as f64,
                            "reservation {} cannot get {} {} on {}: {} taken",
                            reservation.id,
                            need,
                            class.as_str(),
                            provider.name(),
                            taken
                        );
                    }
                }
                ReservationSpec::FloatingIp { .. } => {}
            }
        }
    }
    Ok(())
}

fn check(w: &World) -> Result<(), TestCaseError> {
    check_no_over_commit(&w.catalog)?;
    check_fence_fits(&w.catalog)?;
    check_active(&w.catalog)
}

/// A restart (the catalog rebuilt in bulk from its rows) answers as the catalog built change by
/// change does: the same rows, providers (fences included), due events and ledger.
fn check_restart(catalog: &Catalog) -> Result<(), TestCaseError> {
    let rebuilt = Catalog::from_rows(catalog.to_rows());
    prop_assert_eq!(rebuilt.to_rows(), catalog.to_rows());
    prop_assert!(
        rebuilt.providers().eq(catalog.providers()),
        "providers or fences differ"
    );
    let end = Instant::from_micros(i64::MAX);
    prop_assert_eq!(rebuilt.due_events(end), catalog.due_events(end));
    let (ledger, before) = (rebuilt.ledger(), catalog.ledger());
    prop_assert_eq!(ledger.len(), before.len());
    prop_assert!(ledger.hosts().eq(before.hosts()), "hosts held differ");
    for host in before.hosts() {
        prop_assert_eq!(
            ledger.holds_on(host, Window::ALWAYS),
            before.holds_on(host, Window::ALWAYS)
        );
        prop_assert_eq!(
            ledger.peak(host, Window::ALWAYS, &[]),
            before.peak(host, Window::ALWAYS, &[])
        );
        let (from, until) = (Instant::from_micros(i64::MIN), end);
        prop_assert_eq!(
            ledger.release_times(host, from, until),
            before.release_times(host, from, until)
        );
    }
    Ok(())
}

/// A copy of the catalog (the writers' working copy) shares the lease indexes until one side
/// changes them: deleting every lease from the copy leaves the original as it was.
fn check_copy(catalog: &Catalog) -> Result<(), TestCaseError> {
    let end = Instant::from_micros(i64::MAX);
    let state = |c: &Catalog| (c.to_rows(), c.due_events(end), c.ledger().len());
    let before = state(catalog);
    let mut copy = catalog.clone();
    let deletions: Vec<Change> = catalog
        .leases()
        .map(|lease| Change::LeaseSet {
            id: lease.id,
            lease: None,
        })
        .collect();
    copy.apply(&deletions);
    prop_assert!(copy.leases().next().is_none() && copy.next_due().is_none());
    prop_assert!(copy.ledger().is_empty());
    prop_assert_eq!(state(catalog), before);
    Ok(())
}

/// Candidates offer exactly the hosts where a fresh consumer's same write is accepted:
/// unreserved requests and writes see the fence, preemptible ones do not.
fn probe(w: &World, vcpus: u64, memory_mb: u64, preemptible: bool) -> Result<(), TestCaseError> {
    let mut resources = vec![(vcpu(), vcpus)];
    if memory_mb > 0 {
        resources.push((class("MEMORY_MB"), memory_mb));
    }
    let query = CandidateQuery {
        groups: vec![Group {
            resources: resources.clone(),
            ..Group::default()
        }],
        nested_aware: true,
        unreserved: !preemptible,
        ..CandidateQuery::default()
    };
    let offered: BTreeSet<ProviderId> = allocation_candidates(&w.catalog, &query)
        .candidates
        .iter()
        .map(|c| c.anchor)
        .collect();
    for host in &w.hosts {
        let request = ConsumerWrite {
            consumer: Uuid::from_u128(0xF00D),
            project_id: STRANGER.into(),
            user_id: "u".into(),
            consumer_type: Some(if preemptible { PREEMPTIBLE } else { "INSTANCE" }.to_owned()),
            generation: ConsumerGeneration::New,
            allocations: BTreeMap::from([(*host, resources.iter().cloned().collect())]),
            reservation: None,
        };
        let accepted = set_allocations(&w.catalog, &[request], w.at()).is_ok();
        prop_assert_eq!(
            offered.contains(host),
            accepted,
            "candidates and writes disagree on {} for {:?} (preemptible: {})",
            host,
            resources,
            preemptible
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever leases, writes, events and deletions come, the fence keeps every reservation's
    /// capacity for it and nothing is over-committed; at the end a restart answers alike, and a
    /// copy changes alone.
    #[test]
    fn the_fence_keeps_every_reservation_whole(ops in prop::collection::vec(op_strategy(), 1..60)) {
        let mut w = world();
        for op in &ops {
            step(&mut w, op)?;
        }
        check_restart(&w.catalog)?;
        check_copy(&w.catalog)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Examples
// ---------------------------------------------------------------------------------------------

/// A world with one lease starting now (`p0`: one whole host and one 4-VCPU slot), started.
fn started() -> (World, Lease) {
    let mut w = world();
    let specs = [
        Spec::Hosts { min: 1, extra: 0 },
        Spec::Instances {
            vcpus: 4,
            memory_mb: 4_096,
            disk_gb: 10,
            amount: 1,
            affinity: 0,
        },
    ];
    lease(&mut w, 0, 2, 0, &specs).expect("created");
    advance(&mut w, 0, 4);
    check(&w).expect("the fence holds");
    let lease = w.catalog.leases().next().expect("admitted").clone();
    assert_eq!(lease.status, LeaseStatus::Active);
    (w, lease)
}

#[test]
fn holders_get_what_their_reservations_hold_and_lose_it_at_the_end() {
    let (mut w, lease) = started();
    let host = lease.reservations[0].hosts[0].0;
    let slot = lease.reservations[1].hosts[0].0;
    let on = |h: ProviderId, n: u64| BTreeMap::from([(h, BTreeMap::from([(vcpu(), n)]))]);
    assert!(
        !write(&mut w, consumer_write(0, STRANGER, on(host, 1))),
        "fenced"
    );
    assert!(
        !write(&mut w, consumer_write(0, STRANGER, on(slot, 5))),
        "fenced"
    );
    assert!(
        write(&mut w, consumer_write(0, STRANGER, on(slot, 4))),
        "left outside the slot"
    );
    assert!(
        write(&mut w, consumer_write(1, "p0", on(host, 8))),
        "the lease's project"
    );
    holder(&mut w, 4, (1, 0), 0, false, false);
    assert_eq!(
        w.catalog.consumers_of_reservation(lease.reservations[1].id),
        [consumer_uuid(4)]
    );
    check(&w).expect("the fence holds");
    advance(&mut w, 2, 4);
    assert_eq!(
        w.catalog.lease(lease.id).map(|l| l.status),
        Some(LeaseStatus::Terminated)
    );
    let left: Vec<Uuid> = w.catalog.consumers().map(|(uuid, _)| uuid).collect();
    assert_eq!(
        left,
        [consumer_uuid(0)],
        "the holders were removed, the unreserved stayed"
    );
    check(&w).expect("the fence holds");
}

#[test]
fn a_host_reservation_is_presented_while_it_holds_the_host_not_before() {
    let (mut w, lease) = started();
    let host = lease.reservations[0].hosts[0].0;
    // The same project holds the same host again later, and its consumer writes now: the
    // reservation holding the host now is the one presented.
    let later = new_lease(&mut w, 5, 2, 0, &[Spec::Hosts { min: 1, extra: 0 }]);
    let horizon = Instant::from_micros((w.now + 200) * TICK);
    let search = berth_core::decide::admission::Search::until(horizon);
    let (changes, _) = create_lease(&w.catalog, &later, w.at(), &search).expect("admitted later");
    w.apply(&changes);
    let on = BTreeMap::from([(host, BTreeMap::from([(vcpu(), 2)]))]);
    assert!(write(&mut w, consumer_write(1, "p0", on)));
    assert_eq!(
        w.catalog.consumers_of_reservation(lease.reservations[0].id),
        [consumer_uuid(1)]
    );
    assert!(
        w.catalog
            .consumers_of_reservation(later.reservations[0].0)
            .is_empty()
    );
    check(&w).expect("the fence holds");
}

/// A preemptible consumer on the held host of a running lease.
fn borrowing() -> (World, ProviderId) {
    let (mut w, lease) = started();
    let host = lease.reservations[0].hosts[0].0;
    let on = BTreeMap::from([(host, BTreeMap::from([(vcpu(), 2)]))]);
    assert!(
        write(&mut w, consumer_write(3, STRANGER, on)),
        "preemptible borrows"
    );
    (w, host)
}

#[test]
fn a_preemptible_consumer_cannot_launder_itself_into_fenced_capacity() {
    let (w, host) = borrowing();
    let mut request = consumer_write(
        3,
        STRANGER,
        BTreeMap::from([(host, BTreeMap::from([(vcpu(), 2)]))]),
    );
    request.consumer_type = Some("INSTANCE".into());
    // What a borrower holds was lent, not given: rewriting it as unreserved is fenced.
    let decided = set_allocations(&w.catalog, &[request], w.at());
    assert!(
        matches!(decided, Err(Rejection::Fenced { .. })),
        "{decided:?}"
    );
}

#[test]
fn a_batch_cannot_hand_a_borrowers_capacity_to_an_unreserved_consumer() {
    let (w, host) = borrowing();
    let on = BTreeMap::from([(host, BTreeMap::from([(vcpu(), 2)]))]);
    let batch = [
        consumer_write(3, STRANGER, Allocations::new()),
        consumer_write(0, STRANGER, on),
    ];
    // Nor can a batch hand a borrower's capacity to an unreserved consumer.
    let decided = set_allocations(&w.catalog, &batch, w.at());
    assert!(
        matches!(decided, Err(Rejection::Fenced { .. })),
        "{decided:?}"
    );
}

/// What a running reservation's own consumers use lies inside its hold: admission counts it
/// once, so the rest of the host stays available to other leases.
#[test]
fn a_reservations_consumers_are_not_counted_twice_by_admission() {
    let mut w = world();
    let half = Spec::Instances {
        vcpus: 4,
        memory_mb: 2_048,
        disk_gb: 0,
        amount: 1,
        affinity: 0,
    };
    let new = new_lease(&mut w, 0, 5, 0, std::slice::from_ref(&half));
    let horizon = Instant::from_micros((w.now + 200) * TICK);
    let (changes, running) = create_lease(
        &w.catalog,
        &new,
        w.at(),
        &berth_core::decide::admission::Search::until(horizon),
    )
    .expect("fits");
    w.apply(&changes);
    w.fire_due();
    let reservation = &running.reservations[0];
    let host = reservation.hosts[0].0;
    let mut holder = consumer_write(0, PROJECTS[0], holder_allocations(reservation, host, 0));
    holder.reservation = Some(reservation.id);
    assert!(
        write(&mut w, holder),
        "the holder allocates within its reservation"
    );
    // Every host but the busy one is taken whole, so the second half must fit beside it.
    let others = Spec::Hosts {
        min: HOSTS as u32 - 1,
        extra: 0,
    };
    let new = new_lease(&mut w, 0, 5, 1, &[others]);
    let (changes, _) = create_lease(
        &w.catalog,
        &new,
        w.at(),
        &berth_core::decide::admission::Search::until(horizon),
    )
    .expect("the other hosts");
    w.apply(&changes);
    let new = new_lease(&mut w, 0, 5, 1, &[half]);
    let (_, second) = create_lease(
        &w.catalog,
        &new,
        w.at(),
        &berth_core::decide::admission::Search::until(horizon),
    )
    .expect("4 of 8 VCPUs are held once; the other 4 are free");
    assert_eq!(*second.reservations[0].hosts, [(host, 1)]);
}

/// A candidates request presenting a running reservation is answered inside it: a host
/// reservation's aggregate, an instance reservation's slot; one that presents none is kept out
/// of fenced capacity unless it is preemptible or the fence is off.
#[test]
fn a_candidates_request_is_resolved_against_what_it_presents() {
    let (w, lease) = started();
    let (host, slot) = (&lease.reservations[0], &lease.reservations[1]);
    let asking = |reservation: Option<ReservationId>| CandidateRequest {
        groups: vec![Group {
            resources: vec![(vcpu(), 1)],
            ..Group::default()
        }],
        nested_aware: true,
        reservation,
        ..CandidateRequest::default()
    };
    let resolved = |request, policy| resolve(&w.catalog, request, policy, w.at());
    let plain = resolved(asking(None), FencePolicy::Enforced).expect("resolved");
    assert!(plain.unreserved && plain.within.is_none() && plain.presented.is_empty());
    let off = resolved(asking(None), FencePolicy::Off).expect("resolved");
    assert!(!off.unreserved, "the fence is off");
    let borrowing = CandidateRequest {
        preemptible: true,
        ..asking(None)
    };
    assert!(
        !resolved(borrowing, FencePolicy::Enforced)
            .expect("resolved")
            .unreserved
    );

    let in_host = resolved(asking(Some(host.id)), FencePolicy::Enforced).expect("resolved");
    assert_eq!(
        in_host.groups[0].member_of.required,
        vec![BTreeSet::from([fence::reservation_aggregate(host.id)])]
    );
    assert_eq!(
        in_host.presented,
        BTreeSet::from([fence::reservation_aggregate(host.id)])
    );
    let offered: Vec<ProviderId> = allocation_candidates(&w.catalog, &in_host)
        .candidates
        .iter()
        .map(|c| c.anchor)
        .collect();
    assert_eq!(offered, [host.hosts[0].0], "the held host, unfenced");

    let in_slot = resolved(asking(Some(slot.id)), FencePolicy::Enforced).expect("resolved");
    assert_eq!(in_slot.within, Some(slot.id));
    assert!(!in_slot.unreserved);
    assert_eq!(
        in_slot.groups[0].resources,
        [(vcpu(), 1), (fence::reservation_class(slot.id), 1)]
    );

    let unknown = ReservationId::from_u128(0xBAD);
    assert_eq!(
        resolved(asking(Some(unknown)), FencePolicy::Enforced),
        Err(Unanswerable::Rejected(Rejection::ReservationUnavailable {
            reservation: unknown,
            reason: "unknown",
        }))
    );
}
