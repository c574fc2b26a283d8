//! What `--auth keystone` adds to a request whose token berth has cached.
//!
//! A stand-in Keystone on `127.0.0.1:0` answers berth's own authentication and the validation of
//! one token (an admin's); berth validates it once, then believes its cache.
//!
//! * `keystone/identify_cached`: the validation step alone, `Authenticator::identify` on a
//!   request's headers with a cached token (hash the token, look it up, build the caller).
//! * `keystone/request_cached` and `keystone/request_noauth`: the same `GET
//!   /placement/resource_providers` (an empty catalog) over a keep-alive connection to a berth in
//!   `keystone` mode with the cached token, and to one in `noauth` mode.
//!
//! Run: `cargo bench -p berth-server --bench keystone` (smoke: `... -- --test`).

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use berth_server::auth::{AuthMode, Authenticator};
use berth_server::config::{Config, ServeArgs};
use berth_server::keystone::{Credentials, Keystone, KeystoneSettings, Secret};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// The one token the stand-in Keystone knows.
const TOKEN: &str = "gAAAAABbench-token-of-an-admin-0123456789abcdefghijklmnopqrstuvwxyz";

/// A token document (expiring long after the benchmark; berth's bound of 300 s applies).
fn token_document() -> serde_json::Value {
    json!({"token": {"expires_at": "2099-01-01T00:00:00.000000Z", "user": {"id": "u1"},
        "project": {"id": "p1", "domain": {"id": "default"}},
        "roles": [{"id": "r1", "name": "admin"}, {"id": "r2", "name": "reader"}]}})
}

/// Serves the stand-in Keystone; returns its v3 URL.
async fn stand_in_keystone() -> String {
    let app = axum::Router::new().route(
        "/v3/auth/tokens",
        post(|| async {
            let mut headers = HeaderMap::new();
            headers.insert(
                "x-subject-token",
                HeaderValue::from_static("berth-own-token"),
            );
            (StatusCode::CREATED, headers, Json(token_document()))
        })
        .merge(get(|headers: HeaderMap| async move {
            match headers.get("x-subject-token").map(HeaderValue::as_bytes) {
                Some(token) if token == TOKEN.as_bytes() => Json(token_document()).into_response(),
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        })),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/v3", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn settings(auth_url: &str) -> KeystoneSettings {
    KeystoneSettings {
        auth_url: auth_url.to_owned(),
        www_authenticate_uri: auth_url.to_owned(),
        credentials: Credentials::ApplicationCredential {
            id: "berth".into(),
            secret: Secret::new("secret"),
        },
        cache_bound: Duration::from_secs(300),
        cache_entries: 10_000,
        timeout: Duration::from_secs(5),
        service_token_roles: vec!["service".into()],
    }
}

async fn berth(config_text: Option<String>, dir: &tempfile::TempDir) -> berth_server::Running {
    let config_file = config_text.map(|text| {
        let path = dir.path().join("berth.toml");
        std::fs::write(&path, text).expect("write config");
        path
    });
    let args = ServeArgs {
        listen: Some("127.0.0.1:0".into()),
        database: Some(format!(
            "sqlite://{}",
            dir.path()
                .join(format!("berth-{}.db", config_file.is_some()))
                .display()
        )),
        config: config_file,
        ..ServeArgs::default()
    };
    let config = Config::from_args(&args).expect("config");
    berth_server::start(&config).await.expect("server starts")
}

fn keystone(c: &mut Criterion) {
    let runtime = Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let auth_url = runtime.block_on(stand_in_keystone());
    let mut group = c.benchmark_group("keystone");

    // The validation step alone.
    let authenticator = Authenticator::new(AuthMode::Keystone, None)
        .expect("authenticator")
        .with_keystone(Arc::new(
            Keystone::new(settings(&auth_url)).expect("keystone"),
        ));
    let mut headers = HeaderMap::new();
    headers.insert("x-auth-token", HeaderValue::from_static(TOKEN));
    let first = runtime.block_on(authenticator.identify(&headers));
    assert!(first.expect("validated").is_admin());
    group.bench_function("identify_cached", |b| {
        b.to_async(&runtime)
            .iter(|| async { black_box(authenticator.identify(black_box(&headers)).await) });
    });

    // A whole request, with a cached token and without authentication.
    let with_keystone = runtime.block_on(berth(
        Some(format!(
            "auth = \"keystone\"\n[keystone]\nauth_url = \"{auth_url}\"\napplication_credential_id = \"berth\"\napplication_credential_secret = \"secret\"\n"
        )),
        &dir,
    ));
    let noauth = runtime.block_on(berth(None, &dir));
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(1)
        .build()
        .expect("client");
    for (name, running, token) in [
        ("request_cached", &with_keystone, Some(TOKEN)),
        ("request_noauth", &noauth, None),
    ] {
        let url = format!("http://{}/placement/resource_providers", running.addr());
        let request = || {
            let mut builder = client.get(&url);
            if let Some(token) = token {
                builder = builder.header("x-auth-token", token);
            }
            builder
        };
        let status = runtime
            .block_on(request().send())
            .expect("request")
            .status();
        assert_eq!(status, reqwest::StatusCode::OK, "{name}");
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                let response = request().send().await.expect("request");
                black_box(response.bytes().await.expect("body"))
            });
        });
    }
    group.finish();
    runtime.block_on(async {
        with_keystone.shutdown().await.expect("shutdown");
        noauth.shutdown().await.expect("shutdown");
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = keystone
}
criterion_main!(benches);
