//! Subscription use cases and the notification engine.
//!
//! The engine is a loop: it expands the outbox entries committed since the catalog's cursor
//! into deliveries (one decision, so each entry is expanded once across replicas), evaluates
//! capacity thresholds and leases' utilization, then starts an attempt at every delivery that is due, at most
//! [`DELIVERIES_IN_FLIGHT`] at once, each on its own task bounded by the notifier's own timeout,
//! recording each outcome as it ends (delivered, retry later, or dead). A delivery that hangs
//! or fails never holds up the others. After a crash the deliveries still pending are attempted again: at least once.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::decide::notify as decide;
use berth_core::model::lease::LeaseRecord;
use berth_core::model::notify::{Delivery, DeliveryStatus, Subscription, Topic};
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How often the engine looks for new outbox entries and due deliveries.
pub const NOTIFY_POLL: Duration = Duration::from_millis(200);
/// Most deliveries attempted at once.
pub const DELIVERIES_IN_FLIGHT: usize = 16;
/// Most outbox entries expanded in one decision.
const EXPAND_BATCH: usize = 256;

/// What an outbox pass with nothing to do saw: the catalog sequence, and when.
#[derive(Debug, Clone, Copy)]
struct Quiet {
    seq: u64,
    at: berth_core::Instant,
}

/// Sends one notification: a JSON POST of `body` to `url`, signed with `secret` when given.
/// `Ok` when the receiver answered 2xx; otherwise why not.
pub trait Notifier: Send + Sync + 'static {
    /// Posts one notification.
    fn post(
        &self,
        url: String,
        body: String,
        secret: Option<String>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;
}

/// One page of the notification feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedPage {
    /// The entries read that the caller sees, oldest first, with their positions.
    pub entries: Vec<(u64, LeaseRecord)>,
    /// The position of the last entry read, seen or not: the next page starts after it.
    pub last_read: Option<u64>,
    /// Whether fewer entries than asked were read: the feed holds nothing more yet.
    pub exhausted: bool,
}

/// A subscription to make.
#[derive(Debug, Clone)]
pub struct Subscribe {
    /// Owning project.
    pub project_id: String,
    /// What it is about.
    pub topic: Topic,
    /// `callbackUri`; `None`: feed-only.
    pub callback: Option<String>,
    /// Signing secret.
    pub secret: Option<String>,
    /// The project whose leases a reservation filter may name (`None`: an admin, any).
    pub scope: Option<String>,
}

impl Berth {
    /// Records a subscription and returns it.
    pub async fn subscribe(&self, cmd: Subscribe) -> Result<Subscription, AppError> {
        let id = self.new_uuid();
        self.write(move |catalog, now| {
            let subscription = Subscription {
                id,
                project_id: cmd.project_id,
                topic: cmd.topic,
                callback: cmd.callback,
                secret: cmd.secret,
                triggered: None,
                fired: 0,
                created_at: now,
            };
            decide::subscribe(catalog, subscription.clone(), cmd.scope.as_deref())
                .map(|c| (c, subscription))
        })
        .await
    }

    /// Removes a subscription of `project` (`None`: any).
    pub async fn unsubscribe(&self, id: Uuid, project: Option<String>) -> Result<(), AppError> {
        self.write(move |catalog, _| {
            decide::unsubscribe(catalog, id, project.as_deref()).map(|c| (c, ()))
        })
        .await
    }

    /// Puts a dead delivery back in the queue.
    pub async fn redeliver(&self, id: String) -> Result<(), AppError> {
        self.write(move |catalog, now| decide::redeliver(catalog, &id, now).map(|c| (c, ())))
            .await
    }

    /// One page of the notification feed: the outbox entries after `seq`, oldest first, at most
    /// `limit` read, of which those `project` (`None`: any) sees.
    pub async fn feed_page(
        &self,
        seq: u64,
        limit: usize,
        project: Option<&str>,
    ) -> Result<FeedPage, AppError> {
        let page = self.store.records_after(seq, limit).await?;
        let last_read = page.last().map(|(seq, _)| *seq);
        let exhausted = page.len() < limit;
        let entries = page
            .into_iter()
            .filter(|(_, r)| berth_core::query::notify::sees_record(project, r))
            .collect();
        Ok(FeedPage {
            entries,
            last_read,
            exhausted,
        })
    }

    /// The subscriptions `project` (`None`: any) sees, handed to `render`.
    pub async fn subscriptions<R>(
        &self,
        project: Option<String>,
        render: impl FnOnce(Vec<&Subscription>) -> R,
    ) -> Result<R, AppError> {
        self.read(|c| {
            render(berth_core::query::notify::subscriptions(
                c,
                project.as_deref(),
            ))
        })
        .await
    }

    /// The undelivered notifications of the subscriptions `project` (`None`: any) sees, handed
    /// to `render`.
    pub async fn deliveries<R>(
        &self,
        project: Option<String>,
        render: impl FnOnce(Vec<&Delivery>) -> R,
    ) -> Result<R, AppError> {
        self.read(|c| render(berth_core::query::notify::deliveries(c, project.as_deref())))
            .await
    }

    /// Expands the outbox entries committed since the cursor; returns how many it expanded.
    /// `quiet` is what the last pass with nothing to do saw: while nothing is recorded, the
    /// catalog does not change, no planned capacity change starts or ends and no lease's low
    /// utilization falls due, no subscription can have moved, so the pass stops there.
    async fn expand_outbox(&self, quiet: &mut Option<Quiet>) -> Result<usize, AppError> {
        let (cursor, seq) = self.read(|c| (c.outbox_cursor(), c.seq())).await?;
        let records = self.store.records_after(cursor, EXPAND_BATCH).await?;
        let now = self.now();
        if self.stands_by() {
            // The term holder's notifier expands what is recorded, and judges the thresholds;
            // this one takes over records it left unexpanded for the grace.
            let horizon = self.engines_horizon(now);
            if records
                .first()
                .is_none_or(|(_, record)| record.at > horizon)
            {
                *quiet = None;
                return Ok(0);
            }
        }
        let unchanged = |q: &Quiet| {
            q.seq == seq
                && !self.read_local(|c| {
                    c.capacity_changes_between(q.at, now)
                        || decide::utilization_due_between(c, q.at, now)
                })
        };
        if records.is_empty() && quiet.as_ref().is_some_and(unchanged) {
            return Ok(0);
        }
        let wanted = self.read_local(|c| !decide::expand(c, cursor, &records, now).is_empty());
        if !wanted {
            *quiet = Some(Quiet { seq, at: now });
            return Ok(0);
        }
        *quiet = None;
        let count = records.len();
        self.write(move |catalog, now| Ok((decide::expand(catalog, cursor, &records, now), ())))
            .await?;
        Ok(count)
    }

    /// Starts an attempt at every delivery due now that is not already being attempted, up to
    /// [`DELIVERIES_IN_FLIGHT`] at once; each attempt runs on its own task and records its
    /// outcome when it ends, so a slow or silent receiver never holds up the others. Returns
    /// how many attempts it started.
    async fn deliver_due(
        self: &Arc<Self>,
        notifier: &Arc<dyn Notifier>,
        in_flight: &Arc<std::sync::Mutex<HashSet<String>>>,
        done: &Arc<tokio::sync::Notify>,
    ) -> Result<usize, AppError> {
        // Standing by, only what the term holder's notifier left unattempted for the grace.
        let horizon = self.engines_horizon(self.now());
        let busy: HashSet<String> = in_flight.lock().expect("invariant: not poisoned").clone();
        let room = DELIVERIES_IN_FLIGHT.saturating_sub(busy.len());
        // The pass's outbox step has just brought the catalog up to date.
        let due: Vec<(String, String, String, Option<String>)> = self.read_local(|c| {
            c.deliveries()
                .filter(|d| d.status == DeliveryStatus::Pending && d.next_at <= horizon)
                .filter(|d| !busy.contains(&d.id))
                .filter_map(|d| {
                    let s = c.subscription(d.subscription)?;
                    Some((
                        d.id.clone(),
                        s.callback.clone()?,
                        d.body.clone(),
                        s.secret.clone(),
                    ))
                })
                .take(room)
                .collect()
        });
        let started = due.len();
        for (id, url, body, secret) in due {
            in_flight
                .lock()
                .expect("invariant: not poisoned")
                .insert(id.clone());
            let sending = notifier.post(url, body, secret);
            let berth = Arc::clone(self);
            let in_flight = Arc::clone(in_flight);
            let done = Arc::clone(done);
            tokio::spawn(async move {
                let outcome = sending.await;
                // The whole cause goes to the log; subscribers who are not admins are told
                // only that the attempt failed.
                if let Err(error) = &outcome {
                    tracing::warn!(notification = %id, %error, "a notification delivery attempt failed");
                }
                let jitter = (berth.new_uuid().as_u128() % 1_000) as f64 / 1_000.0;
                let key = id.clone();
                let recorded = berth
                    .write(move |catalog, now| {
                        Ok((decide::attempted(catalog, &key, outcome, now, jitter), ()))
                    })
                    .await;
                if let Err(error) = recorded {
                    tracing::warn!(%error, notification = %id, "recording a delivery failed");
                }
                in_flight
                    .lock()
                    .expect("invariant: not poisoned")
                    .remove(&id);
                done.notify_one();
            });
        }
        Ok(started)
    }

    /// Runs the notification engine until `stop` completes.
    pub async fn run_notifications(
        self: Arc<Self>,
        notifier: Arc<dyn Notifier>,
        stop: impl Future<Output = ()> + Send,
    ) {
        tokio::pin!(stop);
        let in_flight = Arc::new(std::sync::Mutex::new(HashSet::new()));
        // An attempt that ends wakes the loop, so the next due delivery starts at once.
        let done = Arc::new(tokio::sync::Notify::new());
        let mut quiet = None;
        loop {
            let expanded = match self.expand_outbox(&mut quiet).await {
                Ok(n) => n,
                Err(error) => {
                    tracing::warn!(%error, "expanding the outbox failed; will retry");
                    0
                }
            };
            if let Err(error) = self.deliver_due(&notifier, &in_flight, &done).await {
                tracing::warn!(%error, "delivering notifications failed; will retry");
            }
            if expanded >= EXPAND_BATCH {
                continue;
            }
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(NOTIFY_POLL) => {}
                () = done.notified() => {}
            }
        }
    }
}
