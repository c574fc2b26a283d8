//! The Promise model (OPNFV Promise, ETSI NFV IFA005): flavors, the reservation policy, the
//! terms a Promise reservation carries on its lease, instances created against reservations, and
//! what a counter-offer stands for in a request's own terms.
//!
//! A Promise reservation is a lease like any other, so the Blazar surface sees and counts it and
//! the ledger, the fence and the lifecycle engine serve it unchanged. What it asks for maps to
//! (see [`crate::decide::promise::specs`]):
//! - a compute pool (`numCpuCores`, `numVcInstances`, `virtualMemSize`): its sums, held as one
//!   unit per core (1 VCPU and `ceil(memory / cores)` MB each) packed onto as few hosts of the
//!   zone as will hold them. Instances of any flavors draw on it while their cores, memory and
//!   count fit in the pool (and each instance in one host's share): a pool of 20 cores and 3
//!   instances takes 10 + 5 + 5 cores. Memory is held rounded up to whole MB per core;
//! - a virtualisation container: one flavor-shaped instance slot;
//! - public IPs: a floating-IP reservation;
//! - a storage pool (`storageSize` GB over `numVolumes` volumes): its size, held as one unit per
//!   GB (snapshots live inside volumes and are only recorded).

use crate::model::id::{LeaseId, ProviderId};
use crate::model::ledger::Window;
use crate::model::time::{Instant, Span};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// The priority of a reservation that names none (Blazar leases included).
pub const PRIORITY_DEFAULT: u32 = 50;
/// The highest priority.
pub const PRIORITY_MAX: u32 = 100;

/// A compute flavor: the shape of an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flavor {
    /// Its id (given by the admin, or generated).
    pub id: String,
    /// Its name, unique.
    pub name: String,
    /// Virtual CPUs.
    pub vcpus: u64,
    /// Memory, MB.
    pub ram_mb: u64,
    /// Root disk, GB.
    pub disk_gb: u64,
    /// CPU architecture, when it matters (`x86_64`, `aarch64`, ...).
    pub cpu_architecture: Option<String>,
    /// Extra specs, echoed.
    pub extra_specs: BTreeMap<String, String>,
    /// Creation time.
    pub created_at: Instant,
}

/// A window the reservation policy refuses: the rule broken, and what the policy allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyBreach {
    /// The policy rule (`max-duration`, ...).
    pub limit: &'static str,
    /// What it allows.
    pub detail: String,
}

/// The reservation policy (Promise's `policy/reservation`), enforced on every surface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// A reservation must start within this many days from now.
    pub max_future_start_days: Option<u32>,
    /// A reservation must end within this many days from now.
    pub max_future_end_days: Option<u32>,
    /// A reservation may last at most this many hours (default 8,760: one year).
    pub max_duration_hours: Option<u32>,
    /// Minutes after the start when capacity not yet allocated is released, for Promise
    /// reservations that name no `expiryTime`.
    pub expiry_minutes: Option<u32>,
    /// Whether a higher-priority request may displace not-yet-started lower-priority
    /// reservations.
    pub preemption: bool,
}

/// Changes to the policy: for each limit, `Some(Some(n))` sets it, `Some(None)` removes it and
/// `None` keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyPatch {
    /// `max-future-start-range`.
    pub max_future_start_days: Option<Option<u32>>,
    /// `max-future-end-range`.
    pub max_future_end_days: Option<Option<u32>>,
    /// `max-duration`.
    pub max_duration_hours: Option<Option<u32>>,
    /// `expiry`.
    pub expiry_minutes: Option<Option<u32>>,
    /// `preemption`.
    pub preemption: Option<bool>,
}

impl PolicyPatch {
    /// `policy` with the patch applied.
    pub fn apply(&self, policy: &Policy) -> Policy {
        Policy {
            max_future_start_days: self
                .max_future_start_days
                .unwrap_or(policy.max_future_start_days),
            max_future_end_days: self
                .max_future_end_days
                .unwrap_or(policy.max_future_end_days),
            max_duration_hours: self.max_duration_hours.unwrap_or(policy.max_duration_hours),
            expiry_minutes: self.expiry_minutes.unwrap_or(policy.expiry_minutes),
            preemption: self.preemption.unwrap_or(policy.preemption),
        }
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            max_future_start_days: None,
            max_future_end_days: None,
            max_duration_hours: Some(8760),
            expiry_minutes: None,
            preemption: true,
        }
    }
}

impl Policy {
    /// Checks a window requested at `now`; the refusal names the limit.
    pub fn check(&self, window: Window, now: Instant) -> Result<(), PolicyBreach> {
        let ahead = |t: Instant| t.since(now);
        let breach = |limit: &'static str, value: u32, unit: &'static str| PolicyBreach {
            limit,
            detail: format!("the policy allows {limit} of {value} {unit}"),
        };
        if let Some(days) = self.max_future_start_days
            && ahead(window.start()) > Span::from_days(i64::from(days))
        {
            return Err(breach("max-future-start-range", days, "days"));
        }
        if let Some(days) = self.max_future_end_days
            && ahead(window.end()) > Span::from_days(i64::from(days))
        {
            return Err(breach("max-future-end-range", days, "days"));
        }
        if let Some(hours) = self.max_duration_hours
            && window.duration() > Span::from_hours(i64::from(hours))
        {
            return Err(breach("max-duration", hours, "hours"));
        }
        Ok(())
    }

    /// The end of a reservation that names none: the longest the policy allows (one year when
    /// it sets no limit), or the furthest end it allows, whichever comes first.
    pub fn default_end(&self, start: Instant, now: Instant) -> Instant {
        let hours = i64::from(self.max_duration_hours.unwrap_or(8760));
        let by_duration = start + Span::from_hours(hours);
        let by_range = self
            .max_future_end_days
            .map_or(Instant::from_micros(i64::MAX), |days| {
                now + Span::from_days(i64::from(days))
            });
        by_duration.min(by_range)
    }

    /// The claim deadline of a reservation that names none.
    pub fn default_expiry(&self, window: Window) -> Option<Instant> {
        self.expiry_minutes.map(|minutes| {
            (window.start() + Span::from_minutes(i64::from(minutes))).min(window.end())
        })
    }
}

/// Which Promise resource type a reservation was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PromiseKind {
    /// `/reservation/compute/...`.
    Compute,
    /// `/reservation/network/...`.
    Network,
    /// `/reservation/storage/...`.
    Storage,
    /// The RPC `create-reservation` with a `capacity` vector.
    Capacity,
}

impl PromiseKind {
    /// The path segment and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PromiseKind::Compute => "compute",
            PromiseKind::Network => "network",
            PromiseKind::Storage => "storage",
            PromiseKind::Capacity => "capacity",
        }
    }
}

/// A compute pool: cores, memory and instances, in any shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PoolAsk {
    /// `numCpuCores` / `cores`.
    pub cores: u64,
    /// `virtualMemSize` / `ram`, MB.
    pub ram_mb: u64,
    /// `numVcInstances` / `instances`.
    pub instances: u64,
}

/// One virtualisation container, flavor-shaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerAsk {
    /// The client's `containerId`.
    pub container_id: String,
    /// The flavor it names, if any.
    pub flavor_id: Option<String>,
    /// Virtual CPUs.
    pub vcpus: u64,
    /// Memory, MB.
    pub ram_mb: u64,
    /// Disk, GB.
    pub disk_gb: u64,
    /// CPU architecture, echoed.
    pub cpu_architecture: Option<String>,
}

/// A storage pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StorageAsk {
    /// `storageSize`, GB.
    pub size_gb: u64,
    /// `numSnapshots` (recorded).
    pub snapshots: u64,
    /// `numVolumes`.
    pub volumes: u64,
}

/// What a Promise reservation asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ask {
    /// A compute pool.
    pub pool: Option<PoolAsk>,
    /// Virtualisation containers.
    pub containers: Vec<ContainerAsk>,
    /// Public IP addresses.
    pub public_ips: u64,
    /// The network the addresses come from, when named.
    pub network_id: Option<String>,
    /// A storage pool.
    pub storage: Option<StorageAsk>,
}

impl PoolAsk {
    /// The instances the pool holds room for: `instances`, or one per core when it names no
    /// instance count (at least one).
    pub fn slots(&self) -> u64 {
        match self.instances {
            0 => self.cores.max(1),
            n => n,
        }
    }

    /// How the pool is held in the ledger: `(units, VCPU per unit, MB per unit)`. One unit per
    /// core, so that any mix of instances whose sums fit draws on it; a pool without cores is
    /// held as its instances of the average memory.
    pub fn units(&self) -> (u64, u64, u64) {
        match self.cores {
            0 => {
                let instances = self.slots();
                (instances, 0, ceil_div(self.ram_mb, instances))
            }
            cores => (cores, 1, ceil_div(self.ram_mb, cores)),
        }
    }

    /// The same pool cut down to `units` of its units (a counter-offer): its memory and its
    /// instances in proportion, none above what it asked.
    pub fn cut_to(&self, units: u64) -> PoolAsk {
        let (all, _, ram_per_unit) = self.units();
        let units = units.min(all);
        let instances = match self.instances {
            0 => 0,
            n => in_proportion(n, units, all),
        };
        PoolAsk {
            cores: if self.cores == 0 { 0 } else { units },
            ram_mb: (ram_per_unit * units).min(self.ram_mb),
            instances,
        }
    }
}

impl StorageAsk {
    /// How the pool is held in the ledger: `(units, GB per unit)`, one unit per GB (at least
    /// one unit).
    pub fn units(&self) -> (u64, u64) {
        (self.size_gb.max(1), 1)
    }
}

impl Ask {
    /// Whether it asks for nothing at all.
    pub fn is_empty(&self) -> bool {
        self.pool.is_none()
            && self.containers.is_empty()
            && self.public_ips == 0
            && self.storage.is_none()
    }
}

/// What makes a lease a Promise reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromiseTerms {
    /// The resource type it was made for.
    pub kind: PromiseKind,
    /// What it asks for, as the client put it.
    pub ask: Ask,
    /// Its priority, 0 (lowest) to 100.
    pub priority: u32,
    /// The claim deadline: capacity not allocated by then is released.
    pub expiry: Option<Instant>,
    /// The zone it was made in, if one was named.
    pub zone: Option<String>,
    /// The provider cloud it was restricted to (`provider-id`), if one was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<uuid::Uuid>,
}

/// How a lease ended early.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Its claim deadline passed with nothing allocated.
    Expired,
    /// A higher-priority request displaced it before it started.
    Preempted {
        /// The lease that displaced it.
        by: LeaseId,
        /// Why, in words.
        reason: String,
    },
}

/// An instance created through Promise's `create-instance`, recorded beside its placement
/// allocations (the consumer with the same id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromiseInstance {
    /// Its id (also the consumer's).
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The flavor it was made from.
    pub flavor_id: String,
    /// The image, echoed.
    pub image: Option<String>,
    /// The Promise reservation (the lease) it draws on, if any.
    pub reservation: Option<LeaseId>,
    /// The host it was placed on.
    pub host: ProviderId,
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// Creation time.
    pub created_at: Instant,
}

/// A planned change of total capacity (Promise's `ResourcePool` made by `increase-capacity` or
/// `decrease-capacity`): per provider and class, an amount added (positive) or removed
/// (negative) over a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityPool {
    /// Its id (`pool-id`).
    pub id: Uuid,
    /// The source as the client named it (`ResourceProvider:<uuid>`, a zone, `ResourcePool:<id>`).
    pub source: String,
    /// When the change applies.
    pub start: Instant,
    /// Until when (exclusive).
    pub end: Instant,
    /// `(provider, class name, delta)`.
    pub deltas: Vec<(ProviderId, String, i64)>,
    /// Leases the change leaves short (a forced decrease marks them degraded).
    pub affected: Vec<LeaseId>,
    /// Owning project (the admin who made it).
    pub project_id: String,
    /// Creation time.
    pub created_at: Instant,
}

impl CapacityPool {
    /// Its window.
    pub fn window(&self) -> Window {
        Window::new(self.start, self.end).expect("invariant: a pool ends after it starts")
    }
}

/// The filter text confining a reservation to a zone (Blazar's filter language).
pub fn zone_filter(zone: Option<&str>) -> String {
    match zone {
        Some(zone) => serde_json::json!(["==", "$availability_zone", zone]).to_string(),
        None => String::new(),
    }
}

/// The host filter of a Promise reservation in `zone` (any when `None`) on the providers of
/// provider cloud `provider` (any when `None`).
pub fn placement_filter(zone: Option<&str>, provider: Option<uuid::Uuid>) -> String {
    let cloud = provider.map(|id| {
        serde_json::json!([
            "==",
            format!("${}", crate::model::cloud::PROVIDER_CLOUD_ATTRIBUTE),
            id.to_string()
        ])
    });
    match (zone, cloud) {
        (zone, None) => zone_filter(zone),
        (None, Some(cloud)) => cloud.to_string(),
        (Some(zone), Some(cloud)) => {
            serde_json::json!(["and", ["==", "$availability_zone", zone], cloud]).to_string()
        }
    }
}

/// `count` cut to `part` of `whole`, rounded down but at least one while anything is left
/// (`count` itself when nothing is cut).
fn in_proportion(count: u64, part: u64, whole: u64) -> u64 {
    match (part, count) {
        (0, _) | (_, 0) => 0,
        _ if part >= whole => count,
        _ => u64::try_from(u128::from(count) * u128::from(part) / u128::from(whole))
            .unwrap_or(count)
            .max(1),
    }
}

/// `total / parts` rounded up, with at least one part.
pub(crate) fn ceil_div(total: u64, parts: u64) -> u64 {
    total.div_ceil(parts.max(1))
}

/// The ask a counter-offer of `amounts` (per spec, in
/// [`specs`](crate::decide::promise::specs) order) stands for: the same
/// shapes, fewer of them.
pub fn offered(ask: &Ask, amounts: &[u32]) -> Ask {
    let mut next = amounts.iter().map(|n| u64::from(*n));
    let mut out = ask.clone();
    if let Some(pool) = &mut out.pool {
        *pool = pool.cut_to(next.next().unwrap_or(0));
    }
    let kept: Vec<ContainerAsk> = out
        .containers
        .iter()
        .filter(|_| next.next().unwrap_or(0) > 0)
        .cloned()
        .collect();
    out.containers = kept;
    if out.public_ips > 0 {
        out.public_ips = next.next().unwrap_or(0);
    }
    if let Some(storage) = &mut out.storage {
        let (all, _) = storage.units();
        let got = next.next().unwrap_or(0).min(all);
        storage.volumes = in_proportion(storage.volumes, got, all);
        storage.snapshots = in_proportion(storage.snapshots, got, all);
        storage.size_gb = got.min(storage.size_gb);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MICROS_PER_MINUTE: i64 = 60 * 1_000_000;
    const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MINUTE;

    fn at(hours: i64) -> Instant {
        Instant::from_micros(hours * MICROS_PER_HOUR)
    }

    #[test]
    fn the_policy_names_the_limit_it_enforces() {
        let policy = Policy {
            max_future_start_days: Some(1),
            max_future_end_days: Some(3),
            max_duration_hours: Some(24),
            expiry_minutes: Some(30),
            preemption: true,
        };
        let window = |s, e| Window::new(at(s), at(e)).unwrap();
        assert_eq!(policy.check(window(1, 20), at(0)), Ok(()));
        let limit = |r: Result<(), PolicyBreach>| match r {
            Err(PolicyBreach { limit, .. }) => limit,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            limit(policy.check(window(25, 30), at(0))),
            "max-future-start-range"
        );
        assert_eq!(
            limit(policy.check(window(23, 73), at(0))),
            "max-future-end-range"
        );
        assert_eq!(limit(policy.check(window(1, 26), at(0))), "max-duration");
        assert_eq!(policy.default_end(at(10), at(0)), at(34));
        assert_eq!(
            policy.default_expiry(window(1, 20)),
            Some(Instant::from_micros(
                at(1).as_micros() + 30 * MICROS_PER_MINUTE
            ))
        );
    }
}
