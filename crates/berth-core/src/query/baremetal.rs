//! Bare-metal listings: which nodes a node listing shows, and which node claims and Ironic
//! allocations a caller sees (its project's; an admin every project's).

use crate::catalog::Catalog;
use crate::model::baremetal::{NodeClaim, ProvisionState};
use crate::model::id::ProviderId;
use crate::model::provider::Provider;
use uuid::Uuid;

/// A node listing's filters; each one absent keeps every node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFilter {
    /// Nodes in this provision state.
    pub provision_state: Option<ProvisionState>,
    /// Nodes in maintenance (`true`) or not (`false`).
    pub maintenance: Option<bool>,
    /// Nodes with an instance (`true`) or without (`false`).
    pub associated: Option<bool>,
    /// Nodes of this (Ironic) resource class.
    pub resource_class: Option<String>,
}

/// The nodes `filter` keeps, in creation order.
pub fn nodes<'c>(catalog: &'c Catalog, filter: &NodeFilter) -> Vec<&'c Provider> {
    catalog
        .providers()
        .filter(|p| {
            p.node().is_some_and(|n| {
                filter
                    .provision_state
                    .is_none_or(|s| n.provision_state == s)
                    && filter
                        .maintenance
                        .is_none_or(|m| p.condition().is_some() == m)
                    && filter
                        .associated
                        .is_none_or(|a| n.instance_uuid.is_some() == a)
                    && filter
                        .resource_class
                        .as_ref()
                        .is_none_or(|c| *c == n.resource_class)
            })
        })
        .collect()
}

/// A claim listing's filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// The project the caller acts for (`None`: every project, an admin).
    pub viewer: Option<String>,
    /// Claims on this node.
    pub node: Option<ProviderId>,
    /// Claims for this instance.
    pub instance: Option<Uuid>,
}

/// Whether a caller acting for `project` (`None`: every project) sees `claim`.
fn visible(claim: &NodeClaim, project: Option<&str>) -> bool {
    project.is_none_or(|p| p == claim.project_id)
}

/// The claims `filter` keeps, in the catalog's order (allocations are listed as allocations).
pub fn claims<'c>(catalog: &'c Catalog, filter: &ClaimFilter) -> Vec<&'c NodeClaim> {
    catalog
        .claims()
        .filter(|c| c.allocation.is_none())
        .filter(|c| visible(c, filter.viewer.as_deref()))
        .filter(|c| filter.node.is_none_or(|n| n == c.node_uuid))
        .filter(|c| filter.instance.is_none_or(|i| i == c.instance_uuid))
        .collect()
}

/// The claim `uuid`, when a caller acting for `project` sees it (to anyone else it does not
/// exist).
pub fn find_claim<'c>(
    catalog: &'c Catalog,
    uuid: Uuid,
    project: Option<&str>,
) -> Option<&'c NodeClaim> {
    catalog
        .claim(uuid)
        .filter(|c| c.allocation.is_none() && visible(c, project))
}

/// An allocation listing's filters (Ironic's); each one absent keeps every allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocationFilter {
    /// The project the caller acts for (`None`: every project, an admin).
    pub viewer: Option<String>,
    /// Allocations of this node, by uuid or name (one that does not exist has none).
    pub node: Option<String>,
    /// Allocations of this (Ironic) resource class.
    pub resource_class: Option<String>,
    /// Allocations in this state: every allocation berth keeps is `active`.
    pub state: Option<String>,
    /// Allocations this project owns.
    pub owner: Option<String>,
    /// Only allocations after this one, in uuid order (Ironic's `marker`).
    pub after: Option<Uuid>,
    /// At most this many.
    pub limit: usize,
}

/// The allocations `filter` keeps, in uuid order.
pub fn allocations<'c>(catalog: &'c Catalog, filter: &AllocationFilter) -> Vec<&'c NodeClaim> {
    let node = filter.node.as_deref().map(|ident| {
        Uuid::parse_str(ident)
            .ok()
            .and_then(|uuid| catalog.provider(ProviderId::new(uuid)))
            .or_else(|| catalog.provider_by_name(ident))
            .map(Provider::uuid)
    });
    catalog
        .claims()
        .filter(|c| filter.after.is_none_or(|after| c.uuid > after))
        .filter(|c| visible(c, filter.viewer.as_deref()))
        .filter(|c| {
            c.allocation.as_ref().is_some_and(|a| {
                node.is_none_or(|n| n == Some(c.node_uuid))
                    && filter
                        .resource_class
                        .as_ref()
                        .is_none_or(|r| *r == a.resource_class)
                    && filter.state.as_ref().is_none_or(|s| s == "active")
                    && filter
                        .owner
                        .as_ref()
                        .is_none_or(|o| a.owner.as_ref() == Some(o))
            })
        })
        .take(filter.limit)
        .collect()
}

/// The allocation named `ident` (a uuid or a name), when a caller acting for `project` sees it.
pub fn find_allocation<'c>(
    catalog: &'c Catalog,
    ident: &str,
    project: Option<&str>,
) -> Option<&'c NodeClaim> {
    let by_uuid = Uuid::parse_str(ident)
        .ok()
        .and_then(|uuid| catalog.claim(uuid));
    by_uuid
        .filter(|c| c.allocation.is_some())
        .or_else(|| {
            catalog.claims().find(|c| {
                c.allocation
                    .as_ref()
                    .is_some_and(|a| a.name.as_deref() == Some(ident))
            })
        })
        .filter(|c| visible(c, project))
}

/// The allocation of node `node`, when a caller acting for `project` sees it.
pub fn allocation_of_node<'c>(
    catalog: &'c Catalog,
    node: ProviderId,
    project: Option<&str>,
) -> Option<&'c NodeClaim> {
    catalog
        .claim_on(node)
        .filter(|c| c.allocation.is_some() && visible(c, project))
}
