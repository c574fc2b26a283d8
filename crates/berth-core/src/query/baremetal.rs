//! Bare-metal listings: which nodes a node listing shows, and which node claims a caller sees
//! (its project's; an admin every project's).

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

/// The claims `filter` keeps, in the catalog's order.
pub fn claims<'c>(catalog: &'c Catalog, filter: &ClaimFilter) -> Vec<&'c NodeClaim> {
    catalog
        .claims()
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
    catalog.claim(uuid).filter(|c| visible(c, project))
}
