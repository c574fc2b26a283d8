//! Planned capacity changes, by id and by the providers they touch.

use super::state::Catalog;
use crate::model::id::ProviderId;
use crate::model::ledger::Window;
use crate::model::name::ResourceClass;
use crate::model::promise::CapacityPool;
use crate::model::time::Instant;
use uuid::Uuid;

impl Catalog {
    /// Every planned capacity change, by id.
    pub fn pools(&self) -> impl Iterator<Item = &CapacityPool> {
        self.pools.values()
    }

    /// One planned capacity change.
    pub fn pool(&self, id: Uuid) -> Option<&CapacityPool> {
        self.pools.get(&id)
    }

    /// Whether a planned capacity change starts or ends in `(from, to]`: the only way capacity
    /// moves with time alone, without a committed change.
    pub fn capacity_changes_between(&self, from: Instant, to: Instant) -> bool {
        let inside = |t: Instant| from < t && t <= to;
        self.pools
            .values()
            .any(|p| inside(p.start) || inside(p.end))
    }

    /// The planned changes of `class` on `provider` that overlap `window`, as
    /// `(window, delta)`.
    pub fn capacity_changes(
        &self,
        provider: ProviderId,
        class: &ResourceClass,
        window: Window,
    ) -> Vec<(Window, i64)> {
        let Some(ids) = self.pooled.get(&provider) else {
            return Vec::new();
        };
        ids.iter()
            .filter_map(|id| self.pools.get(id))
            .filter(|pool| pool.window().overlaps(&window))
            .flat_map(|pool| {
                pool.deltas
                    .iter()
                    .filter(|(p, c, _)| *p == provider && c == class.as_str())
                    .map(|(_, _, delta)| (pool.window(), *delta))
            })
            .collect()
    }

    /// The least the planned changes add to `class` on `provider` at any instant of `window`
    /// (negative when a decrease applies at some instant; positive only when increases cover
    /// the whole window).
    pub fn capacity_change_min(
        &self,
        provider: ProviderId,
        class: &ResourceClass,
        window: Window,
    ) -> i64 {
        if self.pooled.is_empty() {
            return 0;
        }
        let changes = self.capacity_changes(provider, class, window);
        if changes.is_empty() {
            return 0;
        }
        let mut instants: Vec<Instant> = vec![window.start()];
        for (w, _) in &changes {
            instants.extend(
                [w.start(), w.end()]
                    .into_iter()
                    .filter(|t| window.contains(*t)),
            );
        }
        instants
            .into_iter()
            .map(|t| {
                changes
                    .iter()
                    .filter(|(w, _)| w.contains(t))
                    .map(|(_, d)| *d)
                    .sum::<i64>()
            })
            .min()
            .unwrap_or(0)
    }

    /// Whether a planned decrease applies to `provider` at some instant of `window`.
    pub fn capacity_decreased(&self, provider: ProviderId, window: Window) -> bool {
        !self.pooled.is_empty()
            && self.pooled.get(&provider).is_some_and(|ids| {
                ids.iter().filter_map(|id| self.pools.get(id)).any(|pool| {
                    pool.window().overlaps(&window)
                        && pool.deltas.iter().any(|(p, _, d)| *p == provider && *d < 0)
                })
            })
    }

    pub(super) fn insert_pool(&mut self, pool: CapacityPool) {
        for (provider, _, _) in &pool.deltas {
            self.pooled.entry(*provider).or_default().insert(pool.id);
        }
        self.pools.insert(pool.id, pool);
    }

    pub(super) fn remove_pool(&mut self, id: Uuid) {
        let Some(pool) = self.pools.remove(&id) else {
            return;
        };
        for (provider, _, _) in &pool.deltas {
            if let Some(ids) = self.pooled.get_mut(provider) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.pooled.remove(provider);
                }
            }
        }
    }
}
