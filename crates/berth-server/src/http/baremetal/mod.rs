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
        .answers::<VersionList>(200)
        .add(
            Method::GET,
            "/baremetal/v1",
            Rule::PUBLIC,
            "Bare-metal API version 1 (Ironic's /v1 root)",
            version_one,
        )
        .answers::<Version>(200)
        .add(
            Method::GET,
            "/baremetal/v1/",
            Rule::PUBLIC,
            "Bare-metal API version 1 (Ironic's /v1 root)",
            version_one,
        )
        .answers::<Version>(200);
    nodes::register(routes);
    claims::register(routes);
}

fn v1() -> Version {
    Version {
        id: "v1".to_owned(),
        status: "CURRENT".to_owned(),
        links: vec![Link::to_self("/baremetal/v1/")],
    }
}

async fn versions() -> Json<VersionList> {
    Json(VersionList {
        versions: vec![v1()],
    })
}

/// Ironic answers its `/v1` root as the version it is, so a catalog entry may name either.
async fn version_one() -> Json<Version> {
    Json(v1())
}
