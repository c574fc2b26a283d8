//! What failures took from a reservation: the hosts or instances it is missing, on which hosts
//! (each with its status now), and what that is in resources. A reservation keeps what it
//! could not be given on the host it lost it with (`Reservation::missing`), so this reads the
//! reservation and the providers it names, and decides nothing.

use crate::catalog::Catalog;
use crate::model::id::{ProviderId, ReservationId};
use crate::model::lease::{Lease, Reservation, ReservationSpec};
use crate::model::name::ResourceClass;
use crate::model::provider::ProviderStatus;

/// What a reservation counts its missing part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingUnit {
    /// Whole hosts (a host reservation).
    Hosts,
    /// Instance slots (an instance or floating-IP reservation).
    Instances,
}

impl MissingUnit {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            MissingUnit::Hosts => "hosts",
            MissingUnit::Instances => "instances",
        }
    }
}

/// What a reservation is missing on one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingOn {
    /// The provider it was lost with.
    pub provider: ProviderId,
    /// Its Blazar host id, while the provider exists.
    pub host_id: Option<i64>,
    /// Its name, while the provider exists.
    pub name: Option<String>,
    /// Its status, while the provider exists.
    pub status: Option<ProviderStatus>,
    /// How many hosts or instances.
    pub amount: u32,
}

/// What a reservation is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// How many hosts or instances in all.
    pub amount: u32,
    /// What `amount` counts.
    pub unit: MissingUnit,
    /// Per host it was lost with.
    pub hosts: Vec<MissingOn>,
    /// For instance reservations, what the missing instances are in resources.
    pub resources: Option<Vec<(ResourceClass, u64)>>,
}

/// What `reservation` is missing; `None` when nothing is. `going` shows a provider in the status
/// it is being given (a decision taking it out of service asks before it applies the change).
pub fn of_reservation(
    catalog: &Catalog,
    reservation: &Reservation,
    going: Option<(ProviderId, ProviderStatus)>,
) -> Option<Missing> {
    if reservation.missing.is_empty() {
        return None;
    }
    let amount = reservation.missing_amount();
    let hosts = reservation
        .missing
        .iter()
        .map(|(host, n)| {
            let provider = catalog.provider(*host);
            MissingOn {
                provider: *host,
                host_id: provider.map(|p| p.id()),
                name: provider.map(|p| p.name().to_owned()),
                status: match going {
                    Some((uuid, status)) if uuid == *host => Some(status),
                    _ => provider.map(|p| p.status()),
                },
                amount: *n,
            }
        })
        .collect();
    Some(Missing {
        amount,
        unit: match reservation.spec {
            ReservationSpec::Host { .. } => MissingUnit::Hosts,
            _ => MissingUnit::Instances,
        },
        hosts,
        resources: reservation.spec.instance_amounts(u64::from(amount)),
    })
}

/// What each reservation of `lease` is missing, by reservation id, in the lease's order of
/// reservations; empty when nothing is.
pub fn of_lease(
    catalog: &Catalog,
    lease: &Lease,
    going: Option<(ProviderId, ProviderStatus)>,
) -> Vec<(ReservationId, Missing)> {
    lease
        .reservations
        .iter()
        .filter_map(|r| of_reservation(catalog, r, going).map(|m| (r.id, m)))
        .collect()
}
