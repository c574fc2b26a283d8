//! The in-memory reference store: a catalog behind a mutex. Used by application tests and as the
//! reference the conformance suite holds the SQL adapters to.

use crate::{Store, StoreError, WriteTx};
use async_trait::async_trait;
use berth_core::catalog::CatalogRows;
use berth_core::{Catalog, Change, Instant};
use std::sync::Arc;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// A store that keeps everything in memory and loses it on drop.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    state: Arc<Mutex<Catalog>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore {
            state: Arc::new(Mutex::new(Catalog::new())),
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
        Ok(self.state.lock().await.seq())
    }

    async fn load_catalog(&self) -> Result<CatalogRows, StoreError> {
        Ok(self.state.lock().await.to_rows())
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let guard = Arc::clone(&self.state).lock_owned().await;
        let draft = guard.clone();
        Ok(Box::new(MemTx { guard, draft }))
    }
}

struct MemTx {
    guard: OwnedMutexGuard<Catalog>,
    draft: Catalog,
}

#[async_trait]
impl WriteTx for MemTx {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        Ok(self.guard.seq())
    }

    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        Ok(self.draft.to_rows())
    }

    async fn persist(&mut self, changes: &[Change], _now: Instant) -> Result<(), StoreError> {
        self.draft.apply(changes);
        Ok(())
    }

    async fn commit(self: Box<Self>) -> Result<u64, StoreError> {
        let MemTx {
            mut guard,
            mut draft,
        } = *self;
        let seq = guard.seq() + 1;
        draft.set_seq(seq);
        *guard = draft;
        Ok(seq)
    }
}
