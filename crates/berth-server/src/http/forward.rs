//! Forwarding writes to one replica (the middleware; the term and the client are
//! `http::writer`). Where several replicas share a PostgreSQL database, one of them holds the
//! writer's term and the others pass it their write requests as they came (method, path,
//! headers, body), so that one process's batches hold every write and the replicas do not take
//! the database's writer lock in turn. Reads stay where they arrive. The requests travel over
//! one long-lived link to the writer, many at once (`http::link`), or, where the writer takes
//! no link (over TLS, or behind a proxy that passes no upgrade), each as an HTTP exchange.
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
use crate::http::forwarded::{
    FORWARDED, FORWARDED_FOR, FORWARDED_MOUNT, NOT_WRITER, WRITER, lost_answer, not_writer,
};
use crate::http::link::{self, Answer, Sent};
use crate::http::state::AppState;
use crate::http::surface::Mount;
use crate::http::writer::{Forwarder, Route};
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_app::Berth;
use berth_store::WriterTerm;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

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
        return take_in(forwarder, &state.berth, request, next).await;
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
async fn take_in(
    forwarder: &Forwarder,
    berth: &Berth,
    mut request: Request,
    next: Next,
) -> Response {
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
    if let Some(accepted) = link::accept(&mut request, &forwarder.holder, berth) {
        return accepted;
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

/// Passes `request` to the writer (over the link to it, else over HTTP) and answers with its
/// answer; decides it here when the writer did not take it.
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
    let route = forwarder.route(term, &state.berth).await;
    let over_http = matches!(route, Route::Http);
    let outcome = match route {
        Route::Link(link) => {
            let sent = link.send(&parts.method, path, &headers, &bytes).await;
            match sent {
                Sent::Answered(answer) => Outcome::Answered(answer),
                Sent::Unwritten => Outcome::DecideHere,
                Sent::Lost => Outcome::Lost("the link to the writer ended".to_owned()),
            }
        }
        Route::Http => send_over_http(forwarder, term, &parts.method, path, headers, &bytes).await,
        Route::DecideHere => Outcome::DecideHere,
    };
    let answer = match outcome {
        Outcome::Answered(answer) if answer.headers.contains_key(NOT_WRITER) => {
            // The writer no longer takes writes (it stopped, or lost the term): its link goes.
            forwarder.drop_link(&term.holder);
            None
        }
        Outcome::Answered(answer) if !from_writer(&answer.headers, term) => {
            tracing::warn!(
                writer = %term.url,
                status = %answer.status,
                "the writer's address answered without being the writer; deciding writes here"
            );
            None
        }
        Outcome::Answered(answer) => Some(answer),
        Outcome::DecideHere => None,
        Outcome::Lost(error) => return lost(forwarder, &error),
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
    forwarder.counts.forwarded.fetch_add(1, Ordering::Relaxed);
    if over_http {
        forwarder.counts.over_http.fetch_add(1, Ordering::Relaxed);
    }
    let mut headers = end_to_end(&answer.headers);
    headers.remove(WRITER);
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = answer.status;
    *response.headers_mut() = headers;
    response
}

/// What became of a forwarded request.
enum Outcome {
    /// The writer's address answered.
    Answered(Answer),
    /// The writer cannot have acted on the request: this replica decides it.
    DecideHere,
    /// The request was sent and its answer lost: the writer may have acted on it.
    Lost(String),
}

/// Forwards a request as an HTTP exchange of its own (to a writer that takes no link).
async fn send_over_http(
    forwarder: &Forwarder,
    term: &WriterTerm,
    method: &axum::http::Method,
    path: &str,
    headers: HeaderMap,
    body: &axum::body::Bytes,
) -> Outcome {
    let url = format!("{}{path}", term.url.trim_end_matches('/'));
    let sent = forwarder
        .client
        .request(method.clone(), url)
        .headers(headers)
        .body(body.clone())
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(error) if error.is_connect() => {
            tracing::debug!(%error, writer = %term.url, "the writer cannot be reached");
            return Outcome::DecideHere;
        }
        Err(error) => return Outcome::Lost(error.to_string()),
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    match answer.bytes().await {
        Ok(body) => Outcome::Answered(Answer {
            status,
            headers,
            body,
        }),
        Err(error) => Outcome::Lost(error.to_string()),
    }
}

/// Whether an answer with `headers` came from the writer `term` names (not from whatever else
/// listens at its address).
fn from_writer(headers: &HeaderMap, term: &WriterTerm) -> bool {
    headers
        .get(WRITER)
        .is_some_and(|holder| holder.as_bytes() == term.holder.as_bytes())
}

/// A forwarded write whose answer was lost after it was sent: the writer may have committed it.
fn lost(forwarder: &Forwarder, error: &str) -> Response {
    tracing::warn!(%error, "a forwarded write's answer was lost");
    forwarder.counts.unknown.fetch_add(1, Ordering::Relaxed);
    lost_answer().into_response()
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
