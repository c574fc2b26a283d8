//! Provider clouds through the public API: reservations on an imported provider are kept and
//! flagged while its cloud cannot be reached, new ones are refused naming the cloud and admitted
//! again once it is back, and local writes to an imported provider are refused; capacity is
//! answered per origin (berth's own, each cloud's), the origins adding up to the whole, and a
//! capacity subscription naming a provider watches that provider's capacity only.

use berth_core::Catalog;
use berth_core::change::Change;
use berth_core::decide::admission::{Search, instances_that_fit_in};
use berth_core::decide::cloud::{add_provider_cloud, sync, unreachable};
use berth_core::decide::inventory::{NewHost, enroll_host, set_traits};
use berth_core::decide::lease::register_floating_ip;
use berth_core::decide::notify::{expand, subscribe};
use berth_core::decide::promise::{NewReservation, create_reservation};
use berth_core::model::capacity::Figures;
use berth_core::model::cloud::{
    CloudKind, CloudProject, Origin, ProviderCloud, RemoteDetails, RemoteInventory, RemoteProvider,
    RemoteSnapshot, local_provider_uuid,
};
use berth_core::model::id::ProviderId;
use berth_core::model::lease::FloatingIp;
use berth_core::model::ledger::Window;
use berth_core::model::notify::{CapacityInfo, Condition, Subscription, Threshold, Topic};
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind};
use berth_core::query::capacity::{self, Extent, Levels, Scope, VectorCapacity};
use berth_core::{Instant, LeaseId, Rejection, ReservationId, ResourceClass, Span};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

const DAY: i64 = 86_400_000_000;

fn cloud() -> ProviderCloud {
    ProviderCloud {
        id: Uuid::from_u128(1),
        kind: CloudKind::Openstack,
        auth_url: "http://keystone:5000/v3".to_owned(),
        username: "promise_user".to_owned(),
        project: CloudProject {
            id: None,
            name: Some("promise".to_owned()),
        },
        region: Some("RegionOne".to_owned()),
        placement_url: "http://placement:8778".to_owned(),
        compute_url: None,
        sealed_credentials: "sealed".to_owned(),
        created_at: Instant::from_micros(1),
        sync: Default::default(),
    }
}

/// A remote compute node with 8 VCPU, listed with its details or without.
fn node(details: bool) -> RemoteSnapshot {
    let vcpu = ResourceClass::parse("VCPU").expect("class");
    let details = details.then(|| RemoteDetails {
        inventories: BTreeMap::from([(
            vcpu,
            RemoteInventory {
                total: 8,
                reserved: 0,
                units: [1, 8, 1],
                allocation_ratio: 1.0,
            },
        )]),
        ..RemoteDetails::default()
    });
    RemoteSnapshot {
        providers: vec![RemoteProvider {
            uuid: Uuid::from_u128(2),
            name: "compute-2".to_owned(),
            generation: 1,
            parent: None,
            details,
        }],
    }
}

/// A Promise reservation of one instance of `cores` cores in RegionOne, tomorrow.
fn reservation(n: u128, cores: u64) -> NewReservation {
    NewReservation {
        id: LeaseId::from_u128(100 + n),
        reservation_ids: vec![ReservationId::from_u128(200 + n)],
        event_ids: [
            Uuid::from_u128(300 + n),
            Uuid::from_u128(400 + n),
            Uuid::from_u128(500 + n),
        ],
        kind: PromiseKind::Capacity,
        ask: Ask {
            pool: Some(PoolAsk {
                cores,
                ram_mb: 0,
                instances: 1,
            }),
            ..Ask::default()
        },
        start: Some(Instant::from_micros(DAY)),
        end: Some(Instant::from_micros(2 * DAY)),
        expiry: None,
        zone: Some("RegionOne".to_owned()),
        provider: None,
        priority: 0,
        displace_other_projects: false,
        project_id: "p".to_owned(),
        user_id: "u".to_owned(),
        notice_lead: Span::from_minutes(2),
    }
}

/// Kinds of the lifecycle records in `changes`.
fn recorded(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::LeaseRecorded(r) => Some(r.kind.clone()),
            _ => None,
        })
        .collect()
}

fn reserve(catalog: &Catalog, n: u128, cores: u64, at: i64) -> Result<Vec<Change>, Rejection> {
    create_reservation(
        catalog,
        &reservation(n, cores),
        Instant::from_micros(at),
        &Search::NONE,
    )
    .map(|(changes, _)| changes)
}

#[test]
fn reservations_on_an_unreachable_cloud_are_kept_and_flagged_and_local_writes_refused() {
    let mut catalog = Catalog::default();
    let id = Uuid::from_u128(1);
    catalog.apply(&add_provider_cloud(&catalog, cloud()).expect("added"));
    catalog.apply(&sync(&catalog, id, &node(true), Instant::from_micros(10)).expect("sync"));
    let local = ProviderId::new(local_provider_uuid(id, Uuid::from_u128(2)));
    assert_eq!(
        set_traits(
            &catalog,
            local,
            None,
            BTreeSet::new(),
            Instant::from_micros(15)
        ),
        Err(Rejection::ProviderImported {
            provider: local,
            cloud: id
        }),
        "only the synchronisation changes an imported provider"
    );
    catalog.apply(&reserve(&catalog, 1, 4, 20).expect("4 of 8 cores"));

    let changes = unreachable(&catalog, id, "timed out", Instant::from_micros(30)).expect("ok");
    assert_eq!(recorded(&changes), vec!["lease.provider_unreachable"]);
    catalog.apply(&changes);
    assert!(catalog.lease(LeaseId::from_u128(101)).is_some(), "kept");
    assert_eq!(
        reserve(&catalog, 2, 2, 40),
        Err(Rejection::ProviderCloudUnreachable {
            cloud: id,
            reason: "timed out".to_owned()
        })
    );

    let changes = sync(&catalog, id, &node(false), Instant::from_micros(50)).expect("sync");
    assert_eq!(recorded(&changes), vec!["lease.provider_restored"]);
    catalog.apply(&changes);
    catalog.check_invariants().expect("invariants");
    reserve(&catalog, 2, 2, 60).expect("admitted again");
}

/// A second cloud: another user of the same Keystone, so another registration.
fn other_cloud() -> ProviderCloud {
    ProviderCloud {
        id: Uuid::from_u128(3),
        username: "other_user".to_owned(),
        ..cloud()
    }
}

/// A remote compute node with `vcpus` VCPU and its details.
fn node_of(vcpus: u64) -> RemoteSnapshot {
    let mut snapshot = node(true);
    let details = snapshot.providers[0].details.as_mut().expect("details");
    for inventory in details.inventories.values_mut() {
        inventory.total = vcpus;
        inventory.units = [1, vcpus, 1];
    }
    snapshot
}

/// A local host of 4 VCPU and a floating IP, and two clouds' compute nodes of 8 and 16 VCPU,
/// all in RegionOne.
fn three_origins() -> Catalog {
    let mut catalog = Catalog::default();
    let host = NewHost {
        name: "local-1".to_owned(),
        uuid: ProviderId::from_u128(50),
        vcpus: Some(4),
        memory_mb: Some(4096),
        local_gb: Some(40),
        availability_zone: Some("RegionOne".to_owned()),
        hypervisor_type: None,
        service_name: None,
        attributes: Default::default(),
        reservable: true,
    };
    catalog.apply(&enroll_host(&catalog, &host, Instant::from_micros(5)).expect("enrolled"));
    let fip = FloatingIp {
        id: Uuid::from_u128(60),
        network_id: "public".to_owned(),
        subnet_id: None,
        address: "203.0.113.7".to_owned(),
        reservable: true,
        created_at: Instant::from_micros(5),
        updated_at: Instant::from_micros(5),
    };
    catalog.apply(&register_floating_ip(&catalog, fip).expect("registered"));
    for (cloud, vcpus) in [(cloud(), 8), (other_cloud(), 16)] {
        let id = cloud.id;
        catalog.apply(&add_provider_cloud(&catalog, cloud).expect("added"));
        let at = Instant::from_micros(10);
        catalog.apply(&sync(&catalog, id, &node_of(vcpus), at).expect("sync"));
    }
    catalog.check_invariants().expect("invariants");
    catalog
}

fn tomorrow(origin: Option<Origin>) -> Extent {
    Extent {
        zone: Some("RegionOne".to_owned()),
        origin,
        window: Window::new(Instant::from_micros(DAY), Instant::from_micros(2 * DAY))
            .expect("a window"),
        without: Vec::new(),
    }
}

#[test]
fn capacity_is_answered_per_origin_and_the_origins_add_up() {
    let mut catalog = three_origins();
    let (one, two) = (Origin::Cloud(cloud().id), Origin::Cloud(other_cloud().id));
    let mut on_one = reservation(1, 4);
    on_one.provider = Some(cloud().id);
    let (changes, _) =
        create_reservation(&catalog, &on_one, Instant::from_micros(20), &Search::NONE)
            .expect("4 of cloud one's 8 cores");
    catalog.apply(&changes);

    let of = |origin| capacity::vector(&catalog, &tomorrow(origin)).expect("a vector");
    let total = |v: &VectorCapacity| v.summary(|f| f.total);
    let reserved = |v: &VectorCapacity| v.summary(|f| f.reserved);
    assert_eq!(
        total(&of(Some(Origin::Local))).cores,
        4,
        "the local host alone"
    );
    assert_eq!(
        total(&of(Some(Origin::Local))).addresses,
        1,
        "berth's floating IP"
    );
    assert_eq!(total(&of(Some(one))).cores, 8);
    assert_eq!(
        total(&of(Some(one))).addresses,
        0,
        "a cloud has no floating IP"
    );
    assert_eq!(total(&of(Some(two))).cores, 16);
    assert_eq!(total(&of(None)).cores, 28, "every origin");
    assert_eq!(
        reserved(&of(Some(one))).cores,
        4,
        "the reservation is on cloud one"
    );
    assert_eq!(reserved(&of(Some(two))).cores, 0);
    assert_eq!(reserved(&of(Some(Origin::Local))).cores, 0);
    assert_eq!(of(Some(one)).collections, of(None).collections);
    assert!(of(Some(two)).collections.is_empty());

    let breakdown = capacity::vector_by_origin(&catalog, &tomorrow(None)).expect("a breakdown");
    let origins: Vec<Origin> = breakdown.iter().map(|(o, _)| *o).collect();
    assert_eq!(
        origins,
        [Origin::Local, one, two],
        "berth's own first, then by id"
    );
    for (origin, vector) in &breakdown {
        assert_eq!(*vector, of(Some(*origin)), "{origin}");
    }
    let whole = of(None);
    for pick in [
        (|f: &Figures| f.total) as fn(&Figures) -> i64,
        |f| f.reserved,
        |f| f.allocated,
        |f| f.available,
    ] {
        let parts = breakdown.iter().map(|(_, v)| v.summary(pick));
        let sum = parts.fold(Levels::default(), |a, b| Levels {
            cores: a.cores + b.cores,
            ram: a.ram + b.ram,
            gigabytes: a.gigabytes + b.gigabytes,
            addresses: a.addresses + b.addresses,
        });
        assert_eq!(sum, whole.summary(pick));
    }
    let named = capacity::vector_by_origin(&catalog, &tomorrow(Some(two))).expect("named");
    assert_eq!(named, vec![(two, of(Some(two)))], "only the origin named");

    let size = [(ResourceClass::parse("VCPU").expect("class"), 2)];
    let fit = |origin| {
        let scope = Scope {
            zone: Some("RegionOne"),
            origin,
        };
        instances_that_fit_in(&catalog, scope, tomorrow(None).window, &size, &[]).expect("fit")
    };
    assert_eq!(fit(Some(Origin::Local)), 2);
    assert_eq!(fit(Some(one)), 2, "4 of its 8 cores are reserved");
    assert_eq!(fit(Some(two)), 8);
    assert_eq!(fit(None), 12);

    let unknown = Origin::Cloud(Uuid::from_u128(99));
    assert_eq!(
        capacity::vector(&catalog, &tomorrow(Some(unknown))),
        Err(Rejection::ProviderCloudNotFound(Uuid::from_u128(99)))
    );
    assert_eq!(
        capacity::vector_by_origin(&catalog, &tomorrow(Some(unknown))),
        Err(Rejection::ProviderCloudNotFound(Uuid::from_u128(99)))
    );
}

#[test]
fn a_capacity_subscription_watches_its_provider_only() {
    let mut catalog = three_origins();
    let two = Origin::Cloud(other_cloud().id);
    let subscription = |id: u128, origin| Subscription {
        id: Uuid::from_u128(id),
        project_id: "p".to_owned(),
        topic: Topic::Capacity {
            resource: PromiseKind::Compute,
            type_id: "numCpuCores".to_owned(),
            zone: Some("RegionOne".to_owned()),
            threshold: Threshold {
                info: CapacityInfo::Available,
                condition: Condition::Lt,
                value: 12,
            },
            flavor: None,
            origin,
        },
        callback: None,
        secret: None,
        triggered: None,
        fired: 0,
        created_at: Instant::from_micros(1),
    };
    assert_eq!(
        subscribe(
            &catalog,
            subscription(70, Some(Origin::Cloud(Uuid::from_u128(99)))),
            None
        ),
        Err(Rejection::ProviderCloudNotFound(Uuid::from_u128(99)))
    );
    catalog.apply(&subscribe(&catalog, subscription(71, Some(two)), None).expect("subscribed"));
    catalog.apply(&subscribe(&catalog, subscription(72, None), None).expect("subscribed"));
    let now = Instant::from_micros(2 * DAY + DAY / 2);
    catalog.apply(&expand(&catalog, 0, &[], now));
    let triggered = |catalog: &Catalog, id| {
        catalog
            .subscription(Uuid::from_u128(id))
            .and_then(|s| s.triggered)
    };
    assert_eq!(
        triggered(&catalog, 71),
        Some(false),
        "16 available on cloud two"
    );
    assert_eq!(triggered(&catalog, 72), Some(false), "28 available in all");

    // Cloud two's node shrinks to 8 VCPU: under 12 there, 20 in all.
    let at = Instant::from_micros(2 * DAY + DAY / 2 + 1);
    let mut shrunk = node_of(8);
    shrunk.providers[0].generation = 2;
    catalog.apply(&sync(&catalog, other_cloud().id, &shrunk, at).expect("sync"));
    let changes = expand(&catalog, 0, &[], at);
    let bodies: Vec<serde_json::Value> = changes
        .iter()
        .filter_map(|c| match c {
            Change::LeaseRecorded(r) => serde_json::from_str(&r.details).ok(),
            _ => None,
        })
        .collect();
    catalog.apply(&changes);
    assert_eq!(
        triggered(&catalog, 71),
        Some(true),
        "8 available on cloud two"
    );
    assert_eq!(triggered(&catalog, 72), Some(false), "still 20 in all");
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(bodies[0]["providerId"], two.to_string());
    assert_eq!(bodies[0]["capacityInformation"]["total"], 8);
}

#[test]
fn an_origin_alone_in_its_scope_answers_as_the_whole() {
    // One cloud and nothing of berth's own: the cloud's answer is the whole's.
    let mut catalog = Catalog::default();
    catalog.apply(&add_provider_cloud(&catalog, cloud()).expect("added"));
    let at = Instant::from_micros(10);
    catalog.apply(&sync(&catalog, cloud().id, &node_of(8), at).expect("sync"));
    let one = Origin::Cloud(cloud().id);
    let whole = capacity::vector(&catalog, &tomorrow(None)).expect("a vector");
    let scoped = capacity::vector(&catalog, &tomorrow(Some(one))).expect("a vector");
    assert_eq!(whole, scoped);
    let breakdown = capacity::vector_by_origin(&catalog, &tomorrow(None)).expect("a breakdown");
    assert_eq!(breakdown, vec![(one, whole)]);

    // With the other clouds and berth's own beside it, each answers its own.
    let catalog = three_origins();
    let breakdown = capacity::vector_by_origin(&catalog, &tomorrow(None)).expect("a breakdown");
    assert_eq!(breakdown.len(), 3);
    assert_eq!(breakdown[1].1.summary(|f| f.total).cores, 8);
}
