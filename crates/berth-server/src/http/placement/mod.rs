//! The OpenStack Placement API under `/placement`, microversions 1.0 to 1.39.

mod aggregates;
mod allocations;
mod candidates;
mod inventories;
mod providers;
pub mod query;
mod resource_classes;
mod traits;
mod usages;
mod wire;

use crate::http::routes::Routes;
use crate::http::surface::{PLACEMENT_MAX, PLACEMENT_MIN};
use crate::policy::Rule;
use axum::Json;
use axum::http::Method;
use serde_json::{Value, json};

/// Registers every Placement route.
pub fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement",
            Rule::PUBLIC,
            "Placement version document",
            version_document,
        )
        .add(
            Method::GET,
            "/placement/",
            Rule::PUBLIC,
            "Placement version document",
            version_document,
        );
    providers::register(routes);
    inventories::register(routes);
    allocations::register(routes);
    candidates::register(routes);
    usages::register(routes);
    aggregates::register(routes);
    traits::register(routes);
    resource_classes::register(routes);
}

async fn version_document() -> Json<Value> {
    Json(json!({
        "versions": [{
            "id": "v1.0",
            "max_version": PLACEMENT_MAX.to_string(),
            "min_version": PLACEMENT_MIN.to_string(),
            "status": "CURRENT",
            "links": [{"rel": "self", "href": ""}],
        }]
    }))
}
