//! The HTTP error type. One error value renders in the format of the surface that served the
//! request: Placement's `{"errors": [...]}`, Blazar's `{"error_code", ...}`, Ironic's
//! `{"error_message": "<JSON-encoded fault>"}`, or RFC 9457 problem details for berth's own
//! endpoints. How the service's errors become `ApiError`s is
//! `http::rejection`'s.

use crate::http::surface::{self, PLACEMENT_MAX, PLACEMENT_MIN, Surface, VersionError};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use berth_api::errors::{
    BlazarError, IronicError, IronicFault, PlacementError, PlacementErrors, Problem,
};
use serde_json::{Map, Value};

/// An error response.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    detail: String,
    versions: Option<(String, String)>,
    /// Machine-readable members added to Blazar and berth error bodies.
    extra: Option<Box<serde_json::Map<String, serde_json::Value>>>,
}

/// Placement's generic error code.
pub const UNDEFINED: &str = "placement.undefined_code";

impl ApiError {
    /// An error with a status, a stable code and a human-readable detail.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            detail: detail.into(),
            versions: None,
            extra: None,
        }
    }

    /// 400 with the generic code.
    pub fn bad_request(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, UNDEFINED, detail)
    }

    /// 404 with the generic code.
    pub fn not_found(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, UNDEFINED, detail)
    }

    /// 409 with a code.
    pub fn conflict(code: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, code, detail)
    }

    /// 403: the caller lacks the role.
    pub fn forbidden() -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Policy does not allow this request to be performed.",
        )
    }

    /// 406 for an unsupported microversion, carrying the supported range.
    pub fn unsupported_version(detail: impl Into<String>, min: &str, max: &str) -> ApiError {
        ApiError {
            versions: Some((min.to_owned(), max.to_owned())),
            ..ApiError::new(StatusCode::NOT_ACCEPTABLE, UNDEFINED, detail)
        }
    }

    /// Renders outside any request context (for panics caught by the outermost layer).
    pub fn into_response_static(self) -> Response {
        self.into_response()
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Replaces the code (for Placement's per-endpoint quirks).
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = code;
        self
    }

    /// Adds machine-readable members (the fields of a wire type, or an object's keys) to Blazar
    /// and berth error bodies.
    pub fn with_extra(mut self, extra: impl serde::Serialize) -> ApiError {
        if let Value::Object(map) = members(extra) {
            self.extra = Some(Box::new(map));
        }
        self
    }

    /// The human-readable detail.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// Adds machine-readable members, keeping those already set (they win).
    pub fn merge_extra(mut self, extra: impl serde::Serialize) -> ApiError {
        if let Value::Object(mut map) = members(extra) {
            if let Some(existing) = self.extra.take() {
                map.extend(*existing);
            }
            self.extra = Some(Box::new(map));
        }
        self
    }

    /// Replaces the status (for Placement's per-endpoint quirks).
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }
}

impl From<VersionError> for ApiError {
    fn from(error: VersionError) -> ApiError {
        let detail = error.to_string();
        match error {
            VersionError::Unsupported(_) => ApiError::unsupported_version(
                detail,
                &PLACEMENT_MIN.to_string(),
                &PLACEMENT_MAX.to_string(),
            ),
            VersionError::Malformed(_) | VersionError::Absent => {
                ApiError::new(error.status(), UNDEFINED, detail)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let ctx = surface::current();
        let title = self.status.canonical_reason().unwrap_or("Error");
        let mut response = match ctx.surface {
            Surface::Placement if ctx.html_errors => html_page(self.status, title, &self.detail),
            Surface::Placement => {
                let (min_version, max_version) = self.versions.unzip();
                let error = PlacementError {
                    status: self.status.as_u16(),
                    title: title.to_owned(),
                    detail: self.detail,
                    request_id: ctx.request_id,
                    code: ctx
                        .microversion
                        .is_none_or(|mv| mv.at_least(23))
                        .then(|| self.code.to_owned()),
                    min_version,
                    max_version,
                };
                let body = PlacementErrors {
                    errors: vec![error],
                };
                (self.status, Json(body)).into_response()
            }
            Surface::Blazar => {
                let body = BlazarError {
                    error_code: self.status.as_u16(),
                    error_message: self.detail,
                    error_name: self.status.as_u16(),
                };
                (self.status, Json(with_members(&body, self.extra))).into_response()
            }
            Surface::Ironic => {
                let fault = IronicFault {
                    faultstring: self.detail,
                    faultcode: match self.status.is_server_error() {
                        true => "Server",
                        false => "Client",
                    }
                    .to_owned(),
                    debuginfo: None,
                };
                let body = IronicError {
                    error_message: serde_json::to_string(&fault)
                        .expect("invariant: wire types serialize"),
                };
                (self.status, Json(with_members(&body, self.extra))).into_response()
            }
            Surface::Berth => {
                let code = berth_code(self.status, self.code);
                let body = Problem {
                    kind: format!("https://berth.dev/errors/{code}"),
                    title: title.to_owned(),
                    status: self.status.as_u16(),
                    detail: self.detail,
                    code,
                    request_id: ctx.request_id,
                };
                let mut response =
                    (self.status, Json(with_members(&body, self.extra))).into_response();
                response.headers_mut().insert(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("application/problem+json"),
                );
                response
            }
        };
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

/// The code an error carries on berth's own surfaces, a code of berth's table
/// ([`berth_api::errors::ERROR_CODES`]): Placement's codes are Placement's, so a `placement.`
/// code is its row's (`placement.concurrent_update` is `concurrent_update`) and Placement's
/// generic one becomes the status's own (`bad_request`, `not_found`, ...). A code missing from
/// the table is a bug, caught in debug builds.
fn berth_code(status: StatusCode, code: &str) -> String {
    let berth = table_code(status, code);
    debug_assert!(
        berth_api::errors::error_code(&berth).is_some(),
        "error code {berth} ({status}) is not in berth_api::errors::ERROR_CODES"
    );
    berth
}

fn table_code(status: StatusCode, code: &str) -> String {
    if let Some(row) = berth_api::errors::ERROR_CODES
        .iter()
        .find(|row| row.placement == code && code != UNDEFINED)
    {
        return row.code.to_owned();
    }
    match code {
        UNDEFINED => status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase()
            .replace([' ', '-'], "_"),
        other => match other.strip_prefix("placement.") {
            Some(rest) => rest.replace('.', "_"),
            None => other.to_owned(),
        },
    }
}

/// An error as the page WebOb renders for a caller that prefers HTML.
fn html_page(status: StatusCode, title: &str, detail: &str) -> Response {
    let escape = |text: &str| {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let heading = format!("{} {}", status.as_u16(), escape(title));
    let body = format!(
        "<html>\n <head>\n  <title>{heading}</title>\n </head>\n <body>\n  <h1>{heading}</h1>\n  {}<br /><br />\n\n\n\n </body>\n</html>",
        escape(detail)
    );
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("text/html; charset=UTF-8"),
        )],
        body,
    )
        .into_response()
}

/// An envelope with the error's machine-readable members merged in (they win over the
/// envelope's own members of the same name, as a Promise RPC's `status` does).
fn with_members(envelope: &impl serde::Serialize, extra: Option<Box<Map<String, Value>>>) -> Value {
    let mut body = members(envelope);
    if let (Value::Object(out), Some(extra)) = (&mut body, extra) {
        out.extend(*extra);
    }
    body
}

/// A wire type as JSON, to merge into an error body.
pub(crate) fn members(wire: impl serde::Serialize) -> Value {
    serde_json::to_value(wire).expect("invariant: wire types serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn berth_surfaces_never_show_placement_codes() {
        assert_eq!(
            berth_code(StatusCode::BAD_REQUEST, UNDEFINED),
            "bad_request"
        );
        assert_eq!(berth_code(StatusCode::NOT_FOUND, UNDEFINED), "not_found");
        assert_eq!(
            berth_code(StatusCode::PAYLOAD_TOO_LARGE, UNDEFINED),
            "payload_too_large"
        );
        assert_eq!(
            berth_code(StatusCode::CONFLICT, "placement.concurrent_update"),
            "concurrent_update"
        );
        assert_eq!(
            berth_code(StatusCode::CONFLICT, "placement.resource_provider.inuse"),
            "resource_provider_inuse"
        );
        assert_eq!(
            berth_code(StatusCode::CONFLICT, "not_enough_resources"),
            "not_enough_resources"
        );
    }

    /// Every code of the table renders as itself, and every Placement code of it as its row's.
    #[test]
    fn every_code_of_the_table_renders_as_itself() {
        for row in berth_api::errors::ERROR_CODES {
            let status = StatusCode::from_u16(row.status).expect("a status");
            assert_eq!(berth_code(status, row.code), row.code);
            assert_eq!(berth_code(status, row.placement), row.code, "{row:?}");
        }
    }

    /// On `/baremetal` an error is Ironic's: `error_message`, a JSON-encoded fault whose
    /// `faultcode` is `Client` for a 4xx and `Server` for a 5xx, as `application/json`.
    #[tokio::test]
    async fn bare_metal_errors_are_ironics_faults() {
        let ctx = surface::RequestCtx {
            request_id: "req-1".to_owned(),
            surface: Surface::Ironic,
            microversion: None,
            html_errors: false,
        };
        for (status, faultcode) in [
            (StatusCode::NOT_FOUND, "Client"),
            (StatusCode::CONFLICT, "Client"),
            (StatusCode::INTERNAL_SERVER_ERROR, "Server"),
            (StatusCode::SERVICE_UNAVAILABLE, "Server"),
        ] {
            let response = surface::scope(ctx.clone(), async {
                ApiError::new(status, UNDEFINED, "what went wrong").into_response()
            })
            .await;
            assert_eq!(response.status(), status);
            assert_eq!(response.headers()["content-type"], "application/json");
            let bytes = axum::body::to_bytes(response.into_body(), 4096)
                .await
                .expect("body");
            let body: Value = serde_json::from_slice(&bytes).expect("JSON");
            let text = body["error_message"].as_str().expect("a string");
            let fault: Value = serde_json::from_str(text).expect("JSON-encoded");
            assert_eq!(
                fault,
                serde_json::json!({"faultstring": "what went wrong", "faultcode": faultcode,
                                   "debuginfo": null}),
                "{status}"
            );
            assert_eq!(body.as_object().map(Map::len), Some(1), "{body}");
        }
    }

    #[test]
    fn a_version_error_keeps_its_status_and_detail() {
        for error in [
            VersionError::Malformed("abc".to_owned()),
            VersionError::Unsupported("2.0".to_owned()),
            VersionError::Absent,
        ] {
            let api = ApiError::from(error.clone());
            assert_eq!(api.status(), error.status(), "{error}");
            assert_eq!(api.detail(), error.to_string());
        }
        let unsupported = ApiError::from(VersionError::Unsupported("1.99".to_owned()));
        assert_eq!(
            unsupported.versions,
            Some(("1.0".to_owned(), "1.39".to_owned()))
        );
    }
}
