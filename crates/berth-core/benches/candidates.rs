//! Allocation candidates over a large flat catalog: the whole answer, and with `limit=10`.

use berth_core::candidates::{CandidateQuery, Group, allocation_candidates};
use berth_core::decide::{self, NewProvider};
use berth_core::inventory::{FullReservation, Inventory};
use berth_core::query::MemberOf;
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
        let uuid = Uuid::from_u128(0x1000_0000 + idx as u128);
        let new = NewProvider {
            uuid,
            name: format!("cn{idx}"),
            parent: None,
            availability_zone: None,
        };
        let changes = decide::create_provider(&catalog, &new, at).expect("create");
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
            decide::set_inventories(&catalog, uuid, None, inventories, at).expect("inventory");
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
            let changes =
                decide::set_aggregates(&catalog, uuid, None, aggregates, at).expect("aggregates");
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

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = candidates
}
criterion_main!(benches);
