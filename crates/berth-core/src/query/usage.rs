//! Usage history (berth): what a commit's changes close of it ([`close`]), the open usage of a
//! catalog ([`open`]), and the usage report both add up to ([`report`]). See
//! [`crate::model::usage`].

use crate::catalog::Catalog;
use crate::change::Change;
use crate::model::consumer::{Consumer, PREEMPTIBLE};
use crate::model::id::{ProviderId, ReservationId};
use crate::model::lease::{Lease, LeaseStatus, ReservationSpec};
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::time::Instant;
use crate::model::usage::{UsageKind, UsageSegment, UsageSource};
use std::collections::{BTreeMap, BTreeSet};

/// The class a floating-IP reservation's address counts as, one unit each.
const ADDRESS_CLASS: &str = "IPV4_ADDRESS";

/// The usage history `changes` close at `now`, judged against `catalog` as it was before them,
/// and the changes made to agree with it. A consumer or lease uses what its state says from
/// its `updated_at` on; where `changes` set one whose use that way differs from before (or
/// remove it, or move its `updated_at`), what it used before is closed at `now` (the segments
/// returned, each ending by `now`) and its last new state is stamped `updated_at = now`, so its
/// open usage begins where the closed ends. A lease created and a consumer's first allocations
/// close nothing, nor does a change that leaves both what a source uses and its `updated_at` as
/// they were: the writes that make new things write no history.
pub fn close(catalog: &Catalog, changes: &mut [Change], now: Instant) -> Vec<UsageSegment> {
    // The last change of each source that the catalog already holds: only its final state
    // counts (the states between last no time).
    let mut last: BTreeMap<UsageSource, usize> = BTreeMap::new();
    for (index, change) in changes.iter().enumerate() {
        match change {
            Change::ConsumerSet { uuid, .. } if catalog.consumer(*uuid).is_some() => {
                last.insert(UsageSource::Consumer(*uuid), index);
            }
            Change::LeaseSet { id, .. } if catalog.lease(*id).is_some() => {
                last.insert(UsageSource::Lease(*id), index);
            }
            _ => {}
        }
    }
    let mut closed = Vec::new();
    for (source, index) in last {
        // What the source used from its `updated_at` on, whether its new state uses the same
        // from then on with the same `updated_at`, and where the new state keeps it.
        let (was, same, stamp) = match &mut changes[index] {
            Change::ConsumerSet { uuid, consumer } => {
                let Some(before) = catalog.consumer(*uuid) else {
                    continue;
                };
                let since = before.updated_at;
                let was = consumer_segments(source, before, since);
                let same = consumer.as_ref().is_some_and(|after| {
                    after.updated_at == since && consumer_segments(source, after, since) == was
                });
                (
                    was,
                    same,
                    consumer.as_mut().map(|after| &mut after.updated_at),
                )
            }
            Change::LeaseSet { id, lease } => {
                let Some(before) = catalog.lease(*id) else {
                    continue;
                };
                let since = before.updated_at;
                let was = lease_segments(catalog, source, before, since);
                let same = lease.as_ref().is_some_and(|after| {
                    after.updated_at == since
                        && lease_segments(catalog, source, after, since) == was
                });
                (was, same, lease.as_mut().map(|after| &mut after.updated_at))
            }
            _ => continue,
        };
        if same {
            continue;
        }
        if let Some(updated_at) = stamp {
            *updated_at = now;
        }
        closed.extend(ended(was, now));
    }
    closed
}

/// `segments` ended by `at`: each cut there, those not begun by then dropped.
fn ended(segments: Vec<UsageSegment>, at: Instant) -> impl Iterator<Item = UsageSegment> {
    segments.into_iter().filter_map(move |mut segment| {
        let until = segment.until.map_or(at, |until| until.min(at));
        (segment.since < until).then(|| {
            segment.until = Some(until);
            segment
        })
    })
}

/// The open usage of `catalog` that overlaps `period`: what each consumer and lease uses from
/// its `updated_at` on. `None` when it holds more than `limit` segments.
pub fn open(catalog: &Catalog, period: Window, limit: usize) -> Option<Vec<UsageSegment>> {
    let mut segments = Vec::new();
    let overlaps = |s: &UsageSegment| s.within(period).is_some();
    for (uuid, consumer) in catalog.consumers() {
        let source = UsageSource::Consumer(uuid);
        segments.extend(
            consumer_segments(source, consumer, consumer.updated_at)
                .into_iter()
                .filter(overlaps),
        );
        if segments.len() > limit {
            return None;
        }
    }
    for lease in catalog.leases() {
        if lease.end <= period.start() || lease.start >= period.end() {
            continue;
        }
        let source = UsageSource::Lease(lease.id);
        segments.extend(
            lease_segments(catalog, source, lease, lease.updated_at)
                .into_iter()
                .filter(overlaps),
        );
        if segments.len() > limit {
            return None;
        }
    }
    Some(segments)
}

/// The open usage of one lease: what it holds from its `updated_at` on, and what the consumers
/// presenting its reservations hold from theirs.
pub fn open_of_lease(catalog: &Catalog, lease: &Lease) -> Vec<UsageSegment> {
    let mut segments = lease_segments(
        catalog,
        UsageSource::Lease(lease.id),
        lease,
        lease.updated_at,
    );
    for reservation in &lease.reservations {
        for uuid in catalog.consumers_of_reservation(reservation.id) {
            if let Some(consumer) = catalog.consumer(uuid) {
                segments.extend(consumer_segments(
                    UsageSource::Consumer(uuid),
                    consumer,
                    consumer.updated_at,
                ));
            }
        }
    }
    segments
}

/// A lease's utilization at `now`, in whole percent: what consumers presenting its reservations
/// hold of `class` over what it holds of it (`None`: of the class it uses best). `None` when it
/// holds nothing then (of that class).
pub fn utilization_at(
    catalog: &Catalog,
    lease: &Lease,
    class: Option<&ResourceClass>,
    now: Instant,
) -> Option<u32> {
    let mut by_class: BTreeMap<&ResourceClass, (u128, u128)> = BTreeMap::new();
    let segments = open_of_lease(catalog, lease);
    for segment in &segments {
        let current = segment.since <= now && segment.until.is_none_or(|until| now < until);
        if !current || class.is_some_and(|c| c != &segment.class) {
            continue;
        }
        let (reserved, consumed) = by_class.entry(&segment.class).or_default();
        match segment.kind {
            UsageKind::Reserved => *reserved += u128::from(segment.amount),
            _ => *consumed += u128::from(segment.amount),
        }
    }
    by_class
        .into_values()
        .filter(|(reserved, _)| *reserved > 0)
        .map(|(reserved, consumed)| (consumed.min(reserved) * 100 / reserved) as u32)
        .max()
}

/// What a consumer uses from `since` on: its allocations.
fn consumer_segments(
    source: UsageSource,
    consumer: &Consumer,
    since: Instant,
) -> Vec<UsageSegment> {
    let kind = match (consumer.reservation, consumer.consumer_type.as_deref()) {
        (Some(_), _) => UsageKind::Consumed,
        (None, Some(PREEMPTIBLE)) => UsageKind::Preemptible,
        (None, _) => UsageKind::OnDemand,
    };
    consumer
        .entries()
        .filter(|(_, _, amount)| *amount > 0)
        .map(|(provider, class, amount)| UsageSegment {
            source,
            kind,
            project_id: consumer.project_id.clone(),
            reservation: consumer.reservation,
            provider,
            class: class.clone(),
            amount,
            since,
            until: None,
        })
        .collect()
}

/// What a lease reserves from `since` on: each hold of a pending, active or failed lease, over
/// what is left of its window then. A whole host counts as its inventories' capacity; a floating IP
/// as one address.
pub(crate) fn lease_segments(
    catalog: &Catalog,
    source: UsageSource,
    lease: &Lease,
    since: Instant,
) -> Vec<UsageSegment> {
    if !matches!(
        lease.status,
        LeaseStatus::Pending | LeaseStatus::Active | LeaseStatus::Error
    ) {
        return Vec::new();
    }
    let Some(window) = Window::new(lease.start.max(since), lease.end) else {
        return Vec::new();
    };
    let mut segments = Vec::new();
    for reservation in &lease.reservations {
        for hold in reservation.holds(window) {
            let amounts: Vec<(ResourceClass, u64)> = match &reservation.spec {
                ReservationSpec::Host { .. } => host_capacity(catalog, hold.host),
                ReservationSpec::Instance { .. } => hold.amounts.to_vec(),
                ReservationSpec::FloatingIp { .. } => ResourceClass::parse(ADDRESS_CLASS)
                    .map(|class| vec![(class, 1)])
                    .unwrap_or_default(),
            };
            segments.extend(
                amounts
                    .into_iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(class, amount)| UsageSegment {
                        source,
                        kind: UsageKind::Reserved,
                        project_id: lease.project_id.to_string(),
                        reservation: Some(reservation.id),
                        provider: hold.host,
                        class,
                        amount,
                        since: window.start(),
                        until: Some(window.end()),
                    }),
            );
        }
    }
    segments
}

/// A host's capacity by class (none for a provider the catalog no longer holds).
fn host_capacity(catalog: &Catalog, host: ProviderId) -> Vec<(ResourceClass, u64)> {
    catalog.provider(host).map_or_else(Vec::new, |provider| {
        provider
            .inventories()
            .iter()
            .map(|(class, inventory)| (class.clone(), inventory.capacity()))
            .collect()
    })
}

/// Unit-microseconds: an amount held for a time (one unit for one hour is 3.6e9).
pub type UnitMicros = u128;

/// Unit-microseconds in one resource-hour.
pub const UNIT_HOUR: UnitMicros = 3_600_000_000;

/// One project's usage of one class over a report's period, in unit-microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Held by the project's reservations.
    pub reserved: UnitMicros,
    /// The project's consumers' allocations inside reservations (its own or shared with it).
    pub consumed: UnitMicros,
    /// Preemptible work running in the capacity the project's reservations hold.
    pub lent: UnitMicros,
    /// What the project's reservations held that nobody used: reserved less what consumers
    /// (of any project) presenting them held, less what was lent.
    pub idle: UnitMicros,
    /// The project's consumers' allocations outside reservations.
    pub on_demand: UnitMicros,
    /// The project's preemptible consumers' allocations.
    pub preemptible: UnitMicros,
}

/// The usage report over `period` as far as `now` (usage is history: nothing after `now`
/// counts), by project and class, from `segments` (every segment that overlaps it, of every
/// project: consumption inside a project's reservations and work lent its capacity may be
/// another project's). `project` keeps one project's rows.
///
/// Lent: at each instant, the preemptible amount of a class on a provider is counted against
/// the reservations holding that class there, oldest first, each up to what it holds.
pub fn report(
    segments: &[UsageSegment],
    period: Window,
    now: Instant,
    project: Option<&str>,
) -> BTreeMap<(String, ResourceClass), UsageTotals> {
    let mut rows: BTreeMap<(String, ResourceClass), UsageTotals> = BTreeMap::new();
    let Some(period) = Window::new(period.start(), period.end().min(now)) else {
        return rows;
    };
    let owners: BTreeMap<ReservationId, &str> = segments
        .iter()
        .filter(|s| s.kind == UsageKind::Reserved)
        .filter_map(|s| Some((s.reservation?, s.project_id.as_str())))
        .collect();
    // What consumers held inside each owner's reservations, for the idle figure.
    let mut inside: BTreeMap<(&str, &ResourceClass), UnitMicros> = BTreeMap::new();
    for segment in segments {
        let Some(held) = held_within(segment, period) else {
            continue;
        };
        let key = (segment.project_id.clone(), segment.class.clone());
        let totals = rows.entry(key).or_default();
        match segment.kind {
            UsageKind::Reserved => totals.reserved += held,
            UsageKind::Consumed => {
                totals.consumed += held;
                if let Some(owner) = segment.reservation.and_then(|r| owners.get(&r)) {
                    *inside.entry((owner, &segment.class)).or_default() += held;
                }
            }
            UsageKind::OnDemand => totals.on_demand += held,
            UsageKind::Preemptible => totals.preemptible += held,
        }
    }
    for ((owner, class), lent) in lent(segments, period) {
        rows.entry((owner.to_owned(), class.clone()))
            .or_default()
            .lent += lent;
    }
    for ((owner, class), totals) in &mut rows {
        let used = inside.get(&(owner.as_str(), class)).copied().unwrap_or(0);
        totals.idle = totals
            .reserved
            .saturating_sub(used)
            .saturating_sub(totals.lent);
    }
    if let Some(project) = project {
        rows.retain(|(p, _), _| p == project);
    }
    rows
}

/// How long `segment` ran inside `period`, times its amount.
fn held_within(segment: &UsageSegment, period: Window) -> Option<UnitMicros> {
    let micros = u128::try_from(segment.within(period)?.duration().as_micros()).ok()?;
    Some(micros * u128::from(segment.amount))
}

/// Preemptible work in reserved capacity over `period`, by the reserving project and class: a
/// sweep over each provider and class's segment boundaries, in time order.
fn lent(segments: &[UsageSegment], period: Window) -> BTreeMap<(&str, &ResourceClass), UnitMicros> {
    let mut by_place: BTreeMap<(ProviderId, &ResourceClass), Vec<&UsageSegment>> = BTreeMap::new();
    for segment in segments {
        if matches!(segment.kind, UsageKind::Reserved | UsageKind::Preemptible) {
            by_place
                .entry((segment.provider, &segment.class))
                .or_default()
                .push(segment);
        }
    }
    let mut lent = BTreeMap::new();
    for ((_, class), place) in by_place {
        if !place.iter().any(|s| s.kind == UsageKind::Preemptible)
            || !place.iter().any(|s| s.kind == UsageKind::Reserved)
        {
            continue;
        }
        // Each segment's start and end, clipped to the period; at one instant ends go first.
        let mut events: Vec<(Instant, bool, usize)> = Vec::with_capacity(place.len() * 2);
        for (index, segment) in place.iter().enumerate() {
            if let Some(part) = segment.within(period) {
                events.push((part.start(), true, index));
                events.push((part.end(), false, index));
            }
        }
        events.sort_unstable();
        // The reservations holding here, oldest first, and the preemptible amount running.
        let mut holding: BTreeSet<(Instant, Option<ReservationId>, usize)> = BTreeSet::new();
        let mut preemptible: u64 = 0;
        let mut last = period.start();
        for (at, starts, index) in events {
            let micros = u128::try_from(at.since(last).as_micros()).unwrap_or(0);
            if micros > 0 && preemptible > 0 {
                let mut left = preemptible;
                for &(_, _, held) in &holding {
                    let taken = left.min(place[held].amount);
                    *lent
                        .entry((place[held].project_id.as_str(), class))
                        .or_default() += u128::from(taken) * micros;
                    left -= taken;
                    if left == 0 {
                        break;
                    }
                }
            }
            last = at;
            let segment = place[index];
            match (segment.kind, starts) {
                (UsageKind::Preemptible, true) => preemptible += segment.amount,
                (UsageKind::Preemptible, false) => preemptible -= segment.amount,
                (_, true) => {
                    holding.insert((segment.since, segment.reservation, index));
                }
                (_, false) => {
                    holding.remove(&(segment.since, segment.reservation, index));
                }
            }
        }
    }
    lent
}

/// One class of a lease's use over time: what it held and what consumers presenting it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassUtilization {
    /// The class.
    pub class: ResourceClass,
    /// Held by the lease over the period, in unit-microseconds.
    pub reserved: UnitMicros,
    /// Held by consumers presenting its reservations (of any project), in unit-microseconds.
    pub consumed: UnitMicros,
    /// Where the amounts change, in time order: `(from, reserved, consumed)`, each holding
    /// until the next step (the last one until the period's end).
    pub steps: Vec<(Instant, u64, u64)>,
}

/// The use of `lease` (whose reservations are `reservations`) over `period`, by class, from
/// `segments` (closed and open, of every source: the lease's own reserved segments and the
/// consumed segments presenting its reservations count, nothing else).
pub fn lease_utilization(
    segments: &[UsageSegment],
    lease: crate::model::id::LeaseId,
    reservations: &BTreeSet<ReservationId>,
    period: Window,
) -> Vec<ClassUtilization> {
    // Per class: `(at, reserved delta, consumed delta)` at each clipped segment's ends.
    let mut changes: BTreeMap<&ResourceClass, Vec<(Instant, i128, i128)>> = BTreeMap::new();
    for segment in segments {
        let reserved = match segment.kind {
            UsageKind::Reserved if segment.source == UsageSource::Lease(lease) => true,
            UsageKind::Consumed
                if segment
                    .reservation
                    .is_some_and(|r| reservations.contains(&r)) =>
            {
                false
            }
            _ => continue,
        };
        let Some(part) = segment.within(period) else {
            continue;
        };
        let amount = i128::from(segment.amount);
        let (r, c) = if reserved { (amount, 0) } else { (0, amount) };
        let class = changes.entry(&segment.class).or_default();
        class.push((part.start(), r, c));
        class.push((part.end(), -r, -c));
    }
    changes
        .into_iter()
        .map(|(class, mut deltas)| {
            deltas.sort_unstable_by_key(|(at, _, _)| *at);
            let (mut reserved, mut consumed) = (0_i128, 0_i128);
            let (mut reserved_total, mut consumed_total) = (0_u128, 0_u128);
            let mut steps: Vec<(Instant, u64, u64)> = Vec::new();
            let mut last = period.start();
            for (at, r, c) in deltas {
                let micros = u128::try_from(at.since(last).as_micros()).unwrap_or(0);
                reserved_total += micros * reserved.unsigned_abs();
                consumed_total += micros * consumed.unsigned_abs();
                last = at;
                reserved += r;
                consumed += c;
                let now = (
                    at,
                    u64::try_from(reserved).unwrap_or(0),
                    u64::try_from(consumed).unwrap_or(0),
                );
                match steps.last_mut() {
                    Some(step) if step.0 == at => *step = now,
                    _ => steps.push(now),
                }
            }
            // The period's end closes every segment: its zero step says nothing.
            if steps.last().is_some_and(|s| s.0 == period.end()) {
                steps.pop();
            }
            steps.dedup_by(|later, earlier| (later.1, later.2) == (earlier.1, earlier.2));
            ClassUtilization {
                class: class.clone(),
                reserved: reserved_total,
                consumed: consumed_total,
                steps,
            }
        })
        .collect()
}
