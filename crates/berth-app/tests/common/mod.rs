//! What the service's integration tests share: clocks they control and ids they can predict.
// Each test binary compiles this module and uses the part it needs.
#![allow(dead_code)]

use berth_app::{Clock, IdGen};
use berth_core::Instant;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use uuid::Uuid;

/// A clock that reads what the test set (microseconds since the epoch); clones share it.
#[derive(Clone)]
pub(crate) struct ManualClock(pub Arc<AtomicI64>);

impl ManualClock {
    /// A clock reading `micros`.
    pub(crate) fn at(micros: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(micros)))
    }

    /// Sets what it reads.
    pub(crate) fn set(&self, micros: i64) {
        self.0.store(micros, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant::from_micros(self.0.load(Ordering::SeqCst))
    }
}

/// A clock that always reads the same instant (2023-11-14).
pub(crate) struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> Instant {
        Instant::from_micros(1_700_000_000_000_000)
    }
}

/// Ids counted up from the one after the start value, so that replicas given different starts
/// never draw the same id.
pub(crate) struct CountingIds(pub AtomicU64);

impl IdGen for CountingIds {
    fn uuid(&self) -> Uuid {
        Uuid::from_u128(u128::from(self.0.fetch_add(1, Ordering::Relaxed)) + 1)
    }
}

/// A reservable host of 8 VCPUs, 16 GiB and 100 GB in `zone`.
pub(crate) fn host(name: &str, zone: &str) -> berth_app::EnrollHost {
    berth_app::EnrollHost {
        reservable: true,
        name: name.into(),
        vcpus: Some(8),
        memory_mb: Some(16_384),
        local_gb: Some(100),
        availability_zone: Some(zone.into()),
        hypervisor_type: None,
        service_name: None,
        attributes: std::collections::BTreeMap::new(),
    }
}

/// A lease `name` of project p1 holding one whole host over `[start, end)` (microseconds),
/// without an idempotency key.
pub(crate) fn one_host_lease(name: &str, start: i64, end: i64) -> berth_app::CreateLease {
    berth_app::CreateLease {
        name: name.into(),
        project_id: "p1".into(),
        user_id: "u1".into(),
        start: Instant::from_micros(start),
        end: Instant::from_micros(end),
        before_end: None,
        reservations: vec![berth_core::model::lease::ReservationSpec::Host {
            min: 1,
            max: 1,
            hypervisor_properties: String::new().into(),
            resource_properties: String::new().into(),
            before_end: "default".into(),
        }],
        horizon: berth_app::SEARCH_HORIZON_DEFAULT,
        idempotency: None,
        hold: None,
    }
}

/// The service over `store`, reading `clock`, its ids counted from `first_id`.
pub(crate) async fn open(
    store: &berth_store::MemStore,
    clock: &ManualClock,
    first_id: u64,
) -> berth_app::Berth {
    berth_app::Berth::open(
        Arc::new(store.clone()),
        Arc::new(clock.clone()),
        Arc::new(CountingIds(AtomicU64::new(first_id))),
    )
    .await
    .expect("open")
}
