//! The release of unconsumed leases over HTTP (`--release-unconsumed-after-seconds`): a lease
//! nobody presents is told in its lifecycle record and the notification feed, then released,
//! ending then and freeing its host; a lease a consumer presented stays.

use crate::blazar_leases::{LEASES, kinds, lease_body, minutes, now_micros};
use crate::shares::{ADMIN, OWNER, allocate, feed_types, host, running_lease};
use crate::support::{Options, TestApp};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

/// Released 3 s after the start, told 2 s before.
async fn app() -> TestApp {
    TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        idle_release: Some((3, 2)),
        ..Options::default()
    })
    .await
}

/// Lease `id` as the admin reads it.
pub(crate) async fn lease(app: &TestApp, id: &str) -> Value {
    let (status, shown) = app
        .call_as(ADMIN, Method::GET, &format!("{LEASES}/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    shown["lease"].clone()
}

/// The kinds of a lease's lifecycle record, as the admin reads it.
async fn record_kinds(app: &TestApp, id: &str) -> Vec<String> {
    let (status, body) = app
        .call_as(ADMIN, Method::GET, &format!("{LEASES}/{id}/events"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    kinds(body["events"].as_array().expect("events"))
}

fn one_host(name: &str) -> Value {
    json!([{"resource_type": "physical:host", "min": 1, "max": 1,
            "resource_properties": format!(r#"["==", "$hypervisor_hostname", "{name}"]"#)}])
}

#[tokio::test]
async fn an_unconsumed_lease_is_told_then_released_and_a_consumed_one_stays() {
    let app = app().await;
    host(&app, "h1").await;
    let used_host = host(&app, "h2").await;
    let idle = running_lease(&app, one_host("h1")).await;
    let used = running_lease(&app, one_host("h2")).await;
    // The second lease's project runs an instance in it.
    let (status, body) = allocate(&app, 1, OWNER.project, &used_host, 2).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while lease(&app, &idle).await["status"] != "TERMINATED" {
        assert!(tokio::time::Instant::now() < deadline, "never released");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let released = lease(&app, &idle).await;
    let history = record_kinds(&app, &idle).await;
    let at = |kind: &str| history.iter().position(|k| k == kind);
    assert!(
        at("lease.idle_notice") < at("lease.idle_release") && at("lease.idle_notice").is_some(),
        "{history:?}"
    );
    assert_eq!(
        history
            .iter()
            .filter(|k| k.starts_with("lease.idle"))
            .count(),
        2,
        "told once and released once: {history:?}"
    );
    assert!(
        released["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("released")),
        "{released}"
    );
    let feed = feed_types(&app, OWNER).await;
    assert!(
        feed.iter().any(|n| n.contains("idle_notice")),
        "the holder hears the notice in the feed: {feed:?}"
    );
    // The released host takes a new lease at once; the consumed lease runs on.
    let body = lease_body(
        "after",
        "now",
        &minutes(now_micros() + 3_600_000_000),
        one_host("h1"),
    );
    let (status, created) = app.call_as(OWNER, Method::POST, LEASES, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(lease(&app, &used).await["status"], "ACTIVE");
    let history = record_kinds(&app, &used).await;
    assert!(
        !history.iter().any(|k| k.starts_with("lease.idle")),
        "{history:?}"
    );
}
