//! Following the other replicas: the task that applies their commits as the database announces
//! them, and where this replica stands (for `/metrics`).
//!
//! Reads do not depend on this task: every read compares the stored sequence with its catalog's
//! and applies the tail itself (`Berth::read`). The task brings the tail in as soon as a commit
//! is announced, so reads seldom find one to apply, and wakes the lifecycle engine for the
//! leases it brought.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::{Catalog, Instant};
use berth_store::CommitFeed;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long the follower waits before listening again after the database connection failed.
pub const FOLLOW_RETRY: Duration = Duration::from_secs(1);

/// How long the follower lets announcements gather before it reads the log once for all of
/// them: an idle replica then reads the log at most every this often, however fast the others
/// commit. Reads do not wait for it (each applies the tail it finds itself).
pub const FOLLOW_GATHER: Duration = Duration::from_millis(10);

/// How often a replica whose link brings it the writer's commits checks the stored sequence
/// for commits no link brings: another replica's, made while that one could not reach the
/// writer. Reads never wait for it (each compares the stored sequence itself); it bounds how
/// late the replica's engines learn of such a commit.
pub const FED_CHECK: Duration = Duration::from_secs(1);

/// What the engines of a replica standing by (another holds the writer's term) leave to the
/// term holder's: lifecycle events due, lifecycle records committed and notification deliveries
/// due less than this long ago. The holder's engines act on them at once; a standby replica
/// acts only on what the holder left undone this long (it is stuck, or gone and its term not
/// yet lapsed). Exactly once never rests on this: every engine's write is decided again under
/// the writer lock. It only keeps the standby replicas' engines from racing the holder's, a
/// write transaction (and a catch-up of their writers' copy under the database's writer lock)
/// for each race they lose. Longer than a delivery attempt may take, so that a standby replica
/// does not post a notification the holder is still posting.
pub const STANDBY_GRACE: Duration = Duration::from_secs(10);

/// Where one replica stands against the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// The commit the readers' catalog holds.
    pub seq: u64,
    /// The last commit in the database.
    pub stored: u64,
    /// The oldest commit the replication log still holds (0 when it holds none).
    pub log_oldest: u64,
    /// How many commits the log keeps.
    pub log_retained: u64,
    /// Log entries applied to this replica's catalog (other replicas' commits) since it started.
    pub entries_applied: u64,
    /// Of those, entries applied as the replica that made them published them over a link,
    /// without reading the log.
    pub entries_pushed: u64,
    /// Whole-catalog loads since it started (besides the first).
    pub reloads: u64,
    /// Log entries its writers read inside a write transaction, while every replica's writers
    /// waited (the rest are applied before the transaction begins).
    pub entries_under_lock: u64,
    /// Write transactions this replica began since it started (each held the database's writer
    /// lock while it lasted; one that found nothing to change committed nothing).
    pub write_transactions: u64,
    /// Whether another replica holds the writer's term, so that this one's engines stand by.
    pub standing_by: bool,
    /// Whether a link brings this replica every commit the writer makes (it then does not
    /// listen for the database's announcements).
    pub fed_by_link: bool,
}

impl Berth {
    /// Tells the engines whether another replica holds the writer's term (`true`: this one
    /// stands by, leaving that replica what falls due for [`STANDBY_GRACE`]).
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Relaxed);
    }

    /// Whether this replica's engines stand by (another replica holds the writer's term).
    pub fn stands_by(&self) -> bool {
        self.standby.load(Ordering::Relaxed)
    }

    /// The latest instant whose due work this replica's engines take on at `now`: `now` itself,
    /// or, standing by, [`STANDBY_GRACE`] earlier.
    pub(crate) fn engines_horizon(&self, now: Instant) -> Instant {
        match self.stands_by() {
            false => now,
            true => now - crate::service::span(STANDBY_GRACE),
        }
    }

    /// Where this replica stands: its catalog's commit against the database's, the log's bounds,
    /// and how it has followed so far.
    pub async fn replica_status(&self) -> Result<ReplicaStatus, AppError> {
        let stored = self.store.catalog_seq().await?;
        let (log_oldest, log_retained) = self.store.change_log_bounds().await?;
        Ok(ReplicaStatus {
            seq: self.read_local(Catalog::seq),
            stored,
            log_oldest,
            log_retained,
            entries_applied: self.replication.entries_applied(),
            entries_pushed: self.replication.entries_pushed(),
            reloads: self.replication.reloads(),
            entries_under_lock: self.replication.entries_under_lock(),
            write_transactions: self.replication.transactions(),
            standing_by: self.stands_by(),
            fed_by_link: *self.linked.feeds.borrow() > 0,
        })
    }

    /// Follows the other replicas until `stop` resolves: on every commit the database announces,
    /// applies the replication log's tail to the catalog. While a link brings it the writer's
    /// commits ([`Berth::fed_by_link`]), it does not listen: it reads the log only for a commit
    /// the link could not apply, and checks the stored sequence every [`FED_CHECK`]. Returns at
    /// once on a database that announces nothing (SQLite: one process holds it).
    pub async fn run_replication(&self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut feeds = self.linked.feeds.subscribe();
        loop {
            let linked = *feeds.borrow_and_update() > 0;
            if linked {
                match self.follow_links(&mut stop, &mut feeds).await {
                    Followed::Stop => return,
                    Followed::Again => continue,
                }
            }
            let feed = match self.store.listen().await {
                Ok(Some(feed)) => feed,
                Ok(None) => return,
                Err(error) => {
                    tracing::warn!(%error, "listening for other replicas' commits failed; will retry");
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(FOLLOW_RETRY) => continue,
                    }
                }
            };
            match self.follow_announcements(feed, &mut stop, &mut feeds).await {
                Followed::Stop => return,
                // A link brings the commits now: the listener goes (its connection with it).
                Followed::Again => continue,
            }
        }
    }

    /// Applies the log's tail on every commit `feed` announces, until a link brings the
    /// writer's commits (`Again`, after [`FOLLOW_RETRY`] when the feed failed) or `stop`.
    async fn follow_announcements(
        &self,
        mut feed: Box<dyn CommitFeed>,
        stop: &mut (impl std::future::Future<Output = ()> + Unpin),
        feeds: &mut tokio::sync::watch::Receiver<usize>,
    ) -> Followed {
        // A commit may have been made before the listener started.
        let mut announced = None;
        loop {
            let target = match announced.take() {
                Some(seq) => Ok(seq),
                None => self.store.catalog_seq().await,
            };
            self.follow_logged(target).await;
            let next = tokio::select! {
                () = &mut *stop => return Followed::Stop,
                true = until(feeds, |feeds| *feeds > 0) => return Followed::Again,
                next = feed.next() => next,
            };
            match gather(&mut *feed, next, stop).await {
                Gathered::Stop => return Followed::Stop,
                Gathered::Latest(seq) => announced = Some(seq),
                // Announcements may have been missed: compare with the stored sequence.
                Gathered::Missed => {}
                Gathered::Failed(error) => {
                    tracing::warn!(%error, "the commit announcements stopped; listening again");
                    return tokio::select! {
                        () = &mut *stop => Followed::Stop,
                        () = tokio::time::sleep(FOLLOW_RETRY) => Followed::Again,
                    };
                }
            }
        }
    }

    /// While a link brings the writer's commits: reads the log up to each commit a link could
    /// not apply, and up to the stored sequence every [`FED_CHECK`], until no link does
    /// (`Again`: the replica listens again and catches up) or `stop`.
    async fn follow_links(
        &self,
        stop: &mut (impl std::future::Future<Output = ()> + Unpin),
        feeds: &mut tokio::sync::watch::Receiver<usize>,
    ) -> Followed {
        let mut check = tokio::time::interval(FED_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let target = tokio::select! {
                () = &mut *stop => return Followed::Stop,
                true = until(feeds, |feeds| *feeds == 0) => return Followed::Again,
                () = self.linked.gap.notified() => Ok(self.linked.heard.load(Ordering::Relaxed)),
                _ = check.tick() => self.store.catalog_seq().await,
            };
            self.follow_logged(target).await;
        }
    }

    /// Brings the catalog up to `target` (read from the store, which may have failed), logging
    /// a failure (the next announcement or check tries again).
    async fn follow_logged(&self, target: Result<u64, berth_store::StoreError>) {
        if let Err(error) = match target {
            Ok(target) => self.follow(target).await,
            Err(error) => Err(error.into()),
        } {
            tracing::warn!(%error, "applying other replicas' commits failed; will retry");
        }
    }
}

/// Waits until the count of links that bring the writer's commits satisfies `wanted`; `false`
/// when no count will come again (the service is gone).
async fn until(
    feeds: &mut tokio::sync::watch::Receiver<usize>,
    wanted: impl FnMut(&usize) -> bool,
) -> bool {
    feeds.wait_for(wanted).await.is_ok()
}

/// How a way of following ended.
enum Followed {
    /// The replica stops.
    Stop,
    /// Whether a link brings the writer's commits changed (or the feed failed): follow again.
    Again,
}

/// Most announcements one gathering takes.
const GATHERED_MAX: usize = 4_096;

/// What the announcements gathered over [`FOLLOW_GATHER`] say.
enum Gathered {
    /// The latest commit announced.
    Latest(u64),
    /// Some may have been missed: the stored sequence tells.
    Missed,
    /// The feed failed.
    Failed(berth_store::StoreError),
    /// The replica stops.
    Stop,
}

/// Starting from the announcement `first`, lets announcements gather for [`FOLLOW_GATHER`] and
/// takes every one that arrived (bounded by what arrived in that time).
async fn gather(
    feed: &mut dyn CommitFeed,
    first: Result<Option<u64>, berth_store::StoreError>,
    stop: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> Gathered {
    let mut latest = match first {
        Ok(Some(seq)) => Some(seq),
        Ok(None) => None,
        Err(error) => return Gathered::Failed(error),
    };
    tokio::select! {
        () = stop => return Gathered::Stop,
        () = tokio::time::sleep(FOLLOW_GATHER) => {}
    }
    // The feed answers at once while announcements are buffered; a zero timeout ends the
    // gathering at the first that is not, and a bound ends it under a flood (the rest are
    // gathered next time: the catalog is brought to the latest sequence either way).
    for _ in 0..GATHERED_MAX {
        let Ok(next) = tokio::time::timeout(Duration::ZERO, feed.next()).await else {
            break;
        };
        match next {
            Ok(Some(seq)) => latest = latest.map(|held| held.max(seq)),
            Ok(None) => latest = None,
            Err(error) => return Gathered::Failed(error),
        }
    }
    match latest {
        Some(seq) => Gathered::Latest(seq),
        None => Gathered::Missed,
    }
}
