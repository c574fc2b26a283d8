//! The release of unconsumed leases through the public API: a lease nobody presents is told,
//! then released (ending then, its host free again) at the times its policy says; a lease a
//! consumer presents once is never told nor released; an address-only lease takes no policy.

use berth_core::decide::admission::Search;
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations};
use berth_core::decide::lease::{create_lease, stamp_idle_release};
use berth_core::model::lease::{EventKind, IdleRelease, Lease, LeaseStatus, ReservationSpec};
use berth_core::model::provider::Attributes;
use berth_core::{Change, Instant, ResourceClass, Span};
use std::collections::BTreeMap;
use uuid::Uuid;

mod support;
use support::{TICK, World, new_lease, one_host};

fn tick(n: i64) -> Instant {
    Instant::from_micros(n * TICK)
}

/// Released 4 ticks after the start, told 2 ticks before.
fn policy() -> IdleRelease {
    IdleRelease::new(Span::from_micros(4 * TICK), Span::from_micros(2 * TICK))
}

/// Creates a lease of `spec` from tick `start` to `end` with the policy stamped as the service
/// stamps it; the lease.
fn lease(w: &mut World, start: i64, end: i64, spec: ReservationSpec) -> Lease {
    let new = new_lease(w, "lab", start, end, spec);
    let (mut changes, _) = create_lease(&w.catalog, &new, w.at(), &Search::NONE).expect("fits");
    stamp_idle_release(&w.catalog, &mut changes, policy());
    w.apply(&changes);
    w.catalog.lease(new.id).expect("created").clone()
}

/// The kinds of the lifecycle records `changes` write.
fn records(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::LeaseRecorded(record) => Some(record.kind.clone()),
            _ => None,
        })
        .collect()
}

/// Fires what is due now; the lifecycle records written.
fn fire(w: &mut World) -> Vec<String> {
    let mut written = Vec::new();
    while let Some((_, kind, id)) = w.catalog.due_events(w.at()).first().copied() {
        let changes = berth_core::decide::lifecycle::fire_event(&w.catalog, id, kind, w.at())
            .expect("a due event fires");
        assert!(!changes.is_empty(), "a due {kind:?} decides something");
        written.extend(records(&changes));
        w.apply(&changes);
    }
    written
}

#[test]
fn an_unconsumed_lease_is_told_then_released_and_its_host_is_free_again() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    let idle = lease(&mut w, 12, 30, one_host());
    assert_eq!(idle.idle(), Some(&policy()));
    assert_eq!(idle.idle_due(), Some((tick(14), EventKind::IdleNotice)));
    w.now = 12;
    assert_eq!(fire(&mut w), ["lease.event.start_lease"]);
    w.now = 13;
    assert_eq!(fire(&mut w), Vec::<String>::new());
    w.now = 14;
    assert_eq!(fire(&mut w), ["lease.idle_notice"]);
    let told = w.catalog.lease(idle.id).expect("lease");
    assert_eq!(told.status, LeaseStatus::Active);
    assert_eq!(told.idle_due(), Some((tick(16), EventKind::IdleRelease)));
    w.now = 16;
    assert_eq!(
        fire(&mut w),
        ["lease.event.end_lease", "lease.idle_release"]
    );
    let released = w.catalog.lease(idle.id).expect("lease");
    assert_eq!(released.status, LeaseStatus::Terminated);
    assert_eq!(released.end, tick(16), "the window closes at the release");
    assert!(
        released
            .status_reason()
            .is_some_and(|r| r.contains("released"))
    );
    assert_eq!(released.idle_due(), None);
    // The host is free from the release on.
    let again = lease(&mut w, 16, 30, one_host());
    assert_eq!(again.reservations[0].hosts.len(), 1);
}

#[test]
fn a_lease_a_consumer_presents_is_neither_told_nor_released() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    let used = lease(&mut w, 12, 30, one_host());
    w.now = 12;
    fire(&mut w);
    // Tick 13: a consumer runs 2 VCPU in it, then leaves at tick 14.
    let host = w.catalog.lease(used.id).expect("lease").reservations[0].hosts[0].0;
    let vcpu = ResourceClass::parse("VCPU").expect("a class");
    let write = |vcpus: u64| ConsumerWrite {
        reservation: Some(used.reservations[0].id),
        consumer: Uuid::from_u128(77),
        project_id: "lab".into(),
        user_id: "u".into(),
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations: match vcpus {
            0 => BTreeMap::new(),
            n => BTreeMap::from([(host, BTreeMap::from([(vcpu.clone(), n)]))]),
        },
    };
    w.now = 13;
    let changes = set_allocations(&w.catalog, &[write(2)], w.at()).expect("written");
    w.apply(&changes);
    let consumed = w.catalog.lease(used.id).expect("lease");
    assert!(consumed.idle().is_some_and(|i| i.consumed));
    assert_eq!(consumed.updated_at, used.updated_at.max(tick(12)));
    w.now = 14;
    let changes = set_allocations(&w.catalog, &[write(0)], w.at()).expect("emptied");
    w.apply(&changes);
    w.now = 25;
    assert_eq!(fire(&mut w), Vec::<String>::new());
    assert_eq!(
        w.catalog.lease(used.id).expect("lease").status,
        LeaseStatus::Active
    );
}

#[test]
fn a_lease_shorter_than_its_release_and_an_address_lease_take_no_release() {
    let mut w = World::with_hosts(1, |_| (None, Attributes::default()));
    // Ends at tick 15, before its release at 16: it simply ends.
    let short = lease(&mut w, 12, 15, one_host());
    assert_eq!(short.idle_due(), None);
    w.now = 20;
    assert_eq!(
        fire(&mut w),
        [
            "lease.event.start_lease",
            "lease.event.before_end_lease",
            "lease.event.end_lease"
        ]
    );
    let address = ReservationSpec::FloatingIp {
        network_id: "public".into(),
        amount: 1,
        required_floatingips: Vec::new(),
    };
    let fip = berth_core::model::lease::FloatingIp {
        id: Uuid::from_u128(5),
        network_id: "public".into(),
        subnet_id: None,
        address: "192.0.2.5".into(),
        reservable: true,
        created_at: w.at(),
        updated_at: w.at(),
    };
    let changes = berth_core::decide::lease::register_floating_ip(&w.catalog, fip).expect("added");
    w.apply(&changes);
    assert_eq!(lease(&mut w, 22, 40, address).idle(), None);
}
