//! Reading every lease at start-up, SQLite's way: in chunks of documents joined into one value,
//! decoded on blocking threads while the next chunk is read.

use crate::error::map_err;
use berth_core::model::lease::Lease;
use berth_store::StoreError;
use berth_store::codec::decode_lease;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use std::sync::Arc;

/// Leases read per query while loading: about half a megabyte of documents (larger chunks
/// measured no faster and made the allocator return and fault in more memory).
const LOAD_CHUNK_ROWS: i64 = 500;

/// Chunks decoded at once (each on a blocking thread) while the next one is read.
const LOAD_CHUNKS_DECODING: usize = 3;

/// Reads every lease, [`LOAD_CHUNK_ROWS`] at a time in rowid order (all within the caller's
/// transaction, so one snapshot). Each chunk comes back as one value, its documents joined by
/// the ASCII record separator (which no JSON text contains unescaped), so that a chunk crosses
/// from the driver's thread in one hand-over instead of row by row. Chunks are decoded on
/// blocking threads while the next ones are read.
#[tracing::instrument(skip_all)]
pub(crate) async fn load_leases(
    conn: &mut SqliteConnection,
) -> Result<Vec<Arc<Lease>>, StoreError> {
    let mut leases = Vec::new();
    let mut decoding = std::collections::VecDeque::new();
    let mut after: i64 = 0;
    loop {
        let chunk = sqlx::query(
            "SELECT group_concat(document, char(30)), max(rowid) FROM
             (SELECT rowid, document FROM leases WHERE rowid > ? ORDER BY rowid LIMIT ?)",
        )
        .bind(after)
        .bind(LOAD_CHUNK_ROWS)
        .fetch_one(&mut *conn)
        .await
        .map_err(map_err)?;
        let Some(last) = chunk.try_get::<Option<i64>, _>(1).map_err(map_err)? else {
            break;
        };
        after = last;
        decoding.push_back(tokio::task::spawn_blocking(move || decode_chunk(&chunk)));
        if decoding.len() >= LOAD_CHUNKS_DECODING
            && let Some(handle) = decoding.pop_front()
        {
            leases.extend(decoded(handle).await?);
        }
    }
    for handle in decoding {
        leases.extend(decoded(handle).await?);
    }
    Ok(leases)
}

/// The leases of one chunk of documents.
fn decode_chunk(chunk: &SqliteRow) -> Result<Vec<Arc<Lease>>, StoreError> {
    let documents: &str = chunk.try_get(0).map_err(map_err)?;
    documents
        .split('\u{1e}')
        .map(|document| decode_lease(document).map(Arc::new))
        .collect()
}

/// The outcome of a chunk's decoding.
async fn decoded(
    handle: tokio::task::JoinHandle<Result<Vec<Arc<Lease>>, StoreError>>,
) -> Result<Vec<Arc<Lease>>, StoreError> {
    handle
        .await
        .expect("invariant: decoding a chunk of leases does not panic")
}
