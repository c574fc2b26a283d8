//! Holds and waitlisted leases over HTTP: an availability search that holds its offer, a lease
//! made from the hold while a competing request is refused, a hold that lapses, a waitlisted
//! lease admitted the moment another is deleted and one that expires at its `wait_until`, every
//! new field's bad input, and clients racing holds, the waitlist and direct leases for the last
//! hosts. The helpers marked `pub(crate)` are shared with the PostgreSQL tests.

use crate::blazar_leases::{
    LEASES, enroll, held, kinds, lease_body, lease_date, minutes, now_micros, records, rfc3339,
    tomorrow, wait_for_status,
};
use crate::support::{Options, TestApp, Who};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const AVAILABILITY: &str = "/reservation/v1/availability";
const HOUR: i64 = 3_600_000_000;

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
const READER: Who<'static> = Who {
    project: "p1",
    user: "r1",
    roles: "reader",
};

/// One whole host, any.
fn one_host(n: u32) -> Value {
    json!({"resource_type": "physical:host", "min": n, "max": n})
}

fn string(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a string"))
        .to_owned()
}

/// An availability search for `n` whole hosts over `[start, end)` with `extra` members.
fn search(start: &str, end: &str, n: u32, extra: Value) -> Value {
    let mut body = json!({"start_date": start, "end_date": end, "reservations": [one_host(n)]});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    body
}

/// `body` with `extra`'s members added.
fn with(mut body: Value, extra: Value) -> Value {
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    body
}

/// Holds `n` hosts over `[start, end)`: the answer's `hold`, which must be held.
async fn hold(app: &TestApp, start: &str, end: &str, n: u32) -> Value {
    let (status, answer) = app
        .call(
            Method::POST,
            AVAILABILITY,
            None,
            Some(search(start, end, n, json!({"hold_minutes": 10}))),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["hold"]["held"], true, "{answer}");
    answer["hold"].clone()
}

async fn lease_status(app: &TestApp, id: &str) -> (StatusCode, Value) {
    app.get(&format!("{LEASES}/{id}"), None).await
}

#[tokio::test]
async fn a_held_offer_becomes_a_lease_while_a_competing_request_is_refused() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    enroll(&app, "h2", "az1", 8).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let hold = hold(&app, &start, &end, 2).await;
    let hold_id = string(&hold["hold_id"]);
    assert!(hold["lapses_at"].is_string(), "{hold}");
    assert_eq!(
        hold["reservations"][0]["hosts"].as_array().map(Vec::len),
        Some(2)
    );
    // The hold is a lease in HELD, listed, holding both hosts.
    let (status, shown) = lease_status(&app, &hold_id).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["lease"]["status"], "HELD", "{shown}");
    assert_eq!(held(&shown["lease"]).len(), 2, "{shown}");
    // The search now counts the held hosts as taken, and a competing lease is refused.
    let (_, again) = app
        .call(
            Method::POST,
            AVAILABILITY,
            None,
            Some(search(&start, &end, 1, json!({}))),
        )
        .await;
    assert_eq!(again["fits"], false, "{again}");
    assert_eq!(again["availability_zones"][0]["free_hosts"], 0, "{again}");
    let competing = lease_body("competing", &start, &end, json!([one_host(1)]));
    let (status, refused) = app
        .call(Method::POST, LEASES, None, Some(competing.clone()))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    // The lease made from the hold takes exactly what was held, in one decision.
    let from_hold = with(
        lease_body("from-hold", &start, &end, json!([one_host(2)])),
        json!({"hold_id": hold_id}),
    );
    let (status, created) = app
        .call(Method::POST, LEASES, None, Some(from_hold.clone()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["lease"]["status"], "PENDING", "{created}");
    let got: BTreeSet<String> = held(&created["lease"]).into_iter().collect();
    let had: BTreeSet<String> = held(&shown["lease"]).into_iter().collect();
    assert_eq!(got, had, "the lease holds the held hosts");
    let (status, _) = lease_status(&app, &hold_id).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the hold became the lease");
    assert_eq!(
        kinds(&records(&app, &hold_id).await),
        ["lease.hold", "lease.hold.used"]
    );
    let (status, refused) = app.call(Method::POST, LEASES, None, Some(competing)).await;
    assert_eq!(status, StatusCode::CONFLICT, "still refused: {refused}");
    // A hold is used once.
    let (status, again) = app.call(Method::POST, LEASES, None, Some(from_hold)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{again}");
    assert!(
        string(&again["error_message"]).contains("hold_id"),
        "{again}"
    );
}

#[tokio::test]
async fn a_lease_asking_more_than_its_hold_is_refused_and_the_hold_stays() {
    let app = TestApp::spawn().await;
    for n in 0..3 {
        enroll(&app, &format!("h{n}"), "az1", 8).await;
    }
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let hold_id = string(&hold(&app, &start, &end, 1).await["hold_id"]);
    let attempts = [
        lease_body("more", &start, &end, json!([one_host(2)])),
        lease_body(
            "longer",
            &start,
            &minutes(t + 2 * HOUR),
            json!([one_host(1)]),
        ),
        lease_body("other", &start, &end, json!([one_host(1), one_host(1)])),
    ];
    for body in attempts {
        let body = with(body, json!({"hold_id": hold_id}));
        let (status, answer) = app.call(Method::POST, LEASES, None, Some(body)).await;
        assert_eq!(status, StatusCode::CONFLICT, "{answer}");
        assert!(
            string(&answer["error_message"]).contains("does not match its hold"),
            "{answer}"
        );
    }
    // Less than the hold, within its window, is fine.
    let shorter = with(
        lease_body(
            "shorter",
            &minutes(t + 60_000_000),
            &end,
            json!([one_host(1)]),
        ),
        json!({"hold_id": hold_id}),
    );
    let (status, created) = app.call(Method::POST, LEASES, None, Some(shorter)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
}

#[tokio::test]
async fn a_hold_lapses_once_and_frees_what_it_held() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    // The hold lapses at its window's end when that comes before its expiry.
    let end = rfc3339(now_micros() + 3_000_000);
    let hold_id = string(&hold(&app, "now", &end, 1).await["hold_id"]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    let lapsed = wait_for_status(&app, &hold_id, "EXPIRED", deadline).await;
    assert!(lapsed.is_some(), "the hold lapsed");
    tokio::time::sleep(berth_app::LIFECYCLE_POLL + Duration::from_millis(200)).await;
    let kinds = kinds(&records(&app, &hold_id).await);
    assert_eq!(
        kinds,
        ["lease.hold", "lease.hold.lapsed"],
        "fired exactly once"
    );
    // A lapsed hold cannot be used.
    let t = tomorrow();
    let body = with(
        lease_body(
            "late",
            &minutes(t),
            &minutes(t + HOUR),
            json!([one_host(1)]),
        ),
        json!({"hold_id": hold_id}),
    );
    let (status, answer) = app.call(Method::POST, LEASES, None, Some(body)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert!(
        string(&answer["error_message"]).contains("lapsed"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_waitlisted_lease_is_admitted_the_moment_another_is_deleted() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let first = lease_body("first", &start, &end, json!([one_host(1)]));
    let (status, first) = app.call(Method::POST, LEASES, None, Some(first)).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let first_id = string(&first["lease"]["id"]);
    let waiting = with(
        lease_body("second", &start, &end, json!([one_host(1)])),
        json!({"on_conflict": "wait", "wait_until": minutes(t)}),
    );
    let (status, waiting) = app.call(Method::POST, LEASES, None, Some(waiting)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    assert_eq!(waiting["lease"]["status"], "WAITING", "{waiting}");
    assert!(waiting["lease"]["lapses_at"].is_string(), "{waiting}");
    assert!(held(&waiting["lease"]).is_empty(), "{waiting}");
    assert!(
        waiting["waitlisted"]["counter_offer"]["earliest_start"].is_string(),
        "the counter-offer is attached: {waiting}"
    );
    let waiting_id = string(&waiting["lease"]["id"]);
    let (status, _) = app
        .call(Method::DELETE, &format!("{LEASES}/{first_id}"), None, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Admitted in the same commit as the deletion: no waiting for anything.
    let (_, shown) = lease_status(&app, &waiting_id).await;
    assert_eq!(shown["lease"]["status"], "PENDING", "{shown}");
    assert_eq!(held(&shown["lease"]).len(), 1, "{shown}");
    assert_eq!(
        kinds(&records(&app, &waiting_id).await),
        ["lease.create", "lease.admitted"]
    );
}

#[tokio::test]
async fn a_waitlisted_lease_that_never_fits_expires_at_wait_until() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let first = lease_body("first", &start, &end, json!([one_host(1)]));
    let (status, _) = app.call(Method::POST, LEASES, None, Some(first)).await;
    assert_eq!(status, StatusCode::CREATED);
    let until = rfc3339(now_micros() + 2_000_000);
    let waiting = with(
        lease_body("second", &start, &end, json!([one_host(1)])),
        json!({"on_conflict": "wait", "wait_until": until}),
    );
    let (status, waiting) = app.call(Method::POST, LEASES, None, Some(waiting)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    let id = string(&waiting["lease"]["id"]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
    assert!(
        wait_for_status(&app, &id, "EXPIRED", deadline)
            .await
            .is_some()
    );
    tokio::time::sleep(berth_app::LIFECYCLE_POLL + Duration::from_millis(200)).await;
    assert_eq!(
        kinds(&records(&app, &id).await),
        ["lease.create", "lease.wait.expired"],
        "expired exactly once"
    );
    // A lease that fits with on_conflict wait is simply created.
    let later = minutes(t + 2 * HOUR);
    let fits = with(
        lease_body("fits", &end, &later, json!([one_host(1)])),
        json!({"on_conflict": "wait", "wait_until": end}),
    );
    let (status, fits) = app.call(Method::POST, LEASES, None, Some(fits)).await;
    assert_eq!(status, StatusCode::CREATED, "{fits}");
    assert_eq!(fits["lease"]["status"], "PENDING", "{fits}");
}

#[tokio::test]
async fn every_new_field_refuses_bad_input_naming_it() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let admin = Who {
        project: "admin",
        user: "root",
        roles: "admin",
    };
    let created = app
        .call_as(
            admin,
            Method::POST,
            "/reservation/v1/os-hosts",
            Some(json!({"name": "h1", "availability_zone": "az1", "vcpus": 8,
                        "memory_mb": 16384, "local_gb": 100})),
        )
        .await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let searches = [
        (json!({"hold_minutes": 0}), "hold_minutes"),
        (json!({"hold_minutes": 61}), "hold_minutes"),
        (json!({"hold_minutes": "ten"}), "hold_minutes"),
        (json!({"hold": "yes"}), "hold"),
        (json!({"hold": false, "hold_minutes": 5}), "hold_minutes"),
    ];
    for (extra, field) in searches {
        let body = search(&start, &end, 1, extra.clone());
        let (status, answer) = app
            .call_as(P1, Method::POST, AVAILABILITY, Some(body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{extra}: {answer}");
        assert!(
            string(&answer["error_message"]).contains(field),
            "{extra}: {answer}"
        );
    }
    // A reader may search but not hold.
    let body = search(&start, &end, 1, json!({"hold": true}));
    let (status, answer) = app
        .call_as(READER, Method::POST, AVAILABILITY, Some(body))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    // `hold: true` holds for the default time.
    let body = search(&start, &end, 1, json!({"hold": true}));
    let (status, answer) = app
        .call_as(P1, Method::POST, AVAILABILITY, Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let hold_id = string(&answer["hold"]["hold_id"]);
    let lease = lease_body("l", &start, &end, json!([one_host(1)]));
    let creates = [
        (json!({"hold_id": hold_id}), P2, "hold_id"),
        (json!({"hold_id": "not-a-uuid"}), P1, "hold_id"),
        (json!({"hold_id": 7}), P1, "hold_id"),
        (json!({"on_conflict": "wait"}), P1, "wait_until"),
        (
            json!({"on_conflict": "maybe", "wait_until": start}),
            P1,
            "on_conflict",
        ),
        (json!({"wait_until": start}), P1, "wait_until"),
        (
            json!({"on_conflict": "wait", "wait_until": "2001-01-01 00:00"}),
            P1,
            "wait_until",
        ),
        (
            json!({"on_conflict": "wait", "wait_until": end}),
            P1,
            "wait_until",
        ),
        (
            json!({"on_conflict": "wait", "wait_until": start, "hold_id": hold_id}),
            P1,
            "hold_id",
        ),
    ];
    for (extra, who, field) in creates {
        let body = with(lease.clone(), extra.clone());
        let (status, answer) = app.call_as(who, Method::POST, LEASES, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{extra}: {answer}");
        assert!(
            string(&answer["error_message"]).contains(field),
            "{extra}: {answer}"
        );
    }
    // More than a week past the start.
    let far = with(
        lease_body(
            "far",
            &start,
            &minutes(t + 30 * 24 * HOUR),
            json!([one_host(1)]),
        ),
        json!({"on_conflict": "wait", "wait_until": minutes(t + 8 * 24 * HOUR)}),
    );
    let (status, answer) = app.call_as(P1, Method::POST, LEASES, Some(far)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(string(&answer["error_message"]).contains("WAIT_PAST_START_MAX_MINUTES"));
}

#[tokio::test]
async fn a_project_keeps_at_most_the_named_number_of_open_holds() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let max = berth_core::limits::HOLDS_PER_PROJECT_MAX;
    for n in 0..i64::from(max) {
        let (start, end) = (minutes(t + n * HOUR), minutes(t + (n + 1) * HOUR));
        hold(&app, &start, &end, 1).await;
    }
    let (start, end) = (minutes(t - HOUR), minutes(t));
    let body = search(&start, &end, 1, json!({"hold": true}));
    let (status, answer) = app.call(Method::POST, AVAILABILITY, None, Some(body)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert!(
        string(&answer["error_message"]).contains("HOLDS_PER_PROJECT_MAX"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_search_that_does_not_fit_holds_its_counter_offer() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    hold(&app, &start, &end, 1).await;
    // The only host is held: the offer is the counter-offer's window, after the hold's.
    let body = search(
        &start,
        &end,
        1,
        json!({"hold": true, "search_horizon_days": 1}),
    );
    let (status, answer) = app.call(Method::POST, AVAILABILITY, None, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["fits"], false, "{answer}");
    assert_eq!(
        answer["hold"]["held"], true,
        "the counter-offer is held: {answer}"
    );
    assert_eq!(
        answer["hold"]["start_date"],
        answer["counter_offer"]["earliest_start"]
    );
}

/// `clients` racing for `hosts` whole hosts over one window, spread over `apps`: a third hold
/// then lease from the hold, a third ask directly, a third wait (until the window's start)
/// while every sixth admitted direct lease is deleted again. Returns the leases holding hosts
/// at the end, by id, with their hosts.
pub(crate) async fn race_holds_waits_and_leases(
    apps: &[&TestApp],
    clients: u32,
    t: i64,
) -> Vec<(String, Vec<String>)> {
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let tasks: Vec<_> = (0..clients)
        .map(|n| {
            let app = apps[n as usize % apps.len()];
            let (client, base) = (app.client.clone(), app.base.clone());
            let (start, end) = (start.clone(), end.clone());
            tokio::spawn(async move {
                let post = |path: &str, body: Value| {
                    let request = client.post(format!("{base}{path}")).json(&body);
                    async move { crate::support::parse(request.send().await.expect("send")).await }
                };
                let lease = lease_body(&format!("racer-{n}"), &start, &end, json!([one_host(1)]));
                match n % 3 {
                    0 => {
                        let (status, answer) = post(
                            AVAILABILITY,
                            search(
                                &start,
                                &end,
                                1,
                                json!({"hold_minutes": 5, "search_horizon_days": 1}),
                            ),
                        )
                        .await;
                        assert_eq!(status, StatusCode::OK, "{answer}");
                        let Some(hold_id) = answer["hold"]["hold_id"].as_str() else {
                            return;
                        };
                        let (status, answer) =
                            post(LEASES, with(lease, json!({"hold_id": hold_id}))).await;
                        assert!(
                            [StatusCode::CREATED, StatusCode::CONFLICT].contains(&status),
                            "{status}: {answer}"
                        );
                    }
                    1 => {
                        let (status, answer) = post(LEASES, lease).await;
                        assert!(
                            [StatusCode::CREATED, StatusCode::CONFLICT].contains(&status),
                            "{status}: {answer}"
                        );
                        if status == StatusCode::CREATED && n % 6 == 1 {
                            let id = string(&answer["lease"]["id"]);
                            let gone = client
                                .delete(format!("{base}{LEASES}/{id}"))
                                .send()
                                .await
                                .expect("send");
                            assert_eq!(gone.status(), StatusCode::NO_CONTENT);
                        }
                    }
                    _ => {
                        let waiting =
                            with(lease, json!({"on_conflict": "wait", "wait_until": start}));
                        let (status, answer) = post(LEASES, waiting).await;
                        assert!(
                            [StatusCode::CREATED, StatusCode::ACCEPTED].contains(&status),
                            "{status}: {answer}"
                        );
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("client");
    }
    let (status, list) = apps[0].get(LEASES, None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .filter(|l| ["PENDING", "HELD"].contains(&l["status"].as_str().unwrap_or("")))
        .filter(|l| l["start_date"] == lease_date(t))
        .map(|l| (string(&l["id"]), held(l)))
        .collect()
}

/// No host is held twice over the window, so no more than `hosts` are held.
pub(crate) fn check_no_over_commit(holding: &[(String, Vec<String>)], hosts: usize) {
    let all: Vec<&String> = holding.iter().flat_map(|(_, h)| h).collect();
    let distinct: BTreeSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), distinct.len(), "a host held twice: {holding:?}");
    assert!(
        distinct.len() <= hosts,
        "more hosts than exist: {holding:?}"
    );
    assert!(!distinct.is_empty(), "something was admitted: {holding:?}");
}

#[tokio::test]
async fn racing_holds_waits_and_leases_on_sqlite_never_over_commit() {
    let app = TestApp::spawn().await;
    for n in 0..4 {
        enroll(&app, &format!("r{n}"), "az1", 8).await;
    }
    let holding = race_holds_waits_and_leases(&[&app], 32, tomorrow()).await;
    check_no_over_commit(&holding, 4);
}

/// Promise's `query-capacity` of az1 over `[start, end)`: reserved and held cores.
async fn capacity_held(app: &TestApp, start: &str, end: &str) -> (i64, i64) {
    let (status, rpc) = app
        .call(
            Method::POST,
            "/promise/query-capacity",
            None,
            Some(json!({"capacity": "reserved", "zone": "az1",
                        "window": {"start": start, "end": end}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rpc}");
    let figure = |v: &Value| {
        v.as_i64()
            .unwrap_or_else(|| panic!("{v} is not a number: {rpc}"))
    };
    let answer = (
        figure(&rpc["capacity"]["reserved"]["cores"]),
        figure(&rpc["held"]["cores"]),
    );
    // The ETSI query of the same measure says the same.
    let (status, etsi) = app
        .call(
            Method::POST,
            "/promise/capacity/compute/query",
            None,
            Some(
                json!({"zoneId": "az1", "computeResourceTypeId": "numCpuCores",
                        "timePeriod": {"startTime": start, "stopTime": end}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{etsi}");
    assert_eq!(
        (
            etsi["capacityInformation"]["reserved"].as_i64(),
            etsi["held"].as_i64()
        ),
        (Some(answer.0), Some(answer.1)),
        "{etsi}"
    );
    answer
}

#[tokio::test]
async fn capacity_answers_count_a_hold_as_reserved_and_say_how_much_is_held() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    enroll(&app, "h2", "az1", 8).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));
    let (window_start, window_end) = (rfc3339(t), rfc3339(t + HOUR));
    // A plain lease is reserved, not held.
    let plain = lease_body("plain", &start, &end, json!([one_host(1)]));
    let (status, created) = app.call(Method::POST, LEASES, None, Some(plain)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        capacity_held(&app, &window_start, &window_end).await,
        (8, 0)
    );
    // The hold is reserved and held.
    let hold_id = string(&hold(&app, &start, &end, 1).await["hold_id"]);
    assert_eq!(
        capacity_held(&app, &window_start, &window_end).await,
        (16, 8)
    );
    // Outside its window nothing is held.
    let (later_start, later_end) = (rfc3339(t + 2 * HOUR), rfc3339(t + 3 * HOUR));
    assert_eq!(capacity_held(&app, &later_start, &later_end).await, (0, 0));
    // Turned into a lease, the capacity stays reserved and is no longer held.
    let from_hold = with(
        lease_body("from-hold", &start, &end, json!([one_host(1)])),
        json!({"hold_id": hold_id}),
    );
    let (status, created) = app.call(Method::POST, LEASES, None, Some(from_hold)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        capacity_held(&app, &window_start, &window_end).await,
        (16, 0)
    );
}

/// Promise's `create-reservation` of a pool of `cores` cores and `ram` MB over `[start, end)`,
/// as `who`, made from `hold_id`.
async fn promise_from_hold(
    app: &TestApp,
    who: Who<'_>,
    (start, end): (&str, &str),
    (cores, ram): (u64, u64),
    hold_id: &str,
) -> (StatusCode, Value) {
    let body = json!({"start": start, "end": end, "hold_id": hold_id,
                      "capacity": {"cores": cores.to_string(), "ram": ram.to_string()}});
    app.call_as(who, Method::POST, "/promise/create-reservation", Some(body))
        .await
}

#[tokio::test]
async fn a_promise_reservation_is_made_from_a_hold_of_its_project() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let admin = Who {
        project: "admin",
        user: "root",
        roles: "admin",
    };
    let (status, created) = app
        .call_as(
            admin,
            Method::POST,
            "/reservation/v1/os-hosts",
            Some(json!({"name": "h1", "availability_zone": "az1", "vcpus": 8,
                        "memory_mb": 16384, "local_gb": 100})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let t = tomorrow();
    let (start, end) = (rfc3339(t), rfc3339(t + HOUR));
    // Eight one-core slots of 1 GiB: what a Promise pool of 8 cores and 8 GiB becomes.
    let slots = json!({"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 1024,
                       "disk_gb": 0, "amount": 8});
    let body = json!({"start_date": minutes(t), "end_date": minutes(t + HOUR),
                      "reservations": [slots], "hold_minutes": 10});
    let (status, answer) = app
        .call_as(P1, Method::POST, AVAILABILITY, Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["hold"]["held"], true, "{answer}");
    let hold_id = string(&answer["hold"]["hold_id"]);
    // Another project's hold is a bad hold_id; more than was held is a mismatch.
    let (status, theirs) = promise_from_hold(&app, P2, (&start, &end), (8, 8192), &hold_id).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{theirs}");
    assert!(theirs.to_string().contains("hold_id"), "{theirs}");
    let (status, more) = promise_from_hold(&app, P1, (&start, &end), (9, 9216), &hold_id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{more}");
    assert!(more.to_string().contains("hold"), "{more}");
    let (status, bad) = promise_from_hold(&app, P1, (&start, &end), (8, 8192), "nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    // What was held becomes the reservation, over the hold's own capacity.
    let (status, made) = promise_from_hold(&app, P1, (&start, &end), (8, 8192), &hold_id).await;
    assert!(status.is_success(), "{status}: {made}");
    let (status, _) = app
        .call_as(admin, Method::GET, &format!("{LEASES}/{hold_id}"), None)
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the hold became the reservation"
    );
    let (status, events) = app
        .call_as(
            admin,
            Method::GET,
            &format!("{LEASES}/{hold_id}/events"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{events}");
    let listed = events["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(kinds(&listed), ["lease.hold", "lease.hold.used"]);
}
