//! The PostgreSQL adapter of berth's storage port: the shared backend for several replicas.
//!
//! The only crate with PostgreSQL SQL: the text of each statement (`statements`), the writer
//! lock, the read snapshot, the fastest read of every lease (`lease`) and the migrations; what
//! each change persists as and how the catalog loads is `berth_store::sql`, shared with SQLite.
//! Every catalog write runs in a transaction that first locks the single `berth_meta` row
//! (`SELECT ... FOR UPDATE`, sent with the `BEGIN`), so catalog writers in every process are
//! serialized on that row (`locked`); a whole-catalog read outside a write runs in one
//! `REPEATABLE READ` read-only transaction, so it sees one consistent snapshot and never blocks
//! a writer.
//! Migrations in `migrations/` are embedded and applied at connect.
#![forbid(unsafe_code)]

mod consumer;
mod error;
mod lease;
mod locked;
mod provider;
#[cfg(feature = "testkit")]
pub mod scratch;
mod statements;

use berth_core::LeaseId;
use berth_core::model::consumer::Consumer;
use berth_core::model::lease::{Lease, LeaseRecord};
use berth_core::model::provider::ProviderRow;
use berth_store::sql::{SqlBackend, Statements};
use berth_store::{CommitFeed, StoreError};
use error::map_err;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{PgConnection, Postgres, Row, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How long a writer waits for the catalog lock (or any other lock) before reporting busy.
const LOCK_TIMEOUT: &str = "10s";
/// How long a caller waits for a free pooled connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections in the pool; catalog writers are serialized, readers run in parallel. One more
/// is held by the listener for other replicas' commits, when one listens.
const POOL_CONNECTIONS_MAX: u32 = 9;

/// The channel every commit is announced on, with its catalog sequence as the payload.
const COMMIT_CHANNEL: &str = "berth_catalog";

/// A berth store in one PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// How many commits the replication log keeps.
    retained: u64,
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
        Ok(PostgresStore {
            pool,
            retained: berth_store::CHANGE_LOG_RETAINED,
        })
    }

    /// The same store, keeping `retained` commits in the replication log (at least 1) instead of
    /// [`berth_store::CHANGE_LOG_RETAINED`].
    pub fn with_change_log_retained(mut self, retained: u64) -> PostgresStore {
        self.retained = retained.max(1);
        self
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

impl SqlBackend for PostgresStore {
    type Db = Postgres;
    type Uuid = Uuid;
    const BACKEND: &'static str = "postgres";
    const SQL: &'static Statements = &statements::SQL;

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn uuid(id: Uuid) -> Uuid {
        id
    }

    fn read_uuid(row: &PgRow, column: &str) -> Result<Option<Uuid>, StoreError> {
        row.try_get(column).map_err(map_err)
    }

    fn map_err(error: sqlx::Error) -> StoreError {
        map_err(error)
    }

    async fn begin_snapshot(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        // One repeatable-read transaction, so the rows form one consistent snapshot.
        self.pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(map_err)
    }

    type Locked = locked::Locked;

    async fn begin_locked(&self) -> Result<(locked::Locked, Option<u64>), StoreError> {
        let (locked, seq) = locked::Locked::begin(&self.pool).await?;
        Ok((locked, Some(seq)))
    }

    async fn commit_locked(locked: locked::Locked) -> Result<(), StoreError> {
        locked.commit().await
    }

    fn change_log_retained(&self) -> u64 {
        self.retained
    }

    async fn writer_term(
        &self,
        bid: Option<berth_store::WriterBid<'_>>,
        term: Duration,
    ) -> Result<Option<berth_store::WriterTerm>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(map_err)?;
        if let Some(bid) = bid {
            let term = i64::try_from(term.as_micros()).unwrap_or(i64::MAX);
            // Taken when nobody holds an unexpired term, renewed by its holder; the row lock
            // orders two bids made at once, and the second finds the first's term.
            sqlx::query(
                "INSERT INTO writer_term (id, holder, url, secret, expires_at) \
                 VALUES (1, $1, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint + $4) \
                 ON CONFLICT (id) DO UPDATE SET holder = EXCLUDED.holder, url = EXCLUDED.url, \
                   secret = EXCLUDED.secret, expires_at = EXCLUDED.expires_at \
                 WHERE writer_term.holder = EXCLUDED.holder \
                   OR writer_term.expires_at <= (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
            )
            .bind(bid.holder)
            .bind(bid.url)
            .bind(bid.secret)
            .bind(term)
            .execute(&mut *conn)
            .await
            .map_err(map_err)?;
        }
        let row = sqlx::query(
            "SELECT holder, url, secret FROM writer_term WHERE id = 1 \
             AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
        )
        .fetch_optional(&mut *conn)
        .await
        .map_err(map_err)?;
        row.map(|row| {
            Ok(berth_store::WriterTerm {
                holder: row.try_get("holder").map_err(map_err)?,
                url: row.try_get("url").map_err(map_err)?,
                secret: row.try_get("secret").map_err(map_err)?,
            })
        })
        .transpose()
    }

    async fn listen(&self) -> Result<Option<Box<dyn CommitFeed>>, StoreError> {
        let mut listener = PgListener::connect_with(&self.pool)
            .await
            .map_err(map_err)?;
        listener.listen(COMMIT_CHANNEL).await.map_err(map_err)?;
        Ok(Some(Box::new(Commits { listener })))
    }

    async fn load_leases(conn: &mut PgConnection) -> Result<Vec<Arc<Lease>>, StoreError> {
        lease::load_leases(conn).await
    }

    async fn write_leases(
        conn: &mut PgConnection,
        leases: &[(LeaseId, &Lease)],
        records: &[&LeaseRecord],
    ) -> Result<bool, StoreError> {
        lease::write_leases(conn, leases, records).await?;
        Ok(true)
    }

    async fn write_rows(
        conn: &mut PgConnection,
        providers: &[&ProviderRow],
        consumers: &[(Uuid, Option<&Consumer>)],
        now: i64,
    ) -> Result<bool, StoreError> {
        consumer::write_rows(conn, providers, consumers, now).await?;
        Ok(true)
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

/// Other replicas' commits, as `LISTEN berth_catalog` receives them.
struct Commits {
    listener: PgListener,
}

#[async_trait::async_trait]
impl CommitFeed for Commits {
    async fn next(&mut self) -> Result<Option<u64>, StoreError> {
        // `None` from the listener: the connection was lost (and is made again on the next
        // call), so announcements may have been missed meanwhile.
        match self.listener.try_recv().await.map_err(map_err)? {
            Some(notification) => Ok(notification.payload().parse().ok()),
            None => Ok(None),
        }
    }
}
