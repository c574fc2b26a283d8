//! What the Placement handlers share on the wire: the provider a path names (a malformed or
//! unknown uuid is 404), JSON answers with Placement's caching headers from 1.15, and absolute
//! `Location` URLs under the surface's mount.

use crate::http::error::ApiError;
use crate::http::surface::Microversion;
use axum::Json;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use berth_core::{Instant, Provider, ProviderId};
use serde::Serialize;
use uuid::Uuid;

/// Parses a provider uuid from the path; a malformed one names no provider (404).
pub(super) fn provider_uuid(text: &str) -> Result<ProviderId, ApiError> {
    Uuid::parse_str(text)
        .map(ProviderId::new)
        .map_err(|_| ApiError::not_found(format!("No resource provider with uuid {text} found")))
}

/// 404 for a provider that does not exist.
pub(super) fn no_provider(uuid: ProviderId) -> ApiError {
    ApiError::not_found(format!("No resource provider with uuid {uuid} found"))
}

/// Looks a provider up in a catalog, 404 when absent.
pub(super) fn find(catalog: &berth_core::Catalog, uuid: ProviderId) -> Result<&Provider, ApiError> {
    catalog.provider(uuid).ok_or_else(|| no_provider(uuid))
}

/// A JSON response carrying Placement's caching headers from 1.15.
pub(super) fn respond<T: Serialize>(mv: Microversion, now: Instant, body: &T) -> Response {
    let mut response = Json(body).into_response();
    caching_headers(mv, now, response.headers_mut());
    response
}

/// Adds `last-modified` and `cache-control: no-cache` from 1.15.
pub(super) fn caching_headers(mv: Microversion, now: Instant, headers: &mut HeaderMap) {
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
pub(super) fn absolute_url(headers: &HeaderMap, path: &str) -> String {
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
