//! The in-memory reference store: a catalog and the lifecycle record behind a mutex. Used by
//! application tests and as the reference the conformance suite holds the SQL adapters to.

use crate::port::{Store, StoreError, WriteTx};
use async_trait::async_trait;
use berth_core::LeaseId;
use berth_core::catalog::CatalogRows;
use berth_core::model::lease::{FloatingIp, LeaseRecord};
use berth_core::{Catalog, Change, Instant};
use std::sync::Arc;
use tokio::sync::{Mutex, OwnedMutexGuard};
use uuid::Uuid;

/// A store that keeps everything in memory and loses it on drop.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    state: Arc<Mutex<MemState>>,
}

/// What the store holds: the catalog and the lifecycle record (entry `i` has sequence `i + 1`).
#[derive(Debug, Default)]
struct MemState {
    catalog: Catalog,
    records: Vec<LeaseRecord>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore {
            state: Arc::new(Mutex::new(MemState {
                catalog: Catalog::new(),
                records: Vec::new(),
            })),
        }
    }
}

#[async_trait]
impl Store for MemStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn catalog_seq(&self) -> Result<u64, StoreError> {
        Ok(self.state.lock().await.catalog.seq())
    }

    async fn load_catalog(&self) -> Result<CatalogRows, StoreError> {
        Ok(self.state.lock().await.catalog.to_rows())
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let guard = Arc::clone(&self.state).lock_owned().await;
        let draft = guard.catalog.clone();
        Ok(Box::new(MemTx {
            guard,
            draft,
            recorded: Vec::new(),
        }))
    }

    async fn lease_records(&self, lease: LeaseId) -> Result<Vec<LeaseRecord>, StoreError> {
        let state = self.state.lock().await;
        Ok(state
            .records
            .iter()
            .filter(|record| record.lease_id == lease)
            .cloned()
            .collect())
    }

    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
        let state = self.state.lock().await;
        let skip = usize::try_from(seq).unwrap_or(usize::MAX);
        Ok(state
            .records
            .iter()
            .enumerate()
            .skip(skip)
            .take(limit)
            .map(|(index, record)| (record_seq(index), record.clone()))
            .collect())
    }
}

/// The sequence number of the record entry at `index`.
fn record_seq(index: usize) -> u64 {
    u64::try_from(index).expect("invariant: a record index fits in u64") + 1
}

/// Refuses a floating IP whose address another registered one has, as the SQL stores'
/// `floating_ips_address_key` constraint does.
fn check_address_free(catalog: &Catalog, id: Uuid, fip: &FloatingIp) -> Result<(), StoreError> {
    let taken = catalog.floating_ips().any(|other| {
        other.id != id && other.network_id == fip.network_id && other.address == fip.address
    });
    if taken {
        return Err(StoreError::Conflict {
            constraint: "floating_ips_address_key".to_owned(),
        });
    }
    Ok(())
}

struct MemTx {
    guard: OwnedMutexGuard<MemState>,
    draft: Catalog,
    /// Record entries appended by this transaction, not yet committed.
    recorded: Vec<LeaseRecord>,
}

#[async_trait]
impl WriteTx for MemTx {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        Ok(self.guard.catalog.seq())
    }

    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        Ok(self.draft.to_rows())
    }

    async fn persist(&mut self, changes: &[Change], _now: Instant) -> Result<(), StoreError> {
        for change in changes {
            match change {
                Change::FloatingIpSet { id, fip: Some(fip) } => {
                    check_address_free(&self.draft, *id, fip)?;
                }
                Change::LeaseRecorded(record) => self.recorded.push(record.clone()),
                _ => {}
            }
            self.draft.apply(std::slice::from_ref(change));
        }
        Ok(())
    }

    async fn commit(self: Box<Self>) -> Result<u64, StoreError> {
        let MemTx {
            mut guard,
            mut draft,
            recorded,
        } = *self;
        let seq = guard.catalog.seq() + 1;
        draft.set_seq(seq);
        guard.catalog = draft;
        guard.records.extend(recorded);
        Ok(seq)
    }
}

#[cfg(all(test, feature = "testkit"))]
mod tests {
    #[tokio::test]
    async fn mem_store_conforms() {
        crate::testkit::run_all(|| async { super::MemStore::new() }).await;
    }
}
