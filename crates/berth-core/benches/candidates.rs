//! Allocation candidates over a large flat catalog: the whole answer, and with `limit=10`.

use berth_core::decide::inventory::{self, NewProvider};
use berth_core::model::inventory::{FullReservation, Inventory};
use berth_core::query::candidates::{CandidateQuery, Group, allocation_candidates};
use berth_core::query::providers::MemberOf;
use berth_core::{Catalog, Instant, ResourceClass};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use uuid::Uuid;

const A: Uuid = Uuid::from_u128(0xa);
const B: Uuid = Uuid::from_u128(0xb);

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("class")
}

/// The benchmark workload: VCPU 64 (reserved 2, ratio 4), MEMORY_MB 262144 (reserved 4096),
/// DISK_GB 2000; aggregate A holds the first 30% of providers, B a 20% window from 15%.
pub fn catalog(n: usize) -> Catalog {
    let mut catalog = Catalog::new();
    let at = Instant::from_micros(1);
    for idx in 0..n {
        let uuid = berth_core::ProviderId::from_u128(0x1000_0000 + idx as u128);
        let new = NewProvider {
            uuid,
            name: format!("cn{idx}"),
            parent: None,
            availability_zone: None,
        };
        let changes = inventory::create_provider(&catalog, &new, at).expect("create");
        catalog.apply(&changes);
        let inventories = BTreeMap::from([
            (
                class("VCPU"),
                Inventory::new(64, 2, [1, 64, 1], 4.0, FullReservation::Allowed).expect("valid"),
            ),
            (
                class("MEMORY_MB"),
                Inventory::new(
                    262_144,
                    4096,
                    [1, 262_144, 1],
                    1.0,
                    FullReservation::Allowed,
                )
                .expect("valid"),
            ),
            (class("DISK_GB"), Inventory::simple(2000)),
        ]);
        let changes =
            inventory::set_inventories(&catalog, uuid, None, inventories, at).expect("inventory");
        catalog.apply(&changes);
        let share = idx * 100 / n;
        let mut aggregates = BTreeSet::new();
        if share < 30 {
            aggregates.insert(A);
        }
        if (15..35).contains(&share) {
            aggregates.insert(B);
        }
        if !aggregates.is_empty() {
            let changes = inventory::set_aggregates(&catalog, uuid, None, aggregates, at)
                .expect("aggregates");
            catalog.apply(&changes);
        }
    }
    catalog
}

fn query(limit: Option<usize>) -> CandidateQuery {
    let group = Group {
        suffix: String::new(),
        resources: vec![(class("VCPU"), 2), (class("MEMORY_MB"), 2048)],
        member_of: MemberOf {
            required: vec![],
            forbidden: BTreeSet::from([A, B]),
        },
        ..Group::default()
    };
    CandidateQuery {
        groups: vec![group],
        limit,
        nested_aware: true,
        ..CandidateQuery::default()
    }
}

fn candidates(c: &mut Criterion) {
    let catalog = catalog(5_000);
    let all = query(None);
    let ten = query(Some(10));
    assert_eq!(
        allocation_candidates(&catalog, &all).candidates.len(),
        3_250
    );
    c.bench_function("candidates_5000_all", |b| {
        b.iter(|| allocation_candidates(black_box(&catalog), black_box(&all)))
    });
    c.bench_function("candidates_5000_limit_10", |b| {
        b.iter(|| allocation_candidates(black_box(&catalog), black_box(&ten)))
    });
}

/// Fences the last 20% of the providers with 1,000 running reservations: 500 host reservations
/// (one provider each, held whole) and 500 instance reservations (two 4-VCPU slots each).
fn fence_fifth(catalog: &mut Catalog, n: usize) {
    use berth_core::model::lease::{
        Affinity, Lease, LeaseStatus, Reservation, ReservationSpec, ReservationStatus,
    };
    let now = Instant::from_micros(1);
    for (k, idx) in (n - n / 5..n).enumerate() {
        let host = berth_core::ProviderId::from_u128(0x1000_0000 + idx as u128);
        let spec = match k % 2 {
            0 => ReservationSpec::Host {
                min: 1,
                max: 1,
                hypervisor_properties: String::new().into(),
                resource_properties: String::new().into(),
                before_end: "default".into(),
            },
            _ => ReservationSpec::Instance {
                vcpus: 4,
                memory_mb: 4096,
                disk_gb: 10,
                amount: 2,
                affinity: Affinity::Any,
                resource_properties: String::new().into(),
            },
        };
        let reservation = Reservation {
            id: berth_core::ReservationId::from_u128(0x5000_0000 + k as u128),
            spec,
            status: ReservationStatus::Active,
            hosts: vec![(host, if k % 2 == 0 { 1 } else { 2 })].into(),
            floating_ips: Box::default(),
            missing: Box::default(),
            resources_changed: false,
            created_at: now,
            updated_at: now,
        };
        let lease = Lease {
            id: berth_core::LeaseId::from_u128(0x6000_0000 + k as u128),
            name: format!("fence{k}").into(),
            project_id: "p".into(),
            user_id: "u".into(),
            start: now,
            end: Instant::from_micros(1_000_000_000_000),
            status: LeaseStatus::Active,
            degraded: false,
            reservations: vec![reservation].into(),
            events: Default::default(),
            notice_lead: berth_core::Span::ZERO,
            preemption_noticed: true,
            lapses_at: None,
            rare: Default::default(),
            created_at: now,
            updated_at: now,
        };
        catalog.apply(&[berth_core::Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease)),
        }]);
    }
}

/// The same query with a fifth of the providers fenced by 1,000 running reservations, asked by a
/// consumer that presents none (the fence is checked on every provider).
fn candidates_fenced(c: &mut Criterion) {
    let mut catalog = catalog(5_000);
    fence_fifth(&mut catalog, 5_000);
    let all = CandidateQuery {
        unreserved: true,
        ..query(None)
    };
    assert_eq!(
        allocation_candidates(&catalog, &all).candidates.len(),
        3_250 - 500,
        "the 500 providers held whole are not offered"
    );
    c.bench_function("candidates_5000_all_fenced_fifth", |b| {
        b.iter(|| allocation_candidates(black_box(&catalog), black_box(&all)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = candidates, candidates_fenced
}
criterion_main!(benches);
