//! A research group's week, end to end over HTTP, with time pressed into seconds: the group
//! holds what a search offers and leases it while a rival's request for the same capacity is
//! refused; the rival's waitlisted lease is admitted the moment the group lets go, and another
//! waitlisted lease expires; a weekly series with one conflicting occurrence is refused with the
//! alternatives, then admitted once the conflict is gone; a running lease is shared with a
//! course and consumed by it up to its cap; a lease nobody uses is told and then released by the
//! operator's policy; and the usage report over the whole run equals what the test works out
//! from the leases' windows and the allocations it made.

use crate::blazar_leases::{LEASES, lease_body, minutes, now_micros, rfc3339, tomorrow};
use crate::idle::lease;
use crate::shares::{ADMIN, GUEST, OWNER, STRANGER, allocate, host, running_lease, share};
use crate::support::{Options, TestApp, Who};
use crate::usage::{micros, row};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

const AVAILABILITY: &str = "/reservation/v1/availability";
const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;
/// The group.
const LAB: Who<'static> = OWNER;
/// Another project wanting the same capacity.
const RIVAL: Who<'static> = STRANGER;
/// A course the group shares a lease with.
const COURSE: Who<'static> = GUEST;

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a string"))
        .to_owned()
}

fn hosts(n: u32) -> Value {
    json!([{"resource_type": "physical:host", "min": n, "max": n}])
}

fn named(name: &str) -> Value {
    json!([{"resource_type": "physical:host", "min": 1, "max": 1,
            "resource_properties": format!(r#"["==", "$hypervisor_hostname", "{name}"]"#)}])
}

fn with(mut body: Value, extra: Value) -> Value {
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    body
}

async fn post(app: &TestApp, who: Who<'_>, path: &str, body: Value) -> (StatusCode, Value) {
    app.call_as(who, Method::POST, path, Some(body)).await
}

/// Waits (at most 10 s) for lease `id` to reach `status`; the lease then.
async fn until_status(app: &TestApp, id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let shown = lease(app, id).await;
        if shown["status"] == status {
            return shown;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {status}: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Unit-hours of `amount` held over `[from, to)` microseconds.
fn unit_hours(amount: u64, from: i64, to: i64) -> f64 {
    amount as f64 * ((to - from).max(0) as f64) / 3.6e9
}

fn figure(row: &Value, name: &str) -> f64 {
    row[name]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {row}"))
}

#[tokio::test]
async fn a_research_groups_week() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        // The operator releases a lease nobody used 3 s after its start, telling it 2 s before.
        idle_release: Some((3, 2)),
        ..Options::default()
    })
    .await;
    let began = now_micros();
    let h1 = host(&app, "h1").await;
    for name in ["h2", "h3", "h4"] {
        host(&app, name).await;
    }
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + HOUR));

    // Monday: the group searches for two hosts tomorrow and holds the offer; the rival's
    // request for three is refused; the group's lease takes what was held.
    let search = json!({"start_date": start, "end_date": end, "reservations": hosts(2),
                        "hold_minutes": 10});
    let (status, offer) = post(&app, LAB, AVAILABILITY, search).await;
    assert_eq!(status, StatusCode::OK, "{offer}");
    assert_eq!(offer["hold"]["held"], true, "{offer}");
    let hold_id = text(&offer["hold"]["hold_id"]);
    let rival = lease_body("rival", &start, &end, hosts(3));
    let (status, refused) = post(&app, RIVAL, LEASES, rival.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let from_hold = with(
        lease_body("experiment", &start, &end, hosts(2)),
        json!({"hold_id": hold_id}),
    );
    let (status, experiment) = post(&app, LAB, LEASES, from_hold).await;
    assert_eq!(status, StatusCode::CREATED, "{experiment}");
    let experiment = text(&experiment["lease"]["id"]);

    // Tuesday: the rival waits for its three hosts; the group lets its lease go and the rival's
    // is admitted in the same commit. The group's own wait for two more expires.
    let (status, waiting) = post(
        &app,
        RIVAL,
        LEASES,
        with(rival, json!({"on_conflict": "wait", "wait_until": start})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    let waiting = text(&waiting["lease"]["id"]);
    let (status, _) = app
        .call_as(LAB, Method::DELETE, &format!("{LEASES}/{experiment}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(lease(&app, &waiting).await["status"], "PENDING");
    let soon = rfc3339(now_micros() + 2_000_000);
    let (status, hopeless) = post(
        &app,
        LAB,
        LEASES,
        with(
            lease_body("more", &start, &end, hosts(2)),
            json!({"on_conflict": "wait", "wait_until": soon}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{hopeless}");
    let hopeless = text(&hopeless["lease"]["id"]);

    // Wednesday: a weekly series of the four hosts; the rival holds one in the second week,
    // so the series is refused naming that occurrence and a window that fits; once the rival
    // gives it up, the series is admitted whole.
    let first = t + DAY;
    let week_two = first + 7 * DAY;
    let blocker = lease_body(
        "blocker",
        &minutes(week_two),
        &minutes(week_two + HOUR),
        hosts(1),
    );
    let (status, blocker) = post(&app, RIVAL, LEASES, blocker).await;
    assert_eq!(status, StatusCode::CREATED, "{blocker}");
    let blocker = text(&blocker["lease"]["id"]);
    let mut series = lease_body("seminar", &minutes(first), &minutes(first + HOUR), hosts(4));
    series["recurrence"] = json!("FREQ=WEEKLY;COUNT=3");
    let (status, refused) = post(&app, LAB, LEASES, series.clone()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(
        refused["conflicts"].as_array().map(Vec::len),
        Some(1),
        "{refused}"
    );
    assert_eq!(refused["conflicts"][0]["index"], 1, "{refused}");
    assert!(
        refused["conflicts"][0]["alternative"]["start_date"].is_string(),
        "{refused}"
    );
    let (status, _) = app
        .call_as(RIVAL, Method::DELETE, &format!("{LEASES}/{blocker}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, admitted) = post(&app, LAB, LEASES, series).await;
    assert_eq!(status, StatusCode::CREATED, "{admitted}");
    assert_eq!(
        admitted["series"]["leases"].as_array().map(Vec::len),
        Some(3)
    );

    // Thursday: a lease running now on h1, shared with the course up to 4 VCPU; the course runs
    // 3, is refused 2 more, then runs 1. Another on h2 nobody uses.
    let shared = running_lease(&app, named("h1")).await;
    let unused = running_lease(&app, named("h2")).await;
    let (status, body) = share(&app, LAB, &shared, COURSE.project, json!({"VCPU": 4})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut consumed_at = Vec::new();
    for (n, vcpus, expected) in [
        (1, 3, StatusCode::NO_CONTENT),
        (2, 2, StatusCode::CONFLICT),
        (2, 1, StatusCode::NO_CONTENT),
    ] {
        let before = now_micros();
        let (status, body) = allocate(&app, n, COURSE.project, &h1, vcpus).await;
        assert_eq!(status, expected, "{body}");
        if status == StatusCode::NO_CONTENT {
            consumed_at.push((vcpus, before, now_micros()));
        }
    }

    // Friday: the unused lease is told, then released; the hopeless wait has expired.
    let released = until_status(&app, &unused, "TERMINATED").await;
    assert!(
        text(&released["status_reason"]).contains("released"),
        "{released}"
    );
    until_status(&app, &hopeless, "EXPIRED").await;
    let (status, records) = app
        .call_as(LAB, Method::GET, &format!("{LEASES}/{unused}/events"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{records}");
    let told: Vec<&Value> = records["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|r| r["type"] == "lease.idle_notice" || r["type"] == "lease.idle_release")
        .collect();
    assert_eq!(told.len(), 2, "told once, released once: {records}");

    // The week's usage report equals what the leases' windows and the allocations make.
    let period = format!("start={}", minutes(began - 60_000_000).replace(' ', "%20"));
    let (status, report) = app
        .call_as(
            ADMIN,
            Method::GET,
            &format!("/reservation/v1/usage?{period}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let until = micros(&report["usage"]["counted_until"]);
    let shared = lease(&app, &shared).await;
    let (shared_start, unused_start, unused_end) = (
        micros(&shared["start_date"]),
        micros(&released["start_date"]),
        micros(&released["end_date"]),
    );
    // Reserved: the two running leases' whole hosts (8 VCPU each) until now and until the
    // release; history begins as a lease is committed, a moment after the "now" it was given.
    let reserved = unit_hours(8, shared_start, until) + unit_hours(8, unused_start, unused_end);
    let lab = row(&report, "lab", "VCPU");
    let got = figure(lab, "reserved_hours");
    assert!(
        got <= reserved && reserved - got < 2.0 * 8.0 / 3600.0,
        "{lab} vs {reserved}"
    );
    // Consumed by the course inside the group's reservation, bracketed by the requests' times.
    let (low, high) = consumed_at
        .iter()
        .fold((0.0, 0.0), |(low, high), (n, sent, answered)| {
            (
                low + unit_hours(*n, *answered, until),
                high + unit_hours(*n, *sent, until),
            )
        });
    let course = row(&report, "course", "VCPU");
    let consumed = figure(course, "consumed_hours");
    assert!(
        low <= consumed && consumed <= high,
        "{course} not in [{low}, {high}]"
    );
    // Idle: what the group reserved that nobody used.
    let idle = figure(lab, "idle_hours");
    assert!((idle - (got - consumed)).abs() < 1e-9, "{lab} {course}");
    // The rival's and the future leases reserved nothing yet.
    assert!(
        report["usage"]["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|r| r["project_id"] != "other" || figure(r, "reserved_hours") == 0.0),
        "{report}"
    );
}
