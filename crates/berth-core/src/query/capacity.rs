//! Capacity over time, for a zone (or every zone) and one measure (a resource class, or public
//! addresses): total, reserved, allocated and available as step functions over a window.
//!
//! At every instant `t` of the window, over the providers of the zone that have the class and
//! are in service (a provider down or in maintenance counts for nothing, so taking one out of
//! service is a capacity change subscribers hear about):
//! - `total` is the usable capacity, `(total - reserved) * allocation_ratio` as in Placement,
//!   plus the planned capacity changes (`increase-capacity`, `decrease-capacity`) in force at `t`;
//! - `reserved` is what reservations hold at `t` (a host held whole counts its whole capacity)
//!   minus what consumers presenting those reservations use (that is allocated, not reserved);
//! - `allocated` is what consumers hold: unreserved ones for the whole window, those presenting
//!   a reservation until it ends;
//! - `available = total - reserved - allocated`, so the four always add up.
//!
//! Over the whole window (the `capacityInformation` of a query), `available` and `total` are
//! their minimum over the window and `reserved` and `allocated` their maximum: what can be
//! promised for the whole window, and the most that is taken at any instant.
//!
//! A query looks at a [`Scope`] of providers: a zone (or every zone) and an [`Origin`] (berth's
//! own capacity, one provider cloud's, or both). berth's floating IPs are its own: their
//! addresses count for its own capacity and never for a cloud's. Providers of one origin are
//! never another's, so the figures of the origins add up to those of the scope without one;
//! a lease or a consumer holding providers of two origins is counted in each, in the
//! instance and volume counts and in the leases a vector lists.

use crate::catalog::{Catalog, provider_cloud_of};
use crate::model::capacity::{Figures, Measure, Series};
use crate::model::cloud::Origin;
use crate::model::id::{LeaseId, ProviderId, ReservationId};
use crate::model::lease::LeaseStatus;
use crate::model::ledger::{Window, address_slot};
use crate::model::name::ResourceClass;
use crate::model::provider::Provider;
use crate::model::time::Instant;
use crate::rejection::Rejection;
use std::collections::{BTreeSet, HashSet};
use uuid::Uuid;

/// A zone capacity queries may name: its hosts and the classes its providers have inventory
/// of, the standard compute classes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneClasses {
    /// The zone.
    pub zone: String,
    /// Hosts (compute hosts and bare-metal nodes) in the zone.
    pub hosts: usize,
    /// Hosts of the zone out of service (down or in maintenance).
    pub hosts_out_of_service: usize,
    /// Classes measured in the zone. The classes that fence instance reservations are left
    /// out: they stand for capacity already counted in the reservation's own classes.
    pub classes: Vec<ResourceClass>,
}

/// Every zone of the catalog, sorted by name, with its hosts and classes.
pub fn zones(catalog: &Catalog) -> Vec<ZoneClasses> {
    let mut zones: std::collections::BTreeMap<&str, ZoneClasses> = Default::default();
    for provider in catalog.providers() {
        let Some(zone) = provider.availability_zone() else {
            continue;
        };
        let entry = zones.entry(zone).or_insert_with(|| ZoneClasses {
            zone: zone.to_owned(),
            hosts: 0,
            hosts_out_of_service: 0,
            classes: Vec::new(),
        });
        if provider.host().is_some() {
            entry.hosts += 1;
            entry.hosts_out_of_service += usize::from(!provider.is_up());
        }
        for class in provider.inventories().keys() {
            let fence = crate::model::fence::reservation_of_class(class).is_some();
            if !fence && !entry.classes.contains(class) {
                entry.classes.push(class.clone());
            }
        }
    }
    const FIRST: [&str; 3] = ["VCPU", "MEMORY_MB", "DISK_GB"];
    let rank = |class: &ResourceClass| {
        FIRST
            .iter()
            .position(|name| *name == class.as_str())
            .unwrap_or(FIRST.len())
    };
    zones
        .into_values()
        .map(|mut zone| {
            zone.classes.sort_by(|a, b| {
                rank(a)
                    .cmp(&rank(b))
                    .then_with(|| a.as_str().cmp(b.as_str()))
            });
            zone
        })
        .collect()
}

/// Whether some provider is in `zone`.
pub fn zone_known(catalog: &Catalog, zone: &str) -> bool {
    catalog
        .providers()
        .any(|p| p.availability_zone() == Some(zone))
}

/// Checks a zone name: `Some` must be the zone of some provider.
pub fn check_zone(catalog: &Catalog, zone: Option<&str>) -> Result<(), Rejection> {
    match zone {
        Some(zone) if !zone_known(catalog, zone) => Err(Rejection::ZoneNotFound(zone.to_owned())),
        _ => Ok(()),
    }
}

/// Whether `provider` is in `zone` (`None`: every zone).
pub(crate) fn in_zone(provider: &Provider, zone: Option<&str>) -> bool {
    zone.is_none_or(|z| provider.availability_zone() == Some(z))
}

/// The origin of `provider`'s capacity: the cloud it was imported from, or berth's own.
pub fn origin_of(provider: &Provider) -> Origin {
    match provider_cloud_of(provider) {
        Some(cloud) => Origin::Cloud(cloud),
        None => Origin::Local,
    }
}

/// The providers a capacity question counts: those of a zone and of an origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scope<'a> {
    /// The zone (`None`: every zone).
    pub zone: Option<&'a str>,
    /// The origin (`None`: every origin).
    pub origin: Option<Origin>,
}

impl<'a> Scope<'a> {
    /// Every provider of `zone` (`None`: every zone), whatever its origin.
    pub fn zone(zone: Option<&'a str>) -> Scope<'a> {
        Scope { zone, origin: None }
    }

    /// Whether `provider` is in the scope.
    pub fn holds(&self, provider: &Provider) -> bool {
        in_zone(provider, self.zone) && self.origin.is_none_or(|o| origin_of(provider) == o)
    }

    /// Whether berth's floating IPs count: they are berth's own capacity.
    fn counts_addresses(&self) -> bool {
        match self.origin {
            None | Some(Origin::Local) => true,
            Some(Origin::Cloud(_)) => false,
        }
    }

    /// Whether the scope is the whole catalog.
    fn is_everything(&self) -> bool {
        self.zone.is_none() && self.origin.is_none()
    }
}

/// Checks a scope: its zone must be some provider's ([`check_zone`]) and the cloud it names
/// must be registered.
pub fn check_scope(catalog: &Catalog, scope: Scope<'_>) -> Result<(), Rejection> {
    check_zone(catalog, scope.zone)?;
    match scope.origin {
        Some(Origin::Cloud(id)) if catalog.provider_cloud(id).is_none() => {
            Err(Rejection::ProviderCloudNotFound(id))
        }
        _ => Ok(()),
    }
}

/// Usable capacity of `class` on `provider` (`(total - reserved) * allocation_ratio`), 0 without
/// inventory.
pub(crate) fn usable(provider: &Provider, class: &ResourceClass) -> i64 {
    provider
        .inventories()
        .get(class)
        .map_or(0, |record| record.capacity() as i64)
}

/// Collects `(instant, [total, reserved, allocated] deltas)` clipped to a window, plus the
/// levels at the window's start.
struct Deltas {
    window: Window,
    at_start: [i64; 3],
    /// Unsorted; sorted once when the series is built.
    changes: Vec<(Instant, [i64; 3])>,
}

const TOTAL: usize = 0;
const RESERVED: usize = 1;
const ALLOCATED: usize = 2;

impl Deltas {
    fn new(window: Window) -> Deltas {
        Deltas {
            window,
            at_start: [0; 3],
            changes: Vec::new(),
        }
    }

    /// Adds `amount` to figure `which` over `[start, end)`.
    fn add(&mut self, start: Instant, end: Instant, which: usize, amount: i64) {
        let from = start.max(self.window.start());
        let until = end.min(self.window.end());
        if from >= until || amount == 0 {
            return;
        }
        let mut delta = [0; 3];
        delta[which] = amount;
        match from == self.window.start() {
            true => self.at_start[which] += amount,
            false => self.changes.push((from, delta)),
        }
        if until < self.window.end() {
            delta[which] = -amount;
            self.changes.push((until, delta));
        }
    }

    /// Changes figure `which` by `delta` from `at` on (`at` within the window).
    fn step(&mut self, at: Instant, which: usize, delta: i64) {
        if delta == 0 || !self.window.contains(at) {
            return;
        }
        match at == self.window.start() {
            true => self.at_start[which] += delta,
            false => {
                let mut change = [0; 3];
                change[which] = delta;
                self.changes.push((at, change));
            }
        }
    }

    fn series(mut self) -> Series {
        let figures = |[total, reserved, allocated]: [i64; 3]| Figures {
            total,
            reserved,
            allocated,
            available: total - reserved - allocated,
        };
        self.changes.sort_unstable_by_key(|(at, _)| *at);
        let mut level = self.at_start;
        let mut steps = vec![(self.window.start(), figures(level))];
        let mut changes = self.changes.into_iter().peekable();
        while let Some((at, delta)) = changes.next() {
            for (l, d) in level.iter_mut().zip(delta) {
                *l += d;
            }
            // Every change at one instant makes one step, and a step that changes nothing
            // is no step.
            if changes.peek().is_some_and(|(next, _)| *next == at) {
                continue;
            }
            if steps.last().is_some_and(|(_, f)| *f == figures(level)) {
                continue;
            }
            steps.push((at, figures(level)));
        }
        Series {
            window: self.window,
            steps,
        }
    }
}

/// The reservation ids of the leases in `without`.
pub(crate) fn excluded(catalog: &Catalog, without: &[Uuid]) -> HashSet<ReservationId> {
    // An id of `without` names a lease or a reservation: it is tried as both.
    without
        .iter()
        .filter_map(|id| catalog.lease(LeaseId::new(*id)))
        .flat_map(|l| l.reservations.iter().map(|r| r.id))
        .chain(without.iter().copied().map(ReservationId::new))
        .collect()
}

/// The capacity of `measure` in `zone` (`None`: every zone) over `window`, leaving out the
/// leases (or reservations) in `without`.
pub fn series(
    catalog: &Catalog,
    zone: Option<&str>,
    window: Window,
    measure: &Measure,
    without: &[Uuid],
) -> Result<Series, Rejection> {
    series_in(catalog, Scope::zone(zone), window, measure, without)
}

/// The capacity of `measure` on the providers of `scope` over `window`, leaving out the leases
/// (or reservations) in `without`.
pub fn series_in(
    catalog: &Catalog,
    scope: Scope<'_>,
    window: Window,
    measure: &Measure,
    without: &[Uuid],
) -> Result<Series, Rejection> {
    check_scope(catalog, scope)?;
    let skip = excluded(catalog, without);
    let mut deltas = Deltas::new(window);
    let class = match measure {
        Measure::Class(class) => class,
        Measure::Addresses => {
            let counted = scope.counts_addresses();
            for fip in catalog.floating_ips().filter(|f| counted && f.reservable) {
                deltas.add(window.start(), window.end(), TOTAL, 1);
                for hold in catalog.ledger().holds_on(address_slot(fip.id), window) {
                    if !skip.contains(&hold.reservation) {
                        deltas.add(hold.window.start(), hold.window.end(), RESERVED, 1);
                    }
                }
            }
            return Ok(deltas.series());
        }
        Measure::Instances | Measure::Volumes => {
            counts(catalog, scope, measure, &skip, &mut deltas);
            return Ok(deltas.series());
        }
    };
    for provider in catalog.providers().filter(|p| p.is_up() && scope.holds(p)) {
        if !provider.inventories().contains_key(class) {
            continue;
        }
        let capacity = usable(provider, class);
        let uuid = provider.uuid();
        deltas.add(window.start(), window.end(), TOTAL, capacity);
        for (changed, delta) in catalog.capacity_changes(uuid, class, window) {
            deltas.add(changed.start(), changed.end(), TOTAL, delta);
        }
        // What the ledger holds, step by step (a host held whole counts its whole capacity).
        let mut previous = 0;
        for (at, amount, exclusive) in catalog.ledger().steps_of(uuid, class, window) {
            let level = if exclusive > 0 {
                capacity
            } else {
                amount as i64
            };
            deltas.step(at, RESERVED, level - previous);
            previous = level;
        }
        let unreserved =
            provider.used(class) - provider.reserved_used(class).min(provider.used(class));
        deltas.add(window.start(), window.end(), ALLOCATED, unreserved as i64);
    }
    // Reservations left out, and what reservations' own consumers use (allocated, not reserved,
    // until the reservation ends): few reservations, found through their holds.
    let zoned = |host: ProviderId| {
        catalog
            .provider(host)
            .is_some_and(|p| p.is_up() && scope.holds(p) && p.inventories().contains_key(class))
    };
    for reservation in &skip {
        for hold in catalog
            .ledger()
            .holds_of(*reservation)
            .filter(|h| zoned(h.host))
        {
            let held = match hold.exclusive {
                true => catalog.provider(hold.host).map_or(0, |p| usable(p, class)),
                false => hold
                    .amounts
                    .iter()
                    .find(|(c, _)| c == class)
                    .map_or(0, |(_, n)| *n as i64),
            };
            deltas.add(hold.window.start(), hold.window.end(), RESERVED, -held);
        }
    }
    for reservation in catalog
        .presented_reservations()
        .filter(|r| !skip.contains(r))
    {
        for hold in catalog
            .ledger()
            .holds_of(reservation)
            .filter(|h| zoned(h.host))
        {
            let used = catalog.reserved_use(reservation, hold.host, class, Uuid::nil()) as i64;
            deltas.add(hold.window.start(), hold.window.end(), RESERVED, -used);
            deltas.add(hold.window.start(), hold.window.end(), ALLOCATED, used);
        }
    }
    Ok(deltas.series())
}

/// Instances or volumes, counted, over the providers of `scope` that hold them (in service, with
/// `VCPU` for instances and `DISK_GB` for volumes):
/// - `total` is the sum of their limits (`max_instances`, `max_volumes`);
/// - `allocated` counts the consumers on them: every consumer allocating `VCPU` there for
///   instances, every consumer of type `VOLUME` allocating `DISK_GB` there for volumes;
/// - `reserved` counts, over each lease's window, the instances (a Promise reservation's pool
///   and containers, a Blazar instance reservation's slots) or volumes (a storage pool's
///   `numVolumes`) a lease holding those providers has room for, less the consumers that draw
///   on it.
///
/// The counts are reported, not enforced: admission and instance creation go by cores,
/// memory and disk, as in Nova, where the instance limit is a scheduler filter.
fn counts(
    catalog: &Catalog,
    scope: Scope<'_>,
    measure: &Measure,
    skip: &HashSet<ReservationId>,
    deltas: &mut Deltas,
) {
    let instances = *measure == Measure::Instances;
    let class = ResourceClass::parse(if instances { "VCPU" } else { "DISK_GB" })
        .expect("invariant: a standard class");
    let hosts: HashSet<ProviderId> = catalog
        .providers()
        .filter(|p| p.is_up() && scope.holds(p) && p.inventories().contains_key(&class))
        .map(|p| {
            let limit = match instances {
                true => crate::model::capacity::instance_limit(p),
                false => crate::model::capacity::volume_limit(p),
            };
            deltas.add(
                deltas.window.start(),
                deltas.window.end(),
                TOTAL,
                i64::try_from(limit).unwrap_or(i64::MAX),
            );
            p.uuid()
        })
        .collect();
    let counted = |consumer: &crate::model::consumer::Consumer| {
        (instances || consumer.consumer_type.as_deref() == Some(VOLUME))
            && consumer
                .allocations
                .iter()
                .any(|(host, amounts)| hosts.contains(host) && amounts.contains_key(&class))
    };
    let allocated = catalog.consumers().filter(|(_, c)| counted(c)).count();
    deltas.add(
        deltas.window.start(),
        deltas.window.end(),
        ALLOCATED,
        i64::try_from(allocated).unwrap_or(i64::MAX),
    );
    let mut leases: Vec<&crate::model::lease::Lease> = hosts
        .iter()
        .flat_map(|host| catalog.leases_holding(*host))
        .filter(|lease| lease.holds_capacity())
        .collect();
    leases.sort_unstable_by_key(|lease| lease.id);
    leases.dedup_by_key(|lease| lease.id);
    for lease in leases {
        if lease.reservations.iter().any(|r| skip.contains(&r.id)) {
            continue;
        }
        let held = match instances {
            true => crate::query::promise::instances_held(lease),
            false => lease
                .terms()
                .and_then(|terms| terms.ask.storage)
                .map_or(0, |storage| storage.volumes),
        };
        let drawn = lease
            .reservations
            .iter()
            .flat_map(|r| catalog.consumers_of_reservation(r.id))
            .filter(|id| catalog.consumer(*id).is_some_and(counted))
            .count() as u64;
        let reserved = i64::try_from(held.saturating_sub(drawn)).unwrap_or(i64::MAX);
        deltas.add(lease.start, lease.end, RESERVED, reserved);
    }
}

/// The consumer type of volumes (Placement's `consumer_type`).
pub const VOLUME: &str = "VOLUME";

/// Where and when a capacity query looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extent {
    /// The zone (`None`: every zone).
    pub zone: Option<String>,
    /// Whose capacity: berth's own or one provider cloud's (`None`: every origin).
    pub origin: Option<Origin>,
    /// The window.
    pub window: Window,
    /// Leases (or reservations) left out, as if they did not exist.
    pub without: Vec<Uuid>,
}

impl Extent {
    /// The providers it looks at.
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            zone: self.zone.as_deref(),
            origin: self.origin,
        }
    }

    /// The same extent, restricted to `origin`.
    pub fn of_origin(&self, origin: Origin) -> Extent {
        Extent {
            origin: Some(origin),
            ..self.clone()
        }
    }
}

/// One figure of each member of Promise's capacity vector.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Levels {
    /// Virtual CPUs (`VCPU`).
    pub cores: i64,
    /// Memory, MB (`MEMORY_MB`).
    pub ram: i64,
    /// Disk, GB (`DISK_GB`).
    pub gigabytes: i64,
    /// Public addresses.
    pub addresses: i64,
}

/// The capacity of Promise's vector (`query-capacity`) over a window: a series per member, and
/// the reservations holding capacity in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorCapacity {
    /// Virtual CPUs.
    pub cores: Series,
    /// Memory, MB.
    pub ram: Series,
    /// Disk, GB.
    pub gigabytes: Series,
    /// Public addresses.
    pub addresses: Series,
    /// The leases holding capacity in the window on the zone's hosts (those left out aside), in
    /// no particular order.
    pub collections: Vec<LeaseId>,
    /// The planned capacity changes in force in the window on the zone's providers (Promise's
    /// `ResourcePool`s), oldest first.
    pub pools: Vec<Uuid>,
    /// How much of `reserved` open holds (leases in `HELD`) keep, at its peak over the window
    /// (berth): held capacity is reserved, and this says how much of it is only held.
    pub held: Levels,
}

impl VectorCapacity {
    fn levels(&self, level: impl Fn(&Series) -> i64) -> Levels {
        Levels {
            cores: level(&self.cores),
            ram: level(&self.ram),
            gigabytes: level(&self.gigabytes),
            addresses: level(&self.addresses),
        }
    }

    /// The figure `pick` chooses, over the whole window (see [`Series::summary`]).
    pub fn summary(&self, pick: fn(&Figures) -> i64) -> Levels {
        self.levels(|s| pick(&s.summary()))
    }

    /// The figure `pick` chooses as one step function of vectors: a step at every instant
    /// where some member changes.
    pub fn steps(&self, pick: fn(&Figures) -> i64) -> Vec<(Instant, Levels)> {
        let all = [&self.cores, &self.ram, &self.gigabytes, &self.addresses];
        let mut instants: Vec<Instant> = all
            .iter()
            .flat_map(|s| s.steps.iter().map(|(at, _)| *at))
            .collect();
        instants.sort_unstable();
        instants.dedup();
        instants
            .into_iter()
            .map(|at| {
                let level = |s: &Series| {
                    s.steps
                        .iter()
                        .take_while(|(t, _)| *t <= at)
                        .last()
                        .map_or(0, |(_, f)| pick(f))
                };
                (at, self.levels(level))
            })
            .collect()
    }
}

/// The capacity of Promise's vector within `extent`.
pub fn vector(catalog: &Catalog, extent: &Extent) -> Result<VectorCapacity, Rejection> {
    let scope = extent.scope();
    let of = |measure: Measure| series_in(catalog, scope, extent.window, &measure, &extent.without);
    let class = |name: &str| {
        Measure::Class(ResourceClass::parse(name).expect("invariant: standard class names parse"))
    };
    // A host of a lease is a provider, or a floating IP's address slot (berth's own).
    let in_scope = |host: ProviderId| match catalog.provider(host) {
        Some(p) => scope.holds(p),
        None => scope.zone.is_none() && scope.counts_addresses(),
    };
    Ok(VectorCapacity {
        cores: of(class("VCPU"))?,
        ram: of(class("MEMORY_MB"))?,
        gigabytes: of(class("DISK_GB"))?,
        addresses: of(Measure::Addresses)?,
        collections: catalog
            .leases()
            .filter(|l| l.holds_capacity() && l.window().overlaps(&extent.window))
            .filter(|l| !extent.without.contains(&l.id.uuid()))
            .filter(|l| {
                scope.is_everything()
                    || l.reservations
                        .iter()
                        .any(|r| r.hosts.iter().any(|(h, _)| in_scope(*h)))
            })
            .map(|l| l.id)
            .collect(),
        pools: pools_in(catalog, extent),
        held: held(catalog, extent),
    })
}

/// The peak over `extent`'s window of what open holds keep on the scope's providers in service
/// (a host held whole counts its whole capacity), per member of Promise's vector; the holds
/// left out aside.
fn held(catalog: &Catalog, extent: &Extent) -> Levels {
    let of = |measure: Measure| held_of(catalog, extent, &measure).unwrap_or(0);
    let class = |name: &str| {
        Measure::Class(ResourceClass::parse(name).expect("invariant: standard class names parse"))
    };
    Levels {
        cores: of(class("VCPU")),
        ram: of(class("MEMORY_MB")),
        gigabytes: of(class("DISK_GB")),
        addresses: of(Measure::Addresses),
    }
}

/// How much of `measure`'s reserved figure open holds (leases in `HELD`) keep, at its peak over
/// `extent`'s window (berth), on the scope's providers in service (a host held whole counts its
/// whole capacity; a floating IP counts for berth's own capacity), the holds left out aside;
/// `None` for the counts (instances, volumes), which holds do not ask for.
pub fn held_of(catalog: &Catalog, extent: &Extent, measure: &Measure) -> Option<i64> {
    let scope = extent.scope();
    let window = extent.window;
    let class = match measure {
        Measure::Class(class) => Some(class),
        Measure::Addresses => None,
        Measure::Instances | Measure::Volumes => return None,
    };
    let mut deltas = Deltas::new(window);
    for lease in catalog
        .leases()
        .filter(|l| l.status == LeaseStatus::Held && l.window().overlaps(&window))
        .filter(|l| !extent.without.contains(&l.id.uuid()))
    {
        for hold in lease.holds() {
            let provider = catalog.provider(hold.host);
            let amount = match (class, provider) {
                // A floating IP's address slot.
                (None, None) if scope.counts_addresses() => 1,
                (Some(class), Some(p))
                    if p.is_up() && scope.holds(p) && p.inventories().contains_key(class) =>
                {
                    match hold.exclusive {
                        true => usable(p, class),
                        false => hold
                            .amounts
                            .iter()
                            .find(|(c, _)| c == class)
                            .map_or(0, |(_, n)| i64::try_from(*n).unwrap_or(i64::MAX)),
                    }
                }
                _ => 0,
            };
            deltas.add(hold.window.start(), hold.window.end(), RESERVED, amount);
        }
    }
    Some(deltas.series().summary().reserved)
}

/// The planned capacity changes in force in `extent`'s window on a provider of its scope, oldest
/// first (those left out aside).
fn pools_in(catalog: &Catalog, extent: &Extent) -> Vec<Uuid> {
    let scope = extent.scope();
    let mut pools: Vec<_> = catalog
        .pools()
        .filter(|pool| pool.window().overlaps(&extent.window))
        .filter(|pool| !extent.without.contains(&pool.id))
        .filter(|pool| {
            pool.deltas
                .iter()
                .any(|(provider, _, _)| catalog.provider(*provider).is_some_and(|p| scope.holds(p)))
        })
        .collect();
    pools.sort_by_key(|pool| (pool.created_at, pool.id));
    pools.into_iter().map(|pool| pool.id).collect()
}

/// The origins whose capacity `extent` looks at: its own origin when it names one; else
/// berth's own when a provider of its zone is berth's or a floating IP is registered, then
/// each provider cloud with providers in its zone, by id. A cloud named must be registered.
/// As many as the registered clouds and one (at most
/// [`PROVIDER_CLOUDS_MAX`](crate::limits::PROVIDER_CLOUDS_MAX) and one), found in one pass
/// over the providers. Providers left by a cloud since removed count in the figures of every
/// origin together and in no single origin's.
pub fn origins(catalog: &Catalog, extent: &Extent) -> Result<Vec<Origin>, Rejection> {
    check_scope(catalog, extent.scope())?;
    if let Some(origin) = extent.origin {
        return Ok(vec![origin]);
    }
    let zone = extent.zone.as_deref();
    let mut found: BTreeSet<Origin> = catalog
        .providers()
        .filter(|p| in_zone(p, zone))
        .map(origin_of)
        // A provider naming a cloud no longer registered is in no cloud's scope.
        .filter(|origin| match origin {
            Origin::Local => true,
            Origin::Cloud(id) => catalog.provider_cloud(*id).is_some(),
        })
        .collect();
    if catalog.floating_ips().next().is_some() {
        found.insert(Origin::Local);
    }
    assert!(found.len() <= catalog.provider_clouds().count() + 1);
    Ok(found.into_iter().collect())
}

/// Whether the answer of `extent` is that of `origin` alone: the extent names it, or every
/// provider of its zone is of that origin (and, for a cloud, berth has no floating IP).
fn is_whole(catalog: &Catalog, extent: &Extent, origin: Origin) -> bool {
    match extent.origin {
        Some(named) => named == origin,
        None => {
            let zone = extent.zone.as_deref();
            let addresses = origin == Origin::Local || catalog.floating_ips().next().is_none();
            addresses
                && catalog
                    .providers()
                    .filter(|p| in_zone(p, zone))
                    .all(|p| origin_of(p) == origin)
        }
    }
}

/// `answer` within `extent` and within `extent` restricted to each of its origins
/// ([`origins`]), the whole first. An origin that has the whole scope to itself gets the
/// whole's answer, computed once: a catalog without provider clouds pays nothing more.
pub fn by_origin<T: Clone>(
    catalog: &Catalog,
    extent: &Extent,
    answer: impl Fn(&Extent) -> Result<T, Rejection>,
) -> Result<(T, Vec<(Origin, T)>), Rejection> {
    let origins = origins(catalog, extent)?;
    let whole = answer(extent)?;
    let parts = match origins.as_slice() {
        [sole] if is_whole(catalog, extent, *sole) => vec![(*sole, whole.clone())],
        _ => origins
            .into_iter()
            .map(|origin| Ok((origin, answer(&extent.of_origin(origin))?)))
            .collect::<Result<_, Rejection>>()?,
    };
    Ok((whole, parts))
}

/// The capacity of Promise's vector within `extent`, per origin ([`origins`]): each origin's
/// vector is that of `extent` restricted to it, and without an origin in `extent` their
/// figures add up to [`vector`]'s.
pub fn vector_by_origin(
    catalog: &Catalog,
    extent: &Extent,
) -> Result<Vec<(Origin, VectorCapacity)>, Rejection> {
    by_origin(catalog, extent, |extent| vector(catalog, extent)).map(|(_, parts)| parts)
}
