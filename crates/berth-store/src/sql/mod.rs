//! The SQL adapters' shared code (feature `sql`): what each [`Change`] persists as, how the
//! catalog and the lifecycle record are read back and decoded, and the catalog sequence, written
//! once over a [`SqlBackend`].
//!
//! An adapter implements [`SqlBackend`] for its store type and gets [`Store`] from the blanket
//! impl here. It supplies only what differs between databases: the pool and its settings, the
//! writer lock and the read snapshot, migrations, how uuids are stored, how errors map, the
//! fastest way to read every lease, and the text of each statement ([`Statements`]). No SQL text
//! lives here.

mod backend;
mod catalog;
mod document;
pub mod driver;
mod idempotency;
mod lease;
mod log;
mod statements;
mod usage;

use backend::execute;
pub use backend::{Conn, SqlBackend};
pub use statements::{ChangeLogWrites, CommitWrites, Statements};

use crate::codec::encode_instant;
use crate::port::{CommitFeed, Store, StoreError, Tail, WriteTx};
use async_trait::async_trait;
use berth_core::LeaseId;
use berth_core::catalog::CatalogRows;
use berth_core::model::consumer::Consumer;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use berth_core::model::lease::LeaseRecord;
use berth_core::model::ledger::Window;
use berth_core::model::provider::ProviderRow;
use berth_core::model::usage::UsageSegment;
use berth_core::{Change, Instant};
use std::collections::HashMap;
use uuid::Uuid;

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

    async fn changes_after(&self, seq: u64, limit: usize) -> Result<Tail, StoreError> {
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        log::after::<B>(&mut conn, seq, limit).await
    }

    fn keeps_change_log(&self) -> bool {
        B::SQL.commit.log().is_some()
    }

    async fn change_log_bounds(&self) -> Result<(u64, u64), StoreError> {
        if B::SQL.commit.log().is_none() {
            return Ok((0, 0));
        }
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        Ok((
            log::oldest::<B>(&mut conn).await?,
            self.change_log_retained(),
        ))
    }

    async fn listen(&self) -> Result<Option<Box<dyn CommitFeed>>, StoreError> {
        SqlBackend::listen(self).await
    }

    async fn writer_term(
        &self,
        bid: Option<crate::port::WriterBid<'_>>,
        term: std::time::Duration,
    ) -> Result<Option<crate::port::WriterTerm>, StoreError> {
        SqlBackend::writer_term(self, bid, term).await
    }

    async fn idempotency_record(
        &self,
        key: &IdempotencyKey,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        let found = idempotency::read::<B>(&mut conn, &[key]).await?;
        Ok(found.into_iter().next().map(|(_, record)| record))
    }

    async fn usage_segments(
        &self,
        period: Window,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<UsageSegment>, StoreError> {
        let mut conn = self.pool().acquire().await.map_err(B::map_err)?;
        usage::overlapping::<B>(&mut conn, period, seq, limit).await
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let (tx, seq) = self.begin_locked().await?;
        Ok(Box::new(SqlTx::<B> {
            tx,
            seq,
            entry: log::Entry::default(),
            retained: self.change_log_retained(),
        }))
    }

    async fn lease_records(&self, lease: LeaseId) -> Result<Vec<LeaseRecord>, StoreError> {
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
    tx: B::Locked,
    /// The catalog sequence as taking the lock read it, if it did.
    seq: Option<u64>,
    /// The replication log's entry for what this transaction persists.
    entry: log::Entry,
    /// How many commits the log keeps.
    retained: u64,
}

#[async_trait]
impl<B: SqlBackend> WriteTx for SqlTx<B> {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        match self.seq {
            Some(seq) => Ok(seq),
            None => catalog::seq::<B>(&mut self.tx).await,
        }
    }

    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        catalog::load::<B>(&mut self.tx).await
    }

    async fn changes_after(&mut self, seq: u64, limit: usize) -> Result<Tail, StoreError> {
        log::after::<B>(&mut self.tx, seq, limit).await
    }

    async fn idempotency_records(
        &mut self,
        keys: &[&IdempotencyKey],
    ) -> Result<Vec<(IdempotencyKey, IdempotencyRecord)>, StoreError> {
        idempotency::read::<B>(&mut self.tx, keys).await
    }

    async fn prune_idempotency(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        idempotency::prune::<B>(&mut self.tx, before, limit).await
    }

    async fn record_usage(&mut self, segments: &[UsageSegment]) -> Result<(), StoreError> {
        // The writers' lock is held: this transaction's commit takes the next sequence.
        let seq = self.catalog_seq().await? + 1;
        usage::record::<B>(&mut self.tx, seq, segments).await
    }

    async fn prune_usage(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        // Through the `until` index, those that ended first first.
        backend::prune_before::<B>(&mut self.tx, B::SQL.usage_prune, before, limit).await
    }

    async fn persist(&mut self, changes: &[Change], now: Instant) -> Result<(), StoreError> {
        // Leases and their records go last, together: no other change writes their tables.
        // Providers' updates and consumers wait, together, for the next change that is not a
        // lease's, a provider's update or a consumer's (one that creates or deletes a provider
        // may depend on the allocations, by foreign key, or be what an update updates).
        let mut leases = Latest::default();
        let mut records = Vec::new();
        let mut providers = Vec::new();
        let mut consumers = Latest::default();
        for change in changes {
            match change {
                Change::LeaseSet {
                    id,
                    lease: Some(lease),
                } => leases.set(*id, &**lease),
                Change::LeaseSet { id, lease: None } => {
                    leases.forget(*id);
                    catalog::persist::<B>(&mut self.tx, change, now).await?;
                }
                Change::LeaseRecorded(record) => records.push(record),
                Change::ConsumerSet { uuid, consumer } => consumers.set(*uuid, consumer.as_ref()),
                Change::ProviderUpdated(row) => providers.push(row),
                _ => {
                    let providers = std::mem::take(&mut providers);
                    write_rows::<B>(&mut self.tx, providers, consumers.take(), now).await?;
                    catalog::persist::<B>(&mut self.tx, change, now).await?;
                }
            }
        }
        write_rows::<B>(&mut self.tx, providers, consumers.take(), now).await?;
        let leases = leases.take();
        if !B::write_leases(&mut self.tx, &leases, &records).await? {
            for (id, lease) in leases {
                lease::set_lease::<B>(&mut self.tx, id, Some(lease)).await?;
            }
            for record in records {
                lease::append_record::<B>(&mut self.tx, record).await?;
            }
        }
        if B::SQL.commit.log().is_some() {
            self.entry.extend(changes, now);
        }
        Ok(())
    }

    async fn commit(self: Box<Self>) -> Result<u64, StoreError> {
        Ok(self.commit_logged().await?.0)
    }

    async fn commit_logged(self: Box<Self>) -> Result<(u64, Option<String>), StoreError> {
        let SqlTx {
            mut tx,
            entry,
            retained,
            ..
        } = *self;
        let (seq, logged) = match &B::SQL.commit {
            CommitWrites::Logged(writes) => {
                let (seq, text) = entry.append::<B>(&mut tx, writes, retained).await?;
                (seq, Some(text))
            }
            CommitWrites::Unlogged { bump_seq } => {
                (catalog::bump_seq::<B>(&mut tx, bump_seq).await?, None)
            }
        };
        B::commit_locked(tx).await?;
        Ok((seq, logged))
    }
}

/// Writes providers' new states, then consumers', in as few statements as the backend can.
async fn write_rows<B: SqlBackend>(
    conn: &mut Conn<B>,
    providers: Vec<&ProviderRow>,
    consumers: Vec<(Uuid, Option<&Consumer>)>,
    now: Instant,
) -> Result<(), StoreError> {
    if providers.is_empty() && consumers.is_empty() {
        return Ok(());
    }
    let now = encode_instant(now);
    if B::write_rows(conn, &providers, &consumers, now).await? {
        return Ok(());
    }
    for row in providers {
        catalog::update_provider::<B>(conn, row).await?;
    }
    for (uuid, consumer) in consumers {
        catalog::set_consumer::<B>(conn, uuid, consumer, now).await?;
    }
    Ok(())
}

/// The last of the values a batch gives each key, in the order the keys first appear.
struct Latest<K, V> {
    values: Vec<(K, V)>,
    /// Where each key's value is in `values`.
    at: HashMap<K, usize>,
}

impl<K, V> Default for Latest<K, V> {
    fn default() -> Self {
        Latest {
            values: Vec::new(),
            at: HashMap::new(),
        }
    }
}

impl<K: Copy + Eq + std::hash::Hash, V> Latest<K, V> {
    /// `key`'s new value, replacing one given earlier.
    fn set(&mut self, key: K, value: V) {
        match self.at.get(&key) {
            Some(&i) => self.values[i].1 = value,
            None => {
                self.at.insert(key, self.values.len());
                self.values.push((key, value));
            }
        }
    }

    /// Drops the value given to `key`, if any.
    fn forget(&mut self, key: K) {
        if self.at.remove(&key).is_some() {
            self.values.retain(|(held, _)| *held != key);
            self.at = self
                .values
                .iter()
                .enumerate()
                .map(|(i, (held, _))| (*held, i))
                .collect();
        }
    }

    /// Every key's last value, leaving none.
    fn take(&mut self) -> Vec<(K, V)> {
        self.at.clear();
        std::mem::take(&mut self.values)
    }
}
