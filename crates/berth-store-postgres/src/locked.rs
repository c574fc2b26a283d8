//! The catalog writers' transaction PostgreSQL's way: one message begins it and takes the lock.
//!
//! sqlx's own transaction sends `BEGIN` on its own, a round trip on the writer's serial path,
//! and its custom `BEGIN` discards the rows of what it runs. Here `BEGIN` and the lock's `SELECT
//! ... FOR UPDATE` go in one simple-query message, which answers the sequence the transaction
//! starts from; every statement after it is the shared code's, bound and prepared as usual.

use crate::error::map_err;
use berth_store::StoreError;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres, Row};
use std::ops::{Deref, DerefMut};

/// Begins the transaction and takes the catalog writers' lock: the `berth_meta` row, held
/// until the transaction ends, so every catalog writer in every process waits here for the
/// one before it. The row holds the sequence the transaction starts from.
const BEGIN_LOCKED: &str = "BEGIN; SELECT catalog_seq FROM berth_meta WHERE id = 1 FOR UPDATE";

/// A catalog write's transaction on a pooled connection. Dropped before it commits, it is
/// rolled back before the connection goes back to the pool.
#[derive(Debug)]
pub struct Locked {
    /// `None` once committed.
    conn: Option<PoolConnection<Postgres>>,
}

impl Locked {
    /// Begins a transaction holding the writers' lock, with the catalog sequence it starts from.
    pub(crate) async fn begin(pool: &PgPool) -> Result<(Locked, u64), StoreError> {
        let conn = pool.acquire().await.map_err(map_err)?;
        // Held from here, so that a lock that times out is rolled back on the way out.
        let mut locked = Locked { conn: Some(conn) };
        let rows = sqlx::raw_sql(BEGIN_LOCKED)
            .fetch_all(&mut *locked)
            .await
            .map_err(map_err)?;
        // One row, in text: a simple query's rows are.
        let [row] = rows.as_slice() else {
            return Err(berth_store::codec::corrupt("catalog_seq"));
        };
        let seq: i64 = row.try_get("catalog_seq").map_err(map_err)?;
        Ok((locked, berth_store::codec::decode_u64(seq)?))
    }

    /// Commits.
    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        sqlx::raw_sql("COMMIT")
            .execute(&mut *self)
            .await
            .map_err(map_err)?;
        self.conn = None;
        Ok(())
    }
}

impl Deref for Locked {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.conn
            .as_deref()
            .expect("invariant: a transaction holds its connection until it commits")
    }
}

impl DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn
            .as_deref_mut()
            .expect("invariant: a transaction holds its connection until it commits")
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        // Rolled back before the connection is pooled again (the lock is held until then);
        // closed instead where the rollback cannot run or fails, which ends the transaction too.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.is_err() {
                        conn.close_on_drop();
                    }
                });
            }
            Err(_) => conn.close_on_drop(),
        }
    }
}
