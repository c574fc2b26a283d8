//! Promise's reads of reservations and instances: the reservations an ETSI query names or lists
//! by kind, those a `query-reservation` filter matches and what they hold over time, what a
//! reservation's instances draw on it, and the instances a project sees. Every read is limited
//! to a project's objects (`None`: every project's, for admins).

use crate::catalog::Catalog;
use crate::model::id::LeaseId;
use crate::model::lease::{Lease, ReservationSpec};
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::promise::{PromiseInstance, PromiseKind};
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Whether `project` (`None`: any) may see an object of `owner`.
fn visible_to(project: Option<&str>, owner: &str) -> bool {
    project.is_none_or(|p| p == owner)
}

/// The kinds of resource a lease holds: a Promise reservation shows under its own kind, and a
/// Blazar lease under each kind it holds (addresses are `network`, instance slots without
/// CPUs `storage`, anything else `compute`).
pub fn kinds_held(lease: &Lease) -> Vec<PromiseKind> {
    lease
        .reservations
        .iter()
        .map(|r| match &r.spec {
            ReservationSpec::FloatingIp { .. } => PromiseKind::Network,
            ReservationSpec::Instance { vcpus: 0, .. } => PromiseKind::Storage,
            _ => PromiseKind::Compute,
        })
        .collect()
}

/// An ETSI reservation query: the reservations it names, or every one of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindQuery {
    /// The kind of the path.
    pub kind: PromiseKind,
    /// The reservations named (`queryReservationFilter`), in the order named; `None`: every
    /// reservation of the kind.
    pub ids: Option<Vec<LeaseId>>,
    /// The project whose reservations may be seen (`None`: every project's).
    pub project: Option<String>,
}

/// What an ETSI reservation query found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named<'a> {
    /// The one reservation the query names.
    One(&'a Lease),
    /// The reservations it names, in its order, or every one of its kind, oldest first.
    Many(Vec<&'a Lease>),
}

/// The reservations `query` names (each must exist and be visible: the first that is not is
/// `LeaseNotFound`), or every visible one of its kind by creation.
pub fn of_kind<'a>(catalog: &'a Catalog, query: &KindQuery) -> Result<Named<'a>, Rejection> {
    let project = query.project.as_deref();
    let find = |id: LeaseId| {
        catalog
            .lease(id)
            .filter(|l| visible_to(project, &l.project_id))
            .ok_or(Rejection::LeaseNotFound(id))
    };
    match query.ids.as_deref() {
        Some([id]) => find(*id).map(Named::One),
        Some(many) => many
            .iter()
            .map(|id| find(*id))
            .collect::<Result<_, _>>()
            .map(Named::Many),
        None => {
            let mut leases: Vec<&Lease> = catalog
                .leases()
                .filter(|l| visible_to(project, &l.project_id))
                .filter(|l| {
                    kinds_held(l).contains(&query.kind)
                        || l.terms().is_some_and(|t| t.kind == query.kind)
                })
                .collect();
            leases.sort_by_key(|l| (l.created_at, l.id));
            Ok(Named::Many(leases))
        }
    }
}

/// How a reservation must fall in a query's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowScope {
    /// It starts, ends or runs in the window.
    Inclusive,
    /// It starts and ends in the window.
    Exclusive,
}

/// A `query-reservation` filter: the project's reservations that match every part given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationQuery {
    /// The project whose reservations may be seen (`None`: every project's).
    pub project: Option<String>,
    /// Reservations asked for in this zone, or holding a host of it.
    pub zone: Option<String>,
    /// Reservations in this window.
    pub window: Option<(Window, WindowScope)>,
    /// Reservations left out.
    pub without: Vec<Uuid>,
    /// Reservations holding at least one of these elements (host uuids or names, address ids
    /// or addresses).
    pub some: Vec<String>,
    /// Reservations holding all of these elements.
    pub every: Vec<String>,
    /// Whether to measure what the matching reservations hold over time.
    pub utilization: bool,
}

/// What a `query-reservation` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    /// The matching reservations, by start.
    pub reservations: Vec<LeaseId>,
    /// What they hold over the window (or their whole span), when asked for.
    pub utilization: Vec<HeldStep>,
}

/// What the matching reservations hold from an instant until the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldStep {
    /// When the step starts.
    pub at: Instant,
    /// How many reservations hold capacity then.
    pub count: i64,
    /// Their virtual CPUs.
    pub cores: i64,
    /// Their memory, MB.
    pub ram: i64,
    /// Their instance slots (with CPUs).
    pub instances: i64,
    /// Their addresses.
    pub addresses: i64,
}

/// The reservations `query` matches, by start, and on request what they hold over time.
pub fn matching(catalog: &Catalog, query: &ReservationQuery) -> Matched {
    let mut leases: Vec<&Lease> = catalog
        .leases()
        .filter(|l| visible_to(query.project.as_deref(), &l.project_id))
        .filter(|l| matches(catalog, query, l))
        .collect();
    leases.sort_by_key(|l| (l.start, l.id));
    let utilization = match query.utilization {
        true => held_over(catalog, &leases, query.window.map(|(w, _)| w)),
        false => Vec::new(),
    };
    Matched {
        reservations: leases.iter().map(|l| l.id).collect(),
        utilization,
    }
}

fn matches(catalog: &Catalog, query: &ReservationQuery, lease: &Lease) -> bool {
    if query.without.contains(&lease.id.uuid()) {
        return false;
    }
    if let Some(zone) = &query.zone {
        let in_zone = lease.terms().and_then(|t| t.zone.as_ref()) == Some(zone)
            || lease.reservations.iter().any(|r| {
                r.hosts.iter().any(|(h, _)| {
                    catalog.provider(*h).and_then(|p| p.availability_zone()) == Some(zone)
                })
            });
        if !in_zone {
            return false;
        }
    }
    if let Some((w, scope)) = &query.window {
        let starts = w.contains(lease.start);
        let ends = lease.end > w.start() && lease.end <= w.end();
        let hit = match scope {
            WindowScope::Exclusive => starts && ends,
            WindowScope::Inclusive => starts || ends || lease.window().overlaps(w),
        };
        if !hit {
            return false;
        }
    }
    if !query.some.is_empty() || !query.every.is_empty() {
        let held = elements(catalog, lease);
        if !query.some.is_empty() && !query.some.iter().any(|e| held.contains(e)) {
            return false;
        }
        if !query.every.iter().all(|e| held.contains(e)) {
            return false;
        }
    }
    true
}

/// Names a lease answers to as a resource element: its hosts (uuid or name) and addresses.
fn elements(catalog: &Catalog, lease: &Lease) -> Vec<String> {
    let mut names = Vec::new();
    for r in &lease.reservations {
        for (host, _) in &r.hosts {
            names.push(host.to_string());
            if let Some(p) = catalog.provider(*host) {
                names.push(p.name().to_owned());
            }
        }
        for fip in &r.floating_ips {
            names.push(fip.to_string());
            if let Some(f) = catalog.floating_ip(*fip) {
                names.push(f.address.clone());
            }
        }
    }
    names
}

/// What a lease holds, as a capacity vector: cores, ram, instances, addresses (a host held
/// whole counts its whole capacity).
fn held(catalog: &Catalog, lease: &Lease) -> [i64; 4] {
    let mut v = [0i64; 4];
    for r in &lease.reservations {
        match &r.spec {
            ReservationSpec::Instance {
                vcpus, memory_mb, ..
            } => {
                let slots: i64 = r.hosts.iter().map(|(_, n)| i64::from(*n)).sum();
                v[0] += *vcpus as i64 * slots;
                v[1] += *memory_mb as i64 * slots;
            }
            ReservationSpec::Host { .. } => {
                for (host, _) in &r.hosts {
                    let total = |name: &str| {
                        catalog.provider(*host).map_or(0, |p| {
                            ResourceClass::parse(name)
                                .and_then(|c| p.inventories().get(&c).map(|i| i.capacity() as i64))
                                .unwrap_or(0)
                        })
                    };
                    v[0] += total("VCPU");
                    v[1] += total("MEMORY_MB");
                }
            }
            ReservationSpec::FloatingIp { .. } => v[3] += r.floating_ips.len() as i64,
        }
    }
    v[2] = i64::try_from(instances_held(lease)).unwrap_or(i64::MAX);
    v
}

/// The instances a lease holds room for: a Promise reservation's pool instances (one per core
/// when it names no count) and containers, while its compute reservations hold anything;
/// otherwise the slots of its instance reservations with CPUs.
pub fn instances_held(lease: &Lease) -> u64 {
    let compute = lease
        .reservations
        .iter()
        .filter(|r| matches!(r.spec, ReservationSpec::Instance { vcpus, .. } if vcpus > 0));
    match lease.terms() {
        Some(terms) => {
            if compute.flat_map(|r| &r.hosts).all(|(_, n)| *n == 0) {
                return 0;
            }
            let ask = &terms.ask;
            ask.pool.map_or(0, |pool| pool.slots()) + ask.containers.len() as u64
        }
        None => compute
            .map(|r| r.hosts.iter().map(|(_, n)| u64::from(*n)).sum::<u64>())
            .sum(),
    }
}

/// The step function of what `leases` hold over `window` (or their whole span).
fn held_over(catalog: &Catalog, leases: &[&Lease], window: Option<Window>) -> Vec<HeldStep> {
    let mut deltas: BTreeMap<Instant, ([i64; 4], i64)> = BTreeMap::new();
    for lease in leases.iter().filter(|l| l.holds_capacity()) {
        let (from, until) = match window {
            Some(w) => (lease.start.max(w.start()), lease.end.min(w.end())),
            None => (lease.start, lease.end),
        };
        if from >= until {
            continue;
        }
        let v = held(catalog, lease);
        for (at, sign) in [(from, 1), (until, -1)] {
            let entry = deltas.entry(at).or_default();
            for (total, amount) in entry.0.iter_mut().zip(v) {
                *total += sign * amount;
            }
            entry.1 += sign;
        }
    }
    let mut level = [0i64; 4];
    let mut count = 0;
    deltas
        .into_iter()
        .map(|(at, (d, n))| {
            for (total, delta) in level.iter_mut().zip(d) {
                *total += delta;
            }
            count += n;
            HeldStep {
                at,
                count,
                cores: level[0],
                ram: level[1],
                instances: level[2],
                addresses: level[3],
            }
        })
        .collect()
}

/// What the instances created against a reservation draw on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawn {
    /// Those instances, by id.
    pub instances: Vec<Uuid>,
    /// Virtual CPUs its instance reservations hold that they do not use.
    pub cores_left: u64,
    /// Memory, MB, likewise.
    pub ram_mb_left: u64,
    /// Instance slots (with CPUs), likewise.
    pub instances_left: u64,
}

/// What the live instances created against `lease` use (by their flavors), against what its
/// instance reservations with CPUs hold.
pub fn drawn(catalog: &Catalog, lease: &Lease) -> Drawn {
    let mut held = [0, 0, instances_held(lease)];
    for r in &lease.reservations {
        if let ReservationSpec::Instance {
            vcpus, memory_mb, ..
        } = &r.spec
            && *vcpus > 0
        {
            let slots: u64 = r.hosts.iter().map(|(_, n)| u64::from(*n)).sum();
            held[0] += vcpus * slots;
            held[1] += memory_mb * slots;
        }
    }
    let mut used = [0u64; 3];
    let mut instances = Vec::new();
    for instance in catalog.instances_of(lease) {
        instances.push(instance.id);
        if let Some(f) = catalog.flavor(&instance.flavor_id) {
            used[0] += f.vcpus;
            used[1] += f.ram_mb;
        }
        used[2] += 1;
    }
    let left = |i: usize| held[i].saturating_sub(used[i]);
    Drawn {
        instances,
        cores_left: left(0),
        ram_mb_left: left(1),
        instances_left: left(2),
    }
}

/// An instance as its project sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceSeen<'a> {
    /// The instance.
    pub instance: &'a PromiseInstance,
    /// Whether it still holds its allocations (its reservation ended, or a reservation evicted
    /// it as best-effort work, when not).
    pub live: bool,
}

/// The instances `project` (`None`: every project) sees, by id.
pub fn instances<'a>(catalog: &'a Catalog, project: Option<&str>) -> Vec<InstanceSeen<'a>> {
    catalog
        .instances()
        .filter(|i| visible_to(project, &i.project_id))
        .map(|instance| InstanceSeen {
            instance,
            live: catalog.consumer(instance.id).is_some(),
        })
        .collect()
}
