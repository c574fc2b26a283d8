//! Restart time with many stored reservations: what `berth serve` does at start-up on SQLite,
//! `SqliteStore::open` (connect, migrations) then `Berth::open` (load every row, rebuild the
//! catalog and its ledger, copy it for the writers).
//!
//! The benchmark writes 10,000 hosts (ten zones) and then N single-reservation leases (each one
//! instance reservation of 1-2 slots on one host, windows spread over a year, three undone
//! lifecycle events) into a fresh SQLite file through `Store::begin_write` / `persist` /
//! `commit`, 50,000 leases per transaction; only lease rows are written (the lifecycle record
//! is not read at start-up). It closes the store, then times three restarts, each in a fresh
//! process (the file is in the page cache, as on a restart of a running machine), and prints
//! each with the process's resident memory, then, in another fresh process, a breakdown of where
//! the time goes.
//!
//! `cargo bench -p berth-app --bench restart` writes 1,000,000 leases; `-- --test` (or a run
//! without `--bench`) writes 10,000. With `BERTH_RESTART_DB=FILE`, the database is written
//! there when the file is missing and reused (and kept) when it exists, for profiling one phase:
//! `BERTH_RESTART_PHASE=restart BERTH_RESTART_DB=FILE BERTH_RESTART_LEASES=N perf record ...`.

use berth_app::{Berth, Clock, IdGen};
use berth_core::ProviderId;
use berth_core::decide::inventory::{self as decide, NewHost};
use berth_core::model::lease::{
    Affinity, EventKind, EventStatus, Lease, LeaseEvent, LeaseStatus, Reservation, ReservationSpec,
    ReservationStatus,
};
use berth_core::{Catalog, Change, Instant};
use berth_store::Store;
use berth_store::codec::{decode_lease, encode_lease};
use berth_store_sqlite::SqliteStore;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use uuid::Uuid;

/// 2027-01-01T00:00:00Z.
const T0: i64 = 1_798_761_600_000_000;
const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;
const YEAR: i64 = 365 * DAY;
const HOSTS: usize = 10_000;
const ZONES: usize = 10;
/// Leases written per transaction.
const BATCH: usize = 50_000;
/// Restarts timed one after the other.
const RESTARTS: usize = 3;
const HOST_NAMESPACE: u128 = 0x4057 << 64;
const LEASE_NAMESPACE: u128 = 0x1ea5e << 64;

struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> Instant {
        Instant::from_micros(T0)
    }
}

struct CountingIds(AtomicU64);

impl IdGen for CountingIds {
    fn uuid(&self) -> Uuid {
        Uuid::from_u128((0x1d << 64) | u128::from(self.0.fetch_add(1, Ordering::Relaxed)))
    }
}

/// A small seeded generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// Synthetic lease number `idx`: one instance reservation of 1-2 slots on one random host,
/// about seven reservations per host at any instant.
fn synthetic_lease(idx: usize, rng: &mut Rng, hosts: &[ProviderId], count: usize) -> Lease {
    let id = |part: u128| Uuid::from_u128(LEASE_NAMESPACE | ((idx as u128) << 3) | part);
    let mean = ((7.0 * hosts.len() as f64 / count as f64 * YEAR as f64) as i64).clamp(HOUR, YEAR);
    let vcpus = 1 + rng.below(4);
    let slots = 1 + rng.below(2) as u32;
    let host = hosts[rng.below(hosts.len() as u64) as usize];
    let start = Instant::from_micros(T0 + rng.below(YEAR as u64) as i64);
    let end = Instant::from_micros(start.as_micros() + mean / 2 + rng.below(mean as u64) as i64);
    let now = Instant::from_micros(T0);
    let event = |part, kind, at| LeaseEvent {
        id: id(part),
        kind,
        at,
        status: EventStatus::Undone,
        created_at: now,
        updated_at: now,
    };
    Lease {
        id: berth_core::LeaseId::new(id(0)),
        name: format!("lease-{idx}").into(),
        project_id: "project".into(),
        user_id: "user".into(),
        start,
        end,
        status: LeaseStatus::Pending,
        status_reason: None,
        degraded: false,
        reservations: vec![Reservation {
            id: berth_core::ReservationId::new(id(1)),
            spec: ReservationSpec::Instance {
                vcpus,
                memory_mb: vcpus * 2_048,
                disk_gb: vcpus * 10,
                amount: slots,
                affinity: Affinity::Any,
                resource_properties: String::new().into(),
            },
            status: ReservationStatus::Pending,
            hosts: vec![(host, slots)].into(),
            floating_ips: Box::default(),
            missing: Box::default(),
            resources_changed: false,
            created_at: now,
            updated_at: now,
        }]
        .into(),
        events: vec![
            event(2, EventKind::StartLease, start),
            event(
                3,
                EventKind::BeforeEndLease,
                Instant::from_micros(end.as_micros() - HOUR),
            ),
            event(4, EventKind::EndLease, end),
        ]
        .into(),
        notice_lead: berth_core::model::lease::PREEMPTION_NOTICE_DEFAULT,
        preemption_noticed: false,
        terms: None,
        outcome: None,
        created_at: now,
        updated_at: now,
    }
}

/// The process's resident set in MiB (`VmRSS` of `/proc/self/status`).
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib / 1024.0
}

/// Enrolls the hosts in one transaction; returns their uuids.
async fn write_hosts(store: &SqliteStore) -> Vec<ProviderId> {
    let mut catalog = Catalog::new();
    let now = Instant::from_micros(T0 - YEAR);
    let mut all = Vec::new();
    let mut uuids = Vec::with_capacity(HOSTS);
    for idx in 0..HOSTS {
        let new = NewHost {
            name: format!("cn{idx:05}"),
            uuid: ProviderId::from_u128(HOST_NAMESPACE | idx as u128),
            vcpus: Some(64),
            memory_mb: Some(262_144),
            local_gb: Some(2_000),
            availability_zone: Some(format!("az{}", idx % ZONES)),
            hypervisor_type: None,
            service_name: None,
            attributes: Default::default(),
            reservable: true,
        };
        let changes = decide::enroll_host(&catalog, &new, now).expect("enroll");
        catalog.apply(&changes);
        all.extend(changes);
        uuids.push(new.uuid);
    }
    let mut tx = store.begin_write().await.expect("begin");
    tx.persist(&all, now).await.expect("persist hosts");
    tx.commit().await.expect("commit hosts");
    uuids
}

/// Writes the hosts and `count` leases into a fresh store at `path`.
async fn write(path: &Path, count: usize) {
    let started = std::time::Instant::now();
    let store = SqliteStore::open(path).await.expect("open");
    let hosts = write_hosts(&store).await;
    let hosts_written = started.elapsed();
    let mut rng = Rng(42);
    let now = Instant::from_micros(T0);
    let mut idx = 0;
    while idx < count {
        let changes: Vec<Change> = (idx..count.min(idx + BATCH))
            .map(|i| {
                let lease = synthetic_lease(i, &mut rng, &hosts, count);
                Change::LeaseSet {
                    id: lease.id,
                    lease: Some(Box::new(lease)),
                }
            })
            .collect();
        idx += changes.len();
        let mut tx = store.begin_write().await.expect("begin");
        tx.persist(&changes, now).await.expect("persist leases");
        tx.commit().await.expect("commit leases");
    }
    store.close().await;
    let bytes: u64 = std::fs::read_dir(path.parent().expect("a directory"))
        .expect("list")
        .filter_map(|entry| entry.ok()?.metadata().ok())
        .map(|meta| meta.len())
        .sum();
    eprintln!(
        "restart: wrote {HOSTS} hosts in {:.1} s and {count} leases in {:.1} s; database files \
         {:.0} MiB",
        hosts_written.as_secs_f64(),
        (started.elapsed() - hosts_written).as_secs_f64(),
        bytes as f64 / 1_048_576.0
    );
}

/// One restart: opens the store and the service, checks what was loaded, prints the time.
async fn restart(path: &Path, count: usize) -> Duration {
    let before = rss_mib();
    let started = std::time::Instant::now();
    let store = SqliteStore::open(path).await.expect("open");
    let opened = started.elapsed();
    let berth = Berth::open(
        Arc::new(store.clone()),
        Arc::new(FixedClock),
        Arc::new(CountingIds(AtomicU64::new(1))),
    )
    .await
    .expect("Berth::open");
    let elapsed = started.elapsed();
    let after = rss_mib();
    let (leases, holds) = berth
        .read(|c| (c.leases().count(), c.ledger().len()))
        .await
        .expect("read");
    assert_eq!(
        (leases, holds),
        (count, count),
        "every lease and hold loaded"
    );
    eprintln!(
        "restart: {:.2} s (SqliteStore::open {:.3} s, Berth::open {:.2} s); resident {:.0} MiB \
         before, {:.0} MiB after",
        elapsed.as_secs_f64(),
        opened.as_secs_f64(),
        (elapsed - opened).as_secs_f64(),
        before,
        after,
    );
    elapsed
}

/// Times the parts of `Berth::open` one by one.
async fn breakdown(path: &Path) {
    let store = SqliteStore::open(path).await.expect("open");
    let started = std::time::Instant::now();
    let rows = store.load_catalog().await.expect("load");
    let loaded = started.elapsed();
    let building = std::time::Instant::now();
    let catalog = Catalog::from_rows(rows);
    let built = building.elapsed();
    let copying = std::time::Instant::now();
    let copy = catalog.clone();
    let copied = copying.elapsed();
    drop(copy);
    let documents: Vec<String> = catalog.leases().map(encode_lease).collect();
    let decoding = std::time::Instant::now();
    for document in &documents {
        std::hint::black_box(decode_lease(document).expect("decode"));
    }
    let decoded = decoding.elapsed();
    let mean_len = documents.iter().map(String::len).sum::<usize>() / documents.len().max(1);
    eprintln!(
        "breakdown: load_catalog {:.2} s, Catalog::from_rows {:.2} s, clone for the writers \
         {:.2} s; decoding the lease documents alone ({mean_len} bytes each), afterwards: {:.2} s",
        loaded.as_secs_f64(),
        built.as_secs_f64(),
        copied.as_secs_f64(),
        decoded.as_secs_f64(),
    );
    store.close().await;
}

/// Environment of a child process: which phase it runs, the database, the lease count.
const PHASE: &str = "BERTH_RESTART_PHASE";
const DB: &str = "BERTH_RESTART_DB";
const LEASES: &str = "BERTH_RESTART_LEASES";

/// Runs one phase in a fresh process of this benchmark (so no phase reuses the memory another
/// one faulted in, as a real restart cannot); returns what it printed on stdout.
fn child(phase: &str, path: &Path, count: usize) -> String {
    let exe = std::env::current_exe().expect("current executable");
    let output = std::process::Command::new(exe)
        .env(PHASE, phase)
        .env(DB, path)
        .env(LEASES, count.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run a child");
    assert!(output.status.success(), "the {phase} child failed");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The child's side: runs the phase named in the environment.
fn run_phase(runtime: &tokio::runtime::Runtime, phase: &str) {
    let path = std::path::PathBuf::from(std::env::var_os(DB).expect("database path"));
    let count: usize = std::env::var(LEASES)
        .ok()
        .and_then(|n| n.parse().ok())
        .expect("lease count");
    match phase {
        "restart" => println!("{}", runtime.block_on(restart(&path, count)).as_secs_f64()),
        "breakdown" => runtime.block_on(breakdown(&path)),
        other => panic!("unknown phase {other}"),
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(phase) = std::env::var(PHASE) {
        return run_phase(&runtime, &phase);
    }
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench");
    let count = if smoke { 10_000 } else { 1_000_000 };
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = std::env::var_os(DB)
        .map_or_else(|| dir.path().join("berth.sqlite"), std::path::PathBuf::from);
    match path.exists() {
        true => eprintln!("restart: reusing {}", path.display()),
        false => runtime.block_on(write(&path, count)),
    }
    let mut times: Vec<f64> = (0..RESTARTS)
        .map(|_| child("restart", &path, count).parse().expect("seconds"))
        .collect();
    times.sort_by(f64::total_cmp);
    eprintln!(
        "restart with {count} leases, {RESTARTS} fresh processes: median {:.2} s, best {:.2} s",
        times[RESTARTS / 2],
        times[0]
    );
    child("breakdown", &path, count);
}
