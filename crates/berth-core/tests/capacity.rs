//! Capacity over time as a property, through the public API only: random Promise pool
//! reservations (with priorities that may displace), Blazar host leases, instances created
//! against reservations or unreserved, instances destroyed, and time passing with the lifecycle
//! engine firing due events (starts, ends, claim deadlines). After every step, for VCPU and
//! MEMORY_MB over a window around "now": `total = reserved + allocated + available` at every
//! step of the series; each step equals a brute-force count at that instant and at random
//! instants between steps; the summary is the least `available` and the most `reserved`; and
//! exactly the number of instances counted as fitting can be admitted over the window.

use berth_core::decide::admission::Search;
use berth_core::decide::lease::{NewLease, create_lease, wanted};
use berth_core::decide::pools::{CapacityChange, change_capacity};
use berth_core::decide::promise::{
    NewInstance, NewReservation, create_flavor, create_instance, create_reservation,
    create_reservation_displacing, destroy_instance, displaced_by,
};
use berth_core::model::capacity::{Figures, Measure};
use berth_core::model::lease::{LeaseStatus, ReservationSpec};
use berth_core::model::ledger::Window;
use berth_core::model::promise::{Ask, Flavor, PoolAsk, PromiseKind};
use berth_core::model::provider::Attributes;
use berth_core::query::capacity;
use berth_core::query::presentation::FencePolicy;
use berth_core::{Catalog, Instant, LeaseId, ProviderId, ReservationId, ResourceClass, Span};
use proptest::prelude::*;
use std::collections::BTreeMap;
use uuid::Uuid;

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("a class name")
}

mod support;
use support::{TICK, World};

/// Four hosts in two zones, with a flavor.
fn world() -> World {
    let mut w = World::with_hosts(4, |idx| (Some(format!("az{}", idx % 2)), Attributes::new()));
    let flavor = Flavor {
        id: "f".into(),
        name: "small".into(),
        vcpus: 2,
        ram_mb: 2048,
        disk_gb: 0,
        cpu_architecture: None,
        extra_specs: BTreeMap::new(),
        created_at: w.at(),
    };
    let changes = create_flavor(&w.catalog, flavor).expect("flavor");
    w.apply(&changes);
    w
}

#[derive(Debug, Clone)]
enum Op {
    Pool {
        start: i64,
        len: i64,
        instances: u64,
        priority: u32,
        expiry: Option<i64>,
    },
    Host {
        start: i64,
        len: i64,
    },
    Instance {
        pick: Option<usize>,
    },
    Destroy {
        pick: usize,
    },
    Advance {
        ticks: i64,
    },
    Capacity {
        host: u128,
        start: i64,
        len: i64,
        cores: u64,
        increase: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0..3i64,
            1..8i64,
            1..6u64,
            0..100u32,
            prop::option::of(0..4i64)
        )
            .prop_map(|(start, len, instances, priority, expiry)| Op::Pool {
                start,
                len,
                instances,
                priority,
                expiry,
            }),
        (0..6i64, 1..6i64).prop_map(|(start, len)| Op::Host { start, len }),
        prop::option::of(0..8usize).prop_map(|pick| Op::Instance { pick }),
        (0..8usize).prop_map(|pick| Op::Instance { pick: Some(pick) }),
        (0..8usize).prop_map(|pick| Op::Destroy { pick }),
        (1..3i64).prop_map(|ticks| Op::Advance { ticks }),
        (1..5u128, 0..6i64, 1..8i64, 1..6u64, any::<bool>()).prop_map(
            |(host, start, len, cores, increase)| Op::Capacity {
                host,
                start,
                len,
                cores,
                increase,
            }
        ),
    ]
}

/// A compute pool of `instances` instances of 2 VCPUs and 2 GiB.
fn pool_request(
    w: &mut World,
    (start, end): (Instant, Instant),
    instances: u64,
    priority: u32,
    expiry: Option<Instant>,
) -> NewReservation {
    NewReservation {
        id: LeaseId::new(w.id()),
        reservation_ids: (0..4).map(|_| ReservationId::new(w.id())).collect(),
        event_ids: [w.id(), w.id(), w.id()],
        kind: PromiseKind::Compute,
        ask: Ask {
            pool: Some(PoolAsk {
                cores: 2 * instances,
                ram_mb: 2048 * instances,
                instances,
            }),
            ..Ask::default()
        },
        start: Some(start),
        end: Some(end),
        expiry,
        zone: None,
        provider: None,
        priority,
        displace_other_projects: false,
        project_id: "p".into(),
        user_id: "u".into(),
        notice_lead: Span::ZERO,
    }
}

/// A lease of one whole host over `[start, end)`.
fn host_lease(w: &mut World, start: Instant, end: Instant) -> NewLease {
    NewLease {
        id: LeaseId::new(w.id()),
        name: "hosts".into(),
        project_id: "p".into(),
        user_id: "u".into(),
        start,
        end,
        before_end: None,
        reservations: vec![(ReservationId::new(w.id()), support::one_host())],
        event_ids: [w.id(), w.id(), w.id()],
        notice_lead: Span::ZERO,
    }
}

fn run(w: &mut World, op: &Op) {
    let now = w.at();
    let base = w.now;
    let t = move |ticks: i64| Instant::from_micros((base + ticks) * TICK);
    match op {
        Op::Pool {
            start,
            len,
            instances,
            priority,
            expiry,
        } => {
            let expiry = expiry.map(|e| t(start + e.min(*len)));
            let new = pool_request(
                w,
                (t(*start), t(start + len)),
                *instances,
                *priority,
                expiry,
            );
            if let Ok((changes, _)) =
                create_reservation(&w.catalog, &new, now, &Search::until(t(48)))
            {
                w.apply(&changes);
            }
        }
        Op::Host { start, len } => {
            let new = host_lease(w, t(*start), t(start + len));
            if let Ok((changes, _)) = create_lease(&w.catalog, &new, now, &Search::until(t(48))) {
                w.apply(&changes);
            }
        }
        Op::Instance { pick } => {
            let mut leases: Vec<LeaseId> = w
                .catalog
                .leases()
                .filter(|l| l.terms().is_some() && l.started() && l.holds_capacity())
                .map(|l| l.id)
                .collect();
            leases.sort();
            let reservation = pick.and_then(|p| leases.get(p % leases.len().max(1)).copied());
            let new = NewInstance {
                id: w.id(),
                name: "vm".into(),
                flavor: "small".into(),
                image: None,
                reservation,
                zone: None,
                provider: None,
                project_id: "p".into(),
                user_id: "u".into(),
            };
            if let Ok((changes, _)) = create_instance(&w.catalog, &new, now, FencePolicy::Enforced)
            {
                w.apply(&changes);
            }
        }
        Op::Destroy { pick } => {
            let ids: Vec<Uuid> = w.catalog.instances().map(|i| i.id).collect();
            if let Some(id) = ids.get(pick % ids.len().max(1)) {
                let changes = destroy_instance(&w.catalog, *id, None).expect("destroys");
                w.apply(&changes);
            }
        }
        Op::Advance { ticks } => {
            w.now += ticks;
            w.fire_due();
        }
        Op::Capacity {
            host,
            start,
            len,
            cores,
            increase,
        } => {
            let change = CapacityChange {
                id: w.id(),
                source: format!("ResourceProvider:{}", Uuid::from_u128(*host)),
                increase: *increase,
                amounts: vec![(class("VCPU"), *cores)],
                start: Some(t(*start)),
                end: Some(t(start + len)),
                force: true,
                project_id: "ops".into(),
            };
            if let Ok((changes, _)) = change_capacity(&w.catalog, &change, now) {
                w.apply(&changes);
            }
        }
    }
}

/// The four figures of `class` at instant `t`, counted from the leases and consumers directly.
fn brute_force(catalog: &Catalog, class: &ResourceClass, t: Instant, without: &[Uuid]) -> Figures {
    let capacity = |host: ProviderId| {
        catalog
            .provider(host)
            .and_then(|p| {
                p.inventories()
                    .get(class)
                    .map(|i| i.capacity_exact() as i64)
            })
            .unwrap_or(0)
    };
    let planned: i64 = catalog
        .pools()
        .filter(|pool| pool.start <= t && t < pool.end)
        .flat_map(|pool| pool.deltas.iter())
        .filter(|(_, c, _)| c == class.as_str())
        .map(|(_, _, d)| *d)
        .sum();
    let total: i64 = catalog.providers().map(|p| capacity(p.uuid())).sum::<i64>() + planned;
    let (mut reserved, mut allocated, mut presented) = (0, 0, 0);
    for lease in catalog.leases().filter(|l| l.holds_capacity()) {
        for r in &lease.reservations {
            for (host, slots) in &r.hosts {
                let used = catalog.reserved_use(r.id, *host, class, Uuid::nil()) as i64;
                presented += used;
                // A lease left out counts as if it did not exist, with its instances.
                if without.contains(&lease.id.uuid()) || !(lease.start <= t && t < lease.end) {
                    continue;
                }
                let held = match &r.spec {
                    ReservationSpec::Host { .. } => capacity(*host),
                    spec => spec
                        .instance_amounts(u64::from(*slots))
                        .and_then(|a| a.into_iter().find(|(c, _)| c == class))
                        .map_or(0, |(_, n)| n as i64),
                };
                reserved += held - used;
                allocated += used;
            }
        }
    }
    let used: i64 = catalog.providers().map(|p| p.used(class) as i64).sum();
    allocated += used - presented;
    Figures {
        total,
        reserved,
        allocated,
        available: total - reserved - allocated,
    }
}

fn check(w: &World, probes: &[i64]) {
    let window = Window::new(
        Instant::from_micros((w.now - 2) * TICK),
        Instant::from_micros((w.now + 20) * TICK),
    )
    .expect("a window");
    let mut leases: Vec<Uuid> = w.catalog.leases().map(|l| l.id.uuid()).collect();
    leases.sort();
    let one = leases.get(probes[0].rem_euclid(8) as usize).copied();
    let cases = [
        ("VCPU", Vec::new()),
        ("MEMORY_MB", Vec::new()),
        ("VCPU", Vec::from_iter(one)),
    ];
    for (name, without) in cases {
        let class = class(name);
        let measure = Measure::Class(class.clone());
        let series =
            capacity::series(&w.catalog, None, window, &measure, &without).expect("a series");
        assert_eq!(series.steps[0].0, window.start());
        for (at, figures) in &series.steps {
            assert_eq!(
                figures.total,
                figures.reserved + figures.allocated + figures.available
            );
            assert_eq!(
                *figures,
                brute_force(&w.catalog, &class, *at, &without),
                "{name} at {at:?}"
            );
        }
        for probe in probes {
            let t = Instant::from_micros(window.start().as_micros() + probe.rem_euclid(22 * TICK));
            let step = series
                .steps
                .iter()
                .rev()
                .find(|(at, _)| *at <= t)
                .map(|(_, f)| *f)
                .expect("a step at or before every instant of the window");
            assert_eq!(
                step,
                brute_force(&w.catalog, &class, t, &without),
                "{name} at {t:?}"
            );
        }
        let summary = series.summary();
        let least = series.steps.iter().map(|(_, f)| f.available).min();
        let most = series.steps.iter().map(|(_, f)| f.reserved).max();
        assert_eq!(Some(summary.available), least);
        assert_eq!(Some(summary.reserved), most);
    }
    let size = [(class("VCPU"), 2), (class("MEMORY_MB"), 2048)];
    let fit =
        berth_core::decide::admission::instances_that_fit(&w.catalog, None, window, &size, &[])
            .expect("fits");
    // As many instances as the count says can be reserved over the window, and not one more.
    let admits = |amount: u64| {
        let spec = ReservationSpec::Instance {
            vcpus: 2,
            memory_mb: 2048,
            disk_gb: 0,
            amount: u32::try_from(amount).expect("a small count"),
            affinity: berth_core::model::lease::Affinity::Any,
            resource_properties: String::new().into(),
        };
        let want = wanted(&w.catalog, std::iter::once((&spec, None))).expect("a valid spec");
        berth_core::decide::admission::admit(&w.catalog, window, &want, &[]).is_ok()
    };
    if fit > 0 {
        assert!(admits(fit), "{fit} instances fit");
    }
    assert!(!admits(fit + 1), "{} instances do not fit", fit + 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn capacity_adds_up_and_matches_a_brute_force_count(
        ops in prop::collection::vec(op(), 1..40),
        probes in prop::collection::vec(0..i64::MAX, 8),
    ) {
        let mut w = world();
        for op in &ops {
            run(&mut w, op);
            check(&w, &probes);
        }
    }
}

/// A priority displaces another project's reservation only when the request was granted that
/// (by an admin); the project's own lower-priority reservations it may always displace.
#[test]
fn priorities_displace_other_projects_only_when_granted() {
    let mut w = world();
    let (now, base) = (w.at(), w.now);
    let t = move |ticks: i64| Instant::from_micros((base + ticks) * TICK);
    let (window, horizon) = ((t(10), t(20)), Search::until(t(48)));
    let mut low = pool_request(&mut w, window, 16, 10, None);
    low.project_id = "p1".into();
    let (changes, victim) = create_reservation(&w.catalog, &low, now, &horizon).expect("fits");
    w.apply(&changes);
    let pending = |w: &World| {
        w.catalog
            .lease(victim.id)
            .is_some_and(|l| l.status == LeaseStatus::Pending)
    };

    let mut other = pool_request(&mut w, window, 16, 100, None);
    other.project_id = "p2".into();
    assert!(
        create_reservation(&w.catalog, &other, now, &horizon).is_err(),
        "another project's priority 100 alone displaces nothing"
    );
    assert!(pending(&w));

    let mut own = pool_request(&mut w, window, 16, 100, None);
    own.project_id = "p1".into();
    let (changes, _) = create_reservation(&w.catalog, &own, now, &horizon)
        .expect("the project's own lower priority is displaced");
    assert!(!changes.is_empty());

    other.displace_other_projects = true;
    let (changes, _) = create_reservation(&w.catalog, &other, now, &horizon)
        .expect("a granted priority displaces");
    w.apply(&changes);
    assert!(
        !pending(&w),
        "the granted request displaced p1's reservation"
    );
}

/// Capacity moves with time alone only where a planned change starts or ends; the notification
/// engine relies on this to skip passes when nothing was committed.
#[test]
fn planned_changes_say_when_capacity_moves_with_time_alone() {
    let mut w = world();
    let t = |ticks: i64| Instant::from_micros(ticks * TICK);
    let change = CapacityChange {
        id: w.id(),
        source: format!("ResourceProvider:{}", Uuid::from_u128(1)),
        increase: true,
        amounts: vec![(class("VCPU"), 4)],
        start: Some(t(20)),
        end: Some(t(30)),
        force: true,
        project_id: "ops".into(),
    };
    let (changes, _) = change_capacity(&w.catalog, &change, w.at()).expect("planned");
    w.apply(&changes);
    assert!(!w.catalog.capacity_changes_between(t(10), t(19)));
    assert!(
        w.catalog.capacity_changes_between(t(19), t(20)),
        "it starts"
    );
    assert!(
        !w.catalog.capacity_changes_between(t(20), t(29)),
        "the start is not inside"
    );
    assert!(w.catalog.capacity_changes_between(t(29), t(31)), "it ends");
    assert!(!w.catalog.capacity_changes_between(t(30), t(40)));
}

#[test]
fn a_displacement_chosen_on_a_snapshot_is_rechecked_not_searched() {
    let mut w = world();
    let now = w.at();
    let base = w.now;
    let t = move |ticks: i64| Instant::from_micros((base + ticks) * TICK);
    let window = (t(10), t(20));
    // Sixteen 2-VCPU instances fill the four 8-VCPU hosts.
    let low = pool_request(&mut w, window, 16, 10, None);
    let (changes, _) =
        create_reservation(&w.catalog, &low, now, &Search::until(t(48))).expect("fits");
    w.apply(&changes);
    let high = pool_request(&mut w, window, 4, 50, None);
    // Under the writer lock nothing is searched: without a chosen displacement it is refused.
    assert!(create_reservation(&w.catalog, &high, now, &Search::NONE).is_err());
    // The search (on a snapshot) chooses the low-priority reservation ...
    let (changes, made) =
        create_reservation(&w.catalog, &high, now, &Search::until(t(48))).expect("displaces");
    let chosen = displaced_by(&changes, made.id);
    assert_eq!(chosen, vec![low.id]);
    // ... which the decision under the lock re-checks and displaces.
    let (rechecked, _) =
        create_reservation_displacing(&w.catalog, &high, now, &Search::NONE, &chosen)
            .expect("still displaceable");
    assert_eq!(displaced_by(&rechecked, high.id), chosen);
    // A choice that no longer holds (a lease that is gone, or one a request may not displace)
    // is refused rather than searched again.
    let gone = [LeaseId::from_u128(7)];
    assert!(create_reservation_displacing(&w.catalog, &high, now, &Search::NONE, &gone).is_err());
    let lower = pool_request(&mut w, window, 4, 5, None);
    assert!(
        create_reservation_displacing(&w.catalog, &lower, now, &Search::NONE, &chosen).is_err()
    );
    // A search cut by its budget finds no displacement.
    let stopped = Search {
        stop: &|| true,
        ..Search::until(t(48))
    };
    assert!(create_reservation(&w.catalog, &high, now, &stopped).is_err());
}
