//! Decisions of the Promise surface: flavors, the policy, reservations (created as leases with
//! Promise terms, with priorities that may displace lower-priority reservations not yet
//! started), instances created against a reservation or from unreserved capacity, and the claim
//! deadline that releases what a reservation has not allocated.

use crate::catalog::Catalog;
use crate::change::Change;
use crate::change::record;
use crate::decide::admission::{self, Search};
use crate::decide::allocation::{self, ConsumerGeneration, ConsumerWrite};
use crate::decide::fence;
use crate::decide::lease::{self as lease_decide, LeaseUpdate, NewLease, ReservationUpdate};
use crate::limits::{DISPLACED_MAX, DISPLACEMENT_CANDIDATES_MAX, REQUEST_QUANTITY_MAX};
use crate::model::consumer::Allocations;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::{Affinity, Lease, LeaseStatus, Reservation, ReservationSpec, Transition};
use crate::model::name::ResourceClass;
use crate::model::promise::{
    self, Ask, Flavor, Outcome, Policy, PromiseInstance, PromiseKind, PromiseTerms,
};
use crate::model::time::{Instant, Span};

use crate::query::presentation::FencePolicy;
use crate::rejection::{Rejection, Room};
use std::collections::BTreeSet;
use uuid::Uuid;

fn bad(text: impl Into<String>) -> Rejection {
    Rejection::BadLease(text.into())
}

fn slots(vcpus: u64, memory_mb: u64, disk_gb: u64, amount: u64, zone: &str) -> ReservationSpec {
    ReservationSpec::Instance {
        vcpus,
        memory_mb,
        disk_gb,
        amount: u32::try_from(amount).unwrap_or(u32::MAX),
        affinity: Affinity::Any,
        resource_properties: zone.into(),
    }
}

/// The ledger reservations a Promise ask becomes, in order: pool, containers, addresses (from
/// `network`), storage.
pub fn specs(ask: &Ask, zone: Option<&str>, network: Option<&str>) -> Vec<ReservationSpec> {
    specs_on(ask, zone, None, network)
}

/// [`specs`] restricted to the providers of provider cloud `provider` when one is named.
pub fn specs_on(
    ask: &Ask,
    zone: Option<&str>,
    provider: Option<Uuid>,
    network: Option<&str>,
) -> Vec<ReservationSpec> {
    let filter = promise::placement_filter(zone, provider);
    let mut out = Vec::new();
    if let Some(pool) = ask.pool {
        let (units, vcpus, ram_mb) = pool.units();
        out.push(slots(vcpus, ram_mb, 0, units, &filter));
    }
    for c in &ask.containers {
        out.push(slots(c.vcpus, c.ram_mb, c.disk_gb, 1, &filter));
    }
    if ask.public_ips > 0 {
        out.push(ReservationSpec::FloatingIp {
            network_id: network.unwrap_or_default().into(),
            amount: u32::try_from(ask.public_ips).unwrap_or(u32::MAX),
            required_floatingips: Vec::new(),
        });
    }
    if let Some(storage) = ask.storage {
        let (units, disk_gb) = storage.units();
        out.push(slots(0, 0, disk_gb, units, &filter));
    }
    out
}

/// Creates a flavor; ids and names are unique.
pub fn create_flavor(catalog: &Catalog, flavor: Flavor) -> Result<Vec<Change>, Rejection> {
    let name_len = flavor.name.trim().chars().count();
    if !(1..=255).contains(&name_len) {
        return Err(bad("flavor name must be between 1 and 255 characters"));
    }
    if flavor.vcpus == 0 || flavor.ram_mb == 0 {
        return Err(bad("a flavor needs at least 1 vcpu and 1 MB of ram"));
    }
    let limit = u64::from(REQUEST_QUANTITY_MAX);
    if flavor.vcpus > limit || flavor.ram_mb > limit * 1024 || flavor.disk_gb > limit {
        return Err(bad("flavor sizes are too large"));
    }
    for taken in [&flavor.id, &flavor.name] {
        if catalog.flavor(taken).is_some() {
            return Err(Rejection::FlavorExists(taken.clone()));
        }
    }
    Ok(vec![Change::FlavorSet {
        id: flavor.id.clone(),
        flavor: Some(flavor),
    }])
}

/// Deletes a flavor (instances made from it keep their allocations).
pub fn delete_flavor(catalog: &Catalog, id: &str) -> Result<Vec<Change>, Rejection> {
    let flavor = catalog
        .flavor(id)
        .ok_or_else(|| Rejection::FlavorNotFound(id.to_owned()))?;
    Ok(vec![Change::FlavorSet {
        id: flavor.id.clone(),
        flavor: None,
    }])
}

/// Replaces the reservation policy.
pub fn set_policy(policy: Policy) -> Result<Vec<Change>, Rejection> {
    if policy.max_duration_hours == Some(0) {
        return Err(bad("max-duration must be at least 1 hour"));
    }
    for (name, days) in [
        ("max-future-start-range", policy.max_future_start_days),
        ("max-future-end-range", policy.max_future_end_days),
    ] {
        if days.is_some_and(|d| d > 365) {
            return Err(bad(format!("{name} must be between 0 and 365 days")));
        }
    }
    Ok(vec![Change::PolicySet(policy)])
}

/// A Promise reservation to create, with the ids the application generated.
#[derive(Debug, Clone)]
pub struct NewReservation {
    /// The lease id, which is the Promise reservation id.
    pub id: LeaseId,
    /// Ids for the ledger reservations (at least one per kind asked for and per container).
    pub reservation_ids: Vec<ReservationId>,
    /// Ids of the start, before-end and end events.
    pub event_ids: [Uuid; 3],
    /// The Promise resource type.
    pub kind: PromiseKind,
    /// What it asks for.
    pub ask: Ask,
    /// `startTime` (absent: now).
    pub start: Option<Instant>,
    /// `endTime` (absent: the policy's longest).
    pub end: Option<Instant>,
    /// `expiryTime` (absent: the policy's default, if any).
    pub expiry: Option<Instant>,
    /// `zoneId`.
    pub zone: Option<String>,
    /// `provider-id`: only that provider cloud's capacity (any when `None`).
    pub provider: Option<Uuid>,
    /// Priority, 0 to 100.
    pub priority: u32,
    /// Whether it may displace other projects' reservations (an admin granted its priority);
    /// otherwise only the project's own lower-priority reservations are displaced.
    pub displace_other_projects: bool,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// How long before the start preemptible consumers in the way are told.
    pub notice_lead: Span,
}

/// Fills the shapes of containers that name a flavor and give no size.
fn resolve_containers(catalog: &Catalog, ask: &mut Ask) -> Result<(), Rejection> {
    for container in &mut ask.containers {
        let sized = container.vcpus > 0 || container.ram_mb > 0 || container.disk_gb > 0;
        match (&container.flavor_id, sized) {
            (Some(id), false) => {
                let flavor = catalog
                    .flavor(id)
                    .ok_or_else(|| Rejection::FlavorNotFound(id.clone()))?;
                container.vcpus = flavor.vcpus;
                container.ram_mb = flavor.ram_mb;
                container.disk_gb = flavor.disk_gb;
                if container.cpu_architecture.is_none() {
                    container.cpu_architecture = flavor.cpu_architecture.clone();
                }
            }
            (None, false) => {
                return Err(bad(format!(
                    "container {} names neither a flavor nor a size",
                    container.container_id
                )));
            }
            (_, true) => {}
        }
    }
    Ok(())
}

/// The networks a request for public IPs may draw from, in the order they are tried.
fn networks(catalog: &Catalog, ask: &Ask) -> Result<Vec<Option<String>>, Rejection> {
    if ask.public_ips == 0 {
        return Ok(vec![None]);
    }
    let known: BTreeSet<&str> = catalog
        .floating_ips()
        .map(|f| f.network_id.as_str())
        .collect();
    match &ask.network_id {
        Some(named) if known.contains(named.as_str()) => Ok(vec![Some(named.clone())]),
        Some(named) => Err(bad(format!("network {named} has no registered addresses"))),
        None if known.is_empty() => Ok(vec![Some(String::new())]),
        None => Ok(known.into_iter().map(|n| Some(n.to_owned())).collect()),
    }
}

/// How far before the decision a new reservation's start may lie: the request read its `now`
/// before it was queued.
const PAST_START_SLACK: Span = Span::from_secs(60);

/// The window and claim deadline of a new reservation; a start in the past is refused (a
/// backdated reservation would start at once, as if it had always been held).
fn window_of(
    catalog: &Catalog,
    new: &NewReservation,
    now: Instant,
) -> Result<(Instant, Instant, Option<Instant>), Rejection> {
    if new.start.is_some_and(|s| s < now - PAST_START_SLACK) {
        return Err(bad("startTime must not be in the past"));
    }
    let start = new.start.unwrap_or(now);
    let end = new
        .end
        .unwrap_or_else(|| catalog.policy().default_end(start, now));
    if end <= start {
        return Err(bad("endTime must be later than startTime"));
    }
    let window =
        crate::model::ledger::Window::new(start, end).ok_or_else(|| bad("empty window"))?;
    let expiry = new
        .expiry
        .or_else(|| catalog.policy().default_expiry(window));
    check_expiry(expiry, start, end)?;
    Ok((start, end, expiry))
}

fn check_expiry(expiry: Option<Instant>, start: Instant, end: Instant) -> Result<(), Rejection> {
    match expiry {
        Some(at) if at > end => Err(bad("expiryTime must not be later than endTime")),
        Some(at) if at < start => Err(bad("expiryTime must not be earlier than startTime")),
        _ => Ok(()),
    }
}

/// Sets the Promise terms on the lease a lease decision produced.
fn with_terms(changes: &mut [Change], lease: &mut Lease, terms: PromiseTerms) {
    lease.set_terms(Some(terms));
    for change in changes.iter_mut() {
        if let Change::LeaseSet {
            lease: Some(set), ..
        } = change
            && set.id == lease.id
        {
            set.set_terms(lease.terms().cloned());
        }
    }
}

/// Checks a new reservation and resolves what it asks for: the ask with its containers sized,
/// its window and the terms the lease will carry.
fn prepare(
    catalog: &Catalog,
    new: &NewReservation,
    now: Instant,
) -> Result<(Ask, Instant, Instant, PromiseTerms), Rejection> {
    let mut ask = new.ask.clone();
    if ask.is_empty() {
        return Err(bad(
            "the request reserves nothing: give a compute pool, containers, public IPs or a storage pool",
        ));
    }
    if new.priority > promise::PRIORITY_MAX {
        return Err(bad(format!(
            "priority must be from 0 to {}",
            promise::PRIORITY_MAX
        )));
    }
    crate::query::capacity::check_zone(catalog, new.zone.as_deref())?;
    if let Some(id) = new.provider {
        usable_cloud(catalog, id)?;
    }
    resolve_containers(catalog, &mut ask)?;
    let (start, end, expiry) = window_of(catalog, new, now)?;
    let terms = PromiseTerms {
        kind: new.kind,
        ask: ask.clone(),
        priority: new.priority,
        expiry,
        zone: new.zone.clone(),
        provider: new.provider,
    };
    Ok((ask, start, end, terms))
}

/// Turns hold `hold` (a lease in `HELD` of the same project) into the Promise reservation `new`
/// in one decision, as [`lease_decide::create_lease_from_hold`] does for a lease: the
/// reservation must ask for what was held or less (else [`Rejection::HoldMismatch`]); a hold of
/// another project or a lease that is no hold is a bad `hold_id`. Nothing is displaced and
/// nothing searched. Addresses are drawn from the first network tried.
pub fn create_reservation_from_hold(
    catalog: &Catalog,
    new: &NewReservation,
    hold: LeaseId,
    now: Instant,
) -> Result<(Vec<Change>, Lease), Rejection> {
    let (ask, start, end, terms) = prepare(catalog, new, now)?;
    let network = networks(catalog, &ask)?.into_iter().next().flatten();
    let lease = as_lease(new, &ask, network.as_deref(), start, end)?;
    let (mut changes, mut made) = lease_decide::create_lease_from_hold(catalog, &lease, hold, now)?;
    with_terms(&mut changes, &mut made, terms);
    Ok((changes, made))
}

/// The lease that holds Promise reservation `new` asking `ask` over `start..end`, its
/// addresses on `network`.
fn as_lease(
    new: &NewReservation,
    ask: &Ask,
    network: Option<&str>,
    start: Instant,
    end: Instant,
) -> Result<NewLease, Rejection> {
    let specs = specs_on(ask, new.zone.as_deref(), new.provider, network);
    if specs.len() > new.reservation_ids.len() {
        return Err(Rejection::TooMany("reservations"));
    }
    Ok(NewLease {
        id: new.id,
        name: format!("promise-{}", new.kind.as_str()),
        project_id: new.project_id.clone(),
        user_id: new.user_id.clone(),
        start,
        end,
        before_end: None,
        reservations: new.reservation_ids.iter().copied().zip(specs).collect(),
        event_ids: new.event_ids,
        notice_lead: new.notice_lead,
    })
}

/// Admits a Promise reservation all-or-nothing as a lease; when it does not fit and the policy
/// allows it, displaces not-yet-started reservations of lower priority (lowest first, newest
/// first among equals, no more than needed; the search for them is bounded by `search`, and
/// [`Search::NONE`] searches none). A refusal carries the counter-offer.
pub fn create_reservation(
    catalog: &Catalog,
    new: &NewReservation,
    now: Instant,
    search: &Search<'_>,
) -> Result<(Vec<Change>, Lease), Rejection> {
    create_reservation_displacing(catalog, new, now, search, &[])
}

/// [`create_reservation`] with the leases to displace chosen beforehand (by a search over a
/// snapshot of the catalog, read back with [`displaced_by`]): when the request does not fit as
/// asked, it is admitted only by displacing exactly `displacing`, each of which must still be
/// displaceable; nothing is searched. An empty `displacing` searches within `search`.
pub fn create_reservation_displacing(
    catalog: &Catalog,
    new: &NewReservation,
    now: Instant,
    search: &Search<'_>,
    displacing: &[LeaseId],
) -> Result<(Vec<Change>, Lease), Rejection> {
    let (ask, start, end, terms) = prepare(catalog, new, now)?;
    let mut first_refusal = None;
    for network in networks(catalog, &ask)? {
        let lease = as_lease(new, &ask, network.as_deref(), start, end)?;
        match lease_decide::create_lease(catalog, &lease, now, search) {
            Ok((mut changes, mut made)) => {
                with_terms(&mut changes, &mut made, terms);
                return Ok((changes, made));
            }
            Err(Rejection::DoesNotFit(refusal)) => {
                let others = new.displace_other_projects;
                let done = match displacing {
                    [] => displace(catalog, &lease, &terms, others, now, search),
                    chosen => displace_chosen(catalog, &lease, &terms, others, now, chosen),
                };
                if let Some(done) = done {
                    return Ok(done);
                }
                first_refusal.get_or_insert(Rejection::DoesNotFit(refusal));
            }
            Err(other) => return Err(other),
        }
    }
    // Capacity in the zone that is a provider cloud's which cannot be reached is unknown: the
    // refusal names that cloud rather than offering what is known.
    if let Some(Rejection::DoesNotFit(_)) = first_refusal
        && let Some(unreachable) =
            crate::decide::cloud::unreachable_refusal(catalog, new.zone.as_deref())
    {
        return Err(unreachable);
    }
    Err(first_refusal.unwrap_or_else(|| bad("no network to draw addresses from")))
}

/// Lower-priority leases not yet started that overlap `window` (of `lease`'s project only,
/// unless `others`), in the order they are displaced: lowest priority first, newest first among
/// equals.
fn displaceable<'c>(
    catalog: &'c Catalog,
    lease: &NewLease,
    priority: u32,
    others: bool,
) -> Vec<&'c Lease> {
    let window = crate::model::ledger::Window::new(lease.start, lease.end);
    let mut found: Vec<&Lease> = catalog
        .leases()
        .filter(|l| l.priority() < priority && l.status == LeaseStatus::Pending && !l.started())
        .filter(|l| others || *l.project_id == *lease.project_id)
        .filter(|l| window.is_some_and(|w| l.window().overlaps(&w)))
        .collect();
    found.sort_by(|a, b| {
        a.priority()
            .cmp(&b.priority())
            .then(b.created_at.cmp(&a.created_at))
            .then(a.id.cmp(&b.id))
    });
    found.truncate(DISPLACEMENT_CANDIDATES_MAX);
    found
}

fn fits(catalog: &Catalog, lease: &NewLease, excluding: &[ReservationId]) -> bool {
    let Some(window) = crate::model::ledger::Window::new(lease.start, lease.end) else {
        return false;
    };
    let Ok(want) = lease_decide::wanted(catalog, lease.reservations.iter().map(|(_, s)| (s, None)))
    else {
        return false;
    };
    admission::admit(catalog, window, &want, excluding).is_ok()
}

fn reservation_ids(leases: &[&Lease]) -> Vec<ReservationId> {
    leases
        .iter()
        .flat_map(|l| l.reservations.iter().map(|r| r.id))
        .collect()
}

/// The smallest set of lower-priority reservations (greedy, then pruned) whose displacement
/// lets `lease` in, and the decision that displaces them and admits it. Every admission tried
/// is a step of `search`; a search cut short before a set fits finds nothing, one cut while
/// pruning keeps the set it has.
fn displace(
    catalog: &Catalog,
    lease: &NewLease,
    terms: &PromiseTerms,
    others: bool,
    now: Instant,
    search: &Search<'_>,
) -> Option<(Vec<Change>, Lease)> {
    if !catalog.policy().preemption {
        return None;
    }
    let mut chosen: Vec<&Lease> = Vec::new();
    let mut admitted = false;
    let mut step = 0;
    for candidate in displaceable(catalog, lease, terms.priority, others) {
        if !search.allows(step) {
            return None;
        }
        step += 1;
        chosen.push(candidate);
        if fits(catalog, lease, &reservation_ids(&chosen)) {
            admitted = true;
            break;
        }
        if chosen.len() >= DISPLACED_MAX {
            break;
        }
    }
    if !admitted {
        return None;
    }
    for idx in (0..chosen.len()).rev() {
        if !search.allows(step) {
            break;
        }
        step += 1;
        let mut without = chosen.clone();
        without.remove(idx);
        if fits(catalog, lease, &reservation_ids(&without)) {
            chosen = without;
        }
    }
    admit_displacing(catalog, lease, terms, now, &chosen)
}

/// Re-checks a displacement chosen beforehand: every lease of `chosen` must still be
/// displaceable by `lease`, and displacing them must let it in.
fn displace_chosen(
    catalog: &Catalog,
    lease: &NewLease,
    terms: &PromiseTerms,
    others: bool,
    now: Instant,
    chosen: &[LeaseId],
) -> Option<(Vec<Change>, Lease)> {
    if !catalog.policy().preemption || chosen.len() > DISPLACED_MAX {
        return None;
    }
    let candidates = displaceable(catalog, lease, terms.priority, others);
    let chosen: Vec<&Lease> = chosen
        .iter()
        .map(|id| candidates.iter().find(|l| l.id == *id).copied())
        .collect::<Option<_>>()?;
    admit_displacing(catalog, lease, terms, now, &chosen)
}

/// Admits `lease` over the holds of `chosen`, which it displaces in the same decision.
fn admit_displacing(
    catalog: &Catalog,
    lease: &NewLease,
    terms: &PromiseTerms,
    now: Instant,
    chosen: &[&Lease],
) -> Option<(Vec<Change>, Lease)> {
    let excluding = reservation_ids(chosen);
    let (admitted, mut made) =
        lease_decide::create_lease_with(catalog, lease, now, &Search::NONE, &excluding).ok()?;
    let mut changes: Vec<Change> = chosen
        .iter()
        .flat_map(|victim| preempt(victim, lease.id, terms.priority, now))
        .collect();
    let mut admitted = admitted;
    with_terms(&mut admitted, &mut made, terms.clone());
    changes.extend(admitted);
    Some((changes, made))
}

/// The leases a reservation decision displaced: those its changes set, other than its own
/// lease `id`, in the order it displaced them.
pub fn displaced_by(changes: &[Change], id: LeaseId) -> Vec<LeaseId> {
    let mut out: Vec<LeaseId> = Vec::new();
    for change in changes {
        if let Change::LeaseSet { id: set, .. } = change
            && *set != id
            && !out.contains(set)
        {
            out.push(*set);
        }
    }
    out
}

/// Ends a not-yet-started lease displaced by `by`: it holds nothing from now on.
fn preempt(victim: &Lease, by: LeaseId, priority: u32, now: Instant) -> Vec<Change> {
    let reason = format!(
        "preempted by reservation {by} of priority {priority} (this one had priority {})",
        victim.priority()
    );
    let mut lease = victim.clone();
    finish(&mut lease, now);
    lease.set_status_reason(Some(reason.as_str().into()));
    lease.set_outcome(Some(Outcome::Preempted {
        by,
        reason: reason.clone(),
    }));
    vec![
        record(
            &lease,
            "lease.preempted",
            now,
            serde_json::json!({"by": by, "reason": reason}),
        ),
        Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease)),
        },
    ]
}

/// Marks a lease terminated with every event done, so it holds nothing and fires nothing.
fn finish(lease: &mut Lease, now: Instant) {
    // An ended lease cannot end early (and is never asked to: it holds nothing).
    if let Ok(status) = lease.status.next(Transition::EndEarly) {
        lease.status = status;
    }
    lease.settle(now);
    if let Some(terms) = lease.terms_mut() {
        terms.expiry = None;
    }
    lease.updated_at = now;
}

/// The Promise reservation (a lease) `id` as `project` may see it (`None`: any project).
pub fn owned<'c>(
    catalog: &'c Catalog,
    id: LeaseId,
    project: Option<&str>,
) -> Result<&'c Lease, Rejection> {
    catalog
        .lease(id)
        .filter(|l| project.is_none_or(|p| p == &*l.project_id))
        .ok_or(Rejection::LeaseNotFound(id))
}

/// Changes to a Promise reservation.
#[derive(Debug, Clone, Default)]
pub struct ReservationChange {
    /// New `startTime`.
    pub start: Option<Instant>,
    /// New `endTime`.
    pub end: Option<Instant>,
    /// New `expiryTime`.
    pub expiry: Option<Instant>,
    /// New amounts (same kinds as before).
    pub ask: Option<Ask>,
}

/// Updates a Promise reservation's window, claim deadline or amounts, re-admitting it
/// atomically.
pub fn update_reservation(
    catalog: &Catalog,
    id: LeaseId,
    change: &ReservationChange,
    now: Instant,
    search: &Search<'_>,
) -> Result<(Vec<Change>, Lease), Rejection> {
    let current = catalog.lease(id).ok_or(Rejection::LeaseNotFound(id))?;
    let mut terms = current
        .terms()
        .cloned()
        .ok_or_else(|| bad("only Promise reservations are updated here"))?;
    let mut update = LeaseUpdate {
        start: change.start,
        end: change.end,
        ..LeaseUpdate::default()
    };
    if let Some(ask) = &change.ask {
        let mut ask = ask.clone();
        resolve_containers(catalog, &mut ask)?;
        let network = current.reservations.iter().find_map(|r| match &r.spec {
            ReservationSpec::FloatingIp { network_id, .. } => Some(network_id.clone()),
            _ => None,
        });
        let specs = specs_on(
            &ask,
            terms.zone.as_deref(),
            terms.provider,
            network.as_deref(),
        );
        if specs.len() != current.reservations.len()
            || specs
                .iter()
                .zip(&current.reservations)
                .any(|(s, r)| s.resource_type() != r.spec.resource_type())
        {
            return Err(bad(
                "an update changes amounts only: it cannot add or remove kinds of resource",
            ));
        }
        update.reservations = specs
            .iter()
            .zip(&current.reservations)
            .map(|(spec, r)| amounts_update(r.id, spec))
            .collect();
        terms.ask = ask;
    }
    let start = change.start.unwrap_or(current.start);
    let end = change.end.unwrap_or(current.end);
    if change.expiry.is_some() {
        terms.expiry = change.expiry;
    }
    check_expiry(terms.expiry, start, end)?;
    let (mut changes, mut lease) =
        match update.start.is_some() || update.end.is_some() || !update.reservations.is_empty() {
            true => lease_decide::update_lease(catalog, id, &update, now, search)?,
            false => {
                let mut lease = current.clone();
                lease.updated_at = now;
                let changes = vec![Change::LeaseSet {
                    id,
                    lease: Some(Box::new(lease.clone())),
                }];
                (changes, lease)
            }
        };
    with_terms(&mut changes, &mut lease, terms);
    Ok((changes, lease))
}

fn amounts_update(id: ReservationId, spec: &ReservationSpec) -> ReservationUpdate {
    let mut update = ReservationUpdate {
        id,
        amount: Some(spec.amount()),
        ..ReservationUpdate::default()
    };
    if let ReservationSpec::Instance {
        vcpus,
        memory_mb,
        disk_gb,
        ..
    } = spec
    {
        update.vcpus = Some(*vcpus);
        update.memory_mb = Some(*memory_mb);
        update.disk_gb = Some(*disk_gb);
    }
    update
}

/// Releases what a Promise reservation has not allocated by its claim deadline: each instance
/// reservation keeps the slots its instances use on each host; addresses are released. When
/// nothing is left the lease ends as expired. Idempotent: nothing happens unless the deadline
/// is due and has not been acted on.
pub fn expire(catalog: &Catalog, current: &Lease, now: Instant) -> Vec<Change> {
    if current.expiry_at().is_none_or(|at| at > now) {
        return Vec::new();
    }
    let mut lease = current.clone();
    let in_use = catalog.instances_of(current).len() as u64;
    if let Some(terms) = lease.terms_mut() {
        terms.expiry = None;
        // The pool keeps room for the instances that use it, as it keeps their capacity.
        if let Some(pool) = &mut terms.ask.pool {
            pool.instances = in_use.max(1);
        }
    }
    let mut released = Vec::new();
    for reservation in &mut lease.reservations {
        let before = reservation.spec.amount();
        shrink_to_use(catalog, reservation);
        let kept: u32 = reservation.hosts.iter().map(|(_, n)| *n).sum::<u32>()
            + reservation.floating_ips.len() as u32;
        released.push(serde_json::json!({
            "reservation": reservation.id, "requested": before, "kept": kept,
        }));
        reservation.updated_at = now;
    }
    let empty = lease
        .reservations
        .iter()
        .all(|r| r.hosts.is_empty() && r.floating_ips.is_empty());
    lease.updated_at = now;
    let mut changes = vec![record(
        &lease,
        "reservation.expired",
        now,
        serde_json::json!({"released": released, "ended": empty}),
    )];
    let running = current.started() && !current.ended();
    if empty {
        finish(&mut lease, now);
        lease.set_outcome(Some(Outcome::Expired));
        if running {
            changes.extend(fence::lower(catalog, current, now));
        }
    } else if running {
        changes.extend(fence::resync(catalog, current, &lease));
    }
    changes.push(Change::LeaseSet {
        id: lease.id,
        lease: Some(Box::new(lease)),
    });
    changes
}

/// Cuts an instance reservation down to the slots its consumers use on each host (rounded up
/// per class), and drops addresses (nothing allocates them).
fn shrink_to_use(catalog: &Catalog, reservation: &mut Reservation) {
    reservation.floating_ips = Box::default();
    let Some(size) = reservation.spec.instance_amounts(1) else {
        if !matches!(reservation.spec, ReservationSpec::Host { .. }) {
            reservation.hosts = Box::default();
        }
        return;
    };
    let id = reservation.id;
    reservation.hosts = reservation
        .hosts
        .iter()
        .filter_map(|(host, slots)| {
            let needed = size
                .iter()
                .map(|(class, each)| {
                    catalog
                        .reserved_use(id, *host, class, Uuid::nil())
                        .div_ceil((*each).max(1))
                })
                .max()
                .unwrap_or(0);
            let keep = u32::try_from(needed).unwrap_or(u32::MAX).min(*slots);
            (keep > 0).then_some((*host, keep))
        })
        .collect();
    reservation.reconcile_missing();
}

/// An instance to create.
#[derive(Debug, Clone)]
pub struct NewInstance {
    /// Its id (also its consumer's).
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// Flavor id or name.
    pub flavor: String,
    /// Image, echoed.
    pub image: Option<String>,
    /// The Promise reservation (lease id) it draws on, if any.
    pub reservation: Option<LeaseId>,
    /// The zone to place it in without a reservation.
    pub zone: Option<String>,
    /// `provider-id`: only on that provider cloud's capacity (any when `None`).
    pub provider: Option<Uuid>,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
}

impl NewInstance {
    /// Whether the instance may go on `host`: any host, or one of the provider cloud it names.
    fn may_use(&self, catalog: &Catalog, host: ProviderId) -> bool {
        self.provider.is_none_or(|cloud| {
            catalog
                .provider(host)
                .and_then(crate::catalog::provider_cloud_of)
                == Some(cloud)
        })
    }
}

/// The provider cloud `id` when instances and reservations may be placed on it: it must be
/// registered and its capacity known.
pub(crate) fn usable_cloud(catalog: &Catalog, id: Uuid) -> Result<(), Rejection> {
    let cloud = catalog
        .provider_cloud(id)
        .ok_or(Rejection::ProviderCloudNotFound(id))?;
    if cloud.sync.state == crate::model::cloud::SyncState::Unknown {
        return Err(Rejection::ProviderCloudUnreachable {
            cloud: id,
            reason: cloud.sync.last_error.clone().unwrap_or_default(),
        });
    }
    Ok(())
}

fn flavor_amounts(flavor: &Flavor, disk: bool) -> Vec<(ResourceClass, u64)> {
    crate::model::lease::instance_amounts(
        flavor.vcpus,
        flavor.ram_mb,
        if disk { flavor.disk_gb } else { 0 },
        1,
    )
}

fn write_on(
    new: &NewInstance,
    host: ProviderId,
    amounts: &[(ResourceClass, u64)],
) -> ConsumerWrite {
    let mut allocations = Allocations::new();
    allocations.insert(host, amounts.iter().cloned().collect());
    ConsumerWrite {
        consumer: new.id,
        project_id: new.project_id.clone(),
        user_id: new.user_id.clone(),
        consumer_type: Some("INSTANCE".to_owned()),
        generation: ConsumerGeneration::New,
        allocations,
        reservation: None,
    }
}

fn is_compute(spec: &ReservationSpec) -> bool {
    matches!(spec, ReservationSpec::Instance { vcpus, .. } if *vcpus > 0)
}

/// Creates an instance: against a reservation (which must exist, belong to the caller, be
/// active and have room for the flavor) or, without one, from unreserved capacity only, as
/// best-effort work of the lowest priority (a `PREEMPTIBLE` consumer: a reservation that needs
/// its capacity evicts it when it starts, seed 3.1.4). The instance's allocations are an
/// ordinary placement consumer.
pub fn create_instance(
    catalog: &Catalog,
    new: &NewInstance,
    now: Instant,
    policy: FencePolicy,
) -> Result<(Vec<Change>, PromiseInstance), Rejection> {
    if new.name.trim().is_empty() || new.name.chars().count() > 255 {
        return Err(bad("name must be between 1 and 255 characters"));
    }
    let flavor = catalog
        .flavor(&new.flavor)
        .ok_or_else(|| Rejection::FlavorNotFound(new.flavor.clone()))?;
    if let Some(cloud) = new.provider {
        usable_cloud(catalog, cloud)?;
    }
    let (mut changes, host) = match new.reservation {
        Some(id) => against_reservation(catalog, new, id, flavor, now, policy)?,
        None => unreserved(catalog, new, flavor, now, policy)?,
    };
    let instance = PromiseInstance {
        id: new.id,
        name: new.name.trim().to_owned(),
        flavor_id: flavor.id.clone(),
        image: new.image.clone(),
        reservation: new.reservation,
        host,
        project_id: new.project_id.clone(),
        user_id: new.user_id.clone(),
        created_at: now,
    };
    changes.push(Change::InstanceSet {
        id: new.id,
        instance: Some(instance.clone()),
    });
    Ok((changes, instance))
}

fn refused(text: impl Into<String>) -> Rejection {
    Rejection::InstanceRefused(text.into())
}

fn against_reservation(
    catalog: &Catalog,
    new: &NewInstance,
    id: LeaseId,
    flavor: &Flavor,
    now: Instant,
    policy: FencePolicy,
) -> Result<(Vec<Change>, ProviderId), Rejection> {
    // A reservation shared with the instance's project is drawn on as its owner's is (the
    // share's cap is checked with the instance's allocations).
    let lease = catalog
        .lease(id)
        .filter(|l| l.usable_by(&new.project_id))
        .ok_or(Rejection::LeaseNotFound(id))?;
    if lease.outcome().is_some() || lease.status == LeaseStatus::Terminated || now >= lease.end {
        return Err(refused(format!("reservation {id} has ended")));
    }
    if !lease.started() || now < lease.start {
        return Err(refused(format!(
            "reservation {id} is not active yet: it starts at {}",
            lease.start.as_micros()
        )));
    }
    // Instances whose allocations are gone (the lease ended them) no longer count.
    let used = catalog.instances_of(lease).len() as u64;
    let slots = crate::query::promise::instances_held(lease);
    let no_room = || Rejection::NoRoomLeft {
        reservation: id,
        flavor: flavor.name.clone(),
        room: room(catalog, lease, slots.saturating_sub(used), new.id),
    };
    if used >= slots {
        return Err(no_room());
    }
    for reservation in lease.reservations.iter().filter(|r| is_compute(&r.spec)) {
        let disk =
            matches!(reservation.spec, ReservationSpec::Instance { disk_gb, .. } if disk_gb > 0);
        let amounts = flavor_amounts(flavor, disk);
        for (host, _) in reservation
            .hosts
            .iter()
            .filter(|(host, _)| new.may_use(catalog, *host))
        {
            let mut write = write_on(new, *host, &amounts);
            write.reservation = Some(reservation.id);
            match allocation::set_allocations_with(catalog, &[write], now, policy) {
                Ok(changes) => return Ok((changes, *host)),
                // The project's share is used up: no other host of the lease changes that.
                Err(exceeded @ Rejection::ShareExceeded { .. }) => return Err(exceeded),
                Err(_) => {}
            }
        }
    }
    Err(no_room())
}

/// What `lease`'s compute reservations hold and no instance (but `new`) uses, with
/// `instances` left.
fn room(catalog: &Catalog, lease: &Lease, instances: u64, new: Uuid) -> Room {
    let mut room = Room {
        instances,
        ..Room::default()
    };
    let vcpu = ResourceClass::parse("VCPU").expect("invariant: a standard class");
    let memory = ResourceClass::parse("MEMORY_MB").expect("invariant: a standard class");
    for reservation in lease.reservations.iter().filter(|r| is_compute(&r.spec)) {
        for (host, _) in &reservation.hosts {
            let left = |class: &ResourceClass| {
                crate::query::presentation::limit_on(reservation, *host, class).map_or(0, |held| {
                    held.saturating_sub(catalog.reserved_use(reservation.id, *host, class, new))
                })
            };
            room.vcpus += left(&vcpu);
            room.ram_mb += left(&memory);
        }
    }
    room
}

fn unreserved(
    catalog: &Catalog,
    new: &NewInstance,
    flavor: &Flavor,
    now: Instant,
    policy: FencePolicy,
) -> Result<(Vec<Change>, ProviderId), Rejection> {
    crate::query::capacity::check_zone(catalog, new.zone.as_deref())?;
    let amounts = flavor_amounts(flavor, true);
    let best_effort = |host: ProviderId| {
        let mut write = write_on(new, host, &amounts);
        write.consumer_type = Some(crate::model::consumer::PREEMPTIBLE.to_owned());
        write
    };
    let hosts = catalog.providers().filter(|p| {
        p.is_up()
            && new.may_use(catalog, p.uuid())
            && new
                .zone
                .as_deref()
                .is_none_or(|z| p.availability_zone() == Some(z))
            && amounts
                .iter()
                .all(|(class, _)| p.inventories().contains_key(class))
    });
    for host in hosts {
        // Only unreserved capacity: the write must pass as firm work would (preemptible work
        // may otherwise borrow what leases hold); it is then recorded as best effort.
        let firm = write_on(new, host.uuid(), &amounts);
        if allocation::set_allocations_with(catalog, &[firm], now, policy).is_err() {
            continue;
        }
        if let Ok(changes) =
            allocation::set_allocations_with(catalog, &[best_effort(host.uuid())], now, policy)
        {
            return Ok((changes, host.uuid()));
        }
    }
    let on = new
        .provider
        .map(|cloud| format!(" on provider cloud {cloud}"))
        .unwrap_or_default();
    Err(refused(format!(
        "no unreserved capacity left{on} for flavor {} ({} vcpus, {} MB, {} GB)",
        flavor.name, flavor.vcpus, flavor.ram_mb, flavor.disk_gb
    )))
}

/// Destroys an instance of `project` (`None`: any), releasing its allocations.
pub fn destroy_instance(
    catalog: &Catalog,
    id: Uuid,
    project: Option<&str>,
) -> Result<Vec<Change>, Rejection> {
    catalog
        .instance(id)
        .filter(|i| project.is_none_or(|p| p == i.project_id))
        .ok_or(Rejection::InstanceNotFound(id))?;
    let mut changes = Vec::new();
    if catalog.consumer(id).is_some() {
        changes.push(Change::ConsumerSet {
            uuid: id,
            consumer: None,
        });
    }
    changes.push(Change::InstanceSet { id, instance: None });
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::promise::{PoolAsk, StorageAsk, offered};

    #[test]
    fn a_pool_is_held_as_one_unit_per_core() {
        let ask = Ask {
            pool: Some(PoolAsk {
                cores: 20,
                ram_mb: 10_240,
                instances: 5,
            }),
            ..Ask::default()
        };
        let specs = specs(&ask, Some("az1"), None);
        assert_eq!(specs.len(), 1);
        let ReservationSpec::Instance {
            vcpus,
            memory_mb,
            amount,
            resource_properties,
            ..
        } = &specs[0]
        else {
            panic!("a pool is instance slots")
        };
        assert_eq!((*vcpus, *memory_mb, *amount), (1, 512, 20));
        assert!(resource_properties.contains("az1"));
        // Memory that does not divide by the cores is held rounded up per core; a pool without
        // cores is its instances of the average memory.
        let odd = PoolAsk {
            cores: 3,
            ram_mb: 1000,
            instances: 2,
        };
        assert_eq!(odd.units(), (3, 1, 334));
        let memory_only = PoolAsk {
            cores: 0,
            ram_mb: 1000,
            instances: 4,
        };
        assert_eq!(memory_only.units(), (4, 0, 250));
        let storage = StorageAsk {
            size_gb: 100,
            snapshots: 2,
            volumes: 4,
        };
        assert_eq!(storage.units(), (100, 1));
    }

    #[test]
    fn an_offer_is_the_same_pool_cut_to_what_fits() {
        let ask = Ask {
            pool: Some(PoolAsk {
                cores: 20,
                ram_mb: 10_240,
                instances: 5,
            }),
            public_ips: 3,
            ..Ask::default()
        };
        let offer = offered(&ask, &[8, 1]);
        assert_eq!(
            offer.pool,
            Some(PoolAsk {
                cores: 8,
                ram_mb: 4096,
                instances: 2
            })
        );
        assert_eq!(offer.public_ips, 1);
        assert_eq!(specs(&offer, None, Some("n")).len(), 2);
    }
}
