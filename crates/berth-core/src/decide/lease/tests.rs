//! Tests of the lease decisions, applied to a catalog step by step: admission of whole hosts,
//! instance slots and floating IPs over half-open windows, counter-offers, all-or-nothing
//! requests, validation, updates, lifecycle events, and a property test that admitted leases
//! never over-commit a host, checked against a brute-force model of the holds.

use super::*;
use crate::catalog::Catalog;
use crate::change::Change;
use crate::decide::admission::Search;
use crate::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations};
use crate::decide::inventory::{NewHost, enroll_host, set_inventories};
use crate::decide::lifecycle::fire_event;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::inventory::{FullReservation, Inventory};
use crate::model::lease::PREEMPTION_NOTICE_DEFAULT;
use crate::model::lease::{
    Affinity, EventKind, EventStatus, FloatingIp, Lease, LeaseStatus, ReservationSpec,
    ReservationStatus,
};
use crate::model::ledger::{Hold, address_slot};
use crate::model::name::ResourceClass;
use crate::model::provider::Attributes;
use crate::model::provider::{AttrValue, Provider};
use crate::model::time::{Instant, Span};
use crate::rejection::Refusal;
use crate::rejection::Rejection;
use std::collections::BTreeMap;
use uuid::Uuid;

mod series;

const HOUR: i64 = 3_600_000_000;

/// `hours` hours after the epoch.
fn at(hours: i64) -> Instant {
    Instant::from_micros(hours * HOUR)
}

/// When the decisions of a test are made, unless it says otherwise.
fn now() -> Instant {
    at(0)
}

/// How far counter-offers search.
fn horizon() -> Instant {
    at(1_000)
}

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("a class name")
}

fn hosts(min: u32, max: u32) -> ReservationSpec {
    hosts_where(min, max, "", "")
}

fn hosts_where(min: u32, max: u32, hypervisor: &str, resource: &str) -> ReservationSpec {
    ReservationSpec::Host {
        min,
        max,
        hypervisor_properties: hypervisor.into(),
        resource_properties: resource.into(),
        before_end: "default".into(),
    }
}

/// `amount` instances of `vcpus` VCPUs, 1024 MB and 10 GB each.
fn instances(vcpus: u64, amount: u32, affinity: Affinity) -> ReservationSpec {
    ReservationSpec::Instance {
        vcpus,
        memory_mb: 1024,
        disk_gb: 10,
        amount,
        affinity,
        resource_properties: String::new().into(),
    }
}

fn fips(network: &str, amount: u32, required: &[&str]) -> ReservationSpec {
    ReservationSpec::FloatingIp {
        network_id: network.into(),
        amount,
        required_floatingips: required.iter().map(|a| (*a).to_owned()).collect(),
    }
}

fn record_kinds(changes: &[Change]) -> Vec<&str> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::LeaseRecorded(record) => Some(record.kind.as_str()),
            _ => None,
        })
        .collect()
}

fn is_bad_lease<T: std::fmt::Debug>(result: &Result<T, Rejection>) -> bool {
    matches!(result, Err(Rejection::BadLease(_)))
}

/// A catalog with the ids it hands out.
struct World {
    catalog: Catalog,
    last_id: u128,
}

impl World {
    fn new() -> World {
        World {
            catalog: Catalog::new(),
            last_id: 0,
        }
    }

    fn id(&mut self) -> Uuid {
        self.last_id += 1;
        Uuid::from_u128(self.last_id)
    }

    fn apply(&mut self, changes: &[Change]) {
        self.catalog.apply(changes);
        self.catalog.check_invariants().expect("invariants hold");
    }

    /// Enrolls a host with VCPU, MEMORY_MB and DISK_GB totals.
    fn host_in(
        &mut self,
        name: &str,
        zone: &str,
        sizes: [u64; 3],
        attributes: Attributes,
    ) -> ProviderId {
        let uuid = ProviderId::new(self.id());
        let [vcpus, memory_mb, local_gb] = sizes;
        let new = NewHost {
            reservable: true,
            name: name.into(),
            uuid,
            vcpus: Some(vcpus),
            memory_mb: Some(memory_mb),
            local_gb: Some(local_gb),
            availability_zone: Some(zone.into()),
            hypervisor_type: Some("QEMU".into()),
            service_name: None,
            attributes,
        };
        let changes = enroll_host(&self.catalog, &new, now()).expect("host enrolled");
        self.apply(&changes);
        uuid
    }

    /// A host in `az1` with 8 VCPUs, 16 GB and 100 GB.
    fn host(&mut self, name: &str) -> ProviderId {
        self.host_in(name, "az1", [8, 16_384, 100], Attributes::new())
    }

    fn inventory(&mut self, host: ProviderId, name: &str, record: Inventory) {
        let provider = self.catalog.provider(host).expect("a host");
        let mut inventories = provider.inventories().clone();
        inventories.insert(class(name), record);
        let changes =
            set_inventories(&self.catalog, host, None, inventories, now()).expect("inventories");
        self.apply(&changes);
    }

    /// A consumer holding `vcpus` VCPUs on `host` now.
    fn allocate(&mut self, host: ProviderId, vcpus: u64) {
        let write = ConsumerWrite {
            reservation: None,
            consumer: self.id(),
            project_id: "p".into(),
            user_id: "u".into(),
            consumer_type: None,
            generation: ConsumerGeneration::New,
            allocations: BTreeMap::from([(host, BTreeMap::from([(class("VCPU"), vcpus)]))]),
        };
        let changes = set_allocations(&self.catalog, &[write], now()).expect("allocated");
        self.apply(&changes);
    }

    /// Takes the host out of the freepool the way the hosts API does (`reservable: false`).
    fn unreservable(&mut self, host: ProviderId) {
        let id = self
            .catalog
            .provider(host)
            .map(Provider::id)
            .expect("a host");
        let updates = [("reservable".to_owned(), Some(AttrValue::Bool(false)))];
        let changes = crate::decide::inventory::update_host(&self.catalog, id, &updates, now())
            .expect("reservable is a host field");
        self.apply(&changes);
        let record = self.catalog.provider(host).and_then(Provider::host);
        assert!(record.is_some_and(|h| !h.reservable));
        assert!(
            self.catalog
                .provider(host)
                .is_some_and(|p| p.attributes().is_empty())
        );
    }

    fn floating_ip(&mut self, network: &str, address: &str) -> Uuid {
        let id = self.id();
        let changes = register_floating_ip(&self.catalog, floating_ip(id, network, address))
            .expect("registered");
        self.apply(&changes);
        id
    }

    fn new_lease(&mut self, window: (i64, i64), specs: Vec<ReservationSpec>) -> NewLease {
        NewLease {
            id: LeaseId::new(self.id()),
            name: "lease".into(),
            project_id: "p".into(),
            user_id: "u".into(),
            start: at(window.0),
            end: at(window.1),
            before_end: None,
            reservations: specs
                .into_iter()
                .map(|s| (ReservationId::new(self.id()), s))
                .collect(),
            event_ids: [self.id(), self.id(), self.id()],
            notice_lead: crate::model::lease::PREEMPTION_NOTICE_DEFAULT,
        }
    }

    fn create(&mut self, new: &NewLease) -> Result<Lease, Rejection> {
        let (changes, lease) = create_lease(&self.catalog, new, now(), &Search::until(horizon()))?;
        assert_eq!(record_kinds(&changes), ["lease.create"]);
        self.apply(&changes);
        Ok(lease)
    }

    fn try_lease(
        &mut self,
        window: (i64, i64),
        specs: Vec<ReservationSpec>,
    ) -> Result<Lease, Rejection> {
        let new = self.new_lease(window, specs);
        self.create(&new)
    }

    fn lease(&mut self, window: (i64, i64), specs: Vec<ReservationSpec>) -> Lease {
        self.try_lease(window, specs).expect("lease admitted")
    }

    fn refused(&mut self, window: (i64, i64), specs: Vec<ReservationSpec>) -> Refusal {
        match self.try_lease(window, specs) {
            Err(Rejection::DoesNotFit(refusal)) => *refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn update(&mut self, id: LeaseId, update: &LeaseUpdate, hour: i64) -> Result<Lease, Rejection> {
        let (changes, lease) = update_lease(
            &self.catalog,
            id,
            update,
            at(hour),
            &Search::until(horizon()),
        )?;
        assert_eq!(record_kinds(&changes), ["lease.update"]);
        self.apply(&changes);
        Ok(lease)
    }

    fn fire(&mut self, id: LeaseId, kind: EventKind, hour: i64) -> Vec<Change> {
        let changes = fire_event(&self.catalog, id.uuid(), kind, at(hour)).expect("fired");
        self.apply(&changes);
        changes
    }

    fn current(&self, id: LeaseId) -> &Lease {
        self.catalog.lease(id).expect("the lease exists")
    }

    /// Every hold the ledger has for the lease's reservations.
    fn holds(&self, id: LeaseId) -> Vec<Hold> {
        let ledger = self.catalog.ledger();
        self.current(id)
            .reservations
            .iter()
            .flat_map(|r| ledger.holds_of(r.id))
            .collect()
    }

    /// Names of the hosts a reservation holds, with their slots.
    fn held(&self, lease: &Lease, index: usize) -> Vec<(String, u32)> {
        lease.reservations[index]
            .hosts
            .iter()
            .map(|(uuid, n)| {
                let provider = self.catalog.provider(*uuid).expect("a host");
                (provider.name().to_owned(), *n)
            })
            .collect()
    }

    /// Names of the hosts a reservation holds.
    fn names(&self, lease: &Lease, index: usize) -> Vec<String> {
        self.held(lease, index)
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }
}

fn floating_ip(id: Uuid, network: &str, address: &str) -> FloatingIp {
    FloatingIp {
        id,
        network_id: network.into(),
        subnet_id: None,
        address: address.into(),
        reservable: true,
        created_at: now(),
        updated_at: now(),
    }
}

fn amount_update(id: ReservationId, amount: u32) -> ReservationUpdate {
    ReservationUpdate {
        id,
        amount: Some(amount),
        ..ReservationUpdate::default()
    }
}

fn end_update(hour: i64) -> LeaseUpdate {
    LeaseUpdate {
        end: Some(at(hour)),
        ..LeaseUpdate::default()
    }
}

// Host reservations.

#[test]
fn host_reservations_take_up_to_max_free_hosts_and_at_least_min() {
    let mut w = World::new();
    for name in ["h1", "h2", "h3"] {
        w.host(name);
    }
    let first = w.lease((0, 10), vec![hosts(1, 2)]);
    assert_eq!(w.names(&first, 0), ["h1", "h2"]);
    assert_eq!(w.held(&first, 0), [("h1".into(), 1), ("h2".into(), 1)]);
    let second = w.lease((0, 10), vec![hosts(1, 5)]);
    assert_eq!(w.names(&second, 0), ["h3"]);
    let refusal = w.refused((0, 10), vec![hosts(1, 1)]);
    assert_eq!(refusal.shortfalls.len(), 1);
    let shortfall = &refusal.shortfalls[0];
    assert_eq!(
        (shortfall.requested, shortfall.available, shortfall.reason),
        (1, 0, "not_enough_hosts")
    );
    assert_eq!(shortfall.resource_type, "physical:host");
    assert_eq!(refusal.amounts, [0]);
}

#[test]
fn host_reservations_below_min_are_refused_with_the_number_free() {
    let mut w = World::new();
    for name in ["h1", "h2", "h3"] {
        w.host(name);
    }
    w.lease((0, 10), vec![hosts(1, 1)]);
    let refusal = w.refused((5, 15), vec![hosts(3, 3)]);
    assert_eq!(refusal.shortfalls[0].available, 2);
    assert_eq!(refusal.shortfalls[0].requested, 3);
    assert_eq!(refusal.amounts, [2]);
    let ok = w.lease((5, 15), vec![hosts(2, 3)]);
    assert_eq!(w.names(&ok, 0), ["h2", "h3"]);
}

#[test]
fn hosts_held_over_an_overlapping_window_are_not_free_but_back_to_back_windows_are() {
    let mut w = World::new();
    w.host("h1");
    w.lease((10, 20), vec![hosts(1, 1)]);
    for overlapping in [(5, 11), (19, 25), (12, 15), (0, 30)] {
        let refusal = w.refused(overlapping, vec![hosts(1, 1)]);
        assert_eq!(refusal.shortfalls[0].available, 0, "{overlapping:?}");
    }
    let before = w.lease((0, 10), vec![hosts(1, 1)]);
    let after = w.lease((20, 30), vec![hosts(1, 1)]);
    assert_eq!(w.names(&before, 0), ["h1"]);
    assert_eq!(w.names(&after, 0), ["h1"]);
}

#[test]
fn a_host_with_current_allocations_is_not_free() {
    let mut w = World::new();
    let h1 = w.host("h1");
    w.host("h2");
    w.allocate(h1, 1);
    let lease = w.lease((5, 10), vec![hosts(1, 2)]);
    assert_eq!(w.names(&lease, 0), ["h2"]);
    let refusal = w.refused((20, 30), vec![hosts(2, 2)]);
    assert_eq!(refusal.shortfalls[0].available, 1);
}

#[test]
fn non_reservable_hosts_are_never_taken() {
    let mut w = World::new();
    let h1 = w.host("h1");
    w.host("h2");
    w.unreservable(h1);
    let lease = w.lease((0, 10), vec![hosts(1, 2)]);
    assert_eq!(w.names(&lease, 0), ["h2"]);
    let refusal = w.refused((20, 30), vec![instances(1, 9, Affinity::Any)]);
    assert_eq!(refusal.amounts, [8], "h1 offers no instance slots either");
    let filtered = w.refused((20, 30), vec![hosts_where(1, 1, r#"["==", "$id", 1]"#, "")]);
    assert_eq!(filtered.shortfalls[0].available, 0);
}

#[test]
fn filters_select_hosts_by_zone_memory_and_extra_capabilities() {
    let mut w = World::new();
    let gpu = Attributes::from([("gpu".to_owned(), AttrValue::Bool(true))]);
    let rack = Attributes::from([("rack".to_owned(), AttrValue::String("r2".into()))]);
    w.host_in("small", "az1", [8, 16_384, 100], Attributes::new());
    w.host_in("big", "az1", [32, 131_072, 100], gpu.clone());
    w.host_in("far", "az2", [32, 65_536, 100], rack);
    w.host_in("far-gpu", "az2", [8, 16_384, 100], gpu);
    let cases = [
        (
            r#"["==", "$availability_zone", "az1"]"#,
            "",
            vec!["small", "big"],
        ),
        (r#"[">=", "$memory_mb", "65536"]"#, "", vec!["big", "far"]),
        ("", r#"["==", "$gpu", "true"]"#, vec!["big", "far-gpu"]),
        (
            r#"["==", "$availability_zone", "az2"]"#,
            r#"["==", "$gpu", true]"#,
            vec!["far-gpu"],
        ),
        ("", r#"["==", "$rack", "r2"]"#, vec!["far"]),
        ("[]", r#"["!=", "$gpu", true]"#, vec!["small", "far"]),
    ];
    for (hypervisor, resource, expected) in cases {
        let lease = w.lease((0, 10), vec![hosts_where(1, 4, hypervisor, resource)]);
        assert_eq!(w.names(&lease, 0), expected, "{hypervisor} {resource}");
        let deleted = delete_lease(&w.catalog, lease.id, now()).expect("deleted");
        w.apply(&deleted);
    }
    let instances_in_az2 = ReservationSpec::Instance {
        vcpus: 8,
        memory_mb: 1024,
        disk_gb: 0,
        amount: 5,
        affinity: Affinity::Any,
        resource_properties: r#"["==", "$availability_zone", "az2"]"#.into(),
    };
    let lease = w.lease((0, 10), vec![instances_in_az2]);
    assert_eq!(
        w.held(&lease, 0),
        [("far".into(), 4), ("far-gpu".into(), 1)]
    );
}

#[test]
fn unknown_properties_and_malformed_filters_are_bad_leases() {
    let mut w = World::new();
    let gpu = Attributes::from([("gpu".to_owned(), AttrValue::Bool(true))]);
    w.host_in("h1", "az1", [8, 16_384, 100], gpu);
    match w.try_lease(
        (0, 10),
        vec![hosts_where(1, 1, "", r#"["==", "$colour", "red"]"#)],
    ) {
        Err(Rejection::BadLease(text)) => {
            assert!(text.contains("colour"), "{text}");
            assert!(text.contains("resource_properties"), "{text}");
        }
        other => panic!("expected BadLease, got {other:?}"),
    }
    let unknown_in_instances = ReservationSpec::Instance {
        vcpus: 1,
        memory_mb: 1,
        disk_gb: 0,
        amount: 1,
        affinity: Affinity::Any,
        resource_properties: r#"["==", "$nope", 1]"#.into(),
    };
    let malformed = [
        hosts_where(1, 1, r#"["==", "$gpu""#, ""),
        hosts_where(1, 1, r#"["like", "$gpu", "x"]"#, ""),
        hosts_where(1, 1, "", r#"{"gpu": true}"#),
        hosts_where(1, 1, "", r#"["==", "gpu", true]"#),
        unknown_in_instances,
    ];
    for spec in malformed {
        let result = w.try_lease((0, 10), vec![spec.clone()]);
        assert!(is_bad_lease(&result), "{spec:?}: {result:?}");
    }
    assert!(w.catalog.leases().next().is_none());
    assert!(w.catalog.ledger().is_empty());
}

// Instance reservations.

#[test]
fn instance_slots_honour_reserved_and_allocation_ratio() {
    let mut w = World::new();
    let h1 = w.host("h1");
    // (8 - 2) * 2.0 = 12 VCPUs: three instances of 4.
    let vcpu = Inventory::new(8, 2, [1, 8, 1], 2.0, FullReservation::Allowed).expect("valid");
    w.inventory(h1, "VCPU", vcpu);
    let refusal = w.refused((0, 10), vec![instances(4, 4, Affinity::Any)]);
    assert_eq!(refusal.amounts, [3]);
    assert_eq!(refusal.shortfalls[0].reason, "not_enough_capacity");
    assert_eq!(refusal.shortfalls[0].resource_type, "virtual:instance");
    let lease = w.lease((0, 10), vec![instances(4, 3, Affinity::Any)]);
    assert_eq!(w.held(&lease, 0), [("h1".into(), 3)]);
    // Memory binds too: 16384 MB at 1024 each is 16 instances of one VCPU, but VCPU is gone.
    let full = w.refused((5, 6), vec![instances(1, 1, Affinity::Any)]);
    assert_eq!(full.amounts, [0]);
    let memory =
        Inventory::new(4096, 1024, [1, 4096, 1], 1.0, FullReservation::Allowed).expect("valid");
    w.inventory(h1, "MEMORY_MB", memory);
    let memory_bound = w.refused((20, 30), vec![instances(1, 4, Affinity::Any)]);
    assert_eq!(memory_bound.amounts, [3]);
}

#[test]
fn instance_slots_count_current_usage() {
    let mut w = World::new();
    let h1 = w.host("h1");
    w.allocate(h1, 5);
    let refusal = w.refused((0, 10), vec![instances(1, 4, Affinity::Any)]);
    assert_eq!(refusal.amounts, [3]);
    let lease = w.lease((0, 10), vec![instances(1, 3, Affinity::Any)]);
    assert_eq!(w.held(&lease, 0), [("h1".into(), 3)]);
}

#[test]
fn instance_holds_of_other_leases_count_at_their_peak_over_the_window() {
    let mut w = World::new();
    w.host("h1");
    // Two leases that do not overlap can each use the whole host.
    w.lease((0, 10), vec![instances(2, 4, Affinity::Any)]);
    w.lease((10, 20), vec![instances(2, 4, Affinity::Any)]);
    let across = w.refused((5, 15), vec![instances(2, 1, Affinity::Any)]);
    assert_eq!(across.amounts, [0]);
    // Overlapping leases share: 3 + 1 at [25, 30), so a lease over [28, 40) gets 1 until 30.
    w.lease((20, 30), vec![instances(2, 3, Affinity::Any)]);
    w.lease((25, 35), vec![instances(2, 1, Affinity::Any)]);
    let peak = w.refused((28, 40), vec![instances(2, 3, Affinity::Any)]);
    assert_eq!(peak.amounts, [0]);
    let after_peak = w.refused((31, 40), vec![instances(2, 4, Affinity::Any)]);
    assert_eq!(after_peak.amounts, [3]);
    w.lease((31, 40), vec![instances(2, 3, Affinity::Any)]);
    let later = w.lease((20, 25), vec![instances(2, 1, Affinity::Any)]);
    assert_eq!(w.held(&later, 0), [("h1".into(), 1)]);
}

#[test]
fn host_and_instance_reservations_see_each_other() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    w.lease((0, 10), vec![hosts(1, 1)]);
    let slots = w.refused((5, 15), vec![instances(1, 9, Affinity::Any)]);
    assert_eq!(slots.amounts, [8], "h1 is held whole, only h2 offers slots");
    w.lease((5, 15), vec![instances(1, 1, Affinity::Any)]);
    let whole = w.refused((12, 20), vec![hosts(2, 2)]);
    assert_eq!(
        whole.shortfalls[0].available, 1,
        "h2 has an instance hold, so it is not free for a whole-host reservation"
    );
    let lease = w.lease((15, 20), vec![hosts(2, 2)]);
    assert_eq!(w.names(&lease, 0), ["h1", "h2"]);
}

#[test]
fn same_host_affinity_puts_every_instance_on_one_host() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    w.lease((0, 10), vec![instances(2, 1, Affinity::Any)]);
    // h1 offers 3 slots of 2 VCPUs, h2 offers 4.
    let refusal = w.refused((0, 10), vec![instances(2, 5, Affinity::SameHost)]);
    assert_eq!(refusal.amounts, [4], "the best single host");
    assert_eq!(refusal.shortfalls[0].available, 4);
    let lease = w.lease((0, 10), vec![instances(2, 3, Affinity::SameHost)]);
    assert_eq!(w.held(&lease, 0), [("h1".into(), 3)]);
    let next = w.lease((0, 10), vec![instances(2, 4, Affinity::SameHost)]);
    assert_eq!(w.held(&next, 0), [("h2".into(), 4)]);
}

#[test]
fn different_hosts_affinity_puts_each_instance_on_its_own_host() {
    let mut w = World::new();
    for name in ["h1", "h2", "h3"] {
        w.host(name);
    }
    let refusal = w.refused((0, 10), vec![instances(1, 4, Affinity::DifferentHosts)]);
    assert_eq!(refusal.amounts, [3]);
    let lease = w.lease((0, 10), vec![instances(1, 3, Affinity::DifferentHosts)]);
    let one_each = [("h1".into(), 1), ("h2".into(), 1), ("h3".into(), 1)];
    assert_eq!(w.held(&lease, 0), one_each);
}

#[test]
fn any_affinity_packs_instances_onto_as_few_hosts_as_it_can() {
    let mut w = World::new();
    for name in ["h1", "h2", "h3"] {
        w.host(name);
    }
    let lease = w.lease((0, 10), vec![instances(2, 6, Affinity::Any)]);
    assert_eq!(w.held(&lease, 0), [("h1".into(), 4), ("h2".into(), 2)]);
    let holds = w.holds(lease.id);
    let h1 = holds
        .iter()
        .find(|h| h.host == lease.reservations[0].hosts[0].0);
    let amounts = h1.map(|h| h.amounts.to_vec()).expect("a hold on h1");
    let expected = [
        (class("VCPU"), 8),
        (class("MEMORY_MB"), 4096),
        (class("DISK_GB"), 40),
    ];
    assert_eq!(amounts, expected);
}

#[test]
fn instances_larger_than_max_unit_get_no_slots() {
    let mut w = World::new();
    let h1 = w.host("h1");
    w.host("h2");
    let capped = Inventory::new(16, 0, [1, 2, 1], 1.0, FullReservation::Allowed).expect("valid");
    w.inventory(h1, "VCPU", capped);
    let lease = w.lease((0, 10), vec![instances(4, 1, Affinity::Any)]);
    assert_eq!(w.names(&lease, 0), ["h2"]);
    let refusal = w.refused((0, 10), vec![instances(4, 2, Affinity::Any)]);
    assert_eq!(refusal.amounts, [1]);
    let small = w.lease((0, 10), vec![instances(2, 8, Affinity::Any)]);
    assert_eq!(w.held(&small, 0), [("h1".into(), 8)]);
}

// Floating IPs.

fn fip_ids(lease: &Lease, index: usize) -> Vec<Uuid> {
    lease.reservations[index].floating_ips.to_vec()
}

#[test]
fn floating_ip_reservations_take_registered_addresses_of_their_network() {
    let mut w = World::new();
    let a = w.floating_ip("net1", "10.0.0.1");
    let b = w.floating_ip("net1", "10.0.0.2");
    let c = w.floating_ip("net1", "10.0.0.3");
    w.floating_ip("net2", "10.0.0.1");
    let first = w.lease((0, 10), vec![fips("net1", 2, &[])]);
    assert_eq!(fip_ids(&first, 0), [a, b]);
    let held: Vec<(ProviderId, bool)> = w
        .holds(first.id)
        .iter()
        .map(|h| (h.host, h.exclusive))
        .collect();
    assert_eq!(held, [(address_slot(a), true), (address_slot(b), true)]);
    let refusal = w.refused((5, 15), vec![fips("net1", 2, &[])]);
    let shortfall = &refusal.shortfalls[0];
    assert_eq!(shortfall.resource_type, "virtual:floatingip");
    assert_eq!(shortfall.reason, "not_enough_floating_ips");
    assert_eq!((shortfall.requested, shortfall.available), (2, 1));
    assert_eq!(refusal.amounts, [1]);
    assert_eq!(refusal.earliest_start, Some(at(10)));
    let other_network = w.lease((5, 15), vec![fips("net2", 1, &[])]);
    assert_eq!(other_network.reservations[0].floating_ips.len(), 1);
    let back_to_back = w.lease((10, 20), vec![fips("net1", 3, &[])]);
    assert_eq!(fip_ids(&back_to_back, 0), [a, b, c]);
}

#[test]
fn required_floating_ips_must_be_in_the_pool_and_free() {
    let mut w = World::new();
    w.floating_ip("net1", "10.0.0.1");
    let b = w.floating_ip("net1", "10.0.0.2");
    w.floating_ip("net2", "10.0.0.3");
    let lease = w.lease((0, 10), vec![fips("net1", 1, &["10.0.0.2"])]);
    assert_eq!(fip_ids(&lease, 0), [b]);
    let refusal = w.refused((5, 15), vec![fips("net1", 1, &["10.0.0.2"])]);
    assert_eq!(
        refusal.shortfalls[0].reason,
        "required_floating_ip_unavailable"
    );
    let taken = w.lease((5, 15), vec![fips("net1", 1, &[])]);
    assert_ne!(fip_ids(&taken, 0), [b]);
    let bad = [
        fips("net1", 1, &["10.9.9.9"]),
        fips("net1", 1, &["10.0.0.3"]),
        fips("net1", 1, &["10.0.0.1", "10.0.0.2"]),
        fips("net1", 2, &["10.0.0.1", "10.0.0.1"]),
    ];
    for spec in bad {
        let result = w.try_lease((20, 30), vec![spec.clone()]);
        assert!(is_bad_lease(&result), "{spec:?}: {result:?}");
    }
}

#[test]
fn floating_ips_register_once_and_cannot_be_deleted_while_held() {
    let mut w = World::new();
    let a = w.floating_ip("net1", "10.0.0.1");
    let b = w.floating_ip("net1", "10.0.0.2");
    let again = register_floating_ip(
        &w.catalog,
        floating_ip(Uuid::from_u128(999), "net1", "10.0.0.1"),
    );
    assert_eq!(again, Err(Rejection::FloatingIpExists("10.0.0.1".into())));
    let lease = w.lease((0, 10), vec![fips("net1", 1, &["10.0.0.1"])]);
    assert_eq!(
        delete_floating_ip(&w.catalog, a),
        Err(Rejection::FloatingIpInUse(a))
    );
    let unknown = Uuid::from_u128(998);
    assert_eq!(
        delete_floating_ip(&w.catalog, unknown),
        Err(Rejection::FloatingIpNotFound(unknown))
    );
    let free = delete_floating_ip(&w.catalog, b).expect("b is free");
    w.apply(&free);
    assert!(w.catalog.floating_ip(b).is_none());
    let deleted = delete_lease(&w.catalog, lease.id, now()).expect("deleted");
    w.apply(&deleted);
    let released = delete_floating_ip(&w.catalog, a).expect("a is free again");
    w.apply(&released);
    assert_eq!(w.catalog.floating_ips().count(), 0);
}

// Counter-offers.

#[test]
fn earliest_start_is_when_the_blocking_leases_end() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    w.lease((0, 10), vec![hosts(2, 2)]);
    w.lease((10, 12), vec![hosts(1, 1)]);
    let one = w.refused((5, 8), vec![hosts(1, 1)]);
    assert_eq!(one.earliest_start, Some(at(10)));
    let both = w.refused((5, 8), vec![hosts(2, 2)]);
    assert_eq!(both.earliest_start, Some(at(12)));
    assert_eq!(both.amounts, [0]);
    let never = w.refused((5, 8), vec![hosts(3, 3)]);
    assert_eq!(never.earliest_start, None);
    for (horizon, expected) in [(12, None), (13, Some(at(12)))] {
        let new = w.new_lease((5, 8), vec![hosts(2, 2)]);
        match create_lease(&w.catalog, &new, now(), &Search::until(at(horizon))) {
            Err(Rejection::DoesNotFit(refusal)) => {
                assert_eq!(refusal.earliest_start, expected, "horizon {horizon}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn an_earliest_start_search_cut_by_its_steps_or_its_probe_says_it_is_truncated() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    w.lease((0, 10), vec![hosts(2, 2)]);
    w.lease((10, 12), vec![hosts(1, 1)]);
    let new = w.new_lease((5, 8), vec![hosts(2, 2)]);
    let refusal = |search: &Search<'_>| match create_lease(&w.catalog, &new, now(), search) {
        Err(Rejection::DoesNotFit(refusal)) => *refusal,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let full = refusal(&Search::until(horizon()));
    assert_eq!((full.earliest_start, full.truncated), (Some(at(12)), false));
    // The first instant tried (10) does not fit; one step stops before the second.
    let one_step = Search {
        steps: 1,
        ..Search::until(horizon())
    };
    let cut = refusal(&one_step);
    assert_eq!((cut.earliest_start, cut.truncated), (None, true));
    assert_eq!(cut.amounts, full.amounts);
    let stopped = Search {
        stop: &|| true,
        ..Search::until(horizon())
    };
    assert!(refusal(&stopped).truncated);
    // No search (the writer lock's decision): the most that fits, no start, not truncated.
    let none = refusal(&Search::NONE);
    assert_eq!((none.earliest_start, none.truncated), (None, false));
    assert_eq!(none.amounts, full.amounts);
}

#[test]
fn requests_over_the_named_limits_are_refused_before_any_work() {
    let mut w = World::new();
    w.host("h1");
    let over = |limit: &'static str, max: u32| Rejection::LimitExceeded {
        limit,
        max: u64::from(max),
        got: u64::from(max) + 1,
    };
    let many = crate::limits::INSTANCES_PER_RESERVATION_MAX + 1;
    assert_eq!(
        w.try_lease((0, 10), vec![instances(1, many, Affinity::Any)])
            .err(),
        Some(over(
            "instances_per_reservation",
            crate::limits::INSTANCES_PER_RESERVATION_MAX
        ))
    );
    let wide = crate::limits::HOSTS_PER_RESERVATION_MAX + 1;
    assert_eq!(
        w.try_lease((0, 10), vec![hosts(1, wide)]).err(),
        Some(over(
            "hosts_per_reservation",
            crate::limits::HOSTS_PER_RESERVATION_MAX
        ))
    );
    let day = 86_400_000_000;
    let days = crate::limits::SEARCH_HORIZON_DAYS_MAX as i64;
    assert_eq!(check_horizon(Span::from_micros(days * day)), Ok(()));
    assert_eq!(
        check_horizon(Span::from_micros(days * day + 1)),
        Err(Rejection::LimitExceeded {
            limit: "search_horizon_days",
            max: days as u64,
            got: days as u64 + 1,
        })
    );
}

#[test]
fn earliest_start_waits_for_instance_capacity() {
    let mut w = World::new();
    w.host("h1");
    w.lease((0, 10), vec![instances(2, 3, Affinity::Any)]);
    w.lease((0, 20), vec![instances(2, 1, Affinity::Any)]);
    let two = w.refused((5, 15), vec![instances(2, 2, Affinity::Any)]);
    assert_eq!(
        (two.amounts.clone(), two.earliest_start),
        (vec![0], Some(at(10)))
    );
    let four = w.refused((5, 15), vec![instances(2, 4, Affinity::Any)]);
    assert_eq!(four.earliest_start, Some(at(20)));
    let too_big = w.refused((5, 15), vec![instances(2, 5, Affinity::Any)]);
    assert_eq!(too_big.earliest_start, None);
    // The offer is a start at which the same request is admitted.
    let lease = w.lease((10, 20), vec![instances(2, 2, Affinity::Any)]);
    assert_eq!(w.held(&lease, 0), [("h1".into(), 2)]);
}

#[test]
fn counter_offer_amounts_are_the_most_each_reservation_gets() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    w.host("h3");
    w.lease((0, 10), vec![hosts(1, 1)]);
    // Two hosts are free: the host reservation fits with 2 of its max 3, and then no host is
    // left for the instances.
    let refusal = w.refused(
        (0, 10),
        vec![hosts(1, 3), instances(8, 2, Affinity::DifferentHosts)],
    );
    assert_eq!(refusal.shortfalls.len(), 1);
    assert_eq!(refusal.shortfalls[0].index, 1);
    assert_eq!(refusal.amounts, [2, 0]);
}

#[test]
fn earliest_start_of_an_update_sees_capacity_its_own_holds_hide() {
    let mut w = World::new();
    w.host("h1");
    w.lease((0, 10), vec![hosts(1, 1)]);
    let lease = w.lease((10, 20), vec![hosts(1, 1)]);
    let moved = LeaseUpdate {
        start: Some(at(5)),
        end: Some(at(15)),
        ..LeaseUpdate::default()
    };
    match w.update(lease.id, &moved, 0) {
        Err(Rejection::DoesNotFit(refusal)) => {
            assert_eq!(refusal.earliest_start, Some(at(10)));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(w.current(lease.id), &lease);
}

// All or nothing.

#[test]
fn a_lease_is_admitted_whole_or_not_at_all() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    let refusal = w.refused((0, 10), vec![hosts(1, 1), hosts(2, 2)]);
    assert_eq!(refusal.shortfalls.len(), 1);
    assert_eq!(refusal.shortfalls[0].index, 1);
    assert_eq!(refusal.shortfalls[0].available, 1);
    assert_eq!(refusal.amounts, [1, 1]);
    let mixed = w.refused((0, 10), vec![instances(1, 1, Affinity::Any), hosts(2, 2)]);
    assert_eq!(mixed.amounts, [1, 1]);
    assert!(w.catalog.leases().next().is_none());
    assert!(w.catalog.ledger().is_empty());
    let lease = w.lease((0, 10), vec![hosts(2, 2)]);
    assert_eq!(w.names(&lease, 0), ["h1", "h2"]);
}

#[test]
fn reservations_of_one_lease_never_share_a_host() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    let two = w.lease((0, 10), vec![hosts(1, 1), hosts(1, 1)]);
    assert_eq!(
        (w.names(&two, 0), w.names(&two, 1)),
        (vec!["h1".into()], vec!["h2".into()])
    );
    let mixed = w.lease((10, 20), vec![hosts(1, 1), instances(1, 8, Affinity::Any)]);
    assert_eq!(w.names(&mixed, 0), ["h1"]);
    assert_eq!(w.held(&mixed, 1), [("h2".into(), 8)]);
    let packed = w.lease(
        (20, 30),
        vec![
            instances(2, 3, Affinity::Any),
            instances(2, 3, Affinity::Any),
        ],
    );
    assert_eq!(w.held(&packed, 0), [("h1".into(), 3)]);
    assert_eq!(w.held(&packed, 1), [("h1".into(), 1), ("h2".into(), 2)]);
    let no_room = w.refused((20, 30), vec![instances(2, 3, Affinity::Any)]);
    assert_eq!(no_room.amounts, [2]);
}

// Validation.

/// Makes a valid new lease invalid.
type Breaker = Box<dyn Fn(&mut NewLease)>;

#[test]
fn invalid_leases_are_refused() {
    let mut w = World::new();
    w.host("h1");
    let cases: Vec<(&str, Breaker)> = vec![
        ("empty name", Box::new(|n| n.name = "   ".into())),
        ("long name", Box::new(|n| n.name = "x".repeat(256))),
        ("end == start", Box::new(|n| n.end = n.start)),
        ("end < start", Box::new(|n| n.end = at(-1))),
        (
            "before_end at start",
            Box::new(|n| n.before_end = Some(n.start)),
        ),
        (
            "before_end at end",
            Box::new(|n| n.before_end = Some(n.end)),
        ),
        (
            "before_end after end",
            Box::new(|n| n.before_end = Some(at(11))),
        ),
        (
            "before_end before start",
            Box::new(|n| n.before_end = Some(at(-1))),
        ),
        ("min > max", Box::new(|n| n.reservations[0].1 = hosts(2, 1))),
        ("zero min", Box::new(|n| n.reservations[0].1 = hosts(0, 1))),
        (
            "zero instances",
            Box::new(|n| n.reservations[0].1 = instances(1, 0, Affinity::Any)),
        ),
        (
            "an instance of no size",
            Box::new(|n| {
                n.reservations[0].1 = ReservationSpec::Instance {
                    vcpus: 0,
                    memory_mb: 0,
                    disk_gb: 0,
                    amount: 1,
                    affinity: Affinity::Any,
                    resource_properties: String::new().into(),
                }
            }),
        ),
        (
            "zero addresses",
            Box::new(|n| n.reservations[0].1 = fips("net", 0, &[])),
        ),
    ];
    for (what, breaks) in cases {
        let mut new = w.new_lease((0, 10), vec![hosts(1, 1)]);
        breaks(&mut new);
        let result = create_lease(&w.catalog, &new, now(), &Search::until(horizon()));
        assert!(is_bad_lease(&result), "{what}: {result:?}");
    }
    let many = vec![hosts(1, 1); crate::limits::RESERVATIONS_PER_LEASE_MAX + 1];
    let new = w.new_lease((0, 10), many);
    assert_eq!(
        create_lease(&w.catalog, &new, now(), &Search::until(horizon())).map(|(_, l)| l),
        Err(Rejection::LimitExceeded {
            limit: "reservations_per_lease",
            max: crate::limits::RESERVATIONS_PER_LEASE_MAX as u64,
            got: crate::limits::RESERVATIONS_PER_LEASE_MAX as u64 + 1,
        })
    );
    let mut fine = w.new_lease((0, 10), vec![hosts(1, 1)]);
    fine.before_end = Some(at(9));
    fine.name = "  padded  ".into();
    let lease = w.create(&fine).expect("a valid lease");
    assert_eq!(&*lease.name, "padded");
    assert_eq!(
        lease.event(EventKind::BeforeEndLease).map(|e| e.at),
        Some(at(9))
    );
}

// Updates.

fn windows(w: &World, id: LeaseId) -> Vec<(Instant, Instant)> {
    w.holds(id)
        .iter()
        .map(|h| (h.window.start(), h.window.end()))
        .collect()
}

fn event_times(lease: &Lease) -> Vec<(EventKind, Instant, EventStatus)> {
    lease
        .events
        .iter()
        .map(|e| (e.kind, e.at, e.status))
        .collect()
}

#[test]
fn renaming_changes_only_the_name() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    let rename = LeaseUpdate {
        name: Some(" renamed ".into()),
        ..LeaseUpdate::default()
    };
    let renamed = w.update(lease.id, &rename, 1).expect("renamed");
    assert_eq!(&*renamed.name, "renamed");
    assert_eq!(renamed.updated_at, at(1));
    assert_eq!((renamed.start, renamed.end), (lease.start, lease.end));
    assert_eq!(renamed.reservations, lease.reservations);
    assert_eq!(renamed.events, lease.events);
    let blank = LeaseUpdate {
        name: Some(" ".into()),
        ..LeaseUpdate::default()
    };
    assert!(is_bad_lease(&w.update(lease.id, &blank, 1)));
    let nothing = LeaseUpdate::default();
    assert_eq!(
        w.update(lease.id, &nothing, 1),
        Err(Rejection::NothingToUpdate)
    );
    let unknown = LeaseId::from_u128(999);
    assert_eq!(
        w.update(unknown, &rename, 1),
        Err(Rejection::LeaseNotFound(unknown))
    );
}

#[test]
fn extending_is_readmitted_and_a_refused_update_changes_nothing() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    w.lease((20, 30), vec![hosts(1, 1)]);
    let extended = w.update(lease.id, &end_update(15), 1).expect("extended");
    assert_eq!((extended.start, extended.end), (at(0), at(15)));
    assert_eq!(windows(&w, lease.id), [(at(0), at(15))]);
    let end = extended.event(EventKind::EndLease).map(|e| e.at);
    assert_eq!(end, Some(at(15)));
    let before = w.current(lease.id).clone();
    let ledger_before = w.holds(lease.id);
    match w.update(lease.id, &end_update(25), 1) {
        Err(Rejection::DoesNotFit(refusal)) => {
            assert_eq!(refusal.amounts, [0]);
            assert_eq!(refusal.earliest_start, Some(at(30)));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(w.current(lease.id), &before);
    assert_eq!(w.holds(lease.id), ledger_before);
    let touching = w
        .update(lease.id, &end_update(20), 1)
        .expect("back to back");
    assert_eq!(touching.end, at(20));
    assert_eq!(windows(&w, lease.id), [(at(0), at(20))]);
}

#[test]
fn shortening_releases_the_tail() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![instances(2, 4, Affinity::Any)]);
    w.refused((5, 10), vec![instances(2, 1, Affinity::Any)]);
    let shortened = w.update(lease.id, &end_update(5), 1).expect("shortened");
    assert_eq!(shortened.end, at(5));
    assert_eq!(windows(&w, lease.id), [(at(0), at(5))]);
    w.lease((5, 10), vec![instances(2, 4, Affinity::Any)]);
    let inverted = end_update(0);
    assert!(is_bad_lease(&w.update(lease.id, &inverted, 1)));
}

#[test]
fn moving_a_pending_lease_moves_its_holds_and_events() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((10, 20), vec![hosts(1, 1)]);
    let moved = LeaseUpdate {
        start: Some(at(30)),
        end: Some(at(40)),
        ..LeaseUpdate::default()
    };
    let after = w.update(lease.id, &moved, 1).expect("moved");
    assert_eq!(windows(&w, lease.id), [(at(30), at(40))]);
    let undone = EventStatus::Undone;
    let expected = [
        (EventKind::StartLease, at(30), undone),
        (EventKind::BeforeEndLease, at(39), undone),
        (EventKind::EndLease, at(40), undone),
    ];
    assert_eq!(event_times(&after), expected);
    assert!(lifecycle_due(&w, at(29)).is_empty());
    assert_eq!(
        lifecycle_due(&w, at(30)).first().copied(),
        Some((at(30), EventKind::StartLease, lease.id.uuid()))
    );
    let notice = at(30) - PREEMPTION_NOTICE_DEFAULT;
    assert_eq!(
        w.catalog.next_due(),
        Some((notice, EventKind::PreemptionNotice, lease.id.uuid())),
        "the preemption notice moved with the start"
    );
    w.lease((10, 20), vec![hosts(1, 1)]);
    let start_only = LeaseUpdate {
        start: Some(at(45)),
        ..LeaseUpdate::default()
    };
    assert!(is_bad_lease(&w.update(lease.id, &start_only, 1)));
}

#[test]
fn host_counts_and_instance_amounts_can_change() {
    let mut w = World::new();
    for name in ["h1", "h2", "h3"] {
        w.host(name);
    }
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    let res = lease.reservations[0].id;
    let grow = |min, max| LeaseUpdate {
        reservations: vec![ReservationUpdate {
            id: res,
            min,
            max,
            ..ReservationUpdate::default()
        }],
        ..LeaseUpdate::default()
    };
    let all = w.update(lease.id, &grow(None, Some(3)), 1).expect("grown");
    assert_eq!(w.names(&all, 0), ["h1", "h2", "h3"]);
    w.refused((0, 10), vec![hosts(1, 1)]);
    let one = w.update(lease.id, &grow(None, Some(1)), 1).expect("shrunk");
    assert_eq!(w.names(&one, 0), ["h1"], "the hosts it holds come first");
    w.lease((0, 10), vec![hosts(1, 1)]);
    assert!(is_bad_lease(&w.update(lease.id, &grow(Some(2), None), 1)));
    assert!(matches!(
        w.update(lease.id, &grow(Some(3), Some(3)), 1),
        Err(Rejection::DoesNotFit(_))
    ));
    let instances_lease = w.lease((10, 20), vec![instances(2, 2, Affinity::Any)]);
    let more = LeaseUpdate {
        reservations: vec![amount_update(instances_lease.reservations[0].id, 5)],
        ..LeaseUpdate::default()
    };
    let five = w
        .update(instances_lease.id, &more, 1)
        .expect("more instances");
    assert_eq!(w.held(&five, 0), [("h1".into(), 4), ("h2".into(), 1)]);
    let too_many = LeaseUpdate {
        reservations: vec![amount_update(instances_lease.reservations[0].id, 13)],
        ..LeaseUpdate::default()
    };
    match w.update(instances_lease.id, &too_many, 1) {
        Err(Rejection::DoesNotFit(refusal)) => assert_eq!(refusal.amounts, [12]),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn size_update(id: ReservationId) -> LeaseUpdate {
    LeaseUpdate {
        reservations: vec![ReservationUpdate {
            id,
            vcpus: Some(4),
            ..ReservationUpdate::default()
        }],
        ..LeaseUpdate::default()
    }
}

#[test]
fn a_started_lease_keeps_its_start_and_its_instance_size() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    let lease = w.lease((0, 10), vec![instances(2, 2, Affinity::Any), hosts(1, 1)]);
    let (slots, whole) = (lease.reservations[0].id, lease.reservations[1].id);
    w.fire(lease.id, EventKind::StartLease, 0);
    let earlier = LeaseUpdate {
        start: Some(at(1)),
        ..LeaseUpdate::default()
    };
    assert!(is_bad_lease(&w.update(lease.id, &earlier, 1)));
    let resized = w.update(lease.id, &size_update(slots), 1);
    assert!(
        matches!(resized, Err(Rejection::CantUpdate(_))),
        "{resized:?}"
    );
    let refilter = LeaseUpdate {
        reservations: vec![ReservationUpdate {
            id: whole,
            resource_properties: Some(r#"["==", "$vcpus", 8]"#.into()),
            ..ReservationUpdate::default()
        }],
        ..LeaseUpdate::default()
    };
    let refiltered = w.update(lease.id, &refilter, 1);
    assert!(
        matches!(refiltered, Err(Rejection::CantUpdate(_))),
        "{refiltered:?}"
    );
    let more = LeaseUpdate {
        start: Some(at(0)),
        end: Some(at(12)),
        reservations: vec![amount_update(slots, 3)],
        ..LeaseUpdate::default()
    };
    let grown = w.update(lease.id, &more, 1).expect("amount and end change");
    assert_eq!(w.held(&grown, 0), [("h1".into(), 3)]);
    assert_eq!(w.names(&grown, 1), ["h2"]);
    assert_eq!(grown.status, LeaseStatus::Active);
    assert!(
        grown
            .reservations
            .iter()
            .all(|r| r.status == ReservationStatus::Active)
    );
}

#[test]
fn the_size_of_a_pending_instance_reservation_can_change() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![instances(2, 2, Affinity::Any)]);
    let bigger = w
        .update(lease.id, &size_update(lease.reservations[0].id), 1)
        .expect("resized");
    let expected = instances(4, 2, Affinity::Any);
    assert_eq!(bigger.reservations[0].spec, expected);
    let vcpus: u64 = w
        .holds(lease.id)
        .iter()
        .flat_map(|h| h.amounts.to_vec())
        .filter(|(c, _)| *c == class("VCPU"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(vcpus, 8);
}

#[test]
fn an_active_instance_reservation_grows_without_losing_its_hosts() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    let other = w.lease((0, 10), vec![instances(2, 2, Affinity::Any)]);
    let lease = w.lease((0, 10), vec![instances(2, 4, Affinity::Any)]);
    assert_eq!(w.held(&lease, 0), [("h1".into(), 2), ("h2".into(), 2)]);
    let deleted = delete_lease(&w.catalog, other.id, now()).expect("deleted");
    w.apply(&deleted);
    w.fire(lease.id, EventKind::StartLease, 0);
    let more = LeaseUpdate {
        reservations: vec![amount_update(lease.reservations[0].id, 5)],
        ..LeaseUpdate::default()
    };
    let grown = w.update(lease.id, &more, 1).expect("five instances fit");
    let held = w.held(&grown, 0);
    assert_eq!(held.iter().map(|(_, n)| n).sum::<u32>(), 5);
    for (host, slots) in [("h1", 2), ("h2", 2)] {
        assert!(
            held.iter().any(|(h, n)| h == host && *n >= slots),
            "{host} keeps its {slots} instances: {held:?}"
        );
    }
}

#[test]
fn an_ended_lease_can_only_be_renamed() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![instances(1, 1, Affinity::Any)]);
    w.fire(lease.id, EventKind::EndLease, 10);
    assert!(is_bad_lease(&w.update(lease.id, &end_update(20), 11)));
    let amount = LeaseUpdate {
        reservations: vec![amount_update(lease.reservations[0].id, 2)],
        ..LeaseUpdate::default()
    };
    assert!(is_bad_lease(&w.update(lease.id, &amount, 11)));
    let rename = LeaseUpdate {
        name: Some("old".into()),
        ..LeaseUpdate::default()
    };
    let renamed = w.update(lease.id, &rename, 11).expect("renamed");
    assert_eq!(
        (&*renamed.name, renamed.status),
        ("old", LeaseStatus::Terminated)
    );
    assert!(w.catalog.ledger().is_empty());
}

#[test]
fn unknown_reservations_and_new_resource_types_are_refused() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![instances(1, 1, Affinity::Any)]);
    let res = lease.reservations[0].id;
    let unknown = LeaseUpdate {
        reservations: vec![amount_update(ReservationId::from_u128(999), 2)],
        ..LeaseUpdate::default()
    };
    assert!(is_bad_lease(&w.update(lease.id, &unknown, 1)));
    let retype = |kind: &str| LeaseUpdate {
        reservations: vec![ReservationUpdate {
            id: res,
            resource_type: Some(kind.into()),
            amount: Some(2),
            ..ReservationUpdate::default()
        }],
        ..LeaseUpdate::default()
    };
    let changed = w.update(lease.id, &retype("physical:host"), 1);
    assert!(
        matches!(changed, Err(Rejection::CantUpdate(_))),
        "{changed:?}"
    );
    let same = w
        .update(lease.id, &retype("virtual:instance"), 1)
        .expect("same type");
    assert_eq!(same.reservations[0].spec.amount(), 2);
}

#[test]
fn before_end_keeps_its_offset_from_the_end_unless_given() {
    let mut w = World::new();
    w.host("h1");
    let mut new = w.new_lease((0, 10), vec![hosts(1, 1)]);
    new.before_end = Some(at(8));
    let lease = w.create(&new).expect("created");
    let before_end = |l: &Lease| l.event(EventKind::BeforeEndLease).map(|e| e.at);
    let longer = w.update(lease.id, &end_update(20), 1).expect("extended");
    assert_eq!(before_end(&longer), Some(at(18)));
    let given = LeaseUpdate {
        end: Some(at(21)),
        before_end: Some(at(12)),
        ..LeaseUpdate::default()
    };
    let moved = w.update(lease.id, &given, 1).expect("given");
    assert_eq!(before_end(&moved), Some(at(12)));
    let outside = LeaseUpdate {
        before_end: Some(at(25)),
        ..LeaseUpdate::default()
    };
    assert!(is_bad_lease(&w.update(lease.id, &outside, 1)));
    let later = LeaseUpdate {
        start: Some(at(30)),
        end: Some(at(40)),
        ..LeaseUpdate::default()
    };
    let shifted = w.update(lease.id, &later, 1).expect("moved");
    assert_eq!(before_end(&shifted), Some(at(31)));
}

#[test]
fn a_fired_warning_fires_again_when_the_end_moves_later() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    w.fire(lease.id, EventKind::StartLease, 0);
    w.fire(lease.id, EventKind::BeforeEndLease, 9);
    let longer = w.update(lease.id, &end_update(20), 9).expect("extended");
    let warning = longer
        .event(EventKind::BeforeEndLease)
        .expect("the warning");
    assert_eq!((warning.at, warning.status), (at(19), EventStatus::Undone));
    assert_eq!(
        w.catalog.next_due(),
        Some((at(19), EventKind::BeforeEndLease, lease.id.uuid()))
    );
}

// Lifecycle.

fn details(change: &Change) -> serde_json::Value {
    match change {
        Change::LeaseRecorded(record) => serde_json::from_str(&record.details).expect("json"),
        other => panic!("expected a record, got {other:?}"),
    }
}

#[test]
fn start_fires_once_when_due_and_activates_the_lease() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((2, 10), vec![hosts(1, 1)]);
    assert!(w.fire(lease.id, EventKind::StartLease, 1).is_empty());
    assert!(w.fire(lease.id, EventKind::EndLease, 9).is_empty());
    let changes = w.fire(lease.id, EventKind::StartLease, 2);
    assert_eq!(record_kinds(&changes), ["lease.event.start_lease"]);
    assert_eq!(details(&changes[0])["status"], "ACTIVE");
    assert!(matches!(
        changes.last(),
        Some(Change::LeaseSet { lease: Some(_), .. })
    ));
    let active = w.current(lease.id);
    assert_eq!(active.status, LeaseStatus::Active);
    assert!(active.started() && !active.ended());
    assert!(
        active
            .reservations
            .iter()
            .all(|r| r.status == ReservationStatus::Active)
    );
    assert_eq!(w.holds(lease.id).len(), 1);
    assert!(w.fire(lease.id, EventKind::StartLease, 3).is_empty());
    assert!(
        w.fire(LeaseId::from_u128(999), EventKind::StartLease, 3)
            .is_empty()
    );
    assert_eq!(
        w.catalog.next_due(),
        Some((at(9), EventKind::BeforeEndLease, lease.id.uuid()))
    );
}

#[test]
fn end_terminates_the_lease_and_releases_its_holds() {
    let mut w = World::new();
    w.host("h1");
    w.host("h2");
    let lease = w.lease((0, 10), vec![hosts(1, 1), instances(1, 2, Affinity::Any)]);
    w.fire(lease.id, EventKind::StartLease, 0);
    let changes = w.fire(lease.id, EventKind::EndLease, 10);
    assert_eq!(record_kinds(&changes), ["lease.event.end_lease"]);
    let ended = w.current(lease.id);
    assert_eq!(ended.status, LeaseStatus::Terminated);
    assert!(
        ended
            .reservations
            .iter()
            .all(|r| r.status == ReservationStatus::Deleted)
    );
    assert!(ended.events.iter().all(|e| e.status == EventStatus::Done));
    assert!(w.catalog.ledger().is_empty());
    assert_eq!(w.catalog.next_due(), None);
    assert!(w.fire(lease.id, EventKind::EndLease, 11).is_empty());
    w.lease((5, 15), vec![hosts(2, 2)]);
}

#[test]
fn ending_a_lease_that_never_started_passes_through_active() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    let changes = w.fire(lease.id, EventKind::EndLease, 12);
    let kinds = ["lease.event.start_lease", "lease.event.end_lease"];
    assert_eq!(record_kinds(&changes), kinds);
    assert_eq!(details(&changes[0])["status"], "ACTIVE");
    assert_eq!(details(&changes[1])["status"], "TERMINATED");
    let ended = w.current(lease.id);
    assert_eq!(ended.status, LeaseStatus::Terminated);
    assert!(ended.events.iter().all(|e| e.status == EventStatus::Done));
    assert!(w.catalog.ledger().is_empty());
}

#[test]
fn before_end_fires_the_start_first() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    let changes = w.fire(lease.id, EventKind::BeforeEndLease, 9);
    let kinds = ["lease.event.start_lease", "lease.event.before_end_lease"];
    assert_eq!(record_kinds(&changes), kinds);
    assert_eq!(w.current(lease.id).status, LeaseStatus::Active);
    assert_eq!(w.holds(lease.id).len(), 1);
}

#[test]
fn a_failed_event_puts_the_lease_in_error_with_the_reason() {
    let mut w = World::new();
    w.host("h1");
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    let changes = fail_event(
        &w.catalog,
        lease.id,
        EventKind::StartLease,
        "nova down",
        at(0),
    )
    .expect("recorded");
    assert_eq!(record_kinds(&changes), ["lease.event.start_lease"]);
    assert_eq!(details(&changes[0])["status"], "ERROR");
    assert_eq!(details(&changes[0])["reason"], "nova down");
    w.apply(&changes);
    let failed = w.current(lease.id);
    assert_eq!(failed.status, LeaseStatus::Error);
    assert!(
        failed
            .status_reason()
            .is_some_and(|r| r.contains("nova down"))
    );
    assert!(
        failed
            .reservations
            .iter()
            .all(|r| r.status == ReservationStatus::Error)
    );
    let start = failed.event(EventKind::StartLease).map(|e| e.status);
    assert_eq!(start, Some(EventStatus::Error));
    assert_eq!(w.holds(lease.id).len(), 1, "it holds until it ends");
    assert!(w.fire(lease.id, EventKind::StartLease, 1).is_empty());
    w.fire(lease.id, EventKind::EndLease, 10);
    assert_eq!(w.current(lease.id).status, LeaseStatus::Error);
    assert!(w.catalog.ledger().is_empty());
    let missing = fail_event(
        &w.catalog,
        LeaseId::from_u128(999),
        EventKind::EndLease,
        "x",
        at(1),
    );
    assert_eq!(missing, Ok(Vec::new()));
}

#[test]
fn deleting_a_lease_releases_what_it_holds() {
    let mut w = World::new();
    w.host("h1");
    w.floating_ip("net1", "10.0.0.1");
    let lease = w.lease((0, 10), vec![hosts(1, 1), fips("net1", 1, &[])]);
    w.fire(lease.id, EventKind::StartLease, 0);
    let changes = delete_lease(&w.catalog, lease.id, at(1)).expect("deleted");
    assert_eq!(record_kinds(&changes), ["lease.delete"]);
    assert_eq!(details(&changes[0])["status"], "ACTIVE");
    w.apply(&changes);
    assert!(w.catalog.lease(lease.id).is_none());
    assert!(w.catalog.ledger().is_empty());
    assert_eq!(w.catalog.next_due(), None);
    assert_eq!(
        delete_lease(&w.catalog, lease.id, at(1)),
        Err(Rejection::LeaseNotFound(lease.id))
    );
    w.lease((0, 10), vec![hosts(1, 1), fips("net1", 1, &[])]);
}

#[test]
fn due_events_come_in_time_order_with_ends_before_starts() {
    let mut w = World::new();
    w.host("h1");
    let first = w.lease((0, 10), vec![hosts(1, 1)]);
    let second = w.lease((10, 20), vec![hosts(1, 1)]);
    let due = lifecycle_due(&w, at(10));
    let expected = [
        (at(0), EventKind::StartLease, first.id.uuid()),
        (at(9), EventKind::BeforeEndLease, first.id.uuid()),
        (at(10), EventKind::EndLease, first.id.uuid()),
        (at(10), EventKind::StartLease, second.id.uuid()),
    ];
    assert_eq!(due, expected);
    let notice = |hour: i64| at(hour) - PREEMPTION_NOTICE_DEFAULT;
    assert_eq!(
        w.catalog.next_due(),
        Some((notice(0), EventKind::PreemptionNotice, first.id.uuid())),
        "each lease's preemption notice comes before its start"
    );
    assert!(w.catalog.due_events(at(10)).contains(&(
        notice(10),
        EventKind::PreemptionNotice,
        second.id.uuid()
    )));
    for (_, kind, id) in due {
        w.fire(LeaseId::new(id), kind, 10);
    }
    assert_eq!(w.current(first.id).status, LeaseStatus::Terminated);
    assert_eq!(w.current(second.id).status, LeaseStatus::Active);
    assert_eq!(
        w.catalog.next_due(),
        Some((at(19), EventKind::BeforeEndLease, second.id.uuid()))
    );
}

// The property: admitted leases never over-commit, checked against a brute-force model.

mod model {
    //! A brute-force model of admission: every hold of every lease, summed instant by instant.

    use super::*;
    use crate::model::lease::instance_amounts;
    use crate::model::ledger::Window;
    use proptest::prelude::*;

    /// Every hold of every lease in the catalog, derived from the leases themselves.
    pub(super) fn all_holds(catalog: &Catalog) -> Vec<Hold> {
        catalog.leases().flat_map(Lease::holds).collect()
    }

    /// The holds covering `t` on `host`.
    fn covering(holds: &[Hold], host: ProviderId, t: Instant) -> Vec<&Hold> {
        holds
            .iter()
            .filter(|h| h.host == host && h.window.contains(t))
            .collect()
    }

    fn sum(holds: &[&Hold], class: &ResourceClass) -> u64 {
        holds
            .iter()
            .flat_map(|h| h.amounts.iter())
            .filter(|(c, _)| c == class)
            .map(|(_, n)| *n)
            .sum()
    }

    /// At every instant a hold starts, per host: amounts within capacity, and a host held whole
    /// holds nothing else.
    pub(super) fn check_no_over_commit(catalog: &Catalog) -> Result<(), TestCaseError> {
        let holds = all_holds(catalog);
        for provider in catalog.providers() {
            let host = provider.uuid();
            for t in holds
                .iter()
                .filter(|h| h.host == host)
                .map(|h| h.window.start())
            {
                let here = covering(&holds, host, t);
                if here.iter().any(|h| h.exclusive) {
                    prop_assert_eq!(here.len(), 1, "a host held whole shares {:?}", t);
                }
                for (class, record) in provider.inventories() {
                    let used = provider.used(class) + sum(&here, class);
                    prop_assert!(
                        used as f64 <= record.capacity_exact(),
                        "{} over-committed on {} at {:?}",
                        class.as_str(),
                        provider.name(),
                        t
                    );
                }
            }
        }
        Ok(())
    }

    /// Every instance a lease holds respects the unit rules of its host.
    pub(super) fn check_unit_rules(catalog: &Catalog) -> Result<(), TestCaseError> {
        for reservation in catalog.leases().flat_map(|l| &l.reservations) {
            let ReservationSpec::Instance {
                vcpus,
                memory_mb,
                disk_gb,
                ..
            } = &reservation.spec
            else {
                continue;
            };
            for (host, _) in &reservation.hosts {
                let provider = catalog.provider(*host).expect("a held host exists");
                for (class, each) in instance_amounts(*vcpus, *memory_mb, *disk_gb, 1) {
                    let record = provider.inventories().get(&class);
                    prop_assert!(record.is_some_and(|r| r.fits_unit_rules(each)));
                }
            }
        }
        Ok(())
    }

    /// Whether `host` has no hold over `window` and no current usage.
    pub(super) fn whole_free(
        catalog: &Catalog,
        holds: &[Hold],
        host: ProviderId,
        window: Window,
    ) -> bool {
        let provider = catalog.provider(host).expect("a host");
        !provider.has_usage()
            && !holds
                .iter()
                .any(|h| h.host == host && h.window.overlaps(&window))
    }

    /// Instance slots of `spec`'s size `host` offers over `window`, by brute force.
    pub(super) fn slots(
        catalog: &Catalog,
        holds: &[Hold],
        host: ProviderId,
        window: Window,
        size: &[(ResourceClass, u64)],
    ) -> u64 {
        let provider = catalog.provider(host).expect("a host");
        let instants: Vec<Instant> = std::iter::once(window.start())
            .chain(
                holds
                    .iter()
                    .filter(|h| h.host == host && window.contains(h.window.start()))
                    .map(|h| h.window.start()),
            )
            .collect();
        let mut best = u64::MAX;
        for t in instants {
            let here = covering(holds, host, t);
            if here.iter().any(|h| h.exclusive) {
                return 0;
            }
            for (class, each) in size {
                let Some(record) = provider.inventories().get(class) else {
                    return 0;
                };
                if !record.fits_unit_rules(*each) {
                    return 0;
                }
                let used = provider.used(class) + sum(&here, class);
                let free = (record.capacity_exact() - used as f64).max(0.0);
                best = best.min((free / *each as f64).floor() as u64);
            }
        }
        best
    }
}

mod property {
    //! Random sequences of lease creations, resizes and deletions on three hosts.

    use super::model::{check_no_over_commit, check_unit_rules, slots, whole_free};
    use super::*;
    use crate::model::lease::instance_amounts;
    use crate::model::ledger::Window;
    use proptest::collection::vec;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    pub(super) enum Op {
        Create {
            start: i64,
            len: i64,
            specs: Vec<ReservationSpec>,
        },
        Resize {
            lease: usize,
            len: i64,
        },
        Delete {
            lease: usize,
        },
    }

    fn spec_strategy() -> impl Strategy<Value = ReservationSpec> {
        let host = (1u32..3, 0u32..3).prop_map(|(min, extra)| hosts(min, min + extra));
        let affinity = prop_oneof![
            Just(Affinity::Any),
            Just(Affinity::SameHost),
            Just(Affinity::DifferentHosts)
        ];
        let instance = (1u64..6, 0usize..4, 0u64..40, 1u32..7, affinity).prop_map(
            |(vcpus, memory, disk_gb, amount, affinity)| ReservationSpec::Instance {
                vcpus,
                memory_mb: [512, 1024, 4096, 8192][memory],
                disk_gb,
                amount,
                affinity,
                resource_properties: String::new().into(),
            },
        );
        prop_oneof![1 => host, 3 => instance]
    }

    pub(super) fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0i64..30, 1i64..12, vec(spec_strategy(), 1..3))
                .prop_map(|(start, len, specs)| Op::Create { start, len, specs }),
            1 => (any::<usize>(), 1i64..20).prop_map(|(lease, len)| Op::Resize { lease, len }),
            1 => any::<usize>().prop_map(|lease| Op::Delete { lease }),
        ]
    }

    /// Three hosts: a plain one, one with VCPU over-commit and a small `max_unit`, one with
    /// reserved memory, memory over-commit and a memory `max_unit`.
    pub(super) fn world() -> World {
        let mut w = World::new();
        w.host_in("h1", "az1", [8, 16_384, 100], Attributes::new());
        let h2 = w.host_in("h2", "az1", [4, 8_192, 50], Attributes::new());
        let vcpu = Inventory::new(4, 0, [1, 4, 1], 2.0, FullReservation::Allowed).expect("valid");
        w.inventory(h2, "VCPU", vcpu);
        let h3 = w.host_in("h3", "az2", [16, 32_768, 200], Attributes::new());
        let memory = Inventory::new(32_768, 8_192, [1, 4_096, 1], 1.5, FullReservation::Allowed)
            .expect("valid");
        w.inventory(h3, "MEMORY_MB", memory);
        w
    }

    /// What the brute-force model says one reservation gets alone: `Some(granted)` when it
    /// fits, else `None`, with the most that fits.
    fn expected(w: &World, window: Window, spec: &ReservationSpec) -> (bool, u32) {
        let holds = super::model::all_holds(&w.catalog);
        let uuids: Vec<ProviderId> = w.catalog.providers().map(Provider::uuid).collect();
        match spec {
            ReservationSpec::Host { min, max, .. } => {
                let free = uuids
                    .iter()
                    .filter(|h| whole_free(&w.catalog, &holds, **h, window))
                    .count() as u32;
                (free >= *min, free.min(*max))
            }
            ReservationSpec::Instance {
                vcpus,
                memory_mb,
                disk_gb,
                amount,
                affinity,
                ..
            } => {
                let size = instance_amounts(*vcpus, *memory_mb, *disk_gb, 1);
                let per_host: Vec<u64> = uuids
                    .iter()
                    .map(|h| slots(&w.catalog, &holds, *h, window, &size))
                    .collect();
                let most = match affinity {
                    Affinity::Any => per_host.iter().sum::<u64>(),
                    Affinity::SameHost => per_host.iter().copied().max().unwrap_or(0),
                    Affinity::DifferentHosts => per_host.iter().filter(|n| **n > 0).count() as u64,
                };
                let most = u32::try_from(most).unwrap_or(u32::MAX);
                (most >= *amount, most.min(*amount))
            }
            ReservationSpec::FloatingIp { .. } => unreachable!("no floating IPs here"),
        }
    }

    /// Creates a lease; a request of one reservation is checked against the model.
    fn create(
        w: &mut World,
        made: &mut Vec<LeaseId>,
        window: (i64, i64),
        specs: &[ReservationSpec],
    ) -> Result<(), TestCaseError> {
        let model = Window::new(at(window.0), at(window.1)).expect("a window");
        let alone = (specs.len() == 1).then(|| expected(w, model, &specs[0]));
        match w.try_lease(window, specs.to_vec()) {
            Ok(lease) => {
                if let Some((fits, most)) = alone {
                    prop_assert!(fits, "admitted although the model says it does not fit");
                    prop_assert_eq!(
                        lease.reservations[0]
                            .hosts
                            .iter()
                            .map(|(_, n)| *n)
                            .sum::<u32>(),
                        most
                    );
                }
                made.push(lease.id);
            }
            Err(Rejection::DoesNotFit(refusal)) => {
                if let Some((fits, most)) = alone {
                    prop_assert!(!fits, "refused although the model says it fits");
                    prop_assert_eq!(refusal.amounts[0], most);
                }
            }
            Err(other) => prop_assert!(false, "unexpected rejection {:?}", other),
        }
        Ok(())
    }

    /// Applies one operation.
    pub(super) fn step(
        w: &mut World,
        made: &mut Vec<LeaseId>,
        op: &Op,
    ) -> Result<(), TestCaseError> {
        match op {
            Op::Create { start, len, specs } => create(w, made, (*start, start + len), specs)?,
            Op::Resize { lease, len } if !made.is_empty() => {
                let id = made[lease % made.len()];
                let start = w.current(id).start.as_micros() / HOUR;
                match w.update(id, &end_update(start + len), 0) {
                    Ok(_) | Err(Rejection::DoesNotFit(_)) => {}
                    Err(other) => prop_assert!(false, "unexpected rejection {:?}", other),
                }
            }
            Op::Delete { lease } if !made.is_empty() => {
                let id = made.remove(lease % made.len());
                let changes = delete_lease(&w.catalog, id, now()).expect("deleted");
                w.apply(&changes);
            }
            Op::Resize { .. } | Op::Delete { .. } => {}
        }
        check_no_over_commit(&w.catalog)?;
        check_unit_rules(&w.catalog)
    }
}

proptest::proptest! {
    #[test]
    fn admitted_leases_never_over_commit(ops in proptest::collection::vec(property::op_strategy(), 1..30)) {
        let mut w = property::world();
        let mut made = Vec::new();
        for op in &ops {
            property::step(&mut w, &mut made, op)?;
        }
    }
}

#[test]
fn a_held_host_running_the_leases_workloads_can_be_extended() {
    let mut w = World::new();
    let h1 = w.host("h1");
    let lease = w.lease((0, 10), vec![hosts(1, 1)]);
    w.fire(lease.id, EventKind::StartLease, 0);
    // The lease's tenant boots a server on its host.
    w.allocate(h1, 1);
    let extended = w.update(lease.id, &end_update(20), 1).expect("extended");
    assert_eq!(extended.end, at(20));
    assert_eq!(w.names(&extended, 0), ["h1"]);
    // Another lease still cannot take the busy host.
    let refusal = w.refused((30, 40), vec![hosts(1, 1)]);
    assert_eq!(refusal.shortfalls[0].available, 0);
}

#[test]
fn growing_one_reservation_never_takes_what_a_sibling_holds() {
    let mut w = World::new();
    for name in ["h1", "h2", "h3"] {
        w.host(name);
    }
    // Two reservations of one lease: four 4-VCPU instances fill h1 and h2 (8 VCPUs each).
    let specs = vec![
        instances(4, 2, Affinity::Any),
        instances(4, 2, Affinity::Any),
    ];
    let lease = w.lease((0, 10), specs);
    assert_eq!(w.held(&lease, 0), [("h1".to_owned(), 2)]);
    assert_eq!(w.held(&lease, 1), [("h2".to_owned(), 2)]);
    w.fire(lease.id, EventKind::StartLease, 0);
    let grow = LeaseUpdate {
        reservations: vec![amount_update(lease.reservations[0].id, 3)],
        ..LeaseUpdate::default()
    };
    let grown = w.update(lease.id, &grow, 1).expect("h3 has room");
    assert_eq!(
        w.held(&grown, 0),
        [("h1".to_owned(), 2), ("h3".to_owned(), 1)]
    );
    assert_eq!(
        w.held(&grown, 1),
        [("h2".to_owned(), 2)],
        "the sibling keeps h2"
    );
}

/// The due lifecycle events, without the preemption notices.
fn lifecycle_due(w: &World, now: Instant) -> Vec<(Instant, EventKind, Uuid)> {
    w.catalog
        .due_events(now)
        .into_iter()
        .filter(|(_, kind, _)| *kind != EventKind::PreemptionNotice)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Holds and the waitlist
// ---------------------------------------------------------------------------------------------

mod parked {
    use super::*;

    fn hold(w: &mut World, window: (i64, i64), specs: Vec<ReservationSpec>, lapses: i64) -> Lease {
        let new = w.new_lease(window, specs);
        let (changes, lease) = create_hold(&w.catalog, &new, at(lapses), now()).expect("held");
        assert_eq!(record_kinds(&changes), ["lease.hold"]);
        w.apply(&changes);
        lease
    }

    #[test]
    fn a_hold_holds_as_a_pending_lease_does_and_becomes_a_lease_in_one_decision() {
        let mut w = World::new();
        w.host("h1");
        let held = hold(&mut w, (10, 20), vec![hosts(1, 1)], 1);
        assert_eq!(held.status, LeaseStatus::Held);
        assert_eq!(held.lapses_at, Some(at(1)));
        assert!(held.events.is_empty(), "no lifecycle of its own");
        assert_eq!(w.catalog.open_holds("p"), 1);
        // The held host is taken for anyone else, over the window.
        w.refused((15, 25), vec![hosts(1, 1)]);
        // The lease made from it: the hold is removed in the same changes.
        let new = w.new_lease((12, 20), vec![hosts(1, 1)]);
        let (changes, lease) =
            create_lease_from_hold(&w.catalog, &new, held.id, now()).expect("from the hold");
        assert_eq!(record_kinds(&changes), ["lease.hold.used", "lease.create"]);
        assert!(changes.iter().any(|c| matches!(
            c,
            Change::LeaseSet { id, lease: None } if *id == held.id
        )));
        w.apply(&changes);
        assert_eq!(lease.status, LeaseStatus::Pending);
        assert_eq!(lease.reservations[0].hosts, held.reservations[0].hosts);
        assert!(w.catalog.lease(held.id).is_none());
        assert_eq!(w.catalog.open_holds("p"), 0);
        // Its lapse finds nothing.
        assert_eq!(lapse(&w.catalog, held.id, at(1)), Vec::new());
    }

    #[test]
    fn a_lease_from_a_hold_asks_for_what_was_held_or_less() {
        let mut w = World::new();
        w.host("h1");
        w.host("h2");
        w.host("h3");
        let held = hold(&mut w, (10, 20), vec![hosts(1, 2)], 1);
        let mismatched = [
            ((9, 20), vec![hosts(1, 2)]),
            ((10, 21), vec![hosts(1, 2)]),
            ((10, 20), vec![hosts(1, 3)]),
            ((10, 20), vec![hosts_where(1, 2, "", "x")]),
            ((10, 20), vec![hosts(1, 1), hosts(1, 1)]),
            ((10, 20), vec![instances(1, 1, Affinity::Any)]),
        ];
        for (window, specs) in mismatched {
            let new = w.new_lease(window, specs.clone());
            let refused = create_lease_from_hold(&w.catalog, &new, held.id, now());
            assert!(
                matches!(refused, Err(Rejection::HoldMismatch(_))),
                "{window:?} {specs:?}: {refused:?}"
            );
        }
        // Another project's hold, or a lease that is no hold, is a bad hold_id.
        let mut theirs = w.new_lease((10, 20), vec![hosts(1, 1)]);
        theirs.project_id = "q".into();
        let refused = create_lease_from_hold(&w.catalog, &theirs, held.id, now());
        assert!(matches!(&refused, Err(Rejection::BadLease(t)) if t.contains("hold_id")));
        let plain = w.lease((30, 40), vec![hosts(1, 1)]);
        let new = w.new_lease((30, 40), vec![hosts(1, 1)]);
        let refused = create_lease_from_hold(&w.catalog, &new, plain.id, now());
        assert!(matches!(&refused, Err(Rejection::BadLease(t)) if t.contains("hold_id")));
        // Less is fine.
        let new = w.new_lease((11, 19), vec![hosts(1, 1)]);
        assert!(create_lease_from_hold(&w.catalog, &new, held.id, now()).is_ok());
    }

    #[test]
    fn a_hold_lapses_once_and_frees_what_it_held() {
        let mut w = World::new();
        w.host("h1");
        let held = hold(&mut w, (10, 20), vec![hosts(1, 1)], 1);
        assert_eq!(
            w.catalog.next_due().map(|(t, k, _)| (t, k)),
            Some((at(1), EventKind::Lapse))
        );
        assert_eq!(
            lapse(&w.catalog, held.id, Instant::from_micros(HOUR - 1)),
            Vec::new()
        );
        let changes =
            fire_event(&w.catalog, held.id.uuid(), EventKind::Lapse, at(1)).expect("fired");
        assert_eq!(record_kinds(&changes), ["lease.hold.lapsed"]);
        w.apply(&changes);
        let lapsed = w.catalog.lease(held.id).expect("kept");
        assert_eq!(lapsed.status, LeaseStatus::Expired);
        assert!(lapsed.holds().is_empty());
        assert_eq!(w.catalog.next_due(), None, "nothing left to fire");
        assert_eq!(
            fire_event(&w.catalog, held.id.uuid(), EventKind::Lapse, at(2)),
            Ok(Vec::new())
        );
        // A lapsed hold is no hold to make a lease from.
        let new = w.new_lease((10, 20), vec![hosts(1, 1)]);
        assert!(matches!(
            create_lease_from_hold(&w.catalog, &new, held.id, now()),
            Err(Rejection::HoldMismatch(_))
        ));
        w.lease((10, 20), vec![hosts(1, 1)]);
    }

    #[test]
    fn a_project_keeps_at_most_the_named_number_of_open_holds() {
        let mut w = World::new();
        w.host("h1");
        let max = crate::limits::HOLDS_PER_PROJECT_MAX;
        for n in 0..i64::from(max) {
            hold(&mut w, (10 * n + 10, 10 * n + 20), vec![hosts(1, 1)], 1);
        }
        let new = w.new_lease((0, 5), vec![hosts(1, 1)]);
        assert_eq!(
            create_hold(&w.catalog, &new, at(1), now()).map(|_| ()),
            Err(Rejection::TooManyHolds { max })
        );
    }

    fn wait(w: &mut World, window: (i64, i64), specs: Vec<ReservationSpec>, until: i64) -> Lease {
        let new = w.new_lease(window, specs);
        let (changes, lease, refusal) =
            create_or_wait(&w.catalog, &new, at(until), now()).expect("decided");
        w.apply(&changes);
        if lease.status == LeaseStatus::Waiting {
            assert!(refusal.is_some(), "the refusal comes with it");
            assert!(lease.holds().is_empty());
        }
        lease
    }

    /// Admits what the waitlist admits now, as a batch does.
    fn admit_all(w: &mut World, hour: i64) -> usize {
        let mut admitted = 0;
        loop {
            let (changes, _) =
                admit_waiting(&w.catalog, at(hour), crate::limits::WAITLIST_ATTEMPTS_MAX);
            if changes.is_empty() {
                return admitted;
            }
            assert_eq!(record_kinds(&changes), ["lease.admitted"]);
            w.apply(&changes);
            admitted += 1;
        }
    }

    #[test]
    fn the_waitlist_is_first_come_first_and_a_smaller_later_lease_never_overtakes() {
        let mut w = World::new();
        w.host("h1");
        w.host("h2");
        let a = w.lease((10, 20), vec![hosts(1, 1)]);
        let b = w.lease((10, 20), vec![hosts(1, 1)]);
        let large = wait(&mut w, (10, 20), vec![hosts(2, 2)], 10);
        let small = wait(&mut w, (12, 18), vec![hosts(1, 1)], 10);
        let elsewhere = wait(&mut w, (30, 40), vec![hosts(3, 3)], 30);
        assert_eq!(large.status, LeaseStatus::Waiting);
        assert_eq!(small.status, LeaseStatus::Waiting);
        assert_eq!(elsewhere.status, LeaseStatus::Waiting);
        w.apply(&delete_lease(&w.catalog, a.id, now()).expect("deleted"));
        assert_eq!(
            admit_all(&mut w, 0),
            0,
            "the small one waits behind the large one"
        );
        w.apply(&delete_lease(&w.catalog, b.id, now()).expect("deleted"));
        assert_eq!(admit_all(&mut w, 0), 1);
        let admitted = w.catalog.lease(large.id).expect("large");
        assert_eq!(admitted.status, LeaseStatus::Pending);
        assert_eq!(admitted.holds().len(), 2);
        assert_eq!(
            w.catalog.lease(small.id).map(|l| l.status),
            Some(LeaseStatus::Waiting)
        );
        // A lease waiting for another time passes freely when it fits.
        let c = w.lease((30, 40), vec![hosts(1, 1)]);
        w.apply(&delete_lease(&w.catalog, c.id, now()).expect("deleted"));
        assert_eq!(admit_all(&mut w, 0), 0, "three hosts never fit on two");
        // At wait_until the small one expires, once; the admitted one starts.
        let due = w.catalog.due_events(at(10));
        assert!(
            due.contains(&(at(10), EventKind::Lapse, small.id.uuid())),
            "{due:?}"
        );
        let changes =
            fire_event(&w.catalog, small.id.uuid(), EventKind::Lapse, at(10)).expect("fired");
        assert_eq!(record_kinds(&changes), ["lease.wait.expired"]);
        w.apply(&changes);
        assert_eq!(
            w.catalog.lease(small.id).map(|l| l.status),
            Some(LeaseStatus::Expired)
        );
        assert!(w.catalog.waiting().all(|l| l.id == elsewhere.id));
    }

    #[test]
    fn the_waitlist_tries_at_most_its_budget() {
        let mut w = World::new();
        w.host("h1");
        let a = w.lease((10, 20), vec![hosts(1, 1)]);
        for n in 0..5 {
            wait(&mut w, (100 * n + 10, 100 * n + 20), vec![hosts(2, 2)], 10);
        }
        w.apply(&delete_lease(&w.catalog, a.id, now()).expect("deleted"));
        let (changes, attempts) = admit_waiting(&w.catalog, now(), 3);
        assert!(changes.is_empty());
        assert_eq!(attempts, 3);
    }

    #[test]
    fn the_waitlist_looks_at_its_head_only() {
        let mut w = World::new();
        w.host("h1");
        let a = w.lease((0, 50), vec![hosts(1, 1)]);
        // A head that does not fit blocks every later lease of its window: a pass looks at
        // WAITLIST_SCAN_MAX of them at most, and never reaches the one after them, which fits.
        wait(&mut w, (10, 20), vec![hosts(2, 2)], 10);
        for _ in 1..crate::limits::WAITLIST_SCAN_MAX {
            wait(&mut w, (10, 20), vec![hosts(1, 1)], 10);
        }
        let last = wait(&mut w, (30, 40), vec![hosts(1, 1)], 10);
        assert_eq!(last.status, LeaseStatus::Waiting);
        w.apply(&delete_lease(&w.catalog, a.id, now()).expect("deleted"));
        let (changes, attempts) = admit_waiting(&w.catalog, now(), usize::MAX);
        assert!(changes.is_empty(), "the lease past the scan is not reached");
        assert_eq!(attempts, 1, "only the head was tried");
    }
}
