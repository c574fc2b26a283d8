//! Forwarding writes to one replica (the middleware; the term and the client are
//! `http::writer`). Where several replicas share a PostgreSQL database, one of them holds the
//! writer's term and the others pass it their write requests as they came (method, path,
//! headers, body), so that one process's batches hold every write and the replicas do not take
//! the database's writer lock in turn. Reads stay where they arrive.
//!
//! Forwarding is a matter of speed, never of safety: the database serializes writers whoever
//! takes the writes, so a replica that decides a write itself (no term known, the writer
//! unreachable, or the writer no longer the one it thought) is only slower. It decides locally
//! only when the writer cannot have acted on the request: the connection was refused or not
//! made in time, the writer answered 421 without touching it, or the answer did not come from
//! the writer. A forwarded request whose answer is lost after it was sent is answered 503
//! `timeout_outcome_unknown`, as a timed-out commit is.
//!
//! A forwarded request carries the writer's secret ([`FORWARDED`]), the caller's address
//! ([`FORWARDED_FOR`], whose trust the writer judges as if the caller had come to it) and, for
//! Placement served at a listener's root, where it was mounted. The writer's answer names it
//! ([`WRITER`]). A request that carries a secret is never forwarded again; one whose secret is
//! not this replica's, or that reaches it when it no longer believes it holds the term, is
//! refused with 421 and [`NOT_WRITER`], which the forwarding replica reads as "decide it
//! yourself".

use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::http::surface::Mount;
use crate::http::writer::Forwarder;
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_store::WriterTerm;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The writer's secret on a forwarded request.
pub const FORWARDED: HeaderName = HeaderName::from_static("x-berth-forwarded");
/// The address of the caller of a forwarded request.
pub const FORWARDED_FOR: HeaderName = HeaderName::from_static("x-berth-forwarded-for");
/// Where a forwarded Placement request was mounted (`root`, when at a listener's root).
pub const FORWARDED_MOUNT: HeaderName = HeaderName::from_static("x-berth-forwarded-mount");
/// On a 421: this replica does not take writes under that secret; nothing was done.
pub const NOT_WRITER: HeaderName = HeaderName::from_static("x-berth-not-writer");
/// On the answer to a forwarded request: the id of the writer that decided it. An answer
/// without it did not come from a berth that took the request (the advertised address reached
/// something else), and the forwarding replica decides the request itself.
pub const WRITER: HeaderName = HeaderName::from_static("x-berth-writer");

/// Forwards a write to the replica that holds the writer's term, or lets it through; takes a
/// forwarded request in under its caller's address, or refuses it when it presents another
/// replica's secret.
pub async fn middleware(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let forwarded = request.headers().contains_key(FORWARDED);
    let Some(forwarder) = state.forwarder.as_deref() else {
        // A berth that takes no forwarded writes (one over SQLite) may listen where a replica
        // that held the term listened: what a replica forwarded there is refused, never decided
        // in another database.
        return match forwarded {
            true => not_writer(),
            false => next.run(request).await,
        };
    };
    if forwarded {
        return take_in(forwarder, request, next).await;
    }
    let Some(term) = forwarder.writer() else {
        return next.run(request).await;
    };
    let writes = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|route| {
            state
                .write_routes
                .contains(request.method(), route.as_str())
        });
    match writes {
        true => forward(forwarder, &term, request, next, &state).await,
        false => next.run(request).await,
    }
}

/// A request another replica forwarded: decided here under its caller's address when it
/// presents this replica's secret and this replica still holds the term, else refused untouched
/// (the forwarding replica then decides it).
async fn take_in(forwarder: &Forwarder, mut request: Request, next: Next) -> Response {
    let headers = request.headers_mut();
    let genuine = headers
        .remove(FORWARDED)
        .is_some_and(|secret| forwarder.is_own_secret(secret.as_bytes()))
        && forwarder.holds_term();
    let caller = headers
        .remove(FORWARDED_FOR)
        .and_then(|v| v.to_str().ok()?.parse::<IpAddr>().ok());
    let root = headers
        .remove(FORWARDED_MOUNT)
        .is_some_and(|v| v.as_bytes() == b"root");
    if !genuine {
        return not_writer();
    }
    forwarder.counts.received.fetch_add(1, Ordering::Relaxed);
    // The caller's address, or none: the forwarding replica's own is never believed.
    request.extensions_mut().remove::<ConnectInfo<SocketAddr>>();
    if let Some(ip) = caller {
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::new(ip, 0)));
    }
    if root {
        request.extensions_mut().insert(Mount::ROOT);
    }
    let mut answer = next.run(request).await;
    if let Ok(holder) = HeaderValue::from_str(&forwarder.holder) {
        answer.headers_mut().insert(WRITER, holder);
    }
    answer
}

/// The refusal of a forwarded request by a replica that does not take it: 421 `not_writer`,
/// with [`NOT_WRITER`] for the forwarding replica to read.
fn not_writer() -> Response {
    let mut refused = ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "not_writer",
        "This replica does not take forwarded writes: another holds the writer's term, or the \
         secret is not its own.",
    )
    .into_response();
    refused
        .headers_mut()
        .insert(NOT_WRITER, HeaderValue::from_static("1"));
    refused
}

/// Passes `request` to the writer and answers with its answer; decides it here when the writer
/// did not take it.
async fn forward(
    forwarder: &Forwarder,
    term: &Arc<WriterTerm>,
    request: Request,
    next: Next,
    state: &AppState,
) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, state.limits.body_limit_bytes).await else {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "The request body is too large.",
        )
        .into_response();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path}", term.url.trim_end_matches('/'));
    let mut headers = end_to_end(&parts.headers);
    headers.insert(
        FORWARDED,
        HeaderValue::from_str(&term.secret).unwrap_or(HeaderValue::from_static("-")),
    );
    if let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>()
        && let Ok(value) = HeaderValue::from_str(&peer.ip().to_string())
    {
        headers.insert(FORWARDED_FOR, value);
    }
    if parts.extensions.get::<Mount>() == Some(&Mount::ROOT) {
        headers.insert(FORWARDED_MOUNT, HeaderValue::from_static("root"));
    }
    let sent = forwarder
        .client
        .request(parts.method.clone(), url)
        .headers(headers)
        .body(bytes.clone())
        .send()
        .await;
    let answer = match sent {
        Ok(answer) if answer.headers().contains_key(NOT_WRITER) => None,
        Ok(answer) if !from_writer(&answer, term) => {
            tracing::warn!(
                writer = %term.url,
                status = %answer.status(),
                "the writer's address answered without being the writer; deciding writes here"
            );
            None
        }
        Ok(answer) => Some(answer),
        Err(error) if error.is_connect() => {
            tracing::debug!(%error, writer = %term.url, "the writer cannot be reached");
            None
        }
        Err(error) => return lost(forwarder, &error),
    };
    let Some(answer) = answer else {
        forwarder.forget(term);
        forwarder
            .counts
            .decided_here
            .fetch_add(1, Ordering::Relaxed);
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let status = answer.status();
    let mut headers = end_to_end(answer.headers());
    headers.remove(WRITER);
    match answer.bytes().await {
        Ok(body) => {
            forwarder.counts.forwarded.fetch_add(1, Ordering::Relaxed);
            let mut response = Response::new(Body::from(body));
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            response
        }
        Err(error) => lost(forwarder, &error),
    }
}

/// Whether `answer` came from the writer `term` names (not from whatever else listens at its
/// address).
fn from_writer(answer: &reqwest::Response, term: &WriterTerm) -> bool {
    answer
        .headers()
        .get(WRITER)
        .is_some_and(|holder| holder.as_bytes() == term.holder.as_bytes())
}

/// A forwarded write whose answer was lost after it was sent: the writer may have committed it.
fn lost(forwarder: &Forwarder, error: &reqwest::Error) -> Response {
    tracing::warn!(%error, "a forwarded write's answer was lost");
    forwarder.counts.unknown.fetch_add(1, Ordering::Relaxed);
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "timeout_outcome_unknown",
        "The replica that takes the writes did not answer, and the write may have been \
         committed. Retry with the same Idempotency-Key to learn its outcome.",
    )
    .into_response()
}

/// `headers` without those that belong to one connection (RFC 9110 section 7.6.1) and without
/// the length, which the new message sets. `Host` is kept: the writer builds the links of its
/// answer (`Location`, Placement's `links`) from the host the caller asked for.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut kept = headers.clone();
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::try_from(name.trim()).ok())
        .collect();
    for name in named {
        kept.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        HeaderName::from_static("keep-alive"),
    ] {
        kept.remove(name);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_end_to_end_headers_are_passed_on() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("host", "berth.example.net"),
            ("content-length", "12"),
            ("transfer-encoding", "chunked"),
            ("x-auth-token", "t"),
            ("openstack-api-version", "placement 1.39"),
            ("idempotency-key", "k"),
        ] {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let kept = end_to_end(&headers);
        let mut names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "host",
                "idempotency-key",
                "openstack-api-version",
                "x-auth-token"
            ]
        );
    }
}
