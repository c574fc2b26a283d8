//! The catalog's structural invariants, checked after every step in tests.

use super::providers::is_sharing;
use super::state::Catalog;
use crate::model::id::{LeaseId, ProviderId};
use crate::model::lease::LeaseStatus;
use crate::model::name::ResourceClass;
use crate::model::provider::Provider;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use uuid::Uuid;

impl Catalog {
    /// Checks every structural invariant; O(n). Used after every step in tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_claims()?;
        if self.by_name.len() != self.providers.len() || self.by_id.len() != self.providers.len() {
            return Err("name or id index out of step with providers".into());
        }
        let listed: usize = self.children.values().map(Vec::len).sum();
        let nested = self
            .providers
            .values()
            .filter(|p| p.parent.is_some())
            .count();
        if listed != nested
            || self.children.iter().any(|(parent, kids)| {
                kids.iter()
                    .any(|k| self.providers.get(k).and_then(|p| p.parent) != Some(*parent))
            })
        {
            return Err("the children index is out of step with parents".into());
        }
        let sharing: BTreeSet<ProviderId> = self
            .providers
            .values()
            .filter(|p| is_sharing(p))
            .map(|p| p.uuid)
            .collect();
        if sharing != self.sharing {
            return Err("the sharing index is out of step with traits".into());
        }
        self.check_usage()?;
        self.check_parked()?;
        let held: usize = self.leases.iter().map(|l| l.0.holds().len()).sum();
        if held != self.ledger.len() {
            return Err("the ledger is out of step with the leases".into());
        }
        let mut names = BTreeSet::new();
        for name in self
            .aggregates
            .values()
            .filter_map(|record| record.name.as_ref())
        {
            if !names.insert(name) {
                return Err(format!("two aggregates are named {name}"));
            }
        }
        for provider in self.providers.values() {
            if let Some(parent) = provider.parent {
                let Some(parent) = self.providers.get(&parent) else {
                    return Err(format!("{} has a missing parent", provider.uuid));
                };
                if parent.root != provider.root {
                    return Err(format!(
                        "{} has a root different from its parent's",
                        provider.uuid
                    ));
                }
            } else if provider.root != provider.uuid {
                return Err(format!(
                    "root provider {} is not its own root",
                    provider.uuid
                ));
            }
            if provider.host.is_some() && provider.parent.is_some() {
                return Err(format!(
                    "nested provider {} is enrolled as a host",
                    provider.uuid
                ));
            }
            for class in provider.inventories.keys() {
                if !self.has_resource_class(class) {
                    return Err(format!(
                        "{} has inventory of unknown class {}",
                        provider.uuid,
                        class.as_str()
                    ));
                }
            }
            for name in &provider.traits {
                if !self.has_trait(name) {
                    return Err(format!(
                        "{} has unknown trait {}",
                        provider.uuid,
                        name.as_str()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Usage of every provider and class equals the sum of what consumers hold there, and every
    /// held amount sits on an existing provider with inventory of its class.
    fn check_usage(&self) -> Result<(), String> {
        let mut counted: HashMap<(ProviderId, &ResourceClass), u64> = HashMap::new();
        for (uuid, consumer) in &self.consumers {
            for (provider, class, amount) in consumer.entries() {
                let Some(holder) = self.providers.get(&provider) else {
                    return Err(format!(
                        "consumer {uuid} holds capacity on a missing provider {provider}"
                    ));
                };
                if !holder.inventories.contains_key(class) {
                    return Err(format!(
                        "consumer {uuid} holds {} without inventory on {provider}",
                        class.as_str()
                    ));
                }
                *counted.entry((provider, class)).or_insert(0) += amount;
            }
        }
        for provider in self.providers.values() {
            for (class, used) in &provider.usages {
                if counted.get(&(provider.uuid, class)) != Some(used) {
                    return Err(format!(
                        "usage of {} on {} differs from its consumers",
                        class.as_str(),
                        provider.uuid
                    ));
                }
            }
        }
        if counted.len()
            != self
                .providers
                .values()
                .map(|p| p.usages.len())
                .sum::<usize>()
        {
            return Err("a held amount is missing from usage".into());
        }
        Ok(())
    }

    /// Every claim holds an existing node, and no node is held by two claims.
    fn check_claims(&self) -> Result<(), String> {
        for claim in self.claims.values() {
            if self
                .provider(claim.node_uuid)
                .and_then(Provider::node)
                .is_none()
            {
                return Err(format!("claim {} holds a missing node", claim.uuid));
            }
            if self.node_claims.get(&claim.node_uuid) != Some(&claim.uuid) {
                return Err(format!("claim {} is not indexed by its node", claim.uuid));
            }
        }
        if self.node_claims.len() != self.claims.len() {
            return Err("two claims hold one node".into());
        }
        Ok(())
    }

    /// The open-holds count per project, the waitlist and the series index each equal what a
    /// recount from the leases gives.
    fn check_parked(&self) -> Result<(), String> {
        let mut holds: HashMap<Arc<str>, u32> = HashMap::new();
        let mut waiting = BTreeSet::new();
        let mut series: BTreeMap<Uuid, BTreeSet<(u32, LeaseId)>> = BTreeMap::new();
        for lease in self.leases() {
            match lease.status {
                LeaseStatus::Held => *holds.entry(Arc::clone(&lease.project_id)).or_default() += 1,
                LeaseStatus::Waiting => {
                    waiting.insert((lease.created_at, lease.id));
                }
                _ => {}
            }
            if let Some(occurrence) = lease.series() {
                series
                    .entry(occurrence.series_id)
                    .or_default()
                    .insert((occurrence.index, lease.id));
            }
        }
        if holds != *self.open_holds {
            return Err("the open-holds count is out of step with the leases".into());
        }
        if waiting.len() != self.waiting.len() || waiting.iter().ne(self.waiting.iter()) {
            return Err("the waitlist is out of step with the leases".into());
        }
        if series.len() != self.series.len()
            || series
                .iter()
                .any(|(id, listed)| self.series.get(id) != Some(listed))
        {
            return Err("the series index is out of step with the leases".into());
        }
        Ok(())
    }

    /// Empties one of the indexes [`Catalog::check_parked`] checks, for tests of that check.
    #[cfg(test)]
    pub(crate) fn forget_parked(&mut self, index: ParkedIndex) {
        match index {
            ParkedIndex::OpenHolds => self.open_holds = Arc::default(),
            ParkedIndex::Waiting => self.waiting = imbl::OrdSet::new(),
            ParkedIndex::Series => self.series = imbl::OrdMap::new(),
        }
    }
}

/// The lease indexes [`Catalog::forget_parked`] can empty.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) enum ParkedIndex {
    OpenHolds,
    Waiting,
    Series,
}
