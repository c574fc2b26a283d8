//! Consumers and their allocations: who uses how much of which class on which provider, now.

use crate::model::id::{ProviderId, ReservationId};
use crate::model::name::ResourceClass;
use crate::model::time::Instant;
use std::collections::BTreeMap;

/// The consumer type of consumers that may borrow fenced capacity and be evicted for it.
pub const PREEMPTIBLE: &str = "PREEMPTIBLE";

/// The amounts one consumer holds, by provider and class.
pub type Allocations = BTreeMap<ProviderId, BTreeMap<ResourceClass, u64>>;

/// A consumer of capacity (an instance, a migration, a reservation's holder).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Consumer {
    /// Owning project.
    pub project_id: String,
    /// Owning user.
    pub user_id: String,
    /// Consumer type (Placement 1.38), for example `INSTANCE`; `None` shows as `unknown`.
    pub consumer_type: Option<String>,
    /// Optimistic-concurrency generation; bumped on every write.
    pub generation: u64,
    /// What the consumer holds.
    pub allocations: Allocations,
    /// The reservation its allocations count against, when it presented one.
    pub reservation: Option<ReservationId>,
    /// Creation time.
    pub created_at: Instant,
    /// Last update time.
    pub updated_at: Instant,
}

impl Consumer {
    /// Units of `class` the consumer holds on `provider`.
    pub fn amount(&self, provider: ProviderId, class: &ResourceClass) -> u64 {
        self.allocations
            .get(&provider)
            .and_then(|by_class| by_class.get(class))
            .copied()
            .unwrap_or(0)
    }

    /// Every `(provider, class, amount)` the consumer holds.
    pub fn entries(&self) -> impl Iterator<Item = (ProviderId, &ResourceClass, u64)> {
        self.allocations.iter().flat_map(|(provider, by_class)| {
            by_class
                .iter()
                .map(move |(class, amount)| (*provider, class, *amount))
        })
    }
}
