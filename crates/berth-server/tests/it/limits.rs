//! Bounded work: requests over the named limits are refused with a 400 that names the limit,
//! in each surface's error format, and a counter-offer says when its search was truncated.

use crate::blazar_leases::{LEASES, enroll, lease_body, minutes, tomorrow};
use crate::support::{TestApp, code, detail};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const AVAILABILITY: &str = "/reservation/v1/availability";
const HOUR: i64 = 3_600_000_000;

/// An instance reservation of `amount` one-VCPU instances.
fn instances(amount: u64) -> Value {
    json!({"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 1024,
           "disk_gb": 10, "amount": amount})
}

/// The Blazar error message of an error body.
fn blazar_message(body: &Value) -> &str {
    body["error_message"].as_str().unwrap_or("")
}

/// Asserts a Blazar 400 naming `limit`.
fn names_limit(status: StatusCode, body: &Value, limit: &str) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(blazar_message(body).contains(limit), "{body}");
    assert_eq!(body["limit"], limit, "{body}");
}

#[tokio::test]
async fn leases_and_availability_over_the_limits_are_refused_naming_the_limit() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let cases = [
        (
            json!(vec![instances(1); 65]),
            None,
            "reservations_per_lease",
        ),
        (
            json!([instances(20_000)]),
            None,
            "instances_per_reservation",
        ),
        (
            json!([{"resource_type": "physical:host", "min": 1, "max": 20_000}]),
            None,
            "hosts_per_reservation",
        ),
        (json!([instances(1)]), Some(100_000), "search_horizon_days"),
    ];
    for (reservations, horizon, limit) in cases {
        let mut body = lease_body("big", &start, &end, reservations);
        if let Some(days) = horizon {
            body["search_horizon_days"] = json!(days);
        }
        let (status, refused) = app.post(LEASES, body.clone()).await;
        names_limit(status, &refused, limit);
        let (status, refused) = app.post(AVAILABILITY, body).await;
        names_limit(status, &refused, limit);
    }
    // Nothing was admitted.
    let (_, listed) = app.call(Method::GET, LEASES, None, None).await;
    assert_eq!(listed["leases"], json!([]), "{listed}");
}

#[tokio::test]
async fn the_largest_impossible_lease_within_the_limits_gets_a_counter_offer() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let mut body = lease_body(
        "impossible",
        &minutes(t),
        &minutes(t + HOUR),
        json!(vec![instances(10_000); 64]),
    );
    body["search_horizon_days"] = json!(366);
    let (status, refused) = app.post(LEASES, body.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let offer = &refused["counter_offer"];
    assert_eq!(
        offer["amounts"].as_array().map(Vec::len),
        Some(64),
        "{refused}"
    );
    assert_eq!(offer["earliest_start"], Value::Null, "{refused}");
    assert_eq!(offer["truncated"], false, "{refused}");
    let (status, answer) = app.post(AVAILABILITY, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["fits"], false, "{answer}");
    assert_eq!(answer["counter_offer"]["truncated"], false, "{answer}");
}

#[tokio::test]
async fn candidates_with_too_many_groups_are_refused_in_placement_format() {
    let app = TestApp::spawn().await;
    let groups: Vec<String> = (1..=65).map(|n| format!("resources{n}=VCPU:1")).collect();
    let path = format!("/placement/allocation_candidates?{}", groups.join("&"));
    let (status, refused) = app.get(&path, Some("1.39")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(code(&refused), "limit_exceeded", "{refused}");
    assert!(detail(&refused).contains("request_groups"), "{refused}");
    // Within the limit the same request is searched (and finds nothing here).
    let path = format!(
        "/placement/allocation_candidates?group_policy=none&{}",
        groups[..64].join("&")
    );
    let (status, found) = app.get(&path, Some("1.39")).await;
    assert_eq!(status, StatusCode::OK, "{found}");
}

#[tokio::test]
async fn promise_pools_over_the_limits_are_refused_naming_the_limit() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let (status, refused) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"zoneId": "az1", "computePoolReservation": {"numCpuCores": 20_000,
                   "numVcInstances": 20_000, "virtualMemSize": 20_000}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused.to_string().contains("instances_per_reservation"),
        "{refused}"
    );
}
