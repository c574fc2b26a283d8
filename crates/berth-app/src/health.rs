//! Failures and maintenance: providers taken out of service and returned by an admin or a
//! monitor, the admin's reallocation of a lease off a host, and the providers out of service
//! with the leases they affect. The decisions (healing, degrading, restoring) are the core's
//! `decide::health`; this module resolves Blazar host ids and ownership inside the decision, so
//! they are checked against the latest catalog.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::ProviderId;
use berth_core::decide::health::{self, Effects};
use berth_core::model::lease::Lease;
use berth_core::query::health::{self as outages, Failure};
use berth_core::{Catalog, ProviderStatus, Rejection};
use berth_core::{LeaseId, ReservationId};

/// Who asks for a reallocation: an admin, or the project owning the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requester {
    /// Any lease.
    Admin,
    /// Only this project's leases.
    Project(String),
}

/// What to reallocate: every reservation of a lease on the host, or one reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reallocation {
    /// The lease's reservations on the host.
    Lease(LeaseId),
    /// One reservation.
    Reservation(ReservationId),
}

fn host_uuid(catalog: &Catalog, id: i64) -> Result<ProviderId, Rejection> {
    berth_core::decide::inventory::host(catalog, id).map(berth_core::Provider::uuid)
}

impl Berth {
    /// Sets a provider's status (`up`, `down`, `maintenance`) with an optional reason, and
    /// returns what that did to the leases on it.
    pub async fn set_provider_status(
        &self,
        uuid: ProviderId,
        status: ProviderStatus,
        reason: Option<String>,
    ) -> Result<Effects, AppError> {
        self.write(move |catalog, now| health::set_status(catalog, uuid, status, reason, now))
            .await
    }

    /// [`Berth::set_provider_status`] for a Blazar host, by its id.
    pub async fn set_host_status(
        &self,
        id: i64,
        status: ProviderStatus,
        reason: Option<String>,
    ) -> Result<Effects, AppError> {
        self.write(move |catalog, now| {
            let uuid = host_uuid(catalog, id)?;
            health::set_status(catalog, uuid, status, reason, now)
        })
        .await
    }

    /// Moves what a lease (or one reservation) holds on host `id` to other hosts in service;
    /// all or nothing. A project may reallocate only its own leases.
    pub async fn reallocate(
        &self,
        id: i64,
        what: Reallocation,
        requester: Requester,
    ) -> Result<Lease, AppError> {
        self.write(move |catalog, now| {
            let host = host_uuid(catalog, id)?;
            let (lease, reservation) = match what {
                Reallocation::Lease(lease) => (lease, None),
                Reallocation::Reservation(r) => {
                    let lease = catalog
                        .lease_of_reservation(r)
                        // The refusal names the id the caller gave.
                        .ok_or(Rejection::LeaseNotFound(LeaseId::new(r.uuid())))?;
                    (lease.id, Some(r))
                }
            };
            if let Requester::Project(project) = &requester
                && catalog
                    .lease(lease)
                    .is_some_and(|l| *l.project_id != **project)
            {
                return Err(Rejection::LeaseNotFound(lease));
            }
            health::reallocate(catalog, host, lease, reservation, now)
        })
        .await
    }

    /// Every provider out of service, in creation order, with the leases it affects, each
    /// rendered with `render`.
    pub async fn failures<T>(
        &self,
        render: impl FnMut(&Failure<'_>) -> T,
    ) -> Result<Vec<T>, AppError> {
        self.read(|catalog| outages::failures(catalog).iter().map(render).collect())
            .await
    }
}
