//! Leases as callers see them: a lease is visible to its own project and to admins; the lease
//! list with its filters; and which reservations hold each host from now on.

use crate::catalog::Catalog;
use crate::model::id::{LeaseId, ReservationId};
use crate::model::lease::{Lease, LeaseStatus};
use crate::model::ledger::Window;
use crate::model::provider::Provider;
use crate::model::time::Instant;
use std::collections::BTreeSet;
use uuid::Uuid;

/// Whether a caller acting for `project` (`None`: for every project, an admin) sees `lease`.
pub fn visible(lease: &Lease, project: Option<&str>) -> bool {
    project.is_none_or(|p| p == &*lease.project_id)
}

/// The lease `id`, when a caller acting for `project` sees it (to anyone else it does not
/// exist).
pub fn find<'c>(catalog: &'c Catalog, id: LeaseId, project: Option<&str>) -> Option<&'c Lease> {
    catalog.lease(id).filter(|lease| visible(lease, project))
}

/// A lease listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseQuery {
    /// The project the caller acts for (`None`: every project, an admin).
    pub viewer: Option<String>,
    /// Only this project's leases, when given.
    pub project: Option<String>,
    /// Only leases in this status, when given.
    pub status: Option<LeaseStatus>,
}

/// The leases `query` shows, oldest first.
pub fn list<'c>(catalog: &'c Catalog, query: &LeaseQuery) -> Vec<&'c Lease> {
    let mut leases: Vec<&Lease> = catalog
        .leases()
        .filter(|l| visible(l, query.viewer.as_deref()))
        .filter(|l| query.status.is_none_or(|s| l.status == s))
        .filter(|l| query.project.as_ref().is_none_or(|p| **p == *l.project_id))
        .collect();
    leases.sort_by_key(|l| (l.created_at, l.id));
    leases
}

/// A filter on an id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IdFilter {
    /// Any id.
    #[default]
    Any,
    /// This id only.
    Is(Uuid),
    /// No id: the caller named something that is not one.
    Nothing,
}

impl IdFilter {
    /// Whether the filter keeps `id`.
    pub fn admits(self, id: Uuid) -> bool {
        match self {
            IdFilter::Any => true,
            IdFilter::Is(wanted) => wanted == id,
            IdFilter::Nothing => false,
        }
    }
}

/// Which holds a host listing shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoldFilter {
    /// Holds of this lease.
    pub lease: IdFilter,
    /// Holds of this reservation.
    pub reservation: IdFilter,
}

/// A reservation holding a host, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    /// The reservation.
    pub reservation: ReservationId,
    /// Its lease.
    pub lease: LeaseId,
    /// The window of its first hold on the host from now on.
    pub window: Window,
}

/// The reservations holding `provider` now or later that `filter` keeps, each once, in the
/// ledger's order.
pub fn holdings(
    catalog: &Catalog,
    provider: &Provider,
    filter: HoldFilter,
    now: Instant,
) -> Vec<Holding> {
    let ahead = Window::onwards(now);
    let mut seen = BTreeSet::new();
    catalog
        .ledger()
        .holds_on(provider.uuid(), ahead)
        .into_iter()
        .filter(|hold| seen.insert(hold.reservation))
        .filter_map(|hold| {
            let lease = catalog.lease_of_reservation(hold.reservation)?;
            let wanted = filter.lease.admits(lease.id.uuid())
                && filter.reservation.admits(hold.reservation.uuid());
            wanted.then_some(Holding {
                reservation: hold.reservation,
                lease: lease.id,
                window: hold.window,
            })
        })
        .collect()
}

/// Every Blazar host, in creation order, with the reservations holding it that `filter` keeps.
pub fn hosts_held(
    catalog: &Catalog,
    filter: HoldFilter,
    now: Instant,
) -> Vec<(&Provider, Vec<Holding>)> {
    catalog
        .providers()
        .filter(|p| p.host().is_some())
        .map(|p| (p, holdings(catalog, p, filter, now)))
        .collect()
}

/// The Blazar host `id` with the reservations holding it that `filter` keeps; `None` when no
/// host has that id.
pub fn host_held(
    catalog: &Catalog,
    id: i64,
    filter: HoldFilter,
    now: Instant,
) -> Option<(&Provider, Vec<Holding>)> {
    let provider = catalog.provider_by_id(id).filter(|p| p.host().is_some())?;
    Some((provider, holdings(catalog, provider, filter, now)))
}

/// A share of a lease with what its project's consumers hold inside the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareUse {
    /// The share.
    pub share: crate::model::lease::Share,
    /// What the project's consumers hold inside the lease's reservations, by class (every
    /// class they hold, capped or not).
    pub used: std::collections::BTreeMap<crate::model::name::ResourceClass, u64>,
}

/// The shares of lease `id` the caller sees, each with its project's use: every share for the
/// lease's project and admins (`viewer` `None`), only its own for a project the lease is shared
/// with; `None` when the caller sees neither the lease nor a share of it.
pub fn shares(catalog: &Catalog, id: LeaseId, viewer: Option<&str>) -> Option<Vec<ShareUse>> {
    let lease = catalog.lease(id)?;
    let owner = viewer.is_none_or(|p| p == &*lease.project_id);
    if !owner && viewer.is_none_or(|p| lease.share_of(p).is_none()) {
        return None;
    }
    let shares = lease.shares().into_iter().flat_map(|s| s.0.iter());
    Some(
        shares
            .filter(|s| owner || viewer == Some(s.project_id.as_str()))
            .map(|share| share_use(catalog, lease, share))
            .collect(),
    )
}

/// `share` of `lease` with what its project's consumers hold inside the lease.
pub fn share_use(catalog: &Catalog, lease: &Lease, share: &crate::model::lease::Share) -> ShareUse {
    ShareUse {
        used: crate::query::presentation::shared_holdings(catalog, lease, &share.project_id, None),
        share: share.clone(),
    }
}
