//! Leases and what they hold: the lease index, the ledger built from their holds, the due
//! lifecycle events, the fences derived from the ledger, and the floating IPs and host
//! properties leases reserve by.

use super::state::Catalog;
use crate::model::fence::Fence;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::{EventKind, FloatingIp, Lease};
use crate::model::ledger::{Ledger, Window};
use crate::model::time::Instant;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use uuid::Uuid;

impl Catalog {
    /// Inserts every stored lease at once: the ledger is bulk-built on a second thread
    /// ([`Ledger::from_holds`]) while this one builds the lease indexes (sorted, then
    /// bulk-loaded), and fences are computed once per host at the end. Same result as inserting
    /// the leases one by one.
    pub(super) fn load_leases(&mut self, leases: Vec<Arc<Lease>>) {
        let ledger = std::thread::scope(|scope| {
            let building = scope.spawn(|| {
                Ledger::from_holds(leases.iter().flat_map(|lease| lease.holds_by_reservation()))
            });
            let mut due: Vec<(Instant, EventKind, LeaseId)> = leases
                .iter()
                .flat_map(|l| l.pending_events().map(move |(at, kind)| (at, kind, l.id)))
                .collect();
            due.sort_unstable();
            debug_assert!(
                self.due.is_empty(),
                "leases are loaded into a fresh catalog"
            );
            self.due = Arc::new(due.into_iter().collect());
            let mut reservation_leases = HashMap::with_capacity(leases.len());
            let mut by_id = HashMap::with_capacity(leases.len());
            for lease in &leases {
                for reservation in &lease.reservations {
                    reservation_leases.insert(reservation.id, lease.id);
                }
                by_id.insert(lease.id, Arc::clone(lease));
            }
            self.reservation_leases = Arc::new(reservation_leases);
            self.leases = Arc::new(by_id);
            building
                .join()
                .expect("invariant: building the ledger does not panic")
        });
        let touched = ledger.hosts().collect();
        self.ledger = ledger;
        self.refence(touched);
    }

    /// Inserts a lease, its holds and its due events, and recomputes its hosts' fences.
    pub(super) fn insert_lease(&mut self, lease: Lease) {
        let mut touched = BTreeSet::new();
        for holds in lease.holds_by_reservation() {
            touched.extend(holds.iter().map(|hold| hold.host));
            self.ledger.add_all(holds);
        }
        let reservation_leases = Arc::make_mut(&mut self.reservation_leases);
        for reservation in &lease.reservations {
            reservation_leases.insert(reservation.id, lease.id);
        }
        Arc::make_mut(&mut self.due).extend(
            lease
                .pending_events()
                .map(|(at, kind)| (at, kind, lease.id)),
        );
        let previous = Arc::make_mut(&mut self.leases).insert(lease.id, Arc::new(lease));
        assert!(
            previous.is_none(),
            "invariant: a lease is removed before it is replaced"
        );
        self.refence(touched);
    }

    pub(super) fn remove_lease(&mut self, id: LeaseId) {
        // Looked up first, so that removing a lease that is not there copies no shared map.
        let Some(lease) = self.leases.get(&id).cloned() else {
            return;
        };
        Arc::make_mut(&mut self.leases).remove(&id);
        let mut touched = BTreeSet::new();
        for reservation in &lease.reservations {
            touched.extend(
                self.ledger
                    .remove(reservation.id)
                    .into_iter()
                    .map(|h| h.host),
            );
            Arc::make_mut(&mut self.reservation_leases).remove(&reservation.id);
        }
        self.refence(touched);
        for (at, kind) in lease.pending_events() {
            Arc::make_mut(&mut self.due).remove(&(at, kind, id));
        }
    }

    /// Recomputes the fence of the providers among `hosts` (floating IPs are not providers);
    /// a provider nested under a host held whole is held whole with it.
    fn refence(&mut self, hosts: BTreeSet<ProviderId>) {
        for host in hosts {
            if !self.providers.contains_key(&host) {
                continue;
            }
            let fence = Fence::of(&self.ledger, host);
            let amounts = fence
                .amounts
                .into_iter()
                .map(|(class, n)| (self.intern(&class), n))
                .collect();
            for nested in self.subtree(host).into_iter().skip(1) {
                if let Some(child) = self.providers.get_mut(&nested) {
                    child.fence.whole = fence.whole;
                }
            }
            if let Some(provider) = self.providers.get_mut(&host) {
                provider.fence = Fence {
                    whole: fence.whole,
                    amounts,
                };
            }
        }
    }

    /// The lease holding a reservation.
    pub fn lease_of_reservation(&self, reservation: ReservationId) -> Option<&Lease> {
        self.reservation_leases
            .get(&reservation)
            .and_then(|id| self.leases.get(id))
            .map(|lease| &**lease)
    }

    /// The leases holding something on `provider`, now or later.
    pub fn leases_holding(&self, provider: ProviderId) -> impl Iterator<Item = &Lease> {
        let ids: BTreeSet<LeaseId> = self
            .ledger
            .holds_on(provider, Window::ALWAYS)
            .into_iter()
            .filter_map(|hold| self.reservation_leases.get(&hold.reservation).copied())
            .collect();
        ids.into_iter()
            .filter_map(|id| self.leases.get(&id).map(|lease| &**lease))
    }

    /// One lease.
    pub fn lease(&self, id: LeaseId) -> Option<&Lease> {
        self.leases.get(&id).map(|lease| &**lease)
    }

    /// Every lease, in no particular order.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.values().map(|lease| &**lease)
    }

    /// What the leases hold, by host and time.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The lifecycle event due first: `(due, kind, lease)`, or a node claim's expiry
    /// `(expires_at, NodeClaimExpiry, claim)`. The id is a lease's or a claim's uuid, as the
    /// kind says ([`crate::decide::lifecycle::fire_event`] takes it back).
    pub fn next_due(&self) -> Option<(Instant, EventKind, Uuid)> {
        let claim = self
            .claim_due
            .first()
            .map(|(at, id)| (*at, EventKind::NodeClaimExpiry, *id));
        let lease = self
            .due
            .first()
            .map(|(at, kind, id)| (*at, *kind, id.uuid()));
        match (lease, claim) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lifecycle events (and node claim expiries) due at or before `now`, earliest first (ends
    /// before starts at the same instant, so back-to-back leases hand over cleanly).
    pub fn due_events(&self, now: Instant) -> Vec<(Instant, EventKind, Uuid)> {
        let mut due: Vec<(Instant, EventKind, Uuid)> = self
            .due
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .map(|(at, kind, id)| (*at, *kind, id.uuid()))
            .collect();
        if self.claim_due.first().is_some_and(|(at, _)| *at <= now) {
            due.extend(
                self.claim_due
                    .iter()
                    .take_while(|(at, _)| *at <= now)
                    .map(|(at, id)| (*at, EventKind::NodeClaimExpiry, *id)),
            );
            due.sort_unstable();
        }
        due
    }

    /// Floating IPs registered for reservation, in registration order.
    pub fn floating_ips(&self) -> impl Iterator<Item = &FloatingIp> {
        self.floating_ips.values()
    }

    /// One floating IP.
    pub fn floating_ip(&self, id: Uuid) -> Option<&FloatingIp> {
        self.floating_ips.get(&id)
    }

    /// Whether a host property is marked private.
    pub fn is_private_property(&self, name: &str) -> bool {
        self.private_properties.contains(name)
    }
}
