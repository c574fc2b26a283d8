//! The write path's own guarantees, tested with decisions no use case would make.

use super::*;
use berth_core::ProviderId;
use berth_core::model::provider::ProviderRow;
use berth_store::MemStore;

struct FixedClock;
impl Clock for FixedClock {
    fn now(&self) -> Instant {
        Instant::from_micros(1_700_000_000_000_000)
    }
}

struct CountingIds(std::sync::atomic::AtomicU64);
impl IdGen for CountingIds {
    fn uuid(&self) -> Uuid {
        let next = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Uuid::from_u128(u128::from(next) + 1)
    }
}

async fn open(store: &MemStore) -> Berth {
    Berth::open(
        Arc::new(store.clone()),
        Arc::new(FixedClock),
        Arc::new(CountingIds(std::sync::atomic::AtomicU64::new(0))),
    )
    .await
    .expect("open")
}

fn row(id: i64, name: &str, parent: Option<ProviderId>, now: Instant) -> ProviderRow {
    let uuid = ProviderId::from_u128(u128::try_from(id).expect("positive") + 1_000);
    ProviderRow {
        id,
        uuid,
        name: name.to_owned(),
        parent,
        root: uuid,
        generation: 0,
        availability_zone: None,
        created_at: now,
        updated_at: now,
    }
}

/// A decision whose changes would break an invariant (a provider under a parent that does not
/// exist) is caught before the commit: its caller gets an error, nothing reaches the store, and
/// the next decision is made over a catalog without it.
#[tokio::test]
async fn a_decision_that_breaks_an_invariant_is_never_committed() {
    let store = MemStore::new();
    let berth = open(&store).await;
    let orphan = berth
        .write(|_, now| {
            let missing = Some(ProviderId::from_u128(7));
            Ok((
                vec![Change::ProviderCreated(row(1, "orphan", missing, now))],
                (),
            ))
        })
        .await;
    assert!(
        orphan.is_err(),
        "the broken decision was answered {orphan:?}"
    );
    let seq = berth.read(Catalog::seq).await.expect("read");
    assert_eq!(seq, 0, "nothing was committed");

    let valid = berth
        .write(|_, now| {
            Ok((
                vec![Change::ProviderCreated(row(2, "valid", None, now))],
                (),
            ))
        })
        .await;
    assert!(valid.is_ok(), "{valid:?}");
    let reopened = open(&store).await;
    let names = reopened
        .read(|c| {
            c.providers()
                .map(|p| p.name().to_owned())
                .collect::<Vec<_>>()
        })
        .await
        .expect("read");
    assert_eq!(names, ["valid"]);
}

/// Commits `count` new providers through `berth`, one write each, numbered from `first`.
async fn create_providers(berth: &Berth, first: i64, count: i64) {
    for id in first..first + count {
        berth
            .write(move |_, now| {
                let name = format!("cn{id}");
                Ok((vec![Change::ProviderCreated(row(id, &name, None, now))], ()))
            })
            .await
            .expect("committed");
    }
}

/// The readers' catalog of `berth` as rows, and the store's.
async fn rows_of(berth: &Berth, store: &MemStore) -> (CatalogRows, CatalogRows) {
    let mut stored = store.load_catalog().await.expect("load");
    stored.normalize();
    (berth.read_local(Catalog::to_rows), stored)
}

use berth_core::catalog::CatalogRows;

/// A replica applies another's commits from the replication log, on a read and inside its
/// own write, and never loads the catalog whole: both end equal to a fresh load.
#[tokio::test]
async fn another_replicas_commits_are_applied_from_the_log() {
    let store = MemStore::new();
    let (a, b) = (open(&store).await, open(&store).await);
    create_providers(&a, 1, 5).await;
    assert_eq!(b.read(Catalog::seq).await.expect("read"), 5);
    assert_eq!(
        (b.replication.entries_applied(), b.replication.reloads()),
        (5, 0)
    );
    // B writes after A wrote again: its batch applies A's commits under the lock first.
    create_providers(&a, 6, 3).await;
    create_providers(&b, 9, 1).await;
    assert_eq!(
        (b.replication.entries_applied(), b.replication.reloads()),
        (8, 0)
    );
    // Its writers' copy took the five it had read from memory; the three it had not read were
    // read under the lock.
    assert_eq!(b.replication.entries_under_lock(), 3);
    assert_eq!(a.read(Catalog::seq).await.expect("read"), 9);
    assert_eq!(
        (a.replication.entries_applied(), a.replication.reloads()),
        (1, 0)
    );
    for berth in [&a, &b] {
        let (held, stored) = rows_of(berth, &store).await;
        assert_eq!(held, stored);
        assert_eq!(held.providers.len(), 9);
    }
}

/// A replica applies the commits another publishes, in order and without reading the log: one
/// it has, one past a gap and one that does not decode are left to the log, which then brings
/// it to the same catalog as a fresh load.
#[tokio::test]
async fn a_replica_applies_the_commits_another_publishes_in_order() {
    let store = MemStore::new();
    let (a, b) = (open(&store).await, open(&store).await);
    let mut published = a.published();
    create_providers(&a, 1, 3).await;
    let commits: Vec<Published> = (0..3)
        .map(|_| published.try_recv().expect("published").as_ref().clone())
        .collect();
    assert_eq!(commits.iter().map(|c| c.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(!b.apply_published(commits[1].clone()), "past a gap");
    let garbled = Published {
        changes: "[{\"not\": \"a change\"}]".to_owned(),
        ..commits[0].clone()
    };
    assert!(!b.apply_published(garbled), "does not decode");
    let unknown = Published {
        format: commits[0].format + 1,
        ..commits[0].clone()
    };
    assert!(!b.apply_published(unknown), "an encoding it does not read");
    assert!(b.apply_published(commits[0].clone()));
    assert!(!b.apply_published(commits[0].clone()), "already applied");
    assert!(b.apply_published(commits[1].clone()));
    assert_eq!(b.read_local(Catalog::seq), 2);
    assert_eq!(
        (
            b.replication.entries_pushed(),
            b.replication.entries_applied()
        ),
        (2, 2)
    );
    // The third comes from the log; nothing is reloaded.
    assert_eq!(b.read(Catalog::seq).await.expect("read"), 3);
    assert_eq!(
        (
            b.replication.entries_pushed(),
            b.replication.entries_applied(),
            b.replication.reloads()
        ),
        (2, 3, 0)
    );
    let (held, stored) = rows_of(&b, &store).await;
    assert_eq!(held, stored);
    // Nothing is published by a replica nobody follows, and a refused write publishes nothing.
    drop(published);
    create_providers(&b, 4, 1).await;
    let mut late = a.published();
    let refused = a
        .write(|_, _| -> Result<(Vec<Change>, ()), _> {
            Err(berth_core::Rejection::HostNotFound("nothing".to_owned()))
        })
        .await;
    assert!(refused.is_err());
    assert!(late.try_recv().is_err());
}

/// While a link brings it the writer's commits, a replica reads the log at once for a commit
/// the link could not apply (past a gap), checks the stored sequence every `FED_CHECK` for
/// commits no link brings, and listens again when no link brings them.
#[tokio::test(start_paused = true)]
async fn a_replica_fed_by_a_link_reads_the_log_for_what_the_link_did_not_bring() {
    let store = MemStore::new();
    let (a, b) = (open(&store).await, Arc::new(open(&store).await));
    b.fed_by_link(true);
    assert!(b.replica_status().await.expect("status").fed_by_link);
    let following = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.run_replication(std::future::pending()).await })
    };
    // The task's first check of the stored sequence is made at once.
    tokio::task::yield_now().await;
    let mut published = a.published();
    create_providers(&a, 1, 3).await;
    let last = (0..3)
        .map(|_| published.try_recv().expect("published"))
        .last()
        .expect("three commits");
    let start = tokio::time::Instant::now();
    assert!(!b.apply_published(last.as_ref().clone()), "past a gap");
    until_seq(&b, 3).await;
    assert!(
        start.elapsed() < crate::FED_CHECK,
        "read from the log at once, not at the next check"
    );
    // A commit no link brings is found by the next check.
    create_providers(&a, 4, 1).await;
    until_seq(&b, 4).await;
    assert!(start.elapsed() >= crate::FED_CHECK, "found by a check");
    assert_eq!(
        (b.replication.entries_applied(), b.replication.reloads()),
        (4, 0)
    );
    // No link brings the commits any more: the replica listens again (this store announces
    // nothing, so following ends there).
    b.fed_by_link(false);
    tokio::time::timeout(std::time::Duration::from_secs(5), following)
        .await
        .expect("listens again when no link feeds it")
        .expect("the task ran to its end");
    assert!(!b.replica_status().await.expect("status").fed_by_link);
}

/// Waits (in the test's paused time) until `berth`'s catalog holds commit `seq`.
async fn until_seq(berth: &Berth, seq: u64) {
    for _ in 0..1_000 {
        if berth.read_local(Catalog::seq) >= seq {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the catalog never reached commit {seq}");
}

/// A replica further behind than the log keeps loads the catalog whole, and then follows the
/// log again.
#[tokio::test]
async fn a_replica_behind_the_logs_retention_reloads() {
    let store = MemStore::with_change_log_retained(4);
    let (a, b) = (open(&store).await, open(&store).await);
    create_providers(&a, 1, 10).await;
    assert_eq!(b.read(Catalog::seq).await.expect("read"), 10);
    assert_eq!(
        (b.replication.entries_applied(), b.replication.reloads()),
        (0, 1)
    );
    create_providers(&a, 11, 2).await;
    assert_eq!(b.read(Catalog::seq).await.expect("read"), 12);
    assert_eq!(
        (b.replication.entries_applied(), b.replication.reloads()),
        (2, 1)
    );
    // Behind again, beyond the log, when it writes: the batch reloads under the lock.
    create_providers(&a, 13, 6).await;
    create_providers(&b, 19, 1).await;
    assert_eq!(b.replication.reloads(), 2);
    let (held, stored) = rows_of(&b, &store).await;
    assert_eq!(held, stored);
    assert_eq!(held.providers.len(), 19);
}

/// A replica's writers bring their copy as far as its readers' before the batch takes the
/// database's writer lock: what the replica read already (from memory, or from the log when
/// more than it keeps) is not read again under the lock.
#[tokio::test]
async fn what_a_replica_has_read_is_not_read_again_under_the_lock() {
    let store = MemStore::new();
    let (a, b) = (open(&store).await, open(&store).await);
    create_providers(&a, 1, 3).await;
    assert_eq!(b.read(Catalog::seq).await.expect("read"), 3);
    create_providers(&b, 4, 1).await;
    assert_eq!(b.replication.entries_under_lock(), 0);

    // More than it keeps in memory: the rest comes from the log, still before the lock.
    let many = i64::try_from(RECENT_COMMITS).expect("small") + 10;
    create_providers(&a, 5, many).await;
    assert_eq!(
        b.read(Catalog::seq).await.expect("read"),
        4 + many.unsigned_abs()
    );
    create_providers(&b, 5 + many, 1).await;
    assert_eq!(b.replication.entries_under_lock(), 0);
    assert_eq!(b.replication.reloads(), 0);
    let (held, stored) = rows_of(&b, &store).await;
    assert_eq!(held, stored);

    // Commits it had not read are read under the lock, and only those.
    create_providers(&a, 6 + many, 2).await;
    create_providers(&b, 8 + many, 1).await;
    assert_eq!(b.replication.entries_under_lock(), 2);
    let (held, stored) = rows_of(&b, &store).await;
    assert_eq!(held, stored);
}

/// A decision queued while a batch decides joins that batch (one commit for both), where it
/// used to wait for the whole of the next one; one naming an idempotency key does not (the next
/// batch reads its record under the lock first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_queued_while_a_batch_decides_joins_it() {
    let store = MemStore::new();
    let berth = Arc::new(open(&store).await);
    let created = |id: i64, name: &'static str| {
        move |_: &Catalog, now| Ok((vec![Change::ProviderCreated(row(id, name, None, now))], ()))
    };
    for keyed in [false, true] {
        let before = berth.read_now(Catalog::seq);
        let (deciding, first_deciding) = std::sync::mpsc::channel();
        let (go, first_waits) = std::sync::mpsc::channel::<()>();
        let offset = if keyed { 10 } else { 0 };
        let first = {
            let berth = Arc::clone(&berth);
            let decide = created(offset + 1, if keyed { "first-k" } else { "first" });
            tokio::spawn(async move {
                berth
                    .write(move |catalog, now| {
                        deciding.send(()).expect("the test waits for it");
                        first_waits.recv().expect("the test lets it go");
                        decide(catalog, now)
                    })
                    .await
            })
        };
        tokio::task::spawn_blocking(move || first_deciding.recv())
            .await
            .expect("join")
            .expect("the first decision is being made");
        let second = {
            let berth = Arc::clone(&berth);
            let decide = created(offset + 2, if keyed { "second-k" } else { "second" });
            let key = keyed.then(|| IdempotencyKey {
                project_id: "p1".into(),
                route: "POST /test".into(),
                key: "k".into(),
            });
            tokio::spawn(async move {
                berth
                    .write_keyed(key, move |catalog, _, now| decide(catalog, now))
                    .await
            })
        };
        // Bounded: the second decision is queued at its task's first poll.
        for _ in 0..5_000 {
            if !berth.queue.lock().expect("queue").is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert!(!berth.queue.lock().expect("queue").is_empty(), "queued");
        go.send(()).expect("the first decision waits");
        first.await.expect("join").expect("the first is made");
        second.await.expect("join").expect("the second is made");
        let commits = berth.read_now(Catalog::seq) - before;
        match keyed {
            false => assert_eq!(commits, 1, "both in the batch that was deciding"),
            true => assert_eq!(commits, 2, "the keyed one in the next batch"),
        }
    }
}

/// After a batch that made several decisions, the next one waits before it begins until as
/// many are queued, the gather at most, and commits those that came meanwhile with its own;
/// after a batch that made a single decision, it begins at once.
#[tokio::test(start_paused = true)]
async fn a_batch_gathers_as_many_decisions_as_the_batch_before_it_made() {
    use std::time::Duration;
    let store = MemStore::new();
    let berth = Arc::new(open(&store).await);
    let gather = Duration::from_millis(2);
    berth.set_batch_gather(gather);
    let create = |id: i64, name: &'static str| {
        let berth = Arc::clone(&berth);
        async move {
            berth
                .write(move |_, now| {
                    Ok((vec![Change::ProviderCreated(row(id, name, None, now))], ()))
                })
                .await
        }
    };
    async fn timed(write: impl std::future::Future<Output = ()>) -> Duration {
        let start = tokio::time::Instant::now();
        write.await;
        start.elapsed()
    }
    let lone = timed(async { create(1, "lone").await.expect("made") }).await;
    assert_eq!(lone, Duration::ZERO, "the first batch waits for nothing");

    berth.writer.lock().await.last_made = 2;
    let before = berth.read_now(Catalog::seq);
    let late = Duration::from_millis(1);
    let first = {
        let create = create(2, "first");
        tokio::spawn(timed(async move { create.await.expect("made") }))
    };
    let second = tokio::spawn({
        let create = create(3, "second");
        async move {
            tokio::time::sleep(late).await;
            create.await.expect("made");
        }
    });
    let waited = first.await.expect("join");
    second.await.expect("join");
    assert_eq!(
        berth.read_now(Catalog::seq) - before,
        1,
        "the decision queued while the batch gathered is in its commit"
    );
    assert!(late <= waited && waited < gather, "{waited:?}");

    let alone = timed(async { create(4, "alone").await.expect("made") }).await;
    assert!(
        alone >= gather,
        "after a batch of two, a lone write waits the gather: {alone:?}"
    );
    let next = timed(async { create(5, "next").await.expect("made") }).await;
    assert_eq!(next, Duration::ZERO, "after a batch of one, none");
}
