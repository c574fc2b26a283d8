//! The SQLite adapter of berth's storage port: the embedded default.
//!
//! The only crate with SQLite SQL: the text of each statement (`statements`), the writer lock,
//! the fastest read of every lease (`lease`) and the migrations; what each change persists as and
//! how the catalog loads is `berth_store::sql`, shared with PostgreSQL. One file in WAL mode;
//! every catalog write runs in a `BEGIN IMMEDIATE` transaction, so writers are serialized by
//! SQLite's write lock and a reader never blocks a writer. Migrations in `migrations/` are
//! embedded and applied at open.
//!
//! The file holds webhook secrets, so berth creates it (and the directory it makes for it)
//! readable by its owner only; SQLite gives the `-wal` and `-shm` files the database file's
//! permissions. A file that already exists is left as it is, with a warning when other users
//! may read it.
#![forbid(unsafe_code)]

mod error;
mod lease;
mod statements;

use berth_core::model::lease::Lease;
use berth_store::StoreError;
use berth_store::codec::corrupt;
use berth_store::sql::{SqlBackend, Statements};
use error::map_err;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqliteConnection, Transaction};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How long a writer waits for SQLite's write lock before reporting busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections in the pool; SQLite serializes writers, readers run in parallel.
const POOL_CONNECTIONS_MAX: u32 = 8;

/// SQLite's `synchronous` setting, in WAL mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// The WAL is synced at checkpoints, not at each commit: a commit survives a crash of the
    /// process, but the last commits may be lost (never corrupted) on power loss or an OS crash.
    #[default]
    Normal,
    /// The WAL is synced at each commit: a commit survives power loss too, at the cost of an
    /// fsync per write.
    Full,
    /// Nothing is ever synced: a power loss may lose any commit, or corrupt the database. Unsafe;
    /// the negative control of the power-cut campaign, which must see it lose answered writes.
    Off,
}

/// A berth store in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `path` with [`Synchronous::Normal`] and
    /// applies migrations.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, Synchronous::default()).await
    }

    /// Opens (creating if missing, with its directory, owner-only) the database at `path` with
    /// the given `synchronous` setting and applies migrations.
    pub async fn open_with(
        path: &Path,
        synchronous: Synchronous,
    ) -> Result<SqliteStore, StoreError> {
        create_private(path).map_err(|e| StoreError::Backend(e.into()))?;
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match synchronous {
                Synchronous::Normal => SqliteSynchronous::Normal,
                Synchronous::Full => SqliteSynchronous::Full,
                Synchronous::Off => SqliteSynchronous::Off,
            })
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

/// Creates the missing directories above `path` (0700) and the empty database file (0600);
/// warns about an existing database file, or its `-wal` or `-shm` file, that other users may
/// read or write.
fn create_private(path: &Path) -> std::io::Result<()> {
    let annotate = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("creating {what}: {e}"))
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(annotate(dir))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            warn_if_shared(path);
            Ok(())
        }
        Err(e) => Err(annotate(path)(e)),
    }
}

/// Logs a warning for each of the database's files that other users may read or write.
fn warn_if_shared(path: &Path) {
    #[cfg(unix)]
    for suffix in ["", "-wal", "-shm"] {
        use std::os::unix::fs::PermissionsExt as _;
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = std::path::PathBuf::from(name);
        if let Ok(metadata) = std::fs::metadata(&file)
            && metadata.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                file = %file.display(),
                mode = format_args!("{:o}", metadata.permissions().mode() & 0o777),
                "the database holds webhook secrets and other users may read this file: make it owner-only (chmod 600)"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

impl SqlBackend for SqliteStore {
    type Db = Sqlite;
    type Uuid = String;
    const BACKEND: &'static str = "sqlite";
    const SQL: &'static Statements = &statements::SQL;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn uuid(id: Uuid) -> String {
        id.to_string()
    }

    fn read_uuid(row: &SqliteRow, column: &str) -> Result<Option<Uuid>, StoreError> {
        let text: Option<&str> = row.try_get(column).map_err(map_err)?;
        text.map(|text| Uuid::parse_str(text).map_err(|_| corrupt("uuid")))
            .transpose()
    }

    fn map_err(error: sqlx::Error) -> StoreError {
        map_err(error)
    }

    async fn begin_snapshot(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        // A read transaction: its reads see one snapshot of the WAL.
        self.pool.begin().await.map_err(map_err)
    }

    type Locked = Transaction<'static, Sqlite>;

    async fn begin_locked(
        &self,
    ) -> Result<(Transaction<'static, Sqlite>, Option<u64>), StoreError> {
        // Takes SQLite's write lock at once, not at the first write.
        let tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(map_err)?;
        Ok((tx, None))
    }

    async fn commit_locked(locked: Transaction<'static, Sqlite>) -> Result<(), StoreError> {
        locked.commit().await.map_err(map_err)
    }

    async fn load_leases(conn: &mut SqliteConnection) -> Result<Vec<Arc<Lease>>, StoreError> {
        lease::load_leases(conn).await
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

#[cfg(test)]
mod tests {
    use super::*;
    use berth_store::Store as _;

    #[cfg(unix)]
    #[tokio::test]
    async fn a_fresh_database_and_its_directory_are_owner_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("dir");
        let data = dir.path().join("data").join("berth");
        let path = data.join("berth.db");
        let store = SqliteStore::open(&path).await.expect("open");
        store.ping().await.expect("ping");
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode(&data), 0o700, "the data directory");
        assert_eq!(
            mode(&dir.path().join("data")),
            0o700,
            "its parent, also made"
        );
        assert_eq!(mode(&path), 0o600, "the database file");
        for suffix in ["-wal", "-shm"] {
            let file = data.join(format!("berth.db{suffix}"));
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        store.close().await;
        // An existing file is not changed (only warned about).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let store = SqliteStore::open(&path).await.expect("reopen");
        assert_eq!(mode(&path), 0o644);
        store.close().await;
    }

    #[tokio::test]
    async fn the_synchronous_setting_is_applied() {
        let dir = tempfile::tempdir().expect("dir");
        let settings = [
            (Synchronous::Off, 0),
            (Synchronous::Normal, 1),
            (Synchronous::Full, 2),
        ];
        for (setting, pragma) in settings {
            let path = dir.path().join(format!("{setting:?}.db"));
            let store = SqliteStore::open_with(&path, setting).await.expect("open");
            // Every pooled connection has it: hold several at once.
            let mut held = Vec::new();
            for _ in 0..3 {
                let mut conn = store.pool.acquire().await.expect("connection");
                let value: i64 = sqlx::query_scalar("PRAGMA synchronous")
                    .fetch_one(&mut *conn)
                    .await
                    .expect("pragma");
                assert_eq!(value, pragma, "{setting:?}");
                held.push(conn);
            }
            drop(held);
            store.close().await;
        }
    }
}
