//! The port itself: the store interface the application writes through and its errors.

use async_trait::async_trait;
use berth_core::LeaseId;
use berth_core::catalog::CatalogRows;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use berth_core::model::lease::LeaseRecord;
use berth_core::model::ledger::Window;
use berth_core::model::usage::UsageSegment;
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

/// How many of the latest commits the replication log keeps by default. A replica more than this
/// many commits behind loads the catalog whole instead of applying the log.
pub const CHANGE_LOG_RETAINED: u64 = 10_000;

/// Most log entries one read of the replication log returns.
pub const CHANGE_LOG_PAGE: usize = 512;

/// One committed catalog write as the replication log holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    /// The catalog sequence it committed as.
    pub seq: u64,
    /// The changes it applied, in order.
    pub changes: Vec<Change>,
}

/// The replication log after a sequence number.
#[derive(Debug, Clone, PartialEq)]
pub enum Tail {
    /// The entries right after the sequence asked, oldest first and without a gap: possibly
    /// none, possibly fewer than were committed (at most the limit asked).
    Entries(Vec<Committed>),
    /// The log cannot bring a catalog forward from the sequence asked: the next entry was pruned,
    /// was written before the log existed, or is in a format this build does not read. The
    /// catalog must be loaded whole.
    Unavailable,
}

/// A replica's bid to take every replica's writes (see [`Store::writer_term`]). `Debug` does
/// not show the secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct WriterBid<'a> {
    /// Who bids: an id drawn once per process.
    pub holder: &'a str,
    /// Where the other replicas reach it.
    pub url: &'a str,
    /// The secret the other replicas present when they forward a request to it.
    pub secret: &'a str,
}

/// The replica that takes the writes, until its term ends unless it renews it. `Debug` does not
/// show the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct WriterTerm {
    /// Its id.
    pub holder: String,
    /// Where the other replicas reach it.
    pub url: String,
    /// The secret it expects of forwarded requests.
    pub secret: String,
}

impl std::fmt::Debug for WriterBid<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterBid")
            .field("holder", &self.holder)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for WriterTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterTerm")
            .field("holder", &self.holder)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Announcements of catalog commits made by other processes over the same database.
#[async_trait]
pub trait CommitFeed: Send {
    /// Waits for the next announced commit and returns its sequence number; `None` when
    /// announcements may have been missed (the connection to the database was lost and made
    /// again), so the caller should compare the stored sequence with its own.
    async fn next(&mut self) -> Result<Option<u64>, StoreError>;
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

    /// Whether commits write the replication log (not where one process holds the database:
    /// SQLite). Without it, a catalog behind the database is loaded whole.
    fn keeps_change_log(&self) -> bool {
        true
    }

    /// The replication log after `seq`: at most `limit` entries, oldest first.
    async fn changes_after(&self, seq: u64, limit: usize) -> Result<Tail, StoreError>;

    /// The oldest sequence the replication log still holds (0 when it holds none), and how many
    /// commits it keeps (0 when it keeps none).
    async fn change_log_bounds(&self) -> Result<(u64, u64), StoreError>;

    /// Announcements of other processes' commits, where the database carries them (PostgreSQL's
    /// `LISTEN`); `None` where it does not, and a replica checks the stored sequence instead.
    async fn listen(&self) -> Result<Option<Box<dyn CommitFeed>>, StoreError> {
        Ok(None)
    }

    /// Bids for the writer's term, when `bid` is given, and answers who holds it now: a bid
    /// takes the term when nobody holds an unexpired one, and the holder's bid renews it, for
    /// `term` from the database's clock (the replicas' clocks are never compared). `None` where
    /// nobody holds one, or where one process holds the database (SQLite) and nothing is
    /// forwarded. Safety never rests on the term: the database serializes writers whoever takes
    /// the writes, so two replicas that both believe they hold it are only slower.
    async fn writer_term(
        &self,
        bid: Option<WriterBid<'_>>,
        term: std::time::Duration,
    ) -> Result<Option<WriterTerm>, StoreError> {
        let _ = (bid, term);
        Ok(None)
    }

    /// The committed record of an idempotency key, live or expired, read outside any write
    /// (to tell whether a refusal found before the writer lock must go to the decision, which
    /// answers a key seen before with what it made).
    async fn idempotency_record(
        &self,
        key: &IdempotencyKey,
    ) -> Result<Option<IdempotencyRecord>, StoreError>;

    /// The closed usage segments that overlap `period`, of every project, written by the
    /// commits up to `seq` (a catalog at `seq` holds the open usage that follows them): at
    /// most `limit` (a caller asking one more than it takes learns that there were more).
    async fn usage_segments(
        &self,
        period: Window,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<UsageSegment>, StoreError>;

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

    /// The replication log after `seq`, read under the writer lock: at most `limit` entries.
    async fn changes_after(&mut self, seq: u64, limit: usize) -> Result<Tail, StoreError>;

    /// The records of those of `keys` that have one, live or expired, read under the writer
    /// lock: what a decision naming a key is given. Records are never loaded with the catalog.
    async fn idempotency_records(
        &mut self,
        keys: &[&IdempotencyKey],
    ) -> Result<Vec<(IdempotencyKey, IdempotencyRecord)>, StoreError>;

    /// Deletes at most `limit` idempotency records created before `before`, oldest first.
    async fn prune_idempotency(&mut self, before: Instant, limit: usize) -> Result<(), StoreError>;

    /// Adds closed usage `segments` to the history, as this commit's: the history is kept here
    /// alone, append-only, never loaded with the catalog.
    async fn record_usage(&mut self, segments: &[UsageSegment]) -> Result<(), StoreError>;

    /// Deletes at most `limit` usage segments that ended before `before`, those that ended
    /// first first.
    async fn prune_usage(&mut self, before: Instant, limit: usize) -> Result<(), StoreError>;

    /// Writes `changes`, in order. `now` stamps the rows that carry no time of their own.
    async fn persist(&mut self, changes: &[Change], now: Instant) -> Result<(), StoreError>;

    /// Bumps the catalog sequence, appends what was persisted to the replication log as the
    /// entry of the new sequence (pruning entries beyond the retained count), commits, and
    /// returns the new sequence number.
    async fn commit(self: Box<Self>) -> Result<u64, StoreError>;

    /// Commits as [`commit`](WriteTx::commit) does, and also returns the replication log's
    /// entry of the new sequence as it was appended (the changes encoded in
    /// [`CHANGE_FORMAT`](berth_core::CHANGE_FORMAT)), where the store keeps a log and can hand
    /// it back without encoding it again; `None` otherwise.
    async fn commit_logged(self: Box<Self>) -> Result<(u64, Option<String>), StoreError> {
        Ok((self.commit().await?, None))
    }
}
