//! Recurring leases over HTTP: a weekly series with one conflicting occurrence refused with the
//! alternatives, then admitted after the conflicting lease changes; a lease between
//! occurrences; one occurrence and the whole series cancelled; the series renamed; bad
//! `recurrence` values refused naming it; another project's series invisible and a reader
//! unable to create one; a replayed `Idempotency-Key`; and clients racing series and single
//! leases for the last hosts.

use crate::blazar_leases::{LEASES, enroll, lease_body, lease_date, minutes, tomorrow};
use crate::support::{Options, TestApp, Who, parse};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const SERIES: &str = "/reservation/v1/lease-series";
const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;
const WEEK: i64 = 7 * DAY;

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

fn one_host() -> Value {
    json!([{"resource_type": "physical:host", "min": 1, "max": 1}])
}

/// A request for one whole host over `[start, start + hours)` repeating by `rule`.
fn series_body(name: &str, start: i64, hours: i64, rule: &str) -> Value {
    let mut body = lease_body(
        name,
        &minutes(start),
        &minutes(start + hours * HOUR),
        one_host(),
    );
    body["recurrence"] = json!(rule);
    body
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a string"))
        .to_owned()
}

#[tokio::test]
async fn a_weekly_series_with_one_conflict_is_refused_with_alternatives_then_admitted() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    // Someone holds the host for an hour in the second week's window.
    let blocker = lease_body(
        "blocker",
        &minutes(t + WEEK),
        &minutes(t + WEEK + HOUR),
        one_host(),
    );
    let (status, blocker) = app.call(Method::POST, LEASES, None, Some(blocker)).await;
    assert_eq!(status, StatusCode::CREATED, "{blocker}");
    let blocker_id = text(&blocker["lease"]["id"]);
    let weekly = series_body("standup", t, 2, "FREQ=WEEKLY;COUNT=4");
    let (status, refused) = app
        .call(Method::POST, LEASES, None, Some(weekly.clone()))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["occurrences"], 4, "{refused}");
    let conflicts = refused["conflicts"].as_array().expect("conflicts");
    assert_eq!(conflicts.len(), 1, "{refused}");
    assert_eq!(conflicts[0]["index"], 1);
    assert_eq!(conflicts[0]["start_date"], json!(lease_date(t + WEEK)));
    assert_eq!(conflicts[0]["reservations"][0]["available"], 0, "{refused}");
    assert_eq!(
        conflicts[0]["alternative"],
        json!({"start_date": lease_date(t + WEEK + HOUR),
               "end_date": lease_date(t + WEEK + 3 * HOUR)}),
        "the nearest window that fits starts when the blocker ends"
    );
    assert!(text(&refused["error_message"]).contains("1 of the 4 occurrences"));
    let (_, listed) = app.get(LEASES, None).await;
    assert_eq!(
        listed["leases"].as_array().map(Vec::len),
        Some(1),
        "nothing admitted"
    );
    // The conflicting lease moves out of the way; the same request is admitted whole.
    let moved = json!({"start_date": minutes(t + WEEK + 3 * HOUR),
                       "end_date": minutes(t + WEEK + 4 * HOUR)});
    let path = format!("{LEASES}/{blocker_id}");
    let (status, body) = app.call(Method::PUT, &path, None, Some(moved)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, created) = app.call(Method::POST, LEASES, None, Some(weekly)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let series = &created["series"];
    let series_id = text(&series["id"]);
    assert_eq!(series["recurrence"], "FREQ=WEEKLY;COUNT=4");
    let leases = series["leases"].as_array().expect("leases");
    let starts: Vec<Value> = leases.iter().map(|l| l["start_date"].clone()).collect();
    let expected: Vec<Value> = (0..4).map(|k| json!(lease_date(t + k * WEEK))).collect();
    assert_eq!(starts, expected);
    assert_eq!(
        created["lease"]["id"], leases[0]["id"],
        "the lease is the first occurrence"
    );
    assert_eq!(created["lease"]["series_id"], json!(series_id));
    assert_eq!(leases[3]["occurrence"], 3);
    // Between occurrences the host is free.
    let between = lease_body(
        "between",
        &minutes(t + 2 * HOUR),
        &minutes(t + WEEK),
        one_host(),
    );
    let (status, body) = app.call(Method::POST, LEASES, None, Some(between)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    check_changes(&app, t, &series_id, &text(&leases[1]["id"])).await;
}

/// One occurrence cancelled alone, the series renamed, moved (refused, then admitted), then
/// cancelled whole.
async fn check_changes(app: &TestApp, t: i64, series_id: &str, second: &str) {
    let path = format!("{SERIES}/{series_id}");
    let (status, _) = app
        .call(Method::DELETE, &format!("{LEASES}/{second}"), None, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, shown) = app.get(&path, None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    let left: Vec<Value> = shown["series"]["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| l["occurrence"].clone())
        .collect();
    assert_eq!(left, [json!(0), json!(2), json!(3)]);
    let (status, renamed) = app
        .call(Method::PUT, &path, None, Some(json!({"name": "retro"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["series"]["name"], "retro");
    assert!(
        renamed["series"]["leases"]
            .as_array()
            .expect("leases")
            .iter()
            .all(|l| l["name"] == "retro")
    );
    let (status, body) = app
        .call(
            Method::PUT,
            &path,
            None,
            Some(json!({"name": "x", "start_date": "now"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Moving the series an hour later runs into the lease between the first two occurrences.
    let (status, refused) = app
        .call(Method::PUT, &path, None, Some(json!({"shift_minutes": 60})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let indexes: Vec<Value> = refused["conflicts"]
        .as_array()
        .expect("conflicts")
        .iter()
        .map(|c| c["index"].clone())
        .collect();
    assert_eq!(indexes, [json!(0)], "{refused}");
    assert!(
        refused["conflicts"][0]["alternative"].is_object(),
        "{refused}"
    );
    // An hour earlier fits: every occurrence left moves.
    let (status, moved) = app
        .call(
            Method::PUT,
            &path,
            None,
            Some(json!({"shift_minutes": -60})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{moved}");
    let starts: Vec<Value> = moved["series"]["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| l["start_date"].clone())
        .collect();
    let expected: Vec<Value> = [0, 2, 3]
        .iter()
        .map(|k| json!(lease_date(t + k * WEEK - HOUR)))
        .collect();
    assert_eq!(starts, expected);
    for bad in [
        json!({"shift_minutes": 0}),
        json!({"shift_minutes": -100_000_000}),
        json!({}),
    ] {
        let (status, body) = app.call(Method::PUT, &path, None, Some(bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let (status, _) = app.call(Method::DELETE, &path, None, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.get(&path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, listed) = app.get(LEASES, None).await;
    let names: Vec<Value> = listed["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| l["name"].clone())
        .collect();
    assert_eq!(names, [json!("blocker"), json!("between")]);
}

#[tokio::test]
async fn bad_recurrences_are_refused_naming_recurrence() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let mut cases: Vec<Value> = [
        "FREQ=WEEKLY",
        "FREQ=MONTHLY;COUNT=3",
        "FREQ=WEEKLY;COUNT=2;UNTIL=20400101",
        "FREQ=WEEKLY;COUNT=3;BYSETPOS=1",
        "FREQ=DAILY;BYDAY=MO;COUNT=2",
        "FREQ=WEEKLY;COUNT=0",
        "FREQ=WEEKLY;UNTIL=yesterday",
        "bogus",
    ]
    .iter()
    .map(|rule| series_body("bad", t, 2, rule))
    .collect();
    cases.push(series_body("long", t, 30, "FREQ=DAILY;COUNT=2"));
    cases.push(series_body("many", t, 1, "FREQ=DAILY;COUNT=101"));
    let mut not_text = series_body("num", t, 1, "x");
    not_text["recurrence"] = json!(4);
    cases.push(not_text);
    let mut waits = series_body("waits", t, 1, "FREQ=DAILY;COUNT=2");
    waits["on_conflict"] = json!("wait");
    waits["wait_until"] = json!(minutes(t));
    cases.push(waits);
    for body in cases {
        let (status, answer) = app
            .call(Method::POST, LEASES, None, Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert!(
            text(&answer["error_message"]).contains("recurrence"),
            "{body}: {answer}"
        );
    }
    let (_, listed) = app.get(LEASES, None).await;
    assert_eq!(listed["leases"], json!([]));
}

#[tokio::test]
async fn a_series_is_its_projects_and_a_key_replays_it() {
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
    let host = json!({"name": "h1", "vcpus": 8, "memory_mb": 16_384, "local_gb": 100});
    let (status, _) = app
        .call_as(admin, Method::POST, "/reservation/v1/os-hosts", Some(host))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let body = series_body("mine", tomorrow(), 1, "FREQ=DAILY;INTERVAL=2;COUNT=3");
    let (status, _) = app
        .call_as(READER, Method::POST, LEASES, Some(body.clone()))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let send = |key: &'static str| {
        app.request(Method::POST, LEASES, None)
            .header("x-project-id", P1.project)
            .header("x-user-id", P1.user)
            .header("x-roles", P1.roles)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let (status, first) = parse(send("series-1").await.expect("send")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, again) = parse(send("series-1").await.expect("send")).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(
        again["series"]["id"], first["series"]["id"],
        "the key replays the series"
    );
    assert_eq!(again["series"]["leases"].as_array().map(Vec::len), Some(3));
    let path = format!("{SERIES}/{}", text(&first["series"]["id"]));
    for method in [Method::GET, Method::DELETE] {
        let (status, _) = app.call_as(P2, method, &path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (status, _) = app.call_as(READER, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, shown) = app.call_as(READER, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    let (status, _) = app.call_as(P1, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn clients_racing_series_and_single_leases_never_over_commit() {
    let app = TestApp::spawn().await;
    for n in 0..4 {
        enroll(&app, &format!("r{n}"), "az1", 8).await;
    }
    let t = tomorrow();
    let (series, singles) = race_series_and_leases(&[&app], t).await;
    check_series_race(&app, t, series, singles).await;
}

/// 32 clients spread over `apps`: even ones ask for a weekly series of three, odd ones for a
/// single lease over the first week's window; every one needs a whole host over that window.
/// Returns how many series and single leases were admitted.
pub(crate) async fn race_series_and_leases(apps: &[&TestApp], t: i64) -> (usize, usize) {
    let tasks: Vec<_> = (0..32_usize)
        .map(|n| {
            let body = match n % 2 {
                0 => series_body(&format!("series-{n}"), t, 2, "FREQ=WEEKLY;COUNT=3"),
                _ => lease_body(
                    &format!("single-{n}"),
                    &minutes(t),
                    &minutes(t + 2 * HOUR),
                    one_host(),
                ),
            };
            let app = apps[n % apps.len()];
            let (client, url) = (app.client.clone(), format!("{}{LEASES}", app.base));
            tokio::spawn(async move {
                parse(client.post(url).json(&body).send().await.expect("send")).await
            })
        })
        .collect();
    let (mut series, mut singles) = (0, 0);
    for task in tasks {
        match task.await.expect("client") {
            (StatusCode::CREATED, body) if body["series"].is_object() => series += 1,
            (StatusCode::CREATED, _) => singles += 1,
            (StatusCode::CONFLICT, _) => {}
            (status, body) => panic!("unexpected {status}: {body}"),
        }
    }
    (series, singles)
}

/// Exactly the four hosts were taken over the first week, each admitted series whole, and no
/// week holds more leases than hosts, as `app` lists them.
pub(crate) async fn check_series_race(app: &TestApp, t: i64, series: usize, singles: usize) {
    assert_eq!(
        series + singles,
        4,
        "exactly the four hosts over the first week"
    );
    let (_, listed) = app.get(LEASES, None).await;
    let leases = listed["leases"].as_array().expect("leases");
    assert_eq!(
        leases.len(),
        singles + 3 * series,
        "each admitted series whole"
    );
    for week in 0..3 {
        let start = json!(lease_date(t + week * WEEK));
        let at_once = leases.iter().filter(|l| l["start_date"] == start).count();
        assert!(at_once <= 4, "week {week}: {at_once} leases on four hosts");
    }
}

#[tokio::test]
async fn a_heavy_series_is_tried_over_a_snapshot_and_still_all_or_none() {
    let app = TestApp::spawn().await;
    for n in 0..3 {
        enroll(&app, &format!("h{n}"), "az1", 8).await;
    }
    let t = tomorrow();
    // 100 daily occurrences of three hosts weigh more than ADMISSION_IN_PLACE_MAX: the series
    // is admitted over a snapshot before the writer lock.
    let mut body = series_body("nightly", t, 1, "FREQ=DAILY;COUNT=100");
    body["reservations"] = json!([{"resource_type": "physical:host", "min": 3, "max": 3}]);
    let at = t + 50 * DAY;
    let blocker = lease_body("blocker", &minutes(at), &minutes(at + HOUR), one_host());
    let (status, blocker) = app.call(Method::POST, LEASES, None, Some(blocker)).await;
    assert_eq!(status, StatusCode::CREATED, "{blocker}");
    let (status, refused) = app
        .call(Method::POST, LEASES, None, Some(body.clone()))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["conflicts"][0]["index"], 50, "{refused}");
    assert_eq!(
        refused["conflicts"][0]["alternative"]["start_date"],
        json!(lease_date(at + HOUR)),
        "{refused}"
    );
    let path = format!("{LEASES}/{}", text(&blocker["lease"]["id"]));
    let (status, _) = app.call(Method::DELETE, &path, None, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, created) = app.call(Method::POST, LEASES, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["series"]["leases"].as_array().map(Vec::len),
        Some(100)
    );
}
