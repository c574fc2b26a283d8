//! Provider clouds: Promise's `add-provider` RPC and the `providers` of the `promise`
//! container (`/promise/providers`). The credentials a request carries are never answered.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Promise's `tenant`: the project berth works in on the cloud, by id or name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Tenant {
    /// The project's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The project's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The request of `POST /promise/add-provider`, as Promise's `rpc add-provider` has it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct AddProvider {
    /// `openstack` (the only type berth registers).
    #[serde(
        rename = "provider-type",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_type: Option<String>,
    /// Keystone's endpoint: its v3 root (`http://keystone:5000/v3`), or the v2.0 token URL
    /// Promise's examples give (`http://keystone:5000/v2.0/tokens`), which berth maps to v3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The user berth authenticates as (in the default domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Its password (kept sealed, never answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// The region whose endpoints berth uses (the catalog's first, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The project (`id` or `name`, in the default domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<Tenant>,
}

/// What `add-provider` adds to the `{"result", "message"}` envelope.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderAdded {
    /// The new provider's id.
    #[serde(rename = "provider-id")]
    pub provider_id: Uuid,
    /// How berth read the request, when it changed something (a v2.0 endpoint taken as v3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One service of a provider cloud that berth uses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderService {
    /// The catalog's service type (`placement`, `compute`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its endpoint in the provider's region.
    pub url: String,
}

/// A registered provider cloud (never its credentials).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Provider {
    /// Its id (Promise's `provider-id`).
    pub id: Uuid,
    /// `openstack`.
    #[serde(rename = "provider-type")]
    pub provider_type: String,
    /// Keystone's v3 endpoint.
    pub endpoint: String,
    /// The user berth authenticates as.
    pub username: String,
    /// The project berth works in.
    pub tenant: Tenant,
    /// The region whose endpoints berth uses.
    pub region: Option<String>,
    /// The services berth found in the cloud's catalog.
    pub services: Vec<ProviderService>,
    /// When it was registered (RFC 3339, UTC).
    pub created: String,
    /// How berth keeps its capacity current.
    #[serde(default)]
    pub sync: ProviderSync,
}

/// A provider cloud's synchronisation: berth reads its Placement every interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderSync {
    /// `pending` (not read yet), `ok` (the last read succeeded) or `unknown` (the last read
    /// failed: its capacity is unknown since the last successful one, and new reservations on
    /// it are refused).
    pub state: String,
    /// Since when it has been in that state (RFC 3339, UTC).
    pub since: Option<String>,
    /// The last successful synchronisation (RFC 3339, UTC).
    #[serde(rename = "last-sync")]
    pub last_sync: Option<String>,
    /// Why the last synchronisation failed, while `unknown`.
    #[serde(rename = "last-error")]
    pub last_error: Option<String>,
    /// How many of its resource providers berth has imported.
    pub providers: usize,
}

/// `GET /promise/providers/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderEnvelope {
    /// The provider.
    pub provider: Provider,
}

/// `GET /promise/providers`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProviderList {
    /// Every registered provider cloud.
    pub providers: Vec<Provider>,
}
