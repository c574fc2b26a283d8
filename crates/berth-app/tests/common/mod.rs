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
