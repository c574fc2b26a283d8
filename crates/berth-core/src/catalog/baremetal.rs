//! Node claims, by uuid, by node and by expiry.

use super::state::Catalog;
use crate::model::baremetal::NodeClaim;
use crate::model::id::ProviderId;
use uuid::Uuid;

impl Catalog {
    /// Node claims, by uuid.
    pub fn claims(&self) -> impl Iterator<Item = &NodeClaim> {
        self.claims.values()
    }

    /// A node claim.
    pub fn claim(&self, uuid: Uuid) -> Option<&NodeClaim> {
        self.claims.get(&uuid)
    }

    /// The claim on a node, expired or not.
    pub fn claim_on(&self, node: ProviderId) -> Option<&NodeClaim> {
        self.node_claims
            .get(&node)
            .and_then(|uuid| self.claims.get(uuid))
    }

    pub(super) fn insert_claim(&mut self, claim: NodeClaim) {
        self.node_claims.insert(claim.node_uuid, claim.uuid);
        if claim.expires() {
            self.claim_due.insert((claim.expires_at, claim.uuid));
        }
        self.claims.insert(claim.uuid, claim);
    }

    pub(super) fn remove_claim(&mut self, uuid: Uuid) {
        if let Some(claim) = self.claims.remove(&uuid) {
            self.node_claims.remove(&claim.node_uuid);
            self.claim_due.remove(&(claim.expires_at, uuid));
        }
    }
}
