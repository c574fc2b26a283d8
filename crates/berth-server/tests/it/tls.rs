//! Native TLS: berth serves HTTPS itself with `--tls-cert` and `--tls-key` (a self-signed
//! certificate made by the test for 127.0.0.1), a client that trusts the certificate speaks
//! HTTPS to it, and a plain-HTTP client or one that does not trust the certificate gets nothing.

use crate::support::{Options, TestApp};
use reqwest::StatusCode;
use std::time::Duration;

#[tokio::test]
async fn berth_serves_https_with_the_configured_certificate() {
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("self-signed certificate");
    let dir = tempfile::tempdir().expect("dir");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).expect("write cert");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("write key");
    let config = dir.path().join("berth.toml");
    std::fs::write(
        &config,
        format!(
            "tls_cert = {:?}\ntls_key = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        ),
    )
    .expect("write config");
    let app = TestApp::spawn_with(Options {
        config: Some(config),
        ..Options::default()
    })
    .await;
    let https = app.base.replacen("http://", "https://", 1);
    let trusted = reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).expect("cert");
    let client = reqwest::Client::builder()
        .tls_certs_only([trusted])
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let response = client
        .get(format!("{https}/healthz"))
        .send()
        .await
        .expect("HTTPS request");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    let response = client
        .get(format!("{https}/placement/"))
        .send()
        .await
        .expect("HTTPS request");
    assert_eq!(response.status(), StatusCode::OK);
    let body: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(body["versions"][0]["id"], "v1.0", "{body}");

    let plain = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    assert!(
        plain
            .get(format!("{}/healthz", app.base))
            .send()
            .await
            .is_err(),
        "plain HTTP gets no answer from a TLS port"
    );
    assert!(
        plain.get(format!("{https}/healthz")).send().await.is_err(),
        "a client that does not trust the certificate refuses it"
    );
    // The server is still there for a trusting client after the failed handshakes.
    let response = client
        .get(format!("{https}/healthz"))
        .send()
        .await
        .expect("HTTPS request");
    assert_eq!(response.status(), StatusCode::OK);
}
