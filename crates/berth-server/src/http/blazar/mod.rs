//! The OpenStack Blazar reservation API under `/reservation`, version 1.0.

mod allocations;
mod floating_ips;
pub(crate) mod hosts;
pub(crate) mod lease_wire;
mod leases;

use crate::http::routes::Routes;
use crate::policy::Rule;
use axum::Json;
use axum::http::Method;
use serde_json::{Value, json};

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
        .add(
            Method::GET,
            "/reservation/",
            Rule::PUBLIC,
            "Reservation API versions",
            versions,
        );
    allocations::register(routes);
    hosts::register(routes);
    leases::register(routes);
    floating_ips::register(routes);
}

async fn versions() -> Json<Value> {
    Json(json!({"versions": [{
        "id": "v1.0",
        "status": "CURRENT",
        "links": [{"href": "/reservation/v1/", "rel": "self"}],
    }]}))
}
