//! Ironic allocation use cases: make one (the first eligible node of a class, through the node
//! claim's decision and write path), backfill one for a deployed node, change its name and
//! extra, delete it, and list them. An allocation never expires, so the lifecycle engine has
//! nothing to wake for.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::Span;
use berth_core::decide::baremetal::{Candidates, ClaimRequest};
use berth_core::decide::node_allocation::{self as decide, AllocationPatch, Backfill};
use berth_core::model::baremetal::{AllocationRecord, NodeClaim, Unclaimable};
use berth_core::query::baremetal::{self as listing, AllocationFilter};
use berth_core::{Instant, Rejection};
use uuid::Uuid;

/// An allocation to make.
#[derive(Debug, Clone)]
pub struct AllocateNode {
    /// Its uuid; generated when absent.
    pub uuid: Option<Uuid>,
    /// Backfill for this node (uuid or name), already deployed, instead of picking one.
    pub node: Option<String>,
    /// The candidate nodes, by uuid or name (empty: any node of the class).
    pub candidate_nodes: Vec<String>,
    /// Ironic's fields (`candidate_nodes` is filled in from the names above).
    pub record: AllocationRecord,
    /// The project it is made for.
    pub project_id: String,
    /// The user making it.
    pub user_id: String,
}

/// What making an allocation gave.
#[derive(Debug, Clone)]
pub enum Allocated {
    /// A node: the allocation is `active`.
    Active(NodeClaim),
    /// No node fits: the allocation is in `error`, and (decided at once) not kept.
    Failed(FailedAllocation),
}

/// An allocation no node could satisfy.
#[derive(Debug, Clone)]
pub struct FailedAllocation {
    /// The uuid it would have had.
    pub uuid: Uuid,
    /// Its fields, candidate nodes resolved to uuids.
    pub record: AllocationRecord,
    /// Why each node it looked at could not be taken.
    pub reasons: Vec<Unclaimable>,
    /// When it was decided.
    pub at: Instant,
}

impl Berth {
    /// Makes an allocation: backfills one for `cmd.node`, or takes the first eligible node of
    /// the class (among the candidates) exactly as a node claim does, under the writer lock.
    pub async fn allocate(&self, cmd: AllocateNode) -> Result<Allocated, AppError> {
        let uuid = cmd.uuid.unwrap_or_else(|| self.new_uuid());
        if let Some(node) = cmd.node {
            let request = Backfill {
                uuid,
                node,
                record: cmd.record,
                project_id: cmd.project_id,
                user_id: cmd.user_id,
            };
            let claim = self
                .write(move |catalog, now| decide::backfill(catalog, &request, now))
                .await?;
            return Ok(Allocated::Active(claim));
        }
        let idents = cmd.candidate_nodes;
        let among = self
            .read(move |catalog| decide::candidate_nodes(catalog, &idents))
            .await??;
        let record = AllocationRecord {
            candidate_nodes: among.clone(),
            ..cmd.record
        };
        let request = ClaimRequest {
            uuid,
            // The allocation is the Placement consumer that holds the node, as Ironic makes it
            // the node's instance.
            instance_uuid: uuid,
            candidates: Candidates::Class {
                resource_class: record.resource_class.clone(),
                traits: record.traits.clone(),
                among,
            },
            project_id: cmd.project_id,
            user_id: cmd.user_id,
            ttl: Span::ZERO,
            allocation: Some(record.clone()),
        };
        let policy = self.fence_policy();
        let made = self
            .write(move |catalog, now| decide::allocate(catalog, &request, now, policy))
            .await;
        match made {
            Ok(claim) => Ok(Allocated::Active(claim)),
            Err(AppError::Rejected(Rejection::NoNodeClaimable(reasons))) => {
                Ok(Allocated::Failed(FailedAllocation {
                    uuid,
                    record,
                    reasons,
                    at: self.now(),
                }))
            }
            Err(other) => Err(other),
        }
    }

    /// Changes an allocation's name or extra as `edit` says from its current record, under the
    /// writer lock; returns its uuid.
    pub async fn update_allocation(
        &self,
        ident: String,
        project: Option<String>,
        edit: impl FnOnce(&AllocationRecord) -> Result<AllocationPatch, Rejection> + Send + 'static,
    ) -> Result<Uuid, AppError> {
        self.write(move |catalog, now| {
            decide::update_allocation(catalog, &ident, project.as_deref(), edit, now)
        })
        .await
    }

    /// Deletes an allocation, freeing its node unless the node was deployed.
    pub async fn delete_allocation(
        &self,
        ident: String,
        project: Option<String>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::delete_allocation(catalog, &ident, project.as_deref(), now).map(|c| (c, ()))
        })
        .await
    }

    /// The allocations `filter` keeps, each rendered with `render`.
    pub async fn allocations<T>(
        &self,
        filter: AllocationFilter,
        render: impl FnMut(&NodeClaim) -> T,
    ) -> Result<Vec<T>, AppError> {
        self.read(|catalog| {
            listing::allocations(catalog, &filter)
                .into_iter()
                .map(render)
                .collect()
        })
        .await
    }
}
