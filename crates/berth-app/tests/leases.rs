//! Lease use cases and the lifecycle engine over the in-memory reference store, with a clock
//! the tests move by hand.

mod common;

use berth_app::{AppError, AskHold, Berth, CreateLease, HoldOutcome};
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use berth_core::model::lease::{Affinity, LeaseStatus, ReservationSpec, ReservationStatus};
use berth_core::{Instant, LeaseId, Rejection, ReservationId};
use berth_store::MemStore;
use common::{CountingIds, ManualClock};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use uuid::Uuid;

const T0: i64 = 1_800_000_000_000_000;
const SECOND: i64 = 1_000_000;

async fn replica(store: &MemStore, clock: &ManualClock, first_id: u64) -> Arc<Berth> {
    Arc::new(common::open(store, clock, first_id).await)
}

async fn enroll(berth: &Berth, name: &str, zone: &str) {
    berth
        .enroll_host(common::host(name, zone))
        .await
        .expect("enroll");
}

fn hosts(min: u32, max: u32) -> ReservationSpec {
    ReservationSpec::Host {
        min,
        max,
        hypervisor_properties: String::new().into(),
        resource_properties: String::new().into(),
        before_end: "default".into(),
    }
}

fn lease(start: i64, end: i64, reservations: Vec<ReservationSpec>) -> CreateLease {
    CreateLease {
        name: "lease".into(),
        project_id: "p1".into(),
        user_id: "u1".into(),
        start: Instant::from_micros(start),
        end: Instant::from_micros(end),
        before_end: None,
        reservations,
        horizon: berth_app::SEARCH_HORIZON_DEFAULT,
        idempotency: None,
        hold: None,
    }
}

async fn status(berth: &Berth, id: LeaseId) -> (LeaseStatus, Vec<ReservationStatus>, usize) {
    berth
        .read(|c| {
            let lease = c.lease(id).expect("lease");
            let statuses = lease.reservations.iter().map(|r| r.status).collect();
            (lease.status, statuses, c.ledger().len())
        })
        .await
        .expect("read")
}

async fn kinds(berth: &Berth, id: LeaseId) -> Vec<String> {
    berth
        .lease_records(id)
        .await
        .expect("records")
        .into_iter()
        .map(|r| r.kind)
        .collect()
}

#[tokio::test]
async fn events_fire_when_due_and_move_the_lease_through_its_lifecycle() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let berth = replica(&store, &clock, 0).await;
    enroll(&berth, "h1", "az1").await;
    let created = berth
        .create_lease(lease(T0 + 10 * SECOND, T0 + 20 * SECOND, vec![hosts(1, 1)]))
        .await
        .expect("admitted");
    assert_eq!(
        berth.fire_due_events().await.expect("fire"),
        0,
        "nothing is due yet"
    );
    assert_eq!(status(&berth, created.id).await.0, LeaseStatus::Pending);

    clock.set(T0 + 10 * SECOND);
    // The start and the warning (an hour before the end, clamped to the start) are both due.
    assert_eq!(berth.fire_due_events().await.expect("fire"), 2);
    assert_eq!(
        status(&berth, created.id).await,
        (LeaseStatus::Active, vec![ReservationStatus::Active], 1)
    );
    assert_eq!(
        berth.fire_due_events().await.expect("fire"),
        0,
        "each event fires once"
    );

    clock.set(T0 + 20 * SECOND);
    assert_eq!(berth.fire_due_events().await.expect("fire"), 1);
    assert_eq!(
        status(&berth, created.id).await,
        (LeaseStatus::Terminated, vec![ReservationStatus::Deleted], 0),
        "the ended lease holds nothing"
    );
    assert_eq!(
        kinds(&berth, created.id).await,
        [
            "lease.create",
            "lease.event.start_lease",
            "lease.event.before_end_lease",
            "lease.event.end_lease"
        ]
    );
}

#[tokio::test]
async fn events_that_fell_due_while_down_fire_at_startup() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let berth = replica(&store, &clock, 0).await;
    enroll(&berth, "h1", "az1").await;
    let created = berth
        .create_lease(lease(T0 + SECOND, T0 + 2 * SECOND, vec![hosts(1, 1)]))
        .await
        .expect("admitted");
    drop(berth);

    clock.set(T0 + 3600 * SECOND);
    let restarted = replica(&store, &clock, 1_000).await;
    let engine = Arc::clone(&restarted);
    let stop = Arc::new(tokio::sync::Notify::new());
    let handle = tokio::spawn({
        let stop = stop.clone();
        async move {
            engine
                .run_lifecycle(async move { stop.notified().await })
                .await
        }
    });
    let ended = wait_for(&restarted, created.id, LeaseStatus::Terminated).await;
    stop.notify_one();
    handle.await.expect("engine stops");
    assert!(ended, "the lease ended after the restart");
    assert_eq!(
        kinds(&restarted, created.id).await,
        [
            "lease.create",
            "lease.event.start_lease",
            "lease.event.before_end_lease",
            "lease.event.end_lease"
        ],
        "it passed through ACTIVE, in order"
    );
}

/// Waits (bounded: 5 s) until the lease has `wanted` status.
async fn wait_for(berth: &Berth, id: LeaseId, wanted: LeaseStatus) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < deadline {
        if status(berth, id).await.0 == wanted {
            return true;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn two_replicas_fire_each_event_exactly_once() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let a = replica(&store, &clock, 0).await;
    let b = replica(&store, &clock, 1_000_000).await;
    enroll(&a, "h1", "az1").await;
    let created = a
        .create_lease(lease(T0 + SECOND, T0 + 2 * SECOND, vec![hosts(1, 1)]))
        .await
        .expect("admitted");
    clock.set(T0 + 3 * SECOND);
    let (fa, fb) = tokio::join!(a.fire_due_events(), b.fire_due_events());
    let fired = fa.expect("a") + fb.expect("b");
    let records = kinds(&a, created.id).await;
    let starts = records
        .iter()
        .filter(|k| *k == "lease.event.start_lease")
        .count();
    let ends = records
        .iter()
        .filter(|k| *k == "lease.event.end_lease")
        .count();
    assert_eq!((starts, ends), (1, 1), "{records:?}");
    assert_eq!(
        fired, 3,
        "start, warning and end, each fired by one replica only"
    );
    assert_eq!(status(&b, created.id).await.0, LeaseStatus::Terminated);
}

#[tokio::test]
async fn a_replica_standing_by_leaves_due_events_to_the_term_holder_for_the_grace() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let holder = replica(&store, &clock, 0).await;
    let standby = replica(&store, &clock, 1_000_000).await;
    standby.set_standby(true);
    assert!(standby.stands_by() && !holder.stands_by());
    enroll(&holder, "h1", "az1").await;
    // Far enough ahead that its preemption notice (two minutes before) is not due yet.
    let start = T0 + 1_000 * SECOND;
    let created = holder
        .create_lease(lease(start, start + 100 * SECOND, vec![hosts(1, 1)]))
        .await
        .expect("admitted");
    let grace = i64::try_from(berth_app::STANDBY_GRACE.as_micros()).expect("fits");
    let stored = async || standby.replica_status().await.expect("status").stored;

    // The notice falls due and the term holder gives it at once.
    clock.set(start - 60 * SECOND);
    holder.fire_due_events().await.expect("fire");
    // The start and its warning are due, but not for the grace yet: the standby replica
    // leaves them, and commits nothing.
    let before = stored().await;
    for at in [start, start + grace - 1] {
        clock.set(at);
        assert_eq!(standby.fire_due_events().await.expect("fire"), 0);
    }
    assert_eq!(
        stored().await,
        before,
        "nothing committed while standing by"
    );
    assert_eq!(status(&holder, created.id).await.0, LeaseStatus::Pending);

    // Left undone for the grace (the holder is stuck, or gone with its term not yet lapsed):
    // the standby replica fires them.
    clock.set(start + grace);
    assert_eq!(standby.fire_due_events().await.expect("fire"), 2);
    assert_eq!(status(&holder, created.id).await.0, LeaseStatus::Active);

    // The end: the term holder fires it at once, and the standby replica finds nothing left.
    clock.set(start + 100 * SECOND);
    assert_eq!(holder.fire_due_events().await.expect("fire"), 1);
    clock.set(start + 100 * SECOND + grace);
    assert_eq!(standby.fire_due_events().await.expect("fire"), 0);
    assert_eq!(
        status(&standby, created.id).await.0,
        LeaseStatus::Terminated
    );

    // No longer standing by (the term came to it), it fires what is due at once.
    standby.set_standby(false);
    let next_start = start + 1_000 * SECOND;
    let next = standby
        .create_lease(lease(
            next_start,
            next_start + 100 * SECOND,
            vec![hosts(1, 1)],
        ))
        .await
        .expect("admitted");
    clock.set(next_start - 60 * SECOND);
    standby.fire_due_events().await.expect("fire");
    clock.set(next_start);
    assert_eq!(standby.fire_due_events().await.expect("fire"), 2);
    assert_eq!(status(&holder, next.id).await.0, LeaseStatus::Active);
}

#[tokio::test]
async fn a_request_that_does_not_fit_gets_a_counter_offer() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let berth = replica(&store, &clock, 0).await;
    enroll(&berth, "h1", "az1").await;
    enroll(&berth, "h2", "az1").await;
    berth
        .create_lease(lease(T0, T0 + 100 * SECOND, vec![hosts(1, 1)]))
        .await
        .expect("first lease");
    let refused = berth
        .create_lease(lease(
            T0 + 50 * SECOND,
            T0 + 150 * SECOND,
            vec![hosts(2, 2)],
        ))
        .await
        .expect_err("only one host is free");
    let AppError::Rejected(Rejection::DoesNotFit(refusal)) = refused else {
        panic!("a capacity refusal, got {refused:?}");
    };
    assert_eq!(refusal.amounts, [1], "one host fits in the window");
    assert_eq!(
        refusal.earliest_start,
        Some(Instant::from_micros(T0 + 100 * SECOND)),
        "both hosts are free once the first lease ends"
    );
    let instance = ReservationSpec::Instance {
        vcpus: 4,
        memory_mb: 4096,
        disk_gb: 10,
        amount: 4,
        affinity: Affinity::DifferentHosts,
        resource_properties: String::new().into(),
    };
    let err = berth
        .create_lease(lease(T0 + 10 * SECOND, T0 + 20 * SECOND, vec![instance]))
        .await
        .expect_err("one free host cannot hold four anti-affine instances");
    assert!(matches!(err, AppError::Rejected(Rejection::DoesNotFit(_))));
    assert_eq!(
        berth.read(|c| c.leases().count()).await.expect("read"),
        1,
        "a refused request admits nothing"
    );
}

/// A preemptible consumer of `vcpus` on `host`.
fn borrower(
    consumer: u128,
    host: berth_core::ProviderId,
    vcpus: u64,
) -> berth_core::decide::allocation::ConsumerWrite {
    let vcpu = berth_core::ResourceClass::parse("VCPU").expect("a class");
    berth_core::decide::allocation::ConsumerWrite {
        consumer: Uuid::from_u128(consumer),
        project_id: "batch".into(),
        user_id: "u".into(),
        consumer_type: Some(berth_core::model::consumer::PREEMPTIBLE.into()),
        generation: berth_core::decide::allocation::ConsumerGeneration::New,
        allocations: BTreeMap::from([(host, BTreeMap::from([(vcpu, vcpus)]))]),
        reservation: None,
    }
}

#[tokio::test]
async fn preemptible_consumers_get_notice_then_make_way_for_a_reservation() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let berth = replica(&store, &clock, 0).await;
    enroll(&berth, "h1", "az1").await;
    let host = berth
        .read(|c| c.provider_by_name("h1").map(berth_core::Provider::uuid))
        .await
        .expect("read")
        .expect("h1");
    let minute = 60 * SECOND;
    let created = berth
        .create_lease(lease(T0 + 10 * minute, T0 + 20 * minute, vec![hosts(1, 1)]))
        .await
        .expect("admitted");
    // The host is fenced from now on, but preemptible work may borrow it until the start.
    berth
        .set_allocations(vec![borrower(900, host, 2), borrower(901, host, 2)])
        .await
        .expect("lent");
    let unreserved = berth_core::decide::allocation::ConsumerWrite {
        consumer_type: None,
        ..borrower(902, host, 1)
    };
    let refused = berth.set_allocations(vec![unreserved]).await;
    assert!(
        matches!(refused, Err(AppError::Rejected(Rejection::Fenced { .. }))),
        "unreserved work may not take what the lease will need: {refused:?}"
    );

    clock.set(T0 + 8 * minute);
    berth.fire_due_events().await.expect("fire");
    let records = kinds(&berth, created.id).await;
    let notices = records
        .iter()
        .filter(|k| *k == "consumer.preemption_notice")
        .count();
    assert_eq!(
        notices, 2,
        "two minutes ahead, both borrowers are told: {records:?}"
    );
    assert_eq!(
        berth.read(|c| c.consumers().count()).await.expect("read"),
        2,
        "nobody is evicted before the start"
    );

    clock.set(T0 + 10 * minute);
    berth.fire_due_events().await.expect("fire");
    let (status, _, _) = status(&berth, created.id).await;
    assert_eq!(status, LeaseStatus::Active);
    let records = kinds(&berth, created.id).await;
    let evicted = records.iter().filter(|k| *k == "consumer.evicted").count();
    assert_eq!(evicted, 2, "{records:?}");
    let (consumers, used) = berth
        .read(move |c| {
            let vcpu = berth_core::ResourceClass::parse("VCPU").expect("a class");
            (
                c.consumers().count(),
                c.provider(host).map(|p| p.used(&vcpu)),
            )
        })
        .await
        .expect("read");
    assert_eq!(
        (consumers, used),
        (0, Some(0)),
        "the reservation starts with its full host"
    );
}

/// A store that loses the next commits on demand, as a process killed before its commit would.
#[derive(Clone)]
struct CrashingStore {
    inner: MemStore,
    crashes: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait::async_trait]
impl berth_store::Store for CrashingStore {
    fn backend(&self) -> &'static str {
        "crashing"
    }
    async fn ping(&self) -> Result<(), berth_store::StoreError> {
        self.inner.ping().await
    }
    async fn catalog_seq(&self) -> Result<u64, berth_store::StoreError> {
        self.inner.catalog_seq().await
    }
    async fn load_catalog(
        &self,
    ) -> Result<berth_core::catalog::CatalogRows, berth_store::StoreError> {
        self.inner.load_catalog().await
    }
    async fn changes_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<berth_store::Tail, berth_store::StoreError> {
        self.inner.changes_after(seq, limit).await
    }
    async fn change_log_bounds(&self) -> Result<(u64, u64), berth_store::StoreError> {
        self.inner.change_log_bounds().await
    }
    async fn idempotency_record(
        &self,
        key: &IdempotencyKey,
    ) -> Result<Option<IdempotencyRecord>, berth_store::StoreError> {
        self.inner.idempotency_record(key).await
    }
    async fn usage_segments(
        &self,
        period: berth_core::model::ledger::Window,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<berth_core::model::usage::UsageSegment>, berth_store::StoreError> {
        self.inner.usage_segments(period, seq, limit).await
    }
    async fn begin_write(&self) -> Result<Box<dyn berth_store::WriteTx>, berth_store::StoreError> {
        let tx = self.inner.begin_write().await?;
        Ok(Box::new(CrashingTx {
            inner: tx,
            crashes: Arc::clone(&self.crashes),
        }))
    }
    async fn lease_records(
        &self,
        lease: LeaseId,
    ) -> Result<Vec<berth_core::model::lease::LeaseRecord>, berth_store::StoreError> {
        self.inner.lease_records(lease).await
    }
    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, berth_core::model::lease::LeaseRecord)>, berth_store::StoreError> {
        self.inner.records_after(seq, limit).await
    }
}

struct CrashingTx {
    inner: Box<dyn berth_store::WriteTx>,
    crashes: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait::async_trait]
impl berth_store::WriteTx for CrashingTx {
    async fn catalog_seq(&mut self) -> Result<u64, berth_store::StoreError> {
        self.inner.catalog_seq().await
    }
    async fn load_catalog(
        &mut self,
    ) -> Result<berth_core::catalog::CatalogRows, berth_store::StoreError> {
        self.inner.load_catalog().await
    }
    async fn changes_after(
        &mut self,
        seq: u64,
        limit: usize,
    ) -> Result<berth_store::Tail, berth_store::StoreError> {
        self.inner.changes_after(seq, limit).await
    }
    async fn idempotency_records(
        &mut self,
        keys: &[&IdempotencyKey],
    ) -> Result<Vec<(IdempotencyKey, IdempotencyRecord)>, berth_store::StoreError> {
        self.inner.idempotency_records(keys).await
    }
    async fn prune_idempotency(
        &mut self,
        before: Instant,
        limit: usize,
    ) -> Result<(), berth_store::StoreError> {
        self.inner.prune_idempotency(before, limit).await
    }
    async fn record_usage(
        &mut self,
        segments: &[berth_core::model::usage::UsageSegment],
    ) -> Result<(), berth_store::StoreError> {
        self.inner.record_usage(segments).await
    }
    async fn prune_usage(
        &mut self,
        before: Instant,
        limit: usize,
    ) -> Result<(), berth_store::StoreError> {
        self.inner.prune_usage(before, limit).await
    }
    async fn persist(
        &mut self,
        changes: &[berth_core::Change],
        now: Instant,
    ) -> Result<(), berth_store::StoreError> {
        self.inner.persist(changes, now).await
    }
    async fn commit(self: Box<Self>) -> Result<u64, berth_store::StoreError> {
        let pending = self.crashes.load(Ordering::SeqCst);
        if pending > 0 {
            self.crashes.store(pending - 1, Ordering::SeqCst);
            // Dropping the transaction without committing: nothing of it survives.
            return Err(berth_store::StoreError::Busy);
        }
        self.inner.commit().await
    }
}

/// What the store holds about a lease's fence: status, aggregate members, class inventories,
/// consumers of the reservation.
async fn stored_fence(store: &MemStore, lease: LeaseId) -> (LeaseStatus, usize, usize, usize) {
    let catalog = berth_core::Catalog::from_rows(
        berth_store::Store::load_catalog(store).await.expect("load"),
    );
    let stored = catalog.lease(lease).expect("the lease is stored");
    let reservation = stored.reservations[0].id;
    let class = berth_core::model::fence::reservation_class(reservation);
    let members = catalog
        .providers()
        .filter(|p| {
            p.aggregates()
                .contains(&berth_core::model::fence::reservation_aggregate(
                    reservation,
                ))
        })
        .count();
    let inventories = catalog
        .providers()
        .filter(|p| p.inventories().contains_key(&class))
        .count();
    let consumers = catalog.consumers_of_reservation(reservation).len();
    (stored.status, members, inventories, consumers)
}

/// A service over `store` whose next commits can be lost on demand.
async fn crashing(
    store: &MemStore,
    clock: &ManualClock,
    crashes: &Arc<std::sync::atomic::AtomicUsize>,
    first_id: u64,
) -> Berth {
    let store = CrashingStore {
        inner: store.clone(),
        crashes: Arc::clone(crashes),
    };
    Berth::open(
        Arc::new(store),
        Arc::new(clock.clone()),
        Arc::new(CountingIds(AtomicU64::new(first_id))),
    )
    .await
    .expect("open")
}

/// A holder of `reservation` (presented by its class) taking one slot of 2 VCPU on `h1`.
async fn hold_a_slot(berth: &Berth, reservation: ReservationId) {
    let host = berth
        .read(|c| c.provider_by_name("h1").map(berth_core::Provider::uuid))
        .await
        .expect("read")
        .expect("h1");
    let class = berth_core::model::fence::reservation_class(reservation);
    let vcpu = berth_core::ResourceClass::parse("VCPU").expect("a class");
    let holder = berth_core::decide::allocation::ConsumerWrite {
        consumer: Uuid::from_u128(777),
        project_id: "p1".into(),
        user_id: "u1".into(),
        consumer_type: None,
        generation: berth_core::decide::allocation::ConsumerGeneration::New,
        allocations: BTreeMap::from([(host, BTreeMap::from([(class, 1), (vcpu, 2)]))]),
        reservation: None,
    };
    berth
        .set_allocations(vec![holder])
        .await
        .expect("presented");
}

#[tokio::test]
async fn a_crash_at_start_or_end_leaves_all_or_nothing_and_the_retry_finishes() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let crashes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let berth = crashing(&store, &clock, &crashes, 0).await;
    enroll(&berth, "h1", "az1").await;
    let instances = ReservationSpec::Instance {
        vcpus: 2,
        memory_mb: 1024,
        disk_gb: 1,
        amount: 2,
        affinity: Affinity::Any,
        resource_properties: String::new().into(),
    };
    let created = berth
        .create_lease(lease(T0 + SECOND, T0 + 2 * SECOND, vec![instances]))
        .await
        .expect("admitted");

    // The start is lost once: nothing of it is stored; the retry raises the whole fence.
    clock.set(T0 + SECOND);
    crashes.store(1, Ordering::SeqCst);
    assert!(
        berth.fire_due_events().await.is_err(),
        "the commit was lost"
    );
    assert_eq!(
        stored_fence(&store, created.id).await,
        (LeaseStatus::Pending, 0, 0, 0)
    );
    let restarted = replica(&store, &clock, 1_000).await;
    restarted.fire_due_events().await.expect("the retry fires");
    assert_eq!(
        stored_fence(&store, created.id).await,
        (LeaseStatus::Active, 1, 1, 0)
    );
    hold_a_slot(&restarted, created.reservations[0].id).await;
    assert_eq!(
        stored_fence(&store, created.id).await,
        (LeaseStatus::Active, 1, 1, 1)
    );

    // The end is lost once: the lease, its fence and its consumer are all still there; the
    // retry lowers everything together.
    clock.set(T0 + 2 * SECOND);
    let again = crashing(&store, &clock, &crashes, 2_000).await;
    crashes.store(1, Ordering::SeqCst);
    assert!(
        again.fire_due_events().await.is_err(),
        "the commit was lost"
    );
    assert_eq!(
        stored_fence(&store, created.id).await,
        (LeaseStatus::Active, 1, 1, 1)
    );
    again.fire_due_events().await.expect("the retry fires");
    assert_eq!(
        stored_fence(&store, created.id).await,
        (LeaseStatus::Terminated, 0, 0, 0)
    );
    let records = kinds(&again, created.id).await;
    assert_eq!(
        records
            .iter()
            .filter(|k| *k == "consumer.terminated")
            .count(),
        1,
        "{records:?}"
    );
}

/// Runs the lifecycle engine of a service over `store` whose next `crashes` commits are lost,
/// with a lease's start due, until the lease leaves PENDING (at most 120 s of the runtime's
/// paused clock); returns the lease's status, its reservations', its records and the time the
/// engine took.
async fn lifecycle_with_lost_commits(
    crashes: usize,
) -> (LeaseStatus, Vec<ReservationStatus>, Vec<String>, Duration) {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let lost = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let berth = Arc::new(crashing(&store, &clock, &lost, 0).await);
    enroll(&berth, "h1", "az1").await;
    let created = berth
        .create_lease(lease(T0 + SECOND, T0 + 3_600 * SECOND, vec![hosts(1, 1)]))
        .await
        .expect("admitted");
    clock.set(T0 + SECOND);
    lost.store(crashes, Ordering::SeqCst);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let engine = tokio::spawn({
        let berth = Arc::clone(&berth);
        async move {
            berth
                .run_lifecycle(async {
                    let _ = stopped.await;
                })
                .await;
        }
    });
    let began = tokio::time::Instant::now();
    // Bounded: 120 steps of one second of the paused clock.
    for _ in 0..120 {
        if status(&berth, created.id).await.0 != LeaseStatus::Pending {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let took = began.elapsed();
    let _ = stop.send(());
    engine.await.expect("the engine stops");
    let (status, reservations, _) = status(&berth, created.id).await;
    // Each record as its kind and its details.
    let records = berth
        .lease_records(created.id)
        .await
        .expect("records")
        .into_iter()
        .map(|r| format!("{} {}", r.kind, r.details))
        .collect();
    (status, reservations, records, took)
}

/// An event whose commit is lost on every attempt is retried with doubling delays and, at the
/// last attempt, recorded as failed: the lease and its reservations go to ERROR, and the
/// failure is recorded once.
#[tokio::test(start_paused = true)]
async fn a_lifecycle_event_that_fails_every_attempt_is_recorded_failed_after_the_last() {
    let attempts = berth_app::EVENT_ATTEMPTS_MAX;
    let crashes = usize::try_from(attempts).expect("small");
    let (status, reservations, records, took) = lifecycle_with_lost_commits(crashes).await;
    assert_eq!(status, LeaseStatus::Error);
    assert_eq!(reservations, [ReservationStatus::Error]);
    // The first event due (the notice before the start) is the one whose commit was lost
    // every time: it is recorded failed, once, with the reason.
    let failed: Vec<&String> = records
        .iter()
        .filter(|r| r.contains(&format!("failed {attempts} times")))
        .collect();
    assert_eq!(failed.len(), 1, "{records:?}");
    assert!(
        failed[0].starts_with("lease.event.preemption_notice ") && failed[0].contains("ERROR"),
        "{records:?}"
    );
    // The delays between the attempts: the first retry delay, doubled after each failure.
    let backed_off: Duration = (0..attempts - 1)
        .map(|n| berth_app::EVENT_RETRY_FIRST * 2u32.pow(n))
        .sum();
    assert!(took >= backed_off, "{took:?} < {backed_off:?}");
}

/// An event whose commit is lost fewer times than the attempts allowed fires on a retry: the
/// lease starts, and nothing is recorded as failed.
#[tokio::test(start_paused = true)]
async fn a_lifecycle_event_lost_fewer_times_than_allowed_fires_on_a_retry() {
    let crashes = usize::try_from(berth_app::EVENT_ATTEMPTS_MAX - 1).expect("small");
    let (status, reservations, records, _) = lifecycle_with_lost_commits(crashes).await;
    assert_eq!(status, LeaseStatus::Active);
    assert_eq!(reservations, [ReservationStatus::Active]);
    assert!(
        records
            .iter()
            .any(|r| r.starts_with("lease.event.start_lease ")),
        "{records:?}"
    );
    assert!(!records.iter().any(|r| r.contains("ERROR")), "{records:?}");
}

/// A hold of `n` whole hosts over `[start, end)` for `minutes`, asked by project `p1`.
async fn hold(berth: &Berth, start: i64, end: i64, n: u32, minutes: u32) -> LeaseId {
    let answer = berth
        .availability(
            Instant::from_micros(start),
            Instant::from_micros(end),
            vec![hosts(n, n)],
            berth_core::Span::from_days(1),
            Some(AskHold {
                project_id: "p1".into(),
                user_id: "u1".into(),
                minutes,
            }),
        )
        .await
        .expect("searched");
    match answer.hold {
        Some(HoldOutcome::Held(lease)) => lease.id,
        other => panic!("not held: {other:?}"),
    }
}

#[tokio::test]
async fn a_hold_fences_its_window_until_it_lapses_once_and_frees_it() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let berth = replica(&store, &clock, 0).await;
    enroll(&berth, "h1", "az1").await;
    let (start, end) = (T0 + 3_600 * SECOND, T0 + 7_200 * SECOND);
    let held = hold(&berth, start, end, 1, 10).await;
    assert_eq!(
        status(&berth, held).await,
        (LeaseStatus::Held, vec![ReservationStatus::Pending], 1)
    );
    let refused = berth
        .create_lease(lease(start, end, vec![hosts(1, 1)]))
        .await;
    assert!(
        matches!(refused, Err(AppError::Rejected(Rejection::DoesNotFit(_)))),
        "the held host is taken: {refused:?}"
    );
    clock.set(T0 + 10 * 60 * SECOND - 1);
    assert_eq!(
        berth.fire_due_events().await.expect("fire"),
        0,
        "not due yet"
    );
    clock.set(T0 + 10 * 60 * SECOND);
    assert_eq!(berth.fire_due_events().await.expect("fire"), 1);
    assert_eq!(
        berth.fire_due_events().await.expect("fire"),
        0,
        "lapses once"
    );
    let (lapsed, _, ledger) = status(&berth, held).await;
    assert_eq!(
        (lapsed, ledger),
        (LeaseStatus::Expired, 0),
        "it holds nothing"
    );
    assert_eq!(
        kinds(&berth, held).await,
        ["lease.hold", "lease.hold.lapsed"]
    );
    let admitted = berth
        .create_lease(lease(start, end, vec![hosts(1, 1)]))
        .await
        .expect("the freed host is admitted");
    assert_eq!(admitted.status, LeaseStatus::Pending);
}

#[tokio::test]
async fn a_lease_from_a_hold_keeps_the_capacity_and_the_hold_is_gone() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let berth = replica(&store, &clock, 0).await;
    enroll(&berth, "h1", "az1").await;
    let (start, end) = (T0 + 3_600 * SECOND, T0 + 7_200 * SECOND);
    let held = hold(&berth, start, end, 1, 10).await;
    let mut from_hold = lease(start, end, vec![hosts(1, 1)]);
    from_hold.hold = Some(held);
    let created = berth.create_lease(from_hold).await.expect("from the hold");
    assert_eq!(created.status, LeaseStatus::Pending);
    assert_eq!(created.reservations[0].hosts.len(), 1);
    let gone = berth.read(|c| c.lease(held).is_none()).await.expect("read");
    assert!(gone, "the hold became the lease");
    // Its lapse, due later, finds nothing to do.
    clock.set(T0 + 10 * 60 * SECOND);
    assert_eq!(berth.fire_due_events().await.expect("fire"), 0);
    assert_eq!(status(&berth, created.id).await.0, LeaseStatus::Pending);
}

#[tokio::test]
async fn the_waitlist_admits_first_come_first_and_a_later_small_lease_never_overtakes() {
    let (store, clock) = (MemStore::new(), ManualClock::at(T0));
    let berth = replica(&store, &clock, 0).await;
    enroll(&berth, "h1", "az1").await;
    enroll(&berth, "h2", "az1").await;
    let (start, end) = (T0 + 3_600 * SECOND, T0 + 7_200 * SECOND);
    let until = Instant::from_micros(start);
    let a = berth
        .create_lease(lease(start, end, vec![hosts(1, 1)]))
        .await
        .expect("a");
    let b = berth
        .create_lease(lease(start, end, vec![hosts(1, 1)]))
        .await
        .expect("b");
    // The large one waits first, then a small one.
    let (large, refusal) = berth
        .create_lease_or_wait(lease(start, end, vec![hosts(2, 2)]), until)
        .await
        .expect("large waits");
    assert_eq!(large.status, LeaseStatus::Waiting);
    assert!(refusal.is_some(), "with the counter-offer");
    let (small, _) = berth
        .create_lease_or_wait(lease(start, end, vec![hosts(1, 1)]), until)
        .await
        .expect("small waits");
    assert_eq!(small.status, LeaseStatus::Waiting);
    // One host frees: the small one would fit, but the large one came first for that window.
    berth.delete_lease(a.id).await.expect("deleted");
    assert_eq!(status(&berth, large.id).await.0, LeaseStatus::Waiting);
    assert_eq!(status(&berth, small.id).await.0, LeaseStatus::Waiting);
    // The second host frees: the large one is admitted, the small one keeps waiting.
    berth.delete_lease(b.id).await.expect("deleted");
    assert_eq!(status(&berth, large.id).await.0, LeaseStatus::Pending);
    assert_eq!(status(&berth, small.id).await.0, LeaseStatus::Waiting);
    assert_eq!(
        kinds(&berth, large.id).await,
        ["lease.create", "lease.admitted"]
    );
    // At its wait_until, the small one expires, once.
    clock.set(start);
    berth.fire_due_events().await.expect("fire");
    assert_eq!(status(&berth, small.id).await.0, LeaseStatus::Expired);
    assert_eq!(
        kinds(&berth, small.id).await,
        ["lease.create", "lease.wait.expired"]
    );
    assert_eq!(status(&berth, large.id).await.0, LeaseStatus::Active);
}
