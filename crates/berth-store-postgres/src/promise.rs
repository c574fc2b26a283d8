//! SQL of the Promise objects: flavors, the reservation policy and Promise instances, each a
//! JSON document keyed by kind and id.

use crate::map_err;
use berth_core::Change;
use berth_core::catalog::CatalogRows;
use berth_store::StoreError;
use berth_store::codec::{load_promise_row, promise_row};
use sqlx::PgConnection;

/// Reads every Promise object into `rows`.
#[tracing::instrument(skip_all)]
pub(crate) async fn load(
    conn: &mut PgConnection,
    rows: &mut CatalogRows,
) -> Result<(), StoreError> {
    let stored: Vec<(String, String)> =
        sqlx::query_as("SELECT kind, document FROM promise_objects ORDER BY kind, id")
            .fetch_all(&mut *conn)
            .await
            .map_err(map_err)?;
    for (kind, document) in stored {
        load_promise_row(rows, &kind, &document)?;
    }
    Ok(())
}

/// Writes the Promise object a change carries (an error for any other change: a store bug).
#[tracing::instrument(skip_all)]
pub(crate) async fn persist(conn: &mut PgConnection, change: &Change) -> Result<bool, StoreError> {
    let Some((kind, id, document)) = promise_row(change) else {
        return Err(StoreError::Backend(
            format!("invariant: no Promise object row for {change:?}").into(),
        ));
    };
    match document {
        Some(document) => sqlx::query(
            "INSERT INTO promise_objects (kind, id, document) VALUES ($1, $2, $3)
             ON CONFLICT (kind, id) DO UPDATE SET document = excluded.document",
        )
        .bind(kind)
        .bind(id)
        .bind(document),
        None => sqlx::query("DELETE FROM promise_objects WHERE kind = $1 AND id = $2")
            .bind(kind)
            .bind(id),
    }
    .execute(&mut *conn)
    .await
    .map_err(map_err)?;
    Ok(true)
}
