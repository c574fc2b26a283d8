//! Resource classes, traits and aggregates: which exist, which are in use, what berth records
//! about an aggregate, and the one shared instance of each class name.

use super::state::Catalog;
use crate::model::name::{self, ResourceClass, TraitName};
use crate::model::provider::AggregateRecord;
use std::collections::BTreeSet;
use std::sync::Arc;
use uuid::Uuid;

impl Catalog {
    /// Whether a resource class exists (standard or custom).
    pub fn has_resource_class(&self, class: &ResourceClass) -> bool {
        class.is_standard() || self.custom_classes.contains(class)
    }

    /// Custom resource classes.
    pub fn custom_resource_classes(&self) -> &BTreeSet<ResourceClass> {
        &self.custom_classes
    }

    /// Whether a trait exists (standard or custom).
    pub fn has_trait(&self, name: &TraitName) -> bool {
        name.is_standard() || self.custom_traits.contains(name)
    }

    /// All traits, standard and custom, sorted.
    pub fn all_traits(&self) -> Vec<&str> {
        let mut names: Vec<&str> = name::standard_traits().to_vec();
        names.extend(self.custom_traits.iter().map(TraitName::as_str));
        names.sort_unstable();
        names
    }

    /// Whether any provider has the trait.
    pub fn trait_in_use(&self, name: &TraitName) -> bool {
        self.providers.values().any(|p| p.traits.contains(name))
    }

    /// Whether any provider has inventory of the class.
    pub fn resource_class_in_use(&self, class: &ResourceClass) -> bool {
        self.providers
            .values()
            .any(|p| p.inventories.contains_key(class))
    }

    /// What berth records about an aggregate, if anything.
    pub fn aggregate(&self, uuid: Uuid) -> Option<&AggregateRecord> {
        self.aggregates.get(&uuid)
    }

    /// The described aggregate with this name.
    pub fn aggregate_by_name(&self, name: &str) -> Option<(Uuid, &AggregateRecord)> {
        self.aggregates
            .iter()
            .find(|(_, r)| r.name.as_deref() == Some(name))
            .map(|(u, r)| (*u, r))
    }

    pub(super) fn intern(&mut self, class: &ResourceClass) -> ResourceClass {
        match self.classes.get(class) {
            Some(shared) => shared.clone(),
            None => {
                self.classes.insert(class.clone());
                class.clone()
            }
        }
    }

    /// The most project and user ids kept shared; past them, a new id is kept by its lease
    /// alone.
    pub(super) const OWNERS_MAX: usize = 65_536;

    /// The shared copy of a project or user id, kept when new.
    pub(super) fn share_owner(&mut self, id: &Arc<str>) -> Arc<str> {
        if let Some(known) = self.owners.get(id) {
            return Arc::clone(known);
        }
        if self.owners.len() < Catalog::OWNERS_MAX {
            self.owners.insert(Arc::clone(id));
        }
        Arc::clone(id)
    }

    /// The shared instance of a class name, for pointer lookups with
    /// [`Provider::inventory_interned`](crate::model::provider::Provider::inventory_interned); a
    /// class no inventory has comes back as it is.
    pub fn interned_class(&self, class: &ResourceClass) -> ResourceClass {
        self.classes
            .get(class)
            .cloned()
            .unwrap_or_else(|| class.clone())
    }
}
