//! Provider clouds through the public API: reservations on an imported provider are kept and
//! flagged while its cloud cannot be reached, new ones are refused naming the cloud and admitted
//! again once it is back, and local writes to an imported provider are refused.

use berth_core::Catalog;
use berth_core::change::Change;
use berth_core::decide::admission::Search;
use berth_core::decide::cloud::{add_provider_cloud, sync, unreachable};
use berth_core::decide::inventory::set_traits;
use berth_core::decide::promise::{NewReservation, create_reservation};
use berth_core::model::cloud::{
    CloudKind, CloudProject, ProviderCloud, RemoteDetails, RemoteInventory, RemoteProvider,
    RemoteSnapshot, local_provider_uuid,
};
use berth_core::model::id::ProviderId;
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind};
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
