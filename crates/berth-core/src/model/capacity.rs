//! Capacity figures: what is measured (a class, or addresses), the four figures at one
//! instant (total, reserved, allocated, available) and their step function over a window. The
//! figures are computed from the catalog by [`crate::query::capacity`].

use crate::model::ledger::Window;
use crate::model::name::{ResourceClass, is_custom_name};
use crate::model::promise::PromiseKind;
use crate::model::provider::{AttrValue, Provider};
use crate::model::time::Instant;

/// What is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measure {
    /// One resource class on providers.
    Class(ResourceClass),
    /// Public (floating IP) addresses.
    Addresses,
    /// Instances, counted: each compute host takes up to its instance limit
    /// ([`instance_limit`]).
    Instances,
    /// Volumes, counted: each storage provider takes up to its volume limit
    /// ([`volume_limit`]).
    Volumes,
}

/// The most instances a compute host takes unless its `max_instances` attribute says
/// otherwise: 50, the default of Nova's `NumInstancesFilter` (`max_instances_per_host`).
pub const INSTANCES_PER_HOST_DEFAULT: u64 = 50;

/// The most volumes a storage provider (one with `DISK_GB`) takes unless its `max_volumes`
/// attribute says otherwise. Cinder sets no such limit; berth counts volumes against this one.
pub const VOLUMES_PER_PROVIDER_DEFAULT: u64 = 100;

/// The instance limit of a compute host: its `max_instances` attribute (a whole number), or
/// [`INSTANCES_PER_HOST_DEFAULT`].
pub fn instance_limit(provider: &Provider) -> u64 {
    limit(provider, "max_instances", INSTANCES_PER_HOST_DEFAULT)
}

/// The volume limit of a storage provider: its `max_volumes` attribute (a whole number), or
/// [`VOLUMES_PER_PROVIDER_DEFAULT`].
pub fn volume_limit(provider: &Provider) -> u64 {
    limit(provider, "max_volumes", VOLUMES_PER_PROVIDER_DEFAULT)
}

fn limit(provider: &Provider, attribute: &str, default: u64) -> u64 {
    match provider.attributes().get(attribute) {
        Some(AttrValue::Number(n)) if *n >= 0.0 && n.fract() == 0.0 => *n as u64,
        Some(AttrValue::String(text)) => text.trim().parse().unwrap_or(default),
        _ => default,
    }
}

/// The four figures at one instant, or summarised over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Usable capacity.
    pub total: i64,
    /// Held by reservations and not used by their consumers.
    pub reserved: i64,
    /// Used by consumers.
    pub allocated: i64,
    /// Neither reserved nor allocated.
    pub available: i64,
}

/// A step function: the figures from each instant until the next (the last until the end of
/// the window). The first step starts at the window's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The window.
    pub window: Window,
    /// The steps, in time order, each differing from the one before.
    pub steps: Vec<(Instant, Figures)>,
}

impl Series {
    /// The figures over the whole window: least total and available, most reserved and
    /// allocated.
    pub fn summary(&self) -> Figures {
        let mut steps = self.steps.iter().map(|(_, f)| *f);
        let first = steps.next().unwrap_or_default();
        steps.fold(first, |acc, f| Figures {
            total: acc.total.min(f.total),
            reserved: acc.reserved.max(f.reserved),
            allocated: acc.allocated.max(f.allocated),
            available: acc.available.min(f.available),
        })
    }
}

/// The measure a Promise resource type id names (`numCpuCores`, `virtualMemSize`,
/// `virtualDisk`, `storageSize`, `publicIps`, with a few aliases, and for compute any custom
/// class, such as a bare-metal node class `CUSTOM_BAREMETAL_GOLD`), and the counts `vcInstances`
/// and `volumes`; `None` for unknown ids.
pub fn measure_of(resource: PromiseKind, type_id: &str) -> Option<Measure> {
    use PromiseKind::{Compute, Network, Storage};
    let class = |name: &str| ResourceClass::parse(name).map(Measure::Class);
    match (resource, type_id) {
        (Compute, "numCpuCores" | "vcpu" | "cores" | "VCPU") => class("VCPU"),
        (Compute, "virtualMemSize" | "memory" | "ram" | "MEMORY_MB") => class("MEMORY_MB"),
        (Compute, "virtualDisk" | "gigabytes" | "DISK_GB")
        | (Storage, "storageSize" | "gigabytes" | "DISK_GB") => class("DISK_GB"),
        (Network, "publicIps" | "addresses") => Some(Measure::Addresses),
        (Compute, "vcInstances" | "instances") => Some(Measure::Instances),
        (Storage, "volumes" | "numVolumes") => Some(Measure::Volumes),
        (Compute, custom) if is_custom_name(custom) => class(custom),
        _ => None,
    }
}
