//! Wire types more than one surface uses.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A link in a resource representation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Link {
    /// Relation, for example `self` or `inventories`.
    pub rel: String,
    /// Path of the linked resource.
    pub href: String,
}

impl Link {
    /// The `self` link of the resource at `href`.
    pub fn to_self(href: impl Into<String>) -> Link {
        Link {
            rel: "self".to_owned(),
            href: href.into(),
        }
    }
}

/// One version of an API in its version list, as Blazar shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "ApiVersion")]
pub struct Version {
    /// `v1` or `v1.0`.
    pub id: String,
    /// `CURRENT`.
    pub status: String,
    /// Where the version's root is.
    pub links: Vec<Link>,
}

/// An API's version list (`GET /reservation`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(rename = "ApiVersionList")]
pub struct VersionList {
    /// The versions served.
    pub versions: Vec<Version>,
}
