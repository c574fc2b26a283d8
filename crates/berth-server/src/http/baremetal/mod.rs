//! The bare-metal API under `/baremetal/v1` (the Ironic node-reservation spec), in Ironic's
//! dialect (its error body and microversion headers, see `http::surface`): `nodes` (enrol,
//! list with filters, show, JSON-Patch changes along explicit provision-state transitions,
//! maintenance, delete, deploy with a claim), `reservations` (node claims: the first eligible
//! node of a list, or any node of a class; list, show, release) and `allocations` (Ironic's
//! allocation API over the same claims).

mod allocations;
mod claims;
mod nodes;
mod wire;

use crate::http::routes::Routes;
use crate::http::surface::{IRONIC_MAX, IRONIC_MIN};
use crate::policy::Rule;
use axum::Json;
use axum::http::Method;
use berth_api::baremetal::{Version, VersionList, VersionRoot};
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
        .answers::<VersionRoot>(200)
        .add(
            Method::GET,
            "/baremetal/v1/",
            Rule::PUBLIC,
            "Bare-metal API version 1 (Ironic's /v1 root)",
            version_one,
        )
        .answers::<VersionRoot>(200);
    nodes::register(routes);
    claims::register(routes);
    allocations::register(routes);
}

/// Version 1 with its microversion range, as Ironic's roots show it (ironicclient and
/// keystoneauth negotiate from it).
fn v1() -> Version {
    Version {
        id: "v1".to_owned(),
        status: "CURRENT".to_owned(),
        min_version: IRONIC_MIN.to_string(),
        version: IRONIC_MAX.to_string(),
        links: vec![Link::to_self("/baremetal/v1/")],
    }
}

async fn versions() -> Json<VersionList> {
    Json(VersionList {
        name: "OpenStack Ironic API".to_owned(),
        description: "berth's bare-metal API, in Ironic's dialect".to_owned(),
        versions: vec![v1()],
        default_version: v1(),
    })
}

/// Ironic answers its `/v1` root as the version it is, so a catalog entry may name either.
async fn version_one() -> Json<VersionRoot> {
    let link = |path: &str| vec![Link::to_self(format!("/baremetal/v1/{path}"))];
    Json(VersionRoot {
        id: "v1".to_owned(),
        status: "CURRENT".to_owned(),
        version: v1(),
        links: link(""),
        nodes: link("nodes/"),
        allocations: link("allocations/"),
    })
}
