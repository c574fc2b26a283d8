//! The service type and its one write path: the writer lock, the queue of decisions, the group
//! commit, and the two catalogs (the writers' working copy and the readers').

use crate::deadline::Deadline;
use crate::error::AppError;
use berth_core::decide::budget;
use berth_core::decide::lease::stamp_idle_release;
use berth_core::limits::{IDEMPOTENCY_PRUNE_MAX, USAGE_PRUNE_MIN, USAGE_RETENTION_DAYS};
use berth_core::model::idempotency::{IDEMPOTENCY_TTL, IdempotencyKey, IdempotencyRecord};
use berth_core::model::lease::IdleRelease;
use berth_core::model::usage::UsageSegment;
use berth_core::query::usage;
use berth_core::{Catalog, Change, Instant, Rejection, Span};
use berth_store::{CHANGE_LOG_PAGE, Committed, Store, StoreError, Tail, WriteTx};
use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use tokio::sync::{Mutex, Notify, OwnedMutexGuard, oneshot};
use uuid::Uuid;

/// A duration in microseconds, saturating.
pub(crate) fn micros(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// A standard duration as the core's span (saturating at the longest span).
pub(crate) fn span(duration: std::time::Duration) -> berth_core::Span {
    berth_core::Span::from_micros(micros(duration))
}

/// The source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> Instant;
}

/// The source of new ids.
pub trait IdGen: Send + Sync + 'static {
    /// A new, unique, time-ordered uuid.
    fn uuid(&self) -> Uuid;
}

/// A decision waiting to be made and committed, with the way back to its caller.
struct Pending {
    /// Identifies it in the queue (for withdrawing it at its deadline).
    id: u64,
    /// The idempotency key the decision names: its record, as the store holds it under the
    /// writer lock, is given to the decision.
    key: Option<IdempotencyKey>,
    decide: Decide,
    reply: Reply,
    /// The deadline of the request that made it, if any.
    deadline: Option<Arc<Deadline>>,
}

/// The way back to a decision's caller.
type Reply = oneshot::Sender<Result<Box<dyn Any + Send>, AppError>>;

type Decide = Box<
    dyn FnOnce(
            &Catalog,
            Option<&IdempotencyRecord>,
            Instant,
        ) -> Result<(Vec<Change>, Box<dyn Any + Send>), Rejection>
        + Send,
>;

/// What a batch's decisions made: the accepted ones' changes, the usage history they close and
/// their answers, and the refusals (answered once the batch is settled).
#[derive(Default)]
struct Decided {
    changes: Vec<Change>,
    /// Whether an accepted decision may have freed capacity or loosened a budget: a
    /// waitlisted lease may fit now.
    frees: bool,
    usage: Vec<UsageSegment>,
    accepted: Vec<(Reply, Box<dyn Any + Send>)>,
    refused: Vec<(Reply, Rejection)>,
}

/// The idempotency records of the keys a batch names, as the batch's decisions leave them.
type Records = HashMap<IdempotencyKey, IdempotencyRecord>;

/// The writers' working copy of the catalog.
struct Working {
    catalog: Catalog,
    /// Set while a batch is being applied; a batch cut short leaves it set, and the next writer
    /// reloads from the database before deciding anything.
    dirty: bool,
    /// The decisions the last batch made: how many the next one gathers before it begins.
    last_made: usize,
}

/// The berth service: the catalog, the store behind it, and the injected clock and ids.
pub struct Berth {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGen>,
    /// What readers see: only committed state.
    pub(crate) catalog: Arc<RwLock<Catalog>>,
    /// The writers' copy, ahead of `catalog` only while a batch is being committed.
    writer: Arc<Mutex<Working>>,
    /// Decisions waiting for the next batch.
    queue: Arc<std::sync::Mutex<VecDeque<Pending>>>,
    /// Told each time a decision is queued (a batch that gathers waits for it).
    queued: Arc<Notify>,
    /// How long a batch waits for decisions before it begins (see [`Berth::set_batch_gather`];
    /// zero: it waits for none).
    gather_micros: std::sync::atomic::AtomicU64,
    /// Held by whoever brings the readers' catalog forward from the store, so that concurrent
    /// readers who find it behind read the log once, not once each.
    following: Mutex<()>,
    /// How the readers' catalog has been brought forward (for `/metrics`).
    pub(crate) replication: Arc<Replication>,
    /// Other replicas' latest commits as this one read them, for the writers' copy to catch up
    /// from before its batch takes the database's writer lock.
    recent: Arc<Recent>,
    /// The id of the next queued decision.
    next_pending: std::sync::atomic::AtomicU64,
    /// Wakes the lifecycle engine when a lease changes in this process.
    pub(crate) lifecycle: Notify,
    /// Whether unreserved consumers are kept out of fenced capacity (`true` by default).
    fence_unreserved: std::sync::atomic::AtomicBool,
    /// How long before a lease starts the preemptible consumers in its way are told.
    pub(crate) notice_lead_micros: std::sync::atomic::AtomicI64,
    /// How long node claims hold when a request does not say.
    pub(crate) claim_ttl_micros: std::sync::atomic::AtomicI64,
    /// The release of unconsumed leases put on leases created from now on (off: `None`).
    idle_release: std::sync::Mutex<Option<IdleRelease>>,
    /// Whether another replica holds the writer's term, so that this one's engines leave it
    /// what is due (see [`STANDBY_GRACE`](crate::STANDBY_GRACE)).
    pub(crate) standby: std::sync::atomic::AtomicBool,
    /// This process's commits, encoded as the replication log holds them, for the replicas
    /// that follow it over a link (sent only while one does).
    published: tokio::sync::broadcast::Sender<Arc<Published>>,
    /// The links that bring this replica every commit the writer makes, and what they told of
    /// that it could not apply (see [`Berth::fed_by_link`]).
    pub(crate) linked: Linked,
}

/// What this replica's links to the writer tell its replication task.
#[derive(Debug)]
pub(crate) struct Linked {
    /// How many links bring every commit the writer makes: while one does, the replica does
    /// not listen for the database's announcements of them.
    pub(crate) feeds: tokio::sync::watch::Sender<usize>,
    /// The latest commit a link told of that the readers' catalog could not take as it came
    /// (it was past a gap): the replication task reads the log up to it.
    pub(crate) heard: std::sync::atomic::AtomicU64,
    /// Wakes the replication task for `heard`.
    pub(crate) gap: Notify,
}

impl Default for Linked {
    fn default() -> Linked {
        Linked {
            feeds: tokio::sync::watch::Sender::new(0),
            heard: std::sync::atomic::AtomicU64::new(0),
            gap: Notify::new(),
        }
    }
}

/// One commit of this process as the replication log holds it, for the replicas that follow
/// it over a link: they apply it as they would the log's entry, without reading the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The catalog sequence it committed as.
    pub seq: u64,
    /// The encoding of `changes` ([`berth_core::CHANGE_FORMAT`] when this process wrote it).
    pub format: i64,
    /// The changes, in that encoding.
    pub changes: String,
}

/// How many of this process's commits wait for a slow follower before it misses some (and
/// reads them from the log instead).
pub const PUBLISHED_BACKLOG: usize = 1_024;

impl std::fmt::Debug for Berth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Berth")
            .field("backend", &self.store.backend())
            .finish_non_exhaustive()
    }
}

impl Berth {
    /// Loads the catalog from `store` and returns a ready service.
    pub async fn open(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGen>,
    ) -> Result<Berth, AppError> {
        let rows = store.load_catalog().await?;
        let catalog = Catalog::from_rows(rows);
        let working = Working {
            catalog: catalog.clone(),
            dirty: false,
            last_made: 1,
        };
        Ok(Berth {
            store,
            clock,
            ids,
            catalog: Arc::new(RwLock::new(catalog)),
            writer: Arc::new(Mutex::new(working)),
            queue: Arc::new(std::sync::Mutex::new(VecDeque::new())),
            queued: Arc::new(Notify::new()),
            gather_micros: std::sync::atomic::AtomicU64::new(0),
            following: Mutex::new(()),
            replication: Arc::new(Replication::default()),
            recent: Arc::new(Recent::default()),
            next_pending: std::sync::atomic::AtomicU64::new(0),
            lifecycle: Notify::new(),
            fence_unreserved: std::sync::atomic::AtomicBool::new(true),
            notice_lead_micros: std::sync::atomic::AtomicI64::new(
                berth_core::model::lease::PREEMPTION_NOTICE_DEFAULT.as_micros(),
            ),
            claim_ttl_micros: std::sync::atomic::AtomicI64::new(micros(CLAIM_TTL_DEFAULT)),
            idle_release: std::sync::Mutex::new(None),
            standby: std::sync::atomic::AtomicBool::new(false),
            published: tokio::sync::broadcast::channel(PUBLISHED_BACKLOG).0,
            linked: Linked::default(),
        })
    }

    /// Sets the release of unconsumed leases: a lease created from now on that no consumer has
    /// presented `after` its start is released then, its holder told `notice` before (`None`:
    /// off, the default).
    pub fn set_idle_release(&self, policy: Option<(std::time::Duration, std::time::Duration)>) {
        let policy = policy.map(|(after, notice)| IdleRelease::new(span(after), span(notice)));
        *self
            .idle_release
            .lock()
            .expect("invariant: the policy lock is never poisoned") = policy;
    }

    /// Sets how long a batch may wait, before it begins, for as many decisions to be queued as
    /// the batch before it made (group commit's gather; zero, the default: it waits for none).
    /// Callers that wait for each answer before they write again (a scheduler's workers, a
    /// replica's forwarded writes) come back a little apart; a batch that begins with the first
    /// of them leaves the others the whole of its commit to wait, and commits as often again
    /// for the same writes. A batch after one that made a single decision never waits, so a
    /// lone writer's write is never delayed; a write may be delayed by `gather` at most (and
    /// the runtime timer's millisecond) when fewer writes follow it than the batch before.
    pub fn set_batch_gather(&self, gather: std::time::Duration) {
        let micros = u64::try_from(gather.as_micros()).unwrap_or(u64::MAX);
        self.gather_micros
            .store(micros, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets whether unreserved consumers are kept out of capacity leases hold (the default) or
    /// not (strict Placement behaviour).
    pub fn set_fence_policy(&self, policy: berth_core::query::presentation::FencePolicy) {
        let on = policy == berth_core::query::presentation::FencePolicy::Enforced;
        self.fence_unreserved
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets how long before a lease starts the preemptible consumers it will evict are told
    /// (for leases created from now on).
    pub fn set_preemption_notice(&self, lead: std::time::Duration) {
        self.notice_lead_micros
            .store(micros(lead), std::sync::atomic::Ordering::Relaxed);
    }

    /// How long before a lease starts the preemptible consumers it will evict are told.
    pub(crate) fn notice_lead(&self) -> berth_core::Span {
        berth_core::Span::from_micros(
            self.notice_lead_micros
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Whether unreserved consumers are kept out of capacity leases hold.
    pub fn fence_policy(&self) -> berth_core::query::presentation::FencePolicy {
        match self
            .fence_unreserved
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            true => berth_core::query::presentation::FencePolicy::Enforced,
            false => berth_core::query::presentation::FencePolicy::Off,
        }
    }

    /// The name of the storage backend.
    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// The current time, from the injected clock.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Checks that the database answers.
    pub async fn ready(&self) -> Result<(), AppError> {
        Ok(self.store.ping().await?)
    }

    /// Runs `f` over a current catalog. Another replica's writes become visible here: when the
    /// stored sequence moved past the catalog's, the catalog is reloaded first.
    pub async fn read<R>(&self, f: impl FnOnce(&Catalog) -> R) -> Result<R, AppError> {
        self.refresh().await?;
        Ok(self.read_now(f))
    }

    /// Runs `f` over the catalog as this process last committed or loaded it, without asking the
    /// store whether another replica wrote since: for answering with what a write of this
    /// process has just committed (which is in it).
    pub fn read_local<R>(&self, f: impl FnOnce(&Catalog) -> R) -> R {
        self.read_now(f)
    }

    fn read_now<R>(&self, f: impl FnOnce(&Catalog) -> R) -> R {
        let catalog = self
            .catalog
            .read()
            .expect("invariant: catalog lock is never poisoned");
        f(&catalog)
    }

    async fn refresh(&self) -> Result<(), AppError> {
        let stored = self.store.catalog_seq().await?;
        self.follow(stored).await
    }

    /// Brings the readers' catalog up to the commit `target` at least (another replica's, or
    /// this process's own not yet applied): by applying the replication log's entries after
    /// the catalog's sequence, or, when the log cannot (pruned past it, or written before it),
    /// by loading the catalog whole.
    pub(crate) async fn follow(&self, target: u64) -> Result<(), AppError> {
        if self.read_now(Catalog::seq) >= target {
            return Ok(());
        }
        let _following = self.following.lock().await;
        // Each round applies at least one entry or ends, so it is bounded by the distance.
        loop {
            let have = self.read_now(Catalog::seq);
            if have >= target {
                return Ok(());
            }
            if let Tail::Entries(entries) = self.store.changes_after(have, CHANGE_LOG_PAGE).await? {
                let applied = apply_entries(&self.catalog, &entries);
                self.replication.applied(applied);
                self.recent.remember(entries);
                // A batch of this process may have applied the same entries meanwhile.
                if applied > 0 || self.read_now(Catalog::seq) > have {
                    self.wake_lifecycle_if_due_soon();
                    continue;
                }
            }
            let rows = self.store.load_catalog().await?;
            replace_catalog(&self.catalog, Catalog::from_rows(rows));
            self.replication.reloaded();
            self.lifecycle.notify_one();
            return Ok(());
        }
    }

    /// This process's commits from now on, as they are made, for a replica that follows it.
    pub fn published(&self) -> tokio::sync::broadcast::Receiver<Arc<Published>> {
        self.published.subscribe()
    }

    /// Applies a commit another replica published (see [`Berth::published`]) when it is the
    /// one that follows the readers' catalog; one already applied is dropped, and one past a
    /// gap or one that does not decode is left to the log: the replication task reads the log
    /// up to it. Returns whether it applied.
    pub fn apply_published(&self, published: Published) -> bool {
        let Published {
            seq,
            format,
            changes,
        } = published;
        let Some(after) = seq.checked_sub(1) else {
            return false;
        };
        let have = self.read_now(Catalog::seq);
        if have >= seq {
            return false;
        }
        // Past a gap, not decoded, or applied meanwhile by a batch of this process: the
        // replication task reads the log up to it (nothing, in the last case).
        let left_to_the_log = || {
            self.linked
                .heard
                .fetch_max(seq, std::sync::atomic::Ordering::Relaxed);
            self.linked.gap.notify_one();
            false
        };
        if have != after {
            return left_to_the_log();
        }
        let Tail::Entries(entries) =
            berth_store::codec::decode_tail(after, [(seq, format, changes)])
        else {
            return left_to_the_log();
        };
        let applied = apply_entries(&self.catalog, &entries);
        if applied == 0 {
            return left_to_the_log();
        }
        self.replication.applied(applied);
        self.replication.pushed(applied);
        self.recent.remember(entries);
        self.wake_lifecycle_if_due_soon();
        true
    }

    /// Tells the replication task that a link now brings every commit the writer makes
    /// (`true`), or that one no longer does (`false`). While a link does, the task does not
    /// listen for the database's announcements (the database then has one replica fewer to
    /// wake on every commit, and this replica one wake fewer per commit): it reads the log
    /// only for a commit a link could not apply, and checks the stored sequence every
    /// [`FED_CHECK`](crate::FED_CHECK) for commits no link brings (another replica's, made
    /// while it could not forward).
    pub fn fed_by_link(&self, fed: bool) {
        self.linked.feeds.send_modify(|feeds| match fed {
            true => *feeds += 1,
            false => *feeds = feeds.saturating_sub(1),
        });
    }

    /// Wakes the lifecycle engine when the catalog holds an event due within its poll: one that
    /// other replicas' commits just brought may fall before the engine's next pass. Otherwise the
    /// engine's own pause (at most [`LIFECYCLE_POLL`]) already ends before it, and an idle
    /// replica following a busy one makes no pass, and no read, per commit it applies.
    fn wake_lifecycle_if_due_soon(&self) {
        let Some((at, _, _)) = self.read_now(Catalog::next_due) else {
            return;
        };
        let poll = i64::try_from(LIFECYCLE_POLL.as_micros()).unwrap_or(i64::MAX);
        if at.as_micros() <= self.now().as_micros().saturating_add(poll) {
            self.lifecycle.notify_one();
        }
    }

    /// The one write path. The decision is queued; whichever writer holds the writer lock takes
    /// every queued decision (up to [`BATCH_LEN_MAX`]), makes them in order over its working
    /// catalog inside one store transaction, and commits them together (group commit). Each
    /// caller gets its own answer; a refused decision does not affect the others.
    ///
    /// A batch runs in a task of its own, so neither a caller going away nor its deadline can
    /// cut a commit short. Under a request [`Deadline`], a decision still queued when the
    /// deadline expires is withdrawn and answered [`AppError::TimedOut`] (nothing was changed);
    /// one already taken into a batch is answered with that batch's outcome, however late.
    /// A decision whose caller is gone is never made.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        decide: impl FnOnce(&Catalog, Instant) -> Result<(Vec<Change>, T), Rejection> + Send + 'static,
    ) -> Result<T, AppError> {
        self.write_keyed(None, move |catalog, _, now| decide(catalog, now))
            .await
    }

    /// [`Berth::write`] for a decision that names an idempotency key: it is given the key's
    /// record (live or expired) as the store holds it under the writer lock, or as an earlier
    /// decision of the same batch left it.
    pub(crate) async fn write_keyed<T: Send + 'static>(
        &self,
        key: Option<IdempotencyKey>,
        decide: impl FnOnce(
            &Catalog,
            Option<&IdempotencyRecord>,
            Instant,
        ) -> Result<(Vec<Change>, T), Rejection>
        + Send
        + 'static,
    ) -> Result<T, AppError> {
        let (reply, mut answer) = oneshot::channel();
        let decide: Decide = Box::new(move |catalog, record, now| {
            decide(catalog, record, now)
                .map(|(changes, value)| (changes, Box::new(value) as Box<dyn Any + Send>))
        });
        let deadline = Deadline::current();
        let id = self
            .next_pending
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let watch = deadline.clone();
        let mut watching = watch.is_some();
        self.queue
            .lock()
            .expect("invariant: queue lock is never poisoned")
            .push_back(Pending {
                id,
                key,
                decide,
                reply,
                deadline,
            });
        self.queued.notify_waiters();
        let result = loop {
            let expiry = async {
                match &watch {
                    Some(deadline) if watching => deadline.closed().await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                result = &mut answer => {
                    // A closed channel: the batch task ended without answering (it panicked).
                    break result.unwrap_or_else(|_| Err(abandoned()));
                }
                () = expiry => {
                    if self.withdraw(id) {
                        break Err(AppError::TimedOut);
                    }
                    // A batch met it first and answers it (closed: with the same answer).
                    watching = false;
                }
                working = Arc::clone(&self.writer).lock_owned() => {
                    if let Ok(result) = answer.try_recv() {
                        break result;
                    }
                    let batch = self.batch();
                    // Waiting for the task is all this caller does; dropping the wait leaves the
                    // batch running to its end.
                    let _ = tokio::spawn(batch.run(working)).await;
                }
            }
        };
        result.map(|value| {
            *value
                .downcast::<T>()
                .expect("invariant: a decision answers with its own type")
        })
    }

    /// Removes a queued decision of a closed request: `true` when it was still queued.
    fn withdraw(&self, id: u64) -> bool {
        let mut queue = self
            .queue
            .lock()
            .expect("invariant: queue lock is never poisoned");
        match queue.iter().position(|p| p.id == id) {
            Some(idx) => queue.remove(idx).is_some(),
            None => false,
        }
    }

    /// What a batch task needs of the service.
    fn batch(&self) -> Batch {
        Batch {
            store: Arc::clone(&self.store),
            clock: Arc::clone(&self.clock),
            catalog: Arc::clone(&self.catalog),
            queue: Arc::clone(&self.queue),
            queued: Arc::clone(&self.queued),
            gather: std::time::Duration::from_micros(
                self.gather_micros
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            replication: Arc::clone(&self.replication),
            recent: Arc::clone(&self.recent),
            published: self.published.clone(),
            idle_release: *self
                .idle_release
                .lock()
                .expect("invariant: the policy lock is never poisoned"),
        }
    }

    pub(crate) fn new_uuid(&self) -> Uuid {
        self.ids.uuid()
    }
}

/// One batch leader's work, owned by the task that runs it.
struct Batch {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    catalog: Arc<RwLock<Catalog>>,
    queue: Arc<std::sync::Mutex<VecDeque<Pending>>>,
    /// Told each time a decision is queued.
    queued: Arc<Notify>,
    /// How long the batch waits for decisions before it begins.
    gather: std::time::Duration,
    replication: Arc<Replication>,
    recent: Arc<Recent>,
    /// The release of unconsumed leases put on the leases the batch creates.
    idle_release: Option<IdleRelease>,
    published: tokio::sync::broadcast::Sender<Arc<Published>>,
}

impl Batch {
    /// Commits the queued decisions as one batch. They are taken from the queue only once the
    /// batch holds the database's writer lock, so that the decisions queued while another
    /// replica held it go into this batch rather than wait for the next. Before it begins, it
    /// gathers as many as the batch before it made (see [`Berth::set_batch_gather`]).
    async fn run(self, mut working: OwnedMutexGuard<Working>) {
        if self.queued_none() {
            return;
        }
        self.gather(working.last_made).await;
        self.commit_batch(&mut working).await;
    }

    /// Waits until `wanted` decisions are queued, [`Batch::gather`] at most; at once when the
    /// batch gathers none or `wanted` is one. Before the batch takes the database's writer
    /// lock: only this process's decisions, which go in this batch, wait for it.
    async fn gather(&self, wanted: usize) {
        if self.gather.is_zero() || wanted <= 1 {
            return;
        }
        let until = tokio::time::Instant::now() + self.gather;
        // Each turn ends the wait or waits for the next decision queued, until `until`.
        loop {
            // Made before the queue is looked at, so that a decision queued just after is told.
            let queued = self.queued.notified();
            let enough = self
                .queue
                .lock()
                .expect("invariant: queue lock is never poisoned")
                .len()
                >= wanted;
            if enough || tokio::time::timeout_at(until, queued).await.is_err() {
                return;
            }
        }
    }

    /// Whether no decision is queued (all were answered, withdrawn or abandoned meanwhile).
    fn queued_none(&self) -> bool {
        self.queue
            .lock()
            .expect("invariant: queue lock is never poisoned")
            .is_empty()
    }

    /// Makes the batch's decisions in order over `catalog`, applying each accepted one, and
    /// adds them to what the batch `decided` before.
    fn decide_all(
        &self,
        catalog: &mut Catalog,
        batch: Vec<Pending>,
        records: &mut Records,
        now: Instant,
        decided: &mut Decided,
    ) {
        let Decided {
            changes,
            frees,
            usage,
            accepted,
            // Refusals are answered once the batch is settled, so that whatever a refused caller
            // reads next (a counter-offer's snapshot) already holds the decisions that refused it.
            refused,
        } = decided;
        for pending in batch {
            // The caller went away while the batch began: nobody would learn the outcome.
            if pending.reply.is_closed() {
                continue;
            }
            let record = pending.key.as_ref().and_then(|key| records.get(key));
            let decided =
                (pending.decide)(catalog, record, now).and_then(|(mut decided, value)| {
                    complete(catalog, &mut decided, usage, now, self.idle_release)?;
                    Ok((decided, value))
                });
            match decided {
                Err(rejection) => refused.push((pending.reply, rejection)),
                Ok((decided, value)) => {
                    note_records(records, &decided);
                    *frees = *frees
                        || decided
                            .iter()
                            .any(|c| c.may_free_capacity() || budget::loosens(catalog, c));
                    catalog.apply(&decided);
                    changes.extend(decided);
                    accepted.push((pending.reply, value));
                }
            }
        }
    }

    /// Makes the decisions of `batch`, then those queued while they were made, which join them
    /// rather than wait for the whole of the next batch: only those already queued (the batch
    /// waits for none), at most [`BATCH_LEN_MAX`] in all (each round takes one or ends), and
    /// none past one that names an idempotency key (the next batch reads its record under the
    /// lock first).
    fn decide_taken(
        &self,
        catalog: &mut Catalog,
        batch: Vec<Pending>,
        records: &mut Records,
        now: Instant,
    ) -> Decided {
        let mut taken = batch.len();
        let mut decided = Decided::default();
        self.decide_all(catalog, batch, records, now, &mut decided);
        while taken < BATCH_LEN_MAX {
            let more = self.take_up_to(BATCH_LEN_MAX - taken, false);
            if more.is_empty() {
                break;
            }
            taken += more.len();
            self.decide_all(catalog, more, records, now, &mut decided);
        }
        decided
    }

    /// Takes the queued decisions (at most [`BATCH_LEN_MAX`]), leaving out those whose caller
    /// is gone or whose request was closed at its deadline.
    fn take(&self) -> Vec<Pending> {
        self.take_up_to(BATCH_LEN_MAX, true)
    }

    /// [`Batch::take`] of at most `room` decisions; unless `keyed`, it stops before the first
    /// that names an idempotency key (whose record the batch would have to read first).
    fn take_up_to(&self, room: usize, keyed: bool) -> Vec<Pending> {
        let mut queue = self
            .queue
            .lock()
            .expect("invariant: queue lock is never poisoned");
        let mut batch = Vec::new();
        // Bounded by the queue's length and `room`.
        while batch.len() < room {
            if !keyed && queue.front().is_some_and(|p| p.key.is_some()) {
                break;
            }
            let Some(pending) = queue.pop_front() else {
                break;
            };
            if pending.reply.is_closed() {
                continue;
            }
            match pending.deadline.as_ref().is_none_or(|d| d.take()) {
                true => batch.push(pending),
                false => {
                    let _ = pending.reply.send(Err(AppError::TimedOut));
                }
            }
        }
        batch
    }

    /// Brings the writers' copy as far as the readers' catalog before the batch takes the
    /// database's writer lock (which every replica's writers wait for): from the other
    /// replicas' commits this process has read already, then from the log. What is left for
    /// [`Batch::current`] to apply under the lock is only what was committed since.
    async fn prepare(&self, working: &mut Working) -> Result<(), StoreError> {
        if working.dirty {
            // Cut short before: the readers' catalog holds only what was committed.
            working.catalog = read(&self.catalog, Catalog::clone);
            working.dirty = false;
        }
        let target = read(&self.catalog, Catalog::seq);
        if working.catalog.seq() >= target {
            return Ok(());
        }
        let known = self.recent.after(working.catalog.seq());
        apply_in_order(&mut working.catalog, known.iter().map(AsRef::as_ref));
        // Each round applies at least one entry or ends, so it is bounded by the distance.
        while working.catalog.seq() < target {
            let Tail::Entries(entries) = self
                .store
                .changes_after(working.catalog.seq(), CHANGE_LOG_PAGE)
                .await?
            else {
                break;
            };
            if apply_in_order(&mut working.catalog, &entries) == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Brings the writers' copy up to the latest commit, under the writers' lock: other
    /// replicas' commits since its own come from the log (and go to the readers' catalog too:
    /// they are committed); the catalog is loaded whole only when the log cannot.
    async fn current(&self, tx: &mut dyn WriteTx, working: &mut Working) -> Result<(), StoreError> {
        let stored = tx.catalog_seq().await?;
        match catch_up(tx, &mut working.catalog, stored).await? {
            Some(entries) => {
                if !entries.is_empty() {
                    self.replication.applied_under_lock(entries.len());
                    let applied = apply_entries(&self.catalog, &entries);
                    self.replication.applied(applied);
                    self.recent.remember(entries);
                }
            }
            None => {
                working.catalog = Catalog::from_rows(tx.load_catalog().await?);
                self.replication.reloaded();
                replace_catalog(&self.catalog, working.catalog.clone());
            }
        }
        Ok(())
    }

    async fn commit_batch(&self, working: &mut Working) {
        if let Err(error) = self.prepare(working).await {
            return fail(self.take(), &error);
        }
        let mut tx = match self.store.begin_write().await {
            Ok(tx) => tx,
            Err(error) => return fail(self.take(), &error),
        };
        self.replication.began();
        if let Err(error) = self.current(tx.as_mut(), working).await {
            return fail(self.take(), &error);
        }
        let batch = self.take();
        if batch.is_empty() {
            // Dropped uncommitted: rolled back, nothing written.
            return;
        }
        let keys: Vec<&IdempotencyKey> = batch.iter().filter_map(|p| p.key.as_ref()).collect();
        let mut records = match keyed_records(tx.as_mut(), &keys).await {
            Ok(records) => records,
            Err(error) => return fail(batch, &error),
        };
        working.dirty = true;
        let now = self.clock.now();
        let Decided {
            mut changes,
            frees,
            mut usage,
            accepted,
            refused,
        } = self.decide_taken(&mut working.catalog, batch, &mut records, now);
        working.last_made = accepted.len() + refused.len();
        if frees {
            admit_waiting(&mut working.catalog, &mut changes, &mut usage, now);
        }
        let refuse = |refused: Vec<(Reply, Rejection)>| {
            for (reply, rejection) in refused {
                let _ = reply.send(Err(AppError::Rejected(rejection)));
            }
        };
        if changes.is_empty() {
            working.dirty = false;
            for (reply, value) in accepted {
                let _ = reply.send(Ok(value));
            }
            return refuse(refused);
        }
        // Asserted before the commit, so that a decision which breaks an invariant is never
        // stored: the panic drops the transaction (rolled back) and leaves the working catalog
        // dirty, to be reloaded by the next batch. Debug builds only: the check visits the
        // whole catalog.
        #[cfg(debug_assertions)]
        if let Err(broken) = working.catalog.check_invariants() {
            panic!("a decision would break an invariant; nothing was committed: {broken}");
        }
        #[cfg(feature = "planted-defects")]
        let accepted =
            match berth_core::planted::planted(berth_core::planted::Defect::AnswerBeforeCommit) {
                true => {
                    for (reply, value) in accepted {
                        let _ = reply.send(Ok(value));
                    }
                    Vec::new()
                }
                false => accepted,
            };
        let (seq, logged) = match commit_changes(tx, &changes, &usage, now).await {
            Ok(committed) => committed,
            Err(error) => {
                // A refusal of this batch may rest on what an accepted decision before it
                // changed, which was never committed: it is failed too, never answered with a
                // reason the stored state does not give.
                let replies = accepted.into_iter().map(|(reply, _)| reply);
                let replies = replies.chain(refused.into_iter().map(|(reply, _)| reply));
                return fail_replies(replies, &error);
            }
        };
        working.catalog.set_seq(seq);
        if self.published.receiver_count() > 0 {
            let _ = self.published.send(Arc::new(Published {
                seq,
                format: i64::from(berth_core::CHANGE_FORMAT),
                changes: logged.unwrap_or_else(|| berth_store::codec::encode_changes(&changes)),
            }));
        }
        let own = Committed { seq, changes };
        if apply_entries(&self.catalog, [&own]) == 0 && read(&self.catalog, Catalog::seq) < seq {
            // Behind by more than this commit (a reader's reload raced the batch): the working
            // copy is exactly the committed state.
            replace_catalog(&self.catalog, working.catalog.clone());
        }
        working.dirty = false;
        for (reply, value) in accepted {
            let _ = reply.send(Ok(value));
        }
        refuse(refused);
    }
}

/// The records of the idempotency keys a batch names, read under the writer lock (one read for
/// the whole batch; none when no decision names a key).
async fn keyed_records(
    tx: &mut dyn WriteTx,
    keys: &[&IdempotencyKey],
) -> Result<Records, StoreError> {
    if keys.is_empty() {
        return Ok(Records::new());
    }
    Ok(tx.idempotency_records(keys).await?.into_iter().collect())
}

/// Notes the keys a decision records, so that a later decision of the same batch naming one of
/// them is given its new record.
fn note_records(records: &mut Records, decided: &[Change]) {
    for change in decided {
        if let Change::IdempotencySet { key, record } = change {
            match record {
                Some(record) => records.insert(key.as_ref().clone(), record.as_ref().clone()),
                None => records.remove(key.as_ref()),
            };
        }
    }
}

/// Writes a batch's changes (pruning expired idempotency records first) and the usage history
/// they close (pruning segments past [`USAGE_RETENTION_DAYS`], at most twice what it writes and
/// at least [`USAGE_PRUNE_MIN`]), and commits them: the new sequence, and the replication
/// log's entry as the store appended it when it hands it back.
async fn commit_changes(
    mut tx: Box<dyn WriteTx>,
    changes: &[Change],
    usage: &[UsageSegment],
    now: Instant,
) -> Result<(u64, Option<String>), StoreError> {
    prune_records(tx.as_mut(), changes, now).await?;
    tx.persist(changes, now).await?;
    if !usage.is_empty() {
        tx.record_usage(usage).await?;
        let expired = now - Span::from_days(USAGE_RETENTION_DAYS);
        tx.prune_usage(expired, USAGE_PRUNE_MIN.max(2 * usage.len()))
            .await?;
    }
    tx.commit_logged().await
}

/// Prunes expired idempotency records, at most [`IDEMPOTENCY_PRUNE_MAX`] for each key
/// `changes` record (none when they record none), so that the records never outnumber the
/// keys of the last [`IDEMPOTENCY_TTL`] by more than what was there before.
async fn prune_records(
    tx: &mut dyn WriteTx,
    changes: &[Change],
    now: Instant,
) -> Result<(), StoreError> {
    let recorded = changes
        .iter()
        .filter(|c| {
            matches!(
                c,
                Change::IdempotencySet {
                    record: Some(_),
                    ..
                }
            )
        })
        .count();
    if recorded == 0 {
        return Ok(());
    }
    let before = now - IDEMPOTENCY_TTL;
    tx.prune_idempotency(before, recorded.saturating_mul(IDEMPOTENCY_PRUNE_MAX))
        .await
}

/// Runs `f` over the readers' catalog.
fn read<R>(catalog: &RwLock<Catalog>, f: impl FnOnce(&Catalog) -> R) -> R {
    f(&catalog
        .read()
        .expect("invariant: catalog lock is never poisoned"))
}

/// Applies committed log entries to the readers' catalog, in order: those it already has are
/// skipped, and it stops at a gap. Returns how many it applied.
fn apply_entries<'a>(
    catalog: &RwLock<Catalog>,
    entries: impl IntoIterator<Item = &'a Committed>,
) -> usize {
    let mut catalog = catalog
        .write()
        .expect("invariant: catalog lock is never poisoned");
    apply_in_order(&mut catalog, entries)
}

/// Applies the entries that follow `catalog`'s sequence, in order, stopping at a gap; returns
/// how many it applied.
fn apply_in_order<'a>(
    catalog: &mut Catalog,
    entries: impl IntoIterator<Item = &'a Committed>,
) -> usize {
    let mut applied = 0;
    for entry in entries {
        let next = catalog.seq() + 1;
        if entry.seq < next {
            continue;
        }
        if entry.seq > next {
            break;
        }
        catalog.apply(&entry.changes);
        catalog.set_seq(entry.seq);
        applied += 1;
    }
    applied
}

/// Brings the writers' copy up to `stored` (the sequence read under the writer lock) from the
/// replication log; returns the entries it applied, or `None` when the log cannot (the copy
/// must be loaded whole).
async fn catch_up(
    tx: &mut dyn WriteTx,
    working: &mut Catalog,
    stored: u64,
) -> Result<Option<Vec<Committed>>, StoreError> {
    let mut caught_up = Vec::new();
    // Each round applies at least one entry or ends, so it is bounded by the distance.
    while working.seq() < stored {
        let Tail::Entries(entries) = tx.changes_after(working.seq(), CHANGE_LOG_PAGE).await? else {
            return Ok(None);
        };
        if apply_in_order(working, &entries) == 0 {
            return Ok(None);
        }
        caught_up.extend(entries);
    }
    Ok((working.seq() == stored).then_some(caught_up))
}

/// How a replica's catalog has been kept current: entries applied from the replication log and
/// whole reloads (for `/metrics`).
#[derive(Debug, Default)]
pub(crate) struct Replication {
    applied: std::sync::atomic::AtomicU64,
    reloads: std::sync::atomic::AtomicU64,
    under_lock: std::sync::atomic::AtomicU64,
    transactions: std::sync::atomic::AtomicU64,
    pushed: std::sync::atomic::AtomicU64,
}

impl Replication {
    fn began(&self) {
        self.transactions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Write transactions this replica began (each held the database's writer lock).
    pub(crate) fn transactions(&self) -> u64 {
        self.transactions.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn applied_under_lock(&self, entries: usize) {
        let entries = u64::try_from(entries).unwrap_or(u64::MAX);
        self.under_lock
            .fetch_add(entries, std::sync::atomic::Ordering::Relaxed);
    }

    /// Log entries the writers' copy read inside a write transaction (under the database's
    /// writer lock) so far.
    pub(crate) fn entries_under_lock(&self) -> u64 {
        self.under_lock.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn applied(&self, entries: usize) {
        let entries = u64::try_from(entries).unwrap_or(u64::MAX);
        self.applied
            .fetch_add(entries, std::sync::atomic::Ordering::Relaxed);
    }

    fn pushed(&self, entries: usize) {
        let entries = u64::try_from(entries).unwrap_or(u64::MAX);
        self.pushed
            .fetch_add(entries, std::sync::atomic::Ordering::Relaxed);
    }

    /// Entries applied as the replica that made them published them, without reading the log.
    pub(crate) fn entries_pushed(&self) -> u64 {
        self.pushed.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn reloaded(&self) {
        self.reloads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Log entries applied to the readers' catalog (other replicas' commits) so far.
    pub(crate) fn entries_applied(&self) -> u64 {
        self.applied.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whole-catalog reloads so far.
    pub(crate) fn reloads(&self) -> u64 {
        self.reloads.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Longest the lifecycle engine sleeps before looking for new due events.
pub const LIFECYCLE_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// How many of the other replicas' latest commits a replica keeps in memory after applying
/// them, for its writers' copy to catch up from without reading the log again.
pub const RECENT_COMMITS: usize = 1_024;

/// Other replicas' latest commits as this replica read them from the log, oldest first (at
/// most [`RECENT_COMMITS`]; possibly with gaps where this replica committed itself).
#[derive(Debug, Default)]
struct Recent(std::sync::Mutex<VecDeque<Arc<Committed>>>);

impl Recent {
    /// Keeps `entries`, read from the log, dropping the oldest beyond the limit.
    fn remember(&self, entries: Vec<Committed>) {
        let mut recent = self
            .0
            .lock()
            .expect("invariant: recent lock is never poisoned");
        for entry in entries {
            if recent.back().is_some_and(|last| last.seq >= entry.seq) {
                continue;
            }
            if recent.len() == RECENT_COMMITS {
                recent.pop_front();
            }
            recent.push_back(Arc::new(entry));
        }
    }

    /// The kept commits after `seq`, oldest first.
    fn after(&self, seq: u64) -> Vec<Arc<Committed>> {
        let recent = self
            .0
            .lock()
            .expect("invariant: recent lock is never poisoned");
        let start = recent.partition_point(|entry| entry.seq <= seq);
        recent.range(start..).cloned().collect()
    }
}

/// Puts a freshly loaded catalog in the readers' place, unless it is older than theirs.
fn replace_catalog(catalog: &RwLock<Catalog>, fresh: Catalog) {
    let mut catalog = catalog
        .write()
        .expect("invariant: catalog lock is never poisoned");
    if fresh.seq() < catalog.seq() {
        return;
    }
    tracing::info!(from = catalog.seq(), to = fresh.seq(), "catalog reloaded");
    *catalog = fresh;
}

/// What the batch adds to a decision before applying it over `catalog`: the operator's release
/// of unconsumed leases (`idle_release`) on the leases it creates, the charges on its projects'
/// budgets (which may refuse it), then the usage history it closes.
fn complete(
    catalog: &Catalog,
    decided: &mut Vec<Change>,
    usage: &mut Vec<UsageSegment>,
    now: Instant,
    idle_release: Option<IdleRelease>,
) -> Result<(), Rejection> {
    if let Some(policy) = idle_release {
        stamp_idle_release(catalog, decided, policy);
    }
    let charges = budget::charge(catalog, decided, now)?;
    usage.extend(usage::close(catalog, decided, now));
    decided.extend(charges);
    Ok(())
}

/// After a batch's decisions, when one of them may have freed capacity or loosened a budget
/// (`Decided::frees`) and leases are waitlisted: admits waitlisted leases that fit now, in the
/// core's fair order, with at most [`berth_core::limits::WAITLIST_ATTEMPTS_MAX`] admissions as
/// asked (no search) in all. Their changes join the batch's, so they commit with the decisions
/// that freed the capacity, completed as any decision is (a waitlisted lease was stamped with
/// the release policy when it was created).
fn admit_waiting(
    catalog: &mut Catalog,
    changes: &mut Vec<Change>,
    usage: &mut Vec<UsageSegment>,
    now: Instant,
) {
    if !catalog.has_waiting() {
        return;
    }
    let mut budget = berth_core::limits::WAITLIST_ATTEMPTS_MAX;
    // Each round admits one lease or ends, and spends at least one attempt.
    while budget > 0 {
        let (mut admitted, used) = berth_core::decide::lease::admit_waiting(catalog, now, budget);
        budget = budget.saturating_sub(used.max(1));
        if admitted.is_empty() {
            break;
        }
        // The core admits only a lease its project's budget takes, so this is never refused.
        if let Err(rejection) = complete(catalog, &mut admitted, usage, now, None) {
            tracing::warn!(%rejection, "a waitlisted lease the core admitted was refused; it waits on");
            break;
        }
        catalog.apply(&admitted);
        changes.extend(admitted);
    }
}

/// The answer of a decision whose batch task ended without answering (it panicked): whether
/// its batch committed is unknown, so it is a storage failure, not a retryable refusal.
fn abandoned() -> AppError {
    AppError::Store(StoreError::Backend(
        "the write batch ended without an answer".into(),
    ))
}

/// How long a node claim holds its node unless the request or the configuration says
/// otherwise: 10 minutes.
pub const CLAIM_TTL_DEFAULT: std::time::Duration = std::time::Duration::from_secs(600);

/// Most decisions one batch commits together.
pub const BATCH_LEN_MAX: usize = 256;

/// Answers every decision of a batch that could not be committed.
fn fail(batch: Vec<Pending>, error: &StoreError) {
    fail_replies(batch.into_iter().map(|p| p.reply), error);
}

fn fail_replies(replies: impl Iterator<Item = Reply>, error: &StoreError) {
    tracing::error!(error = %error, "a write batch could not be committed");
    for reply in replies {
        let answer = match error {
            StoreError::Busy => AppError::Busy,
            other => AppError::Store(StoreError::Backend(other.to_string().into())),
        };
        let _ = reply.send(Err(answer));
    }
}

impl From<StoreError> for AppError {
    fn from(error: StoreError) -> AppError {
        match error {
            StoreError::Busy => AppError::Busy,
            other => AppError::Store(other),
        }
    }
}

#[cfg(test)]
mod tests;
