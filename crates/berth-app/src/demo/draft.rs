//! The demo cloud's scratch catalog and the small helpers its parts share.

use berth_core::change::Decision;
use berth_core::{AttrValue, Catalog, Change, ProviderId, Rejection, ResourceClass, TraitName};
use std::collections::BTreeSet;

/// Availability zones of the demo cloud.
pub(super) const DEMO_ZONES: [&str; 3] = ["az1", "az2", "az3"];

/// A scratch catalog that accumulates changes as one decision.
pub(super) struct Draft {
    pub(super) catalog: Catalog,
    pub(super) changes: Vec<Change>,
    pub(super) now: berth_core::Instant,
}

impl Draft {
    pub(super) fn step(
        &mut self,
        decision: impl FnOnce(&Catalog) -> Decision,
    ) -> Result<(), Rejection> {
        let changes = decision(&self.catalog)?;
        self.catalog.apply(&changes);
        self.changes.extend(changes);
        Ok(())
    }

    pub(super) fn provider_uuid(&self, name: &str) -> ProviderId {
        self.catalog
            .provider_by_name(name)
            .expect("invariant: demo provider exists")
            .uuid()
    }

    pub(super) fn generation(&self, uuid: ProviderId) -> u64 {
        self.catalog
            .provider(uuid)
            .expect("invariant: demo provider exists")
            .generation()
    }
}

pub(super) fn class(name: &str) -> ResourceClass {
    ResourceClass::parse(name).expect("invariant: demo class names are valid")
}

pub(super) fn traits(names: &[&str]) -> BTreeSet<TraitName> {
    names
        .iter()
        .map(|n| TraitName::parse(n).expect("invariant: demo trait names are valid"))
        .collect()
}

pub(super) fn text(value: &str) -> AttrValue {
    AttrValue::String(value.to_owned())
}
