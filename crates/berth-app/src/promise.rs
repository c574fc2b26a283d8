//! Promise use cases: flavors, the reservation policy, reservations (leases with Promise terms),
//! and instances created against a reservation or from unreserved capacity; and Promise's
//! reads, each a core query run over the catalog: capacity ([`berth_core::query::capacity`],
//! and admission's count of instances that fit), reservations and instances
//! ([`berth_core::query::promise`]).

use crate::error::AppError;
use crate::leases::{find_lease, horizon_end, lease_id};
use crate::search::search_until;
use crate::service::Berth;
use berth_core::decide::admission::Search;
use berth_core::decide::promise::{self as decide, NewInstance, NewReservation, ReservationChange};
use berth_core::model::capacity::{Measure, Series};
use berth_core::model::cloud::Origin;
use berth_core::model::lease::Lease;
use berth_core::model::lease::instance_amounts;
use berth_core::model::promise::{Ask, CapacityPool, Flavor, Policy, PromiseInstance, PromiseKind};
use berth_core::query::{
    self,
    capacity::{Extent, VectorCapacity},
    promise::{InstanceSeen, KindQuery, Matched, Named, ReservationQuery},
};
use berth_core::{Catalog, Change, Instant, Rejection, ResourceClass};
use berth_core::{LeaseId, ReservationId, Span};
use std::collections::BTreeMap;
use uuid::Uuid;

/// A flavor to create.
#[derive(Debug, Clone)]
pub struct CreateFlavor {
    /// Its id; generated when absent.
    pub id: Option<String>,
    /// Its name.
    pub name: String,
    /// Virtual CPUs.
    pub vcpus: u64,
    /// Memory, MB.
    pub ram_mb: u64,
    /// Disk, GB.
    pub disk_gb: u64,
    /// CPU architecture.
    pub cpu_architecture: Option<String>,
    /// Extra specs.
    pub extra_specs: BTreeMap<String, String>,
}

/// A Promise reservation to create.
#[derive(Debug, Clone)]
pub struct CreateReservation {
    /// The Promise resource type.
    pub kind: PromiseKind,
    /// What it asks for.
    pub ask: Ask,
    /// `startTime` (absent: now).
    pub start: Option<Instant>,
    /// `endTime` (absent: the policy's longest).
    pub end: Option<Instant>,
    /// `expiryTime`.
    pub expiry: Option<Instant>,
    /// `zoneId`.
    pub zone: Option<String>,
    /// `provider-id`: only that provider cloud's capacity.
    pub provider: Option<uuid::Uuid>,
    /// Priority, 0 to 100, as asked.
    pub priority: u32,
    /// What priorities the caller was granted: a higher priority is lowered to the ceiling.
    pub grant: PriorityGrant,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// How far after the start the counter-offer searches.
    pub horizon_micros: i64,
    /// The request's `Idempotency-Key`, if any: a retry answers with the reservation it created.
    pub idempotency: Option<berth_core::model::idempotency::Idempotent>,
    /// A hold (a lease in `HELD` of the same project) the reservation is made from, in one
    /// decision (berth's `hold_id`).
    pub hold: Option<uuid::Uuid>,
}

/// What priorities a caller may give its reservations (an operator's grant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityGrant {
    /// The highest priority the caller's reservations keep; a higher one is lowered to it.
    pub ceiling: u32,
    /// Whether the caller's reservations may displace other projects' reservations (otherwise
    /// only its own project's lower-priority ones).
    pub across_projects: bool,
}

impl PriorityGrant {
    /// The priority a request asking for `asked` gets.
    pub fn granted(self, asked: u32) -> u32 {
        asked.min(self.ceiling)
    }
}

/// An instance to create.
#[derive(Debug, Clone)]
pub struct CreateInstance {
    /// Its name.
    pub name: String,
    /// Flavor id or name.
    pub flavor: String,
    /// Image, echoed.
    pub image: Option<String>,
    /// The Promise reservation it draws on.
    pub reservation: Option<Uuid>,
    /// The zone, without a reservation.
    pub zone: Option<String>,
    /// `provider-id`: only on that provider cloud's capacity.
    pub provider: Option<Uuid>,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
}

/// What a capacity query measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The four figures of one measure (a class, or addresses).
    Measure(Measure),
    /// How many instances of a shape fit.
    Shape(Vec<(ResourceClass, u64)>),
    /// How many instances of a flavor (id or name) fit.
    Flavor(String),
}

/// A capacity query (the ETSI `/promise/capacity/{kind}/query`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityQuery {
    /// Where and when it looks, and whose capacity (berth's own, one provider cloud's, or
    /// every origin's).
    pub extent: Extent,
    /// What it measures.
    pub asked: Asked,
}

/// The answer of a capacity query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capacity {
    /// How many instances of the shape fit over the whole window.
    Instances(u64),
    /// The measure's figures over the window, step by step.
    Figures(Series),
}

/// The answer of a capacity query over one scope: the capacity, and for the figures of a class
/// or of addresses how much of `reserved` open holds keep ([`query::capacity::held_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    /// The capacity.
    pub capacity: Capacity,
    /// How much of the reserved figure is only held, at its peak over the window.
    pub held: Option<i64>,
}

/// A capacity answer over a query's whole scope, and the answer of each origin in it
/// ([`query::capacity::origins`]: only the origin the query names, when it names one), all
/// read from one catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByOrigin<T> {
    /// Over the whole scope.
    pub whole: T,
    /// Per origin, berth's own first, then the provider clouds by id.
    pub origins: Vec<(Origin, T)>,
}

/// What a capacity query computes, a flavor resolved to its shape.
enum Measuring {
    /// The figures of a measure.
    Figures(Measure),
    /// How many instances of a shape fit.
    Fit(Vec<(ResourceClass, u64)>),
}

/// The answer of a capacity query within `extent`.
fn measured(catalog: &Catalog, extent: &Extent, asked: &Measuring) -> Result<Measured, Rejection> {
    let scope = extent.scope();
    match asked {
        Measuring::Figures(measure) => Ok(Measured {
            capacity: Capacity::Figures(query::capacity::series_in(
                catalog,
                scope,
                extent.window,
                measure,
                &extent.without,
            )?),
            held: query::capacity::held_of(catalog, extent, measure),
        }),
        Measuring::Fit(shape) => Ok(Measured {
            capacity: Capacity::Instances(berth_core::decide::admission::instances_that_fit_in(
                catalog,
                scope,
                extent.window,
                shape,
                &extent.without,
            )?),
            held: None,
        }),
    }
}

/// The most ledger reservations one Promise reservation may become.
const RESERVATION_IDS_MAX: usize = berth_core::limits::RESERVATIONS_PER_LEASE_MAX;

impl Berth {
    /// Answers a capacity query over its scope and per origin: the figures of a measure
    /// ([`query::capacity::series_in`]) with what of them is only held, or how many instances
    /// of a shape or flavor fit, counted as admission counts them
    /// ([`berth_core::decide::admission::instances_that_fit_in`]).
    pub async fn capacity(&self, query: CapacityQuery) -> Result<ByOrigin<Measured>, AppError> {
        let answer = self
            .read(move |catalog| {
                let asked = match query.asked {
                    Asked::Measure(measure) => Measuring::Figures(measure),
                    Asked::Shape(shape) => Measuring::Fit(shape),
                    // A flavor has at least one vcpu and one MB (`create_flavor`), so its
                    // shape is never empty.
                    Asked::Flavor(name) => Measuring::Fit(
                        catalog
                            .flavor(&name)
                            .map(|f| instance_amounts(f.vcpus, f.ram_mb, f.disk_gb, 1))
                            .ok_or(Rejection::FlavorNotFound(name))?,
                    ),
                };
                let (whole, origins) = query::capacity::by_origin(catalog, &query.extent, |e| {
                    measured(catalog, e, &asked)
                })?;
                Ok::<_, Rejection>(ByOrigin { whole, origins })
            })
            .await?;
        Ok(answer?)
    }

    /// The capacity of Promise's vector within `extent` (the RPC `query-capacity`), and per
    /// origin.
    pub async fn capacity_vector(
        &self,
        extent: Extent,
    ) -> Result<ByOrigin<VectorCapacity>, AppError> {
        let answer = self
            .read(move |catalog| {
                let (whole, origins) = query::capacity::by_origin(catalog, &extent, |e| {
                    query::capacity::vector(catalog, e)
                })?;
                Ok::<_, Rejection>(ByOrigin { whole, origins })
            })
            .await?;
        Ok(answer?)
    }

    /// The reservations an ETSI query names or lists by kind, handed with the catalog to
    /// `render` (a reservation is shown with what the catalog says of it).
    pub async fn reservations_of_kind<R>(
        &self,
        query: KindQuery,
        render: impl for<'c> FnOnce(&'c Catalog, Named<'c>) -> R,
    ) -> Result<R, AppError> {
        let rendered = self
            .read(move |catalog| {
                query::promise::of_kind(catalog, &query).map(|named| render(catalog, named))
            })
            .await?;
        Ok(rendered?)
    }

    /// The reservations a `query-reservation` filter matches, and on request what they hold
    /// over time.
    pub async fn matching_reservations(
        &self,
        query: ReservationQuery,
    ) -> Result<Matched, AppError> {
        self.read(move |catalog| query::promise::matching(catalog, &query))
            .await
    }

    /// The instances `project` (`None`: any) sees, handed to `render`.
    pub async fn instances<R>(
        &self,
        project: Option<String>,
        render: impl FnOnce(Vec<InstanceSeen<'_>>) -> R,
    ) -> Result<R, AppError> {
        self.read(|catalog| render(query::promise::instances(catalog, project.as_deref())))
            .await
    }

    /// Creates a flavor and returns it.
    pub async fn create_flavor(&self, cmd: CreateFlavor) -> Result<Flavor, AppError> {
        let id = cmd.id.unwrap_or_else(|| self.new_uuid().to_string());
        self.write(move |catalog, now| {
            let flavor = Flavor {
                id,
                name: cmd.name.trim().to_owned(),
                vcpus: cmd.vcpus,
                ram_mb: cmd.ram_mb,
                disk_gb: cmd.disk_gb,
                cpu_architecture: cmd.cpu_architecture,
                extra_specs: cmd.extra_specs,
                created_at: now,
            };
            decide::create_flavor(catalog, flavor.clone()).map(|c| (c, flavor))
        })
        .await
    }

    /// Deletes a flavor by id or name.
    pub async fn delete_flavor(&self, id: String) -> Result<(), AppError> {
        self.write(move |catalog, _| decide::delete_flavor(catalog, &id).map(|c| (c, ())))
            .await
    }

    /// Replaces the reservation policy.
    pub async fn set_policy(&self, policy: Policy) -> Result<Policy, AppError> {
        self.write(move |_, _| decide::set_policy(policy.clone()).map(|c| (c, policy)))
            .await
    }

    /// Changes the limits a patch names, over the latest policy (in the same decision, so two
    /// concurrent changes never undo each other).
    pub async fn update_policy(
        &self,
        patch: berth_core::model::promise::PolicyPatch,
    ) -> Result<Policy, AppError> {
        self.write(move |catalog, _| {
            let policy = patch.apply(catalog.policy());
            decide::set_policy(policy.clone()).map(|c| (c, policy))
        })
        .await
    }

    /// Turns `hold` into the Promise reservation `new` under the writer lock: admitted over the
    /// hold's own capacity, nothing is searched or displaced.
    async fn reservation_from_hold(
        &self,
        new: NewReservation,
        hold: LeaseId,
        key: Option<berth_core::model::idempotency::Idempotent>,
    ) -> Result<Lease, AppError> {
        let lease = self
            .write_once(key, find_lease, lease_id, move |catalog, now| {
                decide::create_reservation_from_hold(catalog, &new, hold, now)
            })
            .await?;
        self.lifecycle.notify_one();
        Ok(lease)
    }

    /// Admits a Promise reservation (displacing lower priorities when the policy allows) and
    /// returns its lease (with an idempotency key seen before: the lease that key's first
    /// request created, as it is now).
    pub async fn create_reservation(&self, cmd: CreateReservation) -> Result<Lease, AppError> {
        let wanted = cmd.ask.containers.len() + 3;
        let hold = cmd.hold.map(LeaseId::new);
        let new = NewReservation {
            id: LeaseId::new(self.new_uuid()),
            reservation_ids: (0..wanted.min(RESERVATION_IDS_MAX + 1))
                .map(|_| ReservationId::new(self.new_uuid()))
                .collect(),
            event_ids: [self.new_uuid(), self.new_uuid(), self.new_uuid()],
            kind: cmd.kind,
            ask: cmd.ask,
            start: cmd.start,
            end: cmd.end,
            expiry: cmd.expiry,
            zone: cmd.zone,
            provider: cmd.provider,
            priority: cmd.grant.granted(cmd.priority),
            displace_other_projects: cmd.grant.across_projects,
            project_id: cmd.project_id,
            user_id: cmd.user_id,
            notice_lead: self.notice_lead(),
        };
        let horizon_micros = cmd.horizon_micros;
        berth_core::decide::lease::check_horizon(Span::from_micros(horizon_micros))?;
        let now = self.now();
        if let Some(hold) = hold {
            return self.reservation_from_hold(new, hold, cmd.idempotency).await;
        }
        let horizon = move |new: &NewReservation| {
            horizon_end(new.start.unwrap_or(now), Span::from_micros(horizon_micros))
        };
        // As asked, over a snapshot: what fits goes to the writer lock with nothing to search.
        // A key seen before goes straight to its decision, which answers with what it made.
        let key = cmd.idempotency;
        let asked = new.clone();
        let fits = self
            .read_blocking(move |catalog| {
                decide::create_reservation(catalog, &asked, now, &Search::NONE).map(|_| ())
            })
            .await?;
        let fits = match fits {
            Err(_) if self.seen(key.as_ref()).await? => Ok(()),
            other => other,
        };
        let displacing = match fits {
            Ok(()) => Vec::new(),
            Err(berth_core::Rejection::DoesNotFit(_)) => {
                // The displacement search (and the counter-offer) over a snapshot.
                let searched = new.clone();
                let found = self
                    .search(move |catalog, stop| {
                        let search = search_until(horizon(&searched), stop);
                        decide::create_reservation(catalog, &searched, now, &search)
                            .map(|(changes, lease)| decide::displaced_by(&changes, lease.id))
                    })
                    .await?;
                found?
            }
            Err(other) => return Err(other.into()),
        };
        // Under the lock, only the chosen answer is re-checked: admission as asked, or with
        // exactly the displacement chosen above. If the catalog moved so that neither holds,
        // the request is refused (not retried); its counter-offer is searched after the lock.
        let decided = new.clone();
        let result = self
            .write_once(key, find_lease, lease_id, move |catalog, now| {
                decide::create_reservation_displacing(
                    catalog,
                    &decided,
                    now,
                    &Search::NONE,
                    &displacing,
                )
            })
            .await;
        let lease = match result {
            Err(AppError::Rejected(rejection)) => {
                let end = horizon(&new);
                let offer = move |catalog: &berth_core::Catalog, search: &Search<'_>| {
                    decide::create_reservation(catalog, &new, now, search).err()
                };
                return Err(self.with_offer(rejection, move |_| end, offer).await);
            }
            other => other?,
        };
        self.lifecycle.notify_one();
        Ok(lease)
    }

    /// Updates a Promise reservation of `project` (`None`: any). Nothing is searched under the
    /// writer lock: a refusal's counter-offer is searched after it.
    pub async fn update_reservation(
        &self,
        id: Uuid,
        project: Option<String>,
        change: ReservationChange,
        horizon_micros: i64,
    ) -> Result<Lease, AppError> {
        let id = LeaseId::new(id);
        berth_core::decide::lease::check_horizon(Span::from_micros(horizon_micros))?;
        let decided = change.clone();
        let result = self
            .write(move |catalog, now| {
                decide::owned(catalog, id, project.as_deref())?;
                decide::update_reservation(catalog, id, &decided, now, &Search::NONE)
            })
            .await;
        let lease = match result {
            Err(AppError::Rejected(rejection)) => {
                let now = self.now();
                let start = change.start;
                let horizon = move |catalog: &berth_core::Catalog| {
                    let current = catalog.lease(id).map_or(now, |l| l.start);
                    horizon_end(
                        start.unwrap_or(current).max(now),
                        Span::from_micros(horizon_micros),
                    )
                };
                let offer = move |catalog: &berth_core::Catalog, search: &Search<'_>| {
                    decide::update_reservation(catalog, id, &change, now, search).err()
                };
                return Err(self.with_offer(rejection, horizon, offer).await);
            }
            other => other?,
        };
        self.lifecycle.notify_one();
        Ok(lease)
    }

    /// Cancels (deletes) a reservation of `project` (`None`: any), releasing what it holds.
    pub async fn cancel_reservation(
        &self,
        id: Uuid,
        project: Option<String>,
    ) -> Result<(), AppError> {
        let id = LeaseId::new(id);
        self.write(move |catalog, now| {
            decide::owned(catalog, id, project.as_deref())?;
            berth_core::decide::lease::delete_lease(catalog, id, now).map(|c| (c, ()))
        })
        .await
    }

    /// Makes a planned capacity change (the id is generated) and returns it.
    pub async fn change_capacity(
        &self,
        mut change: berth_core::decide::pools::CapacityChange,
    ) -> Result<CapacityPool, AppError> {
        change.id = self.new_uuid();
        let pool = self
            .write(move |catalog, now| {
                berth_core::decide::pools::change_capacity(catalog, &change, now)
            })
            .await?;
        self.lifecycle.notify_one();
        Ok(pool)
    }

    /// Withdraws a planned capacity change.
    pub async fn delete_pool(&self, id: Uuid) -> Result<(), AppError> {
        self.write(move |catalog, _| {
            berth_core::decide::pools::delete_pool(catalog, id).map(|c| (c, ()))
        })
        .await
    }

    /// Creates an instance and records its allocations.
    pub async fn create_instance(&self, cmd: CreateInstance) -> Result<PromiseInstance, AppError> {
        let new = NewInstance {
            id: self.new_uuid(),
            name: cmd.name,
            flavor: cmd.flavor,
            image: cmd.image,
            reservation: cmd.reservation.map(LeaseId::new),
            zone: cmd.zone,
            provider: cmd.provider,
            project_id: cmd.project_id,
            user_id: cmd.user_id,
        };
        let policy = self.fence_policy();
        self.write(move |catalog, now| decide::create_instance(catalog, &new, now, policy))
            .await
    }

    /// Destroys an instance of `project` (`None`: any), releasing its allocations.
    pub async fn destroy_instance(
        &self,
        id: Uuid,
        project: Option<String>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, _| {
            decide::destroy_instance(catalog, id, project.as_deref()).map(|c: Vec<Change>| (c, ()))
        })
        .await
    }
}
