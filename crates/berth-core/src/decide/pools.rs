//! Planned capacity changes (Promise's `increase-capacity` and `decrease-capacity`): total
//! capacity of a provider, a zone or an earlier pool's providers, raised or lowered over a
//! window. A decrease that would leave reservations short is refused and names them, unless it
//! is forced, in which case they are marked degraded in the same decision.

use crate::catalog::Catalog;
use crate::change::Change;
use crate::change::record;
use crate::model::id::{LeaseId, ProviderId};
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::promise::CapacityPool;
use crate::model::provider::Provider;
use crate::model::time::Instant;
use crate::query::capacity::usable;
use crate::rejection::Rejection;
use std::collections::BTreeSet;
use uuid::Uuid;

/// A planned capacity change to make.
#[derive(Debug, Clone)]
pub struct CapacityChange {
    /// The new pool's id.
    pub id: Uuid,
    /// The source as named (`ResourceProvider:<uuid>`, a provider name, `Zone:<name>`, a zone
    /// name, `ResourcePool:<id>`).
    pub source: String,
    /// Raise (`true`) or lower the capacity.
    pub increase: bool,
    /// How much, by class.
    pub amounts: Vec<(ResourceClass, u64)>,
    /// From when (absent: now).
    pub start: Option<Instant>,
    /// Until when (absent: for good).
    pub end: Option<Instant>,
    /// Make a decrease even when it leaves reservations short (they become degraded).
    pub force: bool,
    /// Who makes it.
    pub project_id: String,
}

/// The providers a source names.
fn source_providers<'c>(
    catalog: &'c Catalog,
    source: &str,
) -> Result<Vec<&'c Provider>, Rejection> {
    let not_found = || Rejection::SourceNotFound(source.to_owned());
    let (kind, name) = source.split_once(':').unwrap_or(("", source));
    let by_uuid = |text: &str| {
        Uuid::parse_str(text)
            .ok()
            .and_then(|uuid| catalog.provider(ProviderId::new(uuid)))
    };
    let zone = |z: &str| -> Vec<&Provider> {
        catalog
            .providers()
            .filter(|p| p.availability_zone() == Some(z))
            .collect()
    };
    let found = match kind {
        "ResourceProvider" => by_uuid(name)
            .or_else(|| catalog.provider_by_name(name))
            .map(|p| vec![p]),
        "Zone" | "AvailabilityZone" => Some(zone(name)).filter(|z| !z.is_empty()),
        "ResourcePool" => {
            let id = Uuid::parse_str(name).map_err(|_| not_found())?;
            let pool = catalog.pool(id).ok_or(Rejection::PoolNotFound(id))?;
            let ids: BTreeSet<ProviderId> = pool.deltas.iter().map(|(p, _, _)| *p).collect();
            Some(
                ids.into_iter()
                    .filter_map(|id| catalog.provider(id))
                    .collect(),
            )
        }
        _ => by_uuid(source)
            .or_else(|| catalog.provider_by_name(source))
            .map(|p| vec![p])
            .or_else(|| Some(zone(source)).filter(|z| !z.is_empty())),
    };
    found.filter(|p| !p.is_empty()).ok_or_else(not_found)
}

/// What `provider` has of `class` over `window` and what is taken at the busiest instant.
fn headroom(
    catalog: &Catalog,
    provider: &Provider,
    class: &ResourceClass,
    window: Window,
) -> (i64, i64) {
    let uuid = provider.uuid();
    let capacity = usable(provider, class) + catalog.capacity_change_min(uuid, class, window);
    let peak = catalog.ledger().peak(uuid, window, &[]);
    let held = match peak.exclusive > 0 {
        true => capacity,
        false => peak.amount(class) as i64,
    };
    // What consumers that present no reservation use (best-effort work aside): reservations'
    // own consumers use part of what the ledger holds for them.
    let unreserved = provider
        .firm_used(class)
        .saturating_sub(provider.reserved_used(class));
    (capacity, held + unreserved as i64)
}

/// Whether `provider` holds, in some class over `window`, less than what is promised on it
/// (reservations' holds and unreserved use): the leases there are short.
pub(crate) fn over_capacity(catalog: &Catalog, provider: &Provider, window: Window) -> bool {
    provider.inventories().keys().any(|class| {
        let (capacity, taken) = headroom(catalog, provider, class, window);
        taken > capacity
    })
}

/// Spreads `amount` of `class` over `providers`: an increase evenly, a decrease from the most
/// headroom first (so as few reservations as possible are left short).
fn spread(
    catalog: &Catalog,
    providers: &[&Provider],
    class: &ResourceClass,
    amount: u64,
    increase: bool,
    window: Window,
) -> Result<Vec<(ProviderId, String, i64)>, Rejection> {
    let having: Vec<&Provider> = providers
        .iter()
        .copied()
        .filter(|p| p.inventories().contains_key(class))
        .collect();
    if having.is_empty() {
        return Err(Rejection::BadLease(format!(
            "the source has no {} to change",
            class.as_str()
        )));
    }
    let amount = i64::try_from(amount).unwrap_or(i64::MAX);
    if increase {
        let n = having.len() as i64;
        return Ok(having
            .iter()
            .enumerate()
            .map(|(i, p)| (p.uuid(), amount / n + i64::from((i as i64) < amount % n)))
            .filter(|(_, d)| *d > 0)
            .map(|(uuid, d)| (uuid, class.as_str().to_owned(), d))
            .collect());
    }
    let mut ranked: Vec<(i64, i64, &Provider)> = having
        .iter()
        .map(|p| {
            let (capacity, taken) = headroom(catalog, p, class, window);
            (capacity - taken, capacity, *p)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.id().cmp(&b.2.id())));
    let mut left = amount;
    let mut deltas: Vec<(ProviderId, String, i64)> = Vec::new();
    // First what is free, then what is held (those reservations will be short).
    for pass in [true, false] {
        for (free, capacity, provider) in &ranked {
            let already: i64 = deltas
                .iter()
                .filter(|(u, _, _)| *u == provider.uuid())
                .map(|(_, _, d)| -d)
                .sum();
            let room = match pass {
                true => (*free).max(0),
                false => capacity - already,
            };
            let take = left.min(room).max(0);
            if take > 0 {
                deltas.push((provider.uuid(), class.as_str().to_owned(), -take));
                left -= take;
            }
        }
    }
    if left > 0 {
        return Err(Rejection::BadLease(format!(
            "the source has only {} {} to decrease",
            amount - left,
            class.as_str()
        )));
    }
    Ok(merge(deltas))
}

fn merge(deltas: Vec<(ProviderId, String, i64)>) -> Vec<(ProviderId, String, i64)> {
    let mut out: Vec<(ProviderId, String, i64)> = Vec::new();
    for (uuid, class, delta) in deltas {
        match out.iter_mut().find(|(u, c, _)| *u == uuid && *c == class) {
            Some(found) => found.2 += delta,
            None => out.push((uuid, class, delta)),
        }
    }
    out
}

/// The leases a set of decreases leaves short over `window`.
pub(crate) fn short(
    catalog: &Catalog,
    deltas: &[(ProviderId, String, i64)],
    window: Window,
) -> Vec<LeaseId> {
    let mut leases = BTreeSet::new();
    for (uuid, class, delta) in deltas.iter().filter(|(_, _, d)| *d < 0) {
        let (Some(provider), Some(class)) = (catalog.provider(*uuid), ResourceClass::parse(class))
        else {
            continue;
        };
        let (capacity, taken) = headroom(catalog, provider, &class, window);
        let exclusive = catalog.ledger().peak(*uuid, window, &[]).exclusive > 0;
        if exclusive || taken > capacity + delta {
            leases.extend(
                catalog
                    .ledger()
                    .holds_on(*uuid, window)
                    .into_iter()
                    .filter_map(|hold| catalog.lease_of_reservation(hold.reservation))
                    .filter(|lease| lease.holds_capacity())
                    .map(|lease| lease.id),
            );
        }
    }
    leases.into_iter().collect()
}

/// Makes a planned capacity change.
pub fn change_capacity(
    catalog: &Catalog,
    change: &CapacityChange,
    now: Instant,
) -> Result<(Vec<Change>, CapacityPool), Rejection> {
    let providers = source_providers(catalog, &change.source)?;
    let start = change.start.unwrap_or(now);
    let end = change.end.unwrap_or(Instant::from_micros(i64::MAX));
    let window = Window::new(start, end)
        .ok_or_else(|| Rejection::BadLease("end must be later than start".into()))?;
    if change.amounts.iter().all(|(_, n)| *n == 0) {
        return Err(Rejection::BadLease(
            "capacity asks for nothing: give cores, ram, gigabytes or instances".into(),
        ));
    }
    let mut deltas = Vec::new();
    for (class, amount) in change.amounts.iter().filter(|(_, n)| *n > 0) {
        deltas.extend(spread(
            catalog,
            &providers,
            class,
            *amount,
            change.increase,
            window,
        )?);
    }
    let affected = match change.increase {
        true => Vec::new(),
        false => short(catalog, &deltas, window),
    };
    if !affected.is_empty() && !change.force {
        return Err(Rejection::CapacityInUse(affected));
    }
    let pool = CapacityPool {
        id: change.id,
        source: change.source.clone(),
        start,
        end,
        deltas,
        affected: affected.clone(),
        project_id: change.project_id.clone(),
        created_at: now,
    };
    let reason = format!(
        "capacity decreased by pool {} from {} leaves this reservation short",
        pool.id,
        start.as_micros()
    );
    let details = serde_json::json!({"pool": pool.id, "source": pool.source});
    let mut changes = degrade(catalog, &affected, &reason, &details, now);
    changes.push(Change::PoolSet {
        id: pool.id,
        pool: Some(pool.clone()),
    });
    Ok((changes, pool))
}

/// Marks `leases` degraded with `reason`, each with a `lease.degraded` record carrying
/// `details`, so that their holders hear it.
pub(crate) fn degrade(
    catalog: &Catalog,
    leases: &[LeaseId],
    reason: &str,
    details: &serde_json::Value,
    now: Instant,
) -> Vec<Change> {
    let mut changes = Vec::new();
    for id in leases {
        let Some(current) = catalog.lease(*id) else {
            continue;
        };
        let mut lease = current.clone();
        lease.degraded = true;
        lease.set_status_reason(Some(reason.into()));
        lease.updated_at = now;
        changes.push(record(&lease, "lease.degraded", now, details.clone()));
        changes.push(Change::LeaseSet {
            id: lease.id,
            lease: Some(Box::new(lease)),
        });
    }
    changes
}

/// Withdraws a planned capacity change.
pub fn delete_pool(catalog: &Catalog, id: Uuid) -> Result<Vec<Change>, Rejection> {
    catalog.pool(id).ok_or(Rejection::PoolNotFound(id))?;
    Ok(vec![Change::PoolSet { id, pool: None }])
}
