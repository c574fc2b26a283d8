//! berth's own documents: the root (which surfaces it serves, where) and health.

use crate::common::Link;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One API surface berth serves.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Surface {
    /// `placement`, `reservation`, `promise` or `baremetal`.
    pub id: String,
    /// Where it is mounted.
    pub path: String,
    /// The API it is compatible with.
    pub compatible_with: String,
    /// Its lowest microversion, where it has microversions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_version: Option<String>,
    /// Its highest microversion, where it has microversions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_version: Option<String>,
}

/// `GET /`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Root {
    /// `berth`.
    pub name: String,
    /// The server's version.
    pub version: String,
    /// The surfaces served.
    pub surfaces: Vec<Surface>,
    /// Health, metrics, the OpenAPI document and the dashboard.
    pub links: Vec<Link>,
}

/// `GET /healthz`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Health {
    /// The process answers.
    pub live: bool,
    /// The database answers.
    pub ready: bool,
    /// `sqlite` or `postgres`.
    pub database: String,
}
