//! Leases and what they hold: the lease index, the ledger built from their holds, the due
//! lifecycle events, the fences derived from the ledger, and the floating IPs and host
//! properties leases reserve by.

use super::state::{ByLeaseId, Catalog};
use crate::model::fence::Fence;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::{EventKind, FloatingIp, Lease, LeaseStatus};
use crate::model::ledger::{Ledger, Window};
use crate::model::time::Instant;
use std::collections::BTreeSet;
use std::sync::Arc;
use uuid::Uuid;

impl Catalog {
    /// Inserts every stored lease at once: the ledger is bulk-built on a second thread
    /// ([`Ledger::from_holders`]) while this one builds the lease indexes (sorted, then
    /// bulk-loaded), and fences are computed once per host at the end. Same result as inserting
    /// the leases one by one. A lease no one else holds yet (as stores hand them over) gives
    /// back the spare room decoding left in its lists and shares its project and user ids.
    pub(super) fn load_leases(&mut self, mut leases: Vec<Arc<Lease>>) {
        for lease in &mut leases {
            if let Some(lease) = Arc::get_mut(lease) {
                lease.shrink_to_fit();
                self.share_owners(lease);
            }
        }
        let ledger = std::thread::scope(|scope| {
            let building = scope.spawn(|| Ledger::from_holders(&leases));
            let mut due: Vec<(Instant, EventKind, LeaseId)> = leases
                .iter()
                .filter_map(|l| first_due(l).map(|(at, kind)| (at, kind, l.id)))
                .collect();
            due.sort_unstable();
            debug_assert!(
                self.due.is_empty(),
                "leases are loaded into a fresh catalog"
            );
            self.due = due.into_iter().collect();
            self.reservation_leases = leases
                .iter()
                .flat_map(|lease| lease.reservations.iter().map(|r| (r.id, Arc::clone(lease))))
                .collect();
            self.leases = leases.iter().map(|l| ByLeaseId(Arc::clone(l))).collect();
            for lease in &leases {
                self.park(lease);
                self.list_occurrence(lease);
            }
            building
                .join()
                .expect("invariant: building the ledger does not panic")
        });
        let touched = ledger.hosts().collect();
        self.ledger = ledger;
        self.refence(touched);
    }

    /// Inserts a lease, its holds and its due events, and recomputes its hosts' fences.
    pub(super) fn insert_lease(&mut self, mut lease: Lease) {
        self.share_owners(&mut lease);
        let lease = Arc::new(lease);
        let touched = self
            .ledger
            .add_holder(&lease)
            .into_iter()
            .map(|hold| hold.host)
            .collect();
        for reservation in &lease.reservations {
            self.reservation_leases
                .insert(reservation.id, Arc::clone(&lease));
        }
        if let Some((at, kind)) = first_due(&lease) {
            self.due.insert((at, kind, lease.id));
        }
        self.park(&lease);
        self.list_occurrence(&lease);
        let replaced = self.leases.insert(ByLeaseId(lease));
        assert!(
            replaced.is_none(),
            "invariant: a lease is removed before it is replaced"
        );
        self.refence(touched);
    }

    /// Makes the lease name the catalog's shared copies of its project and user ids.
    fn share_owners(&mut self, lease: &mut Lease) {
        lease.project_id = self.share_owner(&lease.project_id);
        lease.user_id = self.share_owner(&lease.user_id);
    }

    pub(super) fn remove_lease(&mut self, id: LeaseId) {
        let Some(ByLeaseId(lease)) = self.leases.remove(&id) else {
            return;
        };
        let mut touched = BTreeSet::new();
        for reservation in &lease.reservations {
            touched.extend(
                self.ledger
                    .remove(reservation.id)
                    .into_iter()
                    .map(|h| h.host),
            );
            self.reservation_leases.remove(&reservation.id);
        }
        self.refence(touched);
        if let Some((at, kind)) = first_due(&lease) {
            self.due.remove(&(at, kind, id));
        }
        self.unpark(&lease);
        self.unlist_occurrence(&lease);
    }

    /// Lists an occurrence of a series under its series.
    fn list_occurrence(&mut self, lease: &Lease) {
        if let Some(occurrence) = lease.series() {
            self.series
                .entry(occurrence.series_id)
                .or_default()
                .insert((occurrence.index, lease.id));
        }
    }

    /// Undoes [`Catalog::list_occurrence`] for a lease being removed.
    fn unlist_occurrence(&mut self, lease: &Lease) {
        let Some(occurrence) = lease.series() else {
            return;
        };
        if let Some(listed) = self.series.get_mut(&occurrence.series_id) {
            listed.remove(&(occurrence.index, lease.id));
            if listed.is_empty() {
                self.series.remove(&occurrence.series_id);
            }
        }
    }

    /// The occurrences of a series (berth) left, in order (none for an unknown series).
    pub fn series(&self, series_id: Uuid) -> impl Iterator<Item = &Lease> {
        self.series
            .get(&series_id)
            .into_iter()
            .flatten()
            .filter_map(|(_, id)| self.lease(*id))
    }

    /// Counts a hold, or lists a waitlisted lease.
    fn park(&mut self, lease: &Lease) {
        match lease.status {
            LeaseStatus::Held => {
                *Arc::make_mut(&mut self.open_holds)
                    .entry(Arc::clone(&lease.project_id))
                    .or_default() += 1;
            }
            LeaseStatus::Waiting => {
                self.waiting.insert((lease.created_at, lease.id));
            }
            _ => {}
        }
    }

    /// Undoes [`Catalog::park`] for a lease being removed.
    fn unpark(&mut self, lease: &Lease) {
        match lease.status {
            LeaseStatus::Held => {
                let holds = Arc::make_mut(&mut self.open_holds);
                if let Some(n) = holds.get_mut(&lease.project_id) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        holds.remove(&lease.project_id);
                    }
                }
            }
            LeaseStatus::Waiting => {
                self.waiting.remove(&(lease.created_at, lease.id));
            }
            _ => {}
        }
    }

    /// How many open holds (leases in `HELD`) `project` keeps.
    pub fn open_holds(&self, project: &str) -> u32 {
        self.open_holds.get(project).copied().unwrap_or(0)
    }

    /// The waitlisted leases, first come first.
    pub fn waiting(&self) -> impl Iterator<Item = &Lease> {
        self.waiting.iter().filter_map(|(_, id)| self.lease(*id))
    }

    /// Whether any lease is waitlisted.
    pub fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
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
            .map(|lease| &**lease)
    }

    /// The leases holding something on `provider`, now or later.
    pub fn leases_holding(&self, provider: ProviderId) -> impl Iterator<Item = &Lease> {
        self.leases_holding_during(provider, Window::ALWAYS)
    }

    /// The leases holding something on `provider` during `window`, in id order. The ledger's
    /// timeline of the provider is read from as far before `window` as its longest hold to the
    /// window's end, so what a provider is reserved for after `window` costs nothing.
    pub fn leases_holding_during(
        &self,
        provider: ProviderId,
        window: Window,
    ) -> impl Iterator<Item = &Lease> {
        let ids: BTreeSet<LeaseId> = self
            .ledger
            .holds_on(provider, window)
            .into_iter()
            .filter_map(|hold| self.reservation_leases.get(&hold.reservation))
            .map(|lease| lease.id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.leases.get(&id).map(|lease| &*lease.0))
    }

    /// One lease.
    pub fn lease(&self, id: LeaseId) -> Option<&Lease> {
        self.leases.get(&id).map(|lease| &*lease.0)
    }

    /// Every lease, in no particular order.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.iter().map(|lease| &*lease.0)
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
            .get_min()
            .map(|(at, kind, id)| (*at, *kind, id.uuid()));
        match (lease, claim) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Lifecycle events (and node claim expiries) due at or before `now`, earliest first (ends
    /// before starts at the same instant, so back-to-back leases hand over cleanly).
    pub fn due_events(&self, now: Instant) -> Vec<(Instant, EventKind, Uuid)> {
        // The index names each lease once, by its first pending event; a lease due by `now`
        // gives every pending event due by then.
        let mut due: Vec<(Instant, EventKind, Uuid)> = self
            .due
            .iter()
            .take_while(|(at, _, _)| *at <= now)
            .filter_map(|(_, _, id)| self.leases.get(id))
            .flat_map(|ByLeaseId(lease)| {
                lease
                    .pending_events()
                    .filter(|(at, _)| *at <= now)
                    .map(|(at, kind)| (at, kind, lease.id.uuid()))
            })
            .collect();
        due.extend(
            self.claim_due
                .iter()
                .take_while(|(at, _)| *at <= now)
                .map(|(at, id)| (*at, EventKind::NodeClaimExpiry, *id)),
        );
        due.sort_unstable();
        due.dedup();
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

/// The pending event of `lease` due first (`(due, kind)`, the least): the one entry of the lease
/// in the due index.
fn first_due(lease: &Lease) -> Option<(Instant, EventKind)> {
    lease.pending_events().min()
}
