//! Extractors: JSON bodies with the error handling every surface shares, and the caller's
//! identity.

use crate::auth::Identity;
use crate::http::error::ApiError;
use crate::http::state::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

/// A JSON request body: `Content-Type: application/json` required (415), size limited (413),
/// malformed or unexpected content refused with 400 naming the problem.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<ApiJson<T>, ApiError> {
        let bytes = json_bytes(request, state).await?;
        decode(&bytes).map(ApiJson)
    }
}

/// A JSON Patch body (RFC 6902): as [`ApiJson`], and also under JSON Patch's registered media
/// type `application/json-patch+json`, which Ironic's clients send.
#[derive(Debug)]
pub struct PatchJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for PatchJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<PatchJson<T>, ApiError> {
        let bytes = body_bytes(request, state, &[JSON, JSON_PATCH]).await?;
        decode(&bytes).map(PatchJson)
    }
}

const JSON: &str = "application/json";
const JSON_PATCH: &str = "application/json-patch+json";

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|error| ApiError::bad_request(format!("JSON does not validate: {error}")))
}

/// Reads a JSON body's bytes after checking its content type and size.
pub async fn json_bytes(request: Request, state: &AppState) -> Result<Bytes, ApiError> {
    body_bytes(request, state, &[JSON]).await
}

/// Reads a body's bytes after checking that its content type is one of `media_types` (the
/// first is the one a refusal names) and its size.
async fn body_bytes(
    request: Request,
    state: &AppState,
    media_types: &[&str],
) -> Result<Bytes, ApiError> {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    if !media_types
        .iter()
        .any(|m| media_type.eq_ignore_ascii_case(m))
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "The media type {content_type:?} is not supported, use {}",
                media_types.join(" or ")
            ),
        ));
    }
    Bytes::from_request(request, state)
        .await
        .map_err(unreadable)
}

/// Why a body could not be read: 413 when it is larger than the server accepts, else 400.
pub fn unreadable(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "The request body is larger than the server accepts",
        ),
        _ => ApiError::bad_request(format!("Unable to read the request body: {rejection}")),
    }
}

/// The authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller(pub Identity);

impl Caller {
    /// The project whose objects the caller may see and change: its own, or `None` (every
    /// project) for an admin.
    pub fn project_scope(&self) -> Option<String> {
        (!self.0.is_admin()).then(|| self.0.project_id.clone())
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    /// The identity the authorization middleware resolved for this request (resolved here only
    /// on routes that need no role, where it may be absent).
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Caller, ApiError> {
        if let Some(identity) = parts.extensions.get::<Identity>() {
            return Ok(Caller(identity.clone()));
        }
        state
            .auth
            .identify(&parts.headers)
            .await
            .map(Caller)
            .map_err(crate::http::authorize::unauthorized)
    }
}
