//! Bare-metal nodes and node claims (the Ironic node-reservation spec).
//!
//! A node is a root resource provider with one unit of its `CUSTOM_<RESOURCE_CLASS>` class,
//! its properties as typed attributes and its traits as the provider's traits; it is also a
//! reservable host, so leases reserve nodes like any host (filter on `resource_class` and the
//! properties), and Placement sees it. What only a node has is its [`NodeRecord`]: the
//! provision state, the instance deployed on it, and the resource class as Ironic names it.
//! Maintenance is the provider's condition (see [`crate::decide::health`]), so taking a node
//! into maintenance heals the leases on it like any host.
//!
//! A [`NodeClaim`] marks a node as picked for an instance until it is deployed or its claim
//! expires. The claim is a Placement allocation of the node's one unit to the instance (the
//! consumer), so no other claim, allocation or lease admission can take the node meanwhile,
//! and the fence keeps nodes reserved by another project's lease out of reach.
//!
//! An Ironic allocation is a node claim with an [`AllocationRecord`]: it is taken by the same
//! decision (the first eligible node, under the writer lock, through the node's one unit), but
//! it never expires (it lasts until it is deleted or its node is torn down), and it carries
//! Ironic's fields (name, resource class, candidate nodes, traits, extra, owner).

use crate::model::id::ProviderId;
use crate::model::time::Instant;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a node stands in its provisioning life (Ironic's provision states that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProvisionState {
    /// Just enrolled; not yet managed.
    Enroll,
    /// Managed, not offered for deployment.
    Manageable,
    /// Offered for deployment: the only state a node can be claimed in.
    Available,
    /// Being deployed.
    Deploying,
    /// Deployed: an instance runs on it.
    Active,
    /// Being cleaned (after a teardown, or on request).
    Cleaning,
    /// Something failed.
    Error,
}

impl ProvisionState {
    /// Every state, in life order.
    pub const ALL: [ProvisionState; 7] = [
        ProvisionState::Enroll,
        ProvisionState::Manageable,
        ProvisionState::Available,
        ProvisionState::Deploying,
        ProvisionState::Active,
        ProvisionState::Cleaning,
        ProvisionState::Error,
    ];

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            ProvisionState::Enroll => "enroll",
            ProvisionState::Manageable => "manageable",
            ProvisionState::Available => "available",
            ProvisionState::Deploying => "deploying",
            ProvisionState::Active => "active",
            ProvisionState::Cleaning => "cleaning",
            ProvisionState::Error => "error",
        }
    }

    /// Parses the wire form.
    pub fn parse(text: &str) -> Option<ProvisionState> {
        ProvisionState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether a PATCH may move a node from `self` to `to`. Deploying happens only through the
    /// deploy action (with a claim); leaving `active` tears the instance down.
    pub fn may_become(self, to: ProvisionState) -> bool {
        use ProvisionState::{Active, Available, Cleaning, Deploying, Enroll, Error, Manageable};
        matches!(
            (self, to),
            (Enroll, Manageable)
                | (Manageable, Available | Cleaning)
                | (Available, Manageable | Cleaning)
                | (Cleaning, Available | Manageable | Error)
                | (Deploying, Error)
                | (Active, Cleaning | Error)
                | (Error, Manageable)
        )
    }
}

/// What makes a root provider a bare-metal node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The resource class as Ironic names it (for example `baremetal-gold`); the provider's
    /// class is [`placement_class`] of it.
    pub resource_class: String,
    /// Its provision state.
    pub provision_state: ProvisionState,
    /// The instance deployed on it.
    pub instance_uuid: Option<Uuid>,
    /// When it was enrolled.
    pub enrolled_at: Instant,
}

/// A claim on a node for an instance, until it is deployed or expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeClaim {
    /// Its uuid.
    pub uuid: Uuid,
    /// The node claimed.
    pub node_uuid: ProviderId,
    /// The instance it is claimed for (the Placement consumer holding the node).
    pub instance_uuid: Uuid,
    /// The claiming project.
    pub project_id: String,
    /// The claiming user.
    pub user_id: String,
    /// Creation time.
    pub created_at: Instant,
    /// Last change.
    pub updated_at: Instant,
    /// When it lapses (the node is released unless it was deployed); [`NodeClaim::NEVER`] for
    /// an allocation.
    pub expires_at: Instant,
    /// Present when the claim is an Ironic allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationRecord>,
}

impl NodeClaim {
    /// The expiry of a claim that never expires (an allocation).
    pub const NEVER: Instant = Instant::from_micros(i64::MAX);

    /// Whether the claim still holds at `now`.
    pub fn live_at(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    /// Whether the lifecycle engine expires it (an allocation never expires).
    pub fn expires(&self) -> bool {
        self.allocation.is_none()
    }
}

/// What makes a node claim an Ironic allocation: the fields Ironic's allocation API shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRecord {
    /// Its unique name, if it has one.
    pub name: Option<String>,
    /// The Ironic resource class asked for (the node's, for a backfilled allocation).
    pub resource_class: String,
    /// The nodes it could take (empty: any node of the class).
    pub candidate_nodes: Vec<ProviderId>,
    /// The traits the node had to have.
    pub traits: Vec<String>,
    /// Ironic's `extra`: the JSON text of an object, which berth keeps and never reads.
    pub extra: String,
    /// The project that owns it, as Ironic shows it (`None`: made by an admin for no project).
    pub owner: Option<String>,
}

/// The Placement class of an Ironic resource class, as Nova names it: upper case, every
/// character other than a letter or digit made `_`, prefixed with `CUSTOM_`.
pub fn placement_class(resource_class: &str) -> String {
    let normalized: String = resource_class
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect();
    format!("CUSTOM_{normalized}")
}

/// Why a listed node could not be claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unclaimable {
    /// The node as listed.
    pub node_uuid: ProviderId,
    /// Machine-readable reason: `not_found`, `not_a_node`, `provision_state`, `maintenance`,
    /// `associated`, `claimed`, `reserved`, `traits`, `resource_class`, `in_use`.
    pub reason: &'static str,
    /// For people.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_classes_normalize_as_nova_does() {
        assert_eq!(placement_class("baremetal-gold"), "CUSTOM_BAREMETAL_GOLD");
        assert_eq!(placement_class("Large.GPU v2"), "CUSTOM_LARGE_GPU_V2");
    }

    #[test]
    fn only_explicit_transitions_are_allowed() {
        use ProvisionState::*;
        assert!(Enroll.may_become(Manageable));
        assert!(Manageable.may_become(Available));
        assert!(Active.may_become(Cleaning));
        assert!(!Enroll.may_become(Available), "a node is managed first");
        assert!(!Available.may_become(Active), "deploying needs a claim");
        assert!(!Available.may_become(Deploying));
        assert!(!Active.may_become(Available), "a teardown cleans");
        for state in ProvisionState::ALL {
            assert!(
                !state.may_become(state),
                "{state:?} to itself is no transition"
            );
            assert_eq!(ProvisionState::parse(state.as_str()), Some(state));
        }
    }
}
