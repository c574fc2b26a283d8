//! The context middleware, outermost of berth's: gives each request its context
//! (`http::surface`: request id, surface, negotiated Placement or bare-metal microversion),
//! echoes the version headers, records metrics, and renders bare 404/405 responses in the
//! surface's error format.

use crate::http::error::{ApiError, UNDEFINED};
use crate::http::state::AppState;
use crate::http::surface::{
    self, IRONIC_MAX, IRONIC_MIN, PLACEMENT_MIN, RequestCtx, Surface, VersionError, acceptance,
    negotiate, negotiate_ironic, surface_of,
};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

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
    // How much the caller wants JSON and HTML: only Placement (WebOb) answers by `Accept`.
    let (json, html) = match surface {
        Surface::Placement => {
            let accept = request
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            (
                acceptance(accept, "application/json"),
                acceptance(accept, "text/html"),
            )
        }
        _ => (1.0, 0.0),
    };
    let mut ctx = RequestCtx {
        request_id: request_id.clone(),
        surface,
        microversion: None,
        html_errors: html > json,
    };
    let negotiated = negotiated(surface, request.headers());
    let mut response = match negotiated {
        Some(Err(error)) => {
            surface::scope(ctx.clone(), async {
                version_error(surface, error).into_response()
            })
            .await
        }
        Some(Ok(mv)) if surface == Surface::Ironic => {
            ctx.microversion = Some(mv);
            request.extensions_mut().insert(mv);
            surface::scope(ctx.clone(), async {
                shape(next.run(request).await, &method)
            })
            .await
        }
        Some(Ok(mv)) => {
            ctx.microversion = Some(mv);
            request.extensions_mut().insert(mv);
            // As Placement's GET handlers: an `Accept` that excludes JSON is refused, once the
            // route is known to exist.
            let refuses_json =
                json <= 0.0 && matches!(method, Method::GET | Method::HEAD) && route != "unmatched";
            surface::scope(ctx.clone(), async {
                match refuses_json {
                    true => ApiError::new(
                        StatusCode::NOT_ACCEPTABLE,
                        UNDEFINED,
                        "Only application/json is provided",
                    )
                    .into_response(),
                    false => {
                        placement_allow(shape(next.run(request).await, &method), &state, &route)
                    }
                }
            })
            .await
        }
        None => {
            surface::scope(ctx.clone(), async {
                shape(next.run(request).await, &method)
            })
            .await
        }
    };
    let headers = response.headers_mut();
    // A write forwarded to the writer is answered under the writer's id, the one its error
    // bodies and its log name; only an answer made here takes this replica's.
    headers
        .entry("x-openstack-request-id")
        .or_insert_with(|| HeaderValue::from_str(&request_id).expect("invariant: ascii id"));
    version_headers(headers, &ctx);
    state
        .metrics
        .observe(&method, &route, response.status(), started.elapsed());
    response
}

/// The microversion a request asks of its surface, for the surfaces that have them.
fn negotiated(
    surface: Surface,
    headers: &HeaderMap,
) -> Option<Result<surface::Microversion, VersionError>> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match surface {
        Surface::Placement => Some(negotiate(header("openstack-api-version"))),
        Surface::Ironic => Some(negotiate_ironic(
            header("x-openstack-ironic-api-version"),
            header("openstack-api-version"),
        )),
        _ => None,
    }
}

/// The version headers of a surface's answers: Placement's `OpenStack-API-Version`, or
/// Ironic's range and negotiated version.
fn version_headers(headers: &mut HeaderMap, ctx: &RequestCtx) {
    let surface = ctx.surface;
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
    if surface == Surface::Ironic {
        let version = |v: surface::Microversion| {
            HeaderValue::from_str(&v.to_string()).expect("invariant: ascii version")
        };
        headers.insert(
            "x-openstack-ironic-api-minimum-version",
            version(IRONIC_MIN),
        );
        headers.insert(
            "x-openstack-ironic-api-maximum-version",
            version(IRONIC_MAX),
        );
        // As Ironic: a request whose version was refused has no negotiated version.
        if let Some(negotiated) = ctx.microversion {
            headers.insert("x-openstack-ironic-api-version", version(negotiated));
        }
    }
}

/// A refused version in the surface's words: Placement's, or Ironic's (whose range the
/// response's headers also carry).
fn version_error(surface: Surface, error: VersionError) -> ApiError {
    match (surface, error) {
        (Surface::Ironic, VersionError::Unsupported(version)) => ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            UNDEFINED,
            format!(
                "Version {version} was requested but the minor version is not supported by this service. The supported version range is: [{IRONIC_MIN}, {IRONIC_MAX}]."
            ),
        ),
        (Surface::Ironic, VersionError::Malformed(version)) => ApiError::bad_request(format!(
            "Invalid value for X-OpenStack-Ironic-API-Version header: {version:?}"
        )),
        (_, error) => ApiError::from(error),
    }
}

/// Placement's `Allow` on a 405: the methods the route serves, without the `HEAD` every `GET`
/// implies, separated as WebOb separates them (routing, which would add its own, keeps one
/// that is set).
fn placement_allow(mut response: Response, state: &AppState, route: &str) -> Response {
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let allowed = state.authz.methods(route);
    if allowed.is_empty() {
        return response;
    }
    let methods: Vec<&str> = allowed.iter().map(Method::as_str).collect();
    if let Ok(value) = HeaderValue::from_str(&methods.join(", ")) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

/// Gives bare 404 and 405 responses (from routing) the surface's error body, keeping `Allow`.
fn shape(response: Response, method: &Method) -> Response {
    let status = response.status();
    let bare = response.headers().get(header::CONTENT_TYPE).is_none();
    match (status, bare) {
        (StatusCode::METHOD_NOT_ALLOWED, true) => {
            let allow = response.headers().get(header::ALLOW).cloned();
            let mut shaped = ApiError::new(
                status,
                UNDEFINED,
                format!("The method {method} is not allowed for this resource."),
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
