//! The serve loop: accepts TCP connections up to a limit, serves HTTP/1.1 on each with hyper,
//! closes connections that are idle or slow to send a request's headers, and shuts down
//! gracefully.
//!
//! Timeouts follow Go's `net/http` server: a connection with no request in flight is closed after
//! the idle timeout since it last read or wrote a byte (a new connection starts idle); once the
//! first byte of a request arrives, its headers must be complete within the header timeout. A
//! request in flight is never cut by these two (the request timeout bounds it). Beyond the
//! connection limit, new connections are not accepted: they wait in the kernel's listen backlog
//! until a connection closes.
//!
//! With TLS (`--tls-cert`), each connection's handshake runs in its own task within the header
//! timeout, over the same watched stream, so the timeouts count the bytes on the wire.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// Limits on connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// How long a connection with no request in flight stays open without a byte either way.
    pub idle_timeout: Duration,
    /// How long a request's headers may take from their first byte.
    pub header_timeout: Duration,
}

/// What a connection that is taken over (a replica's link, `http::link`) is served with: the
/// router its requests go through, the server's stop, and the tasks the server waits for.
#[derive(Debug, Clone)]
pub(crate) struct Upgrades {
    pub(crate) app: Router,
    pub(crate) stop: CancellationToken,
    pub(crate) tasks: TaskTracker,
}

/// Serves `app` on `listener` (over TLS with `tls`) until `stop` is cancelled, then stops
/// accepting, lets in-flight requests finish (idle connections close at once) and returns when
/// every connection closed. A connection taken over is served with `links` (the whole
/// application, whatever `app` is mounted as) and waited for too.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    links: Router,
    limits: ConnectionLimits,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let served = Served {
        app,
        upgrades: Upgrades {
            app: links,
            stop: stop.clone(),
            tasks: connections.clone(),
        },
        limits,
        stop: stop.clone(),
    };
    loop {
        let slot = tokio::select! {
            () = stop.cancelled() => break,
            slot = Arc::clone(&slots).acquire_owned() => {
                slot.expect("invariant: the connection semaphore is never closed")
            }
        };
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    // Out of descriptors, typically: wait instead of spinning.
                    tracing::error!(%error, "accepting a connection failed");
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, %peer, "cannot set TCP_NODELAY");
        }
        let served = served.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            connection(stream, peer, served, tls).await;
            drop(slot);
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Errors of one connection that do not concern the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// What each connection of a listener is served with.
#[derive(Debug, Clone)]
struct Served {
    app: Router,
    upgrades: Upgrades,
    limits: ConnectionLimits,
    stop: CancellationToken,
}

/// Serves one connection until the client closes it, a timeout closes it, or shutdown ends it;
/// with `tls`, after a handshake that must end within the header timeout.
async fn connection(stream: TcpStream, peer: SocketAddr, served: Served, tls: Option<TlsAcceptor>) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let watched = Watched {
        stream,
        activity: Arc::clone(&activity),
    };
    let Some(acceptor) = tls else {
        return http(TokioIo::new(watched), peer, served, activity).await;
    };
    let handshake = tokio::select! {
        () = served.stop.cancelled() => return,
        done = tokio::time::timeout(served.limits.header_timeout, acceptor.accept(watched)) => done,
    };
    match handshake {
        Ok(Ok(stream)) => {
            // The handshake's bytes are not a request's.
            activity.with(|s| s.head_started = None);
            http(TokioIo::new(stream), peer, served, activity).await;
        }
        Ok(Err(error)) => tracing::debug!(%error, %peer, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake too slow"),
    }
}

/// Serves HTTP/1.1 on one connection's stream (plain or TLS) with the timeouts of `activity`.
async fn http<I>(io: TokioIo<I>, peer: SocketAddr, served: Served, activity: Arc<Activity>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Served {
        app,
        upgrades,
        limits,
        stop,
    } = served;
    let on_request = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = Busy::begin(&on_request);
        let mut request = request.map(axum::body::Body::new);
        request.extensions_mut().insert(ConnectInfo(peer));
        if request.headers().contains_key(hyper::header::UPGRADE) {
            request.extensions_mut().insert(upgrades.clone());
        }
        let answer = app.clone().oneshot(request);
        async move {
            let response = answer.await;
            drop(busy);
            response
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .header_read_timeout(None)
        .serve_connection(io, service)
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    loop {
        let deadline = activity.deadline(&limits);
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!(%error, %peer, "connection ended with an error");
                }
                return;
            }
            () = stop.cancelled(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            () = activity.head_started.notified() => {}
            () = tokio::time::sleep_until(deadline) => {
                if let Some(reason) = activity.expired(&limits, Instant::now()) {
                    tracing::debug!(%peer, reason, "closing the connection");
                    return;
                }
            }
        }
    }
}

/// What a connection is doing, for its timeouts.
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
    /// Told when a request's first byte arrives, so that the header timeout is armed.
    head_started: tokio::sync::Notify,
}

#[derive(Debug, Clone, Copy)]
struct ActivityState {
    /// Requests whose response has not been produced yet.
    in_flight: usize,
    /// Last byte read or written, or last response produced.
    last: Instant,
    /// First byte of a request whose headers are not complete yet.
    head_started: Option<Instant>,
}

/// Why an expired connection is closed.
type Reason = &'static str;

impl Activity {
    fn new(now: Instant) -> Activity {
        Activity {
            state: Mutex::new(ActivityState {
                in_flight: 0,
                last: now,
                head_started: None,
            }),
            head_started: tokio::sync::Notify::new(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut ActivityState) -> R) -> R {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn read(&self, now: Instant) {
        let started = self.with(|s| {
            s.last = now;
            let starts = s.in_flight == 0 && s.head_started.is_none();
            if starts {
                s.head_started = Some(now);
            }
            starts
        });
        if started {
            self.head_started.notify_one();
        }
    }

    fn wrote(&self, now: Instant) {
        self.with(|s| s.last = now);
    }

    /// When the connection expires unless something happens; with a request in flight, when
    /// to look again.
    fn deadline(&self, limits: &ConnectionLimits) -> Instant {
        let s = self.with(|s| *s);
        match (s.in_flight, s.head_started) {
            (0, Some(started)) => started + limits.header_timeout,
            (0, None) => s.last + limits.idle_timeout,
            _ => Instant::now() + limits.idle_timeout,
        }
    }

    /// Whether the connection has expired at `now`, and why.
    fn expired(&self, limits: &ConnectionLimits, now: Instant) -> Option<Reason> {
        let s = self.with(|s| *s);
        match (s.in_flight, s.head_started) {
            (0, Some(started)) => {
                (now >= started + limits.header_timeout).then_some("request headers too slow")
            }
            (0, None) => (now >= s.last + limits.idle_timeout).then_some("idle"),
            _ => None,
        }
    }
}

/// A request in flight on a connection, from its complete headers to its response.
struct Busy(Arc<Activity>);

impl Busy {
    fn begin(activity: &Arc<Activity>) -> Busy {
        activity.with(|s| {
            s.in_flight += 1;
            s.head_started = None;
        });
        Busy(Arc::clone(activity))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let now = Instant::now();
        self.0.with(|s| {
            s.in_flight -= 1;
            s.last = now;
        });
    }
}

/// A TCP stream that records its reads and writes in the connection's [`Activity`].
pub(crate) struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    /// The stream, no longer watched (a connection taken over keeps its own time).
    pub(crate) fn into_stream(self) -> TcpStream {
        self.stream
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read(Instant::now());
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote(Instant::now());
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote(Instant::now());
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ConnectionLimits = ConnectionLimits {
        max_connections: 1,
        idle_timeout: Duration::from_secs(60),
        header_timeout: Duration::from_secs(10),
    };

    #[test]
    fn a_quiet_connection_expires_after_the_idle_timeout() {
        let t0 = Instant::now();
        let activity = Activity::new(t0);
        assert_eq!(
            activity.expired(&LIMITS, t0 + Duration::from_secs(59)),
            None
        );
        assert_eq!(
            activity.expired(&LIMITS, t0 + Duration::from_secs(60)),
            Some("idle")
        );
        activity.wrote(t0 + Duration::from_secs(30));
        assert_eq!(
            activity.expired(&LIMITS, t0 + Duration::from_secs(60)),
            None
        );
    }

    #[test]
    fn a_started_request_must_complete_its_headers_in_time() {
        let t0 = Instant::now();
        let activity = Activity::new(t0);
        activity.read(t0 + Duration::from_secs(1));
        // More bytes do not restart the header clock.
        activity.read(t0 + Duration::from_secs(10));
        assert_eq!(
            activity.expired(&LIMITS, t0 + Duration::from_secs(11)),
            Some("request headers too slow")
        );
    }

    #[test]
    fn a_request_in_flight_never_expires_and_idles_from_its_end() {
        let t0 = Instant::now();
        let activity = Arc::new(Activity::new(t0));
        activity.read(t0);
        let busy = Busy::begin(&activity);
        assert_eq!(
            activity.expired(&LIMITS, t0 + Duration::from_secs(3600)),
            None
        );
        drop(busy);
        let ended = activity.with(|s| s.last);
        assert_eq!(activity.expired(&LIMITS, ended), None);
        assert_eq!(
            activity.expired(&LIMITS, ended + LIMITS.idle_timeout),
            Some("idle")
        );
    }
}
