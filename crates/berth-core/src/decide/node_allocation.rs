//! Decisions about Ironic allocations, which are node claims with Ironic's fields
//! ([`AllocationRecord`]): making one (the node claim's own decision, after the checks an
//! allocation adds: a unique uuid and name, candidate nodes that exist), backfilling one for a
//! node already deployed, and changing its name and extra. Releasing one is releasing its claim
//! ([`crate::decide::baremetal::release_claim`]).

use crate::catalog::Catalog;
use crate::change::{Change, Decision};
use crate::decide::baremetal::{ClaimRequest, find_node};
use crate::limits::CLAIM_CANDIDATES_MAX;
use crate::model::baremetal::{AllocationRecord, NodeClaim, ProvisionState};
use crate::model::id::ProviderId;
use crate::model::name::TraitName;
use crate::model::time::Instant;
use crate::query::baremetal::find_allocation;
use crate::query::presentation::FencePolicy;
use crate::rejection::Rejection;
use uuid::Uuid;

fn bad(text: impl Into<String>) -> Rejection {
    Rejection::BadNode(text.into())
}

/// Refuses (409) an allocation whose uuid or name another allocation or claim already has.
fn check_unique(catalog: &Catalog, uuid: Uuid, name: Option<&str>) -> Result<(), Rejection> {
    if catalog.claim(uuid).is_some() {
        return Err(Rejection::NodeInUse(format!(
            "An allocation with UUID {uuid} already exists."
        )));
    }
    if let Some(name) = name
        && find_allocation(catalog, name, None).is_some()
    {
        return Err(Rejection::NodeInUse(format!(
            "An allocation with name {name} already exists."
        )));
    }
    Ok(())
}

/// The nodes named (uuids or names), each of which must exist (400 otherwise, as Ironic).
/// At most [`CLAIM_CANDIDATES_MAX`] of them.
pub fn candidate_nodes(catalog: &Catalog, idents: &[String]) -> Result<Vec<ProviderId>, Rejection> {
    if idents.len() > CLAIM_CANDIDATES_MAX {
        return Err(bad(format!(
            "candidate_nodes lists more than {CLAIM_CANDIDATES_MAX} nodes"
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut nodes = Vec::with_capacity(idents.len());
    for ident in idents {
        let node = find_node(catalog, ident)
            .map_err(|_| bad(format!("Candidate node {ident} could not be found")))?;
        if seen.insert(node.uuid()) {
            nodes.push(node.uuid());
        }
    }
    Ok(nodes)
}

/// Makes an allocation: the node claim `request` (which carries the allocation's record, its
/// class, traits and resolved candidate nodes), once its uuid and name are known to be free.
pub fn allocate(
    catalog: &Catalog,
    request: &ClaimRequest,
    now: Instant,
    policy: FencePolicy,
) -> Result<(Vec<Change>, NodeClaim), Rejection> {
    let record = request
        .allocation
        .as_ref()
        .expect("invariant: an allocation's request carries its record");
    check_unique(catalog, request.uuid, record.name.as_deref())?;
    crate::decide::baremetal::claim(catalog, request, now, policy)
}

/// An allocation to backfill for a node already deployed.
#[derive(Debug, Clone)]
pub struct Backfill {
    /// The allocation's uuid.
    pub uuid: Uuid,
    /// The node, by uuid or name.
    pub node: String,
    /// Ironic's fields; an empty resource class means the node's.
    pub record: AllocationRecord,
    /// The project it is made for (it sees and deletes it).
    pub project_id: String,
    /// The user making it.
    pub user_id: String,
}

/// Backfills an allocation for a node that is `active` with an instance and has no allocation:
/// the instance already holds the node's unit, so only the record is made. A resource class or
/// traits that the node does not have are refused (400), as is a node already allocated (409).
pub fn backfill(
    catalog: &Catalog,
    request: &Backfill,
    now: Instant,
) -> Result<(Vec<Change>, NodeClaim), Rejection> {
    let provider = find_node(catalog, &request.node)
        .map_err(|_| bad(format!("Node {} could not be found", request.node)))?;
    let uuid = provider.uuid();
    let node = provider
        .node()
        .expect("invariant: find_node returns nodes only");
    check_unique(catalog, request.uuid, request.record.name.as_deref())?;
    if let Some(claim) = catalog.claim_on(uuid) {
        return Err(Rejection::NodeInUse(format!(
            "Node {uuid} already has an allocation or a reservation: {}",
            claim.uuid
        )));
    }
    let instance_uuid = match (node.provision_state, node.instance_uuid) {
        (ProvisionState::Active, Some(instance)) => instance,
        (state, _) => {
            return Err(bad(format!(
                "Node {uuid} is {} without an instance; only an active node with an instance can be backfilled",
                state.as_str()
            )));
        }
    };
    let record = &request.record;
    if !record.resource_class.is_empty() && record.resource_class != node.resource_class {
        return Err(bad(format!(
            "Node {uuid} has resource class {}, not {}",
            node.resource_class, record.resource_class
        )));
    }
    for name in &record.traits {
        let has = TraitName::parse(name).is_some_and(|t| provider.traits().contains(&t));
        if !has {
            return Err(bad(format!("Node {uuid} does not have trait {name}")));
        }
    }
    let claim = NodeClaim {
        uuid: request.uuid,
        node_uuid: uuid,
        instance_uuid,
        project_id: request.project_id.clone(),
        user_id: request.user_id.clone(),
        created_at: now,
        updated_at: now,
        expires_at: NodeClaim::NEVER,
        allocation: Some(AllocationRecord {
            resource_class: node.resource_class.clone(),
            ..record.clone()
        }),
    };
    let changes = vec![Change::ClaimSet {
        uuid: claim.uuid,
        claim: Some(claim.clone()),
    }];
    Ok((changes, claim))
}

/// A change to an allocation (Ironic lets `name` and `extra` change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocationPatch {
    /// A new name (`Some(None)`: remove it).
    pub name: Option<Option<String>>,
    /// A new `extra` (the JSON text of an object).
    pub extra: Option<String>,
}

/// Changes the name or extra of the allocation `ident` that a caller of `project` sees
/// (`None`: an admin), as `edit` says from its current record (so a change made from what the
/// record is now is never lost to another); a name another allocation has is refused (409).
pub fn update_allocation(
    catalog: &Catalog,
    ident: &str,
    project: Option<&str>,
    edit: impl FnOnce(&AllocationRecord) -> Result<AllocationPatch, Rejection>,
    now: Instant,
) -> Result<(Vec<Change>, Uuid), Rejection> {
    let claim = find_allocation(catalog, ident, project)
        .ok_or_else(|| Rejection::AllocationNotFound(ident.to_owned()))?;
    let mut record = claim
        .allocation
        .clone()
        .expect("invariant: find_allocation finds allocations");
    let patch = edit(&record)?;
    if let Some(name) = &patch.name {
        if let Some(new) = name
            && record.name.as_ref() != Some(new)
            && find_allocation(catalog, new, None).is_some()
        {
            return Err(Rejection::NodeInUse(format!(
                "An allocation with name {new} already exists."
            )));
        }
        record.name.clone_from(name);
    }
    if let Some(extra) = &patch.extra {
        record.extra.clone_from(extra);
    }
    let updated = NodeClaim {
        updated_at: now,
        allocation: Some(record),
        ..claim.clone()
    };
    Ok((
        vec![Change::ClaimSet {
            uuid: claim.uuid,
            claim: Some(updated),
        }],
        claim.uuid,
    ))
}

/// Deletes the allocation `ident` that a caller of `project` sees: its claim is released, and
/// the node is free again unless it was deployed.
pub fn delete_allocation(
    catalog: &Catalog,
    ident: &str,
    project: Option<&str>,
    now: Instant,
) -> Decision {
    let claim = find_allocation(catalog, ident, project)
        .ok_or_else(|| Rejection::AllocationNotFound(ident.to_owned()))?;
    crate::decide::baremetal::release_claim(catalog, claim.uuid, project, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller's list of candidate nodes is bounded before any is looked up.
    #[test]
    fn too_many_candidate_nodes_are_refused() {
        let idents: Vec<String> = (0..=CLAIM_CANDIDATES_MAX)
            .map(|n| format!("n{n}"))
            .collect();
        let refused = candidate_nodes(&Catalog::new(), &idents).expect_err("too many");
        assert!(refused.to_string().contains("more than 1000"), "{refused}");
        let unknown = candidate_nodes(&Catalog::new(), &idents[..1]).expect_err("unknown");
        assert!(
            unknown.to_string().contains("could not be found"),
            "{unknown}"
        );
    }
}
