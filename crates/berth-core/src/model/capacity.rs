//! Capacity figures: what is measured (a class, or addresses), the four figures at one
//! instant (total, reserved, allocated, available) and their step function over a window. The
//! figures are computed from the catalog by [`crate::query::capacity`].

use crate::model::ledger::Window;
use crate::model::name::{ResourceClass, is_custom_name};
use crate::model::promise::PromiseKind;
use crate::model::time::Instant;

/// What is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Measure {
    /// One resource class on providers.
    Class(ResourceClass),
    /// Public (floating IP) addresses.
    Addresses,
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
/// class, such as a bare-metal node class `CUSTOM_BAREMETAL_GOLD`); `None` for unknown ids and
/// for the counts of a shape (`vcInstances`, `volumes`), which need a flavor or criteria.
pub fn measure_of(resource: PromiseKind, type_id: &str) -> Option<Measure> {
    use PromiseKind::{Compute, Network, Storage};
    let class = |name: &str| ResourceClass::parse(name).map(Measure::Class);
    match (resource, type_id) {
        (Compute, "numCpuCores" | "vcpu" | "cores" | "VCPU") => class("VCPU"),
        (Compute, "virtualMemSize" | "memory" | "ram" | "MEMORY_MB") => class("MEMORY_MB"),
        (Compute, "virtualDisk" | "gigabytes" | "DISK_GB")
        | (Storage, "storageSize" | "gigabytes" | "DISK_GB") => class("DISK_GB"),
        (Network, "publicIps" | "addresses") => Some(Measure::Addresses),
        (Compute, custom) if is_custom_name(custom) => class(custom),
        _ => None,
    }
}
