//! Per-request context: the request id, the surface that serves the path, and (for Placement)
//! the negotiated microversion. One middleware sets it as a task-local for the whole request,
//! echoes the version headers, records metrics, and renders bare 404/405 responses in the
//! surface's error format.

use crate::http::AppState;
use crate::http::error::ApiError;
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;

/// Which API surface serves a request; decides the error format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// `/placement`.
    Placement,
    /// `/reservation`.
    Blazar,
    /// Everything else.
    Berth,
}

/// Lowest Placement microversion.
pub const PLACEMENT_MIN: Microversion = Microversion(0);
/// Highest Placement microversion.
pub const PLACEMENT_MAX: Microversion = Microversion(39);

/// A Placement microversion `1.N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Microversion(u16);

impl Microversion {
    /// Whether this is `1.minor` or later.
    pub fn at_least(self, minor: u16) -> bool {
        self.0 >= minor
    }

    /// The minor number.
    pub fn minor(self) -> u16 {
        self.0
    }

    /// 404 unless this is `1.minor` or later (routes below their version do not exist).
    pub fn require(self, minor: u16) -> Result<(), ApiError> {
        match self.at_least(minor) {
            true => Ok(()),
            false => Err(ApiError::not_found("The resource could not be found.")),
        }
    }
}

impl std::fmt::Display for Microversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Microversion {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Microversion, Infallible> {
        Ok(parts
            .extensions
            .get::<Microversion>()
            .copied()
            .unwrap_or(PLACEMENT_MIN))
    }
}

/// The context of the current request.
#[derive(Debug, Clone)]
pub struct RequestCtx {
    /// `req-<uuid>`.
    pub request_id: String,
    /// The serving surface.
    pub surface: Surface,
    /// The negotiated Placement microversion.
    pub microversion: Option<Microversion>,
}

tokio::task_local! {
    static CTX: RequestCtx;
}

/// The current request's context (a neutral one outside a request).
pub fn current() -> RequestCtx {
    CTX.try_with(Clone::clone).unwrap_or(RequestCtx {
        request_id: String::new(),
        surface: Surface::Berth,
        microversion: None,
    })
}

fn surface_of(path: &str) -> Surface {
    if path == "/placement" || path.starts_with("/placement/") {
        Surface::Placement
    } else if path.starts_with("/reservation/") || path == "/reservation" {
        Surface::Blazar
    } else {
        Surface::Berth
    }
}

/// Parses `OpenStack-API-Version` for the `placement` service.
fn negotiate(header_value: Option<&str>) -> Result<Microversion, ApiError> {
    let Some(text) = header_value else {
        return Ok(PLACEMENT_MIN);
    };
    let wanted = text.split(',').map(str::trim).find_map(|entry| {
        let (service, version) = entry.split_once(char::is_whitespace)?;
        service
            .eq_ignore_ascii_case("placement")
            .then(|| version.trim())
    });
    let Some(version) = wanted else {
        return Ok(PLACEMENT_MIN);
    };
    if version.eq_ignore_ascii_case("latest") {
        return Ok(PLACEMENT_MAX);
    }
    let malformed = || ApiError::bad_request(format!("invalid version string: {version}"));
    let (major, minor) = version.split_once('.').ok_or_else(malformed)?;
    let major: u16 = major.parse().map_err(|_| malformed())?;
    let minor: u16 = minor.parse().map_err(|_| malformed())?;
    if major != 1 || minor > PLACEMENT_MAX.0 {
        return Err(ApiError::unsupported_version(
            format!("Unacceptable version header: {version}"),
            &PLACEMENT_MIN.to_string(),
            &PLACEMENT_MAX.to_string(),
        ));
    }
    Ok(Microversion(minor))
}

/// The outermost berth middleware (inside tracing): context, versions, metrics, error shapes.
pub async fn middleware(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = std::time::Instant::now();
    let request_id = format!("req-{}", crate::ids::request_uuid());
    let surface = surface_of(request.uri().path());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = request.method().clone();
    let mut ctx = RequestCtx {
        request_id: request_id.clone(),
        surface,
        microversion: None,
    };
    let negotiated = match surface {
        Surface::Placement => {
            let value = request
                .headers()
                .get("openstack-api-version")
                .and_then(|v| v.to_str().ok());
            Some(negotiate(value))
        }
        _ => None,
    };
    let mut response = match negotiated {
        Some(Err(error)) => {
            CTX.scope(ctx.clone(), async { error.into_response() })
                .await
        }
        Some(Ok(mv)) => {
            ctx.microversion = Some(mv);
            request.extensions_mut().insert(mv);
            CTX.scope(ctx.clone(), async { shape(next.run(request).await) })
                .await
        }
        None => {
            CTX.scope(ctx.clone(), async { shape(next.run(request).await) })
                .await
        }
    };
    let headers = response.headers_mut();
    headers.insert(
        "x-openstack-request-id",
        HeaderValue::from_str(&request_id).expect("invariant: ascii id"),
    );
    if surface == Surface::Placement {
        let version = ctx.microversion.unwrap_or(PLACEMENT_MIN);
        let value = HeaderValue::from_str(&format!("placement {version}"))
            .expect("invariant: ascii version");
        headers.insert("openstack-api-version", value);
        headers.insert(
            header::VARY,
            HeaderValue::from_static("openstack-api-version"),
        );
    }
    state
        .metrics
        .observe(&method, &route, response.status(), started.elapsed());
    response
}

/// Gives bare 404 and 405 responses (from routing) the surface's error body, keeping `Allow`.
fn shape(response: Response) -> Response {
    let status = response.status();
    let bare = response.headers().get(header::CONTENT_TYPE).is_none();
    match (status, bare) {
        (StatusCode::METHOD_NOT_ALLOWED, true) => {
            let allow = response.headers().get(header::ALLOW).cloned();
            let mut shaped = ApiError::new(
                status,
                crate::http::error::UNDEFINED,
                "The method specified is not allowed for this resource.",
            )
            .into_response();
            if let Some(allow) = allow {
                shaped.headers_mut().insert(header::ALLOW, allow);
            }
            shaped
        }
        (StatusCode::NOT_FOUND, true) => {
            ApiError::not_found("The resource could not be found.").into_response()
        }
        _ => response,
    }
}

/// Microversions for unit tests elsewhere in the crate.
#[cfg(test)]
pub mod tests_support {
    /// Negotiates a header value that must be valid.
    pub fn negotiate(value: &str) -> super::Microversion {
        super::negotiate(Some(value)).expect("valid test microversion")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_placement() {
        assert_eq!(negotiate(None).expect("none"), PLACEMENT_MIN);
        assert_eq!(
            negotiate(Some("placement 1.39")).expect("max"),
            PLACEMENT_MAX
        );
        assert_eq!(
            negotiate(Some("placement latest")).expect("latest"),
            PLACEMENT_MAX
        );
        assert_eq!(
            negotiate(Some("compute 2.1")).expect("other service"),
            PLACEMENT_MIN
        );
        assert_eq!(
            negotiate(Some("compute 2.1, placement 1.17"))
                .expect("list")
                .minor(),
            17
        );
        assert_eq!(
            negotiate(Some("placement abc")).expect_err("bad").status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            negotiate(Some("placement 1")).expect_err("bad").status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            negotiate(Some("placement 2.0")).expect_err("406").status(),
            StatusCode::NOT_ACCEPTABLE
        );
        assert_eq!(
            negotiate(Some("placement 1.99")).expect_err("406").status(),
            StatusCode::NOT_ACCEPTABLE
        );
    }
}
