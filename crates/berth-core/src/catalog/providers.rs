//! Providers and their trees: lookups by uuid, name and id, children, roots and subtrees, and
//! the provider rows as changes create, update and delete them.

use super::state::Catalog;
use crate::model::id::ProviderId;
use crate::model::provider::{Provider, ProviderRow, SHARING_TRAIT};

impl Catalog {
    /// The id the next new provider gets.
    pub fn next_provider_id(&self) -> i64 {
        self.next_id
    }

    /// Number of providers.
    pub fn len(&self) -> usize {
        self.providers.len()
    }

    /// Whether there are no providers.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }

    /// All providers in creation order.
    pub fn providers(&self) -> impl Iterator<Item = &Provider> {
        self.providers.values()
    }

    /// One provider by uuid.
    pub fn provider(&self, uuid: ProviderId) -> Option<&Provider> {
        self.providers.get(&uuid)
    }

    /// One provider by name.
    pub fn provider_by_name(&self, name: &str) -> Option<&Provider> {
        self.by_name
            .get(name)
            .and_then(|uuid| self.providers.get(uuid))
    }

    /// One provider by internal id.
    pub fn provider_by_id(&self, id: i64) -> Option<&Provider> {
        self.by_id
            .get(&id)
            .and_then(|uuid| self.providers.get(uuid))
    }

    /// Direct children of a provider, in creation order.
    pub fn children(&self, uuid: ProviderId) -> impl Iterator<Item = &Provider> {
        self.children.get(&uuid).into_iter().flatten().map(|child| {
            self.providers
                .get(child)
                .expect("invariant: children exist")
        })
    }

    /// Whether any provider has a parent.
    pub fn has_nested(&self) -> bool {
        !self.children.is_empty()
    }

    /// Providers that share their inventory through aggregates (`MISC_SHARES_VIA_AGGREGATE`).
    pub fn sharing_providers(&self) -> impl Iterator<Item = &Provider> {
        self.sharing.iter().map(|uuid| {
            self.providers
                .get(uuid)
                .expect("invariant: sharing providers exist")
        })
    }

    /// The providers of the tree rooted at `root`, parents before children.
    pub fn tree(&self, root: ProviderId) -> Vec<&Provider> {
        let Some(top) = self.providers.get(&root) else {
            return Vec::new();
        };
        let mut out = vec![top];
        let mut idx = 0;
        // Bounded: each provider is pushed once because the tree has no cycles.
        while idx < out.len() {
            let current = out[idx].uuid;
            out.extend(self.children(current));
            idx += 1;
            assert!(
                out.len() <= self.providers.len(),
                "invariant: provider trees are acyclic"
            );
        }
        out
    }

    /// Root providers, in creation order.
    pub fn roots(&self) -> impl Iterator<Item = &Provider> {
        self.providers.values().filter(|p| p.parent.is_none())
    }

    /// The provider and all its descendants, parents before children.
    pub fn subtree(&self, uuid: ProviderId) -> Vec<ProviderId> {
        let mut out = vec![uuid];
        let mut idx = 0;
        // Bounded: each provider is pushed at most once because the tree has no cycles.
        while idx < out.len() {
            let current = out[idx];
            out.extend(self.children(current).map(|child| child.uuid));
            idx += 1;
            assert!(
                out.len() <= self.providers.len(),
                "invariant: provider trees are acyclic"
            );
        }
        out
    }

    pub(super) fn insert_provider(&mut self, row: ProviderRow) {
        if let Some(parent) = row.parent {
            self.children.entry(parent).or_default().push(row.uuid);
        }
        assert!(
            !self.providers.contains_key(&row.uuid),
            "invariant: provider uuids are unique"
        );
        assert!(
            !self.by_name.contains_key(&row.name),
            "invariant: provider names are unique"
        );
        self.by_name.insert(row.name.clone(), row.uuid);
        self.by_id.insert(row.id, row.uuid);
        self.next_id = self.next_id.max(row.id + 1);
        let whole = row
            .parent
            .and_then(|parent| self.providers.get(&parent))
            .is_some_and(|parent| parent.fence.whole);
        let mut provider = Provider::from_row(row);
        provider.fence.whole = whole;
        self.providers.insert(provider.uuid, provider);
    }

    pub(super) fn update_provider(&mut self, row: &ProviderRow) {
        let old_name = self.provider_mut(row.uuid).name.clone();
        if old_name != row.name {
            self.by_name.remove(&old_name);
            self.by_name.insert(row.name.clone(), row.uuid);
        }
        let old_parent = self.provider_mut(row.uuid).parent;
        if old_parent != row.parent {
            if let Some(old) = old_parent {
                self.unlink_child(old, row.uuid);
            }
            if let Some(new) = row.parent {
                self.children.entry(new).or_default().push(row.uuid);
            }
        }
        let provider = self.provider_mut(row.uuid);
        assert_eq!(
            provider.id, row.id,
            "invariant: a provider's id never changes"
        );
        provider.name = row.name.clone();
        provider.parent = row.parent;
        provider.root = row.root;
        provider.generation = row.generation;
        provider.availability_zone = row.availability_zone.clone();
        provider.updated_at = row.updated_at;
    }

    pub(super) fn delete_provider(&mut self, uuid: ProviderId) {
        let provider = self
            .providers
            .shift_remove(&uuid)
            .expect("invariant: deleted provider exists");
        self.by_name.remove(&provider.name);
        self.by_id.remove(&provider.id);
        self.sharing.remove(&uuid);
        assert!(
            !self.children.contains_key(&uuid),
            "invariant: a deleted provider has no children"
        );
        if let Some(parent) = provider.parent {
            self.unlink_child(parent, uuid);
        }
    }

    fn unlink_child(&mut self, parent: ProviderId, child: ProviderId) {
        let siblings = self
            .children
            .get_mut(&parent)
            .expect("invariant: a child is listed under its parent");
        siblings.retain(|c| *c != child);
        if siblings.is_empty() {
            self.children.remove(&parent);
        }
    }

    pub(super) fn provider_mut(&mut self, uuid: ProviderId) -> &mut Provider {
        self.providers
            .get_mut(&uuid)
            .expect("invariant: changes name existing providers")
    }
}

/// Whether a provider has the sharing trait.
pub(super) fn is_sharing(provider: &Provider) -> bool {
    provider.traits.iter().any(|t| t.as_str() == SHARING_TRAIT)
}
