//! The Promise objects outside leases: flavors, the reservation policy and instances.

use super::state::Catalog;
use crate::model::lease::Lease;
use crate::model::promise::{Flavor, Policy, PromiseInstance};
use uuid::Uuid;

impl Catalog {
    /// Every flavor, by id.
    pub fn flavors(&self) -> impl Iterator<Item = &Flavor> {
        self.flavors.values()
    }

    /// One flavor, by id or else by name.
    pub fn flavor(&self, id_or_name: &str) -> Option<&Flavor> {
        self.flavors
            .get(id_or_name)
            .or_else(|| self.flavors.values().find(|f| f.name == id_or_name))
    }

    /// The reservation policy.
    pub fn policy(&self) -> &Policy {
        static DEFAULT: std::sync::LazyLock<Policy> = std::sync::LazyLock::new(Policy::default);
        self.policy.as_ref().unwrap_or(&DEFAULT)
    }

    /// A project's budget (berth), when it has one.
    pub fn budget(&self, project: &str) -> Option<&crate::model::budget::Budget> {
        self.budgets.get(project)
    }

    /// Every budget, by project.
    pub fn budgets(&self) -> impl Iterator<Item = &crate::model::budget::Budget> {
        self.budgets.values()
    }

    /// Every instance created through Promise, by id.
    pub fn instances(&self) -> impl Iterator<Item = &PromiseInstance> {
        self.instances.values()
    }

    /// One instance created through Promise.
    pub fn instance(&self, id: Uuid) -> Option<&PromiseInstance> {
        self.instances.get(&id)
    }

    /// The live Promise instances created against `lease`, by id: the consumers presenting
    /// its reservations that are its instances (found through the reservation index, not by
    /// scanning every instance).
    pub fn instances_of(&self, lease: &Lease) -> Vec<&PromiseInstance> {
        let mut found: Vec<&PromiseInstance> = lease
            .reservations
            .iter()
            .filter_map(|r| self.reserved_consumers.get(&r.id))
            .flatten()
            .filter_map(|id| self.instances.get(id))
            .filter(|i| i.reservation == Some(lease.id))
            .collect();
        found.sort_by_key(|i| i.id);
        found.dedup_by_key(|i| i.id);
        found
    }
}
