//! The conformance suite: every adapter must pass it, and the in-memory store is the reference.
//!
//! Run it with [`run_all`] and a factory that returns a fresh, empty, migrated store per case.

use crate::port::{CHANGE_LOG_PAGE, Committed, Store, StoreError, Tail};
use berth_core::catalog::CatalogRows;
use berth_core::change::Decision;
use berth_core::decide::allocation::{self, ConsumerGeneration, ConsumerWrite};
use berth_core::decide::inventory::{self as decide, NewHost, NewProvider, Reparenting};
use berth_core::model::consumer::Allocations;
use berth_core::model::inventory::FullReservation;
use berth_core::model::lease::{
    Affinity, EventKind, EventStatus, FloatingIp, Lease, LeaseEvent, LeaseRecord, LeaseStatus,
    Reservation, ReservationSpec, ReservationStatus,
};
use berth_core::model::ledger::Window;
use berth_core::model::usage::{UsageKind, UsageSegment, UsageSource};
use berth_core::{
    AggregateRecord, AttrValue, Catalog, Change, Instant, Inventory, LeaseId, ProviderId,
    ReservationId, ResourceClass, TraitName,
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
    leases_round_trip(&make().await).await;
    many_leases_round_trip(&make().await).await;
    floating_ips_round_trip(&make().await).await;
    lease_records_are_appended(&make().await).await;
    a_batch_writes_each_leases_last_state_and_every_record(&make().await).await;
    a_batch_writes_each_consumers_last_state_in_time(&make().await).await;
    a_batch_writes_each_providers_last_state_whatever_names_it_swaps(&make().await).await;
    private_properties_round_trip(&make().await).await;
    promise_objects_round_trip(&make().await).await;
    provider_conditions_round_trip(&make().await).await;
    nodes_and_claims_round_trip(&make().await).await;
    idempotency_keys_round_trip(&make().await).await;
    usage_history_round_trips(&make().await).await;
    usage_history_is_pruned_oldest_end_first(&make().await).await;
}

/// An hour after `T0`, or before it.
fn hour(hours: i64) -> Instant {
    T0 + berth_core::Span::from_hours(hours)
}

/// A closed usage segment of project p1 on provider 3, in VCPU (reservation 9 unless on
/// demand).
fn usage_segment(
    source: UsageSource,
    kind: UsageKind,
    amount: u64,
    since: i64,
    until: i64,
) -> UsageSegment {
    UsageSegment {
        source,
        kind,
        project_id: "p1".to_owned(),
        reservation: (kind != UsageKind::OnDemand).then(|| ReservationId::new(Uuid::from_u128(9))),
        provider: ProviderId::new(Uuid::from_u128(3)),
        class: ResourceClass::parse("VCPU").expect("a class"),
        amount,
        since: hour(since),
        until: Some(hour(until)),
    }
}

/// Writes `segments` in one commit; its sequence.
async fn write_usage<S: Store>(store: &S, segments: &[UsageSegment]) -> u64 {
    let mut tx = store.begin_write().await.expect("begin");
    tx.record_usage(segments).await.expect("record usage");
    tx.commit().await.expect("commit")
}

const USAGE_LEASE: UsageSource = UsageSource::Lease(LeaseId::new(Uuid::from_u128(7)));
const USAGE_CONSUMER: UsageSource = UsageSource::Consumer(Uuid::from_u128(7));

/// The usage history: segments written by commits are read back in the order written, with
/// every field, by a read up to a commit's sequence alone; a rolled-back write adds nothing; a
/// read keeps to the segments that overlap its period and to its limit.
async fn usage_history_round_trips<S: Store>(store: &S) {
    let (lease, consumer) = (USAGE_LEASE, USAGE_CONSUMER);
    let everything = Window::new(hour(-100), hour(100)).expect("a period");
    let before = store.catalog_seq().await.expect("seq");
    let first = [
        usage_segment(lease, UsageKind::Reserved, 8, 2, 4),
        usage_segment(consumer, UsageKind::Consumed, 3, 1, 4),
    ];
    let seq = write_usage(store, &first).await;
    assert_eq!(
        store
            .usage_segments(everything, seq, 10)
            .await
            .expect("read"),
        first
    );
    assert_eq!(
        store
            .usage_segments(everything, before, 10)
            .await
            .expect("read"),
        [],
        "a read up to an earlier commit sees none of a later one's segments"
    );
    // Rolled back: nothing is added.
    let mut tx = store.begin_write().await.expect("begin");
    tx.record_usage(&[usage_segment(consumer, UsageKind::OnDemand, 5, 4, 6)])
        .await
        .expect("record usage");
    drop(tx);
    assert_eq!(
        store
            .usage_segments(everything, u64::MAX >> 1, 10)
            .await
            .expect("read"),
        first
    );
    let later = [usage_segment(consumer, UsageKind::OnDemand, 5, 4, 6)];
    let next = write_usage(store, &later).await;
    assert!(next > seq);
    assert_eq!(
        store
            .usage_segments(everything, seq, 10)
            .await
            .expect("read"),
        first
    );
    let all: Vec<UsageSegment> = first.iter().chain(&later).cloned().collect();
    assert_eq!(
        store
            .usage_segments(everything, next, 10)
            .await
            .expect("read"),
        all
    );
    // A period of hours 4 to 5 reads the segment running then alone (those ending at 4 do
    // not overlap it); the limit cuts a read.
    let late = Window::new(hour(4), hour(5)).expect("a period");
    assert_eq!(
        store.usage_segments(late, next, 10).await.expect("read"),
        later
    );
    assert_eq!(
        store
            .usage_segments(everything, next, 2)
            .await
            .expect("read")
            .len(),
        2
    );
}

/// Pruning the usage history deletes at most as many segments as asked, of those that ended
/// before the instant asked, the earliest ends first; a rolled-back prune deletes nothing.
async fn usage_history_is_pruned_oldest_end_first<S: Store>(store: &S) {
    let lease = USAGE_LEASE;
    let everything = Window::new(hour(-100), hour(100)).expect("a period");
    let ended = |since, until| usage_segment(lease, UsageKind::Reserved, 1, since, until);
    let written = [
        ended(3, 4),
        ended(0, 1),
        ended(2, 3),
        ended(1, 2),
        ended(8, 9),
        ended(0, 20),
    ];
    let seq = write_usage(store, &written).await;
    let prune = |before, limit| async move {
        let mut tx = store.begin_write().await.expect("begin");
        tx.prune_usage(hour(before), limit).await.expect("prune");
        tx
    };
    drop(prune(10, 10).await);
    let left = || async move {
        let mut ends: Vec<_> = store
            .usage_segments(everything, seq + 10, 10)
            .await
            .expect("read")
            .iter()
            .map(|s| s.until)
            .collect();
        ends.sort();
        ends
    };
    assert_eq!(left().await.len(), 6);
    prune(5, 2).await.commit().await.expect("commit");
    assert_eq!(
        left().await,
        [Some(hour(3)), Some(hour(4)), Some(hour(9)), Some(hour(20))]
    );
    prune(5, 10).await.commit().await.expect("commit");
    assert_eq!(left().await, [Some(hour(9)), Some(hour(20))]);
}

/// Idempotency keys round-trip with the change that records them (and only in the store: the
/// catalog's rows hold none), stay apart per project and route, are read by key inside and
/// outside a write, are replaced once expired, and are pruned oldest first, at most as many as
/// asked.
async fn idempotency_keys_round_trip<S: Store>(store: &S) {
    use berth_core::decide::idempotency::record;
    use berth_core::model::idempotency::{IDEMPOTENCY_TTL, IdempotencyKey};
    let mut catalog = Catalog::new();
    let request = keyed;
    let at = |micros: i64| T0 + berth_core::Span::from_micros(micros);
    let leases = "POST /reservation/v1/leases";
    let claims = "POST /baremetal/v1/reservations";
    let long = "k".repeat(berth_core::limits::IDEMPOTENCY_KEY_LEN_MAX);
    let asked = [
        request("p1", leases, "key-1", "f1"),
        request("p2", leases, "key-1", "f2"),
        request("p1", claims, "key-1", "f3"),
        request("p1", leases, &long, "f4"),
    ];
    // Recorded in the same commit as the object it names, each a microsecond after the last.
    let new = NewProvider {
        uuid: pid(0xD0),
        name: "cn1".to_owned(),
        parent: None,
        availability_zone: None,
    };
    let mut changes = decide::create_provider(&catalog, &new, T0).expect("created");
    for (n, asked) in (0_i64..).zip(&asked) {
        changes.push(record(asked, uuid(0xD0 + n as u128), at(n)));
    }
    write_changes(store, &mut catalog, changes).await;
    assert_same(store, &catalog).await;
    for (n, asked) in (0_i64..).zip(&asked) {
        let found = store.idempotency_record(&asked.key).await.expect("read");
        let found = found.expect("recorded");
        assert_eq!(
            (
                found.object_id,
                found.fingerprint.as_str(),
                found.created_at
            ),
            (uuid(0xD0 + n as u128), asked.fingerprint.as_str(), at(n))
        );
    }
    let unknown = request("p3", leases, "key-1", "f1").key;
    assert_eq!(
        store.idempotency_record(&unknown).await.expect("read"),
        None
    );
    // Inside a write, one read answers the keys that have a record.
    let mut tx = store.begin_write().await.expect("begin");
    let mut found = tx
        .idempotency_records(&[&asked[2].key, &unknown, &asked[0].key])
        .await
        .expect("read");
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let found: Vec<(&IdempotencyKey, Uuid)> = found.iter().map(|(k, r)| (k, r.object_id)).collect();
    assert_eq!(
        found,
        vec![(&asked[2].key, uuid(0xD2)), (&asked[0].key, uuid(0xD0))]
    );
    // Pruning dropped with its transaction is rolled back.
    tx.prune_idempotency(at(10), 4).await.expect("prune");
    drop(tx);
    assert!(
        store
            .idempotency_record(&asked[3].key)
            .await
            .expect("read")
            .is_some()
    );
    // Expired: a new request with the key replaces the record.
    let again = request("p1", leases, "key-1", "f5");
    let later = T0 + IDEMPOTENCY_TTL;
    write_changes(store, &mut catalog, vec![record(&again, uuid(0xD4), later)]).await;
    let replaced = store.idempotency_record(&again.key).await.expect("read");
    assert_eq!(
        replaced.map(|r| (r.object_id, r.fingerprint, r.created_at)),
        Some((uuid(0xD4), "f5".to_owned(), later))
    );
    // The oldest go first, no more than asked, and nothing as young as `before`.
    let mut tx = store.begin_write().await.expect("begin");
    tx.prune_idempotency(at(3), 1).await.expect("prune");
    tx.commit().await.expect("commit");
    let keys = [&asked[1].key, &asked[2].key, &asked[3].key, &again.key];
    assert_eq!(recorded(store, &keys).await, [false, true, true, true]);
    let mut tx = store.begin_write().await.expect("begin");
    tx.prune_idempotency(at(3), 10).await.expect("prune");
    tx.commit().await.expect("commit");
    assert_eq!(recorded(store, &keys).await, [false, false, true, true]);
    // Pruning changed no catalog row.
    catalog.set_seq(store.catalog_seq().await.expect("seq"));
    assert_same(store, &catalog).await;
}

/// A request's key, scoped to `project` and `route`, with `fingerprint`.
fn keyed(
    project: &str,
    route: &str,
    key: &str,
    fingerprint: &str,
) -> berth_core::model::idempotency::Idempotent {
    berth_core::model::idempotency::Idempotent {
        key: berth_core::model::idempotency::IdempotencyKey {
            project_id: project.to_owned(),
            route: route.to_owned(),
            key: key.to_owned(),
        },
        fingerprint: fingerprint.to_owned(),
    }
}

/// Whether each of `keys` has a record in `store`.
async fn recorded<S: Store>(
    store: &S,
    keys: &[&berth_core::model::idempotency::IdempotencyKey],
) -> Vec<bool> {
    let mut found = Vec::with_capacity(keys.len());
    for key in keys {
        found.push(store.idempotency_record(key).await.expect("read").is_some());
    }
    found
}

/// A node record and a claim round-trip, change, and go (the claim on release, the record with
/// its node).
async fn nodes_and_claims_round_trip<S: Store>(store: &S) {
    use berth_core::decide::baremetal::{
        Candidates, ClaimRequest, NewNode, claim, delete_node, enroll_node, release_claim,
    };
    use berth_core::model::baremetal::ProvisionState;
    let mut catalog = Catalog::new();
    let new = NewNode {
        uuid: pid(0xB0),
        name: Some("node-0".into()),
        resource_class: "baremetal gold".into(),
        properties: BTreeMap::from([("cpus".to_owned(), AttrValue::Number(16.0))]),
        traits: vec!["CUSTOM_GPU".into()],
        availability_zone: None,
        provision_state: ProvisionState::Available,
    };
    let changes = enroll_node(&catalog, &new, T0).expect("enrolled");
    write_changes(store, &mut catalog, changes).await;
    assert_same(store, &catalog).await;
    let request = ClaimRequest {
        uuid: uuid(0xC0),
        instance_uuid: uuid(0xC1),
        candidates: Candidates::Nodes(vec![pid(0xB0)]),
        project_id: "p".into(),
        user_id: "u".into(),
        ttl: berth_core::Span::from_secs(60),
        allocation: None,
    };
    let (changes, _) = claim(
        &catalog,
        &request,
        T0,
        berth_core::query::presentation::FencePolicy::Enforced,
    )
    .expect("claimed");
    write_changes(store, &mut catalog, changes).await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!((rows.nodes.len(), rows.claims.len()), (1, 1));
    let changes = release_claim(&catalog, uuid(0xC0), None, T0).expect("released");
    write_changes(store, &mut catalog, changes).await;
    assert_same(store, &catalog).await;
    // An Ironic allocation is a claim with Ironic's fields that never expires.
    let record = berth_core::model::baremetal::AllocationRecord {
        name: Some("allocation-0".into()),
        resource_class: "baremetal gold".into(),
        candidate_nodes: vec![pid(0xB0)],
        traits: Vec::new(),
        extra: r#"{"purpose":"ci"}"#.into(),
        owner: Some("p".into()),
    };
    let allocation = ClaimRequest {
        uuid: uuid(0xC2),
        instance_uuid: uuid(0xC2),
        allocation: Some(record.clone()),
        ..request
    };
    let (changes, made) = claim(
        &catalog,
        &allocation,
        T0,
        berth_core::query::presentation::FencePolicy::Enforced,
    )
    .expect("allocated");
    assert_eq!(
        made.expires_at,
        berth_core::model::baremetal::NodeClaim::NEVER
    );
    write_changes(store, &mut catalog, changes).await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.claims.len(), 1);
    assert_eq!(rows.claims[0].allocation, Some(record));
    let changes = release_claim(&catalog, uuid(0xC2), None, T0).expect("released");
    write_changes(store, &mut catalog, changes).await;
    assert_same(store, &catalog).await;
    let changes = delete_node(&catalog, "node-0").expect("deleted");
    write_changes(store, &mut catalog, changes).await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert!(rows.nodes.is_empty() && rows.claims.is_empty() && rows.providers.is_empty());
}

/// A provider's condition round-trips, is replaced, is removed, and goes with its provider.
async fn provider_conditions_round_trip<S: Store>(store: &S) {
    use berth_core::{ProviderCondition, ProviderStatus};
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    create(store, &mut catalog, 2, "cn2", None).await;
    let set =
        |n: u128, status: ProviderStatus, reason: Option<&str>| Change::ProviderConditionSet {
            uuid: pid(n),
            condition: Some(ProviderCondition {
                status,
                reason: reason.map(str::to_owned),
                since: T0,
            }),
        };
    write_changes(
        store,
        &mut catalog,
        vec![
            set(1, ProviderStatus::Down, Some("PSU \"A\" failed ✗")),
            set(2, ProviderStatus::Maintenance, None),
        ],
    )
    .await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.conditions.len(), 2);
    write_changes(
        store,
        &mut catalog,
        vec![set(
            1,
            ProviderStatus::Maintenance,
            Some("replacing the PSU"),
        )],
    )
    .await;
    assert_same(store, &catalog).await;
    let back = Change::ProviderConditionSet {
        uuid: pid(2),
        condition: None,
    };
    write_changes(store, &mut catalog, vec![back]).await;
    assert_same(store, &catalog).await;
    let gone = decide::delete_provider(&catalog, pid(1)).expect("deletable");
    write_changes(store, &mut catalog, gone).await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert!(rows.conditions.is_empty(), "{:?}", rows.conditions);
}

/// Subscriptions, deliveries and the outbox cursor round-trip, are replaced and are deleted.
async fn notification_state_round_trips<S: Store>(store: &S, catalog: &mut Catalog) {
    use berth_core::model::notify::{Delivery, DeliveryStatus, Subscription, Topic};
    let subscription = Subscription {
        id: Uuid::from_u128(0x5ab),
        project_id: "p".into(),
        topic: Topic::Reservations {
            ids: vec![LeaseId::from_u128(9)],
        },
        callback: Some("http://127.0.0.1:9/hook".into()),
        secret: Some("s".into()),
        triggered: None,
        fired: 0,
        created_at: T0,
    };
    let delivery = Delivery {
        id: "7.sub".into(),
        subscription: subscription.id,
        body: "{}".into(),
        attempts: 2,
        next_at: T0,
        status: DeliveryStatus::Dead,
        last_error: Some("500".into()),
        created_at: T0,
    };
    let made = vec![
        Change::SubscriptionSet {
            id: subscription.id,
            subscription: Some(subscription.clone()),
        },
        Change::DeliverySet {
            id: delivery.id.clone(),
            delivery: Some(delivery.clone()),
        },
        Change::OutboxCursor(7),
    ];
    write_changes(store, catalog, made).await;
    assert_same(store, catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.subscriptions, std::slice::from_ref(&subscription));
    assert_eq!(rows.deliveries, std::slice::from_ref(&delivery));
    assert_eq!(rows.outbox_cursor, 7);
    let gone = vec![
        Change::DeliverySet {
            id: delivery.id.clone(),
            delivery: None,
        },
        Change::SubscriptionSet {
            id: subscription.id,
            subscription: None,
        },
        Change::OutboxCursor(9),
    ];
    write_changes(store, catalog, gone).await;
    assert_same(store, catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert!(rows.subscriptions.is_empty() && rows.deliveries.is_empty());
    assert_eq!(rows.outbox_cursor, 9);
}

/// A budget with charges in two periods, one of them past u32's range of unit-seconds.
fn sample_budget() -> berth_core::model::budget::Budget {
    use std::collections::BTreeMap;
    let vcpu = ResourceClass::parse("VCPU").expect("a class");
    berth_core::model::budget::Budget {
        project_id: "lab".into(),
        period: berth_core::model::budget::BudgetPeriod::Month,
        limits: BTreeMap::from([(vcpu.clone(), 2_000)]),
        charged: BTreeMap::from([
            (T0, BTreeMap::from([(vcpu.clone(), 7_200)])),
            (
                T0 + berth_core::Span::from_days(31),
                BTreeMap::from([(vcpu, 9_000_000_000)]),
            ),
        ]),
        updated_at: T0,
    }
}

/// Flavors, the policy and Promise instances round-trip, are replaced and are deleted.
async fn promise_objects_round_trip<S: Store>(store: &S) {
    use berth_core::model::promise::{Flavor, Policy, PromiseInstance};
    let mut catalog = Catalog::new();
    let flavor = |id: &str, vcpus: u64| Flavor {
        id: id.to_owned(),
        name: format!("m1.{id}"),
        vcpus,
        ram_mb: 2048,
        disk_gb: 20,
        cpu_architecture: Some("x86_64".into()),
        extra_specs: [("hw:cpu_policy".to_owned(), "dedicated".to_owned())].into(),
        created_at: T0,
    };
    let instance = PromiseInstance {
        id: Uuid::from_u128(0x1257),
        name: "vm1".into(),
        flavor_id: "small".into(),
        image: Some("cirros".into()),
        reservation: Some(LeaseId::from_u128(0x1ea5e)),
        host: ProviderId::from_u128(1),
        project_id: "p".into(),
        user_id: "u".into(),
        created_at: T0,
    };
    let policy = Policy {
        max_future_start_days: Some(30),
        max_future_end_days: None,
        max_duration_hours: Some(48),
        expiry_minutes: Some(15),
        preemption: false,
    };
    let budget = sample_budget();
    let objects = vec![
        Change::FlavorSet {
            id: "small".into(),
            flavor: Some(flavor("small", 2)),
        },
        Change::FlavorSet {
            id: "large".into(),
            flavor: Some(flavor("large", 8)),
        },
        Change::PolicySet(policy.clone()),
        Change::InstanceSet {
            id: instance.id,
            instance: Some(instance.clone()),
        },
        Change::BudgetSet {
            project: "lab".into(),
            budget: Some(Box::new(budget.clone())),
        },
    ];
    write_changes(store, &mut catalog, objects).await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.budgets, std::slice::from_ref(&budget));
    assert_eq!(rows.policy, Some(policy.clone()));
    assert_eq!(rows.instances, std::slice::from_ref(&instance));
    let changed = vec![
        Change::FlavorSet {
            id: "large".into(),
            flavor: None,
        },
        Change::PolicySet(Policy::default()),
        Change::InstanceSet {
            id: instance.id,
            instance: None,
        },
        Change::BudgetSet {
            project: "lab".into(),
            budget: None,
        },
    ];
    write_changes(store, &mut catalog, changed).await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.flavors.len(), 1);
    assert!(rows.budgets.is_empty());
    notification_state_round_trips(store, &mut catalog).await;
    assert_eq!(rows.policy, Some(Policy::default()));
    assert!(rows.instances.is_empty());
    pools_and_names_round_trip(store, &mut catalog).await;
    provider_clouds_round_trip(store, &mut catalog).await;
}

/// A provider cloud is kept with its sealed credentials and removed.
async fn provider_clouds_round_trip<S: Store>(store: &S, catalog: &mut Catalog) {
    use berth_core::model::cloud::{CloudKind, CloudProject, ProviderCloud};
    let cloud = ProviderCloud {
        id: uuid(0xc10d),
        kind: CloudKind::Openstack,
        auth_url: "http://keystone:5000/v3".into(),
        username: "promise_user".into(),
        project: CloudProject {
            id: None,
            name: Some("promise".into()),
        },
        region: Some("RegionOne".into()),
        placement_url: "http://placement:8778".into(),
        compute_url: Some("http://nova:8774/v2.1".into()),
        sealed_credentials: "v1:c2VhbGVk".into(),
        created_at: T0,
        sync: Default::default(),
    };
    let added = vec![Change::ProviderCloudSet {
        id: cloud.id,
        cloud: Some(cloud.clone()),
    }];
    write_changes(store, catalog, added).await;
    assert_same(store, catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.provider_clouds, std::slice::from_ref(&cloud));
    let removed = vec![Change::ProviderCloudSet {
        id: cloud.id,
        cloud: None,
    }];
    write_changes(store, catalog, removed).await;
    assert_same(store, catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert!(rows.provider_clouds.is_empty());
}

/// A planned capacity change is kept and withdrawn; a custom class and trait are made and
/// deleted.
async fn pools_and_names_round_trip<S: Store>(store: &S, catalog: &mut Catalog) {
    use berth_core::model::promise::CapacityPool;
    create(store, catalog, 0x90, "pool-host", None).await;
    let pool = CapacityPool {
        id: uuid(0x91),
        source: format!("ResourceProvider:{}", uuid(0x90)),
        start: at_hours(1),
        end: at_hours(5),
        deltas: vec![(pid(0x90), "VCPU".into(), 4)],
        affected: Vec::new(),
        project_id: "admin".into(),
        created_at: T0,
    };
    let made = vec![
        Change::PoolSet {
            id: pool.id,
            pool: Some(pool.clone()),
        },
        Change::ResourceClassCreated(class("CUSTOM_SPARE")),
        Change::TraitCreated(TraitName::parse("CUSTOM_SPARE").expect("trait")),
    ];
    write_changes(store, catalog, made).await;
    assert_same(store, catalog).await;
    assert_eq!(
        store.load_catalog().await.expect("load").pools,
        std::slice::from_ref(&pool)
    );
    let gone = vec![
        Change::PoolSet {
            id: pool.id,
            pool: None,
        },
        Change::ResourceClassDeleted(class("CUSTOM_SPARE")),
        Change::TraitDeleted(TraitName::parse("CUSTOM_SPARE").expect("trait")),
    ];
    write_changes(store, catalog, gone).await;
    assert_same(store, catalog).await;
    assert!(store.load_catalog().await.expect("load").pools.is_empty());
}

/// Marking properties private and public again round-trips.
async fn private_properties_round_trip<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    let privacy = |name: &str, private: bool| Change::PropertyPrivacy {
        name: name.to_owned(),
        private,
    };
    let marks = vec![privacy("gpu", true), privacy("rack", true)];
    write_changes(store, &mut catalog, marks).await;
    assert_same(store, &catalog).await;
    assert!(catalog.is_private_property("gpu"));
    // Marking again is harmless; marking public removes the mark.
    let again = vec![privacy("gpu", true), privacy("rack", false)];
    write_changes(store, &mut catalog, again).await;
    assert_same(store, &catalog).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.private_properties, ["gpu"]);
}

/// Checks that loading a store holding a lease row whose document does not decode as a lease
/// (`{"id": 7}`, written by the adapter's own test) reports the corrupt document.
pub async fn reports_the_corrupt_lease<S: Store>(store: &S) {
    let error = store.load_catalog().await.expect_err("a corrupt document");
    assert!(
        matches!(&error, StoreError::Backend(inner) if inner.to_string() == "stored data is corrupt: lease document"),
        "{error:?}"
    );
}

/// Applies one decision through the store and to the catalog, as the application does.
pub async fn write<S: Store>(
    store: &S,
    catalog: &mut Catalog,
    decision: impl FnOnce(&Catalog) -> Decision,
) -> Vec<Change> {
    let changes = decision(catalog).expect("decision accepted");
    let mut tx = store.begin_write().await.expect("begin");
    assert_eq!(
        tx.catalog_seq().await.expect("seq"),
        catalog.seq(),
        "the catalog is current"
    );
    tx.persist(&changes, T0).await.expect("persist");
    let (seq, handed_back) = tx.commit_logged().await.expect("commit");
    if let Some(entry) = handed_back {
        assert_eq!(
            entry,
            crate::codec::encode_changes(&changes),
            "the entry handed back is the commit's changes as the log's format encodes them"
        );
    }
    let logged = match store.keeps_change_log() {
        true => vec![Committed {
            seq,
            changes: changes.clone(),
        }],
        false => Vec::new(),
    };
    assert_eq!(
        store.changes_after(seq - 1, 2).await.expect("log"),
        Tail::Entries(logged),
        "the replication log holds the commit's changes as they were decided (if it is kept)"
    );
    catalog.apply(&changes);
    catalog.set_seq(seq);
    changes
}

/// The catalog the replication log rebuilds from the empty one: every entry since the first.
async fn replayed<S: Store>(store: &S) -> Catalog {
    let mut catalog = Catalog::new();
    // Each round applies at least one entry or ends.
    loop {
        let entries = match store
            .changes_after(catalog.seq(), CHANGE_LOG_PAGE)
            .await
            .expect("log")
        {
            Tail::Entries(entries) if !entries.is_empty() => entries,
            Tail::Entries(_) => return catalog,
            Tail::Unavailable => panic!("the log holds every commit since the first"),
        };
        for entry in entries {
            assert_eq!(entry.seq, catalog.seq() + 1, "entries follow each other");
            catalog.apply(&entry.changes);
            catalog.set_seq(entry.seq);
        }
    }
}

/// Checks the replication log's pruning over a store that keeps `retained` commits: after
/// many commits it still brings a catalog forward from a recent commit, and says a catalog
/// older than what it keeps must be loaded whole.
pub async fn change_log_prunes<S: Store>(store: &S, retained: u64) {
    let mut catalog = Catalog::new();
    let commits = 3 * retained + 70;
    for n in 0..commits {
        write_changes(store, &mut catalog, vec![Change::OutboxCursor(n)]).await;
    }
    let (oldest, kept) = store.change_log_bounds().await.expect("bounds");
    assert_eq!(kept, retained);
    assert!(
        oldest > 1 && oldest + retained <= commits + 1 + 64,
        "pruned to about {retained} entries: oldest {oldest} of {commits}"
    );
    assert_eq!(
        store.changes_after(0, 10).await.expect("log"),
        Tail::Unavailable,
        "the first entries are gone"
    );
    let recent = commits - retained + 1;
    let Tail::Entries(entries) = store.changes_after(recent, 1_000).await.expect("log") else {
        panic!("the latest {retained} commits are kept");
    };
    let seqs: Vec<u64> = entries.iter().map(|entry| entry.seq).collect();
    assert_eq!(seqs, ((recent + 1)..=commits).collect::<Vec<_>>());
    assert_eq!(
        entries.last().map(|entry| &entry.changes),
        Some(&vec![Change::OutboxCursor(commits - 1)])
    );
}

/// The outbox cursor an adapter's migration test stores, before migration 0008, as a `cursor`
/// document in `promise_objects` (the table the documents lived in then); see
/// [`carried_forward`].
pub const CURSOR_BEFORE_0008: u64 = 42;

/// An adapter's migrations up to `version` and no further: how its migration test builds a
/// database as an older berth left it.
#[cfg(feature = "sql")]
pub fn migrations_up_to(
    mut migrator: sqlx::migrate::Migrator,
    version: i64,
) -> sqlx::migrate::Migrator {
    migrator.migrations = migrator
        .migrations
        .iter()
        .filter(|migration| migration.version <= version)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    migrator
}

/// Checks a store opened over a database that migrations up to 0007 made and that held the
/// outbox cursor [`CURSOR_BEFORE_0008`]: opening renamed the documents' table (`schema` is the
/// store's `(table, column)` list after opening), the cursor loads, and a new one is written
/// and read back.
pub async fn carried_forward<S: Store>(store: &S, schema: &[(String, String)]) {
    let has = |name: &str| schema.iter().any(|(table, _)| table == name);
    assert!(has("documents"), "{schema:?}");
    assert!(!has("promise_objects"), "{schema:?}");
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.outbox_cursor, CURSOR_BEFORE_0008);
    let mut tx = store.begin_write().await.expect("begin");
    let moved = Change::OutboxCursor(CURSOR_BEFORE_0008 + 1);
    tx.persist(&[moved], T0).await.expect("persist");
    tx.commit().await.expect("commit");
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.outbox_cursor, CURSOR_BEFORE_0008 + 1);
}

async fn assert_same<S: Store>(store: &S, catalog: &Catalog) {
    let mut loaded = store.load_catalog().await.expect("load");
    loaded.normalize();
    assert_eq!(
        loaded,
        catalog.to_rows(),
        "storage holds what the catalog holds"
    );
    if store.keeps_change_log() {
        assert_eq!(
            replayed(store).await.to_rows(),
            loaded,
            "the replication log rebuilds what storage holds"
        );
    }
    let rebuilt = Catalog::from_rows(loaded);
    rebuilt
        .check_invariants()
        .expect("a reloaded catalog keeps its invariants");
}

fn uuid(n: u128) -> Uuid {
    Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0000 + n)
}

fn pid(n: u128) -> ProviderId {
    ProviderId::new(uuid(n))
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
        uuid: pid(n),
        name: name.to_owned(),
        parent: parent.map(pid),
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
        decide::set_inventories(c, pid(1), Some(0), inventories, T0)
    })
    .await;
    let traits = BTreeSet::from([
        TraitName::parse("CUSTOM_FAST").expect("trait"),
        TraitName::parse("HW_CPU_X86_AVX2").expect("trait"),
    ]);
    write(store, &mut catalog, |c| {
        decide::set_traits(c, pid(1), Some(1), traits, T0)
    })
    .await;
    let aggregates = BTreeSet::from([uuid(100), uuid(101)]);
    write(store, &mut catalog, |c| {
        decide::set_aggregates(c, pid(2), Some(0), aggregates, T0)
    })
    .await;
    let host = NewHost {
        reservable: true,
        name: "compute-7".to_owned(),
        uuid: pid(7),
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
        .entry(pid(1))
        .or_default()
        .insert(class("VCPU"), 4);
    allocations
        .entry(pid(1))
        .or_default()
        .insert(class("CUSTOM_GOLD"), 1);
    allocations
        .entry(pid(7))
        .or_default()
        .insert(class("DISK_GB"), 100);
    let consumer = ConsumerWrite {
        reservation: None,
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
    second.allocations.remove(&pid(7));
    write(store, catalog, |c| {
        allocation::set_allocations(c, &[second], T0)
    })
    .await;
    assert_eq!(
        catalog.provider(pid(1)).expect("cn1").used(&class("VCPU")),
        8
    );
}

/// A consumer of `n` holding `vcpus` VCPU on provider `provider`, or nothing (`0`: removed).
fn holding(n: u128, provider: u128, vcpus: u64) -> ConsumerWrite {
    let mut allocations = Allocations::new();
    if vcpus > 0 {
        allocations
            .entry(pid(provider))
            .or_default()
            .insert(class("VCPU"), vcpus);
    }
    ConsumerWrite {
        reservation: None,
        consumer: uuid(n),
        project_id: "p1".to_owned(),
        user_id: "u1".to_owned(),
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations,
    }
}

/// Providers 1 (`cn1`) and 2 (`cn2`), each with 64 VCPU, stored and in the catalog returned.
async fn two_providers_of_64_vcpus<S: Store>(store: &S) -> Catalog {
    let mut catalog = Catalog::new();
    for (n, name) in [(1, "cn1"), (2, "cn2")] {
        create(store, &mut catalog, n, name, None).await;
        let inventories = BTreeMap::from([(class("VCPU"), Inventory::simple(64))]);
        write(store, &mut catalog, |c| {
            decide::set_inventories(c, pid(n), Some(0), inventories, T0)
        })
        .await;
    }
    catalog
}

/// One batch's changes: each step decided over the catalog the steps before it left.
fn in_turn(catalog: &Catalog, steps: &[&(dyn Fn(&Catalog) -> Decision + Sync)]) -> Decision {
    let mut working = catalog.clone();
    let mut changes = Vec::new();
    for step in steps {
        let decided = step(&working)?;
        working.apply(&decided);
        changes.extend(decided);
    }
    Ok(changes)
}

/// One batch may write a consumer twice, remove one it wrote, and remove one before deleting
/// the provider it held: storage holds each consumer's last state, and the removal is written
/// before the provider's deletion, which its foreign key forbids otherwise (an adapter may
/// write a batch's consumers together, as long as the outcome is this).
async fn a_batch_writes_each_consumers_last_state_in_time<S: Store>(store: &S) {
    let mut catalog = two_providers_of_64_vcpus(store).await;
    write(store, &mut catalog, |c| {
        allocation::set_allocations(c, &[holding(700, 2, 4)], T0)
    })
    .await;
    let steps: [&(dyn Fn(&Catalog) -> Decision + Sync); 7] = [
        &|c| allocation::set_allocations(c, &[holding(701, 1, 2)], T0),
        &|c| allocation::set_allocations(c, &[holding(702, 1, 3)], T0),
        &|c| allocation::set_allocations(c, &[holding(701, 1, 5)], T0),
        &|c| allocation::set_allocations(c, &[holding(702, 1, 0)], T0),
        &|c| allocation::set_allocations(c, &[holding(700, 2, 0)], T0),
        &|c| decide::delete_provider(c, pid(2)),
        &|c| allocation::set_allocations(c, &[holding(703, 1, 1)], T0),
    ];
    write(store, &mut catalog, |c| in_turn(c, &steps)).await;
    let used = catalog.provider(pid(1)).expect("cn1").used(&class("VCPU"));
    assert_eq!(used, 6, "701 holds 5 and 703 holds 1");
    assert!(catalog.provider(pid(2)).is_none());
    assert_same(store, &catalog).await;
}

/// One batch updates providers several times over, among allocation writes that bump their
/// generations: two of them swap names through a third name one of them holds in between,
/// and one is moved under the other. Each is stored as its last update left it.
async fn a_batch_writes_each_providers_last_state_whatever_names_it_swaps<S: Store>(store: &S) {
    let mut catalog = two_providers_of_64_vcpus(store).await;
    let renamed = |n: u128, name: &'static str, parent: Option<u128>| {
        move |c: &Catalog| {
            decide::update_provider(c, pid(n), name, parent.map(pid), Reparenting::Allowed, T0)
        }
    };
    let steps: [&(dyn Fn(&Catalog) -> Decision + Sync); 6] = [
        &|c| allocation::set_allocations(c, &[holding(801, 1, 2), holding(802, 2, 3)], T0),
        &renamed(1, "between", None),
        &renamed(2, "cn1", None),
        &|c| allocation::set_allocations(c, &[holding(801, 1, 4)], T0),
        &renamed(1, "cn2", None),
        &renamed(2, "cn1", Some(1)),
    ];
    write(store, &mut catalog, |c| in_turn(c, &steps)).await;
    let named = |n: u128| {
        catalog
            .provider(pid(n))
            .expect("provider")
            .name()
            .to_owned()
    };
    assert_eq!((named(1), named(2)), ("cn2".to_owned(), "cn1".to_owned()));
    assert_eq!(catalog.provider(pid(2)).expect("cn1").root(), pid(1));
    assert_same(store, &catalog).await;
}

async fn dropped_transaction_rolls_back<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    let decision = decide::delete_provider(&catalog, pid(1)).expect("accepted");
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
        reservable: true,
        name: "compute-1".to_owned(),
        uuid: pid(1),
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
        decide::set_aggregates(c, pid(1), None, aggregates, T0)
    })
    .await;
    let traits = BTreeSet::from([TraitName::parse("HW_CPU_X86_AVX2").expect("trait")]);
    let generation = catalog.provider(pid(1)).expect("host").generation();
    write(store, &mut catalog, |c| {
        decide::set_traits(c, pid(1), Some(generation), traits, T0)
    })
    .await;
    let mut allocations = Allocations::new();
    allocations
        .entry(pid(1))
        .or_default()
        .insert(class("VCPU"), 2);
    let consumer = ConsumerWrite {
        reservation: None,
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
    let id = catalog.provider(pid(1)).expect("host").id();
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
        decide::update_provider(c, pid(2), "b2", Some(pid(4)), Reparenting::Allowed, T0)
    };
    write(store, &mut catalog, reparent).await;
    assert_eq!(catalog.provider(pid(3)).expect("c").root(), pid(4));
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

const HOUR: i64 = 3_600_000_000;

fn at_hours(hours: i64) -> Instant {
    Instant::from_micros(T0.as_micros() + hours * HOUR)
}

fn event(n: u128, kind: EventKind, at: Instant) -> LeaseEvent {
    LeaseEvent {
        id: uuid(n),
        kind,
        at,
        status: EventStatus::Undone,
        created_at: T0,
        updated_at: T0,
    }
}

/// A pending lease `uuid(n)` of project `project` from hour 1 to hour 3, holding host `uuid(1)`
/// whole, two instance slots on it, and floating IP `uuid(300)`.
fn lease(n: u128, project: &str) -> Lease {
    let reservation = |m: u128, spec: ReservationSpec| Reservation {
        id: ReservationId::new(uuid(n * 10 + m)),
        spec,
        status: ReservationStatus::Pending,
        hosts: Box::default(),
        floating_ips: Box::default(),
        missing: Box::default(),
        resources_changed: false,
        created_at: T0,
        updated_at: T0,
    };
    let host = ReservationSpec::Host {
        min: 1,
        max: 2,
        hypervisor_properties: String::new().into(),
        resource_properties: r#"["==", "$rack", "r\"12\" é"]"#.into(),
        before_end: "default".into(),
    };
    let instance = ReservationSpec::Instance {
        vcpus: 2,
        memory_mb: 4096,
        disk_gb: 0,
        amount: 2,
        affinity: Affinity::Any,
        resource_properties: String::new().into(),
    };
    let fip = ReservationSpec::FloatingIp {
        network_id: "ext-net".into(),
        amount: 1,
        required_floatingips: vec!["203.0.113.7".to_owned()],
    };
    let mut reservations = vec![
        reservation(1, host),
        reservation(2, instance),
        reservation(3, fip),
    ];
    reservations[0].hosts = vec![(pid(1), 1)].into();
    reservations[1].hosts = vec![(pid(1), 2)].into();
    reservations[2].floating_ips = vec![uuid(300)].into();
    Lease {
        id: LeaseId::new(uuid(n)),
        name: format!("lease-{n}").into(),
        project_id: project.into(),
        user_id: "u1".into(),
        start: at_hours(1),
        end: at_hours(3),
        status: LeaseStatus::Pending,
        degraded: false,
        reservations: reservations.into(),
        events: vec![
            event(n * 10 + 4, EventKind::StartLease, at_hours(1)),
            event(n * 10 + 5, EventKind::BeforeEndLease, at_hours(2)),
            event(n * 10 + 6, EventKind::EndLease, at_hours(3)),
        ]
        .into(),
        notice_lead: berth_core::model::lease::PREEMPTION_NOTICE_DEFAULT,
        preemption_noticed: false,
        lapses_at: None,
        rare: Default::default(),
        created_at: T0,
        updated_at: T0,
    }
}

/// Writes `changes` as one committed transaction.
async fn write_changes<S: Store>(store: &S, catalog: &mut Catalog, changes: Vec<Change>) {
    write(store, catalog, move |_| Ok(changes)).await;
}

fn lease_set(lease: &Lease) -> Change {
    Change::LeaseSet {
        id: lease.id,
        lease: Some(Box::new(lease.clone())),
    }
}

async fn loaded_leases<S: Store>(store: &S) -> Vec<Lease> {
    let mut rows = store.load_catalog().await.expect("load");
    rows.normalize();
    rows.leases.iter().map(|lease| (**lease).clone()).collect()
}

/// Leases written in one transaction: more than an adapter reads at once.
const MANY_LEASES: u128 = 3_000;

/// Many leases, then deletions leaving a gap longer than an adapter reads at once and scattered
/// ones: every remaining lease loads back.
async fn many_leases_round_trip<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    let leases: Vec<Lease> = (0..MANY_LEASES)
        .map(|i| {
            let mut lease = lease(1_000 + i, "p1");
            // Any text round-trips, control characters included.
            lease.name = format!("lease\u{1e}{i}\n").into();
            // A few of them hold the host, so that rebuilding the ledger has work.
            if i % 100 != 0 {
                for reservation in &mut lease.reservations {
                    reservation.hosts = Box::default();
                    reservation.floating_ips = Box::default();
                }
            }
            lease
        })
        .collect();
    write_changes(store, &mut catalog, leases.iter().map(lease_set).collect()).await;
    let deleted = (0..MANY_LEASES)
        .filter(|i| (900..2_100).contains(i) || i % 7 == 3)
        .map(|i| Change::LeaseSet {
            id: LeaseId::new(uuid(1_000 + i)),
            lease: None,
        })
        .collect();
    write_changes(store, &mut catalog, deleted).await;
    assert_eq!(loaded_leases(store).await.len(), 1_542);
    assert_same(store, &catalog).await;
}

async fn leases_round_trip<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    let first = lease(20, "p1");
    let second = lease(21, "p2");
    write_changes(store, &mut catalog, vec![lease_set(&first)]).await;
    write_changes(store, &mut catalog, vec![lease_set(&second)]).await;
    assert_eq!(loaded_leases(store).await, [first.clone(), second.clone()]);
    assert_same(store, &catalog).await;
    // The lease starts: its whole new state replaces the old one.
    let mut started = first.clone();
    started.name = "renamed".into();
    started.status = LeaseStatus::Active;
    started.set_status_reason(Some("started on time ✓".into()));
    started.degraded = true;
    started.end = at_hours(4);
    started.events[0].status = EventStatus::Done;
    started.events[2].at = at_hours(4);
    started.reservations[0].status = ReservationStatus::Active;
    started.reservations[1].missing = vec![(pid(1), 1)].into();
    started.reservations[1].resources_changed = true;
    started.updated_at = at_hours(1);
    write_changes(store, &mut catalog, vec![lease_set(&started)]).await;
    assert_eq!(
        loaded_leases(store).await,
        [started.clone(), second.clone()]
    );
    assert_same(store, &catalog).await;
    let delete = Change::LeaseSet {
        id: started.id,
        lease: None,
    };
    write_changes(store, &mut catalog, vec![delete]).await;
    assert_eq!(loaded_leases(store).await, [second]);
    assert_same(store, &catalog).await;
}

fn floating_ip(n: u128, network: &str, address: &str) -> FloatingIp {
    FloatingIp {
        id: uuid(n),
        network_id: network.to_owned(),
        subnet_id: Some(format!("{network}-subnet")),
        address: address.to_owned(),
        reservable: true,
        created_at: T0,
        updated_at: T0,
    }
}

fn fip_set(fip: &FloatingIp) -> Change {
    Change::FloatingIpSet {
        id: fip.id,
        fip: Some(fip.clone()),
    }
}

/// Persists and commits `changes`; returns the store's answer instead of panicking.
async fn try_write<S: Store>(store: &S, changes: &[Change]) -> Result<u64, StoreError> {
    let mut tx = store.begin_write().await.expect("begin");
    tx.persist(changes, T0).await?;
    tx.commit().await
}

async fn floating_ips_round_trip<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    let a = floating_ip(300, "ext-net", "203.0.113.7");
    let mut b = floating_ip(301, "ext-net", "2001:db8::7");
    b.subnet_id = None;
    b.reservable = false;
    write_changes(store, &mut catalog, vec![fip_set(&a), fip_set(&b)]).await;
    assert_same(store, &catalog).await;
    let mut updated = a.clone();
    updated.reservable = false;
    updated.subnet_id = None;
    updated.updated_at = at_hours(1);
    write_changes(store, &mut catalog, vec![fip_set(&updated)]).await;
    assert_same(store, &catalog).await;
    // Another id with an address the network already has is refused, and nothing is written.
    let duplicate = floating_ip(302, "ext-net", "2001:db8::7");
    let refused = try_write(store, &[fip_set(&duplicate)]).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "a duplicate address conflicts: {refused:?}"
    );
    assert_eq!(store.catalog_seq().await.expect("seq"), catalog.seq());
    assert_same(store, &catalog).await;
    // The same address on another network is a different address.
    let elsewhere = floating_ip(303, "other-net", "2001:db8::7");
    write_changes(store, &mut catalog, vec![fip_set(&elsewhere)]).await;
    let removed = Change::FloatingIpSet {
        id: a.id,
        fip: None,
    };
    write_changes(store, &mut catalog, vec![removed]).await;
    let rows = store.load_catalog().await.expect("load");
    assert_eq!(rows.floating_ips, [b, elsewhere]);
    assert_same(store, &catalog).await;
}

fn record(lease: &Lease, kind: &str, hours: i64) -> LeaseRecord {
    LeaseRecord {
        lease_id: lease.id,
        kind: kind.to_owned(),
        at: at_hours(hours),
        details: format!(
            r#"{{"status":"{}","note":"ü \"q\""}}"#,
            lease.status.as_str()
        ),
    }
}

async fn lease_records_are_appended<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    let first = lease(20, "p1");
    let second = lease(21, "p1");
    let written = [
        record(&first, "lease.create", 0),
        record(&second, "lease.create", 0),
        record(&first, "lease.event.start_lease", 1),
        record(&first, "lease.delete", 2),
    ];
    let recorded = |i: usize| Change::LeaseRecorded(written[i].clone());
    write_changes(store, &mut catalog, vec![lease_set(&first), recorded(0)]).await;
    write_changes(store, &mut catalog, vec![lease_set(&second), recorded(1)]).await;
    write_changes(store, &mut catalog, vec![recorded(2)]).await;
    let delete = Change::LeaseSet {
        id: first.id,
        lease: None,
    };
    write_changes(store, &mut catalog, vec![delete, recorded(3)]).await;
    assert_same(store, &catalog).await;
    // A dropped transaction appends nothing.
    {
        let mut tx = store.begin_write().await.expect("begin");
        let lost = Change::LeaseRecorded(record(&second, "lease.lost", 3));
        tx.persist(&[lost], T0).await.expect("persist");
    }
    let of = |lease: LeaseId| store.lease_records(lease);
    let kept = [written[0].clone(), written[2].clone(), written[3].clone()];
    assert_eq!(
        of(first.id).await.expect("records"),
        kept,
        "records outlive the lease"
    );
    assert_eq!(of(second.id).await.expect("records"), [written[1].clone()]);
    assert!(
        of(LeaseId::new(uuid(99)))
            .await
            .expect("records")
            .is_empty()
    );
    check_records_after(store, &written).await;
}

/// One batch may set a lease twice, delete one it set, and delete and set another again:
/// storage holds each lease's last state, and the records in the batch's order (an adapter may
/// write a batch's leases and records together, as long as the outcome is this).
async fn a_batch_writes_each_leases_last_state_and_every_record<S: Store>(store: &S) {
    let mut catalog = Catalog::new();
    create(store, &mut catalog, 1, "cn1", None).await;
    let first = lease(30, "p1");
    let mut renamed = first.clone();
    renamed.name = "renamed".into();
    renamed.updated_at = at_hours(1);
    let second = lease(31, "p2");
    let third = lease(32, "p1");
    let mut third_again = third.clone();
    third_again.name = "again".into();
    let written = [
        record(&first, "lease.create", 0),
        record(&second, "lease.create", 0),
        record(&first, "lease.update", 1),
        record(&third, "lease.create", 0),
        record(&third, "lease.delete", 1),
        record(&third, "lease.create", 2),
    ];
    let recorded = |i: usize| Change::LeaseRecorded(written[i].clone());
    let delete = |lease: &Lease| Change::LeaseSet {
        id: lease.id,
        lease: None,
    };
    let batch = vec![
        lease_set(&first),
        recorded(0),
        lease_set(&second),
        recorded(1),
        lease_set(&renamed),
        recorded(2),
        lease_set(&third),
        recorded(3),
        delete(&second),
        delete(&third),
        recorded(4),
        lease_set(&third_again),
        recorded(5),
    ];
    write_changes(store, &mut catalog, batch).await;
    assert_eq!(loaded_leases(store).await, [renamed, third_again]);
    assert_same(store, &catalog).await;
    check_records_after(store, &written).await;
}

/// `records_after` pages through exactly `written`, in order.
async fn check_records_after<S: Store>(store: &S, written: &[LeaseRecord]) {
    let all = store.records_after(0, 100).await.expect("records");
    let entries: Vec<LeaseRecord> = all.iter().map(|(_, r)| r.clone()).collect();
    assert_eq!(entries, written);
    let seqs: Vec<u64> = all.iter().map(|(seq, _)| *seq).collect();
    assert!(seqs[0] > 0, "sequence numbers start above 0: {seqs:?}");
    assert!(seqs.is_sorted_by(|a, b| a < b), "increasing: {seqs:?}");
    let page = store.records_after(seqs[1], 1).await.expect("page");
    assert_eq!(page, all[2..3]);
    let rest = store.records_after(seqs[1], 10).await.expect("rest");
    assert_eq!(rest, all[2..]);
    let last = seqs[seqs.len() - 1];
    for (after, limit) in [(last, 10), (u64::MAX, 10), (0, 0)] {
        let none = store.records_after(after, limit).await.expect("records");
        assert!(none.is_empty(), "nothing after {after} (limit {limit})");
    }
}
