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
}
