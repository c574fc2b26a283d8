//! The write path under request deadlines and callers that go away, over a store whose commits
//! wait at a gate the test opens: a decision still queued when its request's deadline expires
//! is never made and its caller is told nothing changed; one already taken into a committing
//! batch is answered with that batch's outcome; one whose caller is gone is never made.
//! A create with an `Idempotency-Key` whose answer was lost is found by its retry, and
//! concurrent requests with one key make one lease. A batch whose commit fails answers none of
//! its decisions with a refusal: one may rest on what the batch never committed.
//! No test here waits on time: every step is ordered by the gate.

mod common;

use berth_app::{AppError, Berth, CreateLease, CreateProvider, Deadline};
use berth_core::catalog::CatalogRows;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord, Idempotent};
use berth_core::model::lease::LeaseRecord;
use berth_core::model::ledger::Window;
use berth_core::model::usage::UsageSegment;
use berth_core::{Change, Instant, LeaseId};
use berth_store::{MemStore, Store, StoreError, WriteTx};
use common::{CountingIds, FixedClock, one_host_lease};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::{Notify, Semaphore};

/// Where commits wait: each commit says it arrived, then waits for a permit; the next one
/// through fails, when the test says so (as a commit whose connection is cut does).
struct Gate {
    arrived: Notify,
    permits: Semaphore,
    fail_next: AtomicBool,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            arrived: Notify::new(),
            permits: Semaphore::new(0),
            fail_next: AtomicBool::new(false),
        }
    }

    /// Waits until a commit is at the gate.
    async fn arrival(&self) {
        self.arrived.notified().await;
    }

    /// Lets one commit through.
    fn open_once(&self) {
        self.permits.add_permits(1);
    }
}

/// The in-memory store, with every commit held at the gate.
#[derive(Clone)]
struct GatedStore {
    inner: MemStore,
    gate: Arc<Gate>,
}

#[async_trait::async_trait]
impl Store for GatedStore {
    fn backend(&self) -> &'static str {
        "gated"
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    async fn catalog_seq(&self) -> Result<u64, StoreError> {
        self.inner.catalog_seq().await
    }
    async fn load_catalog(&self) -> Result<CatalogRows, StoreError> {
        self.inner.load_catalog().await
    }
    async fn changes_after(&self, seq: u64, limit: usize) -> Result<berth_store::Tail, StoreError> {
        self.inner.changes_after(seq, limit).await
    }
    async fn change_log_bounds(&self) -> Result<(u64, u64), StoreError> {
        self.inner.change_log_bounds().await
    }
    async fn idempotency_record(
        &self,
        key: &IdempotencyKey,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.inner.idempotency_record(key).await
    }
    async fn usage_segments(
        &self,
        period: Window,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<UsageSegment>, StoreError> {
        self.inner.usage_segments(period, seq, limit).await
    }
    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        Ok(Box::new(GatedTx {
            inner: self.inner.begin_write().await?,
            gate: Arc::clone(&self.gate),
        }))
    }
    async fn lease_records(&self, lease: LeaseId) -> Result<Vec<LeaseRecord>, StoreError> {
        self.inner.lease_records(lease).await
    }
    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
        self.inner.records_after(seq, limit).await
    }
}

struct GatedTx {
    inner: Box<dyn WriteTx>,
    gate: Arc<Gate>,
}

#[async_trait::async_trait]
impl WriteTx for GatedTx {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        self.inner.catalog_seq().await
    }
    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        self.inner.load_catalog().await
    }
    async fn changes_after(
        &mut self,
        seq: u64,
        limit: usize,
    ) -> Result<berth_store::Tail, StoreError> {
        self.inner.changes_after(seq, limit).await
    }
    async fn idempotency_records(
        &mut self,
        keys: &[&IdempotencyKey],
    ) -> Result<Vec<(IdempotencyKey, IdempotencyRecord)>, StoreError> {
        self.inner.idempotency_records(keys).await
    }
    async fn prune_idempotency(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        self.inner.prune_idempotency(before, limit).await
    }
    async fn record_usage(&mut self, segments: &[UsageSegment]) -> Result<(), StoreError> {
        self.inner.record_usage(segments).await
    }
    async fn prune_usage(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        self.inner.prune_usage(before, limit).await
    }
    async fn persist(&mut self, changes: &[Change], now: Instant) -> Result<(), StoreError> {
        self.inner.persist(changes, now).await
    }
    async fn commit(self: Box<Self>) -> Result<u64, StoreError> {
        self.gate.arrived.notify_one();
        self.gate
            .permits
            .acquire()
            .await
            .expect("the gate is never closed")
            .forget();
        if self.gate.fail_next.swap(false, Ordering::SeqCst) {
            // Dropped uncommitted: nothing of it is stored.
            return Err(StoreError::Backend("the connection was cut".into()));
        }
        self.inner.commit().await
    }
}

async fn service() -> (Arc<Berth>, MemStore, Arc<Gate>) {
    let inner = MemStore::new();
    let gate = Arc::new(Gate::new());
    let store = GatedStore {
        inner: inner.clone(),
        gate: Arc::clone(&gate),
    };
    let berth = Berth::open(
        Arc::new(store),
        Arc::new(FixedClock),
        Arc::new(CountingIds(AtomicU64::new(0))),
    )
    .await
    .expect("open");
    (Arc::new(berth), inner, gate)
}

fn provider(name: &str) -> CreateProvider {
    CreateProvider {
        uuid: None,
        name: name.to_owned(),
        parent: None,
    }
}

/// Lets every spawned task run until it waits (the runtime is single-threaded).
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// Starts a write of provider `name` that holds the writer until the gate opens.
async fn leader(berth: &Arc<Berth>, gate: &Gate, name: &str) -> tokio::task::JoinHandle<()> {
    let berth = Arc::clone(berth);
    let name = name.to_owned();
    let task = tokio::spawn(async move {
        berth
            .create_provider(provider(&name))
            .await
            .expect("first write");
    });
    gate.arrival().await;
    task
}

/// Whether provider `name` is in the service's catalog and in the store.
async fn stored(berth: &Berth, store: &MemStore, name: &str) -> (bool, bool) {
    let seen = berth
        .read(|c| c.providers().any(|p| p.name() == name))
        .await
        .expect("read");
    let rows = store.load_catalog().await.expect("load");
    (seen, rows.providers.iter().any(|p| p.name == name))
}

#[tokio::test]
async fn a_decision_queued_past_its_deadline_is_never_made() {
    let (berth, store, gate) = service().await;
    let first = leader(&berth, &gate, "first").await;
    let deadline = Deadline::new();
    let late = {
        let (berth, deadline) = (Arc::clone(&berth), Arc::clone(&deadline));
        tokio::spawn(async move {
            deadline
                .scope(berth.create_provider(provider("late")))
                .await
        })
    };
    settle().await;
    assert!(
        deadline.expire(),
        "nothing of the request was taken: the leader's batch was already committing"
    );
    let answer = late.await.expect("join");
    assert!(
        matches!(answer, Err(AppError::TimedOut)),
        "the caller is told nothing changed: {answer:?}"
    );
    gate.open_once();
    first.await.expect("join");
    // A later batch does not make it either.
    gate.open_once();
    berth
        .create_provider(provider("after"))
        .await
        .expect("a later write");
    assert_eq!(stored(&berth, &store, "late").await, (false, false));
    assert_eq!(stored(&berth, &store, "after").await, (true, true));
}

#[tokio::test]
async fn a_decision_in_a_committing_batch_answers_with_its_outcome_after_its_deadline() {
    let (berth, store, gate) = service().await;
    let first = leader(&berth, &gate, "first").await;
    // Two writers queue behind the committing batch; the next batch takes both.
    let other = {
        let berth = Arc::clone(&berth);
        tokio::spawn(async move { berth.create_provider(provider("other")).await })
    };
    let deadline = Deadline::new();
    let taken = {
        let (berth, deadline) = (Arc::clone(&berth), Arc::clone(&deadline));
        tokio::spawn(async move {
            deadline
                .scope(berth.create_provider(provider("taken")))
                .await
        })
    };
    settle().await;
    gate.open_once();
    first.await.expect("join");
    gate.arrival().await;
    assert!(
        !deadline.expire(),
        "the decision is in the committing batch: the request is not cut short"
    );
    gate.open_once();
    let answer = taken.await.expect("join");
    assert!(answer.is_ok(), "the real outcome: {answer:?}");
    assert!(other.await.expect("join").is_ok());
    assert_eq!(stored(&berth, &store, "taken").await, (true, true));
}

#[tokio::test]
async fn a_decision_whose_caller_went_away_is_never_made() {
    let (berth, store, gate) = service().await;
    let first = leader(&berth, &gate, "first").await;
    let gone = {
        let berth = Arc::clone(&berth);
        tokio::spawn(async move { berth.create_provider(provider("gone")).await })
    };
    settle().await;
    gone.abort();
    assert!(gone.await.expect_err("aborted").is_cancelled());
    gate.open_once();
    first.await.expect("join");
    gate.open_once();
    berth
        .create_provider(provider("after"))
        .await
        .expect("a later write");
    assert_eq!(stored(&berth, &store, "gone").await, (false, false));
    assert_eq!(stored(&berth, &store, "after").await, (true, true));
}

/// Enrols a host of 8 VCPUs, letting its commit through the gate.
async fn host(berth: &Berth, gate: &Gate, name: &str) {
    gate.open_once();
    berth
        .enroll_host(common::host(name, "az1"))
        .await
        .expect("enroll");
    // Its commit arrived at the gate: take that word, so the next arrival waited for is new.
    gate.arrival().await;
}

/// A lease of one whole host tomorrow, with `key`.
fn keyed_lease(key: &str) -> CreateLease {
    let start = 1_700_000_000_000_000 + 24 * 3_600_000_000;
    CreateLease {
        idempotency: Some(Idempotent {
            key: IdempotencyKey {
                project_id: "p1".into(),
                route: "POST /reservation/v1/leases".into(),
                key: key.into(),
            },
            fingerprint: "request".into(),
        }),
        ..one_host_lease("once", start, start + 3_600_000_000)
    }
}

async fn lease_ids(berth: &Berth) -> Vec<LeaseId> {
    berth
        .read(|c| c.leases().map(|l| l.id).collect())
        .await
        .expect("read")
}

#[tokio::test]
async fn a_retry_finds_the_lease_whose_answer_was_lost_while_it_committed() {
    let (berth, _store, gate) = service().await;
    host(&berth, &gate, "cn1").await;
    host(&berth, &gate, "cn2").await;
    // The caller goes away (a timeout, a dropped connection) while its lease is committing.
    let lost = {
        let berth = Arc::clone(&berth);
        tokio::spawn(async move { berth.create_lease(keyed_lease("k")).await })
    };
    gate.arrival().await;
    lost.abort();
    assert!(lost.await.expect_err("aborted").is_cancelled());
    // The commit goes on without it.
    gate.open_once();
    settle().await;
    let committed = lease_ids(&berth).await;
    assert_eq!(committed.len(), 1, "the lease committed without its caller");
    let retry = berth.create_lease(keyed_lease("k")).await.expect("retry");
    assert_eq!(
        retry.id, committed[0],
        "the retry answers with the first lease"
    );
    assert_eq!(lease_ids(&berth).await, committed, "and makes no other");
}

#[tokio::test]
async fn concurrent_requests_with_one_key_make_one_lease() {
    let (berth, _store, gate) = service().await;
    host(&berth, &gate, "cn1").await;
    host(&berth, &gate, "cn2").await;
    let first = leader(&berth, &gate, "first").await;
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let berth = Arc::clone(&berth);
            tokio::spawn(async move { berth.create_lease(keyed_lease("k")).await })
        })
        .collect();
    settle().await;
    gate.open_once();
    first.await.expect("join");
    // Enough for one batch per request, should they not all share one.
    for _ in 0..8 {
        gate.open_once();
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("join").expect("answered").id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "every request answers with the same lease");
    assert_eq!(lease_ids(&berth).await, ids);
}

#[tokio::test]
async fn a_refusal_resting_on_a_batch_that_failed_to_commit_is_never_answered() {
    let (berth, store, gate) = service().await;
    let first = leader(&berth, &gate, "first").await;
    // Two creates of one name queue behind the committing batch; the next batch takes both:
    // it accepts the first and refuses the second, whose name the first took.
    let twins: Vec<_> = (0..2)
        .map(|_| {
            let berth = Arc::clone(&berth);
            tokio::spawn(async move { berth.create_provider(provider("twin")).await })
        })
        .collect();
    settle().await;
    gate.open_once();
    first.await.expect("join");
    gate.arrival().await;
    gate.fail_next.store(true, Ordering::SeqCst);
    gate.open_once();
    for twin in twins {
        let answer = twin.await.expect("join");
        assert!(
            matches!(answer, Err(AppError::Store(_))),
            "the batch failed: neither decision stands, the refusal no more than the \
             acceptance: {answer:?}"
        );
    }
    assert_eq!(stored(&berth, &store, "twin").await, (false, false));
    // Nothing holds the name: a create of it now is made.
    gate.open_once();
    berth
        .create_provider(provider("twin"))
        .await
        .expect("the name is free");
    assert_eq!(stored(&berth, &store, "twin").await, (true, true));
}
