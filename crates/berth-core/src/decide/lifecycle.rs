//! The lifecycle engine's decision: firing whatever event is due, a lease's own events, its
//! preemption notice, a Promise reservation's claim deadline, a node claim's expiry, or the
//! lapse of a hold or a waitlisted lease.

use crate::catalog::Catalog;
use crate::change::Change;
use crate::decide::{baremetal, lease, promise};
use crate::model::id::LeaseId;
use crate::model::lease::EventKind;
use crate::model::time::Instant;
use crate::rejection::Rejection;
use uuid::Uuid;

/// Fires event `kind` of `id` (a lease, or a node claim for [`EventKind::NodeClaimExpiry`]) if
/// it is due at `now` and not acted on yet. Firing is idempotent: an event that is not due,
/// already fired, or whose lease or claim is gone decides nothing.
pub fn fire_event(
    catalog: &Catalog,
    id: Uuid,
    kind: EventKind,
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    match kind {
        // The due index names a claim by its uuid for a node claim's expiry, and a lease by its
        // uuid for every other event.
        EventKind::NodeClaimExpiry => Ok(baremetal::expire_claim(catalog, id, now)),
        EventKind::ClaimExpiry => Ok(catalog
            .lease(LeaseId::new(id))
            .map(|current| promise::expire(catalog, current, now))
            .unwrap_or_default()),
        EventKind::Lapse => Ok(lease::lapse(catalog, LeaseId::new(id), now)),
        EventKind::StartLease
        | EventKind::BeforeEndLease
        | EventKind::EndLease
        | EventKind::PreemptionNotice
        | EventKind::IdleNotice
        | EventKind::IdleRelease => lease::fire_lease_event(catalog, LeaseId::new(id), kind, now),
    }
}
