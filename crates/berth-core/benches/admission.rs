//! Lease admission over large catalogs, and the memory the ledger and the leases take.
//!
//! Each catalog holds H hosts (ten zones `az0`..`az9`, VCPU 64, MEMORY_MB 262,144, DISK_GB
//! 2,000 each, enrolled through `inventory::enroll_host`) and R existing leases applied as
//! `Change::LeaseSet`: each one instance reservation of 1-2 slots (1-4 VCPUs, 2 GiB of memory
//! and 10 GB of disk per VCPU) on one host, its window starting anywhere in one year and its
//! length chosen so that a host carries about 7 reservations at any instant, whatever H and R
//! (hosts busy, not full). Pseudo-random choices come from a seeded generator, so every run
//! builds the same catalogs.
//!
//! The benchmark is `decide::lease::create_lease` for 10 anti-affine instances (VCPU 2,
//! MEMORY_MB 4096, DISK_GB 20) in `az3` over one day in the middle of the year (`admit`), and
//! the same with one instance more than `az3` has hosts (`refuse`: every `az3` host is visited,
//! then the counter-offer is searched). Each cell also times the Promise capacity query
//! (`capacity`): VCPU over every host for 30 days from that start, with its whole step function.
//! Each cell also times a Placement allocation write for one new consumer at the same mid-year
//! instant, each decision on the next host in turn (`allocation`). Criterion gives the median;
//! each cell also times single decisions with `std::time::Instant` and prints p50/p99. Before
//! the grid, the memory of 1,000,000 holds in a fresh `Ledger` and of a whole catalog with
//! 1,000,000 leases is measured from the process's resident set.
//!
//! `-- --test` (smoke mode) runs small sizes only; `BENCH_HOSTS` and `BENCH_RESERVATIONS`
//! (comma-separated) pick cells of the grid; `BENCH_MEMORY_LEASES` sets the number of leases
//! (and holds) the memory measurement uses (1,000,000 in a full run, 10,000 in a smoke run).

use berth_core::Catalog;
use berth_core::decide::allocation::{self, ConsumerGeneration, ConsumerWrite};
use berth_core::decide::inventory::{self, NewHost};
use berth_core::decide::lease::{NewLease, create_lease};
use berth_core::model::capacity::Measure;
use berth_core::model::lease::{Affinity, Lease, ReservationSpec};
use berth_core::model::ledger::{Ledger, Window};
use berth_core::query::capacity;
use berth_core::synthetic::{InstanceLease, Rng};
use berth_core::{Change, Instant, LeaseId, ProviderId, ReservationId, ResourceClass};
use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use std::time::Duration;
use uuid::Uuid;

/// 2027-01-01T00:00:00Z: "now", and the start of the year the windows are spread over.
const T0: i64 = 1_798_761_600_000_000;
const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;
const YEAR: i64 = 365 * DAY;
/// Reservations covering a host at an average instant (by the mean window length).
const CONCURRENT_PER_HOST: f64 = 7.0;
/// Leases applied per `Catalog::apply` call while building.
const CHUNK: usize = 1_000;
const ZONES: usize = 10;
const HOST_NAMESPACE: u128 = 0x4057 << 64;
const LEASE_NAMESPACE: u128 = 0x1ea5e << 64;

/// A catalog of `hosts` enrolled hosts, and their uuids in enrolment order.
fn enroll(hosts: usize) -> (Catalog, Vec<ProviderId>) {
    let mut catalog = Catalog::new();
    let at = Instant::from_micros(T0 - YEAR);
    let mut uuids = Vec::with_capacity(hosts);
    for idx in 0..hosts {
        let uuid = ProviderId::from_u128(HOST_NAMESPACE | idx as u128);
        let new = NewHost {
            name: format!("cn{idx:05}"),
            uuid,
            vcpus: Some(64),
            memory_mb: Some(262_144),
            local_gb: Some(2_000),
            availability_zone: Some(format!("az{}", idx % ZONES)),
            hypervisor_type: None,
            service_name: None,
            attributes: Default::default(),
            reservable: true,
        };
        let changes = inventory::enroll_host(&catalog, &new, at).expect("enroll");
        catalog.apply(&changes);
        uuids.push(uuid);
    }
    (catalog, uuids)
}

/// Mean window length that keeps [`CONCURRENT_PER_HOST`] reservations on a host on average,
/// between one hour and half a year.
fn mean_duration(hosts: usize, reservations: usize) -> i64 {
    let years = CONCURRENT_PER_HOST * hosts as f64 / reservations.max(1) as f64;
    ((years * YEAR as f64) as i64).clamp(HOUR, YEAR / 2)
}

/// Synthetic lease number `idx`: one instance reservation of 1-2 slots on one random host.
fn synthetic_lease(idx: usize, rng: &mut Rng, hosts: &[ProviderId], mean: i64) -> Lease {
    let vcpus = 1 + rng.below(4);
    let slots = 1 + rng.below(2) as u32;
    let host = hosts[rng.below(hosts.len() as u64) as usize];
    let length = mean / 2 + rng.below(mean as u64) as i64;
    let start = Instant::from_micros(T0 + rng.below(YEAR as u64) as i64);
    InstanceLease {
        idx,
        namespace: LEASE_NAMESPACE,
        vcpus,
        slots,
        host,
        start,
        end: Instant::from_micros(start.as_micros() + length),
        created: Instant::from_micros(T0),
    }
    .build()
}

/// Applies `count` synthetic leases to `catalog`, [`CHUNK`] per `apply`.
fn add_leases(catalog: &mut Catalog, hosts: &[ProviderId], count: usize, seed: u64) {
    let mut rng = Rng(seed);
    let mean = mean_duration(hosts.len(), count);
    let mut idx = 0;
    while idx < count {
        let changes: Vec<Change> = (idx..count.min(idx + CHUNK))
            .map(|i| {
                let lease = synthetic_lease(i, &mut rng, hosts, mean);
                Change::LeaseSet {
                    id: lease.id,
                    lease: Some(Box::new(lease)),
                }
            })
            .collect();
        idx += changes.len();
        catalog.apply(&changes);
    }
}

/// `amount` anti-affine instances (VCPU 2, MEMORY_MB 4096, DISK_GB 20) in `az3` for one day in
/// mid-year; the target request asks for 10.
fn request(amount: u32) -> NewLease {
    let start = Instant::from_micros(T0 + YEAR / 2);
    NewLease {
        id: LeaseId::from_u128(0xbe7c_0001),
        name: "bench".into(),
        project_id: "project".into(),
        user_id: "user".into(),
        start,
        end: Instant::from_micros(start.as_micros() + DAY),
        before_end: None,
        reservations: vec![(
            ReservationId::from_u128(0xbe7c_0002),
            ReservationSpec::Instance {
                vcpus: 2,
                memory_mb: 4_096,
                disk_gb: 20,
                amount,
                affinity: Affinity::DifferentHosts,
                resource_properties: r#"["==", "$availability_zone", "az3"]"#.into(),
            },
        )],
        event_ids: [
            Uuid::from_u128(0xbe7c_0003),
            Uuid::from_u128(0xbe7c_0004),
            Uuid::from_u128(0xbe7c_0005),
        ],
        notice_lead: berth_core::model::lease::PREEMPTION_NOTICE_DEFAULT,
    }
}

fn decide(catalog: &Catalog, new: &NewLease) -> Result<Lease, berth_core::Rejection> {
    let now = Instant::from_micros(T0);
    let horizon = Instant::from_micros(new.start.as_micros() + 30 * DAY);
    create_lease(
        catalog,
        new,
        now,
        &berth_core::decide::admission::Search::until(horizon),
    )
    .map(|(_, lease)| lease)
}

fn admit(catalog: &Catalog, new: &NewLease) -> Lease {
    decide(catalog, new).expect("the target lease fits")
}

fn refuse(catalog: &Catalog, new: &NewLease) -> berth_core::Rejection {
    decide(catalog, new).expect_err("the request cannot fit")
}

/// Mean peak VCPU reserved on the `az3` hosts over the request's window, in % of 64.
fn az3_load(catalog: &Catalog, hosts: &[ProviderId], new: &NewLease) -> f64 {
    let window = Window::new(new.start, new.end).expect("window");
    let vcpu = ResourceClass::parse("VCPU").expect("class");
    let az3: Vec<ProviderId> = hosts.iter().skip(3).step_by(ZONES).copied().collect();
    let sum: u64 = az3
        .iter()
        .map(|h| catalog.ledger().peak(*h, window, &[]).amount(&vcpu))
        .sum();
    100.0 * sum as f64 / (64.0 * az3.len().max(1) as f64)
}

/// Times `runs` calls of `f` and prints p50, p99 and the maximum.
fn percentiles<T>(label: &str, runs: usize, f: impl Fn() -> T) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            black_box(f());
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    let at = |p: usize| times[(runs * p).div_ceil(100).clamp(1, runs) - 1];
    eprintln!(
        "{label}: {runs} single decisions: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        at(50).as_secs_f64() * 1e6,
        at(99).as_secs_f64() * 1e6,
        times[runs - 1].as_secs_f64() * 1e6,
    );
}

/// The process's resident set in bytes (`VmRSS` of `/proc/self/status`).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// A ledger of `count` holds of synthetic leases, as `Lease::holds` makes them, added one by
/// one.
fn ledger_of(count: usize, hosts: &[ProviderId]) -> Ledger {
    let mean = mean_duration(hosts.len(), count);
    let mut ledger = Ledger::new();
    let mut rng = Rng(7);
    for idx in 0..count {
        for hold in synthetic_lease(idx, &mut rng, hosts, mean).holds() {
            ledger.add(hold);
        }
    }
    ledger
}

/// Prints the resident memory `what` took: in all, and per `count`.
fn report(what: &str, before: u64, count: usize, unit: &str) {
    let grown = rss().saturating_sub(before) as f64;
    eprintln!(
        "memory: {what}: {:.1} MiB resident, {:.0} bytes per {unit}",
        grown / 1_048_576.0,
        grown / count as f64,
    );
}

/// Measures the resident memory of `count` holds in a fresh ledger (as built from leases), then
/// of a catalog with `count` leases (each one hold) over 10,000 hosts. Each structure stays
/// alive until the end, so none reuses another's freed memory.
fn memory(count: usize) {
    let (mut catalog, hosts) = enroll(10_000);
    let before = rss();
    let ledger = ledger_of(count, &hosts);
    let label = format!(
        "ledger with {} holds on {} hosts",
        ledger.len(),
        ledger.hosts().count()
    );
    report(&label, before, count, "hold");
    let before = rss();
    add_leases(&mut catalog, &hosts, count, 7);
    report(
        "catalog with the same leases (lease, ledger holds, due events)",
        before,
        count,
        "lease",
    );
    first_write(&mut catalog, &hosts, count);
    drop((ledger, catalog));
}

/// Times applying one lease to `catalog` right after a copy of it was taken (as a search's
/// snapshot, or the writers' working copy at start-up, shares the catalog's parts), then
/// again with no copy alive: what copying on write costs the first write after a snapshot.
fn first_write(catalog: &mut Catalog, hosts: &[ProviderId], count: usize) {
    let mut rng = Rng(11);
    let mean = mean_duration(hosts.len(), count);
    let mut one = |idx: usize, catalog: &mut Catalog| {
        let lease = synthetic_lease(count + idx, &mut rng, hosts, mean);
        let change = Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease)),
        };
        let start = std::time::Instant::now();
        catalog.apply(std::slice::from_ref(&change));
        start.elapsed().as_secs_f64() * 1e6
    };
    let snapshot = catalog.clone();
    let shared = one(0, catalog);
    drop(snapshot);
    let alone = one(1, catalog);
    eprintln!(
        "copy on write: one lease applied to a catalog of {count} leases: {shared:.1} µs \
         while a snapshot shares it, {alone:.1} µs with none"
    );
}

/// One cell of the grid: builds the catalog, checks the answers, times them.
fn cell(c: &mut Criterion, base: &(Catalog, Vec<ProviderId>), reservations: usize, runs: usize) {
    let (catalog, hosts) = base;
    let mut catalog = catalog.clone();
    let built = std::time::Instant::now();
    add_leases(&mut catalog, hosts, reservations, 42);
    let new = request(10);
    let lease = admit(&catalog, &new);
    assert_eq!(lease.reservations[0].hosts.len(), 10, "10 different hosts");
    let label = format!("{}_hosts/{reservations}_reservations", hosts.len());
    let mean_days = match reservations {
        0 => 0.0,
        _ => mean_duration(hosts.len(), reservations) as f64 / DAY as f64,
    };
    eprintln!(
        "{label}: built in {:.1} s; mean window {mean_days:.1} days; az3 hosts at {:.0}% VCPU \
         (peak over the window, mean)",
        built.elapsed().as_secs_f64(),
        az3_load(&catalog, hosts, &new),
    );
    let id = |name: &str| BenchmarkId::new(format!("{name}/{}_hosts", hosts.len()), reservations);
    c.benchmark_group("admission")
        .bench_function(id("admit"), |b| {
            b.iter(|| admit(black_box(&catalog), black_box(&new)))
        });
    percentiles(&format!("admit/{label}"), runs, || admit(&catalog, &new));
    // One more instance than az3 has hosts: every az3 host is visited, the request is refused
    // and the counter-offer searched (30 days, at most 512 start times).
    let too_many = request((hosts.len() / ZONES + 1) as u32);
    let _ = refuse(&catalog, &too_many);
    c.benchmark_group("admission")
        .sample_size(10)
        .bench_function(id("refuse"), |b| {
            b.iter(|| refuse(black_box(&catalog), black_box(&too_many)))
        });
    percentiles(&format!("refuse/{label}"), runs / 20, || {
        refuse(&catalog, &too_many)
    });
    capacity_cell(c, &catalog, &new, &label, runs);
    allocation_cell(c, &catalog, hosts, &label, runs);
}

/// A Placement allocation write deciding at mid-year: one new consumer's VCPU 1 on a host of
/// the catalog, each decision on the next host in turn, as a server's writes come
/// (`decide::allocation::set_allocations`, which looks for a host reservation of the consumer's
/// project holding that host now).
fn allocation_cell(
    c: &mut Criterion,
    catalog: &Catalog,
    hosts: &[ProviderId],
    label: &str,
    runs: usize,
) {
    let now = Instant::from_micros(T0 + YEAR / 2);
    let vcpu = ResourceClass::parse("VCPU").expect("class");
    let writes: Vec<ConsumerWrite> = hosts
        .iter()
        .map(|host| ConsumerWrite {
            consumer: Uuid::from_u128(0xa110_c001),
            project_id: "bench".into(),
            user_id: "bench".into(),
            consumer_type: None,
            generation: ConsumerGeneration::New,
            allocations: [(*host, [(vcpu.clone(), 1)].into_iter().collect())]
                .into_iter()
                .collect(),
            reservation: None,
        })
        .collect();
    let next = std::cell::Cell::new(0);
    let decide = || {
        let write = &writes[next.get() % writes.len()];
        next.set(next.get() + 1);
        allocation::set_allocations(black_box(catalog), std::slice::from_ref(write), now)
    };
    assert!(decide().is_ok(), "the write fits");
    c.benchmark_group("allocation")
        .bench_function(BenchmarkId::new("set_allocations", label), |b| {
            b.iter(decide)
        });
    percentiles(&format!("allocation/{label}"), runs, decide);
}

/// The capacity query of the Promise surface: VCPU over every host for 30 days from the
/// request's start, with its whole step function (`show-utilization`).
fn capacity_cell(c: &mut Criterion, catalog: &Catalog, new: &NewLease, label: &str, runs: usize) {
    let month = Window::new(
        new.start,
        Instant::from_micros(new.start.as_micros() + 30 * DAY),
    )
    .expect("window");
    let vcpu = Measure::Class(ResourceClass::parse("VCPU").expect("class"));
    let query = || capacity::series(catalog, None, month, &vcpu, &[]).expect("a series");
    let series = query();
    eprintln!(
        "{label}: capacity over 30 days: {} steps, {:?} over the window",
        series.steps.len(),
        series.summary()
    );
    c.benchmark_group("capacity")
        .sample_size(10)
        .bench_function(BenchmarkId::new("utilization_30d", label), |b| {
            b.iter(|| capacity::series(black_box(catalog), None, month, &vcpu, &[]))
        });
    percentiles(&format!("capacity/{label}"), (runs / 100).max(5), query);
}

fn main() {
    let smoke = std::env::args().any(|arg| arg == "--test");
    let (host_counts, reservation_counts, holds, runs): (&[usize], &[usize], usize, usize) =
        match smoke {
            true => (&[1_000], &[0, 10_000], 10_000, 40),
            false => (&[1_000, 10_000], &[0, 100_000, 1_000_000], 1_000_000, 2_000),
        };
    // `BENCH_HOSTS=10000 BENCH_RESERVATIONS=1000000` runs one cell of the grid (and skips the
    // memory measurement).
    let pick = |name: &str, all: &[usize]| -> Vec<usize> {
        std::env::var(name).map_or_else(
            |_| all.to_vec(),
            |list| {
                list.split(',')
                    .filter_map(|n| n.trim().parse().ok())
                    .collect()
            },
        )
    };
    let (host_counts, reservation_counts) = (
        pick("BENCH_HOSTS", host_counts),
        pick("BENCH_RESERVATIONS", reservation_counts),
    );
    if std::env::var("BENCH_HOSTS").is_err() {
        // `BENCH_MEMORY_LEASES=1000000` measures memory at full size in a smoke run too.
        let holds = std::env::var("BENCH_MEMORY_LEASES")
            .ok()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(holds);
        memory(holds);
    }
    let mut c = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    for &hosts in &host_counts {
        let base = enroll(hosts);
        for &reservations in &reservation_counts {
            cell(&mut c, &base, reservations, runs);
        }
    }
    c.final_summary();
}
