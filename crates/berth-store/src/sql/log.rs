//! The replication log (`change_log`): each commit's changes as one entry keyed by the catalog
//! sequence it committed as, written in the commit's own transaction, read back by replicas that
//! are behind, pruned beyond the retained count; and, where the database carries them, the
//! announcements of each commit to the other replicas.

use super::backend::{Conn, SqlBackend, execute, fetch_all, fetch_one};
use super::driver::{Args as _, Columns as _};
use super::statements::ChangeLogWrites;
use crate::codec::{decode_tail, decode_u64, encode_bound, encode_instant};
use crate::port::{StoreError, Tail};
use berth_core::{CHANGE_FORMAT, Change, Instant};

/// Prune the log every this many commits (and not on the others).
const PRUNE_EVERY: u64 = 64;

/// The entry a transaction will append at its commit: its changes, encoded as they are persisted.
#[derive(Debug)]
pub(super) struct Entry {
    /// The JSON array's text so far, without its closing bracket.
    text: String,
    /// When the changes were persisted (the latest `now`).
    at: Instant,
}

impl Default for Entry {
    fn default() -> Entry {
        Entry {
            text: String::new(),
            at: Instant::EPOCH,
        }
    }
}

impl Entry {
    /// Adds `changes`, in order, persisted at `now`.
    pub(super) fn extend(&mut self, changes: &[Change], now: Instant) {
        for change in changes {
            self.text.push(if self.text.is_empty() { '[' } else { ',' });
            let encoded =
                serde_json::to_string(change).expect("invariant: changes always encode as JSON");
            self.text.push_str(&encoded);
        }
        self.at = self.at.max(now);
    }

    /// Takes the next catalog sequence (announcing it) and appends the entry as the log's
    /// entry of it, prunes what the log no longer retains, and returns the sequence and the
    /// entry's changes as appended.
    #[tracing::instrument(skip_all)]
    pub(super) async fn append<B: SqlBackend>(
        mut self,
        conn: &mut Conn<B>,
        writes: &ChangeLogWrites,
        retained: u64,
    ) -> Result<(u64, String), StoreError> {
        match self.text.is_empty() {
            true => self.text.push_str("[]"),
            false => self.text.push(']'),
        }
        let query = sqlx::query(writes.append)
            .arg(i64::from(CHANGE_FORMAT))
            .arg(self.text.as_str())
            .arg(encode_instant(self.at));
        let seq = decode_u64(fetch_one::<B>(conn, query).await?.column("catalog_seq")?)?;
        if seq.is_multiple_of(PRUNE_EVERY) && seq > retained {
            let query = sqlx::query(writes.prune).arg(encode_bound(seq - retained));
            execute::<B>(conn, query).await?;
        }
        Ok((seq, self.text))
    }
}

/// At most `limit` entries after `seq`, as the tail that brings a catalog at `seq` forward.
#[tracing::instrument(skip_all)]
pub(super) async fn after<B: SqlBackend>(
    conn: &mut Conn<B>,
    seq: u64,
    limit: usize,
) -> Result<Tail, StoreError> {
    let query = sqlx::query(B::SQL.changes_after)
        .arg(encode_bound(seq))
        .arg(encode_bound(limit));
    let rows = fetch_all::<B>(conn, query)
        .await?
        .iter()
        .map(|row| {
            let seq = decode_u64(row.column("seq")?)?;
            Ok((seq, row.column("format")?, row.column("changes")?))
        })
        .collect::<Result<Vec<(u64, i64, String)>, StoreError>>()?;
    Ok(decode_tail(seq, rows))
}

/// The oldest sequence the log holds, 0 when it holds none.
#[tracing::instrument(skip_all)]
pub(super) async fn oldest<B: SqlBackend>(conn: &mut Conn<B>) -> Result<u64, StoreError> {
    let row = fetch_one::<B>(conn, sqlx::query(B::SQL.oldest_change)).await?;
    decode_u64(row.column("seq")?)
}
