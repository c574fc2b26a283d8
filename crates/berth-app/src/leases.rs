//! Lease use cases: create, update and delete leases, register floating IPs, search
//! availability, and the lifecycle engine that fires lease events on time; and Blazar's reads:
//! the lease list, the reservations holding each host, the values of host properties, and the
//! zones with their hosts and classes.
//!
//! The lifecycle engine is a loop over the catalog's due-event index: it fires every event due
//! now through the one write path, then waits until the next event is due, a lease write in this
//! process wakes it, or [`LIFECYCLE_POLL`] passes (which bounds how late it notices leases
//! another replica wrote). Firing is idempotent in the core and serialized by the store's
//! writer lock, so with several replicas each event fires exactly once.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::ProviderId;
use berth_core::decide::admission::{self, Search};
use berth_core::decide::lease::{self as decide, LeaseUpdate, NewLease};
use berth_core::decide::lifecycle::fire_event;
use berth_core::model::idempotency::Idempotent;
use berth_core::model::lease::{EventKind, FloatingIp, Lease, LeaseRecord, ReservationSpec};
use berth_core::model::ledger::Window;
use berth_core::model::provider::Provider;
use berth_core::query::capacity::{self, ZoneClasses};
use berth_core::query::leases::{self as lease_query, HoldFilter, Holding, LeaseQuery};
use berth_core::query::properties::{self, PropertyValues, Shown};
use berth_core::rejection::Refusal;
use berth_core::{Catalog, Change, Instant, Rejection};
use berth_core::{LeaseId, ReservationId, Span};
use std::collections::HashMap;
use std::time::Duration;
use uuid::Uuid;

pub use crate::service::LIFECYCLE_POLL;
/// Failed attempts at firing one event before it is recorded as failed.
pub const EVENT_ATTEMPTS_MAX: u32 = 8;
/// The first retry delay of a failed event; each further attempt doubles it.
pub const EVENT_RETRY_FIRST: Duration = Duration::from_millis(200);
/// How far ahead of the requested start the counter-offer searches by default: 30 days.
pub const SEARCH_HORIZON_DEFAULT: Span = Span::from_days(30);

/// A lease to create.
#[derive(Debug, Clone)]
pub struct CreateLease {
    /// Its name.
    pub name: String,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// Window start.
    pub start: Instant,
    /// Window end.
    pub end: Instant,
    /// When `before_end_lease` fires, if not the default.
    pub before_end: Option<Instant>,
    /// The reservations.
    pub reservations: Vec<ReservationSpec>,
    /// How far after `start` the counter-offer searches.
    pub horizon: Span,
    /// The request's `Idempotency-Key`, if any: a retry answers with the lease it created.
    pub idempotency: Option<Idempotent>,
    /// The hold (berth) the lease is made from: the hold becomes the lease in one decision.
    pub hold: Option<LeaseId>,
}

/// A hold asked of an availability search.
#[derive(Debug, Clone)]
pub struct AskHold {
    /// The project the hold is for.
    pub project_id: String,
    /// The user asking.
    pub user_id: String,
    /// How long it lasts (1 to `limits::HOLD_MINUTES_MAX` minutes; checked by the caller).
    pub minutes: u32,
}

/// What became of a hold asked of an availability search.
#[derive(Debug, Clone)]
pub enum HoldOutcome {
    /// The offer is held: the hold (a lease in `HELD`), whose id is the `hold_id`.
    Held(Box<Lease>),
    /// Nothing was held: why (nothing fits within the horizon, or the offer was taken between
    /// the search and the decision).
    NotHeld(String),
}

/// A floating IP to register.
#[derive(Debug, Clone)]
pub struct RegisterFloatingIp {
    /// The external network.
    pub network_id: String,
    /// The subnet, when known.
    pub subnet_id: Option<String>,
    /// The address, canonical text.
    pub address: String,
}

/// Free capacity of one availability zone over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneCapacity {
    /// The zone (`None`: hosts without one).
    pub zone: Option<String>,
    /// Reservable hosts.
    pub hosts: u32,
    /// Reservable hosts entirely free over the window.
    pub free_hosts: u32,
    /// Per class, the capacity left at the busiest instant of the window, summed over hosts.
    pub free: Vec<(String, u64)>,
}

/// The answer of an availability search.
#[derive(Debug, Clone)]
pub struct Availability {
    /// `None` when the request fits now; otherwise why not and what would.
    pub refusal: Option<Refusal>,
    /// What the request would get if it fits: per reservation, hosts with slots.
    pub hosts: Vec<Vec<(ProviderId, u32)>>,
    /// Free capacity per availability zone over the window.
    pub zones: Vec<ZoneCapacity>,
    /// What became of the hold asked for, when one was.
    pub hold: Option<HoldOutcome>,
}

/// A lease as it is now (an idempotent create's replay): the key's record names it by its uuid.
pub(crate) fn find_lease(catalog: &berth_core::Catalog, id: Uuid) -> Option<Lease> {
    catalog.lease(LeaseId::new(id)).cloned()
}

/// The uuid of a created lease, which the key's record keeps.
pub(crate) fn lease_id(lease: &Lease) -> Uuid {
    lease.id.uuid()
}

/// The horizon's end for a search from `start`.
pub(crate) fn horizon_end(start: Instant, horizon: Span) -> Instant {
    start + horizon
}

impl Berth {
    /// Admits a lease all-or-nothing and returns it (with an idempotency key seen before: the
    /// lease that key's first request created, as it is now).
    ///
    /// The request is checked against the named limits first, then admitted as asked over a
    /// snapshot off the runtime threads: a request that does not fit is refused there, with
    /// its counter-offer searched within the search budget, and never takes the writer lock.
    /// One that fits is decided again under the lock, where nothing is searched; if the
    /// catalog moved and it no longer fits, the counter-offer is searched after the lock.
    /// A light request (up to `limits::ADMISSION_IN_PLACE_MAX` hosts, slots and addresses in
    /// all) goes straight to the lock; a key seen before skips the snapshot too: its decision
    /// answers with what the key made.
    pub async fn create_lease(&self, cmd: CreateLease) -> Result<Lease, AppError> {
        decide::check_limits(cmd.reservations.iter())?;
        decide::check_horizon(cmd.horizon)?;
        if let Some(hold) = cmd.hold {
            return self.create_lease_from_hold(cmd, hold).await;
        }
        let new = self.new_lease(&cmd);
        let horizon = horizon_end(cmd.start, cmd.horizon);
        let now = self.now();
        let key = cmd.idempotency;
        let asked = new.clone();
        let weight = decide::admission_weight(new.reservations.iter().map(|(_, spec)| spec));
        let fits = match weight <= berth_core::limits::ADMISSION_IN_PLACE_MAX {
            // As cheap to decide under the lock as any write: no snapshot to pay for.
            true => Ok(()),
            false => {
                self.read_blocking(move |catalog| {
                    decide::create_lease(catalog, &asked, now, &Search::NONE).map(|_| ())
                })
                .await?
            }
        };
        let fits = match fits {
            Err(_) if self.seen(key.as_ref()).await? => Ok(()),
            other => other,
        };
        let decided = new.clone();
        let result = match fits {
            Ok(()) => {
                self.write_once(key, find_lease, lease_id, move |catalog, now| {
                    decide::create_lease(catalog, &decided, now, &Search::NONE)
                })
                .await
            }
            Err(rejection) => Err(AppError::Rejected(rejection)),
        };
        let lease = match result {
            Err(AppError::Rejected(rejection)) => {
                let offer = move |catalog: &berth_core::Catalog, search: &Search<'_>| {
                    decide::create_lease(catalog, &new, now, search).err()
                };
                return Err(self.with_offer(rejection, move |_| horizon, offer).await);
            }
            other => other?,
        };
        self.lifecycle.notify_one();
        Ok(lease)
    }

    /// The new lease `cmd` asks for, with fresh ids.
    pub(crate) fn new_lease(&self, cmd: &CreateLease) -> NewLease {
        NewLease {
            id: LeaseId::new(self.new_uuid()),
            name: cmd.name.clone(),
            project_id: cmd.project_id.clone(),
            user_id: cmd.user_id.clone(),
            start: cmd.start,
            end: cmd.end,
            before_end: cmd.before_end,
            reservations: cmd
                .reservations
                .iter()
                .map(|spec| (ReservationId::new(self.new_uuid()), spec.clone()))
                .collect(),
            event_ids: [self.new_uuid(), self.new_uuid(), self.new_uuid()],
            notice_lead: self.notice_lead(),
        }
    }

    /// Updates a lease, re-admitting it atomically when its window or amounts change. Nothing
    /// is searched under the writer lock: a refusal's counter-offer is searched after it.
    pub async fn update_lease(
        &self,
        id: LeaseId,
        update: LeaseUpdate,
        horizon: Span,
    ) -> Result<Lease, AppError> {
        decide::check_horizon(horizon)?;
        let decided = update.clone();
        let result = self
            .write(move |catalog, now| {
                decide::update_lease(catalog, id, &decided, now, &Search::NONE)
            })
            .await;
        let lease = match result {
            Err(AppError::Rejected(rejection)) => {
                let now = self.now();
                let start = update.start;
                let horizon = move |catalog: &berth_core::Catalog| {
                    let start = start
                        .or_else(|| catalog.lease(id).map(|l| l.start))
                        .unwrap_or(now);
                    horizon_end(start, horizon)
                };
                let offer = move |catalog: &berth_core::Catalog, search: &Search<'_>| {
                    decide::update_lease(catalog, id, &update, now, search).err()
                };
                return Err(self.with_offer(rejection, horizon, offer).await);
            }
            other => other?,
        };
        self.lifecycle.notify_one();
        Ok(lease)
    }

    /// Deletes a lease, releasing what it holds.
    pub async fn delete_lease(&self, id: LeaseId) -> Result<(), AppError> {
        self.write(move |catalog, now| decide::delete_lease(catalog, id, now).map(|c| (c, ())))
            .await
    }

    /// Registers a floating IP and returns it.
    pub async fn register_floating_ip(
        &self,
        cmd: RegisterFloatingIp,
    ) -> Result<FloatingIp, AppError> {
        let id = self.new_uuid();
        self.write(move |catalog, now| {
            let fip = FloatingIp {
                id,
                network_id: cmd.network_id,
                subnet_id: cmd.subnet_id,
                address: cmd.address,
                reservable: true,
                created_at: now,
                updated_at: now,
            };
            decide::register_floating_ip(catalog, fip.clone()).map(|c| (c, fip))
        })
        .await
    }

    /// Removes a floating IP no lease holds.
    pub async fn delete_floating_ip(&self, id: Uuid) -> Result<(), AppError> {
        self.write(move |catalog, _| decide::delete_floating_ip(catalog, id).map(|c| (c, ())))
            .await
    }

    /// Marks a host property private or public.
    pub async fn set_property_privacy(&self, name: String, private: bool) -> Result<(), AppError> {
        self.write(move |catalog, _| {
            decide::set_property_privacy(catalog, &name, private).map(|c| (c, ()))
        })
        .await
    }

    /// The lifecycle record of a lease, oldest first.
    pub async fn lease_records(&self, id: LeaseId) -> Result<Vec<LeaseRecord>, AppError> {
        Ok(self.store.lease_records(id).await?)
    }

    /// Whether `specs` fit over `[start, end)`, the counter-offer when they do not, and free
    /// capacity per availability zone. Admits nothing; checked against the named limits, then
    /// searched like a counter-offer (a snapshot, a blocking thread, the search budget).
    pub async fn availability(
        &self,
        start: Instant,
        end: Instant,
        specs: Vec<ReservationSpec>,
        horizon: Span,
        hold: Option<AskHold>,
    ) -> Result<Availability, AppError> {
        let window = Window::new(start, end)
            .ok_or_else(|| Rejection::BadLease("End date must be later than start date.".into()))?;
        decide::check_limits(specs.iter())?;
        decide::check_horizon(horizon)?;
        let horizon = horizon_end(start, horizon);
        let asked = hold.as_ref().map(|_| specs.clone());
        let mut answer = self
            .search(move |catalog, stop| {
                let want = decide::wanted(catalog, specs.iter().map(|spec| (spec, None)))?;
                let search = crate::search::search_until(horizon, stop);
                let (refusal, hosts) =
                    match admission::admit_or_offer(catalog, window, &want, &[], &search) {
                        Ok(granted) => (None, granted.hosts),
                        Err(refusal) => (Some(refusal), Vec::new()),
                    };
                let zones = zone_capacity(catalog, window);
                Ok::<_, Rejection>(Availability {
                    refusal,
                    hosts,
                    zones,
                    hold: None,
                })
            })
            .await??;
        if let (Some(hold), Some(specs)) = (hold, asked) {
            answer.hold = Some(self.hold_offer(&answer, window, specs, hold).await?);
        }
        Ok(answer)
    }

    /// The leases `query` shows, oldest first, each rendered with `render` (with the catalog,
    /// for what a lease's wire form looks up).
    pub async fn leases<T>(
        &self,
        query: LeaseQuery,
        mut render: impl FnMut(&Catalog, &Lease) -> T,
    ) -> Result<Vec<T>, AppError> {
        self.read(|catalog| {
            lease_query::list(catalog, &query)
                .into_iter()
                .map(|lease| render(catalog, lease))
                .collect()
        })
        .await
    }

    /// Every Blazar host with the reservations holding it from now on that `filter` keeps,
    /// each rendered with `render`.
    pub async fn hosts_held<T>(
        &self,
        filter: HoldFilter,
        mut render: impl FnMut(&Provider, &[Holding]) -> T,
    ) -> Result<Vec<T>, AppError> {
        let now = self.now();
        self.read(|catalog| {
            lease_query::hosts_held(catalog, filter, now)
                .into_iter()
                .map(|(host, holdings)| render(host, &holdings))
                .collect()
        })
        .await
    }

    /// The Blazar host `id` with the reservations holding it from now on that `filter` keeps,
    /// rendered with `render`; `None` when no host has that id.
    pub async fn host_held<T>(
        &self,
        id: i64,
        filter: HoldFilter,
        render: impl FnOnce(&Provider, &[Holding]) -> T,
    ) -> Result<Option<T>, AppError> {
        let now = self.now();
        self.read(|catalog| {
            lease_query::host_held(catalog, id, filter, now)
                .map(|(host, holdings)| render(host, &holdings))
        })
        .await
    }

    /// Every property a Blazar filter may name, with the values hosts give it (the private
    /// ones only when `shown` says so).
    pub async fn property_values(&self, shown: Shown) -> Result<Vec<PropertyValues>, AppError> {
        self.read(|catalog| properties::property_values(catalog, shown))
            .await
    }

    /// Every availability zone with its hosts and the classes measured there.
    pub async fn zones(&self) -> Result<Vec<ZoneClasses>, AppError> {
        self.read(capacity::zones).await
    }

    /// Fires every lifecycle event due now (standing by, every one due [`STANDBY_GRACE`] ago);
    /// returns how many events fired.
    ///
    /// [`STANDBY_GRACE`]: crate::STANDBY_GRACE
    pub async fn fire_due_events(&self) -> Result<usize, AppError> {
        // Standing by, only what the term holder left undone (`engines_horizon`).
        let horizon = self.engines_horizon(self.now());
        let due = self.read(|catalog| catalog.due_events(horizon)).await?;
        let mut fired = 0;
        for (_, kind, lease) in due {
            let changed = self
                .write(move |catalog, now| {
                    fire_event(catalog, lease, kind, now).map(|c| {
                        let events = c
                            .iter()
                            .filter(|c| matches!(c, Change::LeaseRecorded(_)))
                            .count();
                        (c, events)
                    })
                })
                .await?;
            fired += changed;
        }
        Ok(fired)
    }

    /// Records that an event's action failed for good.
    async fn fail_event(
        &self,
        lease: LeaseId,
        kind: EventKind,
        reason: String,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::fail_event(catalog, lease, kind, &reason, now).map(|c| (c, ()))
        })
        .await
    }

    /// How long the lifecycle engine may sleep: until the next due event, at most the poll.
    async fn lifecycle_pause(&self) -> Duration {
        let next = self
            .read(berth_core::Catalog::next_due)
            .await
            .ok()
            .flatten();
        let horizon = self.engines_horizon(self.now());
        next.map_or(LIFECYCLE_POLL, |(at, _, _)| {
            let micros = at.as_micros().saturating_sub(horizon.as_micros()).max(0);
            Duration::from_micros(u64::try_from(micros).unwrap_or(0)).min(LIFECYCLE_POLL)
        })
    }

    /// Runs the lifecycle engine until `stop` resolves. Events that fell due while berth was
    /// down fire on the first pass. A failing event is retried with doubling delays and, after
    /// [`EVENT_ATTEMPTS_MAX`] attempts, recorded as failed (the lease goes to ERROR).
    pub async fn run_lifecycle(&self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut attempts: HashMap<Uuid, u32> = HashMap::new();
        loop {
            let pause = match self.fire_due_events().await {
                Ok(_) => {
                    attempts.clear();
                    self.lifecycle_pause().await
                }
                Err(error) => self.after_failure(&mut attempts, &error).await,
            };
            tokio::select! {
                () = &mut stop => return,
                () = self.lifecycle.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Counts a failed pass against the first due event; returns the back-off delay.
    async fn after_failure(&self, attempts: &mut HashMap<Uuid, u32>, error: &AppError) -> Duration {
        tracing::warn!(%error, "firing lease events failed; retrying");
        // The first event the pass tried: standing by, it tried none due after the horizon.
        let horizon = self.engines_horizon(self.now());
        let Ok(Some((_, kind, lease))) =
            self.read(|c| c.due_events(horizon).first().copied()).await
        else {
            return EVENT_RETRY_FIRST;
        };
        let count = attempts.entry(lease).or_insert(0);
        *count += 1;
        if *count >= EVENT_ATTEMPTS_MAX {
            let reason = format!("failed {count} times: {error}");
            // The due event names a lease by its uuid (a node claim's expiry names a claim, which
            // no lease has: failing it changes nothing).
            if let Err(error) = self.fail_event(LeaseId::new(lease), kind, reason).await {
                tracing::error!(%error, %lease, "cannot record a failed lease event");
            }
            attempts.remove(&lease);
            return EVENT_RETRY_FIRST;
        }
        EVENT_RETRY_FIRST * 2u32.saturating_pow(*count - 1)
    }
}

/// Free capacity per availability zone over `window`, zones sorted (hosts without one last).
fn zone_capacity(catalog: &berth_core::Catalog, window: Window) -> Vec<ZoneCapacity> {
    let mut zones: std::collections::BTreeMap<Option<String>, ZoneCapacity> = Default::default();
    let ledger = catalog.ledger();
    for provider in catalog.providers() {
        if !provider.host().is_some_and(|h| h.reservable) {
            continue;
        }
        let zone_name = provider.availability_zone().map(str::to_owned);
        let zone = zones
            .entry(zone_name.clone())
            .or_insert_with(|| ZoneCapacity {
                zone: zone_name,
                hosts: 0,
                free_hosts: 0,
                free: Vec::new(),
            });
        zone.hosts += 1;
        let peak = ledger.peak(provider.uuid(), window, &[]);
        let free = ledger.is_free(provider.uuid(), window, &[]) && !provider.has_usage();
        zone.free_hosts += u32::from(free);
        for (class, record) in provider.inventories() {
            // A reservation's own class is its holder's business (and names it).
            if berth_core::model::fence::reservation_of_class(class).is_some() {
                continue;
            }
            let left = match peak.exclusive {
                0 => record
                    .capacity()
                    .saturating_sub(provider.used(class) + peak.amount(class)),
                _ => 0,
            };
            match zone.free.iter_mut().find(|(c, _)| c == class.as_str()) {
                Some((_, n)) => *n += left,
                None => zone.free.push((class.as_str().to_owned(), left)),
            }
        }
    }
    let mut out: Vec<ZoneCapacity> = zones.into_values().collect();
    let unzoned = usize::from(out.first().is_some_and(|z| z.zone.is_none()));
    out.rotate_left(unzoned);
    for zone in &mut out {
        zone.free.sort();
    }
    out
}
