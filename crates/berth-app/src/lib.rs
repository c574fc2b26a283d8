//! berth's use cases: one service type, [`Berth`], with one `async fn` per use case.
//!
//! Every write follows one path, written once in [`Berth::write`]: take the writer lock, begin a
//! store transaction (which excludes writers in every replica), make sure the in-memory catalog
//! is current, ask the core to decide, persist the changes, commit, and apply the same changes to
//! the catalog. Reads are answered from the in-memory catalog after a cheap freshness check.
//! This crate holds no HTTP types and no SQL, and reads time and ids only through [`Clock`] and
//! [`IdGen`].
#![forbid(unsafe_code)]

mod demo;
mod error;
mod inventory;

pub use error::AppError;
pub use inventory::{CreateProvider, EnrollHost};

use berth_core::catalog::CatalogRows;
use berth_core::{Catalog, Change, Instant, Rejection};
use berth_store::{Store, StoreError};
use std::sync::{Arc, RwLock};
use tokio::sync::Mutex;
use uuid::Uuid;

/// The source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> Instant;
}

/// The source of new ids.
pub trait IdGen: Send + Sync + 'static {
    /// A new, unique, time-ordered uuid.
    fn uuid(&self) -> Uuid;
}

/// The berth service: the catalog, the store behind it, and the injected clock and ids.
pub struct Berth {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGen>,
    catalog: RwLock<Catalog>,
    writer: Mutex<()>,
}

impl std::fmt::Debug for Berth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Berth")
            .field("backend", &self.store.backend())
            .finish_non_exhaustive()
    }
}

impl Berth {
    /// Loads the catalog from `store` and returns a ready service.
    pub async fn open(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGen>,
    ) -> Result<Berth, AppError> {
        let rows = store.load_catalog().await?;
        Ok(Berth {
            store,
            clock,
            ids,
            catalog: RwLock::new(Catalog::from_rows(rows)),
            writer: Mutex::new(()),
        })
    }

    /// The name of the storage backend.
    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// The current time, from the injected clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Checks that the database answers.
    pub async fn ready(&self) -> Result<(), AppError> {
        Ok(self.store.ping().await?)
    }

    /// Runs `f` over a current catalog. Another replica's writes become visible here: when the
    /// stored sequence moved past the catalog's, the catalog is reloaded first.
    pub async fn read<R>(&self, f: impl FnOnce(&Catalog) -> R) -> Result<R, AppError> {
        self.refresh().await?;
        Ok(self.read_now(f))
    }

    fn read_now<R>(&self, f: impl FnOnce(&Catalog) -> R) -> R {
        let catalog = self
            .catalog
            .read()
            .expect("invariant: catalog lock is never poisoned");
        f(&catalog)
    }

    async fn refresh(&self) -> Result<(), AppError> {
        let stored = self.store.catalog_seq().await?;
        if stored == self.read_now(Catalog::seq) {
            return Ok(());
        }
        // A writer in this process may be between its commit and its apply; wait for it.
        let _writer = self.writer.lock().await;
        if stored <= self.read_now(Catalog::seq) {
            return Ok(());
        }
        let rows = self.store.load_catalog().await?;
        self.replace_catalog(rows);
        Ok(())
    }

    fn replace_catalog(&self, rows: CatalogRows) {
        let fresh = Catalog::from_rows(rows);
        let mut catalog = self
            .catalog
            .write()
            .expect("invariant: catalog lock is never poisoned");
        tracing::info!(from = catalog.seq(), to = fresh.seq(), "catalog reloaded");
        *catalog = fresh;
    }

    /// The one write path: decide over a current catalog under the writer lock, persist, commit,
    /// apply. A decision with no changes commits nothing.
    pub(crate) async fn write<T>(
        &self,
        decide: impl FnOnce(&Catalog, Instant) -> Result<(Vec<Change>, T), Rejection>,
    ) -> Result<T, AppError> {
        let _writer = self.writer.lock().await;
        let mut tx = self.store.begin_write().await?;
        if tx.catalog_seq().await? != self.read_now(Catalog::seq) {
            let rows = tx.load_catalog().await?;
            self.replace_catalog(rows);
        }
        let now = self.clock.now();
        let (changes, value) = self.read_now(|catalog| decide(catalog, now))?;
        if changes.is_empty() {
            return Ok(value);
        }
        tx.persist(&changes, now).await?;
        let seq = tx.commit().await?;
        let mut catalog = self
            .catalog
            .write()
            .expect("invariant: catalog lock is never poisoned");
        catalog.apply(&changes);
        catalog.set_seq(seq);
        debug_assert!(catalog.check_invariants().is_ok());
        Ok(value)
    }

    pub(crate) fn new_uuid(&self) -> Uuid {
        self.ids.uuid()
    }
}

impl From<StoreError> for AppError {
    fn from(error: StoreError) -> AppError {
        match error {
            StoreError::Busy => AppError::Busy,
            other => AppError::Store(other),
        }
    }
}
