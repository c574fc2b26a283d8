//! The bare-metal API under `/baremetal/v1` (the Ironic node-reservation spec): `nodes` (enrol,
//! list with filters, show, JSON-Patch changes along explicit provision-state transitions,
//! delete, deploy with a claim) and `reservations` (node claims: the first eligible node of a
//! list, or any node of a class; list, show, release).

mod claims;
mod nodes;
mod wire;

use crate::http::routes::Routes;
use crate::policy::Rule;
use axum::Json;
use axum::http::Method;
use berth_api::baremetal::{Version, VersionList};
use berth_api::common::Link;

/// Registers every bare-metal route.
pub fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/baremetal",
            Rule::PUBLIC,
            "Bare-metal API versions",
            versions,
        )
        .answers::<VersionList>(200)
        .add(
            Method::GET,
            "/baremetal/",
            Rule::PUBLIC,
            "Bare-metal API versions",
            versions,
        )
        .answers::<VersionList>(200);
    nodes::register(routes);
    claims::register(routes);
}

async fn versions() -> Json<VersionList> {
    Json(VersionList {
        versions: vec![Version {
            id: "v1".to_owned(),
            status: "CURRENT".to_owned(),
            links: vec![Link::to_self("/baremetal/v1/")],
        }],
    })
}
