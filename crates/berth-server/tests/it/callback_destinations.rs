//! Where callbacks may go: a `callbackUri` whose host is a literal address of a refused class
//! (in any spelling WHATWG parsing accepts) is a 400 naming the field and the reason, as is one
//! with user info; a host name that resolves to a refused address is refused at delivery,
//! without the receiver ever getting a request; the operator's allow-list lets chosen ranges
//! through; and a member is told only that a delivery failed, never what answered.

use crate::blazar_leases::{now_micros, rfc3339};
use crate::notifications::{receiver, wait_until};
use crate::support::{LOOPBACK, Options, TestApp, Who, free_port};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

const RESERVATIONS: &str = "/promise/reservation/subscribe";
const CAPACITY: &str = "/promise/capacity/compute/subscribe";

/// The body of a subscription to `url` on `path`.
fn subscription(path: &str, url: &str) -> Value {
    match path {
        RESERVATIONS => json!({"inputFilter": "all", "callbackUri": url}),
        _ => json!({"computeResourceTypeId": "numCpuCores", "callbackUri": url,
                    "threshold": {"threshold": {"capacity_info": "available",
                                                "condition": "lt", "value": 5}}}),
    }
}

/// A Promise pool reservation starting in an hour.
fn pool() -> Value {
    json!({"startTime": rfc3339(now_micros() + 3_600_000_000),
           "computePoolReservation": {"numCpuCores": 2, "numVcInstances": 1,
                                      "virtualMemSize": 512}})
}

/// A host of 16 cores, enrolled as `who`.
async fn enroll_as(app: &TestApp, who: Who<'_>) {
    let body = json!({"name": "cn1", "availability_zone": "az1", "vcpus": 16,
                      "memory_mb": 16384, "local_gb": 100});
    let (status, created) = app
        .call_as(who, Method::POST, "/reservation/v1/os-hosts", Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
}

/// Waits (about 10 s at most) until every delivery `who` sees has failed at least once, and
/// returns them.
async fn failed_deliveries(app: &TestApp, who: Who<'_>, count: usize) -> Vec<Value> {
    for _ in 0..200 {
        let (status, body) = app
            .call_as(who, Method::GET, "/promise/deliveries", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let deliveries = body["deliveries"].as_array().cloned().unwrap_or_default();
        if deliveries.len() == count && deliveries.iter().all(|d| d["lastError"].is_string()) {
            return deliveries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{count} failed deliveries were not recorded in time");
}

const NOAUTH: Who<'static> = Who {
    project: "admin",
    user: "root",
    roles: "admin",
};

#[tokio::test]
async fn every_refused_destination_class_is_refused_when_subscribing() {
    let app = TestApp::spawn().await;
    let port = free_port();
    let cases = [
        (
            format!("http://127.0.0.1:{port}/hook"),
            "127.0.0.1",
            "a loopback address",
        ),
        (
            "http://127.9.9.9/hook".into(),
            "127.9.9.9",
            "a loopback address",
        ),
        ("http://[::1]/hook".into(), "::1", "a loopback address"),
        (
            "http://0x7f000001/hook".into(),
            "127.0.0.1",
            "a loopback address",
        ),
        (
            "http://2130706433/hook".into(),
            "127.0.0.1",
            "a loopback address",
        ),
        (
            "http://0177.0.0.1/hook".into(),
            "127.0.0.1",
            "a loopback address",
        ),
        (
            "http://127.1/hook".into(),
            "127.0.0.1",
            "a loopback address",
        ),
        (
            "http://0.0.0.0/hook".into(),
            "0.0.0.0",
            "an unspecified address",
        ),
        ("http://[::]/hook".into(), "::", "an unspecified address"),
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "169.254.169.254",
            "a link-local address",
        ),
        (
            "http://[fe80::1]/hook".into(),
            "fe80::1",
            "a link-local address",
        ),
        (
            "http://10.0.0.1/hook".into(),
            "10.0.0.1",
            "a private address",
        ),
        (
            "http://172.16.5.4/hook".into(),
            "172.16.5.4",
            "a private address",
        ),
        (
            "https://192.168.1.1/hook".into(),
            "192.168.1.1",
            "a private address",
        ),
        (
            "http://100.64.0.1/hook".into(),
            "100.64.0.1",
            "a shared (carrier-grade NAT) address",
        ),
        (
            "http://[fd00::1]/hook".into(),
            "fd00::1",
            "a private address",
        ),
        (
            "http://224.0.0.1/hook".into(),
            "224.0.0.1",
            "a multicast address",
        ),
        (
            "http://[ff02::1]/hook".into(),
            "ff02::1",
            "a multicast address",
        ),
        (
            "http://255.255.255.255/hook".into(),
            "255.255.255.255",
            "a broadcast address",
        ),
        (
            "http://[::ffff:127.0.0.1]/hook".into(),
            "::ffff:127.0.0.1",
            "a loopback address",
        ),
        (
            "http://[::ffff:a9fe:a9fe]/hook".into(),
            "::ffff:169.254.169.254",
            "a link-local address",
        ),
    ];
    for path in [RESERVATIONS, CAPACITY] {
        for (url, address, class) in &cases {
            let (status, body) = app.post(path, subscription(path, url)).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {url}: {body}");
            let expected = format!(
                "callbackUri: destination {address} is {class}; allow it with --callback-allow"
            );
            assert!(body.to_string().contains(&expected), "{url}: {body}");
        }
        for url in [
            "http://user:pw@example.com/hook",
            "https://token@example.com/hook",
        ] {
            let (status, body) = app.post(path, subscription(path, url)).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {url}: {body}");
            assert!(
                body.to_string().contains("callbackUri: user info"),
                "{url}: {body}"
            );
        }
    }
    let (_, made) = app.get("/promise/subscriptions", None).await;
    assert_eq!(made["subscriptions"], json!([]), "nothing was made");
    // A public address and a host name are accepted (names are checked at delivery).
    for url in ["https://203.0.113.9/hook", "https://hooks.example.com/hook"] {
        let (status, body) = app
            .post(RESERVATIONS, subscription(RESERVATIONS, url))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{url}: {body}");
    }
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_at_delivery() {
    let app = TestApp::spawn().await;
    let (url, received, server) = receiver(0).await;
    let named = url.replace("127.0.0.1", "localhost");
    let (status, body) = app
        .post(RESERVATIONS, subscription(RESERVATIONS, &named))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    enroll_as(&app, NOAUTH).await;
    let (status, body) = app
        .post("/promise/reservation/compute/create", pool())
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let failed = failed_deliveries(&app, NOAUTH, 1).await;
    let error = failed[0]["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("callback host localhost: destination")
            && error.contains("is a loopback address"),
        "an admin sees why: {error}"
    );
    assert_eq!(failed[0]["status"], "pending", "retried like any failure");
    assert!(
        received.got.lock().expect("lock").is_empty(),
        "the receiver never got a request"
    );
    server.abort();
}

#[tokio::test]
async fn the_allow_list_lets_its_ranges_through() {
    let app = TestApp::spawn_with(Options {
        callback_allow: vec![format!("{LOOPBACK},::1")],
        ..Options::default()
    })
    .await;
    let (url, received, server) = receiver(0).await;
    let mut ids = Vec::new();
    // A literal address in any spelling, and a name resolving to loopback.
    for host in ["127.0.0.1", "0x7f000001", "localhost"] {
        let callback = url.replace("127.0.0.1", host);
        let (status, body) = app
            .post(RESERVATIONS, subscription(RESERVATIONS, &callback))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{callback}: {body}");
        let id = body["reservationChangeSubscriptionId"]
            .as_str()
            .expect("id");
        ids.push(id.to_owned());
    }
    enroll_as(&app, NOAUTH).await;
    let (status, body) = app
        .post("/promise/reservation/compute/create", pool())
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_until(&received, |got| got.len() >= ids.len()).await;
    let got = received.got.lock().expect("lock").clone();
    for id in &ids {
        assert!(
            got.iter().any(|(body, _)| body["notificationId"]
                .as_str()
                .is_some_and(|n| n.ends_with(id.as_str()))),
            "subscription {id} was notified: {got:?}"
        );
    }
    server.abort();
}

#[tokio::test]
async fn a_member_is_told_only_that_delivery_failed() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        callback_allow: vec![LOOPBACK.to_owned()],
        ..Options::default()
    })
    .await;
    let admin = Who {
        project: "ops",
        user: "root",
        roles: "admin",
    };
    let member = Who {
        project: "p1",
        user: "u1",
        roles: "member",
    };
    // One receiver answers 500 to everything; nothing listens on the other port.
    let (failing, _, server) = receiver(u32::MAX).await;
    let closed = format!("http://127.0.0.1:{}/hook", free_port());
    for url in [&failing, &closed] {
        let (status, body) = app
            .call_as(
                member,
                Method::POST,
                RESERVATIONS,
                Some(subscription(RESERVATIONS, url)),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    enroll_as(&app, admin).await;
    let (status, body) = app
        .call_as(
            member,
            Method::POST,
            "/promise/reservation/compute/create",
            Some(pool()),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let seen = failed_deliveries(&app, member, 2).await;
    for delivery in &seen {
        assert_eq!(delivery["lastError"], "delivery failed", "{delivery}");
    }
    // An admin sees the causes, which differ.
    let causes = failed_deliveries(&app, admin, 2).await;
    let causes: Vec<&str> = causes
        .iter()
        .filter_map(|d| d["lastError"].as_str())
        .collect();
    assert!(causes.iter().any(|c| c.contains("500")), "{causes:?}");
    assert!(
        causes
            .iter()
            .any(|c| !c.contains("500") && c != &"delivery failed"),
        "{causes:?}"
    );
    server.abort();
}
