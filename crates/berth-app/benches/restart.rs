//! Restart time with many stored reservations: what `berth serve` does at start-up on SQLite,
//! `SqliteStore::open` (connect, migrations) then `Berth::open` (load every row, rebuild the
//! catalog and its ledger, copy it for the writers).
//!
//! The benchmark writes 10,000 hosts (ten zones) and then N single-reservation leases (each one
//! instance reservation of 1-2 slots on one host, windows spread over a year, three undone
//! lifecycle events) into a fresh SQLite file through `Store::begin_write` / `persist` /
//! `commit`, 50,000 leases per transaction (`berth_app::synthetic`, which `berth-load
//! populate-store` shares); only lease rows are written (the lifecycle record is not read at
//! start-up). It closes the store, then times three restarts, each in a fresh
//! process (the file is in the page cache, as on a restart of a running machine), and prints
//! each with the process's resident memory, then, in another fresh process, a breakdown of where
//! the time goes.
//!
//! `cargo bench -p berth-app --bench restart` writes 1,000,000 leases; `-- --test` (or a run
//! without `--bench`) writes 10,000. With `BERTH_RESTART_DB=FILE`, the database is written
//! there when the file is missing and reused (and kept) when it exists, for profiling one phase:
//! `BERTH_RESTART_PHASE=restart BERTH_RESTART_DB=FILE BERTH_RESTART_LEASES=N perf record ...`.

use berth_app::synthetic::{self, T0};
use berth_app::{Berth, Clock, IdGen};
use berth_core::{Catalog, Instant};
use berth_store::Store;
use berth_store::codec::{decode_lease, encode_lease};
use berth_store_sqlite::SqliteStore;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use uuid::Uuid;

const HOSTS: usize = 10_000;
/// Restarts timed one after the other.
const RESTARTS: usize = 3;

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

/// Writes the hosts and `count` leases into a fresh store at `path`.
async fn write(path: &Path, count: usize) {
    let store = SqliteStore::open(path).await.expect("open");
    let written = synthetic::write(&store, HOSTS, count)
        .await
        .expect("write the population");
    store.close().await;
    let bytes: u64 = std::fs::read_dir(path.parent().expect("a directory"))
        .expect("list")
        .filter_map(|entry| entry.ok()?.metadata().ok())
        .map(|meta| meta.len())
        .sum();
    eprintln!(
        "restart: wrote {HOSTS} hosts in {:.1} s and {count} leases in {:.1} s; database files \
         {:.0} MiB",
        written.hosts.as_secs_f64(),
        written.leases.as_secs_f64(),
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
