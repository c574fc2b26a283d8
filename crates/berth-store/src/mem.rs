//! The in-memory reference store: a catalog and the lifecycle record behind a mutex. Used by
//! application tests and as the reference the conformance suite holds the SQL adapters to.

use crate::codec::{decode_tail, encode_changes};
use crate::port::{CHANGE_LOG_RETAINED, Store, StoreError, Tail, WriteTx};
use async_trait::async_trait;
use berth_core::LeaseId;
use berth_core::catalog::CatalogRows;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use berth_core::model::lease::{FloatingIp, LeaseRecord};
use berth_core::model::ledger::Window;
use berth_core::model::usage::UsageSegment;
use berth_core::{CHANGE_FORMAT, Catalog, Change, Instant};
use std::sync::Arc;
use tokio::sync::{Mutex, OwnedMutexGuard};
use uuid::Uuid;

/// A store that keeps everything in memory and loses it on drop.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    state: Arc<Mutex<MemState>>,
}

/// What the store holds: the catalog, the lifecycle record (entry `i` has sequence `i + 1`), the
/// idempotency records and the replication log (each commit's sequence with its changes encoded
/// as the SQL stores encode them, the latest [`CHANGE_LOG_RETAINED`]).
#[derive(Debug, Default)]
struct MemState {
    catalog: Catalog,
    records: Vec<LeaseRecord>,
    keys: Keys,
    log: std::collections::VecDeque<(u64, String)>,
    /// How many commits the log keeps (0 is taken as [`CHANGE_LOG_RETAINED`]).
    retained: u64,
    /// The usage history, in the order it was written, each segment with its commit's
    /// sequence.
    usage: Vec<(u64, UsageSegment)>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore {
            state: Arc::new(Mutex::new(MemState {
                catalog: Catalog::new(),
                records: Vec::new(),
                keys: Keys::default(),
                log: std::collections::VecDeque::new(),
                retained: CHANGE_LOG_RETAINED,
                usage: Vec::new(),
            })),
        }
    }

    /// An independent store holding what this one holds now (for a simulated disk: what was
    /// synced when it was taken).
    pub async fn snapshot(&self) -> MemStore {
        let state = self.state.lock().await;
        MemStore {
            state: Arc::new(Mutex::new(MemState {
                catalog: state.catalog.clone(),
                records: state.records.clone(),
                keys: state.keys.clone(),
                log: state.log.clone(),
                retained: state.retained,
                usage: state.usage.clone(),
            })),
        }
    }

    /// An empty store whose replication log keeps `retained` commits (at least 1).
    pub fn with_change_log_retained(retained: u64) -> MemStore {
        let store = MemStore::new();
        store
            .state
            .try_lock()
            .expect("invariant: a new store is not shared yet")
            .retained = retained.max(1);
        store
    }
}

#[async_trait]
impl Store for MemStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn catalog_seq(&self) -> Result<u64, StoreError> {
        Ok(self.state.lock().await.catalog.seq())
    }

    async fn load_catalog(&self) -> Result<CatalogRows, StoreError> {
        Ok(self.state.lock().await.catalog.to_rows())
    }

    async fn changes_after(&self, seq: u64, limit: usize) -> Result<Tail, StoreError> {
        Ok(self.state.lock().await.tail(seq, limit))
    }

    async fn change_log_bounds(&self) -> Result<(u64, u64), StoreError> {
        let state = self.state.lock().await;
        let oldest = state.log.front().map_or(0, |(seq, _)| *seq);
        Ok((oldest, state.retained()))
    }

    async fn idempotency_record(
        &self,
        key: &IdempotencyKey,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        Ok(self.state.lock().await.keys.by_key.get(key).cloned())
    }

    async fn usage_segments(
        &self,
        period: Window,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<UsageSegment>, StoreError> {
        let state = self.state.lock().await;
        Ok(state
            .usage
            .iter()
            .filter(|(at, s)| *at <= seq && s.within(period).is_some())
            .take(limit)
            .map(|(_, s)| s.clone())
            .collect())
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let guard = Arc::clone(&self.state).lock_owned().await;
        let draft = guard.catalog.clone();
        let keys = guard.keys.clone();
        Ok(Box::new(MemTx {
            guard,
            draft,
            keys,
            recorded: Vec::new(),
            persisted: Vec::new(),
            usage: Vec::new(),
            usage_prunes: Vec::new(),
        }))
    }

    async fn lease_records(&self, lease: LeaseId) -> Result<Vec<LeaseRecord>, StoreError> {
        let state = self.state.lock().await;
        Ok(state
            .records
            .iter()
            .filter(|record| record.lease_id == lease)
            .cloned()
            .collect())
    }

    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
        let state = self.state.lock().await;
        let skip = usize::try_from(seq).unwrap_or(usize::MAX);
        Ok(state
            .records
            .iter()
            .enumerate()
            .skip(skip)
            .take(limit)
            .map(|(index, record)| (record_seq(index), record.clone()))
            .collect())
    }
}

impl MemState {
    /// How many commits the log keeps.
    fn retained(&self) -> u64 {
        match self.retained {
            0 => CHANGE_LOG_RETAINED,
            n => n,
        }
    }

    /// The log after `seq`, at most `limit` entries.
    fn tail(&self, seq: u64, limit: usize) -> Tail {
        let rows = self
            .log
            .iter()
            .filter(|(entry, _)| *entry > seq)
            .take(limit)
            .map(|(entry, text)| (*entry, i64::from(CHANGE_FORMAT), text.clone()));
        decode_tail(seq, rows)
    }
}

/// The idempotency records, by key and by age (persistent maps: a transaction's draft is a
/// cheap copy).
#[derive(Debug, Clone, Default)]
struct Keys {
    by_key: imbl::OrdMap<IdempotencyKey, IdempotencyRecord>,
    by_age: imbl::OrdSet<(Instant, IdempotencyKey)>,
}

impl Keys {
    fn set(&mut self, key: &IdempotencyKey, record: Option<&IdempotencyRecord>) {
        if let Some(old) = self.by_key.remove(key) {
            self.by_age.remove(&(old.created_at, key.clone()));
        }
        if let Some(record) = record {
            self.by_age.insert((record.created_at, key.clone()));
            self.by_key.insert(key.clone(), record.clone());
        }
    }

    fn prune(&mut self, before: Instant, limit: usize) {
        let expired: Vec<IdempotencyKey> = self
            .by_age
            .iter()
            .take_while(|(at, _)| *at < before)
            .take(limit)
            .map(|(_, key)| key.clone())
            .collect();
        for key in &expired {
            self.set(key, None);
        }
    }
}

/// The sequence number of the record entry at `index`.
fn record_seq(index: usize) -> u64 {
    u64::try_from(index).expect("invariant: a record index fits in u64") + 1
}

/// Refuses a floating IP whose address another registered one has, as the SQL stores'
/// `floating_ips_address_key` constraint does.
fn check_address_free(catalog: &Catalog, id: Uuid, fip: &FloatingIp) -> Result<(), StoreError> {
    let taken = catalog.floating_ips().any(|other| {
        other.id != id && other.network_id == fip.network_id && other.address == fip.address
    });
    if taken {
        return Err(StoreError::Conflict {
            constraint: "floating_ips_address_key".to_owned(),
        });
    }
    Ok(())
}

/// Deletes from `history` at most `limit` segments that ended before `before`, those that
/// ended first first.
fn prune_usage(history: &mut Vec<(u64, UsageSegment)>, before: Instant, limit: usize) {
    let mut ended: Vec<Instant> = history
        .iter()
        .filter_map(|(_, s)| s.until.filter(|until| *until < before))
        .collect();
    if ended.len() > limit {
        ended.select_nth_unstable(limit);
        ended.truncate(limit);
    }
    // Ties at the last instant kept: drop the earlier ends, then as many of the last as fit.
    let Some(&last) = ended.iter().max() else {
        return;
    };
    let mut at_last = ended.iter().filter(|at| **at == last).count();
    history.retain(|(_, s)| match s.until {
        Some(until) if until < last => false,
        Some(until) if until == last && at_last > 0 => {
            at_last -= 1;
            false
        }
        _ => true,
    });
}

struct MemTx {
    guard: OwnedMutexGuard<MemState>,
    draft: Catalog,
    /// The idempotency records as this transaction leaves them.
    keys: Keys,
    /// Record entries appended by this transaction, not yet committed.
    recorded: Vec<LeaseRecord>,
    /// Every change persisted, for the replication log.
    persisted: Vec<Change>,
    /// The usage segments this transaction adds, at its commit.
    usage: Vec<UsageSegment>,
    /// The usage prunes this transaction asks, `(before, limit)`, applied at its commit.
    usage_prunes: Vec<(Instant, usize)>,
}

#[async_trait]
impl WriteTx for MemTx {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        Ok(self.guard.catalog.seq())
    }

    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        Ok(self.draft.to_rows())
    }

    async fn record_usage(&mut self, segments: &[UsageSegment]) -> Result<(), StoreError> {
        self.usage.extend_from_slice(segments);
        Ok(())
    }

    async fn prune_usage(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        self.usage_prunes.push((before, limit));
        Ok(())
    }

    async fn persist(&mut self, changes: &[Change], _now: Instant) -> Result<(), StoreError> {
        for change in changes {
            match change {
                Change::FloatingIpSet { id, fip: Some(fip) } => {
                    check_address_free(&self.draft, *id, fip)?;
                }
                Change::LeaseRecorded(record) => self.recorded.push(record.clone()),
                Change::IdempotencySet { key, record } => self.keys.set(key, record.as_deref()),
                _ => {}
            }
            self.draft.apply(std::slice::from_ref(change));
        }
        self.persisted.extend_from_slice(changes);
        Ok(())
    }

    async fn changes_after(&mut self, seq: u64, limit: usize) -> Result<Tail, StoreError> {
        Ok(self.guard.tail(seq, limit))
    }

    async fn idempotency_records(
        &mut self,
        keys: &[&IdempotencyKey],
    ) -> Result<Vec<(IdempotencyKey, IdempotencyRecord)>, StoreError> {
        Ok(keys
            .iter()
            .filter_map(|key| {
                let record = self.keys.by_key.get(*key)?;
                Some(((*key).clone(), record.clone()))
            })
            .collect())
    }

    async fn prune_idempotency(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        self.keys.prune(before, limit);
        Ok(())
    }

    async fn commit(self: Box<Self>) -> Result<u64, StoreError> {
        let MemTx {
            mut guard,
            mut draft,
            keys,
            recorded,
            persisted,
            usage,
            usage_prunes,
        } = *self;
        guard.keys = keys;
        let seq = guard.catalog.seq() + 1;
        guard.usage.extend(usage.into_iter().map(|s| (seq, s)));
        for (before, limit) in usage_prunes {
            prune_usage(&mut guard.usage, before, limit);
        }
        draft.set_seq(seq);
        guard.catalog = draft;
        guard.records.extend(recorded);
        guard.log.push_back((seq, encode_changes(&persisted)));
        let retained = usize::try_from(guard.retained()).unwrap_or(usize::MAX);
        while guard.log.len() > retained {
            guard.log.pop_front();
        }
        Ok(seq)
    }
}

#[cfg(all(test, feature = "testkit"))]
mod tests {
    #[tokio::test]
    async fn mem_store_conforms() {
        crate::testkit::run_all(|| async { super::MemStore::new() }).await;
    }

    #[tokio::test]
    async fn mem_change_log_keeps_the_retained_commits() {
        let store = super::MemStore::with_change_log_retained(5);
        crate::testkit::change_log_prunes(&store, 5).await;
    }
}
