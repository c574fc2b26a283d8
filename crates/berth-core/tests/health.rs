//! Failures and healing as a property, through the public API only: eight hosts in two zones
//! (half with a GPU), random leases (host reservations and instance reservations of every
//! affinity, some filtered on the GPU or the zone, windows around "now", some already running),
//! then a random host taken out of service, possibly a second one, then both returned.
//!
//! After a host goes out of service:
//! - every lease keeps every unit it was given: what a reservation holds in service plus what
//!   it is missing equals what it held before;
//! - what a reservation is missing sits on hosts out of service, and a lease missing anything is
//!   degraded;
//! - a reservation that has not started holds nothing out of service beyond what it is missing,
//!   and everything it holds matches its filter and affinity;
//! - a running lease is not moved: its hosts are what they were;
//! - no host in service is over-committed over any instant (exclusive holds alone, instance
//!   holds within capacity);
//! - the catalog's invariants hold and a catalog rebuilt from its rows is the same.
//!
//! After the hosts return, nothing is missing and no lease is degraded.

use berth_core::decide::health::set_status;
use berth_core::decide::lease::{NewLease, create_lease};
use berth_core::model::lease::{Affinity, Lease, ReservationSpec};
use berth_core::model::ledger::Hold;
use berth_core::model::provider::Attributes;
use berth_core::{
    AttrValue, Catalog, Change, Instant, LeaseId, ProviderId, ProviderStatus, ReservationId,
    ResourceClass, Span,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Hosts in the world, each 8 VCPU, 16 GiB and 100 GB.
const HOSTS: u128 = 8;

mod support;
use support::{TICK, World};

/// Eight hosts in two zones, the first four with a GPU.
fn world() -> World {
    World::with_hosts(HOSTS, |idx| {
        (
            Some(format!("az{}", idx % 2)),
            Attributes::from([("gpu".to_owned(), AttrValue::Bool(idx < 4))]),
        )
    })
}

#[derive(Debug, Clone)]
struct LeaseOp {
    hosts: bool,
    amount: u32,
    size: u64,
    affinity: u8,
    filter: u8,
    start: i64,
    length: i64,
}

fn lease_op() -> impl Strategy<Value = LeaseOp> {
    (
        any::<bool>(),
        1u32..4,
        1u64..5,
        0u8..3,
        0u8..4,
        -3i64..8,
        1i64..10,
    )
        .prop_map(
            |(hosts, amount, size, affinity, filter, start, length)| LeaseOp {
                hosts,
                amount,
                size,
                affinity,
                filter,
                start,
                length,
            },
        )
}

fn filter_text(filter: u8) -> String {
    match filter {
        1 => r#"["==", "$gpu", true]"#.to_owned(),
        2 => r#"["==", "$availability_zone", "az1"]"#.to_owned(),
        _ => String::new(),
    }
}

fn spec(op: &LeaseOp) -> ReservationSpec {
    match op.hosts {
        true => ReservationSpec::Host {
            min: op.amount,
            max: op.amount,
            hypervisor_properties: String::new().into(),
            resource_properties: filter_text(op.filter).into(),
            before_end: "default".into(),
        },
        false => ReservationSpec::Instance {
            vcpus: op.size,
            memory_mb: 1_024,
            disk_gb: 10,
            amount: op.amount,
            affinity: match op.affinity {
                0 => Affinity::Any,
                1 => Affinity::SameHost,
                _ => Affinity::DifferentHosts,
            },
            resource_properties: filter_text(op.filter).into(),
        },
    }
}

/// Creates the lease if it fits (leases starting in the past are created before the clock
/// moves, so some are running when the host fails).
fn create(w: &mut World, op: &LeaseOp) {
    let (id, rid) = (LeaseId::new(w.id()), ReservationId::new(w.id()));
    let event_ids = [w.id(), w.id(), w.id()];
    let start = w.now + op.start.max(0);
    let new = NewLease {
        id,
        name: format!("l{id}"),
        project_id: "p".to_owned(),
        user_id: "u".to_owned(),
        start: Instant::from_micros(start * TICK),
        end: Instant::from_micros((start + op.length) * TICK),
        before_end: None,
        reservations: vec![(rid, spec(op))],
        event_ids,
        notice_lead: Span::ZERO,
    };
    let horizon = Instant::from_micros((w.now + 100) * TICK);
    if let Ok((changes, _)) = create_lease(
        &w.catalog,
        &new,
        w.at(),
        &berth_core::decide::admission::Search::until(horizon),
    ) {
        w.apply(&changes);
    }
}

fn advance(w: &mut World, ticks: i64) {
    w.now += ticks;
    w.fire_due();
}

fn units(spec: &ReservationSpec, hosts: &[(ProviderId, u32)]) -> u32 {
    match spec {
        ReservationSpec::Host { .. } => hosts.len() as u32,
        _ => hosts.iter().map(|(_, n)| *n).sum(),
    }
}

fn matches(w: &World, filter: &str, host: ProviderId) -> bool {
    let provider = w.catalog.provider(host).expect("a host");
    match filter {
        f if f.contains("gpu") => provider.attributes().get("gpu") == Some(&AttrValue::Bool(true)),
        f if f.contains("az1") => provider.availability_zone() == Some("az1"),
        _ => true,
    }
}

fn check_lease(w: &World, before: &Lease, after: &Lease) {
    for (old, new) in before.reservations.iter().zip(&after.reservations) {
        assert_eq!(
            units(&new.spec, &new.hosts),
            units(&old.spec, &old.hosts),
            "reservation {} keeps every unit it was given",
            new.id
        );
        for (host, _) in &new.missing {
            assert!(
                !w.catalog.provider(*host).expect("a host").is_up(),
                "what is missing is on a host out of service"
            );
            assert!(new.hosts.iter().any(|(h, _)| h == host), "missing is held");
        }
        if !new.missing.is_empty() {
            assert!(after.degraded, "a lease missing something is degraded");
        }
        if before.started() {
            assert_eq!(new.hosts, old.hosts, "a running lease is not moved");
            continue;
        }
        let out: u32 = new
            .hosts
            .iter()
            .filter(|(h, _)| !w.catalog.provider(*h).expect("a host").is_up())
            .map(|(_, n)| match new.spec {
                ReservationSpec::Host { .. } => 1,
                _ => *n,
            })
            .sum();
        assert_eq!(
            out,
            new.missing_amount(),
            "only what is missing is left out of service"
        );
        let filter = match &new.spec {
            ReservationSpec::Host {
                resource_properties,
                ..
            }
            | ReservationSpec::Instance {
                resource_properties,
                ..
            } => resource_properties.clone(),
            ReservationSpec::FloatingIp { .. } => String::new().into(),
        };
        for (host, slots) in &new.hosts {
            assert!(matches(w, &filter, *host), "healed onto a matching host");
            if let ReservationSpec::Instance { affinity, .. } = new.spec {
                match affinity {
                    Affinity::DifferentHosts => assert_eq!(*slots, 1, "anti-affinity kept"),
                    Affinity::SameHost => assert_eq!(new.hosts.len(), 1, "affinity kept"),
                    Affinity::Any => {}
                }
            }
        }
    }
}

/// No host in service is over-committed at any instant: an exclusive hold is alone, instance
/// holds fit the host's capacity.
fn check_capacity(w: &World) {
    let vcpu = ResourceClass::parse("VCPU").expect("class");
    for host in &w.hosts {
        let provider = w.catalog.provider(*host).expect("a host");
        if !provider.is_up() {
            continue;
        }
        let holds: Vec<Hold> = w
            .catalog
            .leases()
            .flat_map(Lease::holds)
            .filter(|h| h.host == *host)
            .collect();
        for at in holds.iter().map(|h| h.window.start()) {
            let live: Vec<&Hold> = holds.iter().filter(|h| h.window.contains(at)).collect();
            if live.iter().any(|h| h.exclusive) {
                assert_eq!(
                    live.len(),
                    1,
                    "an exclusive hold on {host} is alone at {at:?}"
                );
            }
            let used: u64 = live
                .iter()
                .flat_map(|h| h.amounts.iter())
                .filter(|(c, _)| *c == vcpu)
                .map(|(_, n)| *n)
                .sum();
            assert!(used <= 8, "{host} holds {used} VCPU at {at:?}");
        }
    }
}

fn snapshot(w: &World) -> BTreeMap<LeaseId, Lease> {
    w.catalog.leases().map(|l| (l.id, l.clone())).collect()
}

fn take_out(w: &mut World, host: ProviderId, status: ProviderStatus) {
    let before = snapshot(w);
    let (changes, effects) =
        set_status(&w.catalog, host, status, Some("test".into()), w.at()).expect("accepted");
    w.apply(&changes);
    for (id, old) in &before {
        let new = w.catalog.lease(*id).expect("the lease is still there");
        check_lease(w, old, new);
        let touched = effects.healed.contains(id)
            || effects.degraded.contains(id)
            || effects.flagged.contains(id);
        let held =
            old.holds_capacity() && old.reservations.iter().any(|r| r.slots_on(host).is_some());
        assert_eq!(
            touched, held,
            "every lease on the host is reported, no other"
        );
    }
    check_capacity(w);
    let rebuilt = Catalog::from_rows(w.catalog.to_rows());
    assert_eq!(
        rebuilt.to_rows(),
        w.catalog.to_rows(),
        "a restart sees the same"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn healing_keeps_every_unit_and_never_over_commits(
        leases in prop::collection::vec(lease_op(), 1..14),
        first in 0..HOSTS as usize,
        second in prop::option::of(0..HOSTS as usize),
        run in 0i64..4,
    ) {
        let mut w = world();
        for op in &leases {
            create(&mut w, op);
        }
        advance(&mut w, run);
        let first = w.hosts[first];
        take_out(&mut w, first, ProviderStatus::Down);
        let second = second.map(|i| w.hosts[i]).filter(|h| *h != first);
        if let Some(second) = second {
            take_out(&mut w, second, ProviderStatus::Maintenance);
        }
        for host in [Some(first), second].into_iter().flatten() {
            let (changes, _) = set_status(&w.catalog, host, ProviderStatus::Up, None, w.at())
                .expect("accepted");
            w.apply(&changes);
        }
        for lease in w.catalog.leases() {
            prop_assert!(lease.reservations.iter().all(|r| r.missing.is_empty()));
            prop_assert!(!lease.degraded, "nothing missing, not degraded");
        }
        check_capacity(&w);
    }
}

fn lease_of(
    w: &mut World,
    hosts: bool,
    amount: u32,
    affinity: u8,
    filter: u8,
    at: (i64, i64),
) -> LeaseId {
    let op = LeaseOp {
        hosts,
        amount,
        size: 4,
        affinity,
        filter,
        start: at.0 - w.now,
        length: at.1 - at.0,
    };
    let before: Vec<LeaseId> = w.catalog.leases().map(|l| l.id).collect();
    create(w, &op);
    w.catalog
        .leases()
        .map(|l| l.id)
        .find(|id| !before.contains(id))
        .expect("the lease fits")
}

#[test]
fn a_failed_host_heals_future_leases_degrades_what_cannot_move_and_flags_running_ones() {
    let mut w = world();
    let (h0, h1) = (w.hosts[0], w.hosts[1]);
    // A running lease on h0, a future whole-GPU-host lease (h0), and a future lease of four
    // anti-affine GPU instances (one on each GPU host, h0 among them).
    let running = lease_of(&mut w, false, 2, 0, 0, (10, 30));
    advance(&mut w, 0);
    let whole = lease_of(&mut w, true, 1, 0, 1, (40, 45));
    let spread = lease_of(&mut w, false, 4, 2, 1, (50, 55));
    let holds_h0 = |w: &World, id: LeaseId| {
        w.catalog.lease(id).expect("lease").reservations[0]
            .slots_on(h0)
            .is_some()
    };
    assert!([running, whole, spread].iter().all(|id| holds_h0(&w, *id)));

    let (changes, effects) = set_status(
        &w.catalog,
        h0,
        ProviderStatus::Down,
        Some("PSU".into()),
        w.at(),
    )
    .expect("ok");
    w.apply(&changes);
    assert_eq!(effects.healed, vec![whole]);
    assert_eq!(effects.degraded, vec![spread]);
    assert_eq!(effects.flagged, vec![running]);
    let healed = w.catalog.lease(whole).expect("lease");
    assert_eq!(
        *healed.reservations[0].hosts,
        [(h1, 1)],
        "moved to the next GPU host"
    );
    assert!(healed.reservations[0].resources_changed && !healed.degraded);
    let short = w.catalog.lease(spread).expect("lease");
    assert!(short.degraded);
    assert_eq!(
        *short.reservations[0].missing,
        [(h0, 1)],
        "one instance missing"
    );
    let flagged = w.catalog.lease(running).expect("lease");
    assert!(flagged.degraded);
    assert_eq!(*flagged.reservations[0].missing, [(h0, 2)]);
    let kinds: Vec<&str> = changes
        .iter()
        .filter_map(|c| match c {
            Change::LeaseRecorded(r) => Some(r.kind.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["lease.degraded", "lease.healed", "lease.degraded"]);

    // The admin moves the running lease off the failed host.
    let (changes, moved) =
        berth_core::decide::health::reallocate(&w.catalog, h0, running, None, w.at())
            .expect("there is room elsewhere");
    w.apply(&changes);
    assert!(!moved.degraded && moved.reservations[0].resources_changed);
    assert!(moved.reservations[0].slots_on(h0).is_none());
    assert_eq!(
        units(&moved.reservations[0].spec, &moved.reservations[0].hosts),
        2
    );

    // The host returns: what was missing on it is back.
    let (changes, effects) =
        set_status(&w.catalog, h0, ProviderStatus::Up, None, w.at()).expect("ok");
    w.apply(&changes);
    assert_eq!(effects.restored, vec![spread]);
    let back = w.catalog.lease(spread).expect("lease");
    assert!(!back.degraded && back.reservations[0].missing.is_empty());
    assert_eq!(
        back.reservations[0].hosts.len(),
        4,
        "its instance on h0 is held again"
    );
    check_capacity(&w);
}
