//! A server that stays up: bounded metric labels, idle and header timeouts, the connection limit,
//! the peer address for handlers, and a long poll that answers before the request timeout.

use crate::support::{Options, TestApp};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Methods that stay labels of their own.
const KNOWN_METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other",
];

/// A small deterministic generator (xorshift), enough for junk methods and paths.
struct Junk(u64);

impl Junk {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An upper-case token of 4 to 11 letters, never a standard method.
    fn word(&mut self) -> String {
        let len = 4 + self.next() % 8;
        let word: String = (0..len)
            .map(|_| char::from(b'A' + u8::try_from(self.next() % 26).expect("a letter")))
            .collect();
        match KNOWN_METHODS.contains(&word.as_str()) {
            true => self.word(),
            false => word,
        }
    }
}

/// The series of `berth_http_*` with `method="other"` (without their values), the `method`
/// label values seen, and the whole body.
async fn scrape(app: &TestApp) -> (BTreeSet<String>, BTreeSet<String>, String) {
    let body = app.metrics_text().await;
    let mut others = BTreeSet::new();
    let mut methods = BTreeSet::new();
    for line in body.lines().filter(|l| l.starts_with("berth_http_")) {
        if let Some(rest) = line.split("method=\"").nth(1) {
            methods.insert(rest.split('"').next().unwrap_or("").to_owned());
        }
        if line.contains("method=\"other\"") {
            let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
            others.insert(series.to_owned());
        }
    }
    (others, methods, body)
}

/// Sends `count` requests with junk methods to junk paths and to a real route.
async fn flood(app: &TestApp, junk: &mut Junk, count: usize) -> Vec<String> {
    let mut sent = Vec::new();
    for i in 0..count {
        let word = junk.word();
        let method = Method::from_bytes(word.as_bytes()).expect("a token");
        let path = match i % 2 {
            0 => format!("/{}/{}", junk.word().to_lowercase(), junk.next()),
            _ => "/healthz".to_owned(),
        };
        let response = app.request(method, &path, None).send().await.expect("send");
        assert!(
            matches!(
                response.status(),
                StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
            ),
            "{word} {path}: {}",
            response.status()
        );
        sent.push(word);
        if i % 2 == 0 {
            sent.push(path);
        }
    }
    sent
}

#[tokio::test]
async fn junk_methods_and_paths_do_not_grow_the_metrics() {
    let app = TestApp::spawn().await;
    let mut junk = Junk(0x9e37_79b9_7f4a_7c15);
    flood(&app, &mut junk, 20).await;
    let (before, _, body_before) = scrape(&app).await;
    assert!(!before.is_empty(), "the warm-up is counted as other");
    let sent = flood(&app, &mut junk, 500).await;
    let (after, methods, body_after) = scrape(&app).await;
    assert_eq!(before, after, "no new series for junk requests");
    assert!(
        methods.iter().all(|m| KNOWN_METHODS.contains(&m.as_str())),
        "{methods:?}"
    );
    for token in &sent {
        assert!(
            !body_after.contains(&format!("\"{token}\"")),
            "{token} is not a label value"
        );
    }
    // Other tests share the process-wide recorder, so only the junk series are compared
    // exactly; the whole exposition must still not grow with the flood.
    assert!(
        body_after.len() < body_before.len() + 512 * 1024,
        "{} -> {} bytes",
        body_before.len(),
        body_after.len()
    );
}

/// Reads until the server closes the connection; false if it is still open after 10 s.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0_u8; 1024];
    let read_to_end = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(_) => {}
                Err(error) => {
                    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}");
                    return;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read_to_end)
        .await
        .is_ok()
}

fn addr(app: &TestApp) -> SocketAddr {
    app.base
        .trim_start_matches("http://")
        .parse()
        .expect("an address")
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let app = TestApp::spawn_with(Options {
        idle_timeout_seconds: Some(1),
        header_timeout_seconds: Some(60),
        ..Options::default()
    })
    .await;
    let mut silent = TcpStream::connect(addr(&app)).await.expect("connect");
    assert!(closed_by_server(&mut silent).await, "a silent connection");
    // After a request, the connection idles from the end of its response.
    let mut kept = TcpStream::connect(addr(&app)).await.expect("connect");
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    let mut answer = [0_u8; 12];
    kept.read_exact(&mut answer).await.expect("an answer");
    assert_eq!(&answer, b"HTTP/1.1 200");
    assert!(closed_by_server(&mut kept).await, "a kept-alive connection");
    let (status, _) = app.get("/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_request_whose_headers_stall_is_closed_after_the_header_timeout() {
    let app = TestApp::spawn_with(Options {
        idle_timeout_seconds: Some(60),
        header_timeout_seconds: Some(1),
        ..Options::default()
    })
    .await;
    let mut slow = TcpStream::connect(addr(&app)).await.expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0")
        .await
        .expect("write");
    assert!(closed_by_server(&mut slow).await, "half a request");
    // A connection that has not started a request is idle, not slow: it stays open.
    let mut quiet = TcpStream::connect(addr(&app)).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    quiet
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    let mut answer = [0_u8; 12];
    quiet.read_exact(&mut answer).await.expect("an answer");
    assert_eq!(&answer, b"HTTP/1.1 200");
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_for_a_free_one() {
    let app = TestApp::spawn_with(Options {
        max_connections: Some(2),
        ..Options::default()
    })
    .await;
    let first = TcpStream::connect(addr(&app)).await.expect("connect");
    let mut second = TcpStream::connect(addr(&app)).await.expect("connect");
    let third = {
        let url = format!("{}/healthz", app.base);
        tokio::spawn(async move {
            let response = reqwest::Client::new().get(url).send().await.expect("send");
            response.status()
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !third.is_finished(),
        "a third connection waits while two are open"
    );
    drop(first);
    let status = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("answered once a connection closed")
        .expect("joined");
    assert_eq!(status, StatusCode::OK);
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    second.read_to_end(&mut answer).await.expect("read");
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{answer:?}");
    for _ in 0..3 {
        let (status, _) = app.get("/healthz", None).await;
        assert_eq!(status, StatusCode::OK);
    }
}

#[tokio::test]
async fn handlers_see_the_peer_address() {
    use axum::extract::ConnectInfo;
    let app = axum::Router::new().route(
        "/peer",
        axum::routing::get(
            |ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    let limits = berth_server::connections::ConnectionLimits {
        max_connections: 4,
        idle_timeout: Duration::from_secs(5),
        header_timeout: Duration::from_secs(5),
    };
    let server = tokio::spawn(berth_server::connections::serve(
        listener,
        app.clone(),
        app,
        limits,
        None,
        stop.clone(),
    ));
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let local = stream.local_addr().expect("local");
    stream
        .write_all(b"GET /peer HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    assert!(answer.ends_with(&local.to_string()), "{answer}");
    stop.cancel();
    server.await.expect("joined").expect("served");
}

#[tokio::test]
async fn the_longest_feed_wait_answers_before_the_request_timeout() {
    let app = TestApp::spawn_with(Options {
        request_timeout: Some(Duration::from_secs(3)),
        ..Options::default()
    })
    .await;
    let (status, body) = app.get("/promise/notifications?wait=30", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["notifications"], json!([]));
}
