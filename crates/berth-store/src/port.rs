//! The port itself: the store interface the application writes through and its errors.

use async_trait::async_trait;
use berth_core::LeaseId;
use berth_core::catalog::CatalogRows;
use berth_core::model::lease::LeaseRecord;
use berth_core::{Change, Instant};

/// A storage failure. Domain rules are checked by the core before anything reaches storage, so
/// these are either races the caller may retry or faults of the backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness or foreign-key constraint refused the write.
    #[error("constraint {constraint} refused the write")]
    Conflict {
        /// The constraint's name.
        constraint: String,
    },
    /// The backend is busy or the transaction lost a serialization race; retrying may succeed.
    #[error("the database is busy")]
    Busy,
    /// Any other backend failure.
    #[error("database error")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A storage backend.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// A short name of the backend (`sqlite`, `postgres`, `memory`).
    fn backend(&self) -> &'static str;

    /// Checks that the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// The sequence number of the last committed catalog write.
    async fn catalog_seq(&self) -> Result<u64, StoreError>;

    /// Reads the whole catalog.
    async fn load_catalog(&self) -> Result<CatalogRows, StoreError>;

    /// Starts a catalog write. The transaction excludes every other catalog writer, in this
    /// process and in every other replica, until it commits or is dropped (which rolls back).
    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError>;

    /// The lifecycle record of one lease, oldest first. The record is durable and not held in
    /// memory; it outlives the lease.
    async fn lease_records(&self, lease: LeaseId) -> Result<Vec<LeaseRecord>, StoreError>;

    /// Entries of the lifecycle record after `seq`, oldest first, at most `limit`, each with its
    /// sequence number (for notification delivery). Sequence numbers start at 1 and grow with
    /// every committed entry; they may skip numbers, never go back.
    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, LeaseRecord)>, StoreError>;
}

/// A catalog write transaction.
#[async_trait]
pub trait WriteTx: Send {
    /// The sequence number of the last committed catalog write, read under the writer lock.
    async fn catalog_seq(&mut self) -> Result<u64, StoreError>;

    /// Reads the whole catalog inside the transaction.
    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError>;

    /// Writes `changes`, in order. `now` stamps the rows that carry no time of their own.
    async fn persist(&mut self, changes: &[Change], now: Instant) -> Result<(), StoreError>;

    /// Bumps the catalog sequence, commits, and returns the new sequence number.
    async fn commit(self: Box<Self>) -> Result<u64, StoreError>;
}
