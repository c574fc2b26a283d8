//! The SQLite adapter of berth's storage port: the embedded default.
//!
//! The only crate with SQLite SQL. One file in WAL mode; every catalog write runs in a
//! `BEGIN IMMEDIATE` transaction, so writers are serialized by SQLite's write lock and a reader
//! never blocks a writer. Migrations in `migrations/` are embedded and applied at open.
#![forbid(unsafe_code)]

mod catalog;
mod idempotency;
mod lease;
mod promise;

use async_trait::async_trait;
use berth_core::catalog::CatalogRows;
use berth_core::lease::LeaseRecord;
use berth_core::{Change, Instant};
use berth_store::{Store, StoreError, WriteTx};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
use std::path::Path;
use std::time::Duration;
use uuid::Uuid;

/// How long a writer waits for SQLite's write lock before reporting busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections in the pool; SQLite serializes writers, readers run in parallel.
const POOL_CONNECTIONS_MAX: u32 = 8;

/// A berth store in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `path` and applies migrations.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(POOL_CONNECTIONS_MAX)
            .connect_with(options)
            .await
            .map_err(map_err)?;
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .map_err(|e| StoreError::Backend(e.into()))?;
        Ok(SqliteStore { pool })
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Maps a driver error to the port's error.
pub(crate) fn map_err(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &error {
        let code = db.code().unwrap_or_default();
        // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
        if code == "5" || code == "6" || code == "517" || code == "262" {
            return StoreError::Busy;
        }
        if db.is_unique_violation() || db.is_foreign_key_violation() || db.is_check_violation() {
            return StoreError::Conflict {
                constraint: db.message().to_owned(),
            };
        }
    }
    StoreError::Backend(error.into())
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(map_err)?;
        Ok(())
    }

    async fn catalog_seq(&self) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        catalog::seq(&mut conn).await
    }

    async fn load_catalog(&self) -> Result<CatalogRows, StoreError> {
        // One read transaction, so the rows form one consistent snapshot.
        let mut tx = self.pool.begin().await.map_err(map_err)?;
        let rows = catalog::load(&mut tx).await?;
        tx.commit().await.map_err(map_err)?;
        Ok(rows)
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(map_err)?;
        Ok(Box::new(SqliteTx { tx }))
    }

    async fn lease_records(&self, lease: Uuid) -> Result<Vec<LeaseRecord>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        lease::records_of(&mut conn, lease).await
    }

    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        lease::records_after(&mut conn, seq, limit).await
    }
}

struct SqliteTx {
    tx: Transaction<'static, Sqlite>,
}

#[async_trait]
impl WriteTx for SqliteTx {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        catalog::seq(&mut self.tx).await
    }

    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        catalog::load(&mut self.tx).await
    }

    async fn persist(&mut self, changes: &[Change], now: Instant) -> Result<(), StoreError> {
        for change in changes {
            catalog::persist(&mut self.tx, change, now).await?;
        }
        Ok(())
    }

    async fn commit(mut self: Box<Self>) -> Result<u64, StoreError> {
        let seq = catalog::bump_seq(&mut self.tx).await?;
        self.tx.commit().await.map_err(map_err)?;
        Ok(seq)
    }
}

impl SqliteStore {
    /// Every `(table, column)` of berth's schema, sorted (for the cross-backend schema test).
    pub async fn schema_columns(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p
             WHERE m.type = 'table' AND m.name NOT LIKE '_sqlx%' AND m.name NOT LIKE 'sqlite_%'
             ORDER BY m.name, p.name",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(map_err)?;
        Ok(rows)
    }
}
