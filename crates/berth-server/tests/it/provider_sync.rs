//! Provider clouds kept current: a second berth acts as the remote cloud's Placement, a small
//! Keystone stand-in (v3 password authentication, a catalog naming that Placement in
//! RegionOne) issues the tokens, and berth, reading the cloud every second, imports its
//! provider under the cloud's id, counts the remote usage as taken, admits and refuses Promise
//! reservations on it as on local capacity, follows a remote inventory change, marks the cloud
//! unknown (refusing new reservations with the reason) while the remote berth is stopped, and
//! clears that by itself when it returns. While nothing changes, a read costs one listing.

use crate::blazar_leases::{LEASES, enroll, rfc3339, tomorrow};
use crate::provider_clouds::{PASSWORD, imported_node, inventory, until, until_vcpu};
use crate::support::{Options, TestApp, free_port};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// The key berth seals credentials with in this test.
pub(crate) const KEY: &str = "8a0c3a9e7d21b84c6e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f";
/// A day in microseconds.
pub(crate) const DAY: i64 = 86_400_000_000;

/// The Keystone stand-in's state: where Placement is and how many tokens it issued.
#[derive(Clone)]
pub(crate) struct FakeKeystone {
    pub(crate) placement: String,
    pub(crate) issued: Arc<AtomicUsize>,
}

async fn tokens(
    State(keystone): State<FakeKeystone>,
    Json(body): Json<Value>,
) -> (AxumStatus, HeaderMap, Json<Value>) {
    let password = &body["auth"]["identity"]["password"]["user"]["password"];
    if password != PASSWORD {
        return (
            AxumStatus::UNAUTHORIZED,
            HeaderMap::new(),
            Json(json!({"error": {"code": 401}})),
        );
    }
    let n = keystone.issued.fetch_add(1, Ordering::SeqCst);
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-subject-token",
        format!("token-{n}").parse().expect("header"),
    );
    let token = json!({"token": {
        "project": {"id": "p-promise", "name": "promise"},
        "user": {"id": "u-promise", "name": "promise_user"},
        "catalog": [{"type": "placement", "endpoints": [
            {"interface": "public", "region_id": "RegionOne", "url": keystone.placement}]}]}});
    (AxumStatus::CREATED, headers, Json(token))
}

/// Serves the Keystone stand-in on a loopback port; its `/v3` URL.
pub(crate) async fn start_keystone(keystone: FakeKeystone) -> String {
    let app = axum::Router::new()
        .route("/v3/auth/tokens", axum::routing::post(tokens))
        .with_state(keystone);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v3")
}

/// The remote berth, listening at `listen`, over `database` when given.
pub(crate) async fn remote_berth(listen: &str, database: Option<String>) -> TestApp {
    TestApp::spawn_with(Options {
        listen: Some(listen.to_owned()),
        database,
        ..Options::default()
    })
    .await
}

/// Registers the cloud whose Keystone is at `keystone` (its `/v3` URL) with `app`, as the seed's
/// `add-provider` request does; its provider id.
pub(crate) async fn register_cloud(app: &TestApp, keystone: &str) -> String {
    let (status, body) = app
        .post(
            "/promise/add-provider",
            json!({ "provider-type": "openstack", "endpoint": keystone,
                    "username": "promise_user", "password": PASSWORD,
                    "tenant": { "name": "promise" } }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["provider-id"]
        .as_str()
        .expect("provider-id")
        .to_owned()
}

/// berth, reading provider clouds every second.
pub(crate) async fn local_berth(dir: &Path) -> TestApp {
    berth_reading_every(dir, 1).await
}

/// berth, reading provider clouds every `seconds` (and whenever woken).
pub(crate) async fn berth_reading_every(dir: &Path, seconds: u64) -> TestApp {
    let config = dir.join("berth-sync.toml");
    std::fs::write(
        &config,
        format!(
            "[provider_clouds]\ncredential_key = \"{KEY}\"\nsync_interval_seconds = {seconds}\n"
        ),
    )
    .expect("write the configuration");
    TestApp::spawn_with(Options {
        config: Some(config),
        ..Options::default()
    })
    .await
}

/// A pass-through to the remote berth that keeps the path of every `GET` it forwards. The
/// remote's own `/metrics` cannot count them: the metrics recorder is the test process's, so
/// every berth of every test running beside this one adds to it. While the remote is stopped it
/// closes each connection without an answer, as the remote's closed port would refuse it.
#[derive(Clone)]
struct Counting {
    upstream: String,
    client: reqwest::Client,
    gets: Arc<Mutex<Vec<String>>>,
}

impl Counting {
    /// Serves the pass-through to `upstream` on a loopback port; it and its base URL.
    async fn start(upstream: &str) -> (Counting, String) {
        let counting = Counting {
            upstream: upstream.to_owned(),
            client: reqwest::Client::new(),
            gets: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let serving = counting.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counting = serving.clone();
                let service = hyper::service::service_fn(move |request| {
                    let counting = counting.clone();
                    async move { counting.forward(request).await }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
                );
            }
        });
        (counting, format!("http://{addr}"))
    }

    /// Forwards `request` upstream; an error (the connection closed unanswered) when upstream
    /// cannot be reached.
    async fn forward(
        &self,
        request: axum::http::Request<hyper::body::Incoming>,
    ) -> Result<axum::http::Response<axum::body::Body>, String> {
        let (parts, body) = request.into_parts();
        if parts.method == Method::GET {
            let mut gets = self.gets.lock().expect("lock");
            gets.push(parts.uri.path().to_owned());
        }
        let body = axum::body::to_bytes(axum::body::Body::new(body), usize::MAX)
            .await
            .map_err(|error| error.to_string())?;
        let mut forwarded = self
            .client
            .request(parts.method, format!("{}{}", self.upstream, parts.uri))
            .body(body);
        for (name, value) in parts.headers.iter().filter(|(name, _)| *name != "host") {
            forwarded = forwarded.header(name, value);
        }
        let answer = forwarded.send().await.map_err(|error| error.to_string())?;
        let mut response = axum::http::Response::builder().status(answer.status());
        for (name, value) in answer.headers() {
            response = response.header(name, value);
        }
        let body = answer.bytes().await.map_err(|error| error.to_string())?;
        response
            .body(axum::body::Body::from(body))
            .map_err(|error| error.to_string())
    }

    /// How many `GET`s it forwarded whose path ends with `end`.
    fn gets(&self, end: &str) -> usize {
        let gets = self.gets.lock().expect("lock");
        gets.iter().filter(|path| path.ends_with(end)).count()
    }
}

/// A Promise reservation of one instance with `cores` cores in RegionOne, tomorrow.
async fn reserve(app: &TestApp, cores: u64) -> (StatusCode, Value) {
    reserve_on(app, None, cores).await
}

/// [`reserve`] restricted by `member` (`("provider-id", id)` or `("source", ...)`).
async fn reserve_on(
    app: &TestApp,
    member: Option<(&str, &str)>,
    cores: u64,
) -> (StatusCode, Value) {
    let start = tomorrow();
    let mut body = json!({"zone": "RegionOne", "start": rfc3339(start), "end": rfc3339(start + DAY),
               "capacity": {"cores": cores.to_string(), "ram": "1024", "instances": "1"}});
    if let Some((name, value)) = member {
        body[name] = json!(value);
    }
    app.post("/promise/create-reservation", body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_clouds_capacity_is_imported_kept_current_and_unknown_while_unreachable() {
    // The remote cloud: a berth serving Placement with one compute node, and its Keystone.
    let listen = format!("127.0.0.1:{}", free_port());
    let remote = remote_berth(&listen, None).await;
    let node = remote.create_provider("cn-remote", None).await;
    remote.set_inventory(&node, 8, 16384).await;
    // Reached through a pass-through that counts what berth reads.
    let (counting, via) = Counting::start(&remote.base).await;
    let issued = Arc::new(AtomicUsize::new(0));
    let keystone = start_keystone(FakeKeystone {
        placement: format!("{via}/placement"),
        issued: Arc::clone(&issued),
    })
    .await;

    // Registered with the seed's request.
    let dir = tempfile::tempdir().expect("dir");
    let app = local_berth(dir.path()).await;
    // Registered with the seed's request (its v2.0 token URL).
    let endpoint = keystone.replace("/v3", "/v2.0/tokens");
    let id = register_cloud(&app, &endpoint).await;

    // The remote inventory appears, under the cloud's id, in the cloud's region.
    let shown = until(&app, &id, "imported", |p| {
        p["sync"]["state"] == "ok" && p["sync"]["providers"] == 1
    })
    .await;
    assert!(shown["sync"]["last-sync"].is_string(), "{shown}");
    let (local, imported) = imported_node(&app, &id, &node).await;
    assert_eq!(inventory(&app, &local, "VCPU").await, (8, 0));
    // It is the remote cloud's: local Placement writes to it are refused, naming the cloud.
    let (status, refused) = app
        .call(
            Method::PUT,
            &format!("/placement/resource_providers/{local}/traits"),
            Some("1.39"),
            Some(json!({"resource_provider_generation": imported["generation"], "traits": []})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused.to_string().contains(&id), "{refused}");
    let (_, hosts) = app.get("/reservation/v1/os-hosts", None).await;
    let host = hosts["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .find(|h| h["hypervisor_hostname"] == format!("{id}:cn-remote"))
        .unwrap_or_else(|| panic!("the imported node is a host: {hosts}"))
        .clone();
    assert_eq!(host["availability_zone"], "RegionOne", "{host}");
    assert_eq!(host["provider_cloud"], id.as_str(), "{host}");

    // Remote usage counts: 2 of the 8 VCPU used there are taken here.
    let consumer = Uuid::from_u128(0x5eed_c0de);
    let (status, body) = remote
        .call(
            Method::PUT,
            &format!("/placement/allocations/{consumer}"),
            Some("1.39"),
            Some(json!({"allocations": {&node: {"resources": {"VCPU": 2}}},
                        "project_id": "p", "user_id": "u", "consumer_generation": null,
                        "consumer_type": "INSTANCE"})),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    until_vcpu(&app, &local, (8, 2)).await;

    // A reservation on the provider admits and refuses as on local capacity: 6 are free.
    let (status, made) = reserve(&app, 6).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["result"], "ok", "{made}");
    let (status, refused) = reserve(&app, 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["result"], "conflict", "{refused}");

    // A remote inventory change shows.
    remote.set_inventory(&node, 16, 16384).await;
    until_vcpu(&app, &local, (16, 2)).await;
    let tokens_before = issued.load(Ordering::SeqCst);
    assert!(tokens_before >= 2, "one token to register, one to read");
    // Nothing changing costs one listing a read: no provider's details are read again, and the
    // token is reused. Counted from the end of a whole read begun after the change showed (the
    // second read to end from now: the first may be the one that brought the change).
    for _ in 0..2 {
        let (_, shown) = app.get(&format!("/promise/providers/{id}"), None).await;
        let seen = shown["provider"]["sync"]["last-sync"].clone();
        until(&app, &id, "read again", |p| p["sync"]["last-sync"] != seen).await;
    }
    let before = (
        counting.gets("/inventories"),
        counting.gets("/resource_providers"),
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = (
        counting.gets("/inventories"),
        counting.gets("/resource_providers"),
    );
    assert!(
        before.0 >= 2,
        "details read at the import and the change: {before:?}"
    );
    assert_eq!(after.0, before.0, "no details read while nothing changed");
    assert!(
        after.1 >= before.1 + 2,
        "listed every second: {before:?} {after:?}"
    );
    assert_eq!(
        issued.load(Ordering::SeqCst),
        tokens_before,
        "the token is reused"
    );

    // The remote berth stopped: unknown, and new reservations on it are refused, naming it.
    let (kept, database) = remote.stop().await;
    let shown = until(&app, &id, "unknown", |p| p["sync"]["state"] == "unknown").await;
    assert!(
        shown["sync"]["last-error"]
            .as_str()
            .is_some_and(|e| e.contains("could not be reached")),
        "{shown}"
    );
    assert!(shown["sync"]["since"].is_string(), "{shown}");
    let (status, refused) = reserve(&app, 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "provider_cloud_unreachable", "{refused}");
    assert!(
        refused["message"].as_str().is_some_and(|m| m.contains(&id)),
        "{refused}"
    );
    let (status, refused) = reserve_on(&app, Some(("provider-id", &id)), 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "provider_cloud_unreachable", "{refused}");
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains(&format!("berth_provider_cloud_up{{provider=\"{id}\"}} 0")),
        "{metrics}"
    );
    // The reservation made before is kept.
    let made_id = made["reservation-id"].as_str().expect("id");
    let (status, lease) = app.get(&format!("{LEASES}/{made_id}"), None).await;
    assert_eq!(status, StatusCode::OK, "the reservation is kept: {lease}");

    // Back: ok again by itself, and the free capacity is offered again.
    let remote = remote_berth(&listen, Some(database)).await;
    until(&app, &id, "ok again", |p| p["sync"]["state"] == "ok").await;
    let (status, made) = reserve(&app, 7).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    // provider-id (or the seed's source) restricts a reservation to the cloud's capacity.
    let source = format!("ResourceProvider:{id}");
    let (status, made) = reserve_on(&app, Some(("source", &source)), 1).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    // A local host in the same zone: the cloud's capacity stays taken, the zone's is not.
    enroll(&app, "local-1", "RegionOne", 8).await;
    let (status, refused) = reserve_on(&app, Some(("provider-id", &id)), 1).await;
    assert_eq!(status, StatusCode::CONFLICT, "all 16 taken: {refused}");
    let (status, made) = reserve(&app, 1).await;
    assert_eq!(status, StatusCode::OK, "on the local host: {made}");
    let nil = Uuid::nil().to_string();
    let (status, refused) = reserve_on(&app, Some(("provider-id", &nil)), 1).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    // The ETSI create takes providerId alike: the cloud's capacity is all taken.
    let start = tomorrow();
    let etsi = |provider: &str| {
        json!({"startTime": rfc3339(start), "endTime": rfc3339(start + DAY), "zoneId": "RegionOne",
               "providerId": provider,
               "computePoolReservation": {"numCpuCores": "1", "numVcInstances": "1",
                                          "virtualMemSize": "512"}})
    };
    let (status, refused) = app
        .post("/promise/reservation/compute/create", etsi(&id))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let (status, refused) = app
        .post("/promise/reservation/compute/create", etsi(&nil))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains(&format!("berth_provider_cloud_up{{provider=\"{id}\"}} 1")),
        "{metrics}"
    );
    drop((remote, kept));
}
