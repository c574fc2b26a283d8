//! Reading every lease at start-up, PostgreSQL's way: one query, each document decoded as its
//! row arrives.

use crate::error::map_err;
use berth_core::model::lease::Lease;
use berth_store::StoreError;
use berth_store::codec::decode_lease;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use std::sync::Arc;

/// Carries a port error through a row mapper, which may only fail with a driver error.
fn carry(error: StoreError) -> sqlx::Error {
    sqlx::Error::Decode(Box::new(error))
}

/// The port error a row mapper carried out, or the mapped driver error.
fn lift(error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::Decode(inner) => match inner.downcast::<StoreError>() {
            Ok(carried) => *carried,
            Err(inner) => map_err(sqlx::Error::Decode(inner)),
        },
        other => map_err(other),
    }
}

/// Reads every lease in one query, decoding each document as its row arrives (the rows are
/// never held together; only the decoded leases are).
#[tracing::instrument(skip_all)]
pub(crate) async fn load_leases(conn: &mut PgConnection) -> Result<Vec<Arc<Lease>>, StoreError> {
    sqlx::query("SELECT document FROM leases")
        .try_map(|row: PgRow| {
            let document: &str = row.try_get(0)?;
            decode_lease(document).map(Arc::new).map_err(carry)
        })
        .fetch_all(&mut *conn)
        .await
        .map_err(lift)
}
