//! The bare-metal API under `/baremetal/v1` (the Ironic node-reservation spec): `nodes` (enrol,
//! list with filters, show, JSON-Patch changes along explicit provision-state transitions,
//! delete, deploy with a claim) and `reservations` (node claims: the first eligible node of a
//! list, or any node of a class; list, show, release).

mod claims;
mod nodes;

use crate::http::error::ApiError;
use crate::http::routes::Routes;
use crate::policy::Rule;
use axum::Json;
use axum::http::Method;
use berth_api::baremetal::{Version, VersionList};
use berth_api::common::Link;
use berth_core::Instant;
use serde_json::Value;
use uuid::Uuid;

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

/// A time as the bare-metal API shows it: RFC 3339, UTC, microseconds.
fn time(at: Instant) -> String {
    jiff::Timestamp::from_microsecond(at.as_micros())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string())
        .unwrap_or_default()
}

/// A uuid field of a request, or 400 naming it.
fn uuid_field(field: &str, value: &Value) -> Result<Uuid, ApiError> {
    value
        .as_str()
        .and_then(|text| Uuid::parse_str(text).ok())
        .ok_or_else(|| ApiError::bad_request(format!("{field} must be a UUID, got {value}")))
}
