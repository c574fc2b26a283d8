//! A synthetic population written straight into a store, for benchmarks (feature `synthetic`):
//! H hosts (ten availability zones, 64 VCPUs each, enrolled by the core's own decision) and N
//! single-reservation leases (each one instance reservation of 1-2 slots on one host, windows
//! spread over the year from 2027-01-01, about seven reservations per host at any instant, three
//! undone lifecycle events), through `Store::begin_write` / `persist` / `commit`, 50,000 leases
//! per transaction. Only catalog rows are written (no lifecycle record), and nothing is checked
//! for capacity: this is a store's content, not a sequence of admitted requests.

use berth_core::decide::inventory::{self as decide, NewHost};
use berth_core::model::lease::Lease;
use berth_core::synthetic::{InstanceLease, Rng};
use berth_core::{Catalog, Change, Instant, ProviderId};
use berth_store::{Store, StoreError};
use std::time::Duration;

/// 2027-01-01T00:00:00Z: the start of the leases' year, and their creation time.
pub const T0: i64 = 1_798_761_600_000_000;
const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;
const YEAR: i64 = 365 * DAY;
/// Availability zones the hosts are spread over.
const ZONES: usize = 10;
/// Leases written per transaction.
const BATCH: usize = 50_000;
const HOST_NAMESPACE: u128 = 0x4057 << 64;
const LEASE_NAMESPACE: u128 = 0x1ea5e << 64;

/// Synthetic lease number `idx` of `count`: one instance reservation of 1-2 slots on one random
/// host of `hosts`, about seven reservations per host at any instant.
fn lease(idx: usize, rng: &mut Rng, hosts: &[ProviderId], count: usize) -> Lease {
    let mean = ((7.0 * hosts.len() as f64 / count as f64 * YEAR as f64) as i64).clamp(HOUR, YEAR);
    let vcpus = 1 + rng.below(4);
    let slots = 1 + rng.below(2) as u32;
    let host = hosts[rng.below(hosts.len() as u64) as usize];
    let start = Instant::from_micros(T0 + rng.below(YEAR as u64) as i64);
    let end = Instant::from_micros(start.as_micros() + mean / 2 + rng.below(mean as u64) as i64);
    InstanceLease {
        idx,
        namespace: LEASE_NAMESPACE,
        vcpus,
        slots,
        host,
        start,
        end,
        created: Instant::from_micros(T0),
    }
    .build()
}

/// Enrolls hosts `cn00000...` (`count` of them) in one transaction; returns their uuids.
async fn write_hosts(store: &dyn Store, count: usize) -> Result<Vec<ProviderId>, StoreError> {
    let mut catalog = Catalog::new();
    let now = Instant::from_micros(T0 - YEAR);
    let mut all = Vec::new();
    let mut uuids = Vec::with_capacity(count);
    for idx in 0..count {
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
        let changes = decide::enroll_host(&catalog, &new, now).expect("a synthetic host enrolls");
        catalog.apply(&changes);
        all.extend(changes);
        uuids.push(new.uuid);
    }
    let mut tx = store.begin_write().await?;
    tx.persist(&all, now).await?;
    tx.commit().await?;
    Ok(uuids)
}

/// How long [`write`] took for each part.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    /// Enrolling the hosts.
    pub hosts: Duration,
    /// Writing the leases.
    pub leases: Duration,
}

/// Writes `hosts` hosts and then `leases` leases into `store` (which should be empty).
pub async fn write(store: &dyn Store, hosts: usize, leases: usize) -> Result<Written, StoreError> {
    let started = std::time::Instant::now();
    let uuids = write_hosts(store, hosts).await?;
    let hosts_written = started.elapsed();
    let mut rng = Rng(42);
    let now = Instant::from_micros(T0);
    let mut idx = 0;
    while idx < leases {
        let changes: Vec<Change> = (idx..leases.min(idx + BATCH))
            .map(|i| {
                let lease = lease(i, &mut rng, &uuids, leases);
                Change::LeaseSet {
                    id: lease.id,
                    lease: Some(Box::new(lease)),
                }
            })
            .collect();
        idx += changes.len();
        let mut tx = store.begin_write().await?;
        tx.persist(&changes, now).await?;
        tx.commit().await?;
    }
    Ok(Written {
        hosts: hosts_written,
        leases: started.elapsed() - hosts_written,
    })
}
