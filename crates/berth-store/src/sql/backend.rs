//! What an SQL adapter supplies ([`SqlBackend`]), and the few helpers the shared code runs its
//! statements with.

use super::driver::{Bind, Driver, Read, ReadText};
use super::statements::Statements;
use crate::port::StoreError;
use berth_core::LeaseId;
use berth_core::model::consumer::Consumer;
use berth_core::model::lease::{Lease, LeaseRecord};
use berth_core::model::provider::ProviderRow;
use sqlx::{Database, Pool, Transaction};
use std::future::Future;
use std::ops::DerefMut;
use std::sync::Arc;
use uuid::Uuid;

/// A connection of the backend's database.
pub type Conn<B> = <<B as SqlBackend>::Db as Database>::Connection;

/// An SQL database behind berth's store port: what an adapter supplies.
pub trait SqlBackend: Send + Sync + 'static {
    /// The sqlx database, able to bind and read every column type berth stores.
    type Db: Driver
        + Bind<i64>
        + Bind<Option<i64>>
        + Bind<f64>
        + Bind<bool>
        + Bind<String>
        + for<'a> Bind<&'a str>
        + for<'a> Bind<Option<&'a str>>
        + Bind<Self::Uuid>
        + Bind<Option<Self::Uuid>>
        + Read<i64>
        + Read<Option<i64>>
        + Read<f64>
        + Read<bool>
        + Read<String>
        + Read<Option<String>>
        + ReadText;

    /// A uuid as a parameter binds it.
    type Uuid: Send;

    /// A short name of the backend (`sqlite`, `postgres`).
    const BACKEND: &'static str;

    /// The text of every statement.
    const SQL: &'static Statements;

    /// The pool every transaction and read takes its connection from.
    fn pool(&self) -> &Pool<Self::Db>;

    /// A uuid as a parameter.
    fn uuid(id: Uuid) -> Self::Uuid;

    /// The uuid in `column` of `row`, `None` for NULL.
    fn read_uuid(
        row: &<Self::Db as Database>::Row,
        column: &str,
    ) -> Result<Option<Uuid>, StoreError>;

    /// Maps a driver error to the port's error (busy, a constraint, or a backend fault).
    fn map_err(error: sqlx::Error) -> StoreError;

    /// Begins a transaction that sees one consistent snapshot, for a whole-catalog read.
    fn begin_snapshot(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, StoreError>> + Send;

    /// A catalog write's transaction: the connection it runs on, holding the writers' lock
    /// until [`commit_locked`](SqlBackend::commit_locked) ends it; dropped, it rolls back.
    type Locked: DerefMut<Target = Conn<Self>> + Send + 'static;

    /// Begins a transaction that excludes every other catalog writer, in this process and in
    /// every other, until it commits or is dropped; with the catalog sequence when taking the
    /// lock read it (so the transaction need not read it again).
    fn begin_locked(
        &self,
    ) -> impl Future<Output = Result<(Self::Locked, Option<u64>), StoreError>> + Send;

    /// Commits a catalog write.
    fn commit_locked(locked: Self::Locked) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// How many of the latest commits the replication log keeps.
    fn change_log_retained(&self) -> u64 {
        crate::port::CHANGE_LOG_RETAINED
    }

    /// Announcements of other processes' commits, where the database carries them.
    fn listen(
        &self,
    ) -> impl Future<Output = Result<Option<Box<dyn crate::port::CommitFeed>>, StoreError>> + Send
    {
        async { Ok(None) }
    }

    /// Bids for the writer's term and answers who holds it (`Store::writer_term`), where
    /// several processes share the database.
    fn writer_term(
        &self,
        bid: Option<crate::port::WriterBid<'_>>,
        term: std::time::Duration,
    ) -> impl Future<Output = Result<Option<crate::port::WriterTerm>, StoreError>> + Send {
        let _ = (bid, term);
        async { Ok(None) }
    }

    /// Reads every lease, in any order.
    fn load_leases(
        conn: &mut Conn<Self>,
    ) -> impl Future<Output = Result<Vec<Arc<Lease>>, StoreError>> + Send;

    /// Writes providers' new states, then consumers' new states, in fewer statements than one
    /// per row, where the database takes lists of rows, and answers `true`; answers `false`
    /// (the default) having written nothing, and the shared code writes them one row at a time,
    /// the providers first. `providers` are every one already stored; one may come more than
    /// once, in the order they were decided, and its last row is its state. Written together,
    /// the rows may swap names (through a name one of them held in between): only the names
    /// they end with are unique. `consumers` name each uuid once; `None` deletes it, with its
    /// allocations. `now` (encoded) stamps new allocations. Either list may be empty.
    fn write_rows(
        conn: &mut Conn<Self>,
        providers: &[&ProviderRow],
        consumers: &[(Uuid, Option<&Consumer>)],
        now: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (conn, providers, consumers, now);
        async { Ok(false) }
    }

    /// Writes the new states of leases (each id once) and appends lifecycle records (in their
    /// order) in fewer statements than one per row, where the database takes lists of rows, and
    /// answers `true`; answers `false` (the default) having written nothing, and the shared code
    /// writes them one row at a time.
    fn write_leases(
        conn: &mut Conn<Self>,
        leases: &[(LeaseId, &Lease)],
        records: &[&LeaseRecord],
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (conn, leases, records);
        async { Ok(false) }
    }
}

/// Runs a statement that returns no rows.
pub(super) async fn execute<B: SqlBackend>(
    conn: &mut Conn<B>,
    query: super::driver::SqlQuery<'_, B::Db>,
) -> Result<(), StoreError> {
    B::Db::run(conn, query).await.map_err(B::map_err)
}

/// Runs a pruning statement that binds `(before, limit)`: an instant and a row count.
pub(super) async fn prune_before<B: SqlBackend>(
    conn: &mut Conn<B>,
    statement: &'static str,
    before: berth_core::Instant,
    limit: usize,
) -> Result<(), StoreError> {
    use super::driver::Args as _;
    let query = sqlx::query(statement)
        .arg(crate::codec::encode_instant(before))
        .arg(i64::try_from(limit).unwrap_or(i64::MAX));
    execute::<B>(conn, query).await
}

/// Runs a statement and returns every row.
pub(super) async fn fetch_all<B: SqlBackend>(
    conn: &mut Conn<B>,
    query: super::driver::SqlQuery<'_, B::Db>,
) -> Result<Vec<<B::Db as Database>::Row>, StoreError> {
    B::Db::rows(conn, query).await.map_err(B::map_err)
}

/// Runs a statement and returns its one row.
pub(super) async fn fetch_one<B: SqlBackend>(
    conn: &mut Conn<B>,
    query: super::driver::SqlQuery<'_, B::Db>,
) -> Result<<B::Db as Database>::Row, StoreError> {
    B::Db::row(conn, query).await.map_err(B::map_err)
}

/// Reads a uuid column that is never NULL.
pub(super) fn uuid_column<B: SqlBackend>(
    row: &<B::Db as Database>::Row,
    name: &str,
) -> Result<Uuid, StoreError> {
    B::read_uuid(row, name)?.ok_or_else(|| crate::codec::corrupt("uuid"))
}
