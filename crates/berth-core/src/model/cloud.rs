//! Provider clouds: other OpenStack clouds registered with berth (Promise's `add-provider`),
//! each named by its Keystone endpoint, the project berth works in there and the services its
//! catalog offers. The credentials are kept sealed (encrypted by the server with a key from
//! berth's configuration): the core only carries the sealed text and never reads it.

use crate::model::time::Instant;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The kinds of cloud berth can register, as Promise's `provider-type` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloudKind {
    /// An OpenStack cloud: Keystone v3, Placement (and Compute when offered).
    Openstack,
}

impl CloudKind {
    /// The name Promise's `provider-type` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            CloudKind::Openstack => "openstack",
        }
    }
}

/// The project (Promise's `tenant`) berth works in on the cloud: by id, by name or both.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CloudProject {
    /// The project's id, when given (or learnt from the token).
    pub id: Option<String>,
    /// The project's name, when given (or learnt from the token).
    pub name: Option<String>,
}

/// A registered cloud.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderCloud {
    /// The provider id berth gave it (Promise's `provider-id`).
    pub id: Uuid,
    /// Its kind.
    pub kind: CloudKind,
    /// Keystone's v3 endpoint (`http://keystone:5000/v3`).
    pub auth_url: String,
    /// The user berth authenticates as.
    pub username: String,
    /// The project berth works in.
    pub project: CloudProject,
    /// The region whose endpoints berth uses (the catalog's, when the request named none).
    pub region: Option<String>,
    /// Placement's endpoint in that region.
    pub placement_url: String,
    /// Compute's endpoint in that region, when the catalog offers one.
    pub compute_url: Option<String>,
    /// The credentials, sealed by the server (never shown, never logged).
    pub sealed_credentials: String,
    /// When it was registered.
    pub created_at: Instant,
    /// Its synchronisation (absent from the record until the first one).
    #[serde(default, skip_serializing_if = "CloudSync::is_pending")]
    pub sync: CloudSync,
}

/// Whose capacity a question is about: berth's own (the providers it was not given by a provider
/// cloud, and its floating IPs) or one provider cloud's (the providers imported from it).
/// Ordered as answers list them: berth's own first, then the clouds by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// berth's own capacity.
    Local,
    /// The capacity of the provider cloud with this id.
    Cloud(Uuid),
}

impl Origin {
    /// The name of berth's own capacity where a provider id is expected (Promise's
    /// `provider-id`).
    pub const LOCAL_NAME: &'static str = "local";
}

impl std::fmt::Display for Origin {
    /// `local`, or the cloud's id: what answers give as the provider id.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Local => f.write_str(Origin::LOCAL_NAME),
            Origin::Cloud(id) => write!(f, "{id}"),
        }
    }
}

/// The attribute that marks a provider as imported from a provider cloud: the cloud's id.
pub const PROVIDER_CLOUD_ATTRIBUTE: &str = "provider_cloud";
/// The attribute naming an imported provider's uuid in its cloud's Placement.
pub const REMOTE_UUID_ATTRIBUTE: &str = "remote_uuid";
/// The attribute keeping the generation an imported provider had in its cloud's Placement when
/// berth last read its details: the next read compares the listed generation with it (the
/// provider's own generation is berth's, moved by every write here, such as an instance's
/// allocation).
pub const REMOTE_GENERATION_ATTRIBUTE: &str = "remote_generation";

/// The consumer type berth gives the allocations it writes into a provider cloud's Placement,
/// as Nova's scheduler does for an instance.
pub const REMOTE_CONSUMER_TYPE: &str = "INSTANCE";

/// The local uuid of the provider `remote` of cloud `cloud`: a UUIDv5 of the remote uuid in the
/// cloud's namespace, the same on every replica and after every restart, and never the uuid of
/// another cloud's provider.
pub fn local_provider_uuid(cloud: Uuid, remote: Uuid) -> Uuid {
    Uuid::new_v5(&cloud, remote.as_bytes())
}

/// Whether berth could last read the cloud's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncState {
    /// Registered, not synchronised yet.
    #[default]
    Pending,
    /// The last synchronisation succeeded.
    Ok,
    /// The last synchronisation failed: the cloud's capacity is unknown since then.
    Unknown,
}

impl SyncState {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncState::Pending => "pending",
            SyncState::Ok => "ok",
            SyncState::Unknown => "unknown",
        }
    }
}

/// What berth knows of a cloud's synchronisation, as written through the write path: it changes
/// when the state does, and with each synchronisation that changed the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CloudSync {
    /// The state.
    pub state: SyncState,
    /// Since when it has been in that state.
    pub since: Option<Instant>,
    /// The last synchronisation that succeeded and changed something (the server keeps the
    /// time of the last one of all).
    pub last_success: Option<Instant>,
    /// Why the last synchronisation failed, while the state is `Unknown`.
    pub last_error: Option<String>,
}

impl CloudSync {
    /// Whether nothing is known yet (the record of a cloud never synchronised).
    pub fn is_pending(&self) -> bool {
        *self == CloudSync::default()
    }
}

/// One resource provider as the remote cloud's Placement lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteProvider {
    /// Its uuid there.
    pub uuid: Uuid,
    /// Its name there.
    pub name: String,
    /// Its generation there.
    pub generation: u64,
    /// Its parent there.
    pub parent: Option<Uuid>,
    /// What it has, read when its generation differs from what berth imported (else `None`).
    pub details: Option<RemoteDetails>,
}

/// A remote provider's inventories, usages, traits and aggregates.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemoteDetails {
    /// Its inventories, as Placement gives them.
    pub inventories: std::collections::BTreeMap<crate::model::name::ResourceClass, RemoteInventory>,
    /// What each of its consumers uses there, by consumer and class (Placement's
    /// `GET /resource_providers/{uuid}/allocations`). The consumers berth wrote itself (its
    /// instances on the provider, by their ids) are among them.
    pub allocations: std::collections::BTreeMap<
        Uuid,
        std::collections::BTreeMap<crate::model::name::ResourceClass, u64>,
    >,
    /// Its traits.
    pub traits: std::collections::BTreeSet<crate::model::name::TraitName>,
    /// Its aggregates.
    pub aggregates: std::collections::BTreeSet<Uuid>,
}

/// One inventory record as Placement gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RemoteInventory {
    /// `total`.
    pub total: u64,
    /// `reserved`.
    pub reserved: u64,
    /// `min_unit`, `max_unit`, `step_size`.
    pub units: [u64; 3],
    /// `allocation_ratio`.
    pub allocation_ratio: f64,
}

/// An allocation berth placed on a provider cloud's capacity, as that cloud's Placement must be
/// told of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteClaim {
    /// The cloud.
    pub cloud: ProviderCloud,
    /// The provider's uuid in the cloud's Placement.
    pub remote: Uuid,
    /// What the consumer holds there, by resource class name.
    pub amounts: std::collections::BTreeMap<String, u64>,
}

/// What one synchronisation read of a cloud: every provider its Placement lists, with the
/// details of those whose generation changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemoteSnapshot {
    /// The providers, in any order.
    pub providers: Vec<RemoteProvider>,
}
