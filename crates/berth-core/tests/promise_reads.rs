//! Promise's reads through the public API: the reservations an ETSI query names or lists by
//! kind (each project sees its own), those a `query-reservation` filter matches and what they
//! hold over time, and the capacity vector, whose figures are those of each member's series.

use berth_core::decide::admission::Search;
use berth_core::decide::lease::{NewLease, create_lease};
use berth_core::decide::promise::{NewReservation, create_reservation};
use berth_core::model::capacity::{Figures, Measure};
use berth_core::model::ledger::Window;
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind};
use berth_core::model::provider::Attributes;
use berth_core::query::capacity::{self, Extent};
use berth_core::query::promise::{
    KindQuery, Named, ReservationQuery, WindowScope, matching, of_kind,
};
use berth_core::{Instant, LeaseId, Rejection, ReservationId, ResourceClass, Span};

mod support;
use support::{TICK, World};

fn t(ticks: i64) -> Instant {
    Instant::from_micros(ticks * TICK)
}

fn window(start: i64, end: i64) -> Window {
    Window::new(t(start), t(end)).expect("a window")
}

/// A pool of `instances` instances of 2 VCPU and 2 GiB for `project` over `[start, end)`.
fn pool(w: &mut World, project: &str, (start, end): (i64, i64), instances: u64) -> LeaseId {
    let new = NewReservation {
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
        start: Some(t(start)),
        end: Some(t(end)),
        expiry: None,
        zone: None,
        provider: None,
        priority: 50,
        displace_other_projects: false,
        project_id: project.into(),
        user_id: "u".into(),
        notice_lead: Span::ZERO,
    };
    let (changes, lease) =
        create_reservation(&w.catalog, &new, w.at(), &Search::NONE).expect("the pool fits");
    w.apply(&changes);
    w.now += 1;
    lease.id
}

/// A Blazar lease of one whole host for `project` over `[start, end)`.
fn host_lease(w: &mut World, project: &str, (start, end): (i64, i64)) -> LeaseId {
    let new = NewLease {
        id: LeaseId::new(w.id()),
        name: "hosts".into(),
        project_id: project.into(),
        user_id: "u".into(),
        start: t(start),
        end: t(end),
        before_end: None,
        reservations: vec![(ReservationId::new(w.id()), support::one_host())],
        event_ids: [w.id(), w.id(), w.id()],
        notice_lead: Span::ZERO,
    };
    let (changes, lease) =
        create_lease(&w.catalog, &new, w.at(), &Search::NONE).expect("the host lease fits");
    w.apply(&changes);
    w.now += 1;
    lease.id
}

fn world() -> World {
    World::with_hosts(4, |_| (Some("az1".to_owned()), Attributes::new()))
}

fn ids(named: Named<'_>) -> Vec<LeaseId> {
    match named {
        Named::One(lease) => vec![lease.id],
        Named::Many(leases) => leases.iter().map(|l| l.id).collect(),
    }
}

#[test]
fn an_etsi_query_lists_a_kind_or_names_reservations_each_project_its_own() {
    let mut w = world();
    let mine = pool(&mut w, "p", (20, 30), 2);
    let theirs = host_lease(&mut w, "q", (20, 30));
    let query = |kind, ids: Option<Vec<LeaseId>>, project: Option<&str>| KindQuery {
        kind,
        ids,
        project: project.map(str::to_owned),
    };
    let listed = |q: KindQuery| ids(of_kind(&w.catalog, &q).expect("listed"));
    // A host lease holds compute: every project's, oldest first, for an admin.
    assert_eq!(
        listed(query(PromiseKind::Compute, None, None)),
        [mine, theirs]
    );
    assert_eq!(listed(query(PromiseKind::Compute, None, Some("p"))), [mine]);
    assert!(listed(query(PromiseKind::Network, None, None)).is_empty());
    assert!(matches!(
        of_kind(
            &w.catalog,
            &query(PromiseKind::Compute, Some(vec![theirs]), None)
        ),
        Ok(Named::One(_))
    ));
    assert_eq!(
        listed(query(PromiseKind::Storage, Some(vec![theirs, mine]), None)),
        [theirs, mine],
        "named reservations are shown whatever their kind, in the order named"
    );
    assert_eq!(
        of_kind(
            &w.catalog,
            &query(PromiseKind::Compute, Some(vec![mine, theirs]), Some("p"))
        ),
        Err(Rejection::LeaseNotFound(theirs)),
        "another project's reservation is not found"
    );
}

fn filter(window: Option<(Window, WindowScope)>) -> ReservationQuery {
    ReservationQuery {
        project: None,
        zone: None,
        window,
        without: Vec::new(),
        some: Vec::new(),
        every: Vec::new(),
        utilization: true,
    }
}

#[test]
fn a_reservation_filter_matches_by_window_and_measures_what_they_hold() {
    let mut w = world();
    let early = pool(&mut w, "p", (20, 30), 2);
    let late = pool(&mut w, "p", (25, 40), 1);
    let inclusive = Some((window(22, 28), WindowScope::Inclusive));
    let found = matching(&w.catalog, &filter(inclusive));
    assert_eq!(found.reservations, [early, late], "by start");
    let levels: Vec<(Instant, i64, i64, i64)> = found
        .utilization
        .iter()
        .map(|s| (s.at, s.count, s.cores, s.instances))
        .collect();
    assert_eq!(
        levels,
        [(t(22), 1, 4, 2), (t(25), 2, 6, 3), (t(28), 0, 0, 0)],
        "clipped to the window"
    );
    let exclusive = Some((window(19, 31), WindowScope::Exclusive));
    assert_eq!(
        matching(&w.catalog, &filter(exclusive)).reservations,
        [early]
    );
    let mut without = filter(None);
    without.without = vec![early.uuid()];
    without.utilization = false;
    let found = matching(&w.catalog, &without);
    assert_eq!(found.reservations, [late]);
    assert!(found.utilization.is_empty(), "not asked for");
    let mut hosts = filter(None);
    hosts.some = vec!["h0".to_owned(), "no-such-host".to_owned()];
    let on_h0 = matching(&w.catalog, &hosts).reservations;
    assert!(
        on_h0.iter().all(|id| {
            w.catalog.lease(*id).is_some_and(|l| {
                l.reservations
                    .iter()
                    .any(|r| r.hosts.iter().any(|(h, _)| *h == w.hosts[0]))
            })
        }),
        "only reservations holding h0"
    );
}

#[test]
fn the_capacity_vector_is_each_members_series() {
    let mut w = world();
    let early = pool(&mut w, "p", (20, 30), 2);
    let host = host_lease(&mut w, "q", (25, 40));
    pool(&mut w, "p", (50, 60), 1);
    let extent = Extent {
        zone: Some("az1".to_owned()),
        origin: None,
        window: window(15, 45),
        without: Vec::new(),
    };
    let vector = capacity::vector(&w.catalog, &extent).expect("a known zone");
    let mut collections = vector.collections.clone();
    collections.sort_unstable();
    assert_eq!(collections, [early, host], "those holding in the window");
    let series = |name: &str| {
        let class = ResourceClass::parse(name).expect("a class");
        capacity::series(
            &w.catalog,
            Some("az1"),
            extent.window,
            &Measure::Class(class),
            &[],
        )
        .expect("a series")
    };
    let available = |f: &Figures| f.available;
    let summary = vector.summary(available);
    assert_eq!(summary.cores, series("VCPU").summary().available);
    assert_eq!(summary.ram, series("MEMORY_MB").summary().available);
    assert_eq!(
        summary.cores,
        32 - 4 - 8,
        "while the pool and the host lease (a whole host) overlap"
    );
    for (at, levels) in vector.steps(available) {
        let at_step = |name: &str| {
            series(name)
                .steps
                .iter()
                .take_while(|(t, _)| *t <= at)
                .last()
                .map_or(0, |(_, f)| f.available)
        };
        assert_eq!(levels.cores, at_step("VCPU"), "at {at:?}");
        assert_eq!(levels.gigabytes, at_step("DISK_GB"), "at {at:?}");
    }
    let unknown = Extent {
        zone: Some("nowhere".to_owned()),
        ..extent
    };
    assert!(matches!(
        capacity::vector(&w.catalog, &unknown),
        Err(Rejection::ZoneNotFound(_))
    ));
}
