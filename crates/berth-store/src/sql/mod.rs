//! The SQL adapters' shared code (feature `sql`): what each [`Change`] persists as, how the
//! catalog and the lifecycle record are read back and decoded, and the catalog sequence, written
//! once over a [`SqlBackend`].
//!
//! An adapter implements [`SqlBackend`] for its store type and gets [`Store`] from the blanket
//! impl here. It supplies only what differs between databases: the pool and its settings, the
//! writer lock and the read snapshot, migrations, how uuids are stored, how errors map, the
//! fastest way to read every lease, and the text of each statement ([`Statements`]). No SQL text
//! lives here.

mod catalog;
mod document;
pub mod driver;
mod idempotency;
mod lease;
mod statements;

pub use statements::Statements;

use crate::{Store, StoreError, WriteTx};
use async_trait::async_trait;
use berth_core::catalog::CatalogRows;
use berth_core::lease::{Lease, LeaseRecord};
use berth_core::{Change, Instant};
use driver::{Bind, Driver, Read, ReadText};
use sqlx::{Database, Pool, Transaction};
use std::future::Future;
use std::sync::Arc;
use uuid::Uuid;

/// A connection of the backend's database.
pub type Conn<B> = <<B as SqlBackend>::Db as Database>::Connection;

/// An SQL database behind berth's store port: what an adapter supplies.
pub trait SqlBackend: Send + Sync + 'static {
    /// The sqlx database, able to bind and read every column type berth stores.
    type Db: Driver
        + Bind<i64>
        + Bind<f64>
        + Bind<bool>
        + Bind<String>
        + for<'a> Bind<&'a str>
        + for<'a> Bind<Option<&'a str>>
        + Bind<Self::Uuid>
        + Bind<Option<Self::Uuid>>
        + Read<i64>
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

    /// Begins a transaction that excludes every other catalog writer, in this process and in
    /// every other, until it commits or is dropped.
    fn begin_locked(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, StoreError>> + Send;

    /// Reads every lease, in any order.
    fn load_leases(
        conn: &mut Conn<Self>,
    ) -> impl Future<Output = Result<Vec<Arc<Lease>>, StoreError>> + Send;
}

#[async_trait]
impl<B: SqlBackend> Store for B {
    fn backend(&self) -> &'static str {
        B::BACKEND
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        execute::<B>(&mut conn, sqlx::query(B::SQL.ping)).await
    }

    async fn catalog_seq(&self) -> Result<u64, StoreError> {
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        catalog::seq::<B>(&mut conn).await
    }

    async fn load_catalog(&self) -> Result<CatalogRows, StoreError> {
        let mut tx = self.begin_snapshot().await?;
        let rows = catalog::load::<B>(&mut tx).await?;
        tx.commit().await.map_err(B::map_err)?;
        Ok(rows)
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let tx = self.begin_locked().await?;
        Ok(Box::new(SqlTx::<B> { tx }))
    }

    async fn lease_records(&self, lease: Uuid) -> Result<Vec<LeaseRecord>, StoreError> {
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        lease::records_of::<B>(&mut conn, lease).await
    }

    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        lease::records_after::<B>(&mut conn, seq, limit).await
    }
}

/// A catalog write: a transaction holding the writers' lock.
struct SqlTx<B: SqlBackend> {
    tx: Transaction<'static, B::Db>,
}

#[async_trait]
impl<B: SqlBackend> WriteTx for SqlTx<B> {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        catalog::seq::<B>(&mut self.tx).await
    }

    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        catalog::load::<B>(&mut self.tx).await
    }

    async fn persist(&mut self, changes: &[Change], now: Instant) -> Result<(), StoreError> {
        for change in changes {
            catalog::persist::<B>(&mut self.tx, change, now).await?;
        }
        Ok(())
    }

    async fn commit(mut self: Box<Self>) -> Result<u64, StoreError> {
        let seq = catalog::bump_seq::<B>(&mut self.tx).await?;
        self.tx.commit().await.map_err(B::map_err)?;
        Ok(seq)
    }
}

/// Runs a statement that returns no rows.
async fn execute<B: SqlBackend>(
    conn: &mut Conn<B>,
    query: driver::SqlQuery<'_, B::Db>,
) -> Result<(), StoreError> {
    B::Db::run(conn, query).await.map_err(B::map_err)
}

/// Runs a statement and returns every row.
async fn fetch_all<B: SqlBackend>(
    conn: &mut Conn<B>,
    query: driver::SqlQuery<'_, B::Db>,
) -> Result<Vec<<B::Db as Database>::Row>, StoreError> {
    B::Db::rows(conn, query).await.map_err(B::map_err)
}

/// Runs a statement and returns its one row.
async fn fetch_one<B: SqlBackend>(
    conn: &mut Conn<B>,
    query: driver::SqlQuery<'_, B::Db>,
) -> Result<<B::Db as Database>::Row, StoreError> {
    B::Db::row(conn, query).await.map_err(B::map_err)
}

/// Reads a uuid column that is never NULL.
fn uuid_column<B: SqlBackend>(
    row: &<B::Db as Database>::Row,
    name: &str,
) -> Result<Uuid, StoreError> {
    B::read_uuid(row, name)?.ok_or_else(|| crate::codec::corrupt("uuid"))
}
