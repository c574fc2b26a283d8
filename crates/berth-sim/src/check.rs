//! The checks the simulator makes after every step, each written from the promise it proves and
//! not from berth's own bookkeeping: capacity recomputed from the leases and consumers (a
//! reference model of the ledger), the catalog against the disk, and what the clients were told
//! against what the catalog holds.

use berth_core::model::consumer::PREEMPTIBLE;
use berth_core::model::lease::{Lease, ReservationSpec};
use berth_core::{Catalog, Instant, ProviderId, ResourceClass};
use std::collections::{BTreeMap, BTreeSet};

/// How far each provider is promised beyond its capacity (0: not at all): the most, over its
/// classes and over every instant from `now` on, by which what consumers use, or what instance
/// reservations hold plus what unreserved consumers use, exceeds the capacity. Capacity can
/// shrink under promises already made (a provider's inventory is what the infrastructure
/// reports), so the excess is not always 0; what berth decides must never make it grow.
/// Refused outright: a host held whole twice at one instant, or held whole beside anything else.
pub(crate) fn excess(catalog: &Catalog, now: Instant) -> Result<BTreeMap<ProviderId, u64>, String> {
    catalog.check_invariants()?;
    let mut excess: BTreeMap<ProviderId, u64> = BTreeMap::new();
    for provider in catalog.providers() {
        for (class, inventory) in provider.inventories() {
            let over = provider.used(class).saturating_sub(inventory.capacity());
            let top = excess.entry(provider.uuid()).or_default();
            *top = (*top).max(over);
        }
    }
    let (unreserved, holding) = promised(catalog, now);
    for provider in catalog.providers() {
        let over = over_at(provider, &holding, &unreserved, now)?;
        let top = excess.entry(provider.uuid()).or_default();
        *top = (*top).max(over.iter().map(|(_, by)| *by).max().unwrap_or(0));
    }
    Ok(excess)
}

/// The instants from `now` on at which `host` is promised beyond its capacity.
pub(crate) fn over_instants(catalog: &Catalog, host: ProviderId, now: Instant) -> Vec<Instant> {
    let (unreserved, holding) = promised(catalog, now);
    catalog
        .provider(host)
        .and_then(|provider| over_at(provider, &holding, &unreserved, now).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, by)| *by > 0)
        .map(|(at, _)| at)
        .collect()
}

type Unreserved = BTreeMap<(ProviderId, ResourceClass), u64>;

/// What is promised: unreserved use, and the leases that hold capacity from `now` on.
fn promised(catalog: &Catalog, now: Instant) -> (Unreserved, Vec<&Lease>) {
    let unreserved = unreserved_use(catalog);
    let holding: Vec<&Lease> = catalog
        .leases()
        .filter(|l| l.holds_capacity() && l.end > now)
        .collect();
    (unreserved, holding)
}

/// How far `provider` is promised beyond its capacity at each instant from `now` on where the
/// level changes; refused outright: a host held whole twice, or beside anything else.
fn over_at(
    provider: &berth_core::model::provider::Provider,
    holding: &[&Lease],
    unreserved: &Unreserved,
    now: Instant,
) -> Result<Vec<(Instant, u64)>, String> {
    let host = provider.uuid();
    let on_host: Vec<&Lease> = holding
        .iter()
        .filter(|l| {
            l.reservations
                .iter()
                .any(|r| r.hosts.iter().any(|(h, _)| *h == host))
        })
        .copied()
        .collect();
    // The level changes only where a lease starts: checking there (and now) checks all.
    let mut instants: BTreeSet<Instant> = BTreeSet::from([now]);
    instants.extend(on_host.iter().map(|l| l.start.max(now)));
    let mut out = Vec::with_capacity(instants.len());
    for at in instants {
        let held = held_at(&on_host, host, at);
        if held.whole > 1 || (held.whole == 1 && !held.amounts.is_empty()) {
            return Err(format!(
                "host {host} held whole by {} reservation(s) beside {} instance hold(s) at {}",
                held.whole,
                held.amounts.len(),
                at.as_micros()
            ));
        }
        let mut by = 0;
        for (class, inventory) in provider.inventories() {
            let amount = held.amounts.get(class).copied().unwrap_or(0)
                + unreserved.get(&(host, class.clone())).copied().unwrap_or(0);
            by = by.max(amount.saturating_sub(inventory.capacity()));
        }
        out.push((at, by));
    }
    Ok(out)
}

/// What the reservations of `leases` hold on `host` at `at`.
#[derive(Default)]
struct Held {
    whole: usize,
    amounts: BTreeMap<ResourceClass, u64>,
}

fn held_at(leases: &[&Lease], host: ProviderId, at: Instant) -> Held {
    let mut held = Held::default();
    for lease in leases.iter().filter(|l| l.start <= at && at < l.end) {
        for reservation in &lease.reservations {
            let Some((_, slots)) = reservation.hosts.iter().find(|(h, _)| *h == host) else {
                continue;
            };
            match &reservation.spec {
                ReservationSpec::Host { .. } => held.whole += 1,
                spec => {
                    for (class, amount) in
                        spec.instance_amounts(u64::from(*slots)).unwrap_or_default()
                    {
                        *held.amounts.entry(class).or_default() += amount;
                    }
                }
            }
        }
    }
    held
}

/// What consumers that present no reservation and cannot be evicted use, per provider and class.
fn unreserved_use(catalog: &Catalog) -> BTreeMap<(ProviderId, ResourceClass), u64> {
    let mut used = BTreeMap::new();
    for (_, consumer) in catalog.consumers() {
        if consumer.reservation.is_some() || consumer.consumer_type.as_deref() == Some(PREEMPTIBLE)
        {
            continue;
        }
        for (provider, class, amount) in consumer.entries() {
            *used.entry((provider, class.clone())).or_default() += amount;
        }
    }
    used
}

/// What a client was told, or could not be told, about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Belief<T> {
    /// The last answer says it is this.
    Known(T),
    /// No answer came (the process died): it is one of these.
    OneOf(Vec<T>),
}

impl<T: Clone + PartialEq + std::fmt::Debug> Belief<T> {
    /// After a write whose answer says `value`.
    pub(crate) fn acked(value: T) -> Belief<T> {
        Belief::Known(value)
    }

    /// After a write that got no answer and would make it `value`.
    pub(crate) fn unknown(&self, value: T) -> Belief<T> {
        let mut all = match self {
            Belief::Known(held) => vec![held.clone()],
            Belief::OneOf(all) => all.clone(),
        };
        if !all.contains(&value) {
            all.push(value);
        }
        Belief::OneOf(all)
    }

    /// Checks what the catalog shows of `what` against the belief, and learns it.
    pub(crate) fn observe(&mut self, seen: T, what: impl FnOnce() -> String) -> Result<(), String> {
        let fits = match &*self {
            Belief::Known(held) => *held == seen,
            Belief::OneOf(all) => all.contains(&seen),
        };
        if !fits {
            return Err(format!(
                "{} is {seen:?}, but the clients were told {self:?}",
                what()
            ));
        }
        *self = Belief::Known(seen);
        Ok(())
    }
}

/// Every lifecycle event due at `now` has fired.
pub(crate) fn none_due(catalog: &Catalog, now: Instant) -> Result<(), String> {
    match catalog.due_events(now).first() {
        Some((at, kind, lease)) => Err(format!(
            "lease {lease}: {kind:?} due at {} never fired",
            at.as_micros()
        )),
        None => Ok(()),
    }
}

/// Whether a lease of one reservation over `[start, end)` fits, by a reference model of
/// admission written from its rules and not from berth's ledger: a whole host is free when it is
/// in service and reservable, nothing else uses it now (preemptible work aside), and no lease
/// holds it at any instant of the window; a host offers, per class, `(capacity - unreserved use
/// now - the most leases hold at any instant of the window) / size` instance slots, none while a
/// lease holds it whole. The holds are recomputed from the leases.
pub(crate) fn fits(
    catalog: &Catalog,
    spec: &ReservationSpec,
    start: Instant,
    end: Instant,
) -> bool {
    let unreserved = unreserved_use(catalog);
    let overlapping: Vec<&Lease> = catalog
        .leases()
        .filter(|l| l.holds_capacity() && l.start < end && start < l.end)
        .collect();
    let hosts = catalog
        .providers()
        .filter(|p| p.is_up() && p.host().is_some_and(|h| h.reservable));
    match spec {
        ReservationSpec::Host { min, .. } => {
            let free = hosts
                .filter(|p| {
                    let uuid = p.uuid();
                    !unreserved
                        .iter()
                        .any(|((h, _), used)| *h == uuid && *used > 0)
                        && !overlapping.iter().any(|l| holds_host(l, uuid))
                })
                .count();
            free >= usize::try_from(*min).unwrap_or(usize::MAX)
        }
        ReservationSpec::Instance { amount, .. } => {
            let size = spec.instance_amounts(1).unwrap_or_default();
            let mut slots = 0u64;
            for provider in hosts {
                slots += instance_slots(provider, &overlapping, &unreserved, &size, start);
            }
            slots >= u64::from(*amount)
        }
        ReservationSpec::FloatingIp {
            network_id,
            amount,
            required_floatingips,
        } => {
            // An address is free when it is on the network, reservable, and named by no lease
            // that holds capacity over a window meeting this one.
            let free: Vec<&str> = catalog
                .floating_ips()
                .filter(|f| *f.network_id == **network_id && f.reservable)
                .filter(|f| {
                    !overlapping.iter().any(|l| {
                        l.reservations
                            .iter()
                            .any(|r| r.floating_ips.contains(&f.id))
                    })
                })
                .map(|f| f.address.as_str())
                .collect();
            required_floatingips
                .iter()
                .all(|a| free.contains(&a.as_str()))
                && free.len() >= usize::try_from(*amount).unwrap_or(usize::MAX)
        }
    }
}

/// Whether `lease` has a reservation on `host`.
fn holds_host(lease: &Lease, host: ProviderId) -> bool {
    lease
        .reservations
        .iter()
        .any(|r| r.hosts.iter().any(|(h, _)| *h == host))
}

/// The instance slots of `size` that `provider` offers beside the leases `overlapping` a window
/// starting at `start`, and its unreserved use now.
fn instance_slots(
    provider: &berth_core::model::provider::Provider,
    overlapping: &[&Lease],
    unreserved: &Unreserved,
    size: &[(ResourceClass, u64)],
    start: Instant,
) -> u64 {
    let host = provider.uuid();
    let on_host: Vec<&Lease> = overlapping
        .iter()
        .filter(|l| holds_host(l, host))
        .copied()
        .collect();
    // The level changes only where a lease starts: its most is at the window's start or at one.
    let mut instants: BTreeSet<Instant> = BTreeSet::from([start]);
    instants.extend(on_host.iter().map(|l| l.start.max(start)));
    let mut peak: BTreeMap<ResourceClass, u64> = BTreeMap::new();
    for at in instants {
        let held = held_at(&on_host, host, at);
        if held.whole > 0 {
            return 0;
        }
        for (class, amount) in held.amounts {
            let top = peak.entry(class).or_default();
            *top = (*top).max(amount);
        }
    }
    let mut slots = u64::MAX;
    for (class, each) in size {
        let Some(inventory) = provider.inventories().get(class) else {
            return 0;
        };
        if !inventory.fits_unit_rules(*each) {
            return 0;
        }
        let taken = peak.get(class).copied().unwrap_or(0)
            + unreserved.get(&(host, class.clone())).copied().unwrap_or(0);
        slots = slots.min(inventory.capacity().saturating_sub(taken) / each);
    }
    slots
}

/// No floating IP is promised twice: at no instant do two leases that hold capacity name one
/// address (the windows of the leases naming an address are pairwise disjoint).
pub(crate) fn floating_ips(catalog: &Catalog) -> Result<(), String> {
    let mut by_address: BTreeMap<uuid::Uuid, Vec<&Lease>> = BTreeMap::new();
    for lease in catalog.leases().filter(|l| l.holds_capacity()) {
        for reservation in &lease.reservations {
            for fip in &reservation.floating_ips {
                by_address.entry(*fip).or_default().push(lease);
            }
        }
    }
    for (fip, leases) in by_address {
        for (n, a) in leases.iter().enumerate() {
            if let Some(b) = leases[n + 1..]
                .iter()
                .find(|b| a.start < b.end && b.start < a.end)
            {
                return Err(format!(
                    "floating IP {fip} is promised twice: to lease {} over [{}, {}) and to lease {} over [{}, {})",
                    a.id,
                    a.start.as_micros(),
                    a.end.as_micros(),
                    b.id,
                    b.start.as_micros(),
                    b.end.as_micros()
                ));
            }
        }
    }
    Ok(())
}

/// No node is claimed twice: at most one claim on a node; each claim's instance holds the node's
/// one unit and nothing else; and no lease of another project that holds capacity holds the
/// node over a window that meets the claim's.
pub(crate) fn node_claims(catalog: &Catalog) -> Result<(), String> {
    let mut on_node: BTreeMap<ProviderId, uuid::Uuid> = BTreeMap::new();
    for claim in catalog.claims() {
        if let Some(other) = on_node.insert(claim.node_uuid, claim.uuid) {
            return Err(format!(
                "node {} is claimed twice: by {other} and by {}",
                claim.node_uuid, claim.uuid
            ));
        }
    }
    for claim in catalog.claims() {
        let held: Vec<(ProviderId, &ResourceClass, u64)> = catalog
            .consumer(claim.instance_uuid)
            .map(|c| c.entries().collect())
            .unwrap_or_default();
        if !matches!(held.as_slice(), [(node, _, 1)] if *node == claim.node_uuid) {
            return Err(format!(
                "claim {} of node {} is held by its instance {} as {held:?}",
                claim.uuid, claim.node_uuid, claim.instance_uuid
            ));
        }
        let reserved = catalog.leases().find(|l| {
            l.holds_capacity()
                && *l.project_id != *claim.project_id
                && l.start < claim.expires_at
                && claim.created_at < l.end
                && holds_host(l, claim.node_uuid)
        });
        if let Some(lease) = reserved {
            return Err(format!(
                "node {} is claimed by {} over [{}, {}) and reserved by lease {} over [{}, {})",
                claim.node_uuid,
                claim.uuid,
                claim.created_at.as_micros(),
                claim.expires_at.as_micros(),
                lease.id,
                lease.start.as_micros(),
                lease.end.as_micros()
            ));
        }
    }
    Ok(())
}

/// What a node claim asks, for the reference model of its admission.
pub(crate) struct ClaimAsk<'a> {
    /// The nodes it may take, in order (a class's nodes listed by the caller).
    pub(crate) nodes: &'a [ProviderId],
    /// The instance it is for.
    pub(crate) instance: uuid::Uuid,
}

/// Whether a node claim is granted, by a reference model written from the rules of a claim: the
/// instance holds nothing yet, and some listed node is in service and `available`, associated with
/// no instance, claimed by nobody, used by no consumer, and held by no lease that holds capacity
/// (of any project: another's reserves it from now on, and every lease whose end has not fired
/// fences it, even one whose window has passed).
pub(crate) fn claimable(catalog: &Catalog, ask: &ClaimAsk<'_>) -> bool {
    use berth_core::model::baremetal::ProvisionState;
    if catalog.consumer(ask.instance).is_some() {
        return false;
    }
    let used: BTreeSet<ProviderId> = catalog
        .consumers()
        .flat_map(|(_, c)| c.entries().map(|(p, _, _)| p).collect::<Vec<_>>())
        .collect();
    ask.nodes.iter().any(|uuid| {
        let Some(provider) = catalog.provider(*uuid) else {
            return false;
        };
        let Some(node) = provider.node() else {
            return false;
        };
        provider.condition().is_none()
            && node.provision_state == ProvisionState::Available
            && node.instance_uuid.is_none()
            && !catalog.claims().any(|c| c.node_uuid == *uuid)
            && !used.contains(uuid)
            && !catalog
                .leases()
                .any(|l| l.holds_capacity() && holds_host(l, *uuid))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_core::change::Change;
    use berth_core::model::baremetal::NodeClaim;

    fn claim(n: u128, node: ProviderId) -> NodeClaim {
        NodeClaim {
            uuid: uuid::Uuid::from_u128(n),
            node_uuid: node,
            instance_uuid: uuid::Uuid::from_u128(100 + n),
            project_id: "metal".into(),
            user_id: "u".into(),
            created_at: Instant::from_micros(0),
            updated_at: Instant::from_micros(0),
            expires_at: Instant::from_micros(1_000),
            allocation: None,
        }
    }

    /// Two claims on one node are found, whatever else holds.
    #[test]
    fn a_node_claimed_twice_is_found() {
        let node = ProviderId::from_u128(7);
        let mut catalog = Catalog::new();
        let changes: Vec<Change> = [claim(1, node), claim(2, node)]
            .into_iter()
            .map(|c| Change::ClaimSet {
                uuid: c.uuid,
                claim: Some(c),
            })
            .collect();
        catalog.apply(&changes);
        let found = node_claims(&catalog).expect_err("two claims on one node");
        assert!(found.contains("is claimed twice"), "{found}");
    }

    /// A claim whose instance holds nothing is found (the node is not held by it).
    #[test]
    fn a_claim_without_its_allocation_is_found() {
        let node = ProviderId::from_u128(7);
        let mut catalog = Catalog::new();
        let one = claim(1, node);
        catalog.apply(&[Change::ClaimSet {
            uuid: one.uuid,
            claim: Some(one),
        }]);
        let found = node_claims(&catalog).expect_err("no allocation");
        assert!(found.contains("is held by its instance"), "{found}");
    }
}
