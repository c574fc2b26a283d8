//! Budgets (berth): setting a project's budget, and charging every change of its leases
//! against it as the change is made ([`charge`]). See [`crate::model::budget`].

use crate::catalog::Catalog;
use crate::change::Change;
use crate::decide::class_amounts;
use crate::limits;
use crate::model::budget::{Budget, BudgetPeriod};
use crate::model::id::LeaseId;
use crate::model::lease::{Lease, LeaseStatus};
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::time::{Instant, Span};
use crate::model::usage::UsageSource;
use crate::query::usage::lease_segments;
use crate::rejection::{BudgetRefusal, Rejection};
use std::collections::BTreeMap;

/// Unit-microseconds in a unit-second.
const SECOND: i128 = 1_000_000;

/// Charges by period start and class, in unit-microseconds.
type Charges = BTreeMap<(Instant, ResourceClass), i128>;

/// Sets `project`'s budget: the most unit-hours of each class (`limits`, from the wire: at
/// most [`limits::BUDGET_CLASSES_MAX`] classes the catalog knows, each 0 to
/// [`limits::BUDGET_HOURS_MAX`]) its leases may hold per `period`; the budget as set. A
/// project's first budget is charged what its leases hold from now on (what they held before
/// it was set is not charged); a budget replaced keeps its charges when its period stays.
pub fn set_budget(
    catalog: &Catalog,
    project: &str,
    period: BudgetPeriod,
    limits: &BTreeMap<String, i64>,
    now: Instant,
) -> Result<(Vec<Change>, Budget), Rejection> {
    if !(1..=limits::PROJECT_ID_LEN_MAX).contains(&project.chars().count()) {
        return Err(Rejection::BadBudget(format!(
            "project_id: must be between 1 and {} characters",
            limits::PROJECT_ID_LEN_MAX
        )));
    }
    let limits = class_amounts(
        catalog,
        "limits",
        limits,
        0..=limits::BUDGET_HOURS_MAX,
        limits::BUDGET_CLASSES_MAX,
    )
    .map_err(Rejection::BadBudget)?;
    let mut budget = Budget {
        project_id: project.to_owned(),
        period,
        limits,
        charged: BTreeMap::new(),
        updated_at: now,
    };
    match catalog.budget(project) {
        Some(kept) if kept.period == period => budget.charged.clone_from(&kept.charged),
        _ => {
            let mut charges = Charges::new();
            for lease in catalog.leases().filter(|l| *l.project_id == *project) {
                add(&mut charges, catalog, lease, period, now, 1);
            }
            apply(&mut budget, &charges, now);
        }
    }
    let changes = vec![Change::BudgetSet {
        project: project.to_owned(),
        budget: Some(Box::new(budget.clone())),
    }];
    Ok((changes, budget))
}

/// Removes `project`'s budget.
pub fn delete_budget(catalog: &Catalog, project: &str) -> Result<Vec<Change>, Rejection> {
    catalog
        .budget(project)
        .ok_or_else(|| Rejection::BudgetNotFound(project.to_owned()))?;
    Ok(vec![Change::BudgetSet {
        project: project.to_owned(),
        budget: None,
    }])
}

/// The charges that `changes` make at `now` on the budgets of the projects whose leases they
/// change: each such project's budget with what the changed leases hold from now on charged
/// (more for a lease admitted, grown or moved later; less, refunded, for one ended early,
/// shrunk or deleted). When a lease is created (or made from a hold) or grows (a later end or
/// more hosts or instances) past a limit, the whole decision is refused, naming the budget
/// and what would fit it: the same lease ending earlier, or with fewer hosts or instances.
/// An admission from the waitlist is refused alike (the waitlist leaves such a lease waiting);
/// other changes (a heal, a lifecycle event) are charged without refusal. Nothing is computed
/// while no project has a budget.
pub fn charge(
    catalog: &Catalog,
    changes: &[Change],
    now: Instant,
) -> Result<Vec<Change>, Rejection> {
    charging(catalog, changes, now, true)
        .map_err(|refusal| refusal.expect("invariant: a refusal is made when asked for"))
}

/// Whether the budgets take `changes`, as [`charge`] would, without working out what would fit
/// when they do not (the waitlist, which only needs to know, asks this under the writer lock).
pub fn takes(catalog: &Catalog, changes: &[Change], now: Instant) -> bool {
    charging(catalog, changes, now, false).is_ok()
}

/// Whether `change` leaves a project's budget looser than `catalog` holds it: removed, moved to
/// another period, or with a limit raised or removed. A waitlisted lease it held back may fit
/// then.
pub fn loosens(catalog: &Catalog, change: &Change) -> bool {
    let Change::BudgetSet { project, budget } = change else {
        return false;
    };
    let Some(held) = catalog.budget(project) else {
        return false;
    };
    let Some(set) = budget else {
        return true;
    };
    set.period != held.period
        || held
            .limits
            .iter()
            .any(|(class, limit)| set.limits.get(class).is_none_or(|l| l > limit))
}

/// [`charge`], with the refusal's counter-offer worked out only when `offer` (`Err(None)`
/// otherwise).
fn charging(
    catalog: &Catalog,
    changes: &[Change],
    now: Instant,
    offer: bool,
) -> Result<Vec<Change>, Option<Rejection>> {
    if catalog.budgets().next().is_none() {
        return Ok(Vec::new());
    }
    let mut last: BTreeMap<LeaseId, Option<&Lease>> = BTreeMap::new();
    for change in changes {
        if let Change::LeaseSet { id, lease } = change {
            last.insert(*id, lease.as_deref());
        }
    }
    // The budgets charged, as the changes so far leave them.
    let mut budgets: BTreeMap<String, Budget> = BTreeMap::new();
    for (id, after) in last {
        let before = catalog.lease(id);
        let Some(project) = after.or(before).map(|l| &*l.project_id) else {
            continue;
        };
        let Some(period) = budgets
            .get(project)
            .or_else(|| catalog.budget(project))
            .map(|b| b.period)
        else {
            continue;
        };
        let delta = delta(catalog, before, after, period, now);
        if delta.is_empty() {
            continue;
        }
        let budget = budgets.entry(project.to_owned()).or_insert_with(|| {
            catalog
                .budget(project)
                .cloned()
                .expect("invariant: the project has a budget")
        });
        if let Some(after) = after.filter(|after| grows(before, after))
            && let Some((period, class)) = exceeded(budget, &delta)
        {
            return Err(offer.then(|| {
                Rejection::BudgetExceeded(Box::new(refusal(
                    catalog, budget, before, after, period, &class, &delta, now,
                )))
            }));
        }
        apply(budget, &delta, now);
    }
    Ok(budgets
        .into_iter()
        .map(|(project, budget)| Change::BudgetSet {
            project,
            budget: Some(Box::new(budget)),
        })
        .collect())
}

/// Whether `after` is a lease made (from nothing, a hold or the waitlist) or grown: one whose
/// admission a budget may refuse.
fn grows(before: Option<&Lease>, after: &Lease) -> bool {
    let Some(before) = before else {
        return true;
    };
    let slots = |l: &Lease| -> u64 {
        l.reservations
            .iter()
            .flat_map(|r| r.hosts.iter())
            .map(|(_, n)| u64::from(*n))
            .sum()
    };
    matches!(before.status, LeaseStatus::Held | LeaseStatus::Waiting)
        || after.end > before.end
        || slots(after) > slots(before)
}

/// What `after` holds from `now` on less what `before` did, by period and class.
fn delta(
    catalog: &Catalog,
    before: Option<&Lease>,
    after: Option<&Lease>,
    period: BudgetPeriod,
    now: Instant,
) -> Charges {
    let mut charges = Charges::new();
    if let Some(after) = after {
        add(&mut charges, catalog, after, period, now, 1);
    }
    if let Some(before) = before {
        add(&mut charges, catalog, before, period, now, -1);
    }
    charges.retain(|_, micros| *micros != 0);
    charges
}

/// Adds `sign` times what `lease` holds from `now` on to `charges`.
fn add(
    charges: &mut Charges,
    catalog: &Catalog,
    lease: &Lease,
    period: BudgetPeriod,
    now: Instant,
    sign: i128,
) {
    for segment in lease_segments(catalog, UsageSource::Lease(lease.id), lease, now) {
        let Some(window) = Window::new(segment.since, segment.until.unwrap_or(lease.end)) else {
            continue;
        };
        for (start, part) in period.split(window) {
            let micros = i128::from(part.duration().as_micros());
            *charges.entry((start, segment.class.clone())).or_default() +=
                sign * micros * i128::from(segment.amount);
        }
    }
}

/// The first period and class whose limit `delta` takes `budget` past, among those it grows.
fn exceeded(budget: &Budget, delta: &Charges) -> Option<(Instant, ResourceClass)> {
    delta.iter().find_map(|((period, class), micros)| {
        let limit = i128::from(*budget.limits.get(class)?) * 3600 * SECOND;
        let charged = i128::from(budget.charged_in(*period, class)) * SECOND;
        (*micros > 0 && charged + micros > limit).then(|| (*period, class.clone()))
    })
}

/// Whether `delta` keeps every limit of `budget`.
fn fits(budget: &Budget, delta: &Charges) -> bool {
    exceeded(budget, delta).is_none()
}

/// Charges `delta` to `budget` and forgets the periods before the previous one.
fn apply(budget: &mut Budget, delta: &Charges, now: Instant) {
    for ((period, class), micros) in delta {
        let charged = budget.charged.entry(*period).or_default();
        let was = i128::from(charged.get(class).copied().unwrap_or(0));
        let now_charged = (was + seconds(*micros)).max(0);
        charged.insert(
            class.clone(),
            u64::try_from(now_charged).unwrap_or(u64::MAX),
        );
    }
    let current = budget.period.containing(now).start();
    let previous = budget
        .period
        .containing(current - Span::from_micros(1))
        .start();
    budget.charged.retain(|period, _| *period >= previous);
}

/// Unit-microseconds as unit-seconds, to the nearest.
fn seconds(micros: i128) -> i128 {
    (micros + SECOND / 2).div_euclid(SECOND)
}

/// The refusal of `after` for `period` and `class`, with what would fit: the same lease
/// ending earlier (to the minute), or (a lease of one reservation) holding fewer hosts or
/// instances.
#[allow(clippy::too_many_arguments)]
fn refusal(
    catalog: &Catalog,
    budget: &Budget,
    before: Option<&Lease>,
    after: &Lease,
    period: Instant,
    class: &ResourceClass,
    asked: &Charges,
    now: Instant,
) -> BudgetRefusal {
    let fits_with = |lease: &Lease| {
        fits(
            budget,
            &delta(catalog, before, Some(lease), budget.period, now),
        )
    };
    // Shorter: the latest end, to the minute, that fits.
    let minute = 60_000_000;
    let floor = after.start.max(now).as_micros();
    let (mut lo, mut hi) = (floor, after.end.as_micros());
    while hi - lo > minute {
        let mid = lo + (hi - lo) / 2;
        let mut shorter = after.clone();
        shorter.end = Instant::from_micros(mid);
        match fits_with(&shorter) {
            true => lo = mid,
            false => hi = mid,
        }
    }
    let end = lo - lo.rem_euclid(minute);
    let shorter_end =
        (end > floor && end > after.start.as_micros()).then(|| Instant::from_micros(end));
    // Fewer: the most slots of its one reservation that fit.
    let fewer = match &*after.reservations {
        [one] => {
            let slots: Vec<_> = one
                .hosts
                .iter()
                .flat_map(|(host, n)| std::iter::repeat_n(*host, *n as usize))
                .collect();
            let keeps = |k: usize| {
                let mut smaller = after.clone();
                let mut kept: BTreeMap<_, u32> = BTreeMap::new();
                for host in &slots[..k] {
                    *kept.entry(*host).or_default() += 1;
                }
                smaller.reservations[0].hosts = kept.into_iter().collect();
                fits_with(&smaller)
            };
            // Fewer slots never charge more: bisect for the most that fit, in as many tries
            // as the count has bits (the decision runs under the writer lock).
            let (mut lo, mut hi) = (0, slots.len());
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                match keeps(mid) {
                    true => lo = mid,
                    false => hi = mid,
                }
            }
            (lo > 0).then_some(lo)
        }
        _ => None,
    };
    BudgetRefusal {
        project: budget.project_id.clone(),
        class: class.as_str().to_owned(),
        period: budget.period,
        period_start: period,
        limit_hours: budget.limits.get(class).copied().unwrap_or(0),
        charged_seconds: budget.charged_in(period, class),
        asked_seconds: u64::try_from(seconds(
            asked.get(&(period, class.clone())).copied().unwrap_or(0),
        ))
        .unwrap_or(0),
        shorter_end,
        fewer: fewer.and_then(|k| u32::try_from(k).ok()),
    }
}
