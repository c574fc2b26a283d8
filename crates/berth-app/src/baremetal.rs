//! Bare-metal use cases: enrol, change and delete nodes, claim a node for an instance, release
//! a claim, deploy with a claim; and the node and claim listings. The decisions are the core's
//! `decide::baremetal`; a claim's expiry is one of the lifecycle engine's due events, so this
//! module wakes the engine when it makes one.

use crate::error::AppError;
use crate::service::Berth;
use berth_core::ProviderId;
use berth_core::Span;
use berth_core::decide::baremetal::{
    self as decide, Candidates, ClaimRequest, NewNode, NodeChange,
};
use berth_core::decide::health::Effects;
use berth_core::model::baremetal::{NodeClaim, ProvisionState};
use berth_core::model::idempotency::Idempotent;
use berth_core::model::provider::{Attributes, Provider};
use berth_core::query::baremetal::{self as listing, ClaimFilter, NodeFilter};
use std::sync::atomic::Ordering;
use std::time::Duration;
use uuid::Uuid;

/// A node to enrol.
#[derive(Debug, Clone)]
pub struct EnrollNode {
    /// Its uuid; generated when absent.
    pub uuid: Option<ProviderId>,
    /// Its name.
    pub name: Option<String>,
    /// Ironic's resource class.
    pub resource_class: String,
    /// Typed properties.
    pub properties: Attributes,
    /// Traits.
    pub traits: Vec<String>,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Initial provision state (`enroll` unless said).
    pub provision_state: ProvisionState,
}

/// A claim to make.
#[derive(Debug, Clone)]
pub struct ClaimNode {
    /// The instance it is for.
    pub instance_uuid: Uuid,
    /// The nodes it may take.
    pub candidates: Candidates,
    /// The claiming project.
    pub project_id: String,
    /// The claiming user.
    pub user_id: String,
    /// How long it holds; the configured default when absent.
    pub ttl: Option<Duration>,
    /// The request's `Idempotency-Key`, if any: a retry answers with the claim it made.
    pub idempotency: Option<Idempotent>,
}

impl Berth {
    /// Sets how long claims hold their node when a request does not say.
    pub fn set_claim_ttl(&self, ttl: Duration) {
        self.claim_ttl_micros
            .store(crate::service::micros(ttl), Ordering::Relaxed);
    }

    /// Enrols a node and returns its uuid.
    pub async fn enroll_node(&self, cmd: EnrollNode) -> Result<ProviderId, AppError> {
        let new = NewNode {
            uuid: cmd.uuid.unwrap_or_else(|| ProviderId::new(self.new_uuid())),
            name: cmd.name,
            resource_class: cmd.resource_class,
            properties: cmd.properties,
            traits: cmd.traits,
            availability_zone: cmd.availability_zone,
            provision_state: cmd.provision_state,
        };
        let uuid = new.uuid;
        self.write(move |catalog, now| decide::enroll_node(catalog, &new, now).map(|c| (c, uuid)))
            .await
    }

    /// Changes a node (by uuid or name); returns its uuid and what maintenance did to leases.
    pub async fn update_node(
        &self,
        ident: String,
        edits: Vec<NodeChange>,
    ) -> Result<(ProviderId, Effects), AppError> {
        self.write(move |catalog, now| decide::update_node(catalog, &ident, &edits, now))
            .await
    }

    /// Deletes a node.
    pub async fn delete_node(&self, ident: String) -> Result<(), AppError> {
        self.write(move |catalog, _| decide::delete_node(catalog, &ident).map(|c| (c, ())))
            .await
    }

    /// Claims the first eligible node for an instance (with an idempotency key seen before: the
    /// claim that key's first request made, as it is now).
    pub async fn claim_node(&self, cmd: ClaimNode) -> Result<NodeClaim, AppError> {
        let request = ClaimRequest {
            uuid: self.new_uuid(),
            instance_uuid: cmd.instance_uuid,
            candidates: cmd.candidates,
            project_id: cmd.project_id,
            user_id: cmd.user_id,
            ttl: cmd.ttl.map_or_else(
                || Span::from_micros(self.claim_ttl_micros.load(Ordering::Relaxed)),
                crate::service::span,
            ),
            allocation: None,
        };
        let policy = self.fence_policy();
        // A claim that no listed node can satisfy in the committed catalog is refused without
        // queueing for the writer: a node only becomes eligible through a later commit, so the
        // refusal is the answer a decision at the instant of this read would give.
        // The local catalog answers first (no database round trip); a refusal there is
        // confirmed against the latest committed catalog of every replica.
        // A key seen before is answered by the decision (with the claim it made), never here.
        let now = self.now();
        let key = cmd.idempotency;
        let refused =
            |catalog: &berth_core::Catalog| decide::claim(catalog, &request, now, policy).err();
        if self.read_local(refused).is_some()
            && let Some(rejection) = self.read(refused).await?
            && !self.seen(key.as_ref()).await?
        {
            return Err(AppError::Rejected(rejection));
        }
        let claim = self
            .write_once(
                key,
                |catalog, id| catalog.claim(id).cloned(),
                |claim| claim.uuid,
                move |catalog, now| decide::claim(catalog, &request, now, policy),
            )
            .await?;
        self.lifecycle.notify_one();
        Ok(claim)
    }

    /// Releases a claim; `project` restricts it to that project's claims (`None`: an admin).
    pub async fn release_claim(&self, uuid: Uuid, project: Option<String>) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::release_claim(catalog, uuid, project.as_deref(), now).map(|c| (c, ()))
        })
        .await
    }

    /// The nodes `filter` keeps, in creation order, each rendered with `render` (with the
    /// catalog, for the claim on it).
    pub async fn nodes<T>(
        &self,
        filter: NodeFilter,
        mut render: impl FnMut(&berth_core::Catalog, &Provider) -> T,
    ) -> Result<Vec<T>, AppError> {
        self.read(|catalog| {
            listing::nodes(catalog, &filter)
                .into_iter()
                .map(|node| render(catalog, node))
                .collect()
        })
        .await
    }

    /// The node claims `filter` keeps, each rendered with `render`.
    pub async fn claims<T>(
        &self,
        filter: ClaimFilter,
        render: impl FnMut(&NodeClaim) -> T,
    ) -> Result<Vec<T>, AppError> {
        self.read(|catalog| {
            listing::claims(catalog, &filter)
                .into_iter()
                .map(render)
                .collect()
        })
        .await
    }

    /// Deploys a claim's instance on its node.
    pub async fn deploy_node(
        &self,
        ident: String,
        claim: Uuid,
        instance: Uuid,
        project: Option<String>,
    ) -> Result<(), AppError> {
        self.write(move |catalog, now| {
            decide::deploy(catalog, &ident, claim, instance, project.as_deref(), now)
                .map(|c| (c, ()))
        })
        .await
    }
}
