//! What the Placement handlers share on the wire: the provider a path names (a malformed or
//! unknown uuid is 404), JSON answers with Placement's caching headers from 1.15, and absolute
//! `Location` URLs under the surface's mount.

use crate::http::error::ApiError;
use crate::http::extract::unreadable;
use crate::http::rejection::CONCURRENT_UPDATE;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_app::AppError;
use berth_core::{Instant, Provider, ProviderId, Rejection};
use serde::Serialize;
use serde_json::Value;
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

/// A Placement request body as JSON, not yet checked against its route's schema (see
/// [`super::schema::Schemas::decode`]), read by the handler once the request's microversion is
/// known to serve the route (a route below its version is 404 whatever the body). As Placement:
/// a body without a `Content-Type` is 400, one of another type (or none at all) 415 `The media
/// type X is not supported, use application/json`, and one that is not JSON 400 `Malformed
/// JSON: ...`.
pub(super) async fn json_body(request: Request, state: &AppState) -> Result<Value, ApiError> {
    let headers = request.headers();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|text| text.split(';').next().unwrap_or("").trim().to_owned())
        .filter(|text| !text.is_empty());
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|text| text.trim().parse::<u64>().ok())
        .unwrap_or(0);
    match content_type {
        None if length > 0 => {
            return Err(ApiError::bad_request(
                "content-type header required when content-length > 0",
            ));
        }
        Some(media) if media.eq_ignore_ascii_case("application/json") => {}
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!(
                    "The media type {} is not supported, use application/json",
                    other.as_deref().unwrap_or("None")
                ),
            ));
        }
    }
    let bytes = Bytes::from_request(request, state)
        .await
        .map_err(unreadable)?;
    serde_json::from_slice(&bytes)
        .map_err(|error| ApiError::bad_request(format!("Malformed JSON: {error}")))
}

/// A stale generation on a provider's traits or aggregates, in Placement's words for them.
pub(super) fn generation_changed(error: AppError) -> ApiError {
    match error {
        AppError::Rejected(Rejection::GenerationConflict { .. }) => ApiError::conflict(
            CONCURRENT_UPDATE,
            "Resource provider's generation already changed. Please update the generation and try again.",
        ),
        other => other.into(),
    }
}

pub(crate) use crate::http::surface::Mount;
