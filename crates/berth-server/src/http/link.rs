//! The link a replica forwards its writes over: one long-lived connection to the writer that
//! carries each forwarded request as a length-prefixed frame and each answer back as another,
//! many in flight at once, instead of an HTTP exchange per write.
//!
//! A forwarded write over HTTP costs both replicas a whole exchange (the forwarding replica's
//! client and the writer's server each parse and write a message, and wake a connection's task
//! for it, for every write); on a link the frames in flight share the reads and writes of one
//! connection. What a frame carries is what an HTTP forward carried (method, path and query,
//! end-to-end headers with the writer's secret and the caller's address, body), and the writer
//! passes it through its whole router as if it had come over HTTP: the secret, the term and
//! the caller's address are judged per request by `http::forward` exactly as before, and so
//! every answer names its writer.
//!
//! The link is opened with an HTTP/1.1 upgrade to [`PROTOCOL`] at the writer's advertised
//! address, presenting the writer's secret; the writer answers 101 and names itself, or refuses
//! (421 `not_writer`). A writer that answers anything else speaks no link, and the replica
//! forwards over HTTP. Only a plain-HTTP address is linked; over TLS writes go over HTTP.
//!
//! Frames (every integer big-endian, every string or body a `u32` length and its bytes):
//! a request is `u32 length, u64 id, method, path and query, u32 header count, (name, value)…,
//! body`; an answer is `u32 length, u64 id, u16 status, u32 header count, (name, value)…, body`.
//! Answers come back in any order, matched by id. A frame longer than [`FRAME_MAX`] or that does
//! not decode ends the link.
//!
//! When the writer stops, it answers every frame it reads afterwards 421 `not_writer` untouched
//! (the forwarding replica decides those itself and drops the link), finishes the requests in
//! flight, and closes the link within [`CLOSING`].
//!
//! A replica that asks for them when it opens the link ([`FOLLOW`], naming the change encoding
//! it reads) is also sent each of the writer's commits as the writer makes them: an answer frame
//! of id [`PUBLISHED`] whose headers name the commit's sequence ([`SEQ`]) and encoding
//! ([`FORMAT`]) and whose body is its changes as the replication log holds them. The replica
//! applies each one that follows its catalog's sequence without reading the log; the log still
//! brings in what it has not been sent (another replica's commits, a commit the link missed).

use crate::connections::{Upgrades, Watched};
use crate::http::forwarded::{FORWARDED, NOT_WRITER, WRITER, lost_answer, not_writer};
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use berth_app::{Berth, Published};
use berth_core::CHANGE_FORMAT;
use berth_store::WriterTerm;
use futures_util::FutureExt as _;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// The protocol a link is upgraded to.
pub(crate) const PROTOCOL: &str = "berth-link/1";
/// Longest frame beyond its body: what a request's or answer's head may take.
const HEAD_MAX: usize = 256 * 1024;
/// Longest answer body the writer passes back (a write's answer is a few KiB).
const ANSWER_BODY_MAX: usize = 64 * 1024 * 1024;
/// Longest frame: the longest request body the writer takes, its head, and the longest answer.
/// A longer frame ends the link.
pub(crate) const FRAME_MAX: usize = ANSWER_BODY_MAX + HEAD_MAX;
/// How long a stopping writer goes on answering frames 421 before it closes the link.
const CLOSING: Duration = Duration::from_secs(1);
/// Bytes read or written at once on a link.
const BUFFER: usize = 64 * 1024;

/// A forwarded request's answer, as the writer gave it.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// What became of a request sent over a link.
#[derive(Debug)]
pub(crate) enum Sent {
    /// The writer answered.
    Answered(Answer),
    /// The link had ended before the request was given to it: the writer never saw it.
    Unwritten,
    /// The link ended, or the answer did not come in time, after the request was given to it:
    /// the writer may have acted on it.
    Lost,
}

/// Why a link could not be opened.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The writer could not be reached, or refused the link (it does not hold the term, or the
    /// secret is not its own): it cannot have acted on anything.
    Unreachable,
    /// The writer's address answered without taking a link (a berth that speaks none, or over
    /// TLS): writes go over HTTP.
    NoLink,
}

/// The forwarding replica's end of a link: requests go out through the link's writing task,
/// answers come back through its reading task to whoever waits for them.
#[derive(Debug)]
pub(crate) struct Link {
    outgoing: mpsc::UnboundedSender<Outgoing>,
    /// Who waits for which answer (shared with the link's tasks).
    waiting: Arc<Waiting>,
    /// How long a request waits for its answer.
    answer_within: Duration,
    next_id: AtomicU64,
    /// Cancelled when the link takes no more requests (the writer said goodbye, or the link
    /// failed or was dropped).
    ended: CancellationToken,
}

/// A request's frame for a link's writing task, and who waits for its answer (told
/// [`NeverWritten`] when the frame is never written).
#[derive(Debug)]
struct Outgoing {
    frame: Vec<u8>,
    id: u64,
    tell: Tell,
}

/// A request the link ended before writing.
#[derive(Debug)]
struct NeverWritten;

/// Where a request's answer is told.
type Tell = oneshot::Sender<Result<Answer, NeverWritten>>;
/// Who waits for which answer.
type Waiting = Mutex<HashMap<u64, Tell>>;

/// The id of the writer's goodbye: it takes no more requests on this link.
const GOODBYE: u64 = u64::MAX;
/// The id of a commit the writer sends a replica that follows it.
const PUBLISHED: u64 = u64::MAX - 1;
/// Asks the writer, when opening a link, for its commits in the change encoding named.
const FOLLOW: HeaderName = HeaderName::from_static("x-berth-follow");
/// A sent commit's catalog sequence.
const SEQ: HeaderName = HeaderName::from_static("x-berth-seq");
/// A sent commit's change encoding.
const FORMAT: HeaderName = HeaderName::from_static("x-berth-change-format");

/// A replica that follows the writer's commits over a link.
pub(crate) trait Follower: Send + Sync {
    /// Takes a commit the writer sent.
    fn apply(&self, commit: Published);
    /// Told `true` once the link brings every commit the writer makes (the writer agreed to
    /// send them), and `false` when it no longer does (the link ended).
    fn fed(&self, fed: bool);
}

impl Follower for Berth {
    fn apply(&self, commit: Published) {
        self.apply_published(commit);
    }

    fn fed(&self, fed: bool) {
        self.fed_by_link(fed);
    }
}

/// The replica that follows the writer's commits over a link.
pub(crate) type Follow = Arc<dyn Follower>;

/// Held while a link brings a follower every commit the writer makes; tells it when dropped.
struct Feeding(Follow);

impl Feeding {
    fn start(follow: Follow) -> Feeding {
        follow.fed(true);
        Feeding(follow)
    }
}

impl Drop for Feeding {
    fn drop(&mut self) {
        self.0.fed(false);
    }
}

impl Link {
    /// Opens a link to the writer `term` names, waiting `connect_within` at most for the
    /// connection and the writer's answer to the upgrade; each answer is awaited
    /// `answer_within` at most. With `follow`, asks for the writer's commits, gives each to
    /// it, and tells it while the link brings them all (the writer agreed to send them).
    pub(crate) async fn open(
        term: &WriterTerm,
        connect_within: Duration,
        answer_within: Duration,
        follow: Option<Follow>,
    ) -> Result<Link, Refused> {
        let url = url::Url::parse(&term.url).map_err(|_| Refused::NoLink)?;
        if url.scheme() != "http" {
            return Err(Refused::NoLink);
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(Refused::NoLink);
        };
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let upgrade = async {
            let stream = TcpStream::connect((host.trim_matches(['[', ']']), port))
                .await
                .map_err(|_| Refused::Unreachable)?;
            let _ = stream.set_nodelay(true);
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|_| Refused::Unreachable)?;
            tokio::spawn(connection.with_upgrades());
            let secret = HeaderValue::from_str(&term.secret).map_err(|_| Refused::Unreachable)?;
            let mut request = hyper::Request::builder()
                .method(Method::GET)
                .uri("/")
                .header(header::HOST, authority)
                .header(header::CONNECTION, "upgrade")
                .header(header::UPGRADE, PROTOCOL)
                .header(FORWARDED, secret);
            if follow.is_some() {
                request = request.header(FOLLOW, CHANGE_FORMAT);
            }
            let request = request.body(Body::empty()).map_err(|_| Refused::NoLink)?;
            let answer = sender
                .send_request(request)
                .await
                .map_err(|_| Refused::Unreachable)?;
            let named = answer
                .headers()
                .get(WRITER)
                .is_some_and(|holder| holder.as_bytes() == term.holder.as_bytes());
            match answer.status() {
                StatusCode::SWITCHING_PROTOCOLS if named => {}
                _ if answer.headers().contains_key(NOT_WRITER) => {
                    return Err(Refused::Unreachable);
                }
                _ => return Err(Refused::NoLink),
            }
            let sends_commits = names_own_format(answer.headers());
            let upgraded = hyper::upgrade::on(answer)
                .await
                .map_err(|_| Refused::Unreachable)?;
            Ok((upgraded, sends_commits))
        };
        let (upgraded, sends_commits) = tokio::time::timeout(connect_within, upgrade)
            .await
            .map_err(|_| Refused::Unreachable)??;
        let (read, write) = halves::<TcpStream>(upgraded, |io| io);
        let follow = follow.map(|follow| (follow, sends_commits));
        Ok(Link::over(read, write, answer_within, follow))
    }

    /// A link over a connection the writer serves as a link (its two halves); each answer is
    /// awaited `answer_within` at most, and each commit the writer sends is given to `follow`,
    /// told it is fed while the link lasts when the writer agreed to send every commit.
    fn over(
        read: Reading,
        write: Writing,
        answer_within: Duration,
        follow: Option<(Follow, bool)>,
    ) -> Link {
        let (outgoing, frames) = mpsc::unbounded_channel();
        let waiting = Arc::new(Waiting::default());
        let ended = CancellationToken::new();
        tokio::spawn(write_frames(
            write,
            frames,
            Arc::clone(&waiting),
            ended.clone(),
        ));
        tokio::spawn(read_answers(
            read,
            Arc::clone(&waiting),
            ended.clone(),
            answer_within,
            follow,
        ));
        Link {
            outgoing,
            waiting,
            answer_within,
            next_id: AtomicU64::new(0),
            ended,
        }
    }

    /// Whether the link takes no more requests.
    pub(crate) fn has_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Sends a request and waits for its answer (the link's `answer_within` at most; then the
    /// answer is no longer awaited).
    pub(crate) async fn send(
        &self,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Sent {
        if self.has_ended() {
            return Sent::Unwritten;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        assert_ne!(id, GOODBYE, "a link carries fewer than 2^64 - 1 requests");
        let (tell, answer) = oneshot::channel();
        let frame = encode_request(id, method, path_and_query, headers, body);
        let outgoing = Outgoing { frame, id, tell };
        if self.outgoing.send(outgoing).is_err() {
            return Sent::Unwritten;
        }
        match tokio::time::timeout(self.answer_within, answer).await {
            Ok(Ok(Ok(answer))) => Sent::Answered(answer),
            Ok(Ok(Err(NeverWritten))) => Sent::Unwritten,
            Ok(Err(_)) => Sent::Lost,
            Err(_) => {
                lock(&self.waiting).remove(&id);
                Sent::Lost
            }
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

fn lock(waiting: &Waiting) -> std::sync::MutexGuard<'_, HashMap<u64, Tell>> {
    waiting.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes the frames given to a link's writing end, as many at once as are waiting, until the
/// link ends or every sender is gone; then tells whoever waits on a frame it did not write that
/// it was not sent, and closes its half of the link.
async fn write_frames(
    write: impl AsyncWrite + Unpin,
    mut frames: mpsc::UnboundedReceiver<Outgoing>,
    waiting: Arc<Waiting>,
    ended: CancellationToken,
) {
    let mut out = BufWriter::with_capacity(BUFFER, write);
    loop {
        let first = tokio::select! {
            biased;
            () = ended.cancelled() => break,
            frame = frames.recv() => frame,
        };
        let Some(mut next) = first else { break };
        let written = loop {
            let Outgoing { frame, id, tell } = next;
            lock(&waiting).insert(id, tell);
            if let Err(error) = out.write_all(&frame).await {
                break Err(error);
            }
            match frames.try_recv() {
                Ok(frame) => next = frame,
                Err(_) => break out.flush().await,
            }
        };
        if written.is_err() {
            break;
        }
    }
    ended.cancel();
    frames.close();
    while let Ok(unsent) = frames.try_recv() {
        let _ = unsent.tell.send(Err(NeverWritten));
    }
    let _ = out.shutdown().await;
}

/// Reads the answers coming back on a link and hands each to whoever waits for it, and each
/// commit the writer sends to `follow`, until the writer closes the link (or `answer_within`
/// after the link ended); whoever still waits then learns that its answer is lost. The
/// writer's goodbye ends the link. When the writer agreed to send every commit, `follow` is
/// told it is fed until the link ends.
async fn read_answers(
    read: impl AsyncRead + Unpin,
    waiting: Arc<Waiting>,
    ended: CancellationToken,
    answer_within: Duration,
    follow: Option<(Follow, bool)>,
) {
    let (follow, mut feeding) = match follow {
        Some((follow, true)) => (Some(Arc::clone(&follow)), Some(Feeding::start(follow))),
        Some((follow, false)) => (Some(follow), None),
        None => (None, None),
    };
    let reading = next_frame(BufReader::with_capacity(BUFFER, read));
    let mut reading = std::pin::pin!(reading);
    let lingered = async {
        ended.cancelled().await;
        tokio::time::sleep(answer_within).await;
    };
    let mut lingered = std::pin::pin!(lingered);
    loop {
        let frame = tokio::select! {
            () = &mut lingered => break,
            // An ended link may still bring commits, but no longer promises all of them.
            () = ended.cancelled(), if feeding.is_some() => {
                feeding = None;
                continue;
            }
            // Not cut by the other branches: the same read goes on in the next turn.
            (input, frame) = &mut reading => {
                reading.set(next_frame(input));
                frame
            }
        };
        let Ok(Some(frame)) = frame else { break };
        let Some((id, answer)) = decode_answer(&frame) else {
            tracing::warn!("a forwarded write's answer could not be read; closing the link");
            break;
        };
        if id == GOODBYE {
            ended.cancel();
            continue;
        }
        if id == PUBLISHED {
            match (&follow, published_commit(answer)) {
                (Some(follow), Some(commit)) => follow.apply(commit),
                (_, None) => tracing::warn!("a commit sent over the link could not be read"),
                (None, Some(_)) => {}
            }
            continue;
        }
        if let Some(tell) = lock(&waiting).remove(&id) {
            let _ = tell.send(Ok(answer));
        }
    }
    ended.cancel();
    lock(&waiting).clear();
}

/// A commit sent over a link, read from its frame; `None` when it does not decode.
fn published_commit(frame: Answer) -> Option<Published> {
    let number = |name: &HeaderName| -> Option<&str> { frame.headers.get(name)?.to_str().ok() };
    let seq = number(&SEQ)?.parse().ok()?;
    let format = number(&FORMAT)?.parse().ok()?;
    let changes = String::from_utf8(Vec::from(frame.body)).ok()?;
    Some(Published {
        seq,
        format,
        changes,
    })
}

/// Whether `headers` name this build's change encoding under [`FOLLOW`]: in a request to open
/// a link, it asks for the writer's commits; in the writer's answer, it promises every one.
fn names_own_format(headers: &HeaderMap) -> bool {
    headers
        .get(FOLLOW)
        .is_some_and(|format| *format == HeaderValue::from(CHANGE_FORMAT))
}

/// A commit's frame, for a replica that follows the writer.
fn encode_published(commit: &Published) -> Vec<u8> {
    let mut headers = HeaderMap::new();
    headers.insert(SEQ, HeaderValue::from(commit.seq));
    headers.insert(FORMAT, HeaderValue::from(commit.format));
    encode_answer(
        PUBLISHED,
        StatusCode::OK,
        &headers,
        commit.changes.as_bytes(),
    )
}

/// The writer's answer to a request to open a link, when it carries [`PROTOCOL`] and the
/// connection can be taken over: 101, naming the writer, with the link served from then on by
/// the server's tasks through its whole router, and `berth`'s commits sent over it when the
/// request asks for them in an encoding this writer writes. `None` when the request asks for
/// no link.
pub(crate) fn accept(request: &mut Request, holder: &str, berth: &Berth) -> Option<Response> {
    let asks = request
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(PROTOCOL.as_bytes()));
    if !asks {
        return None;
    }
    let upgrades = request.extensions_mut().remove::<Upgrades>()?;
    let on_upgrade = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>()?;
    let follows = names_own_format(request.headers());
    let commits = follows.then(|| berth.published());
    let tasks = upgrades.tasks.clone();
    tasks.spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let (read, write) = halves::<Watched>(upgraded, Watched::into_stream);
                serve(read, write, upgrades, commits).await;
            }
            Err(error) => tracing::debug!(%error, "a replica's link was not taken over"),
        }
    });
    let mut answer = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = answer.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static(PROTOCOL));
    if follows {
        // Every commit from now on is sent: the other replica may stop listening for them.
        headers.insert(FOLLOW, HeaderValue::from(CHANGE_FORMAT));
    }
    if let Ok(holder) = HeaderValue::from_str(holder) {
        headers.insert(WRITER, holder);
    }
    Some(answer)
}

/// The writer's end of a link, in one task as a connection's HTTP server is: each request read
/// is passed through the router, the requests in flight are driven together, and the answers
/// ready are written back at once, with each of `commits` as it is made, until the other
/// replica closes the link. When the server stops, it says goodbye, answers what still arrives
/// 421 untouched (for [`CLOSING`] at most), and closes the link once the answers in flight are
/// written.
async fn serve(
    read: Reading,
    write: Writing,
    upgrades: Upgrades,
    mut commits: Option<broadcast::Receiver<Arc<Published>>>,
) {
    let mut out = BufWriter::with_capacity(BUFFER, write);
    let reading = next_frame(BufReader::with_capacity(BUFFER, read));
    let mut reading = std::pin::pin!(reading);
    let mut read_all = false;
    let mut in_flight = FuturesUnordered::new();
    let mut closing_at = None;
    while !(read_all && in_flight.is_empty()) {
        let (at, stop) = (closing_at, &upgrades.stop);
        let closing = async move {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => stop.cancelled().await,
            }
        };
        // Reading a frame is not cut by the other branches: the same read goes on in the next
        // turn, and a new one starts only once a frame is read.
        let written = tokio::select! {
            commit = next_commit(commits.as_mut()), if commits.is_some() => match commit {
                Some(first) => {
                    write_ready(&mut out, &encode_published(&first), commits.as_mut(), &mut in_flight)
                        .await
                }
                None => {
                    commits = None;
                    Ok(())
                }
            },
            Some(first) = in_flight.next(), if !in_flight.is_empty() => {
                let first: Vec<u8> = first;
                write_ready(&mut out, &first, commits.as_mut(), &mut in_flight).await
            }
            () = closing, if !read_all => match closing_at {
                Some(_) => {
                    read_all = true;
                    Ok(())
                }
                None => {
                    closing_at = Some(tokio::time::Instant::now() + CLOSING);
                    let refused = not_writer();
                    let goodbye = encode_answer(GOODBYE, refused.status(), refused.headers(), b"");
                    write_frame(&mut out, &goodbye).await
                }
            },
            (input, frame) = &mut reading, if !read_all => {
                reading.set(next_frame(input));
                let request = match frame {
                    Ok(Some(frame)) => decode_request(&frame),
                    Ok(None) | Err(_) => {
                        read_all = true;
                        continue;
                    }
                };
                let Some((id, request)) = request else {
                    tracing::warn!("a forwarded write could not be read; closing the link");
                    read_all = true;
                    continue;
                };
                if closing_at.is_none() {
                    in_flight.push(answer_of(upgrades.app.clone(), id, request));
                    continue;
                }
                let refused = not_writer();
                write_frame(&mut out, &encode_answer(id, refused.status(), refused.headers(), b""))
                    .await
            }
        };
        if written.is_err() {
            break;
        }
    }
    let _ = out.shutdown().await;
}

/// Writes one frame and flushes.
async fn write_frame(out: &mut (impl AsyncWrite + Unpin), frame: &[u8]) -> io::Result<()> {
    out.write_all(frame).await?;
    out.flush().await
}

/// Writes the frame `first`, then every commit already made, then every answer already ready,
/// and flushes once: what is ready for the other replica at one time goes out in one write.
async fn write_ready(
    out: &mut (impl AsyncWrite + Unpin),
    first: &[u8],
    mut commits: Option<&mut broadcast::Receiver<Arc<Published>>>,
    in_flight: &mut (impl futures_util::Stream<Item = Vec<u8>> + Unpin),
) -> io::Result<()> {
    out.write_all(first).await?;
    // Bounded by the commits already made (the channel keeps PUBLISHED_BACKLOG at most; past
    // a lag this stops, and `next_commit` skips what was missed) and by the requests in
    // flight, each answered once.
    if let Some(more) = commits.as_mut() {
        while let Ok(next) = more.try_recv() {
            out.write_all(&encode_published(&next)).await?;
        }
    }
    while let Some(Some(next)) = in_flight.next().now_or_never() {
        out.write_all(&next).await?;
    }
    out.flush().await
}

/// The next of `commits`, skipping those a slow link missed (the other replica reads them from
/// the log); `None` when no more will come.
async fn next_commit(
    commits: Option<&mut broadcast::Receiver<Arc<Published>>>,
) -> Option<Arc<Published>> {
    let commits = commits?;
    loop {
        match commits.recv().await {
            Ok(commit) => return Some(commit),
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}

/// The answer's frame to the request `id`, passed through `app`.
async fn answer_of(app: axum::Router, id: u64, request: Request) -> Vec<u8> {
    let response = match app.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let (parts, body) = response.into_parts();
    match axum::body::to_bytes(body, ANSWER_BODY_MAX).await {
        Ok(body) => encode_answer(id, parts.status, &parts.headers, &body),
        Err(error) => {
            tracing::warn!(%error, "a forwarded write's answer could not be read");
            let lost = lost_answer().into_response();
            encode_answer(id, lost.status(), lost.headers(), b"")
        }
    }
}

/// A link's reading half.
type Reading = Box<dyn AsyncRead + Send + Unpin>;
/// A link's writing half.
type Writing = Box<dyn AsyncWrite + Send + Unpin>;

/// The two halves of an upgraded connection. Where it is a TCP stream (over `T`, which
/// `stream` unwraps), they are the stream's own halves, so that reading answers and writing
/// requests never wait for each other; otherwise (over TLS) halves that take turns. What the
/// connection read past the upgrade is read first.
fn halves<T>(upgraded: hyper::upgrade::Upgraded, stream: fn(T) -> TcpStream) -> (Reading, Writing)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match upgraded.downcast::<TokioIo<T>>() {
        Ok(parts) => {
            let (read, write) = stream(parts.io.into_inner()).into_split();
            let already = io::Cursor::new(parts.read_buf);
            (Box::new(already.chain(read)), Box::new(write))
        }
        Err(upgraded) => {
            let (read, write) = tokio::io::split(TokioIo::new(upgraded));
            (Box::new(read), Box::new(write))
        }
    }
}

/// Reads the next frame from `input`, and gives `input` back for the one after.
async fn next_frame<R: AsyncRead + Unpin>(mut input: R) -> (R, io::Result<Option<Vec<u8>>>) {
    let frame = read_frame(&mut input).await;
    (input, frame)
}

/// Reads one frame's content (after its length); `None` when the link closed between frames.
async fn read_frame(input: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Vec<u8>>> {
    let length = match input.read_u32().await {
        Ok(length) => length as usize,
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    };
    if length > FRAME_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a link's frame is too long",
        ));
    }
    let mut frame = vec![0; length];
    input.read_exact(&mut frame).await?;
    Ok(Some(frame))
}

/// A request's frame, with its length in front.
fn encode_request(
    id: u64,
    method: &Method,
    path_and_query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Vec<u8> {
    let mut frame = Frame::new(id, body.len() + path_and_query.len());
    frame.bytes(method.as_str().as_bytes());
    frame.bytes(path_and_query.as_bytes());
    frame.headers(headers);
    frame.bytes(body);
    frame.finish()
}

/// An answer's frame, with its length in front.
fn encode_answer(id: u64, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let mut frame = Frame::new(id, body.len());
    frame.0.extend_from_slice(&status.as_u16().to_be_bytes());
    frame.headers(headers);
    frame.bytes(body);
    frame.finish()
}

/// A request read from its frame, ready for the router; `None` when it does not decode.
fn decode_request(frame: &[u8]) -> Option<(u64, Request)> {
    let mut cursor = Cursor(frame);
    let id = cursor.u64()?;
    let method = Method::from_bytes(cursor.bytes()?).ok()?;
    let uri = Uri::try_from(cursor.bytes()?).ok()?;
    let headers = cursor.headers()?;
    let body = cursor.bytes()?;
    if !cursor.0.is_empty() {
        return None;
    }
    let mut request = Request::new(Body::from(body.to_vec()));
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    Some((id, request))
}

/// An answer read from its frame; `None` when it does not decode.
fn decode_answer(frame: &[u8]) -> Option<(u64, Answer)> {
    let mut cursor = Cursor(frame);
    let id = cursor.u64()?;
    let status = StatusCode::from_u16(u16::from_be_bytes(cursor.take(2)?.try_into().ok()?)).ok()?;
    let headers = cursor.headers()?;
    let body = Bytes::copy_from_slice(cursor.bytes()?);
    if !cursor.0.is_empty() {
        return None;
    }
    Some((
        id,
        Answer {
            status,
            headers,
            body,
        },
    ))
}

/// A frame being written: its length is filled in by [`Frame::finish`].
struct Frame(Vec<u8>);

impl Frame {
    fn new(id: u64, payload: usize) -> Frame {
        let mut bytes = Vec::with_capacity(payload + 1024);
        bytes.extend_from_slice(&[0; 4]);
        bytes.extend_from_slice(&id.to_be_bytes());
        Frame(bytes)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        let length = u32::try_from(bytes.len()).expect("invariant: a frame's part fits FRAME_MAX");
        self.0.extend_from_slice(&length.to_be_bytes());
        self.0.extend_from_slice(bytes);
    }

    fn headers(&mut self, headers: &HeaderMap) {
        let count = u32::try_from(headers.len()).expect("invariant: a header map fits u32");
        self.0.extend_from_slice(&count.to_be_bytes());
        for (name, value) in headers {
            self.bytes(name.as_str().as_bytes());
            self.bytes(value.as_bytes());
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let length = u32::try_from(self.0.len() - 4).expect("invariant: a frame fits u32");
        self.0[..4].copy_from_slice(&length.to_be_bytes());
        self.0
    }
}

/// A frame being read.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let length = self.u32()? as usize;
        self.take(length)
    }

    fn headers(&mut self) -> Option<HeaderMap> {
        let count = self.u32()? as usize;
        // Each header takes at least its two lengths: a count beyond that is a lie.
        if count > self.0.len() / 8 {
            return None;
        }
        let mut headers = HeaderMap::with_capacity(count);
        for _ in 0..count {
            let name = HeaderName::from_bytes(self.bytes()?).ok()?;
            let value = HeaderValue::from_bytes(self.bytes()?).ok()?;
            headers.append(name, value);
        }
        Some(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::task::TaskTracker;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        headers
    }

    #[test]
    fn a_request_reads_back_as_it_was_written() {
        let sent = headers(&[
            ("host", "berth.example.net"),
            ("x-auth-token", "t"),
            ("x-berth-forwarded", "secret"),
            ("accept", "application/json"),
            ("accept", "text/plain"),
        ]);
        let frame = encode_request(
            7,
            &Method::PUT,
            "/placement/allocations/c?x=1",
            &sent,
            b"{\"a\":1}",
        );
        let length = u32::from_be_bytes(frame[..4].try_into().expect("length")) as usize;
        assert_eq!(length, frame.len() - 4);
        let (id, request) = decode_request(&frame[4..]).expect("decodes");
        assert_eq!(id, 7);
        assert_eq!(request.method(), Method::PUT);
        assert_eq!(request.uri(), "/placement/allocations/c?x=1");
        assert_eq!(request.headers(), &sent);
        assert_eq!(request.headers().get_all("accept").iter().count(), 2);
    }

    #[test]
    fn an_answer_reads_back_as_it_was_written() {
        let sent = headers(&[("x-openstack-request-id", "req-1"), ("x-berth-writer", "w")]);
        let frame = encode_answer(u64::MAX, StatusCode::CONFLICT, &sent, b"body");
        let (id, answer) = decode_answer(&frame[4..]).expect("decodes");
        assert_eq!(id, u64::MAX);
        assert_eq!(answer.status, StatusCode::CONFLICT);
        assert_eq!(answer.headers, sent);
        assert_eq!(&answer.body[..], b"body");
    }

    #[test]
    fn a_frame_cut_short_or_with_bytes_left_over_or_a_lying_count_is_refused() {
        let frame = encode_request(1, &Method::POST, "/x", &HeaderMap::new(), b"abc");
        let content = &frame[4..];
        for cut in 0..content.len() {
            assert!(decode_request(&content[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = content.to_vec();
        longer.push(0);
        assert!(decode_request(&longer).is_none());
        // A header count of 2^32 - 1 in an answer of a few bytes.
        let mut lying = 1u64.to_be_bytes().to_vec();
        lying.extend_from_slice(&200u16.to_be_bytes());
        lying.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_answer(&lying).is_none());
        // A method that is no method, a path that is no path.
        let bad = encode_request(1, &Method::POST, "not a path", &HeaderMap::new(), b"");
        assert!(decode_request(&bad[4..]).is_none());
    }

    #[tokio::test]
    async fn a_frame_longer_than_the_limit_ends_the_link() {
        let mut too_long = ((FRAME_MAX + 1) as u32).to_be_bytes().to_vec();
        too_long.extend_from_slice(&[0; 16]);
        let error = read_frame(&mut &too_long[..]).await.expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let closed: &[u8] = &[];
        assert!(
            read_frame(&mut &closed[..])
                .await
                .expect("clean end")
                .is_none()
        );
    }

    /// A writer's router for the tests: `/echo/{n}` answers `n` after `n` ms; `/held` answers
    /// once `release` is told.
    fn writer_app(release: Arc<tokio::sync::Notify>) -> axum::Router {
        use axum::extract::Path;
        axum::Router::new()
            .route(
                "/echo/{n}",
                axum::routing::post(|Path(n): Path<u64>, body: Bytes| async move {
                    tokio::time::sleep(Duration::from_millis(n)).await;
                    format!("{n}:{}", String::from_utf8_lossy(&body))
                }),
            )
            .route(
                "/held",
                axum::routing::post(move || async move {
                    release.notified().await;
                    "released"
                }),
            )
    }

    /// A writer serving a link over one end of an in-memory connection; the other end, and the
    /// server's stop.
    fn writer_over_duplex(
        release: Arc<tokio::sync::Notify>,
    ) -> (tokio::io::DuplexStream, CancellationToken, TaskTracker) {
        writer_publishing(release, None)
    }

    /// [`writer_over_duplex`], sending `commits` over the link.
    fn writer_publishing(
        release: Arc<tokio::sync::Notify>,
        commits: Option<broadcast::Receiver<Arc<Published>>>,
    ) -> (tokio::io::DuplexStream, CancellationToken, TaskTracker) {
        let (near, far) = tokio::io::duplex(1024 * 1024);
        let upgrades = Upgrades {
            app: writer_app(release),
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        };
        let (stop, tasks) = (upgrades.stop.clone(), upgrades.tasks.clone());
        let (read, write) = tokio::io::split(far);
        tasks.spawn(serve(Box::new(read), Box::new(write), upgrades, commits));
        (near, stop, tasks)
    }

    /// A link over one end of an in-memory connection.
    fn over_duplex(io: tokio::io::DuplexStream) -> Link {
        let (read, write) = tokio::io::split(io);
        Link::over(
            Box::new(read),
            Box::new(write),
            Duration::from_secs(5),
            None,
        )
    }

    #[tokio::test]
    async fn requests_in_flight_together_are_each_answered_with_their_own_answer() {
        let (io, _stop, _tasks) = writer_over_duplex(Arc::default());
        let link = over_duplex(io);
        let sends = [30u64, 1, 15].map(|n| {
            let path = format!("/echo/{n}");
            let link = &link;
            async move {
                let body = format!("body {n}");
                let sent = link
                    .send(&Method::POST, &path, &HeaderMap::new(), body.as_bytes())
                    .await;
                (n, sent)
            }
        });
        let [a, b, c] = sends;
        let (a, b, c) = tokio::join!(a, b, c);
        for (n, sent) in [a, b, c] {
            let Sent::Answered(answer) = sent else {
                panic!("{n}: {sent:?}");
            };
            assert_eq!(answer.status, StatusCode::OK);
            assert_eq!(&answer.body[..], format!("{n}:body {n}").as_bytes());
        }
        assert!(!link.has_ended());
    }

    fn commit(seq: u64) -> Arc<Published> {
        Arc::new(Published {
            seq,
            format: i64::from(CHANGE_FORMAT),
            changes: format!("[{seq}]"),
        })
    }

    #[tokio::test]
    async fn a_following_link_is_sent_each_commit_in_order_between_the_answers() {
        let (commits, published) = broadcast::channel(16);
        let (io, _stop, _tasks) = writer_publishing(Arc::default(), Some(published));
        let (read, write) = tokio::io::split(io);
        let (followed, mut received) = mpsc::unbounded_channel();
        let follower = Arc::new(Following {
            commits: followed,
            fed: std::sync::atomic::AtomicI64::new(0),
        });
        let link = Link::over(
            Box::new(read),
            Box::new(write),
            Duration::from_secs(5),
            Some((Arc::clone(&follower) as Follow, true)),
        );
        for seq in 1..=3 {
            commits.send(commit(seq)).expect("a follower");
        }
        let sent = link
            .send(&Method::POST, "/echo/0", &HeaderMap::new(), b"x")
            .await;
        let Sent::Answered(answer) = sent else {
            panic!("{sent:?}");
        };
        assert_eq!(&answer.body[..], b"0:x");
        commits.send(commit(4)).expect("a follower");
        let mut seen = Vec::new();
        while seen.len() < 4 {
            let commit = tokio::time::timeout(Duration::from_secs(5), received.recv())
                .await
                .expect("in time")
                .expect("a commit");
            seen.push(commit);
        }
        assert_eq!(
            seen,
            (1..=4)
                .map(|seq| commit(seq).as_ref().clone())
                .collect::<Vec<_>>()
        );
        // A frame that claims to be a commit but names none is not one.
        let garbled = encode_answer(PUBLISHED, StatusCode::OK, &HeaderMap::new(), b"[]");
        let (_, garbled) = decode_answer(&garbled[4..]).expect("decodes");
        assert!(published_commit(garbled).is_none());
        // Fed while the link lasts, and no longer once it ended.
        assert_eq!(follower.fed.load(Ordering::Relaxed), 1);
        drop(link);
        tokio::time::timeout(Duration::from_secs(5), async {
            while follower.fed.load(Ordering::Relaxed) != 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("told in time that the link no longer brings every commit");
    }

    /// A follower that keeps the commits a link brings it, and counts how many links feed it.
    struct Following {
        commits: mpsc::UnboundedSender<Published>,
        fed: std::sync::atomic::AtomicI64,
    }

    impl Follower for Following {
        fn apply(&self, commit: Published) {
            let _ = self.commits.send(commit);
        }

        fn fed(&self, fed: bool) {
            self.fed
                .fetch_add(if fed { 1 } else { -1 }, Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_stopping_writer_says_goodbye_refuses_what_arrives_after_and_finishes_what_it_took() {
        let release = Arc::new(tokio::sync::Notify::new());
        let (io, stop, tasks) = writer_over_duplex(Arc::clone(&release));
        let (read, mut write) = tokio::io::split(io);
        let mut read = BufReader::new(read);
        let held = encode_request(1, &Method::POST, "/held", &HeaderMap::new(), b"");
        write.write_all(&held).await.expect("write");
        // Let the writer take it before it stops.
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.cancel();
        let goodbye = read_frame(&mut read).await.expect("read").expect("a frame");
        let (id, goodbye) = decode_answer(&goodbye).expect("decodes");
        assert_eq!(id, GOODBYE);
        assert_eq!(goodbye.status, StatusCode::MISDIRECTED_REQUEST);
        // A request that crossed the goodbye is refused untouched, for its sender to decide.
        let late = encode_request(2, &Method::POST, "/echo/0", &HeaderMap::new(), b"");
        write.write_all(&late).await.expect("write");
        let refused = read_frame(&mut read).await.expect("read").expect("a frame");
        let (id, refused) = decode_answer(&refused).expect("decodes");
        assert_eq!(id, 2);
        assert_eq!(refused.status, StatusCode::MISDIRECTED_REQUEST);
        assert!(refused.headers.contains_key(NOT_WRITER));
        // The request it took is answered, then the link closes once this end closes.
        release.notify_one();
        let taken = read_frame(&mut read).await.expect("read").expect("a frame");
        let (id, taken) = decode_answer(&taken).expect("decodes");
        assert_eq!((id, &taken.body[..]), (1, &b"released"[..]));
        write.shutdown().await.expect("close");
        assert!(read_frame(&mut read).await.expect("read").is_none());
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("the writer's end of the link is done");
    }

    #[tokio::test]
    async fn after_the_goodbye_a_link_takes_no_more_requests_and_says_so() {
        let (io, stop, _tasks) = writer_over_duplex(Arc::default());
        let link = over_duplex(io);
        let sent = link
            .send(&Method::POST, "/echo/0", &HeaderMap::new(), b"")
            .await;
        assert!(matches!(sent, Sent::Answered(_)), "{sent:?}");
        stop.cancel();
        for _ in 0..250 {
            if link.has_ended() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(link.has_ended(), "the goodbye ends the link");
        let sent = link
            .send(&Method::POST, "/echo/0", &HeaderMap::new(), b"")
            .await;
        assert!(matches!(sent, Sent::Unwritten), "{sent:?}");
    }

    #[tokio::test]
    async fn a_request_whose_answer_does_not_come_in_time_is_lost_and_no_longer_awaited() {
        let (near, far) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(near);
        let link = Link::over(
            Box::new(read),
            Box::new(write),
            Duration::from_millis(50),
            None,
        );
        let sent = link
            .send(&Method::POST, "/echo/0", &HeaderMap::new(), b"")
            .await;
        assert!(matches!(sent, Sent::Lost), "{sent:?}");
        assert!(
            lock(&link.waiting).is_empty(),
            "nobody waits for it any more"
        );
        assert!(!link.has_ended(), "the link goes on");
        drop(far);
    }

    #[tokio::test]
    async fn a_request_on_a_link_that_breaks_before_its_answer_is_lost() {
        let (near, far) = tokio::io::duplex(64 * 1024);
        let link = over_duplex(near);
        let (read, write) = tokio::io::split(far);
        let mut read = BufReader::new(read);
        let no_headers = HeaderMap::new();
        let sending = link.send(&Method::POST, "/echo/0", &no_headers, b"");
        let breaking = async {
            // The writer reads the request, then its connection goes.
            let frame = read_frame(&mut read).await.expect("read").expect("a frame");
            assert!(decode_request(&frame).is_some());
            drop(read);
            drop(write);
        };
        let (sent, ()) = tokio::join!(sending, breaking);
        assert!(matches!(sent, Sent::Lost), "{sent:?}");
    }
}
