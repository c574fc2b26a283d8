//! The conformance suite: every adapter must pass it, and the in-memory store is the reference.
//!
//! Run it with [`run_all`] and a factory that returns a fresh, empty, migrated store per case.

use crate::Store;
use berth_core::allocation::{self, ConsumerGeneration, ConsumerWrite};
use berth_core::catalog::CatalogRows;
use berth_core::consumer::Allocations;
use berth_core::decide::{self, NewHost, NewProvider, Reparenting};
use berth_core::inventory::FullReservation;
use berth_core::{
    AggregateRecord, AttrValue, Catalog, Change, Instant, Inventory, ResourceClass, TraitName,
};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use uuid::Uuid;

const T0: Instant = Instant::from_micros(1_700_000_000_000_000);

/// Runs every conformance case, each against a fresh store from `make`.
pub async fn run_all<S, F, Fut>(make: F)
where
    S: Store,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    empty_store_loads_empty(&make().await).await;
    changes_round_trip(&make().await).await;
    dropped_transaction_rolls_back(&make().await).await;
    deletes_cascade(&make().await).await;
    reparenting_round_trips(&make().await).await;
    writers_are_serialized(&make().await).await;
}

/// Applies one decision through the store and to the catalog, as the application does.
pub async fn write<S: Store>(
    store: &S,
    catalog: &mut Catalog,
    decision: impl FnOnce(&Catalog) -> decide::Decision,
) -> Vec<Change> {
    let changes = decision(catalog).expect("decision accepted");
    let mut tx = store.begin_write().await.expect("begin");
    assert_eq!(
        tx.catalog_seq().await.expect("seq"),
        catalog.seq(),
        "the catalog is current"
    );
    tx.persist(&changes, T0).await.expect("persist");
    let seq = tx.commit().await.expect("commit");
    catalog.apply(&changes);
    catalog.set_seq(seq);
    changes
}

async fn assert_same<S: Store>(store: &S, catalog: &Catalog) {
    let mut loaded = store.load_catalog().await.expect("load");
    loaded.normalize();
    assert_eq!(
        loaded,
        catalog.to_rows(),
        "storage holds what the catalog holds"
    );
    let rebuilt = Catalog::from_rows(loaded);
    rebuilt
        .check_invariants()
        .expect("a reloaded catalog keeps its invariants");
}

fn uuid(n: u128) -> Uuid {
    Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0000 + n)
}

fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("class name")
}

async fn create<S: Store>(
    store: &S,
    catalog: &mut Catalog,
    n: u128,
    name: &str,
    parent: Option<u128>,
) {
    let new = NewProvider {
        uuid: uuid(n),
        name: name.to_owned(),
        parent: parent.map(uuid),
        availability_zone: Some("az1".to_owned()),
    };
    write(store, catalog, |c| decide::create_provider(c, &new, T0)).await;
}

async fn empty_store_loads_empty<S: Store>(store: &S) {
    store.ping().await.expect("ping");
    assert_eq!(store.catalog_seq().await.expect("seq"), 0);
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows, CatalogRows::default());
}

async fn changes_round_trip<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    create(store, &mut catalog, 2, "cn1-numa0", Some(1)).await;
    write(store, &mut catalog, |c| {
        decide::create_resource_class(c, "CUSTOM_GOLD")
    })
    .await;
    write(store, &mut catalog, |c| {
        decide::create_trait(c, "CUSTOM_FAST")
    })
    .await;
    let inventories = BTreeMap::from([
        (
            class("VCPU"),
            Inventory::new(16, 2, [1, 8, 1], 4.0, FullReservation::Allowed).expect("valid"),
        ),
        (class("CUSTOM_GOLD"), Inventory::simple(3)),
        (
            class("MEMORY_MB"),
            Inventory::new(
                65_536,
                512,
                [256, 65_536, 256],
                1.5,
                FullReservation::Allowed,
            )
            .expect("valid"),
        ),
    ]);
    write(store, &mut catalog, |c| {
        decide::set_inventories(c, uuid(1), Some(0), inventories, T0)
    })
    .await;
    let traits = BTreeSet::from([
        TraitName::parse("CUSTOM_FAST").expect("trait"),
        TraitName::parse("HW_CPU_X86_AVX2").expect("trait"),
    ]);
    write(store, &mut catalog, |c| {
        decide::set_traits(c, uuid(1), Some(1), traits, T0)
    })
    .await;
    let aggregates = BTreeSet::from([uuid(100), uuid(101)]);
    write(store, &mut catalog, |c| {
        decide::set_aggregates(c, uuid(2), Some(0), aggregates, T0)
    })
    .await;
    let host = NewHost {
        name: "compute-7".to_owned(),
        uuid: uuid(7),
        vcpus: Some(32),
        memory_mb: Some(131_072),
        local_gb: Some(900),
        availability_zone: Some("az2".to_owned()),
        hypervisor_type: Some("QEMU".to_owned()),
        service_name: None,
        attributes: BTreeMap::from([
            ("gpu".to_owned(), AttrValue::Bool(true)),
            ("rack".to_owned(), AttrValue::String("r12".to_owned())),
            ("cpu_ghz".to_owned(), AttrValue::Number(2.6)),
            ("sockets".to_owned(), AttrValue::Number(2.0)),
        ]),
    };
    write(store, &mut catalog, |c| decide::enroll_host(c, &host, T0)).await;
    let record = AggregateRecord {
        name: Some("az2".to_owned()),
        metadata: BTreeMap::from([
            ("availability_zone".to_owned(), "az2".to_owned()),
            ("reservation:x".to_owned(), "1".to_owned()),
        ]),
    };
    write(store, &mut catalog, |c| {
        decide::describe_aggregate(c, uuid(101), Some(record))
    })
    .await;
    write(store, &mut catalog, |c| {
        decide::describe_aggregate(c, uuid(102), Some(AggregateRecord::default()))
    })
    .await;
    hold_capacity(store, &mut catalog).await;
    assert_eq!(store.catalog_seq().await.expect("seq"), catalog.seq());
    assert_same(store, &catalog).await;
}

/// Two consumers holding capacity on cn1 (`uuid(1)`) and compute-7 (`uuid(7)`).
async fn hold_capacity<S: Store>(store: &S, catalog: &mut Catalog) {
    let mut allocations = Allocations::new();
    allocations
        .entry(uuid(1))
        .or_default()
        .insert(class("VCPU"), 4);
    allocations
        .entry(uuid(1))
        .or_default()
        .insert(class("CUSTOM_GOLD"), 1);
    allocations
        .entry(uuid(7))
        .or_default()
        .insert(class("DISK_GB"), 100);
    let consumer = ConsumerWrite {
        consumer: uuid(500),
        project_id: "p1".to_owned(),
        user_id: "u1".to_owned(),
        consumer_type: Some("INSTANCE".to_owned()),
        generation: ConsumerGeneration::New,
        allocations,
    };
    write(store, catalog, |c| {
        allocation::set_allocations(c, std::slice::from_ref(&consumer), T0)
    })
    .await;
    let mut second = consumer.clone();
    second.consumer = uuid(501);
    second.consumer_type = None;
    second.allocations.remove(&uuid(7));
    write(store, catalog, |c| {
        allocation::set_allocations(c, &[second], T0)
    })
    .await;
    assert_eq!(
        catalog.provider(uuid(1)).expect("cn1").used(&class("VCPU")),
        8
    );
}

async fn dropped_transaction_rolls_back<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    let decision = decide::delete_provider(&catalog, uuid(1)).expect("accepted");
    {
        let mut tx = store.begin_write().await.expect("begin");
        tx.persist(&decision, T0).await.expect("persist");
        // Dropped without commit.
    }
    assert_eq!(store.catalog_seq().await.expect("seq"), 1);
    assert_same(store, &catalog).await;
}

async fn deletes_cascade<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    let host = NewHost {
        name: "compute-1".to_owned(),
        uuid: uuid(1),
        vcpus: Some(8),
        memory_mb: None,
        local_gb: None,
        availability_zone: None,
        hypervisor_type: None,
        service_name: Some("nova-compute".to_owned()),
        attributes: BTreeMap::from([("ssd".to_owned(), AttrValue::Bool(false))]),
    };
    write(store, &mut catalog, |c| decide::enroll_host(c, &host, T0)).await;
    let aggregates = BTreeSet::from([uuid(100)]);
    write(store, &mut catalog, |c| {
        decide::set_aggregates(c, uuid(1), None, aggregates, T0)
    })
    .await;
    let traits = BTreeSet::from([TraitName::parse("HW_CPU_X86_AVX2").expect("trait")]);
    let generation = catalog.provider(uuid(1)).expect("host").generation();
    write(store, &mut catalog, |c| {
        decide::set_traits(c, uuid(1), Some(generation), traits, T0)
    })
    .await;
    let mut allocations = Allocations::new();
    allocations
        .entry(uuid(1))
        .or_default()
        .insert(class("VCPU"), 2);
    let consumer = ConsumerWrite {
        consumer: uuid(600),
        project_id: "p".to_owned(),
        user_id: "u".to_owned(),
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations,
    };
    write(store, &mut catalog, |c| {
        allocation::set_allocations(c, &[consumer], T0)
    })
    .await;
    assert_same(store, &catalog).await;
    write(store, &mut catalog, |c| {
        allocation::delete_allocations(c, uuid(600), T0)
    })
    .await;
    let id = catalog.provider(uuid(1)).expect("host").id();
    write(store, &mut catalog, |c| decide::delete_host(c, id)).await;
    let record = AggregateRecord {
        name: Some("gone".to_owned()),
        metadata: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
    };
    write(store, &mut catalog, |c| {
        decide::describe_aggregate(c, uuid(100), Some(record))
    })
    .await;
    write(store, &mut catalog, |c| {
        decide::describe_aggregate(c, uuid(100), None)
    })
    .await;
    assert!(catalog.is_empty());
    assert_same(store, &catalog).await;
    // The name and the uuid are free again.
    create(store, &mut catalog, 1, "compute-1", None).await;
    assert_same(store, &catalog).await;
}

async fn reparenting_round_trips<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "a", None).await;
    create(store, &mut catalog, 2, "b", Some(1)).await;
    create(store, &mut catalog, 3, "c", Some(2)).await;
    create(store, &mut catalog, 4, "d", None).await;
    let reparent = |c: &Catalog| {
        decide::update_provider(c, uuid(2), "b2", Some(uuid(4)), Reparenting::Allowed, T0)
    };
    write(store, &mut catalog, reparent).await;
    assert_eq!(catalog.provider(uuid(3)).expect("c").root(), uuid(4));
    assert_same(store, &catalog).await;
}

async fn writers_are_serialized<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    let first = store.begin_write().await.expect("begin first");
    let second = async {
        let mut tx = store.begin_write().await.expect("begin second");
        tx.catalog_seq().await.expect("seq")
    };
    let commit_first = async {
        // Give the second writer every chance to run ahead before the first commits.
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
        first.commit().await.expect("commit first")
    };
    let (committed, seen_by_second) = tokio::join!(commit_first, second);
    assert_eq!(committed, 2);
    assert_eq!(
        seen_by_second, 2,
        "a second writer starts only after the first has committed"
    );
}
