//! Subscriptions and notifications end to end: a receiver on 127.0.0.1 gets signed
//! notifications for a scripted scenario (capacity crossing a threshold and back, reservation
//! changes, before-end and termination), a failing receiver gets retries with the same
//! `notificationId`, the feed is resumable, and bad subscriptions are refused.

use crate::blazar_leases::{enroll, now_micros, rfc3339};
use crate::support::{LOOPBACK, Options, TestApp, Who, free_port};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The secret of the signed subscriptions.
pub(crate) const SECRET: &str = "s3cret";

/// A request a receiver got: its body and its signature header.
pub(crate) type Got = (Value, Option<String>);

/// A request as received: its raw body and its signature header.
type Raw = (String, Option<String>);

/// What a receiver got: body and signature header of every request.
#[derive(Clone, Default)]
pub(crate) struct Received {
    pub(crate) got: Arc<Mutex<Vec<Got>>>,
    /// Every request's raw body and signature header, as received.
    raw: Arc<Mutex<Vec<Raw>>>,
    /// Answer 500 to this many requests first.
    failures: Arc<Mutex<u32>>,
}

async fn receive(State(received): State<Received>, headers: HeaderMap, body: String) -> AxumStatus {
    let signature = headers
        .get("x-berth-signature")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    received.record(body, signature);
    let mut failures = received.failures.lock().expect("lock");
    match *failures {
        0 => AxumStatus::OK,
        _ => {
            *failures -= 1;
            AxumStatus::INTERNAL_SERVER_ERROR
        }
    }
}

/// A receiver on 127.0.0.1 port 0; its URL and what it gets.
pub(crate) async fn receiver(failures: u32) -> (String, Received, tokio::task::JoinHandle<()>) {
    let received = Received {
        failures: Arc::new(Mutex::new(failures)),
        ..Received::default()
    };
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    (format!("http://{addr}/hook"), received, server)
}

/// Waits until `done` holds for what was received (at most about 10 s).
pub(crate) async fn wait_until(received: &Received, done: impl Fn(&[Got]) -> bool) {
    for _ in 0..200 {
        if done(&received.got.lock().expect("lock")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "not received in time; got {:#?}",
        received.got.lock().expect("lock")
    );
}

pub(crate) fn of_type<'a>(got: &'a [Got], kind: &str) -> Vec<&'a Value> {
    got.iter()
        .map(|(body, _)| body)
        .filter(|b| b["notificationType"] == kind)
        .collect()
}

impl Received {
    /// Records one request: its body (parsed when it is JSON) and its signature header.
    pub(crate) fn record(&self, body: String, signature: Option<String>) {
        let value = serde_json::from_str(&body).unwrap_or_else(|_| Value::String(body.clone()));
        self.got
            .lock()
            .expect("lock")
            .push((value, signature.clone()));
        self.raw.lock().expect("lock").push((body, signature));
    }
}

/// Asserts that every request received was signed with [`SECRET`]: its header is
/// `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body as received>">`, computed here.
/// Every body received is its documented wire type, written back byte for byte: a capacity
/// notification or a reservation notification.
fn bodies_are_wire_types(received: &Received) {
    use berth_api::promise::{CapacityNotification, ReservationNotification};
    for (body, _) in received.raw.lock().expect("lock").iter() {
        let written = match body.contains(r#""notificationType":"CapacityChange""#) {
            true => serde_json::from_str::<CapacityNotification>(body)
                .and_then(|typed| serde_json::to_string(&typed)),
            false => serde_json::from_str::<ReservationNotification>(body)
                .and_then(|typed| serde_json::to_string(&typed)),
        };
        assert_eq!(written.expect("reads as its type"), *body);
    }
}

pub(crate) fn checks_signatures(received: &Received) {
    use hmac::{KeyInit, Mac};
    for (body, header) in received.raw.lock().expect("lock").iter() {
        let header = header
            .as_deref()
            .unwrap_or_else(|| panic!("unsigned: {body}"));
        let (t, v1) = header
            .strip_prefix("t=")
            .and_then(|rest| rest.split_once(",v1="))
            .expect("t=...,v1=...");
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).expect("key");
        mac.update(format!("{t}.{body}").as_bytes());
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            v1, expected,
            "the signature covers the timestamp and the body"
        );
        assert!(t.parse::<u64>().is_ok(), "t is a unix time: {header}");
    }
}

#[tokio::test]
async fn a_scripted_scenario_delivers_exactly_the_expected_signed_notifications() {
    let app = TestApp::spawn_allowing_loopback().await;
    enroll(&app, "cn1", "az1", 16).await;
    enroll(&app, "cn2", "az1", 16).await;
    let (url, received, server) = receiver(0).await;
    let (status, capacity) = app
        .post(
            "/promise/capacity/compute/subscribe",
            json!({"zoneId": "az1", "computeResourceTypeId": "numCpuCores", "callbackUri": url,
               "authentication": {"secret": SECRET},
               "threshold": {"thresholdType": "absoluteValue",
                             "threshold": {"capacity_info": "available", "condition": "lt",
                                           "value": 20}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{capacity}");
    assert!(capacity["capacityChangeSubscriptionId"].is_string());
    let (status, changes) = app
        .post(
            "/promise/reservation/subscribe",
            json!({"inputFilter": "all", "callbackUri": url, "authentication": {"secret": SECRET}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{changes}");
    // Reserve until available capacity crosses below 20, then cancel so it crosses back.
    let now = now_micros();
    let pool = |cores: u32, end: i64| {
        json!({"endTime": rfc3339(end), "zoneId": "az1",
               "computePoolReservation": {"numCpuCores": cores, "numVcInstances": cores / 2,
                                          "virtualMemSize": 512 * cores}})
    };
    let (status, big) = app
        .post(
            "/promise/reservation/compute/create",
            pool(16, now + 3_600_000_000),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{big}");
    let big = big["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    wait_until(&received, |got| of_type(got, "CapacityChange").len() == 1).await;
    let (status, _) = app
        .post(
            "/promise/cancel-reservation",
            json!({"reservation-id": big}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    wait_until(&received, |got| of_type(got, "CapacityChange").len() == 2).await;
    // A short reservation reaches its before-end warning and its end.
    let (status, short) = app
        .post(
            "/promise/reservation/compute/create",
            pool(2, now_micros() + 3_000_000),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{short}");
    let short = short["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    wait_until(&received, |got| {
        of_type(got, "Termination").iter().any(|b| {
            b["reservationId"] == short.as_str() && b["changeType"] == "lease.event.end_lease"
        })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    checks_signatures(&received);
    bodies_are_wire_types(&received);
    let got = received.got.lock().expect("lock").clone();
    // Capacity fired on crossing only: entered, then left.
    let crossings: Vec<&Value> = of_type(&got, "CapacityChange");
    assert_eq!(crossings.len(), 2, "{crossings:?}");
    assert_eq!(crossings[0]["crossing"], "entered");
    assert_eq!(crossings[0]["capacityInformation"]["available"], 16);
    assert_eq!(crossings[1]["crossing"], "left");
    assert_eq!(crossings[1]["capacityInformation"]["available"], 32);
    // The big reservation: created, started, cancelled.
    // (Deliveries due together are sent concurrently, so they may arrive in any order.)
    let about = |id: &str| -> Vec<String> {
        let mut kinds: Vec<String> = got
            .iter()
            .filter(|(b, _)| b["reservationId"] == id)
            .map(|(b, _)| b["changeType"].as_str().unwrap_or("").to_owned())
            .collect();
        kinds.sort();
        kinds
    };
    // (Its window is one hour: the before-end warning, an hour before the end, is at its start.)
    assert_eq!(
        about(&big),
        [
            "lease.create",
            "lease.delete",
            "lease.event.before_end_lease",
            "lease.event.start_lease"
        ]
    );
    assert_eq!(
        about(&short),
        [
            "lease.create",
            "lease.event.before_end_lease",
            "lease.event.end_lease",
            "lease.event.start_lease"
        ]
    );
    let warning: Vec<&Value> = of_type(&got, "BeforeEndWarning")
        .into_iter()
        .filter(|b| b["reservationId"] == short.as_str())
        .collect();
    assert_eq!(warning.len(), 1);
    assert!(
        warning[0]["remainingSeconds"]
            .as_i64()
            .is_some_and(|s| s <= 3),
        "{warning:?}"
    );
    // No duplicates: the receiver never failed, so every notification came once.
    let mut ids: Vec<&str> = got
        .iter()
        .filter_map(|(b, _)| b["notificationId"].as_str())
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "no notification twice");
    server.abort();
}

#[tokio::test]
async fn a_failing_receiver_gets_retries_with_the_same_notification_id() {
    let app = TestApp::spawn_allowing_loopback().await;
    enroll(&app, "cn1", "az1", 16).await;
    let (url, received, server) = receiver(2).await;
    let (status, _) = app
        .post(
            "/promise/reservation/subscribe",
            json!({"inputFilter": "all", "callbackUri": url}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, made) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(now_micros() + 3_600_000_000),
               "computePoolReservation": {"numCpuCores": 2, "numVcInstances": 1,
                                          "virtualMemSize": 512}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    wait_until(&received, |got| got.len() >= 3).await;
    let got = received.got.lock().expect("lock").clone();
    assert!(
        got.iter()
            .all(|(b, _)| b["notificationId"] == got[0].0["notificationId"])
    );
    assert!(
        got.iter().all(|(_, signature)| signature.is_none()),
        "no secret, no signature"
    );
    // Delivered on the third attempt: nothing is left pending.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (status, left) = app.get("/promise/deliveries", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(left["deliveries"], json!([]), "{left}");
    server.abort();
}

#[tokio::test]
async fn the_feed_is_resumable_and_waits() {
    let app = TestApp::spawn().await;
    enroll(&app, "cn1", "az1", 16).await;
    let create = || {
        json!({"startTime": rfc3339(now_micros() + 3_600_000_000),
               "computePoolReservation": {"numCpuCores": 2, "numVcInstances": 1,
                                          "virtualMemSize": 512}})
    };
    for _ in 0..3 {
        let (status, _) = app
            .post("/promise/reservation/compute/create", create())
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, first) = app.get("/promise/notifications?limit=2", None).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["notifications"].as_array().map(Vec::len), Some(2));
    let next = first["next"].as_u64().expect("cursor");
    let (_, rest) = app
        .get(&format!("/promise/notifications?after={next}"), None)
        .await;
    assert_eq!(
        rest["notifications"].as_array().map(Vec::len),
        Some(1),
        "{rest}"
    );
    let end = rest["next"].as_u64().expect("cursor");
    let started = std::time::Instant::now();
    let (_, empty) = app
        .get(&format!("/promise/notifications?after={end}&wait=1"), None)
        .await;
    assert_eq!(empty["notifications"], json!([]));
    assert!(started.elapsed() >= Duration::from_millis(900), "it waited");
    // A long poll returns as soon as something happens.
    let waiting = {
        let url = format!("{}/promise/notifications?after={end}&wait=10", app.base);
        let client = app.client.clone();
        tokio::spawn(async move {
            client
                .get(url)
                .send()
                .await
                .expect("send")
                .json::<Value>()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = app
        .post("/promise/reservation/compute/create", create())
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let woke = waiting.await.expect("join").expect("json");
    assert_eq!(
        woke["notifications"].as_array().map(Vec::len),
        Some(1),
        "{woke}"
    );
}

#[tokio::test]
async fn bad_subscriptions_are_refused() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        callback_allow: vec![LOOPBACK.to_owned()],
        ..Options::default()
    })
    .await;
    let member = Who {
        project: "p1",
        user: "u1",
        roles: "member",
    };
    let other = Who {
        project: "p2",
        user: "u2",
        roles: "member",
    };
    let threshold =
        json!({"threshold": {"capacity_info": "available", "condition": "lt", "value": 5}});
    let cases = [
        (
            "/promise/reservation/subscribe",
            json!({"inputFilter": "all", "callbackUri": "ftp://x/y"}),
        ),
        (
            "/promise/reservation/subscribe",
            json!({"inputFilter": "all", "callbackUri": "not a url"}),
        ),
        (
            "/promise/reservation/subscribe",
            json!({"inputFilter": "all", "callbackUri": "/relative"}),
        ),
        (
            "/promise/reservation/subscribe",
            json!({"callbackUri": "http://127.0.0.1:9/x"}),
        ),
        (
            "/promise/capacity/compute/subscribe",
            json!({"computeResourceTypeId": "numCpuCores", "callbackUri": "http://127.0.0.1:9/x"}),
        ),
        (
            "/promise/capacity/compute/subscribe",
            json!({"computeResourceTypeId": "gpus", "callbackUri": "http://127.0.0.1:9/x",
                "threshold": threshold}),
        ),
        (
            "/promise/capacity/compute/subscribe",
            json!({"callbackUri": "http://127.0.0.1:9/x", "threshold": threshold}),
        ),
        (
            "/promise/capacity/compute/subscribe",
            json!({"computeResourceTypeId": "numCpuCores", "callbackUri": "http://127.0.0.1:9/x",
                "threshold": {"threshold": {"capacity_info": "spare", "condition": "lt",
                                            "value": 5}}}),
        ),
        (
            "/promise/capacity/compute/subscribe",
            json!({"computeResourceTypeId": "numCpuCores", "callbackUri": "http://127.0.0.1:9/x",
                "threshold": {"threshold": {"capacity_info": "available", "condition": "about",
                                            "value": 5}}}),
        ),
    ];
    for (path, body) in cases {
        let (status, answer) = app
            .call_as(member, Method::POST, path, Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {body}: {answer}");
    }
    let (status, made) = app
        .call_as(
            member,
            Method::POST,
            "/promise/reservation/subscribe",
            Some(json!({"inputFilter": "all", "callbackUri": "http://127.0.0.1:9/x"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["reservationChangeSubscriptionId"]
        .as_str()
        .expect("id");
    let path = format!("/promise/subscriptions/{id}");
    for method in [Method::GET, Method::DELETE] {
        let (status, _) = app.call_as(other, method, &path, None).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "another project's subscription"
        );
    }
    let (status, _) = app.call_as(member, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

/// A receiver that accepts connections and never answers; its URL and how many it accepted.
async fn silent_receiver() -> (String, Arc<Mutex<u32>>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&accepted);
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            *counter.lock().expect("lock") += 1;
            held.push(socket);
        }
    });
    (format!("http://{addr}/hook"), accepted, server)
}

/// A receiver that redirects every request to `target`.
async fn redirecting_receiver(target: String) -> (String, tokio::task::JoinHandle<()>) {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let target = target.clone();
            async move { (AxumStatus::TEMPORARY_REDIRECT, [("location", target)]) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    (format!("http://{addr}/hook"), server)
}

#[tokio::test]
async fn a_silent_or_redirecting_receiver_never_holds_up_the_others() {
    let app = TestApp::spawn_allowing_loopback().await;
    enroll(&app, "cn1", "az1", 16).await;
    let (silent, accepted, silent_server) = silent_receiver().await;
    let (good, received, good_server) = receiver(0).await;
    let (target, redirected_to, target_server) = receiver(0).await;
    let (redirecting, redirect_server) = redirecting_receiver(target).await;
    for url in [&silent, &redirecting, &good] {
        let (status, body) = app
            .post(
                "/promise/reservation/subscribe",
                json!({"inputFilter": "all", "callbackUri": url}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let create = || {
        json!({"startTime": rfc3339(now_micros() + 3_600_000_000),
               "computePoolReservation": {"numCpuCores": 2, "numVcInstances": 1,
                                          "virtualMemSize": 512}})
    };
    let started = std::time::Instant::now();
    for _ in 0..3 {
        let (status, _) = app
            .post("/promise/reservation/compute/create", create())
            .await;
        assert_eq!(status, StatusCode::CREATED);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    wait_until(&received, |got| got.len() == 3).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the good receiver is not held up by the silent one (whose attempts time out after 5 s)"
    );
    assert!(
        *accepted.lock().expect("lock") >= 1,
        "the silent receiver was tried"
    );
    // The redirect is not followed: it counts as a failure, retried later.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        redirected_to.got.lock().expect("lock").is_empty(),
        "no redirect followed"
    );
    let (_, pending) = app.get("/promise/deliveries", None).await;
    let errors: Vec<&str> = pending["deliveries"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|d| d["lastError"].as_str())
        .collect();
    assert!(errors.iter().any(|e| e.contains("307")), "{pending}");
    for server in [silent_server, good_server, target_server, redirect_server] {
        server.abort();
    }
}

/// A `berth` process, killed (SIGKILL) and reaped when dropped, so a failing test never
/// leaves it running.
struct Berth(std::process::Child);

impl Berth {
    /// SIGKILL, and wait for it to be gone.
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Berth {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `berth` binary serving `dir` on `port`, once it answers.
async fn serve(dir: &std::path::Path, port: u16) -> Berth {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--callback-allow",
            LOOPBACK,
            "--data-dir",
        ])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let child = Berth(child);
    let client = reqwest::Client::new();
    for _ in 0..300 {
        let ready = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(child);
    panic!("berth did not become ready");
}

#[tokio::test]
async fn no_notification_is_lost_when_berth_is_killed_while_the_receiver_is_down() {
    let dir = tempfile::tempdir().expect("dir");
    let (port, receiver_port) = (free_port(), free_port());
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut berth = serve(dir.path(), port).await;
    let call = |path: &str, body: Value| {
        let request = client.post(format!("{base}{path}")).json(&body);
        async move { request.send().await.expect("send").status() }
    };
    let hook = format!("http://127.0.0.1:{receiver_port}/hook");
    let status = call(
        "/promise/reservation/subscribe",
        json!({"inputFilter": "all", "callbackUri": hook, "authentication": {"secret": SECRET}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let status = call(
        "/reservation/v1/os-hosts",
        json!({"name": "cn1", "vcpus": 16, "memory_mb": 16384, "local_gb": 100}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    for _ in 0..5 {
        let status = call(
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(now_micros() + 3_600_000_000),
                   "computePoolReservation": {"numCpuCores": 2, "numVcInstances": 1,
                                              "virtualMemSize": 512}}),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    // Attempts fail (nobody listens); then berth dies without a chance to clean up.
    tokio::time::sleep(Duration::from_millis(800)).await;
    berth.kill();
    let received = Received::default();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", receiver_port))
        .await
        .expect("bind the receiver's port");
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    let mut berth = serve(dir.path(), port).await;
    for _ in 0..400 {
        let ids: std::collections::BTreeSet<String> = received
            .got
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|(b, _)| b["notificationId"].as_str().map(str::to_owned))
            .collect();
        if ids.len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = received.got.lock().expect("lock").clone();
    let ids: std::collections::BTreeSet<&str> = got
        .iter()
        .filter_map(|(b, _)| b["notificationId"].as_str())
        .collect();
    assert_eq!(
        ids.len(),
        5,
        "every notification arrives after the restart: {got:?}"
    );
    checks_signatures(&received);
    berth.kill();
    server.abort();
}

#[tokio::test]
async fn a_flavor_threshold_watches_how_many_instances_fit() {
    let app = TestApp::spawn_allowing_loopback().await;
    enroll(&app, "cn1", "az1", 16).await;
    enroll(&app, "cn2", "az1", 16).await;
    let (status, _) = app
        .post(
            "/promise/flavors",
            json!({"id": "small", "name": "m1.small", "vcpus": 2, "ram": 2048, "disk": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (url, received, server) = receiver(0).await;
    let subscribe = |flavor: &str, info: &str| {
        json!({"zoneId": "az1", "computeResourceTypeId": "vcInstances", "flavorId": flavor,
               "callbackUri": url, "threshold": {"threshold": {"capacity_info": info,
                                                              "condition": "lt", "value": 10}}})
    };
    let (status, _) = app
        .post(
            "/promise/capacity/compute/subscribe",
            subscribe("m9.huge", "available"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "unknown flavor");
    let (status, _) = app
        .post(
            "/promise/capacity/compute/subscribe",
            subscribe("m1.small", "reserved"),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a flavor threshold is on available"
    );
    let (status, made) = app
        .post(
            "/promise/capacity/compute/subscribe",
            subscribe("m1.small", "available"),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    // 16 instances of m1.small fit; a reservation of 8 of them leaves 8, under 10.
    let (status, _) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"endTime": rfc3339(now_micros() + 3_600_000_000), "zoneId": "az1",
               "computePoolReservation": {"numCpuCores": 16, "numVcInstances": 8,
                                          "virtualMemSize": 16384}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    wait_until(&received, |got| !of_type(got, "CapacityChange").is_empty()).await;
    let got = received.got.lock().expect("lock").clone();
    let crossing = of_type(&got, "CapacityChange")[0].clone();
    assert_eq!(crossing["flavorId"], "m1.small");
    assert_eq!(crossing["crossing"], "entered");
    assert_eq!(
        crossing["capacityInformation"]["available"], 8,
        "{crossing}"
    );
    server.abort();
}

/// The feed entries `who` reads after cursor 0, once at least `wanted` capacity notifications
/// are among them (at most about 10 s).
async fn feed_with_capacity(app: &TestApp, who: Who<'_>, wanted: usize) -> Vec<Value> {
    for _ in 0..200 {
        let (status, feed) = app
            .call_as(who, Method::GET, "/promise/notifications?limit=1000", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{feed}");
        let entries = feed["notifications"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let capacity = entries
            .iter()
            .filter(|e| e["notification"]["notificationType"] == "CapacityChange")
            .count();
        if capacity >= wanted {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{wanted} capacity notifications never reached {who:?}'s feed");
}

#[tokio::test]
async fn feed_only_subscriptions_are_read_from_the_feed_and_nothing_is_posted() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        callback_allow: vec![LOOPBACK.to_owned()],
        ..Options::default()
    })
    .await;
    let admin = Who {
        project: "admin",
        user: "root",
        roles: "admin",
    };
    let member = Who {
        project: "p1",
        user: "u1",
        roles: "member",
    };
    let other = Who {
        project: "p2",
        user: "u2",
        roles: "member",
    };
    for name in ["cn1", "cn2"] {
        let body = json!({"name": name, "availability_zone": "az1", "vcpus": 16,
                          "memory_mb": 16384, "local_gb": 100});
        let (status, made) = app
            .call_as(admin, Method::POST, "/reservation/v1/os-hosts", Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
    }
    let threshold = json!({"thresholdType": "absoluteValue",
        "threshold": {"capacity_info": "available", "condition": "lt", "value": 20}});
    // Feed-only: no callbackUri, as the seed's examples subscribe.
    let (status, quiet) = app
        .call_as(
            member,
            Method::POST,
            "/promise/capacity/compute/subscribe",
            Some(
                json!({"zoneId": "az1", "computeResourceTypeId": "numCpuCores",
                        "threshold": threshold}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{quiet}");
    assert!(
        quiet["subscription"].get("callbackUri").is_none(),
        "{quiet}"
    );
    let quiet_id = quiet["capacityChangeSubscriptionId"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, changes) = app
        .call_as(
            member,
            Method::POST,
            "/promise/reservation/subscribe",
            Some(json!({"inputFilter": "all"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{changes}");
    // The same threshold with a callback: POSTed, and in the feed too.
    let (url, received, server) = receiver(0).await;
    let (status, loud) = app
        .call_as(
            member,
            Method::POST,
            "/promise/capacity/compute/subscribe",
            Some(
                json!({"zoneId": "az1", "computeResourceTypeId": "numCpuCores",
                        "threshold": threshold, "callbackUri": url}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{loud}");
    let loud_id = loud["capacityChangeSubscriptionId"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, listed) = app
        .call_as(member, Method::GET, "/promise/subscriptions", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let listed = listed["subscriptions"].as_array().expect("list");
    assert_eq!(listed.len(), 3, "{listed:?}");
    let without: Vec<&Value> = listed
        .iter()
        .filter(|s| s.get("callbackUri").is_none())
        .collect();
    assert_eq!(without.len(), 2, "the feed-only ones name no callback");
    let (status, shown) = app
        .call_as(
            member,
            Method::GET,
            &format!("/promise/subscriptions/{quiet_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert!(
        shown["subscription"].get("callbackUri").is_none(),
        "{shown}"
    );
    // Reserving half the zone's cores takes available capacity below 20.
    let (status, made) = app
        .call_as(
            member,
            Method::POST,
            "/promise/reservation/compute/create",
            Some(
                json!({"endTime": rfc3339(now_micros() + 3_600_000_000), "zoneId": "az1",
                        "computePoolReservation": {"numCpuCores": 16, "numVcInstances": 8,
                                                   "virtualMemSize": 8192}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let reservation = made["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    let feed = feed_with_capacity(&app, member, 2).await;
    let capacity: Vec<&Value> = feed
        .iter()
        .map(|e| &e["notification"])
        .filter(|n| n["notificationType"] == "CapacityChange")
        .collect();
    for id in [&quiet_id, &loud_id] {
        let mine: Vec<&&Value> = capacity
            .iter()
            .filter(|n| {
                n["notificationId"]
                    .as_str()
                    .is_some_and(|i| i.starts_with(id.as_str()))
            })
            .collect();
        assert_eq!(mine.len(), 1, "one crossing for {id}: {capacity:?}");
        assert_eq!(mine[0]["crossing"], "entered");
        assert_eq!(mine[0]["capacityInformation"]["available"], 16);
        assert_eq!(
            mine[0]["resourceDescriptor"]["computeResourceTypeId"],
            "numCpuCores"
        );
        assert!(mine[0].get("project_id").is_none(), "{:?}", mine[0]);
    }
    // In order with the reservation's own entries: its creation comes first.
    let position = |wanted: &dyn Fn(&Value) -> bool| {
        feed.iter()
            .position(|e| wanted(&e["notification"]))
            .expect("present")
    };
    let created = position(&|n| n["reservationId"] == reservation.as_str());
    let crossed = position(&|n| n["notificationType"] == "CapacityChange");
    assert!(created < crossed, "{feed:?}");
    let cursors: Vec<u64> = feed.iter().filter_map(|e| e["cursor"].as_u64()).collect();
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    // Another project sees none of it; an admin sees it all.
    let (status, theirs) = app
        .call_as(
            other,
            Method::GET,
            "/promise/notifications?limit=1000",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    assert_eq!(theirs["notifications"], json!([]), "{theirs}");
    let everything = feed_with_capacity(&app, admin, 2).await;
    assert!(everything.len() >= feed.len(), "{everything:?}");
    // The callback got its own notification, as the feed shows it; the feed-only subscriptions
    // have no delivery, pending or dead.
    wait_until(&received, |got| !got.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = received.got.lock().expect("lock").clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].0["notificationId"]
            .as_str()
            .is_some_and(|i| i.starts_with(loud_id.as_str())),
        "{got:?}"
    );
    assert!(
        capacity.contains(&&got[0].0),
        "the feed shows the body POSTed"
    );
    let (status, deliveries) = app
        .call_as(admin, Method::GET, "/promise/deliveries", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{deliveries}");
    assert_eq!(deliveries["deliveries"], json!([]), "{deliveries}");
    server.abort();
}
