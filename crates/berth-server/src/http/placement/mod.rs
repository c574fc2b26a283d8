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
use berth_api::placement::{Link, Version, VersionList};

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
        .answers::<VersionList>(200)
        .add(
            Method::GET,
            "/placement/",
            Rule::PUBLIC,
            "Placement version document",
            version_document,
        )
        .answers::<VersionList>(200);
    providers::register(routes);
    inventories::register(routes);
    allocations::register(routes);
    candidates::register(routes);
    usages::register(routes);
    aggregates::register(routes);
    traits::register(routes);
    resource_classes::register(routes);
}

async fn version_document() -> Json<VersionList> {
    Json(VersionList {
        versions: vec![Version {
            id: "v1.0".to_owned(),
            max_version: PLACEMENT_MAX.to_string(),
            min_version: PLACEMENT_MIN.to_string(),
            status: "CURRENT".to_owned(),
            links: vec![Link::to_self("")],
        }],
    })
}
