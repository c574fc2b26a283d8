//! The writer's term as this replica sees it: its bid for the term (`Store::writer_term`,
//! renewed every [`RENEW`], lapsing after [`TERM`]), who holds it, the client writes are
//! forwarded with, and what forwarding did (for `/metrics`). The middleware that forwards is
//! `http::forward`.

use crate::http::link::{Follow, Link, Refused};
use crate::keystone::Secret;
use axum::http::Method;
use berth_app::Berth;
use berth_store::{Store, WriterBid, WriterTerm};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
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

/// This replica's part in forwarding: its bid for the writer's term, who holds it, and the
/// client it forwards with.
#[derive(Debug)]
pub struct Forwarder {
    /// This process's id in the term.
    pub(crate) holder: String,
    /// What forwarded requests must present to this replica (never shown by `Debug`).
    secret: Secret,
    /// Where the other replicas reach this one; set once the listener is bound, never when it
    /// does not bid.
    url: OnceLock<String>,
    /// Whether this replica forwards its writes (it may still take the others').
    forwards: bool,
    /// The term as last read, and when it was read.
    term: RwLock<Option<(Arc<WriterTerm>, std::time::Instant)>>,
    /// The client writes are forwarded with over HTTP, to a writer that takes no link.
    pub(crate) client: reqwest::Client,
    /// The link to the writer, or that its writer takes none.
    link: Mutex<LinkState>,
    /// Held while a link is being opened, so that one is opened at a time.
    opening: tokio::sync::Mutex<()>,
    /// How long a forwarded request waits for its answer.
    answer_within: Duration,
    pub(crate) counts: Counts,
}

/// The link to the writer as this replica last knew it.
#[derive(Debug, Default)]
enum LinkState {
    /// None is open.
    #[default]
    Closed,
    /// The link to the writer `holder`.
    Open { holder: String, link: Arc<Link> },
    /// The writer `holder` takes no link: writes go to it over HTTP.
    Http { holder: String },
}

/// How a write reaches the writer.
#[derive(Debug)]
pub(crate) enum Route {
    /// Over the link to it.
    Link(Arc<Link>),
    /// As an HTTP exchange of its own.
    Http,
    /// It cannot be reached: this replica decides the write.
    DecideHere,
}

/// What forwarding did since the replica started.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Writes forwarded and answered by the writer.
    pub(crate) forwarded: AtomicU64,
    /// Writes decided here because the writer could not be reached or was not the writer.
    pub(crate) decided_here: AtomicU64,
    /// Writes forwarded whose answer was lost.
    pub(crate) unknown: AtomicU64,
    /// Writes other replicas forwarded here.
    pub(crate) received: AtomicU64,
    /// Links opened to the writer.
    pub(crate) links_opened: AtomicU64,
    /// Writes forwarded over HTTP (to a writer that takes no link) and answered.
    pub(crate) over_http: AtomicU64,
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
            secret: Secret::new(
                secret
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
            ),
            url: OnceLock::new(),
            forwards,
            term: RwLock::new(None),
            client,
            link: Mutex::new(LinkState::Closed),
            opening: tokio::sync::Mutex::new(()),
            answer_within: timeout,
            counts: Counts::default(),
        })
    }

    /// Bids for the writer's term from now on, advertising `url`.
    pub fn advertise(&self, url: String) {
        let _ = self.url.set(url);
    }

    /// Renews or bids for the term, and reads who holds it, every [`RENEW`] until `stop` (the
    /// first time one period from now: the server did it once before serving).
    pub async fn run(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        berth: Arc<Berth>,
        stop: CancellationToken,
    ) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RENEW) => {}
            }
            self.renew(store.as_ref(), &berth).await;
            // A link to the writer even before a write is forwarded, for its commits to come over
            // as they are made; opened aside, so that a slow writer never delays the renewals.
            if let Some(term) = self.writer()
                && self.known_route(&term).is_none()
            {
                let (forwarder, berth) = (Arc::clone(&self), Arc::clone(&berth));
                tokio::spawn(async move { forwarder.route(&term, &berth).await });
            }
        }
    }

    /// Renews or bids for the term once, reads who holds it, and tells `berth`'s engines
    /// whether they stand by (another replica holds it).
    pub async fn renew(&self, store: &dyn Store, berth: &Berth) {
        let bid = self.url.get().map(|url| WriterBid {
            holder: &self.holder,
            url,
            secret: self.secret.expose(),
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
        berth.set_standby(self.another_holds_term());
    }

    /// Whether this replica holds the writer's term, as last read.
    pub fn holds_term(&self) -> bool {
        self.current()
            .is_some_and(|term| term.holder == self.holder)
    }

    /// Whether another replica holds the writer's term, as last read (then this one's engines
    /// stand by).
    fn another_holds_term(&self) -> bool {
        self.current()
            .is_some_and(|term| term.holder != self.holder)
    }

    /// The term, if it was read less than [`BELIEVED`] ago.
    fn current(&self) -> Option<Arc<WriterTerm>> {
        let held = self.term.read().expect("invariant: never poisoned");
        let (term, read_at) = held.as_ref()?;
        (read_at.elapsed() < BELIEVED).then(|| Arc::clone(term))
    }

    /// The writer to forward to: another replica, when this one forwards.
    pub(crate) fn writer(&self) -> Option<Arc<WriterTerm>> {
        let term = self.current()?;
        let elsewhere = self.forwards
            && term.holder != self.holder
            && self.url.get().is_none_or(|own| *own != term.url);
        elsewhere.then_some(term)
    }

    /// Forgets `term` until the next renewal reads it again: its writer did not take a request.
    pub(crate) fn forget(&self, term: &Arc<WriterTerm>) {
        let mut current = self.term.write().expect("invariant: never poisoned");
        if current
            .as_ref()
            .is_some_and(|(held, _)| Arc::ptr_eq(held, term))
        {
            *current = None;
        }
    }

    /// How a write reaches the writer `term` names: over the link to it (opened if none is,
    /// asking for the writer's commits, which `berth` applies), over HTTP when it takes no
    /// link, or not at all when it cannot be reached.
    pub(crate) async fn route(&self, term: &WriterTerm, berth: &Arc<Berth>) -> Route {
        if let Some(route) = self.known_route(term) {
            return route;
        }
        let _opening = self.opening.lock().await;
        if let Some(route) = self.known_route(term) {
            return route;
        }
        let follow: Follow = Arc::clone(berth) as Follow;
        match Link::open(term, CONNECT_TIMEOUT, self.answer_within, Some(follow)).await {
            Ok(link) => {
                self.counts.links_opened.fetch_add(1, Ordering::Relaxed);
                let link = Arc::new(link);
                *self.link_state() = LinkState::Open {
                    holder: term.holder.clone(),
                    link: Arc::clone(&link),
                };
                Route::Link(link)
            }
            Err(Refused::NoLink) => {
                *self.link_state() = LinkState::Http {
                    holder: term.holder.clone(),
                };
                Route::Http
            }
            Err(Refused::Unreachable) => Route::DecideHere,
        }
    }

    /// The route to `term`'s writer already known: its link while open, or HTTP.
    fn known_route(&self, term: &WriterTerm) -> Option<Route> {
        match &*self.link_state() {
            LinkState::Open { holder, link } if *holder == term.holder && !link.has_ended() => {
                Some(Route::Link(Arc::clone(link)))
            }
            LinkState::Http { holder } if *holder == term.holder => Some(Route::Http),
            _ => None,
        }
    }

    /// Closes the link to the writer `holder`, if it is open: that writer no longer takes writes.
    pub(crate) fn drop_link(&self, holder: &str) {
        let mut state = self.link_state();
        if matches!(&*state, LinkState::Open { holder: linked, .. } if linked == holder) {
            *state = LinkState::Closed;
        }
    }

    fn link_state(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_own_secret(&self, presented: &[u8]) -> bool {
        aws_lc_rs::constant_time::verify_slices_are_equal(
            presented,
            self.secret.expose().as_bytes(),
        )
        .is_ok()
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
                "berth_writes_forwarded_over_http_total",
                "counter",
                "Writes forwarded as HTTP exchanges of their own (the writer took no link) and \
                 answered.",
                self.counts.over_http.load(Ordering::Relaxed),
            ),
            (
                "berth_forward_links_opened_total",
                "counter",
                "Links this replica opened to the writer to forward its writes over.",
                self.counts.links_opened.load(Ordering::Relaxed),
            ),
            (
                "berth_writes_received_total",
                "counter",
                "Writes other replicas forwarded to this one.",
                self.counts.received.load(Ordering::Relaxed),
            ),
        ];
        crate::metrics::plain_lines(&lines)
    }
}

/// The routes whose requests are forwarded: every route that may change something, by route
/// template, with the methods that may.
#[derive(Debug, Default)]
pub struct WriteRoutes(HashMap<&'static str, Vec<Method>>);

impl WriteRoutes {
    /// Whether `method` on the route template `path` may change something.
    pub fn contains(&self, method: &Method, path: &str) -> bool {
        self.0
            .get(path)
            .is_some_and(|methods| methods.contains(method))
    }
}

impl FromIterator<(Method, &'static str)> for WriteRoutes {
    fn from_iter<I: IntoIterator<Item = (Method, &'static str)>>(routes: I) -> WriteRoutes {
        let mut by_path: HashMap<&'static str, Vec<Method>> = HashMap::new();
        for (method, path) in routes {
            by_path.entry(path).or_default().push(method);
        }
        WriteRoutes(by_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_secret_is_shown_by_debug() {
        let forwarder = Forwarder::new(true, Duration::from_secs(1)).expect("forwarder");
        let secret = forwarder.secret.expose().to_owned();
        let term = WriterTerm {
            holder: "h".to_owned(),
            url: "http://127.0.0.1:1".to_owned(),
            secret: secret.clone(),
        };
        *forwarder.term.write().expect("lock") = Some((Arc::new(term), std::time::Instant::now()));
        let shown = format!("{forwarder:?}");
        assert!(shown.contains("http://127.0.0.1:1"), "{shown}");
        assert!(!shown.contains(&secret), "{shown}");
    }

    #[test]
    fn a_write_route_is_found_by_its_template_and_method() {
        let routes: WriteRoutes = [
            (Method::POST, "/reservation/v1/leases"),
            (Method::PUT, "/reservation/v1/leases/{lease_id}"),
            (Method::DELETE, "/reservation/v1/leases/{lease_id}"),
        ]
        .into_iter()
        .collect();
        assert!(routes.contains(&Method::POST, "/reservation/v1/leases"));
        assert!(routes.contains(&Method::DELETE, "/reservation/v1/leases/{lease_id}"));
        assert!(!routes.contains(&Method::GET, "/reservation/v1/leases/{lease_id}"));
        assert!(!routes.contains(&Method::POST, "/reservation/v1/availability"));
    }
}
