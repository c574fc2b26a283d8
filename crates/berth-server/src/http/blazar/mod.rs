//! The OpenStack Blazar reservation API under `/reservation`, version 1.0.

mod allocations;
mod budgets;
mod floating_ips;
pub(crate) mod hosts;
pub(crate) mod lease_wire;
mod leases;
mod series;
mod shares;
mod usage;

use crate::http::routes::Routes;
use crate::policy::Rule;
use axum::Json;
use axum::http::Method;
use berth_api::blazar::{Version, VersionList};
use berth_api::common::Link;

/// Registers every reservation route.
pub fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/reservation",
            Rule::PUBLIC,
            "Reservation API versions",
            versions,
        )
        .answers::<VersionList>(200)
        .add(
            Method::GET,
            "/reservation/",
            Rule::PUBLIC,
            "Reservation API versions",
            versions,
        )
        .answers::<VersionList>(200);
    allocations::register(routes);
    hosts::register(routes);
    leases::register(routes);
    series::register(routes);
    usage::register(routes);
    budgets::register(routes);
    shares::register(routes);
    floating_ips::register(routes);
}

async fn versions() -> Json<VersionList> {
    Json(VersionList {
        versions: vec![Version {
            id: "v1.0".to_owned(),
            status: "CURRENT".to_owned(),
            links: vec![Link::to_self("/reservation/v1/")],
        }],
    })
}
