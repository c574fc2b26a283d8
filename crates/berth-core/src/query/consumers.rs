//! What consumers hold: a project's (and optionally a user's) usage, by consumer type (Placement's
//! usages), and who holds what on one provider.

use crate::catalog::Catalog;
use crate::model::id::ProviderId;
use crate::model::name::ResourceClass;
use crate::model::provider::Provider;
use std::collections::BTreeMap;
use uuid::Uuid;

/// The type a consumer without one is counted under.
pub const UNKNOWN_CONSUMER_TYPE: &str = "unknown";

/// Whose usage to add up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageQuery {
    /// The project.
    pub project: String,
    /// Only this user's consumers, when given.
    pub user: Option<String>,
    /// Only consumers of this type (consumers without one are [`UNKNOWN_CONSUMER_TYPE`]), when
    /// given.
    pub consumer_type: Option<String>,
}

/// What the consumers of one type hold together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeUsage {
    /// How many consumers.
    pub consumers: u64,
    /// Units held, by class.
    pub classes: BTreeMap<ResourceClass, u64>,
}

/// A usage: what the matching consumers hold, by consumer type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// By consumer type, sorted.
    pub by_type: BTreeMap<String, TypeUsage>,
}

impl Usage {
    /// Units held by every type together, by class.
    pub fn total(&self) -> BTreeMap<ResourceClass, u64> {
        let mut total = BTreeMap::new();
        for usage in self.by_type.values() {
            for (class, amount) in &usage.classes {
                *total.entry(class.clone()).or_insert(0) += amount;
            }
        }
        total
    }
}

/// What the consumers `query` names hold.
pub fn usage(catalog: &Catalog, query: &UsageQuery) -> Usage {
    let mut found = Usage::default();
    for (_, consumer) in catalog.consumers() {
        let kind = consumer
            .consumer_type
            .as_deref()
            .unwrap_or(UNKNOWN_CONSUMER_TYPE);
        if consumer.project_id != query.project
            || query.user.as_ref().is_some_and(|u| *u != consumer.user_id)
            || query.consumer_type.as_ref().is_some_and(|t| t != kind)
        {
            continue;
        }
        let usage = found.by_type.entry(kind.to_owned()).or_default();
        usage.consumers += 1;
        for (_, class, amount) in consumer.entries() {
            *usage.classes.entry(class.clone()).or_insert(0) += amount;
        }
    }
    found
}

/// What one consumer holds on one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held<'c> {
    /// The consumer.
    pub consumer: Uuid,
    /// The consumer's generation.
    pub generation: u64,
    /// Units held there, by class.
    pub resources: &'c BTreeMap<ResourceClass, u64>,
}

/// A provider and what each consumer holds on it.
#[derive(Debug, Clone)]
pub struct ProviderAllocations<'c> {
    /// The provider.
    pub provider: &'c Provider,
    /// The consumers holding something there, in consumer order.
    pub held: Vec<Held<'c>>,
}

/// What each consumer holds on `provider`; `None` when there is no such provider.
pub fn on_provider(catalog: &Catalog, provider: ProviderId) -> Option<ProviderAllocations<'_>> {
    let found = catalog.provider(provider)?;
    let held = catalog
        .consumers()
        .filter_map(|(consumer, c)| {
            c.allocations.get(&provider).map(|resources| Held {
                consumer,
                generation: c.generation,
                resources,
            })
        })
        .collect();
    Some(ProviderAllocations {
        provider: found,
        held,
    })
}
