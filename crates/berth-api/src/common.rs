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
