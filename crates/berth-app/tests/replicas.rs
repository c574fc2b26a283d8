//! Three replicas over one PostgreSQL database, driven at random: writes of every kind spread
//! over them, one replica killed mid-stream and restarted, another held behind the replication
//! log's retention. Checked after every step: no replica's catalog over-commits a provider or a
//! host. Checked at the end: every replica's catalog equals a fresh load from the database, and
//! every lease event fired exactly once.
//!
//! Runs when `BERTH_TEST_POSTGRES_URL` is set; otherwise it says loudly that it skipped.

mod common;

use berth_app::{AppError, Berth, CreateLease, EnrollHost};
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite};
use berth_core::model::consumer::Allocations;
use berth_core::{Catalog, Instant, LeaseId, ProviderId, ResourceClass};
use berth_store::Store;
use berth_store_postgres::{PostgresStore, scratch};
use common::{CountingIds, ManualClock};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use uuid::Uuid;

const T0: i64 = 1_800_000_000_000_000;
const SECOND: i64 = 1_000_000;
/// Commits the log keeps in this test: small, so the held replica falls behind it.
const RETAINED: u64 = 16;
/// Steps of the random walk.
const STEPS: usize = 160;
/// Hosts enrolled at the start.
const HOSTS: usize = 6;

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n as u64).expect("small")
    }
}

/// One replica: its service, its own store (pool) and, when it follows the others, the task
/// that applies their commits as they are announced.
struct Replica {
    berth: Arc<Berth>,
    store: Arc<PostgresStore>,
    follower: Option<tokio::task::JoinHandle<()>>,
}

impl Replica {
    async fn start(url: &str, clock: &ManualClock, ids: u64, follow: bool) -> Replica {
        let store = Arc::new(
            PostgresStore::connect(url)
                .await
                .expect("connect")
                .with_change_log_retained(RETAINED),
        );
        let berth = Berth::open(
            Arc::clone(&store) as Arc<dyn Store>,
            Arc::new(clock.clone()),
            Arc::new(CountingIds(AtomicU64::new(ids))),
        )
        .await
        .expect("open");
        let berth = Arc::new(berth);
        let follower = follow.then(|| {
            let berth = Arc::clone(&berth);
            tokio::spawn(async move { berth.run_replication(std::future::pending()).await })
        });
        Replica {
            berth,
            store,
            follower,
        }
    }

    /// Stops it as a crash would: its tasks are aborted where they stand.
    fn kill(self, in_flight: Vec<tokio::task::JoinHandle<()>>) {
        for task in in_flight.into_iter().chain(self.follower) {
            task.abort();
        }
    }
}

fn vcpu() -> ResourceClass {
    ResourceClass::parse("VCPU").expect("class")
}

/// No provider is used beyond its capacity, and no two leases hold one host at one time.
fn check_no_over_commit(catalog: &Catalog, replica: usize, step: usize) {
    catalog
        .check_invariants()
        .unwrap_or_else(|broken| panic!("replica {replica}, step {step}: {broken}"));
    for provider in catalog.providers() {
        for (class, inventory) in provider.inventories() {
            assert!(
                provider.used(class) <= inventory.capacity(),
                "replica {replica}, step {step}: {class:?} over-committed on {:?}",
                provider.uuid()
            );
        }
    }
    let mut held: Vec<(ProviderId, Instant, Instant, LeaseId)> = Vec::new();
    for lease in catalog.leases() {
        for reservation in &lease.reservations {
            for (host, _) in &reservation.hosts {
                held.push((*host, lease.start, lease.end, lease.id));
            }
        }
    }
    for (i, a) in held.iter().enumerate() {
        for b in &held[i + 1..] {
            let overlap = a.0 == b.0 && a.1 < b.2 && b.1 < a.2;
            assert!(
                !overlap,
                "replica {replica}, step {step}: leases {:?} and {:?} both hold {:?}",
                a.3, b.3, a.0
            );
        }
    }
}

fn lease(start: i64, seconds: i64) -> CreateLease {
    common::one_host_lease("lease", start, start + seconds * SECOND)
}

fn allocation(consumer: Uuid, host: ProviderId, vcpus: u64) -> ConsumerWrite {
    let mut allocations = Allocations::new();
    allocations.entry(host).or_default().insert(vcpu(), vcpus);
    ConsumerWrite {
        consumer,
        project_id: "p2".into(),
        user_id: "u2".into(),
        consumer_type: Some("INSTANCE".into()),
        generation: ConsumerGeneration::New,
        allocations,
        reservation: None,
    }
}

/// A refusal is an answer; anything else is a failure of the test.
fn refused_or_done<T>(outcome: Result<T, AppError>) -> Option<T> {
    match outcome {
        Ok(value) => Some(value),
        Err(AppError::Rejected(_)) => None,
        Err(other) => panic!("unexpected failure: {other:?}"),
    }
}

/// One random write on `berth`.
async fn random_write(
    berth: Arc<Berth>,
    pick: usize,
    hosts: Vec<ProviderId>,
    leases: Vec<LeaseId>,
) {
    let now = berth.now().as_micros();
    match pick % 4 {
        0 | 1 => {
            let start = now + i64::try_from(pick % 7).expect("small") * SECOND + SECOND;
            let seconds = 2 + i64::try_from(pick % 5).expect("small");
            refused_or_done(berth.create_lease(lease(start, seconds)).await);
        }
        2 => {
            let host = hosts[pick % hosts.len()];
            let consumer = Uuid::from_u128(0xC0_0000 + pick as u128);
            let vcpus = 1 + u64::try_from(pick % 4).expect("small");
            refused_or_done(
                berth
                    .set_allocations(vec![allocation(consumer, host, vcpus)])
                    .await,
            );
        }
        _ => {
            if let Some(id) = leases.get(pick % leases.len().max(1)) {
                let _ = refused_or_done(berth.delete_lease(*id).await);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_at_random_end_equal_to_the_database_without_over_commit() {
    let test = "three_replicas_at_random_end_equal_to_the_database_without_over_commit";
    let Some(server) = scratch::server_url(test) else {
        return;
    };
    let (name, url) = scratch::create(&server).await;
    let outcome = tokio::spawn(walk(url)).await;
    scratch::drop_all(&server, &[name]).await;
    outcome.expect("the walk");
}

/// The replicas of the walk, by index; `None` while one is down.
type Replicas = Vec<Option<Replica>>;

/// The replica that is held behind the log for the first half of the walk.
const HELD: usize = 2;

async fn walk(url: String) {
    let clock = ManualClock::at(T0);
    let mut replicas: Replicas = vec![
        Some(Replica::start(&url, &clock, 0, true).await),
        Some(Replica::start(&url, &clock, 1 << 40, true).await),
        // Held: it follows nothing and serves nothing until the log has moved past it.
        Some(Replica::start(&url, &clock, 2 << 40, false).await),
    ];
    let hosts = enroll_hosts(&replicas[0].as_ref().expect("up").berth).await;
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let (kill_at, restart_at) = (STEPS / 4, STEPS / 3);
    let mut created: Vec<LeaseId> = Vec::new();
    for step in 0..STEPS {
        let live: Vec<usize> = (0..replicas.len())
            .filter(|&r| replicas[r].is_some() && (r != HELD || step >= STEPS / 2))
            .collect();
        let leases: Vec<LeaseId> = berth_of(&replicas, live[0])
            .read(|c| c.leases().map(|l| l.id).collect())
            .await
            .expect("read");
        for id in &leases {
            if !created.contains(id) {
                created.push(*id);
            }
        }
        // Two or three writes at once on random live replicas: they race for the same hosts.
        let mut tasks = Vec::new();
        for _ in 0..2 + rng.below(2) {
            let r = live[rng.below(live.len())];
            let write = random_write(
                berth_of(&replicas, r),
                rng.below(1_000),
                hosts.clone(),
                leases.clone(),
            );
            tasks.push((r, tokio::spawn(write)));
        }
        if step == kill_at {
            // Killed with its writes in flight: they commit whole or not at all.
            let victim = replicas[1].take().expect("up");
            let (mine, others): (Vec<_>, Vec<_>) = tasks.into_iter().partition(|(r, _)| *r == 1);
            victim.kill(mine.into_iter().map(|(_, task)| task).collect());
            tasks = others;
        }
        for (_, task) in tasks {
            task.await.expect("a write");
        }
        if step == restart_at {
            replicas[1] = Some(Replica::start(&url, &clock, 5 << 40, true).await);
        }
        // Time moves on; two replicas race to fire the events that fell due.
        clock.0.fetch_add(SECOND, Ordering::SeqCst);
        let firing: Vec<_> = live
            .iter()
            .filter(|&&r| replicas[r].is_some())
            .take(2)
            .map(|&r| {
                let berth = berth_of(&replicas, r);
                tokio::spawn(async move { berth.fire_due_events().await.expect("fire") })
            })
            .collect();
        for task in firing {
            task.await.expect("firing");
        }
        check_every_replica(&replicas, step).await;
    }
    finish(&replicas, &clock, &created).await;
    for replica in replicas.into_iter().flatten() {
        replica.kill(Vec::new());
    }
}

/// The service of live replica `r`.
fn berth_of(replicas: &Replicas, r: usize) -> Arc<Berth> {
    Arc::clone(&replicas[r].as_ref().expect("live").berth)
}

/// Enrolls the hosts through `berth` and returns their providers.
async fn enroll_hosts(berth: &Berth) -> Vec<ProviderId> {
    for n in 0..HOSTS {
        berth
            .enroll_host(EnrollHost {
                reservable: true,
                name: format!("h{n}"),
                vcpus: Some(8),
                memory_mb: Some(16_384),
                local_gb: Some(100),
                availability_zone: Some("az1".into()),
                hypervisor_type: None,
                service_name: None,
                attributes: BTreeMap::new(),
            })
            .await
            .expect("enroll");
    }
    berth
        .read(|c| c.providers().map(|p| p.uuid()).collect())
        .await
        .expect("read")
}

/// No replica that serves (the held one not before half-way) over-commits anything.
async fn check_every_replica(replicas: &Replicas, step: usize) {
    for (r, replica) in replicas.iter().enumerate() {
        let Some(replica) = replica else { continue };
        if r == HELD && step < STEPS / 2 {
            continue;
        }
        replica
            .berth
            .read(|c| check_no_over_commit(c, r, step))
            .await
            .expect("read");
    }
}

/// Lets every lease run out, then checks that every replica equals a fresh load, that the held
/// one reloaded and the others followed the log, and that every event fired once.
async fn finish(replicas: &Replicas, clock: &ManualClock, created: &[LeaseId]) {
    clock.0.fetch_add(60 * SECOND, Ordering::SeqCst);
    for replica in replicas.iter().flatten() {
        replica.berth.fire_due_events().await.expect("fire");
    }
    let up = |r: usize| replicas[r].as_ref().expect("up");
    let status = up(HELD).berth.replica_status().await.expect("status");
    assert!(
        status.reloads >= 1,
        "the held replica fell behind the log and loaded the catalog whole: {status:?}"
    );
    let moved = up(0).berth.replica_status().await.expect("status");
    assert!(
        moved.entries_applied > 0,
        "the followers applied the log: {moved:?}"
    );
    let mut fresh = up(0).store.load_catalog().await.expect("load");
    fresh.normalize();
    for (r, replica) in replicas.iter().enumerate() {
        let replica = replica.as_ref().expect("up");
        let seq = replica.store.catalog_seq().await.expect("seq");
        // A follower applies announced commits on its own; a read makes sure of the last ones.
        replica.berth.read(|_| ()).await.expect("read");
        let held = replica.berth.read_local(Catalog::to_rows);
        assert_eq!(held.seq, seq, "replica {r} is current");
        assert_eq!(
            held, fresh,
            "replica {r} equals a fresh load from the database"
        );
    }
    // Every lease event fired exactly once, whichever replica fired it.
    let mut fired = 0;
    for id in created {
        let records = up(0).berth.lease_records(*id).await.expect("records");
        let mut kinds: HashMap<String, usize> = HashMap::new();
        for record in records {
            *kinds.entry(record.kind).or_default() += 1;
        }
        for (kind, count) in kinds {
            if kind.starts_with("lease.event.") {
                assert_eq!(count, 1, "lease {id:?}: {kind} recorded {count} times");
                fired += 1;
            }
        }
    }
    assert!(fired > 0, "events fired during the walk");
}
