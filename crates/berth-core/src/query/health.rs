//! Providers out of service and the leases their status affects (what
//! [`crate::decide::health`] heals and degrades, and what the dashboard's failures view shows).

use crate::catalog::Catalog;
use crate::model::id::ProviderId;
use crate::model::lease::Lease;
use crate::model::provider::Provider;

/// The leases a provider's status affects: those that hold it now or later, in creation order.
/// What a reservation is missing stays on the host it was lost with, so this includes the
/// leases missing something there.
pub fn affected_leases(catalog: &Catalog, uuid: ProviderId) -> Vec<&Lease> {
    let mut leases: Vec<&Lease> = catalog
        .leases_holding(uuid)
        .filter(|l| l.holds_capacity())
        .collect();
    leases.sort_by_key(|l| (l.created_at, l.id));
    leases
}

/// A lease a provider out of service affects.
#[derive(Debug, Clone, Copy)]
pub struct Affected<'c> {
    /// The lease.
    pub lease: &'c Lease,
    /// How many hosts or instances its reservations are missing on the provider.
    pub missing_here: u32,
}

/// A provider out of service and the leases it affects.
#[derive(Debug, Clone)]
pub struct Failure<'c> {
    /// The provider (down or in maintenance).
    pub provider: &'c Provider,
    /// The leases it affects, in creation order.
    pub leases: Vec<Affected<'c>>,
}

/// Every provider out of service, in creation order, with the leases it affects.
pub fn failures(catalog: &Catalog) -> Vec<Failure<'_>> {
    catalog
        .providers()
        .filter(|p| !p.is_up())
        .map(|provider| {
            let here = provider.uuid();
            let leases = affected_leases(catalog, here)
                .into_iter()
                .map(|lease| Affected {
                    lease,
                    missing_here: lease
                        .reservations
                        .iter()
                        .flat_map(|r| r.missing.iter())
                        .filter(|(host, _)| *host == here)
                        .map(|(_, n)| *n)
                        .sum(),
                })
                .collect();
            Failure { provider, leases }
        })
        .collect()
}
