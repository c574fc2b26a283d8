//! `https` callbacks end to end: a TLS receiver on 127.0.0.1, with a certificate issued by a CA
//! made at test time, gets signed notifications when berth trusts that CA
//! (`--callback-ca-file`), and none when it does not: the delivery stays pending with the
//! verification error. Without usable system roots berth still starts, and still verifies.

use crate::blazar_leases::{minutes, now_micros};
use crate::notifications::{Received, SECRET, checks_signatures, wait_until};
use crate::support::{LOOPBACK, Options, TestApp, parse};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// Longest a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest one connection to the receiver may take, from handshake to answer.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head the receiver reads.
const HEAD_MAX: usize = 16 * 1024;
/// Largest request body the receiver reads.
const BODY_MAX: usize = 1024 * 1024;
/// A day in microseconds.
const DAY: i64 = 24 * 3_600_000_000;

/// A CA made for the test and a receiver's TLS configuration with a certificate it issued.
struct Pki {
    /// The CA certificate, PEM.
    ca_pem: String,
    /// Presents the receiver's certificate, for `127.0.0.1` and `localhost`.
    acceptor: TlsAcceptor,
}

fn pki() -> Pki {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "berth test CA");
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let ca = rcgen::CertifiedIssuer::self_signed(params, ca_key).expect("CA certificate");
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("receiver params");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = rcgen::KeyPair::generate().expect("receiver key");
    let certificate = params.signed_by(&key, &ca).expect("receiver certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![certificate.der().clone()], key)
        .expect("TLS configuration");
    Pki {
        ca_pem: ca.pem(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    }
}

/// A TLS receiver on 127.0.0.1 port 0: its port, what it got, and how many connections it took.
async fn tls_receiver(acceptor: TlsAcceptor) -> (u16, Received, Arc<AtomicU32>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received = Received::default();
    let connections = Arc::new(AtomicU32::new(0));
    let (got, counter) = (received.clone(), Arc::clone(&connections));
    let server = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let (acceptor, got) = (acceptor.clone(), got.clone());
            tokio::spawn(async move {
                // A refused handshake or a stalled client only ends this connection.
                let _ =
                    tokio::time::timeout(CONNECTION_TIMEOUT, answer(&acceptor, socket, &got)).await;
            });
        }
    });
    (port, received, connections, server)
}

/// Reads more of `stream` into `data`; an error at the end of the stream.
async fn read_more(stream: &mut (impl AsyncReadExt + Unpin), data: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0; 4096];
    match stream.read(&mut chunk).await? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        n => {
            data.extend_from_slice(&chunk[..n]);
            Ok(())
        }
    }
}

/// Completes the handshake, reads one HTTP/1.1 request, records its body and signature header,
/// and answers 200.
async fn answer(acceptor: &TlsAcceptor, socket: TcpStream, received: &Received) -> io::Result<()> {
    let mut stream = acceptor.accept(socket).await?;
    let mut data = Vec::new();
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if data.len() > HEAD_MAX {
            return Err(io::Error::other("request head too large"));
        }
        read_more(&mut stream, &mut data).await?;
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let length = header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(BODY_MAX);
    while data.len() < head_end + length {
        read_more(&mut stream, &mut data).await?;
    }
    let body = String::from_utf8_lossy(&data[head_end..head_end + length]).into_owned();
    received.record(body, header("x-berth-signature"));
    stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .await?;
    stream.shutdown().await
}

/// POSTs `body` to berth at `base`.
async fn post(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    let response = client
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .expect("send");
    parse(response).await
}

/// Subscribes the receiver on `port` to every reservation change, signed, then enrolls a host
/// and leases it, which notifies `lease.create`.
async fn subscribe_and_lease(client: &reqwest::Client, base: &str, port: u16) {
    let (status, made) = post(
        client,
        base,
        "/promise/reservation/subscribe",
        json!({"inputFilter": "all", "callbackUri": format!("https://127.0.0.1:{port}/hook"),
               "authentication": {"secret": SECRET}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        made["subscription"]["callbackUri"],
        format!("https://127.0.0.1:{port}/hook")
    );
    let (status, host) = post(
        client,
        base,
        "/reservation/v1/os-hosts",
        json!({"name": "cn1", "availability_zone": "az1", "vcpus": 16, "memory_mb": 16384,
               "local_gb": 100}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{host}");
    let (status, lease) = post(
        client,
        base,
        "/reservation/v1/leases",
        json!({"name": "l", "start_date": "now", "end_date": minutes(now_micros() + DAY),
               "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}],
               "events": []}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{lease}");
}

/// Waits for the `lease.create` notification and checks that everything received is signed.
async fn delivered_signed(received: &Received) {
    wait_until(received, |got| {
        got.iter()
            .any(|(body, _)| body["changeType"] == "lease.create")
    })
    .await;
    checks_signatures(received);
}

/// The CA certificate written to a PEM file in a fresh directory.
fn ca_file(pki: &Pki) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("callback-ca.pem");
    std::fs::write(&path, &pki.ca_pem).expect("write the CA file");
    (dir, path)
}

#[tokio::test]
async fn an_https_callback_is_delivered_signed_when_its_ca_is_trusted() {
    let run = async {
        let pki = pki();
        let (_dir, ca) = ca_file(&pki);
        let app = TestApp::spawn_with(Options {
            callback_ca_file: Some(ca),
            callback_allow: vec![LOOPBACK.to_owned()],
            ..Options::default()
        })
        .await;
        let (port, received, _, server) = tls_receiver(pki.acceptor).await;
        subscribe_and_lease(&app.client, &app.base, port).await;
        delivered_signed(&received).await;
        server.abort();
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("the test finishes in time");
}

/// Waits (about 10 s at most) for a failed attempt to the receiver, then checks that the
/// delivery is pending with a certificate error, that the receiver was reached, and that it got
/// nothing.
async fn refused(
    client: &reqwest::Client,
    base: &str,
    received: &Received,
    connections: &AtomicU32,
) {
    let mut failed = None;
    for _ in 0..200 {
        let response = client
            .get(format!("{base}/promise/deliveries"))
            .send()
            .await
            .expect("send");
        let (status, body) = parse(response).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let deliveries = body["deliveries"].as_array().cloned().unwrap_or_default();
        if let Some(d) = deliveries.iter().find(|d| d["lastError"].is_string()) {
            failed = Some(d.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failed = failed.expect("a failed attempt is recorded");
    assert_eq!(failed["status"], "pending", "{failed}");
    assert!(failed["attempts"].as_u64() >= Some(1), "{failed}");
    let error = failed["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("invalid peer certificate"),
        "the error names the certificate: {error}"
    );
    assert!(
        connections.load(Ordering::SeqCst) >= 1,
        "the receiver was reached"
    );
    assert!(
        received.got.lock().expect("lock").is_empty(),
        "nothing is sent to an untrusted receiver"
    );
}

#[tokio::test]
async fn an_https_callback_with_an_untrusted_certificate_is_never_delivered() {
    let run = async {
        let pki = pki();
        let app = TestApp::spawn_allowing_loopback().await;
        let (port, received, connections, server) = tls_receiver(pki.acceptor).await;
        subscribe_and_lease(&app.client, &app.base, port).await;
        refused(&app.client, &app.base, &received, &connections).await;
        server.abort();
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("the test finishes in time");
}

/// A `berth` process, killed and reaped when dropped.
struct Berth(std::process::Child);

impl Drop for Berth {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn without_system_roots_berth_starts_and_still_verifies() {
    let run = async {
        let pki = pki();
        let dir = tempfile::tempdir().expect("dir");
        // An empty system store: `SSL_CERT_FILE` alone replaces the platform's.
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").expect("write");
        let port = crate::support::free_port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--callback-allow",
                LOOPBACK,
                "--data-dir",
            ])
            .arg(dir.path().join("data"))
            .env("SSL_CERT_FILE", &empty)
            .env_remove("SSL_CERT_DIR")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        let _berth = Berth(child);
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let mut ready = false;
        for _ in 0..300 {
            let answer = client.get(format!("{base}/healthz")).send().await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(ready, "berth started without system roots");
        let (port, received, connections, server) = tls_receiver(pki.acceptor).await;
        subscribe_and_lease(&client, &base, port).await;
        refused(&client, &base, &received, &connections).await;
        server.abort();
    };
    tokio::time::timeout(TEST_TIMEOUT, run)
        .await
        .expect("the test finishes in time");
}
