//! The release of unconsumed leases over HTTP (`--release-unconsumed-after-seconds`): a lease
//! nobody presents is told in its lifecycle record and the notification feed, then released,
//! ending then and freeing its host; a lease a consumer presented stays. And utilization
//! subscriptions: a lease used below a percentage for a time is told, once, in the feed and to a
//! callback, and told again when it recovers.

use crate::blazar_leases::{LEASES, kinds, lease_body, minutes, now_micros};
use crate::shares::{ADMIN, OWNER, STRANGER, allocate, feed_types, host, running_lease};
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

/// The feed entries of `who` that are utilization notifications: their `crossing`s.
async fn utilization_crossings(app: &TestApp, who: crate::support::Who<'_>) -> Vec<String> {
    crate::shares::feed(app, who)
        .await
        .iter()
        .filter(|n| n["changeType"] == "lease.utilization")
        .map(|n| {
            assert_eq!(n["notificationType"], "UtilizationChange", "{n}");
            n["changedReservationData"]["crossing"]
                .as_str()
                .expect("crossing")
                .to_owned()
        })
        .collect()
}

/// Waits until `who`'s feed holds these utilization crossings (at most about 10 s).
async fn await_crossings(app: &TestApp, who: crate::support::Who<'_>, wanted: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = utilization_crossings(app, who).await;
        if got == wanted {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "wanted {wanted:?}, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_lease_used_below_a_percentage_for_a_time_is_told_and_told_again_when_it_recovers() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        callback_allow: vec![crate::support::LOOPBACK.to_owned()],
        ..Options::default()
    })
    .await;
    let provider = host(&app, "h1").await;
    let id = running_lease(&app, one_host("h1")).await;
    let subscribe = |body: Value| {
        let app = &app;
        async move {
            app.call_as(
                OWNER,
                Method::POST,
                "/promise/utilization/subscribe",
                Some(body),
            )
            .await
        }
    };
    // Bad input is refused with the field named; another project's lease does not exist.
    for (body, named) in [
        (
            json!({"belowPercent": 50, "forSeconds": 1}),
            "reservationId",
        ),
        (
            json!({"reservationId": "x", "belowPercent": 50, "forSeconds": 1}),
            "reservationId",
        ),
        (
            json!({"reservationId": id, "belowPercent": 0, "forSeconds": 1}),
            "belowPercent",
        ),
        (
            json!({"reservationId": id, "belowPercent": 101, "forSeconds": 1}),
            "belowPercent",
        ),
        (
            json!({"reservationId": id, "belowPercent": 50}),
            "forSeconds",
        ),
        (
            json!({"reservationId": id, "belowPercent": 50, "forSeconds": 0}),
            "forSeconds",
        ),
        (
            json!({"reservationId": id, "belowPercent": 50, "forSeconds": 1,
                "resourceClass": "not a class"}),
            "resourceClass",
        ),
    ] {
        let (status, refused) = subscribe(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {refused}");
        assert!(refused.to_string().contains(named), "{body}: {refused}");
    }
    let (status, refused) = app
        .call_as(
            STRANGER,
            Method::POST,
            "/promise/utilization/subscribe",
            Some(json!({"reservationId": id, "belowPercent": 50, "forSeconds": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");

    // A feed-only subscription, and one with a callback.
    let (status, made) =
        subscribe(json!({"reservationId": id, "belowPercent": 50, "forSeconds": 1})).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let subscription = made["subscription"].clone();
    assert_eq!(subscription["type"], "utilization", "{made}");
    assert_eq!(subscription["reservationId"], id.as_str());
    assert_eq!(subscription["forSeconds"], 1);
    let (url, received, server) = crate::notifications::receiver(0).await;
    let (status, hooked) = subscribe(json!({"reservationId": id, "belowPercent": 50,
        "forSeconds": 1, "callbackUri": url}))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{hooked}");

    // Unused: told once each after a second, not again while the dip lasts.
    await_crossings(&app, OWNER, &["below", "below"]).await;
    crate::notifications::wait_until(&received, |got| {
        !crate::notifications::of_type(got, "UtilizationChange").is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(utilization_crossings(&app, OWNER).await, ["below", "below"]);
    assert!(
        utilization_crossings(&app, STRANGER).await.is_empty(),
        "another project hears nothing"
    );
    let told =
        crate::notifications::of_type(&received.got.lock().expect("lock"), "UtilizationChange")
            .into_iter()
            .cloned()
            .collect::<Vec<_>>();
    assert_eq!(
        told.len(),
        1,
        "the callback gets its own notification once: {told:?}"
    );
    assert_eq!(told[0]["reservationId"], id.as_str());
    assert_eq!(told[0]["changedReservationData"]["utilization_percent"], 0);

    // Six VCPU of eight in use: recovered, told once each.
    let (status, body) = allocate(&app, 1, OWNER.project, &provider, 6).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    await_crossings(&app, OWNER, &["below", "below", "recovered", "recovered"]).await;
    let path = format!(
        "/promise/subscriptions/{}",
        subscription["subscriptionId"].as_str().expect("id")
    );
    let (status, shown) = app.call_as(OWNER, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["subscription"]["triggered"], false, "{shown}");
    assert!(shown["subscription"].get("belowSince").is_none(), "{shown}");
    server.abort();
}
