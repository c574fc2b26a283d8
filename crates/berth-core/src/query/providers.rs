//! Provider queries: which providers match a set of filters (name, uuid, aggregates, resources,
//! tree, traits). Evaluated over the in-memory catalog; never touches storage.

use crate::catalog::Catalog;
use crate::model::id::ProviderId;
use crate::model::name::{ResourceClass, TraitName};
use crate::model::provider::Provider;
use std::collections::BTreeSet;
use uuid::Uuid;

/// Aggregate membership: AND over `required` (each an OR-set), none of `forbidden`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberOf {
    /// Each inner set must intersect the provider's aggregates.
    pub required: Vec<BTreeSet<Uuid>>,
    /// The provider must be in none of these.
    pub forbidden: BTreeSet<Uuid>,
}

impl MemberOf {
    /// Whether a provider with `aggregates` satisfies the filter.
    pub fn admits(&self, aggregates: &BTreeSet<Uuid>) -> bool {
        self.required.iter().all(|any| !any.is_disjoint(aggregates))
            && self.forbidden.is_disjoint(aggregates)
    }

    /// Whether the filter constrains nothing.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.forbidden.is_empty()
    }
}

/// Trait requirements: every `all_of` trait, at least one of each `any_of` set, no `forbidden`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraitFilter {
    /// Traits the provider must have.
    pub all_of: BTreeSet<TraitName>,
    /// Sets of which the provider must have at least one member each.
    pub any_of: Vec<BTreeSet<TraitName>>,
    /// Traits the provider must not have.
    pub forbidden: BTreeSet<TraitName>,
}

impl TraitFilter {
    /// Whether a provider with `traits` satisfies the filter.
    pub fn admits(&self, traits: &BTreeSet<TraitName>) -> bool {
        self.all_of.is_subset(traits)
            && self.any_of.iter().all(|any| !any.is_disjoint(traits))
            && self.forbidden.is_disjoint(traits)
    }

    /// Every trait named by the filter.
    pub fn names(&self) -> impl Iterator<Item = &TraitName> {
        self.all_of
            .iter()
            .chain(self.any_of.iter().flatten())
            .chain(self.forbidden.iter())
    }

    /// A required trait that is also forbidden, if any.
    pub fn conflict(&self) -> Option<&TraitName> {
        self.all_of.intersection(&self.forbidden).next()
    }
}

/// Filters of `GET /resource_providers`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderFilter {
    /// Exact name.
    pub name: Option<String>,
    /// Exact uuid.
    pub uuid: Option<ProviderId>,
    /// Aggregate membership of the provider itself.
    pub member_of: MemberOf,
    /// Amounts the provider itself must be able to take, each in one allocation.
    pub resources: Vec<(ResourceClass, u64)>,
    /// Restrict to the tree containing this provider.
    pub in_tree: Option<ProviderId>,
    /// Trait requirements on the provider itself.
    pub traits: TraitFilter,
}

/// Whether `provider` can take `amount` of `class` in one more allocation.
pub fn has_capacity(provider: &Provider, class: &ResourceClass, amount: u64) -> bool {
    provider
        .inventories()
        .get(class)
        .is_some_and(|record| record.admits(provider.used(class), amount))
}

impl ProviderFilter {
    /// The providers of `catalog` that match, in creation order.
    pub fn select<'c>(&'c self, catalog: &'c Catalog) -> impl Iterator<Item = &'c Provider> + 'c {
        // An unknown `in_tree` provider matches nothing, as in Placement.
        let tree_root = self
            .in_tree
            .map(|uuid| catalog.provider(uuid).map(Provider::root));
        catalog.providers().filter(move |provider| {
            let in_tree = match tree_root {
                None => true,
                Some(None) => false,
                Some(Some(root)) => provider.root() == root,
            };
            in_tree
                && self
                    .name
                    .as_deref()
                    .is_none_or(|name| provider.name() == name)
                && self.uuid.is_none_or(|uuid| provider.uuid() == uuid)
                && self.member_of.admits(provider.aggregates())
                && self.traits.admits(provider.traits())
                && self
                    .resources
                    .iter()
                    .all(|(class, amount)| has_capacity(provider, class, *amount))
        })
    }
}
