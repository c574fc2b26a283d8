//! The PostgreSQL adapter of berth's storage port: the shared backend for several replicas.
//!
//! The only crate with PostgreSQL SQL. Every catalog write runs in a transaction that first locks
//! the single `berth_meta` row (`SELECT ... FOR UPDATE`), so catalog writers in every process are
//! serialized on that row; a whole-catalog read outside a write runs in one `REPEATABLE READ`
//! read-only transaction, so it sees one consistent snapshot and never blocks a writer.
//! Migrations in `migrations/` are embedded and applied at connect.
#![forbid(unsafe_code)]

mod catalog;
mod idempotency;
mod lease;
mod promise;
#[cfg(feature = "testkit")]
pub mod scratch;

use async_trait::async_trait;
use berth_core::catalog::CatalogRows;
use berth_core::model::lease::LeaseRecord;
use berth_core::{Change, Instant};
use berth_store::{Store, StoreError, WriteTx};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};
use std::str::FromStr;
use std::time::Duration;
use uuid::Uuid;

/// How long a writer waits for the catalog lock (or any other lock) before reporting busy.
const LOCK_TIMEOUT: &str = "10s";
/// How long a caller waits for a free pooled connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections in the pool; catalog writers are serialized, readers run in parallel.
const POOL_CONNECTIONS_MAX: u32 = 8;

/// A berth store in one PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host:port/database?...`) and applies
    /// migrations.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(map_err)?
            .options([("lock_timeout", LOCK_TIMEOUT)]);
        let pool = PgPoolOptions::new()
            .max_connections(POOL_CONNECTIONS_MAX)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(map_err)?;
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .map_err(|e| StoreError::Backend(e.into()))?;
        Ok(PostgresStore { pool })
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
        // serialization_failure, deadlock_detected, lock_not_available (lock_timeout).
        if code == "40001" || code == "40P01" || code == "55P03" {
            return StoreError::Busy;
        }
        if db.is_unique_violation() || db.is_foreign_key_violation() || db.is_check_violation() {
            return StoreError::Conflict {
                constraint: db.constraint().unwrap_or(db.message()).to_owned(),
            };
        }
    }
    StoreError::Backend(error.into())
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
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
        // One repeatable-read transaction, so the rows form one consistent snapshot.
        let mut tx = self.pool.begin().await.map_err(map_err)?;
        catalog::begin_snapshot(&mut tx).await?;
        let rows = catalog::load(&mut tx).await?;
        tx.commit().await.map_err(map_err)?;
        Ok(rows)
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(map_err)?;
        catalog::lock(&mut tx).await?;
        Ok(Box::new(PostgresTx { tx }))
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

struct PostgresTx {
    tx: Transaction<'static, Postgres>,
}

#[async_trait]
impl WriteTx for PostgresTx {
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

impl PostgresStore {
    /// Every `(table, column)` of berth's schema, sorted (for the cross-backend schema test).
    pub async fn schema_columns(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::TEXT, column_name::TEXT FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name NOT LIKE '_sqlx%'
             ORDER BY table_name, column_name",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(map_err)?;
        Ok(rows)
    }
}
