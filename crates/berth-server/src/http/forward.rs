//! Forwarding writes to one replica. Where several replicas share a PostgreSQL database, one of
//! them holds the writer's term (`Store::writer_term`, renewed every [`RENEW`], lapsing after
//! [`TERM`]) and the others pass it their write requests as they came (method, path, headers,
//! body), so that one process's batches hold every write and the replicas do not take the
//! database's writer lock in turn. Reads stay where they arrive.
//!
//! Forwarding is a matter of speed, never of safety: the database serializes writers whoever
//! takes the writes, so a replica that decides a write itself (no term known, the writer
//! unreachable, or the writer no longer the one it thought) is only slower. It decides locally
//! only when the writer cannot have acted on the request: the connection was refused, or the
//! writer answered 421 without touching it. A forwarded request whose answer is lost after it
//! was sent is answered 503 `timeout_outcome_unknown`, as a timed-out commit is.
//!
//! A forwarded request carries the writer's secret ([`FORWARDED`]), the caller's address
//! ([`FORWARDED_FOR`], whose trust the writer judges as if the caller had come to it) and, for
//! Placement served at a listener's root, where it was mounted. A request that carries a secret
//! is never forwarded again; one whose secret is not this replica's, or that reaches it when it
//! no longer believes it holds the term (it could not renew it for [`BELIEVED`]), is refused
//! with 421 and [`NOT_WRITER`], which the forwarding replica reads as "decide it yourself".

use crate::http::error::ApiError;
use crate::http::state::AppState;
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_store::{Store, WriterBid, WriterTerm};
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a writer's term lasts unless renewed: a writer that stops (killed, paused, cut off
/// from the database) stops taking the writes this long after its last renewal at most.
pub const TERM: Duration = Duration::from_secs(3);
/// How often each replica renews its term or reads who holds it; a renewal that takes longer
/// counts as failed.
pub const RENEW: Duration = Duration::from_secs(1);
/// How long a replica believes what it last read of the term: less than [`TERM`], so that a
/// writer that can no longer renew (cut off from the database) stops taking writes before
/// another replica can take the term, and a replica that cannot read the term stops forwarding.
pub const BELIEVED: Duration = Duration::from_secs(2);
/// How long forwarding waits for a connection to the writer; past it the writer cannot have
/// seen the request, and the replica decides it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a forwarding connection may stay idle in the pool: below the writer's idle timeout,
/// so the writer never closes a connection just as a request is sent on it.
const POOL_IDLE: Duration = Duration::from_secs(20);

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

/// This replica's part in forwarding: its bid for the writer's term, who holds it, and the
/// client it forwards with.
#[derive(Debug)]
pub struct Forwarder {
    /// This process's id in the term.
    holder: String,
    /// What forwarded requests must present to this replica.
    secret: String,
    /// Where the other replicas reach this one; set once the listener is bound, never when it
    /// does not bid.
    url: OnceLock<String>,
    /// Whether this replica forwards its writes (it may still take the others').
    forwards: bool,
    /// The term as last read, and when it was read.
    term: RwLock<Option<(Arc<WriterTerm>, std::time::Instant)>>,
    client: reqwest::Client,
    counts: Counts,
}

/// What forwarding did since the replica started.
#[derive(Debug, Default)]
struct Counts {
    /// Writes forwarded and answered by the writer.
    forwarded: AtomicU64,
    /// Writes decided here because the writer could not be reached or was not the writer.
    decided_here: AtomicU64,
    /// Writes forwarded whose answer was lost.
    unknown: AtomicU64,
    /// Writes other replicas forwarded here.
    received: AtomicU64,
}

impl Forwarder {
    /// A replica that forwards its writes when `forwards`, with a new id and secret, waiting
    /// `timeout` at most for a forwarded request's answer.
    pub fn new(forwards: bool, timeout: Duration) -> anyhow::Result<Forwarder> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(POOL_IDLE)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let mut secret = [0u8; 32];
        aws_lc_rs::rand::fill(&mut secret)
            .map_err(|_| anyhow::anyhow!("the system's random source failed"))?;
        Ok(Forwarder {
            holder: crate::ids::request_uuid().to_string(),
            secret: secret.iter().map(|b| format!("{b:02x}")).collect(),
            url: OnceLock::new(),
            forwards,
            term: RwLock::new(None),
            client,
            counts: Counts::default(),
        })
    }

    /// Bids for the writer's term from now on, advertising `url`.
    pub fn advertise(&self, url: String) {
        let _ = self.url.set(url);
    }

    /// Renews or bids for the term, and reads who holds it, every [`RENEW`] until `stop` (the
    /// first time one period from now: the server did it once before serving).
    pub async fn run(self: Arc<Self>, store: Arc<dyn Store>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RENEW) => {}
            }
            self.renew(store.as_ref()).await;
        }
    }

    /// Renews or bids for the term once, and reads who holds it.
    pub async fn renew(&self, store: &dyn Store) {
        let bid = self.url.get().map(|url| WriterBid {
            holder: &self.holder,
            url,
            secret: &self.secret,
        });
        let read = tokio::time::timeout(RENEW, store.writer_term(bid, TERM)).await;
        let term = match read {
            Ok(Ok(term)) => term.map(|term| (Arc::new(term), std::time::Instant::now())),
            Ok(Err(error)) => {
                tracing::warn!(%error, "reading the writer's term failed; deciding writes here");
                None
            }
            Err(_) => {
                tracing::warn!("reading the writer's term took too long; deciding writes here");
                None
            }
        };
        *self.term.write().expect("invariant: never poisoned") = term;
    }

    /// Whether this replica holds the writer's term, as last read.
    pub fn holds_term(&self) -> bool {
        self.current()
            .is_some_and(|term| term.holder == self.holder)
    }

    /// The term, if it was read less than [`BELIEVED`] ago.
    fn current(&self) -> Option<Arc<WriterTerm>> {
        let held = self.term.read().expect("invariant: never poisoned");
        let (term, read_at) = held.as_ref()?;
        (read_at.elapsed() < BELIEVED).then(|| Arc::clone(term))
    }

    /// The writer to forward to: another replica, when this one forwards.
    fn writer(&self) -> Option<Arc<WriterTerm>> {
        let term = self.current()?;
        let elsewhere = self.forwards
            && term.holder != self.holder
            && self.url.get().is_none_or(|own| *own != term.url);
        elsewhere.then_some(term)
    }

    /// Forgets `term` until the next renewal reads it again: its writer did not take a request.
    fn forget(&self, term: &Arc<WriterTerm>) {
        let mut current = self.term.write().expect("invariant: never poisoned");
        if current
            .as_ref()
            .is_some_and(|(held, _)| Arc::ptr_eq(held, term))
        {
            *current = None;
        }
    }

    fn is_own_secret(&self, presented: &[u8]) -> bool {
        aws_lc_rs::constant_time::verify_slices_are_equal(presented, self.secret.as_bytes()).is_ok()
    }

    /// Forwarding's figures in Prometheus text format.
    pub fn metrics_lines(&self) -> String {
        let lines = [
            (
                "berth_writer_term_held",
                "gauge",
                "1 when this replica holds the writer's term and takes the others' writes.",
                u64::from(self.holds_term()),
            ),
            (
                "berth_writes_forwarded_total",
                "counter",
                "Writes this replica forwarded to the writer and the writer answered.",
                self.counts.forwarded.load(Ordering::Relaxed),
            ),
            (
                "berth_writes_forward_fallbacks_total",
                "counter",
                "Writes this replica decided itself because the writer could not take them.",
                self.counts.decided_here.load(Ordering::Relaxed),
            ),
            (
                "berth_writes_forward_unknown_total",
                "counter",
                "Writes forwarded whose answer was lost (answered 503 timeout_outcome_unknown).",
                self.counts.unknown.load(Ordering::Relaxed),
            ),
            (
                "berth_writes_received_total",
                "counter",
                "Writes other replicas forwarded to this one.",
                self.counts.received.load(Ordering::Relaxed),
            ),
        ];
        let mut text = String::new();
        for (name, kind, help, value) in lines {
            text.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            ));
        }
        text
    }
}

/// The routes whose requests are forwarded: every route that may change something.
pub type WriteRoutes = HashSet<(Method, &'static str)>;

/// Forwards a write to the replica that holds the writer's term, or lets it through; takes a
/// forwarded request in under its caller's address, or refuses it when it presents another
/// replica's secret.
pub async fn middleware(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(forwarder) = state.forwarder.clone() else {
        return next.run(request).await;
    };
    if request.headers().contains_key(FORWARDED) {
        return take_in(&forwarder, request, next).await;
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let writes = route.is_some_and(|route| {
        state
            .write_routes
            .iter()
            .any(|(method, path)| method == request.method() && *path == route)
    });
    match (writes, forwarder.writer()) {
        (true, Some(term)) => forward(&forwarder, &term, request, next, &state).await,
        _ => next.run(request).await,
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
        let mut refused = ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "not_writer",
            "This replica does not take forwarded writes: another holds the writer's term, or \
             the secret is not its own.",
        )
        .into_response();
        refused
            .headers_mut()
            .insert(NOT_WRITER, HeaderValue::from_static("1"));
        return refused;
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
        crate::http::placement::mount_at_root(request.extensions_mut());
    }
    let mut answer = next.run(request).await;
    if let Ok(holder) = HeaderValue::from_str(&forwarder.holder) {
        answer.headers_mut().insert(WRITER, holder);
    }
    answer
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
    if crate::http::placement::is_mounted_at_root(&parts.extensions) {
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
