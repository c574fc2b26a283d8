//! `Idempotency-Key` on the create endpoints of Blazar leases, Promise reservations (ETSI and
//! RPC) and node claims: a retry with the same key and body answers with the first result and
//! creates nothing; the same key with another body is 422; another project's same key is its
//! own; keys are scoped per route, bounded in length, and survive a restart.

use crate::blazar_leases::{LEASES, lease_body, minutes, tomorrow, whole_hosts};
use crate::support::{Options, TestApp, Who, parse};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const ADMIN: Who<'static> = Who {
    project: "ops",
    user: "root",
    roles: "admin",
};
const P1: Who<'static> = Who {
    project: "p1",
    user: "u1",
    roles: "member",
};
const P2: Who<'static> = Who {
    project: "p2",
    user: "u2",
    roles: "member",
};
const HOUR: i64 = 3_600_000_000;

async fn headers_app() -> TestApp {
    TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await
}

/// Sends `body` as `who` to `path`, with `key` as the `Idempotency-Key` when given.
async fn send(
    app: &TestApp,
    who: Who<'_>,
    path: &str,
    key: Option<&str>,
    body: &Value,
) -> (StatusCode, Value) {
    let mut builder = app
        .request(Method::POST, path, None)
        .header("x-project-id", who.project)
        .header("x-user-id", who.user)
        .header("x-roles", who.roles)
        .json(body);
    if let Some(key) = key {
        builder = builder.header("Idempotency-Key", key);
    }
    parse(builder.send().await.expect("send")).await
}

/// How many items of `member` a GET of `path` lists for `who`.
async fn count(app: &TestApp, who: Who<'_>, path: &str, member: &str) -> usize {
    let (status, body) = app.call_as(who, Method::GET, path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body[member].as_array().map_or(0, Vec::len)
}

/// Enrols Blazar hosts of 16 VCPUs in `az1`, as an admin.
async fn hosts(app: &TestApp, names: &[&str]) {
    for name in names {
        let body = json!({"name": name, "availability_zone": "az1", "vcpus": 16,
                          "memory_mb": 16384, "local_gb": 100});
        let (status, made) = send(app, ADMIN, "/reservation/v1/os-hosts", None, &body).await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
    }
}

#[tokio::test]
async fn a_retried_lease_create_answers_with_the_first_lease() {
    let app = headers_app().await;
    hosts(&app, &["cn1", "cn2", "cn3", "cn4"]).await;
    let start = tomorrow();
    let body = lease_body(
        "once",
        &minutes(start),
        &minutes(start + HOUR),
        json!([whole_hosts(1, 1, "az1")]),
    );
    let (status, first) = send(&app, P1, LEASES, Some("lease-1"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let id = first["lease"]["id"].clone();
    // The retry answers as the first did, and holds nothing more.
    let (status, again) = send(&app, P1, LEASES, Some("lease-1"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["lease"]["id"], id);
    assert_eq!(
        again["lease"]["reservations"],
        first["lease"]["reservations"]
    );
    assert_eq!(count(&app, P1, LEASES, "leases").await, 1);
    // The same key with another request is refused, and creates nothing.
    let mut other = body.clone();
    other["name"] = json!("other");
    let (status, refused) = send(&app, P1, LEASES, Some("lease-1"), &other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("already used")),
        "{refused}"
    );
    assert_eq!(count(&app, P1, LEASES, "leases").await, 1);
    // Another project's same key is its own.
    let (status, theirs) = send(&app, P2, LEASES, Some("lease-1"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    assert_ne!(theirs["lease"]["id"], id);
    assert_eq!(count(&app, P2, LEASES, "leases").await, 1);
    // Without a key, the same body makes another lease.
    let (status, _) = send(&app, P1, LEASES, None, &body).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(count(&app, P1, LEASES, "leases").await, 2);
    // A key must be 1 to 255 characters.
    for bad in [String::new(), "k".repeat(256)] {
        let (status, answer) = send(&app, P1, LEASES, Some(&bad), &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    }
    let (status, _) = send(&app, P1, LEASES, Some(&"k".repeat(255)), &body).await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn a_retried_promise_reservation_answers_with_the_first_on_both_styles() {
    let app = headers_app().await;
    hosts(&app, &["cn1", "cn2"]).await;
    let start = tomorrow();
    let window = json!({"startTime": crate::blazar_leases::rfc3339(start),
                        "endTime": crate::blazar_leases::rfc3339(start + HOUR)});
    let mut etsi = json!({"zoneId": "az1", "computePoolReservation": {"numCpuCores": 4}});
    etsi.as_object_mut()
        .expect("object")
        .extend(window.as_object().expect("object").clone());
    let path = "/promise/reservation/compute/create";
    let (status, first) = send(&app, P1, path, Some("r-1"), &etsi).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let id = first["reservationData"]["reservationId"].clone();
    let (status, again) = send(&app, P1, path, Some("r-1"), &etsi).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["reservationData"]["reservationId"], id);
    assert_eq!(count(&app, P1, LEASES, "leases").await, 1);
    let mut other = etsi.clone();
    other["computePoolReservation"]["numCpuCores"] = json!(6);
    let (status, refused) = send(&app, P1, path, Some("r-1"), &other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["code"], "idempotency_key_reused", "{refused}");
    // The RPC is another route: the same key there is another key.
    let rpc = json!({"zone": "az1", "start": crate::blazar_leases::rfc3339(start),
                     "end": crate::blazar_leases::rfc3339(start + HOUR),
                     "capacity": {"cores": 2}});
    let (status, made) = send(&app, P1, "/promise/create-reservation", Some("r-1"), &rpc).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let rpc_id = made["reservation-id"].clone();
    assert_ne!(rpc_id, id);
    let (status, again) = send(&app, P1, "/promise/create-reservation", Some("r-1"), &rpc).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["reservation-id"], rpc_id);
    assert_eq!(count(&app, P1, LEASES, "leases").await, 2);
    // Another project's same key is its own.
    let (status, theirs) = send(&app, P2, path, Some("r-1"), &etsi).await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    assert_ne!(theirs["reservationData"]["reservationId"], id);
    assert_eq!(count(&app, P2, LEASES, "leases").await, 1);
}

#[tokio::test]
async fn a_retried_node_claim_answers_with_the_first_claim() {
    let app = headers_app().await;
    let mut nodes = Vec::new();
    for name in ["n0", "n1"] {
        let body = json!({"name": name, "resource_class": "baremetal-gold",
                          "provision_state": "available"});
        let (status, node) = send(&app, ADMIN, crate::baremetal::NODES, None, &body).await;
        assert_eq!(status, StatusCode::CREATED, "{node}");
        nodes.push(node["uuid"].clone());
    }
    let claims = crate::baremetal::CLAIMS;
    let body = json!({"instance_uuid": uuid::Uuid::from_u128(1).to_string(), "node_uuid": nodes});
    let (status, first) = send(&app, P1, claims, Some("c-1"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let claim = first["reservation"]["uuid"].clone();
    assert_eq!(first["reservation"]["node_uuid"], nodes[0]);
    // Although the first claim holds n0, the retry is not refused: it is the first claim.
    let (status, again) = send(&app, P1, claims, Some("c-1"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["reservation"]["uuid"], claim);
    assert_eq!(count(&app, P1, claims, "reservations").await, 1);
    let mut other = body.clone();
    other["instance_uuid"] = json!(uuid::Uuid::from_u128(2).to_string());
    let (status, refused) = send(&app, P1, claims, Some("c-1"), &other).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    // The bare-metal API answers in Ironic's envelope, which has no code: the fault says it.
    assert!(
        refused["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("was already used for a different request")),
        "{refused}"
    );
    // Another project's same key is its own: it takes the other node.
    let theirs = json!({"instance_uuid": uuid::Uuid::from_u128(3).to_string(), "node_uuid": nodes});
    let (status, theirs) = send(&app, P2, claims, Some("c-1"), &theirs).await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    assert_eq!(theirs["reservation"]["node_uuid"], nodes[1]);
    assert_eq!(count(&app, ADMIN, claims, "reservations").await, 2);
    // With every listed node held, the retry is still the first claim, not a refusal.
    let (status, again) = send(&app, P1, claims, Some("c-1"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["reservation"]["uuid"], claim);
    // Once the first claim is released, a retry says so rather than claim again.
    let path = format!("{claims}/{}", claim.as_str().expect("uuid"));
    let (status, _) = app.call_as(P1, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, gone) = send(&app, P1, claims, Some("c-1"), &body).await;
    assert_eq!(status, StatusCode::GONE, "{gone}");
    assert!(
        gone["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("no longer exists")),
        "{gone}"
    );
    assert_eq!(count(&app, P1, claims, "reservations").await, 0);
}

#[tokio::test]
async fn an_idempotency_key_survives_a_restart() {
    let app = TestApp::spawn().await;
    crate::blazar_leases::enroll(&app, "cn1", "az1", 16).await;
    let start = tomorrow();
    let body = lease_body(
        "kept",
        &minutes(start),
        &minutes(start + HOUR),
        json!([whole_hosts(1, 1, "az1")]),
    );
    let post = |app: &TestApp| {
        app.request(Method::POST, LEASES, None)
            .header("Idempotency-Key", "\"restart-1\"")
            .json(&body)
            .send()
    };
    let (status, first) = parse(post(&app).await.expect("send")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (dir, database) = app.stop().await;
    let app = TestApp::spawn_with(Options {
        database: Some(database),
        ..Options::default()
    })
    .await;
    let (status, again) = parse(post(&app).await.expect("send")).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["lease"]["id"], first["lease"]["id"]);
    let (_, listed) = app.get(LEASES, None).await;
    assert_eq!(listed["leases"].as_array().map(Vec::len), Some(1));
    drop(app);
    drop(dir);
}

/// A retry of a lease that took the last of the capacity still answers with that lease: the
/// refusal a snapshot would give (nothing left) never hides the first request's result.
#[tokio::test]
async fn a_retry_after_taking_the_last_capacity_answers_with_the_first_lease() {
    let app = headers_app().await;
    hosts(&app, &["cn1"]).await;
    let start = tomorrow();
    let body = lease_body(
        "last",
        &minutes(start),
        &minutes(start + HOUR),
        json!([whole_hosts(1, 1, "az1")]),
    );
    let (status, first) = send(&app, P1, LEASES, Some("last-host"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = send(&app, P1, LEASES, Some("last-host"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["lease"]["id"], first["lease"]["id"]);
    let (status, _) = send(&app, P1, LEASES, Some("another"), &body).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "without the key it does not fit"
    );
    assert_eq!(count(&app, P1, LEASES, "leases").await, 1);
}

/// The same for a Promise reservation, which is always tried over a snapshot first: the
/// snapshot's refusal sends a key the store has seen on to its decision, which answers with the
/// first reservation.
#[tokio::test]
async fn a_promise_retry_after_taking_the_last_capacity_answers_with_the_first() {
    let app = headers_app().await;
    hosts(&app, &["cn1"]).await;
    let start = tomorrow();
    let body = json!({"zoneId": "az1", "computePoolReservation": {"numCpuCores": 16},
                      "startTime": crate::blazar_leases::rfc3339(start),
                      "endTime": crate::blazar_leases::rfc3339(start + HOUR)});
    let path = "/promise/reservation/compute/create";
    let (status, first) = send(&app, P1, path, Some("all-cores"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = send(&app, P1, path, Some("all-cores"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(
        again["reservationData"]["reservationId"],
        first["reservationData"]["reservationId"]
    );
    let (status, refused) = send(&app, P1, path, Some("another"), &body).await;
    assert_ne!(
        status,
        StatusCode::CREATED,
        "without the key it does not fit: {refused}"
    );
    assert_eq!(count(&app, P1, LEASES, "leases").await, 1);
}
