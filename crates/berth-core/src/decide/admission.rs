//! Admission of lease requests against the capacity ledger: which hosts, instance slots and
//! floating IPs a request gets, or why it does not fit and what would (a counter-offer).
//!
//! One capacity model serves every reservation type. Over a window `[start, end)`:
//! - a whole host is free when no hold of any kind overlaps the window, it is reservable and in
//!   service (not down or in maintenance), and no consumer other than a preemptible one holds an
//!   allocation on it now (a reservation being re-admitted keeps the hosts it holds even while
//!   they are out of service, unless it is being healed away from them);
//! - a host offers `min over classes of (capacity - used now - peak reserved) / size` instance
//!   slots, where capacity is `(total - reserved) * allocation_ratio` as in Placement, the peak
//!   is the ledger's exact peak over the window, and a host held whole offers none;
//! - a floating IP is free when no hold overlaps the window.
//!
//! Preemptible consumers (best-effort work presenting no reservation) are not counted as used:
//! a reservation evicts them when it starts.
//!
//! Reservations of one request are admitted in order, each seeing what the earlier ones took,
//! so a request is admitted all-or-nothing.

use crate::catalog::Catalog;
use crate::model::id::{ProviderId, ReservationId};
use crate::model::lease::{Affinity, ReservationSpec};
use crate::model::ledger::{Hold, Ledger, Peak, Window, address_slot};
use crate::model::name::ResourceClass;
use crate::model::provider::Provider;
use crate::query::capacity::{Scope, check_scope, excluded};
use crate::query::filter::Filter;
use crate::query::properties::host_property;
use crate::rejection::{Refusal, Rejection, Shortfall};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// How far a decision may search beyond admitting the request as asked: the counter-offer's
/// earliest start and the displacement of lower priorities. The core never reads the clock:
/// a time budget comes in as `stop`, a probe the application implements with its clock.
#[derive(Clone, Copy)]
pub struct Search<'a> {
    /// The earliest-start search tries starts before this instant only.
    pub horizon_end: crate::model::time::Instant,
    /// Most steps (start instants tried, displacement sets tried).
    pub steps: usize,
    /// Asked before every step: `true` stops the search, and the answer says it is truncated.
    pub stop: &'a dyn Fn() -> bool,
}

fn never() -> bool {
    false
}

impl Search<'static> {
    /// No search at all: the request is admitted as asked or refused with the most that fits
    /// and no earliest start (what a decision under the writer lock does).
    pub const NONE: Search<'static> = Search {
        horizon_end: crate::model::time::Instant::from_micros(i64::MIN),
        steps: 0,
        stop: &never,
    };

    /// A search up to `horizon_end`, bounded by [`crate::limits::SEARCH_STEPS_MAX`] steps and
    /// by no time budget.
    pub fn until(horizon_end: crate::model::time::Instant) -> Search<'static> {
        Search {
            horizon_end,
            steps: crate::limits::SEARCH_STEPS_MAX,
            stop: &never,
        }
    }
}

impl<'a> Search<'a> {
    /// Whether step number `step` (from 0) may run.
    pub fn allows(&self, step: usize) -> bool {
        step < self.steps && !(self.stop)()
    }
}

impl std::fmt::Debug for Search<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Search")
            .field("horizon_end", &self.horizon_end)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

/// What a request was given: per reservation, hosts with slots, and floating IPs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    /// Per reservation, in request order: hosts with their slot counts.
    pub hosts: Vec<Vec<(ProviderId, u32)>>,
    /// Per reservation, in request order: floating IPs.
    pub floating_ips: Vec<Vec<Uuid>>,
}

/// One reservation to admit, with its parsed filter.
#[derive(Debug, Clone)]
pub struct Wanted<'a> {
    /// What it asks for.
    pub spec: &'a ReservationSpec,
    /// Its filter (hypervisor and resource properties together).
    pub filter: Filter,
    /// What it holds now, when it is being re-admitted (preferred, and not counted as used).
    pub current: Vec<(ProviderId, u32)>,
    /// Floating IPs it holds now, when it is being re-admitted.
    pub current_fips: Vec<Uuid>,
    /// Hosts it must not be given, even those it holds (it is being healed away from them).
    pub avoid: Vec<ProviderId>,
}

/// The scratch state of one admission: the catalog, the window, the reservations whose holds
/// do not count (they are being replaced), and what earlier reservations of the request took.
struct Pool<'c> {
    catalog: &'c Catalog,
    window: Window,
    excluding: &'c [ReservationId],
    /// Holds decided earlier in the same decision but not yet in the ledger (their
    /// reservations are among `excluding`, so the ledger's holds they replace do not count).
    extra: &'c [Hold],
    whole: HashSet<ProviderId>,
    added: HashMap<ProviderId, Vec<(ResourceClass, u64)>>,
    /// The ledger's peak per host over the window, computed once per admission: every
    /// reservation of a request looks at the same hosts over the same window, and what earlier
    /// reservations took is kept apart in `added` and `whole`.
    peaks: std::cell::RefCell<HashMap<ProviderId, Peak>>,
}

impl<'c> Pool<'c> {
    fn new(catalog: &'c Catalog, window: Window, excluding: &'c [ReservationId]) -> Pool<'c> {
        Pool {
            catalog,
            window,
            excluding,
            extra: &[],
            whole: HashSet::new(),
            added: HashMap::new(),
            peaks: std::cell::RefCell::new(HashMap::new()),
        }
    }

    /// The ledger of `host` with the extra holds, when some overlap the window: a small ledger
    /// of that host's holds in the window (less those excluded) plus the extra ones.
    fn overlay(&self, host: ProviderId) -> Option<Ledger> {
        let hits = |h: &&Hold| h.host == host && h.window.overlaps(&self.window);
        if !self.extra.iter().any(|h| hits(&h)) {
            return None;
        }
        let mut ledger = Ledger::new();
        for hold in self.catalog.ledger().holds_on(host, self.window) {
            if !self.excluding.contains(&hold.reservation) {
                ledger.add(hold);
            }
        }
        for hold in self.extra.iter().filter(hits) {
            ledger.add(hold.clone());
        }
        Some(ledger)
    }

    /// Peak use of `host` over the window.
    fn peak(&self, host: ProviderId) -> Peak {
        if let Some(peak) = self.peaks.borrow().get(&host) {
            return peak.clone();
        }
        let peak = self.peak_uncached(host);
        self.peaks.borrow_mut().insert(host, peak.clone());
        peak
    }

    fn peak_uncached(&self, host: ProviderId) -> Peak {
        match self.overlay(host) {
            Some(ledger) => ledger.peak(host, self.window, &[]),
            None => self
                .catalog
                .ledger()
                .peak(host, self.window, self.excluding),
        }
    }

    /// Whether nothing holds `host` over the window.
    fn is_free(&self, host: ProviderId) -> bool {
        match self.overlay(host) {
            Some(ledger) => ledger.is_free(host, self.window, &[]),
            None => self
                .catalog
                .ledger()
                .is_free(host, self.window, self.excluding),
        }
    }

    /// Reservable hosts matching `filter`, in enrolment order.
    fn hosts<'f>(&'f self, filter: &'f Filter) -> impl Iterator<Item = &'c Provider> + 'f {
        self.catalog
            .providers()
            .filter(move |p| self.admits(p, filter))
    }

    /// Whether `provider` is a reservable host in service matching `filter`.
    fn admits(&self, provider: &Provider, filter: &Filter) -> bool {
        provider.is_up() && self.admits_held(provider, filter)
    }

    /// Whether a reservation that holds `provider` may keep it: a reservable host matching
    /// `filter`, in service or not (a reservation keeps what it holds on a host that is down
    /// until it is healed away from it).
    fn admits_held(&self, provider: &Provider, filter: &Filter) -> bool {
        provider.host().is_some_and(|h| h.reservable)
            && filter.matches(&|name: &str| host_property(provider, name))
    }

    /// Whether `provider` is free as a whole host. Workloads running on a host the reservation
    /// already holds are its own (they were placed in its window), so they do not count.
    fn host_free(&self, provider: &Provider, held: bool) -> bool {
        let uuid = provider.uuid();
        !self.whole.contains(&uuid)
            && !self.added.contains_key(&uuid)
            && (held || !self.subtree_in_use(provider))
            && self.is_free(uuid)
            && !self.catalog.capacity_decreased(uuid, self.window)
    }

    /// Whether the host or a provider nested under it has allocations a reservation cannot
    /// evict (preemptible consumers are evicted when the reservation starts).
    fn subtree_in_use(&self, provider: &Provider) -> bool {
        provider.has_firm_usage()
            || (self.catalog.has_nested()
                && self
                    .catalog
                    .subtree(provider.uuid())
                    .iter()
                    .filter_map(|uuid| self.catalog.provider(*uuid))
                    .any(Provider::has_firm_usage))
    }

    /// Instance slots of the given size `host` offers over the window.
    fn slots(&self, provider: &Provider, size: &[(ResourceClass, u64)]) -> u32 {
        let uuid = provider.uuid();
        if self.whole.contains(&uuid) {
            return 0;
        }
        let peak = self.peak(uuid);
        if peak.exclusive > 0 {
            return 0;
        }
        let added = self.added.get(&uuid);
        let mut slots = u64::from(u32::MAX);
        for (class, each) in size {
            let Some(record) = provider.inventories().get(class) else {
                return 0;
            };
            if !record.fits_unit_rules(*each) {
                return 0;
            }
            // Consumers presenting a reservation use part of its hold (counted in the peak
            // while it lasts), so only the firm use of consumers presenting none is added.
            let unreserved = provider
                .firm_used(class)
                .saturating_sub(provider.reserved_used(class));
            let taken = unreserved
                + peak.amount(class)
                + added
                    .and_then(|a| a.iter().find(|(c, _)| c == class))
                    .map_or(0, |(_, n)| *n);
            // Planned capacity changes: the least they leave at any instant of the window.
            let change = self.catalog.capacity_change_min(uuid, class, self.window);
            let free = (record.capacity_exact() + change as f64 - taken as f64).max(0.0);
            slots = slots.min((free / *each as f64).floor() as u64);
        }
        u32::try_from(slots).unwrap_or(u32::MAX)
    }

    fn take_slots(&mut self, host: ProviderId, size: &[(ResourceClass, u64)], slots: u32) {
        let added = self.added.entry(host).or_default();
        for (class, each) in size {
            let amount = each.saturating_mul(u64::from(slots));
            match added.iter_mut().find(|(c, _)| c == class) {
                Some((_, n)) => *n += amount,
                None => added.push((class.clone(), amount)),
            }
        }
    }

    fn give_back_slots(&mut self, host: ProviderId, size: &[(ResourceClass, u64)], slots: u32) {
        let Some(added) = self.added.get_mut(&host) else {
            return;
        };
        for (class, each) in size {
            if let Some((_, n)) = added.iter_mut().find(|(c, _)| c == class) {
                *n = n.saturating_sub(each.saturating_mul(u64::from(slots)));
            }
        }
        if added.iter().all(|(_, n)| *n == 0) {
            self.added.remove(&host);
        }
    }

    /// Sets aside (`claim`) or releases what a reservation being re-admitted holds now, so that
    /// its siblings in the same lease cannot take it while it is not its turn.
    fn claim(&mut self, want: &Wanted<'_>, claim: bool) {
        match want.spec.instance_amounts(1) {
            Some(size) => {
                for (host, slots) in &want.current {
                    match claim {
                        true => self.take_slots(*host, &size, *slots),
                        false => self.give_back_slots(*host, &size, *slots),
                    }
                }
            }
            None => {
                let held = want
                    .current
                    .iter()
                    .map(|(h, _)| *h)
                    .chain(want.current_fips.iter().copied().map(address_slot));
                for id in held {
                    match claim {
                        true => self.whole.insert(id),
                        false => self.whole.remove(&id),
                    };
                }
            }
        }
    }
}

/// Instance slots of `size` that `provider` offers over `window`, not counting the holds of
/// `excluding` (the admission's own count, for capacity queries).
pub fn slots_on(
    catalog: &Catalog,
    provider: &Provider,
    window: Window,
    size: &[(ResourceClass, u64)],
    excluding: &[ReservationId],
) -> u32 {
    Pool::new(catalog, window, excluding).slots(provider, size)
}

/// Admits `wanted` over `window`, ignoring the holds of `excluding`. On refusal, every
/// reservation that does not fit is reported with the most that would.
pub fn admit(
    catalog: &Catalog,
    window: Window,
    wanted: &[Wanted<'_>],
    excluding: &[ReservationId],
) -> Result<Granted, Vec<Shortfall>> {
    let (granted, shortfalls) = admit_each(catalog, window, wanted, excluding);
    match shortfalls.is_empty() {
        true => Ok(granted),
        false => Err(shortfalls),
    }
}

/// Admits the reservations of `wanted` one by one, in order: what each that fits was granted
/// (nothing for those that do not), and a shortfall for each that does not.
fn admit_each(
    catalog: &Catalog,
    window: Window,
    wanted: &[Wanted<'_>],
    excluding: &[ReservationId],
) -> (Granted, Vec<Shortfall>) {
    admit_each_with(catalog, window, wanted, excluding, &[])
}

/// [`admit_each`] counting `extra` holds as if they were in the ledger (holds decided earlier
/// in the same decision; the reservations they belong to must be among `excluding`).
pub(crate) fn admit_each_with(
    catalog: &Catalog,
    window: Window,
    wanted: &[Wanted<'_>],
    excluding: &[ReservationId],
    extra: &[Hold],
) -> (Granted, Vec<Shortfall>) {
    let mut pool = Pool::new(catalog, window, excluding);
    pool.extra = extra;
    let mut granted = Granted::default();
    let mut shortfalls = Vec::new();
    for want in wanted {
        pool.claim(want, true);
    }
    for (index, want) in wanted.iter().enumerate() {
        pool.claim(want, false);
        let (hosts, fips) = match want.spec {
            ReservationSpec::Host { min, max, .. } => {
                match pick_hosts(&mut pool, want, *min, *max) {
                    Ok(hosts) => (hosts, Vec::new()),
                    Err(available) => {
                        shortfalls.push(shortfall(index, want.spec, *min, available));
                        (Vec::new(), Vec::new())
                    }
                }
            }
            ReservationSpec::Instance { .. } => match pick_slots(&mut pool, want) {
                Ok(hosts) => (hosts, Vec::new()),
                Err(available) => {
                    shortfalls.push(shortfall(index, want.spec, want.spec.amount(), available));
                    (Vec::new(), Vec::new())
                }
            },
            ReservationSpec::FloatingIp { .. } => match pick_fips(&mut pool, want) {
                Ok(fips) => (Vec::new(), fips),
                Err((available, reason)) => {
                    let mut s = shortfall(index, want.spec, want.spec.amount(), available);
                    s.reason = reason;
                    shortfalls.push(s);
                    (Vec::new(), Vec::new())
                }
            },
        };
        granted.hosts.push(hosts);
        granted.floating_ips.push(fips);
    }
    (granted, shortfalls)
}

fn shortfall(index: usize, spec: &ReservationSpec, requested: u32, available: u32) -> Shortfall {
    let reason = match spec {
        ReservationSpec::Host { .. } => "not_enough_hosts",
        ReservationSpec::Instance { .. } => "not_enough_capacity",
        ReservationSpec::FloatingIp { .. } => "not_enough_floating_ips",
    };
    Shortfall {
        index,
        resource_type: spec.resource_type(),
        requested,
        available,
        reason,
    }
}

/// Hosts in the order a reservation should consider them: those it holds now first, then the
/// others in enrolment order. Lazy: a search that is satisfied early never evaluates the filter
/// on the remaining hosts.
fn ordered<'a, 'c>(
    pool: &'a Pool<'c>,
    want: &'a Wanted<'_>,
) -> impl Iterator<Item = &'c Provider> + 'a {
    let current: HashSet<ProviderId> = want.current.iter().map(|(h, _)| *h).collect();
    let held = want
        .current
        .iter()
        .filter(|(h, _)| !want.avoid.contains(h))
        .filter_map(|(h, _)| pool.catalog.provider(*h))
        .filter(|p| pool.admits_held(p, &want.filter));
    let rest = pool
        .hosts(&want.filter)
        .filter(move |p| !current.contains(&p.uuid()) && !want.avoid.contains(&p.uuid()));
    held.chain(rest)
}

/// Up to `max` free hosts, at least `min`; on refusal the number of free hosts.
fn pick_hosts(
    pool: &mut Pool<'_>,
    want: &Wanted<'_>,
    min: u32,
    max: u32,
) -> Result<Vec<(ProviderId, u32)>, u32> {
    let mut taken = Vec::new();
    for provider in ordered(pool, want) {
        if taken.len() as u32 >= max {
            break;
        }
        let held = want.current.iter().any(|(h, _)| *h == provider.uuid());
        if pool.host_free(provider, held) {
            taken.push((provider.uuid(), 1));
        }
    }
    if (taken.len() as u32) < min {
        return Err(taken.len() as u32);
    }
    pool.whole.extend(taken.iter().map(|(h, _)| *h));
    taken.sort_by_key(|(h, _)| pool.catalog.provider(*h).map(Provider::id));
    Ok(taken)
}

/// Instance slots by the reservation's affinity; on refusal the most instances that fit.
fn pick_slots(pool: &mut Pool<'_>, want: &Wanted<'_>) -> Result<Vec<(ProviderId, u32)>, u32> {
    let (
        ReservationSpec::Instance {
            amount, affinity, ..
        },
        Some(size),
    ) = (want.spec, want.spec.instance_amounts(1))
    else {
        unreachable!("pick_slots is called for instance reservations only");
    };
    let mut taken: Vec<(ProviderId, u32)> = Vec::new();
    let mut best = 0u32;
    let mut got = 0u32;
    if *affinity == Affinity::Any {
        taken = pack(pool, ordered(pool, want), want, &size, *amount);
        got = taken.iter().map(|(_, n)| *n).sum();
    }
    let spread = *affinity != Affinity::Any;
    for provider in ordered(pool, want).filter(|_| spread) {
        if got >= *amount {
            break;
        }
        let slots = pool.slots(provider, &size);
        if slots == 0 {
            continue;
        }
        match affinity {
            Affinity::SameHost => {
                best = best.max(slots);
                if slots >= *amount {
                    taken = vec![(provider.uuid(), *amount)];
                    got = *amount;
                }
            }
            Affinity::DifferentHosts => {
                taken.push((provider.uuid(), 1));
                got += 1;
            }
            Affinity::Any => unreachable!("instances with any affinity are packed above"),
        }
    }
    if got < *amount {
        return Err(match affinity {
            Affinity::SameHost => best,
            _ => got,
        });
    }
    for (host, n) in &taken {
        pool.take_slots(*host, &size, *n);
    }
    taken.sort_by_key(|(h, _)| pool.catalog.provider(*h).map(Provider::id));
    Ok(taken)
}

/// Packs `amount` instances onto `hosts` in order (affinity `Any`), as many on each as it
/// offers. A reservation being re-admitted first keeps, on each host it holds (they come first
/// in `hosts`), up to the instances it has there, so growing it never moves instances off a
/// host to make room on an earlier one. Takes everything offered when `amount` does not fit.
fn pack<'c>(
    pool: &Pool<'c>,
    hosts: impl Iterator<Item = &'c Provider>,
    want: &Wanted<'_>,
    size: &[(ResourceClass, u64)],
    amount: u32,
) -> Vec<(ProviderId, u32)> {
    let held = |host: ProviderId| -> u32 {
        want.current
            .iter()
            .filter(|(h, _)| *h == host)
            .map(|(_, n)| *n)
            .sum()
    };
    // (host, taken, offered), in the order of `hosts`.
    let mut taken: Vec<(ProviderId, u32, u32)> = Vec::new();
    let mut got = 0u32;
    let mut hosts = hosts.peekable();
    while let Some(provider) = hosts.next_if(|p| held(p.uuid()) > 0) {
        let offered = pool.slots(provider, size);
        let keep = offered.min(held(provider.uuid())).min(amount - got);
        taken.push((provider.uuid(), keep, offered));
        got += keep;
    }
    for (_, n, offered) in &mut taken {
        let more = (*offered - *n).min(amount - got);
        *n += more;
        got += more;
    }
    for provider in hosts {
        if got >= amount {
            break;
        }
        let offered = pool.slots(provider, size);
        let more = offered.min(amount - got);
        taken.push((provider.uuid(), more, offered));
        got += more;
    }
    taken
        .into_iter()
        .filter(|(_, n, _)| *n > 0)
        .map(|(host, n, _)| (host, n))
        .collect()
}

/// Whether the planted defect that gives addresses without looking at the ledger is on.
fn skip_fip_check() -> bool {
    #[cfg(feature = "planted-defects")]
    if crate::planted::planted(crate::planted::Defect::SkipFloatingIpCheck) {
        return true;
    }
    false
}

/// Floating IPs of the network, required ones first; on refusal how many are free and why.
fn pick_fips(pool: &mut Pool<'_>, want: &Wanted<'_>) -> Result<Vec<Uuid>, (u32, &'static str)> {
    let ReservationSpec::FloatingIp {
        network_id,
        amount,
        required_floatingips,
    } = want.spec
    else {
        unreachable!("pick_fips is called for floating-IP reservations only");
    };
    let ledger = pool.catalog.ledger();
    let free: Vec<&crate::model::lease::FloatingIp> = pool
        .catalog
        .floating_ips()
        .filter(|f| *f.network_id == **network_id && f.reservable)
        .filter(|f| !pool.whole.contains(&address_slot(f.id)))
        .filter(|f| {
            skip_fip_check() || ledger.is_free(address_slot(f.id), pool.window, pool.excluding)
        })
        .collect();
    let mut taken = Vec::new();
    for address in required_floatingips {
        match free.iter().find(|f| f.address == *address) {
            Some(fip) => taken.push(fip.id),
            None => return Err((free.len() as u32, "required_floating_ip_unavailable")),
        }
    }
    let current: HashSet<Uuid> = want.current_fips.iter().copied().collect();
    let mut rest: Vec<&&crate::model::lease::FloatingIp> =
        free.iter().filter(|f| !taken.contains(&f.id)).collect();
    rest.sort_by_key(|f| !current.contains(&f.id));
    for fip in rest {
        if taken.len() as u32 >= *amount {
            break;
        }
        taken.push(fip.id);
    }
    if (taken.len() as u32) < *amount {
        return Err((free.len() as u32, "not_enough_floating_ips"));
    }
    pool.whole.extend(taken.iter().copied().map(address_slot));
    Ok(taken)
}

/// The earliest start at or after `window.start` and before the search's horizon at which the
/// whole request fits for the same duration, trying the instants at which capacity is released,
/// and whether the search was cut by its steps or its time budget before it tried them all.
pub fn earliest_start(
    catalog: &Catalog,
    window: Window,
    wanted: &[Wanted<'_>],
    excluding: &[ReservationId],
    search: &Search<'_>,
) -> (Option<crate::model::time::Instant>, bool) {
    let horizon_end = search.horizon_end;
    if horizon_end <= window.start() || search.steps == 0 {
        return (None, false);
    }
    let mut instants: Vec<crate::model::time::Instant> = Vec::new();
    let ledger = catalog.ledger();
    let pool = Pool::new(catalog, window, excluding);
    for want in wanted {
        let held: Vec<ProviderId> = match want.spec {
            ReservationSpec::FloatingIp { network_id, .. } => catalog
                .floating_ips()
                .filter(|f| *f.network_id == **network_id)
                .map(|f| address_slot(f.id))
                .collect(),
            _ => pool.hosts(&want.filter).map(Provider::uuid).collect(),
        };
        for uuid in held {
            instants.extend(ledger.release_times(uuid, window.start(), horizon_end));
        }
    }
    // Where an excluded hold starts, the ledger's level may stay level (another hold ending
    // there hands over to it) although the level without the excluded holds drops.
    for id in excluding {
        instants.extend(
            ledger
                .holds_of(*id)
                .map(|hold| hold.window.start())
                .filter(|t| *t < horizon_end),
        );
    }
    instants.sort_unstable();
    instants.dedup();
    instants.retain(|t| *t > window.start());
    for (step, t) in instants.into_iter().enumerate() {
        if !search.allows(step) {
            return (None, true);
        }
        if admit(catalog, window.shifted_to(t), wanted, excluding).is_ok() {
            return (Some(t), false);
        }
    }
    (None, false)
}

/// The most each reservation could get in the requested window, taken one by one in request
/// order (the counter-offer's amounts): hosts for host reservations, instances, addresses.
/// A reservation that does not fit gets what its shortfall says is available; one that fits
/// gets what `granted` gave it (a host reservation may have got fewer hosts than its `max`).
pub fn largest_amounts(
    shortfalls: &[Shortfall],
    wanted: &[Wanted<'_>],
    granted: &Granted,
) -> Vec<u32> {
    wanted
        .iter()
        .enumerate()
        .map(
            |(idx, want)| match shortfalls.iter().find(|s| s.index == idx) {
                Some(s) => s.available,
                None => match want.spec {
                    ReservationSpec::Host { .. } => granted
                        .hosts
                        .get(idx)
                        .map_or(want.spec.amount(), |hosts| hosts.len() as u32),
                    _ => want.spec.amount(),
                },
            },
        )
        .collect()
}

/// Admits `wanted`, or explains the refusal with a counter-offer: the most that fits (a
/// by-product of admission) and the earliest start, searched within `search`.
pub fn admit_or_offer(
    catalog: &Catalog,
    window: Window,
    wanted: &[Wanted<'_>],
    excluding: &[ReservationId],
    search: &Search<'_>,
) -> Result<Granted, Refusal> {
    let (granted, shortfalls) = admit_each(catalog, window, wanted, excluding);
    if shortfalls.is_empty() {
        return Ok(granted);
    }
    let (earliest_start, truncated) = earliest_start(catalog, window, wanted, excluding, search);
    Err(Refusal {
        amounts: largest_amounts(&shortfalls, wanted, &granted),
        earliest_start,
        truncated,
        shortfalls,
    })
}

/// How many instances of `size` could be reserved in `zone` over the whole `window`: per
/// reservable host, the instances that fit in what is neither reserved nor allocated at its
/// busiest instant, summed.
pub fn instances_that_fit(
    catalog: &Catalog,
    zone: Option<&str>,
    window: Window,
    size: &[(ResourceClass, u64)],
    without: &[Uuid],
) -> Result<u64, Rejection> {
    instances_that_fit_in(catalog, Scope::zone(zone), window, size, without)
}

/// How many instances of `size` could be reserved on the hosts of `scope` over the whole
/// `window`, counted as [`instances_that_fit`] counts them.
pub fn instances_that_fit_in(
    catalog: &Catalog,
    scope: Scope<'_>,
    window: Window,
    size: &[(ResourceClass, u64)],
    without: &[Uuid],
) -> Result<u64, Rejection> {
    check_scope(catalog, scope)?;
    let skip: Vec<ReservationId> = excluded(catalog, without).into_iter().collect();
    Ok(catalog
        .providers()
        .filter(|p| p.is_up() && scope.holds(p) && p.host().is_some_and(|h| h.reservable))
        .map(|p| u64::from(slots_on(catalog, p, window, size, &skip)))
        .sum())
}
