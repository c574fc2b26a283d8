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

use crate::http::context::{Microversion, PLACEMENT_MAX, PLACEMENT_MIN};
use crate::http::error::ApiError;
use crate::http::routes::Routes;
use crate::policy::Rule;
use axum::Json;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use berth_core::{Instant, Provider};
use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

/// Where the surface is mounted.
pub const MOUNT: &str = "/placement";

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

/// Parses a provider uuid from the path; a malformed one names no provider (404).
pub fn provider_uuid(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::not_found(format!("No resource provider with uuid {text} found")))
}

/// 404 for a provider that does not exist.
pub fn no_provider(uuid: Uuid) -> ApiError {
    ApiError::not_found(format!("No resource provider with uuid {uuid} found"))
}

/// Looks a provider up in a catalog, 404 when absent.
pub fn find(catalog: &berth_core::Catalog, uuid: Uuid) -> Result<&Provider, ApiError> {
    catalog.provider(uuid).ok_or_else(|| no_provider(uuid))
}

/// A JSON response carrying Placement's caching headers from 1.15.
pub fn respond<T: Serialize>(mv: Microversion, now: Instant, body: &T) -> Response {
    let mut response = Json(body).into_response();
    caching_headers(mv, now, response.headers_mut());
    response
}

/// Adds `last-modified` and `cache-control: no-cache` from 1.15.
pub fn caching_headers(mv: Microversion, now: Instant, headers: &mut HeaderMap) {
    if !mv.at_least(15) {
        return;
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(value) = http_date(now) {
        headers.insert(header::LAST_MODIFIED, value);
    }
}

fn http_date(at: Instant) -> Option<HeaderValue> {
    let timestamp = jiff::Timestamp::from_microsecond(at.as_micros()).ok()?;
    let text = timestamp.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
    HeaderValue::from_str(&text).ok()
}

/// The absolute URL of `path` on this server, as Placement (WebOb) sends in `Location`.
pub fn absolute_url(headers: &HeaderMap, path: &str) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("http");
    format!("{scheme}://{host}{path}")
}
