//! The authorization middleware: resolves the caller once, checks the rule the matched route
//! declared (with the operator's overrides), and hands the identity to the handler. A caller
//! scoped to a domain or the system acts in no project, so only an admin among them passes a
//! project-scoped route, and none passes Placement's routes (their policies are for tokens
//! scoped to a project). A project's usages are checked against the project the request names.
//! In `keystone` mode a 401 names Keystone in `WWW-Authenticate`, as keystonemiddleware does,
//! and Keystone unable to answer is 503. In `noauth`
//! mode it also keeps browsers from being used against a local berth: requests must name a
//! loopback host (no DNS rebinding), come from the same origin when a browser says where they
//! come from, and carry their POST bodies as JSON (so a cross-site form or `fetch` without a CORS
//! preflight cannot write). `noauth2` believes a token that any page could name once it is
//! same-origin, so it keeps the loopback-host check (a browser cannot send its custom
//! `X-Auth-Token` across origins without a preflight).

use crate::auth::{AuthFailure, AuthMode, Identity};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::policy::Need;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;

/// 401 in the surface's format (503 when the identity service could not answer).
pub fn unauthorized(failure: AuthFailure) -> ApiError {
    let detail = match failure {
        AuthFailure::Missing => "The request you have made requires authentication.",
        AuthFailure::Invalid => "The token given is not valid.",
        AuthFailure::Untrusted => {
            "Identity headers are accepted only from a trusted proxy (--trusted-proxy)."
        }
        AuthFailure::Unavailable => {
            return ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "identity_unavailable",
                "The identity service could not validate the token; try again later.",
            );
        }
    };
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
}

/// The refusal of an unauthenticated request as a response: in `keystone` mode a 401 carries
/// `WWW-Authenticate: Keystone uri="..."`.
pub fn refusal(state: &AppState, failure: AuthFailure) -> Response {
    refuse(state, failure, false)
}

/// [`refusal`], with Promise's `result` and `message` when `rpc` (a Promise RPC's route).
fn refuse(state: &AppState, failure: AuthFailure, rpc: bool) -> Response {
    let mut response = in_envelope(unauthorized(failure), rpc).into_response();
    if response.status() == StatusCode::UNAUTHORIZED
        && let Some(keystone) = state.auth.keystone()
        && let Ok(value) = HeaderValue::from_str(&format!(
            "Keystone uri=\"{}\"",
            keystone.settings().www_authenticate_uri
        ))
    {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Checks the caller against the matched route's rule before the handler runs.
pub async fn middleware(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let rpc = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| crate::http::promise_rpc::is_rpc(path.as_str()));
    let guarded = match state.auth.mode() {
        AuthMode::Noauth => browser_guard(request.method(), request.headers()),
        AuthMode::Noauth2 => host_guard(request.headers()),
        _ => Ok(()),
    };
    if let Err(error) = guarded {
        return in_envelope(error, rpc).into_response();
    }
    let Some(path) = request.extensions().get::<MatchedPath>().cloned() else {
        return next.run(request).await;
    };
    // A method the path does not serve: routing answers 405 with `Allow`.
    let Some(rule) = state.authz.rule(request.method(), path.as_str()) else {
        return next.run(request).await;
    };
    if rule.need == Need::Public {
        return next.run(request).await;
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    if let Err(failure) = state.auth.trusts(peer) {
        return refuse(&state, failure, rpc);
    }
    let identity: Identity = match state.auth.identify(request.headers()).await {
        Ok(identity) => identity,
        Err(failure) => return refuse(&state, failure, rpc),
    };
    let named_project = match rule.reads_named_project() {
        true => named_project(request.uri().query()),
        false => None,
    };
    if !rule.admits(&identity, named_project.as_deref()) {
        return in_envelope(ApiError::forbidden(), rpc).into_response();
    }
    request.extensions_mut().insert(identity);
    next.run(request).await
}

/// `error` as the route answers its own: with Promise's `result` and `message` on a Promise RPC.
fn in_envelope(error: ApiError, rpc: bool) -> ApiError {
    match rpc {
        true => crate::http::promise_rpc::rpc_error(error),
        false => error,
    }
}

/// The project a request names: the last `project_id` of its query string, as Placement reads
/// it (a query that does not parse names none: only an admin or a service gets past, and the
/// handler refuses the query).
fn named_project(query: Option<&str>) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query?).ok()?;
    pairs
        .into_iter()
        .rev()
        .find(|(key, _)| key == "project_id")
        .map(|(_, value)| value)
}

/// Whether `host` (a `Host` header or an origin's authority, port included) names this machine
/// by a loopback literal or `localhost`.
fn loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn refused(detail: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", detail)
}

/// Refuses a request addressed to a name other than a loopback one (DNS rebinding).
fn host_guard(headers: &HeaderMap) -> Result<(), ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match loopback_authority(host) {
        true => Ok(()),
        false => Err(refused(
            "Without authentication berth answers only requests addressed to a loopback host.",
        )),
    }
}

/// The `noauth` checks that keep a browser from being turned against a local berth.
fn browser_guard(method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    host_guard(headers)?;
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST).unwrap_or("");
    if let Some(origin) = text(header::ORIGIN) {
        let same = origin
            .strip_prefix("http://")
            .is_some_and(|authority| authority.eq_ignore_ascii_case(host));
        if !same {
            return Err(refused(
                "Without authentication berth answers only requests from its own origin.",
            ));
        }
    }
    if *method == Method::POST {
        let json = text(header::CONTENT_TYPE)
            .and_then(|t| t.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Without authentication a POST must carry a JSON body (Content-Type: application/json).",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), value.parse().expect("header value"));
        }
        map
    }

    #[test]
    fn the_named_project_is_the_last_project_id_of_the_query() {
        assert_eq!(named_project(None), None);
        assert_eq!(named_project(Some("user_id=u")), None);
        assert_eq!(named_project(Some("project_id=p1")).as_deref(), Some("p1"));
        assert_eq!(
            named_project(Some("project_id=p1&user_id=u&project_id=p%202")).as_deref(),
            Some("p 2")
        );
    }

    #[test]
    fn loopback_authorities_are_recognised() {
        for ok in [
            "127.0.0.1:8778",
            "127.0.0.1",
            "localhost:1",
            "LOCALHOST",
            "[::1]:8778",
            "127.1.2.3:9",
        ] {
            assert!(loopback_authority(ok), "{ok}");
        }
        for bad in [
            "evil.example:8778",
            "localhost.evil.example",
            "10.0.0.1:8778",
            "[::2]:1",
            "",
        ] {
            assert!(!loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn the_browser_guard_refuses_rebinding_cross_origin_and_form_posts() {
        let json = (header::CONTENT_TYPE, "application/json");
        let local = (header::HOST, "127.0.0.1:8778");
        assert!(browser_guard(&Method::POST, &headers(&[local.clone(), json.clone()])).is_ok());
        assert!(browser_guard(&Method::GET, &headers(std::slice::from_ref(&local))).is_ok());
        assert!(browser_guard(&Method::DELETE, &headers(std::slice::from_ref(&local))).is_ok());
        assert_eq!(
            browser_guard(
                &Method::GET,
                &headers(&[(header::HOST, "rebind.evil.example:8778")])
            )
            .expect_err("rebinding")
            .status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            browser_guard(
                &Method::POST,
                &headers(&[
                    local.clone(),
                    json.clone(),
                    (header::ORIGIN, "http://evil.example")
                ])
            )
            .expect_err("cross origin")
            .status(),
            StatusCode::FORBIDDEN
        );
        assert!(
            browser_guard(
                &Method::POST,
                &headers(&[
                    local.clone(),
                    json,
                    (header::ORIGIN, "http://127.0.0.1:8778")
                ])
            )
            .is_ok()
        );
        for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
            assert_eq!(
                browser_guard(
                    &Method::POST,
                    &headers(&[local.clone(), (header::CONTENT_TYPE, content_type)])
                )
                .expect_err("form post")
                .status(),
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            );
        }
        assert!(browser_guard(&Method::POST, &headers(&[local])).is_err());
    }
}
