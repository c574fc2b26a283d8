//! The simulated store: berth's in-memory reference store as the disk, with a process that can
//! crash at a chosen boundary of a commit, and (for the negative controls) a disk that loses what
//! was not synced or a recovery that drops the last commit.

use async_trait::async_trait;
use berth_core::catalog::CatalogRows;
use berth_core::model::idempotency::{IdempotencyKey, IdempotencyRecord};
use berth_core::model::lease::LeaseRecord;
use berth_core::model::ledger::Window;
use berth_core::model::usage::UsageSegment;
use berth_core::{Change, Instant, LeaseId};
use berth_store::{CommitFeed, MemStore, Store, StoreError, Tail, WriteTx};
use std::sync::{Arc, Mutex};

/// Where in a commit the simulated process dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// Before the write transaction begins: nothing reaches the disk.
    BeforeWrite,
    /// After the changes are written, before they are synced: the commit is lost.
    BeforeSync,
    /// After the commit is synced, before anyone hears of it: the commit stays, unanswered.
    BeforeAnswer,
}

impl Boundary {
    /// Every boundary, in commit order.
    pub const ALL: [Boundary; 3] = [
        Boundary::BeforeWrite,
        Boundary::BeforeSync,
        Boundary::BeforeAnswer,
    ];
}

/// How the simulated disk keeps commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every commit is synced before it is answered (SQLite `synchronous=FULL`, PostgreSQL).
    Synced,
    /// A commit is answered before it is synced; the disk syncs every few commits and a crash
    /// loses the rest (SQLite `synchronous=OFF` under a power cut). A negative control: the
    /// checker must find acknowledged writes lost.
    Unsynced,
}

/// A defect planted in the store for a negative control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreDefect {
    /// Recovery drops the last commit (a torn tail). The checker must find it.
    LoseLastCommitOnRecovery,
}

/// Commits between two syncs of an [`Durability::Unsynced`] disk.
const SYNC_EVERY: u64 = 4;

#[derive(Debug)]
struct Disk {
    /// What the process sees: every commit it made.
    live: MemStore,
    /// What survives a crash (`Unsynced`), or nothing to keep apart (`Synced`).
    synced: Option<MemStore>,
    /// What the disk held before the last commit (for the torn-tail defect).
    before_last: Option<MemStore>,
    commits: u64,
    /// The commit at which the process dies, and where.
    crash_at: Option<(u64, Boundary)>,
    /// The process died: every call fails until [`SimStore::recover`].
    crashed: bool,
}

/// The simulated store, shared by the simulator and the service it drives.
#[derive(Debug, Clone)]
pub struct SimStore {
    disk: Arc<Mutex<Disk>>,
    durability: Durability,
    defect: Option<StoreDefect>,
}

fn crashed() -> StoreError {
    StoreError::Backend("the simulated process crashed".into())
}

impl SimStore {
    /// An empty disk.
    pub fn new(durability: Durability, defect: Option<StoreDefect>) -> SimStore {
        SimStore {
            disk: Arc::new(Mutex::new(Disk {
                live: MemStore::new(),
                synced: (durability == Durability::Unsynced).then(MemStore::new),
                before_last: None,
                commits: 0,
                crash_at: None,
                crashed: false,
            })),
            durability,
            defect,
        }
    }

    fn disk(&self) -> std::sync::MutexGuard<'_, Disk> {
        self.disk
            .lock()
            .expect("invariant: the disk lock is never poisoned")
    }

    /// The live store, unless the process has crashed.
    fn live(&self) -> Result<MemStore, StoreError> {
        let disk = self.disk();
        match disk.crashed {
            true => Err(crashed()),
            false => Ok(disk.live.clone()),
        }
    }

    /// Makes the process die at the `commits_from_now`-th next commit (1: the next one), at
    /// `boundary`.
    pub fn crash_at(&self, commits_from_now: u64, boundary: Boundary) {
        let mut disk = self.disk();
        let at = disk.commits + commits_from_now.max(1);
        disk.crash_at = Some((at, boundary));
    }

    /// Whether the process has crashed.
    pub fn has_crashed(&self) -> bool {
        self.disk().crashed
    }

    /// Makes the process die now, wherever it stands.
    pub fn crash(&self) {
        self.disk().crashed = true;
    }

    /// Restarts after a crash: what the disk kept becomes what the process sees.
    pub async fn recover(&self) {
        let (synced, torn) = {
            let mut disk = self.disk();
            disk.crash_at = None;
            (disk.synced.clone(), disk.before_last.take())
        };
        let kept = match (self.defect, torn, synced) {
            (Some(StoreDefect::LoseLastCommitOnRecovery), Some(before), _) => Some(before),
            (_, _, Some(synced)) => Some(synced.snapshot().await),
            _ => None,
        };
        let mut disk = self.disk();
        if let Some(kept) = kept {
            disk.live = kept;
        }
        disk.crashed = false;
    }

    /// What the disk holds, read directly (the simulator's view, never failing).
    pub async fn rows(&self) -> CatalogRows {
        let live = self.disk().live.clone();
        live.load_catalog()
            .await
            .expect("invariant: the memory store reads")
    }

    /// Decides what happens at commit `n` when it reaches `boundary`: `Err` when the process
    /// dies there.
    fn reached(&self, n: u64, boundary: Boundary) -> Result<(), StoreError> {
        let mut disk = self.disk();
        if disk.crashed {
            return Err(crashed());
        }
        if disk.crash_at == Some((n, boundary)) {
            disk.crashed = true;
            return Err(crashed());
        }
        Ok(())
    }
}

#[async_trait]
impl Store for SimStore {
    fn backend(&self) -> &'static str {
        "simulated"
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.live().map(|_| ())
    }

    async fn catalog_seq(&self) -> Result<u64, StoreError> {
        self.live()?.catalog_seq().await
    }

    async fn load_catalog(&self) -> Result<CatalogRows, StoreError> {
        self.live()?.load_catalog().await
    }

    async fn changes_after(&self, seq: u64, limit: usize) -> Result<Tail, StoreError> {
        self.live()?.changes_after(seq, limit).await
    }

    async fn change_log_bounds(&self) -> Result<(u64, u64), StoreError> {
        self.live()?.change_log_bounds().await
    }

    async fn listen(&self) -> Result<Option<Box<dyn CommitFeed>>, StoreError> {
        Ok(None)
    }

    async fn idempotency_record(
        &self,
        key: &IdempotencyKey,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.live()?.idempotency_record(key).await
    }

    async fn usage_segments(
        &self,
        period: Window,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<UsageSegment>, StoreError> {
        self.live()?.usage_segments(period, seq, limit).await
    }

    async fn begin_write(&self) -> Result<Box<dyn WriteTx>, StoreError> {
        let n = self.disk().commits + 1;
        self.reached(n, Boundary::BeforeWrite)?;
        let live = self.live()?;
        let before = match self.defect {
            Some(StoreDefect::LoseLastCommitOnRecovery) => Some(live.snapshot().await),
            None => None,
        };
        let inner = live.begin_write().await?;
        Ok(Box::new(SimTx {
            store: self.clone(),
            inner,
            n,
            before,
        }))
    }

    async fn lease_records(&self, lease: LeaseId) -> Result<Vec<LeaseRecord>, StoreError> {
        self.live()?.lease_records(lease).await
    }

    async fn records_after(
        &self,
        seq: u64,
        limit: usize,
    ) -> Result<Vec<(u64, LeaseRecord)>, StoreError> {
        self.live()?.records_after(seq, limit).await
    }
}

/// A write transaction of the simulated process.
struct SimTx {
    store: SimStore,
    inner: Box<dyn WriteTx>,
    /// Which commit this is.
    n: u64,
    /// The disk before it (for the torn-tail defect).
    before: Option<MemStore>,
}

#[async_trait]
impl WriteTx for SimTx {
    async fn catalog_seq(&mut self) -> Result<u64, StoreError> {
        self.inner.catalog_seq().await
    }

    async fn load_catalog(&mut self) -> Result<CatalogRows, StoreError> {
        self.inner.load_catalog().await
    }

    async fn changes_after(&mut self, seq: u64, limit: usize) -> Result<Tail, StoreError> {
        self.inner.changes_after(seq, limit).await
    }

    async fn idempotency_records(
        &mut self,
        keys: &[&IdempotencyKey],
    ) -> Result<Vec<(IdempotencyKey, IdempotencyRecord)>, StoreError> {
        self.inner.idempotency_records(keys).await
    }

    async fn prune_idempotency(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        self.inner.prune_idempotency(before, limit).await
    }

    async fn record_usage(&mut self, segments: &[UsageSegment]) -> Result<(), StoreError> {
        self.inner.record_usage(segments).await
    }

    async fn prune_usage(&mut self, before: Instant, limit: usize) -> Result<(), StoreError> {
        self.inner.prune_usage(before, limit).await
    }

    async fn persist(&mut self, changes: &[Change], now: Instant) -> Result<(), StoreError> {
        self.inner.persist(changes, now).await
    }

    async fn commit(self: Box<Self>) -> Result<u64, StoreError> {
        let SimTx {
            store,
            inner,
            n,
            before,
        } = *self;
        // Dropping the inner transaction rolls it back: written, never synced.
        store.reached(n, Boundary::BeforeSync)?;
        let seq = inner.commit().await?;
        let synced = {
            let mut disk = store.disk();
            disk.commits = n;
            disk.before_last = before;
            (store.durability == Durability::Unsynced && n % SYNC_EVERY == 0)
                .then(|| disk.live.clone())
        };
        if let Some(live) = synced {
            let copy = live.snapshot().await;
            store.disk().synced = Some(copy);
        }
        store.reached(n, Boundary::BeforeAnswer)?;
        Ok(seq)
    }
}
