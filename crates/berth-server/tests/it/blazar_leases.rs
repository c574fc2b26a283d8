//! Blazar leases end to end: host, instance and floating-IP reservations, dates, the lifecycle
//! engine in real time, counter-offers and the availability search, visibility between
//! projects, bad input, and an admission race on SQLite. The helpers marked `pub(crate)` are
//! shared with the PostgreSQL tests.

use crate::support::{Options, TestApp, Who};
use berth_app::Clock as _;
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

pub(crate) const LEASES: &str = "/reservation/v1/leases";
const HOSTS: &str = "/reservation/v1/os-hosts";
const ALLOCATIONS: &str = "/reservation/v1/os-hosts/allocations";
const FIPS: &str = "/reservation/v1/floatingips";
const AVAILABILITY: &str = "/reservation/v1/availability";
const SECOND: i64 = 1_000_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
/// Blazar's lease date shape (`%Y-%m-%dT%H:%M:%S.%f`); `9` stands for a digit.
const LEASE_DATE: &str = "9999-99-99T99:99:99.999999";
/// Blazar's record date shape (`created_at`, `updated_at`).
const RECORD_DATE: &str = "9999-99-99 99:99:99";
/// The filters of the host reservations below.
const VCPUS_AT_LEAST_4: &str = r#"[">=", "$vcpus", "4"]"#;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The wall clock the server reads, in microseconds since the epoch.
pub(crate) fn now_micros() -> i64 {
    berth_server::clock::SystemClock.now().as_micros()
}

fn timestamp(micros: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_microsecond(micros).expect("a representable time")
}

/// Blazar's request format `YYYY-MM-DD HH:MM` (UTC), truncating to the minute.
pub(crate) fn minutes(micros: i64) -> String {
    timestamp(micros).strftime("%Y-%m-%d %H:%M").to_string()
}

/// RFC 3339 in whole seconds (UTC), truncating.
pub(crate) fn rfc3339(micros: i64) -> String {
    timestamp(micros).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A date as berth answers it: `%Y-%m-%dT%H:%M:%S.%f`, UTC.
pub(crate) fn lease_date(micros: i64) -> String {
    let seconds = timestamp(micros - micros.rem_euclid(SECOND)).strftime("%Y-%m-%dT%H:%M:%S");
    format!("{seconds}.{:06}", micros.rem_euclid(SECOND))
}

/// Parses a date berth answered back to microseconds.
pub(crate) fn parse_lease_date(text: &str) -> i64 {
    text.parse::<jiff::civil::DateTime>()
        .and_then(|dt| dt.to_zoned(jiff::tz::TimeZone::UTC))
        .map(|z| z.timestamp().as_microsecond())
        .unwrap_or_else(|e| panic!("{text} is not a lease date: {e}"))
}

/// A whole minute about a day from now: the origin of the future windows of a test.
pub(crate) fn tomorrow() -> i64 {
    let now = now_micros();
    now - now.rem_euclid(MINUTE) + DAY
}

/// Whether `value` is a string of the shape `pattern` (`9` is any digit).
fn shaped(value: &Value, pattern: &str) -> bool {
    value.as_str().is_some_and(|text| {
        text.len() == pattern.len()
            && text.chars().zip(pattern.chars()).all(|(c, p)| match p {
                '9' => c.is_ascii_digit(),
                _ => c == p,
            })
    })
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a string"))
        .to_owned()
}

/// Enrolls a host with compute inventory, a zone and extra capabilities; returns its id.
pub(crate) async fn enroll(app: &TestApp, name: &str, zone: &str, vcpus: u64) -> String {
    let body = json!({"name": name, "availability_zone": zone, "vcpus": vcpus,
                      "memory_mb": 16384, "local_gb": 100, "rack": "r1", "gpu": false});
    let (status, created) = app.call(Method::POST, HOSTS, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    text(&created["host"]["id"])
}

/// A lease request.
pub(crate) fn lease_body(name: &str, start: &str, end: &str, reservations: Value) -> Value {
    json!({"name": name, "start_date": start, "end_date": end,
           "reservations": reservations, "events": []})
}

/// A `physical:host` reservation of hosts with at least 4 VCPUs in `zone`.
pub(crate) fn whole_hosts(min: u32, max: u32, zone: &str) -> Value {
    json!({"resource_type": "physical:host", "min": min, "max": max,
           "hypervisor_properties": VCPUS_AT_LEAST_4,
           "resource_properties": format!(r#"["==", "$availability_zone", "{zone}"]"#)})
}

/// A `physical:host` reservation of the named host.
fn the_host(name: &str) -> Value {
    json!({"resource_type": "physical:host", "min": 1, "max": 1,
           "resource_properties": format!(r#"["==", "$hypervisor_hostname", "{name}"]"#)})
}

/// A `virtual:instance` reservation of `amount` instances with 1 GiB and 10 GB each.
fn instances(vcpus: u64, amount: u32, affinity: Value) -> Value {
    json!({"resource_type": "virtual:instance", "vcpus": vcpus, "memory_mb": 1024,
           "disk_gb": 10, "amount": amount, "affinity": affinity})
}

/// Creates a lease, asserting 201, and returns the `lease` member.
pub(crate) async fn create(app: &TestApp, body: Value) -> Value {
    let (status, created) = app.call(Method::POST, LEASES, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["lease"].clone()
}

/// Posts a lease that must not fit; returns the 409 body after checking its Blazar shape.
async fn refused(app: &TestApp, body: Value) -> Value {
    let (status, answer) = app.call(Method::POST, LEASES, None, Some(body)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(answer["error_code"], 409, "{answer}");
    assert!(
        answer["error_message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert!(answer["counter_offer"].is_object(), "{answer}");
    answer
}

/// The host ids a lease holds, over all its reservations, in order.
pub(crate) fn held(lease: &Value) -> Vec<String> {
    lease["reservations"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["allocations"].as_array().into_iter().flatten())
        .map(|a| text(&a["host_id"]))
        .collect()
}

async fn delete(app: &TestApp, path: &str) -> StatusCode {
    app.call(Method::DELETE, path, None, None).await.0
}

async fn put(app: &TestApp, id: &str, body: Value) -> (StatusCode, Value) {
    app.call(Method::PUT, &format!("{LEASES}/{id}"), None, Some(body))
        .await
}

async fn show(app: &TestApp, id: &str) -> Value {
    let (status, body) = app.get(&format!("{LEASES}/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["lease"].clone()
}

async fn lease_count(app: &TestApp) -> usize {
    let (status, body) = app.get(LEASES, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["leases"].as_array().expect("leases").len()
}

/// Polls a lease until its status is `wanted`, at most until `deadline`. Returns the lease as
/// first seen with that status by a request sent before the deadline.
pub(crate) async fn wait_for_status(
    app: &TestApp,
    id: &str,
    wanted: &str,
    deadline: tokio::time::Instant,
) -> Option<Value> {
    let path = format!("{LEASES}/{id}");
    for _ in 0..1000 {
        let sent = tokio::time::Instant::now();
        if sent > deadline {
            return None;
        }
        let (status, body) = app.get(&path, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if body["lease"]["status"] == wanted {
            return Some(body["lease"].clone());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// The lifecycle record of a lease, oldest first.
pub(crate) async fn records(app: &TestApp, id: &str) -> Vec<Value> {
    let (status, body) = app.get(&format!("{LEASES}/{id}/events"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["events"].as_array().expect("events").clone()
}

/// The kinds of a lifecycle record, in order.
pub(crate) fn kinds(records: &[Value]) -> Vec<String> {
    records.iter().map(|r| text(&r["type"])).collect()
}

/// How late an event fired: its record's time less its due time, in microseconds.
pub(crate) fn lateness(records: &[Value], kind: &str) -> i64 {
    let record = records
        .iter()
        .find(|r| r["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {records:?}"));
    assert!(shaped(&record["time"], LEASE_DATE), "{record}");
    let due = record["details"]["due"]
        .as_i64()
        .unwrap_or_else(|| panic!("{kind} has no due time: {record}"));
    parse_lease_date(&text(&record["time"])) - due
}

// ---------------------------------------------------------------------------------------------
// 1. Host leases
// ---------------------------------------------------------------------------------------------

/// Checks Blazar's fields of a pending lease with one host reservation `min=1,max=2`.
fn check_host_lease(lease: &Value, name: &str, start: i64, end: i64) {
    let id = text(&lease["id"]);
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{lease}");
    assert_eq!(lease["name"], name);
    assert_eq!(
        (text(&lease["start_date"]), text(&lease["end_date"])),
        (lease_date(start), lease_date(end))
    );
    assert!(shaped(&lease["start_date"], LEASE_DATE), "{lease}");
    assert_eq!(
        (&lease["status"], &lease["degraded"]),
        (&json!("PENDING"), &json!(false))
    );
    assert_eq!(
        (&lease["user_id"], &lease["project_id"]),
        (&json!("admin"), &json!("admin"))
    );
    assert!(lease.get("trust_id").is_some_and(Value::is_null), "{lease}");
    assert!(shaped(&lease["created_at"], RECORD_DATE), "{lease}");
    let reservation = &lease["reservations"][0];
    assert!(
        uuid::Uuid::parse_str(&text(&reservation["id"])).is_ok(),
        "{reservation}"
    );
    assert_eq!(reservation["lease_id"], json!(id));
    assert_eq!(reservation["status"], "pending");
    assert_eq!(reservation["resource_type"], "physical:host");
    assert_eq!(
        (&reservation["min"], &reservation["max"]),
        (&json!(1), &json!(2))
    );
    assert_eq!(reservation["hypervisor_properties"], VCPUS_AT_LEAST_4);
    assert_eq!(
        reservation["resource_properties"],
        r#"["==", "$availability_zone", "az1"]"#
    );
    assert_eq!(reservation["before_end"], "default");
    let events = lease["events"].as_array().expect("events");
    let mut seen = BTreeSet::new();
    for event in events {
        assert!(shaped(&event["time"], LEASE_DATE), "{event}");
        assert_eq!(event["status"], "UNDONE", "{event}");
        let kind = text(&event["event_type"]);
        let due = match kind.as_str() {
            "start_lease" => start,
            "before_end_lease" => end - HOUR,
            "end_lease" => end,
            other => panic!("unknown event type {other}"),
        };
        assert_eq!(text(&event["time"]), lease_date(due), "{event}");
        seen.insert(kind);
    }
    assert_eq!(seen.len(), 3, "three lifecycle events: {events:?}");
}

/// Enrolls three big az1 hosts, a small az1 host and a big az2 host: `[big.., small, other]`.
async fn enroll_mixed(app: &TestApp) -> Vec<String> {
    let mut ids = Vec::new();
    for (name, zone, vcpus) in [
        ("big-1", "az1", 8),
        ("big-2", "az1", 8),
        ("big-3", "az1", 8),
        ("small", "az1", 2),
        ("other", "az2", 8),
    ] {
        ids.push(enroll(app, name, zone, vcpus).await);
    }
    ids
}

/// The allocation listings name `lease`'s reservation on exactly the hosts it holds.
async fn check_allocations(app: &TestApp, lease: &Value) {
    let lease_id = text(&lease["id"]);
    let reservation = text(&lease["reservations"][0]["id"]);
    let hosts = held(lease);
    for filter in [
        format!("lease_id={lease_id}"),
        format!("reservation_id={reservation}"),
    ] {
        let (status, body) = app.get(&format!("{ALLOCATIONS}?{filter}"), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let entries = body["allocations"].as_array().expect("allocations");
        assert_eq!(entries.len(), 5, "one entry per host: {body}");
        for entry in entries {
            let listed = entry["reservations"].as_array().expect("reservations");
            match hosts.contains(&text(&entry["resource_id"])) {
                true => {
                    assert_eq!(listed.len(), 1, "{filter}: {entry}");
                    assert_eq!(listed[0]["id"], json!(reservation));
                    assert_eq!(listed[0]["lease_id"], json!(lease_id));
                    assert_eq!(listed[0]["start_date"], lease["start_date"]);
                    assert_eq!(listed[0]["end_date"], lease["end_date"]);
                }
                false => assert!(listed.is_empty(), "{filter}: {entry}"),
            }
        }
    }
    let path = format!("{HOSTS}/{}/allocation", hosts[0]);
    let (status, body) = app.get(&format!("{path}?lease_id={lease_id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["allocation"]["resource_id"], json!(hosts[0]));
    assert_eq!(
        body["allocation"]["reservations"][0]["id"],
        json!(reservation)
    );
    let other = uuid::Uuid::from_u128(7);
    let (_, body) = app.get(&format!("{path}?lease_id={other}"), None).await;
    assert_eq!(body["allocation"]["reservations"], json!([]), "{body}");
}

/// Renames `lease`, fails to extend it over `blocker`, then extends it into free time.
async fn update_host_lease(app: &TestApp, lease: &Value, t: i64) {
    let id = text(&lease["id"]);
    let (status, renamed) = put(app, &id, json!({"name": "renamed"})).await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["lease"]["name"], "renamed");
    assert_eq!(renamed["lease"]["end_date"], lease["end_date"]);
    // Over the blocking lease's window no eligible host is free: the extension is re-admitted
    // and refused, and the lease is unchanged.
    let (status, body) = put(
        app,
        &id,
        json!({"end_date": minutes(t + 3 * DAY + 12 * HOUR)}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["counter_offer"].is_object(), "{body}");
    assert_eq!(show(app, &id).await["end_date"], lease["end_date"]);
    let (status, extended) = put(app, &id, json!({"end_date": minutes(t + 2 * DAY)})).await;
    assert_eq!(status, StatusCode::OK, "{extended}");
    let extended = &extended["lease"];
    assert_eq!(extended["end_date"], json!(lease_date(t + 2 * DAY)));
    assert_eq!(extended["name"], "renamed");
    assert_eq!(held(extended), held(lease), "an extension keeps its hosts");
    let end_event = extended["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["event_type"] == "end_lease")
        .cloned()
        .expect("end event");
    assert_eq!(end_event["time"], json!(lease_date(t + 2 * DAY)));
    check_allocations(app, extended).await;
}

#[tokio::test]
async fn a_host_lease_takes_free_matching_hosts_and_is_shown_updated_and_deleted() {
    let app = TestApp::spawn().await;
    let ids = enroll_mixed(&app).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + DAY));
    let a = create(
        &app,
        lease_body("hosts-a", &start, &end, json!([whole_hosts(1, 2, "az1")])),
    )
    .await;
    check_host_lease(&a, "hosts-a", t, t + DAY);
    let first = held(&a);
    assert_eq!(first.len(), 2, "as many as max: {a}");
    assert!(
        first.iter().all(|h| ids[..3].contains(h)),
        "only big az1 hosts: {a}"
    );
    // One eligible host is left in the window: a second lease gets it, fewer than its max.
    let b = create(
        &app,
        lease_body("hosts-b", &start, &end, json!([whole_hosts(1, 2, "az1")])),
    )
    .await;
    let second = held(&b);
    assert_eq!(second.len(), 1, "{b}");
    assert!(
        ids[..3].contains(&second[0]) && !first.contains(&second[0]),
        "{b}"
    );
    // Later, all three big az1 hosts are free: this one blocks extensions of the first lease.
    let c = create(
        &app,
        lease_body(
            "hosts-c",
            &minutes(t + 3 * DAY),
            &minutes(t + 4 * DAY),
            json!([whole_hosts(3, 3, "az1")]),
        ),
    )
    .await;
    assert_eq!(held(&c).len(), 3);
    check_allocations(&app, &a).await;

    let (status, list) = app.get(LEASES, None).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<_> = list["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .map(|l| text(&l["name"]))
        .collect();
    assert_eq!(names, ["hosts-a", "hosts-b", "hosts-c"]);
    let id = text(&a["id"]);
    assert_eq!(show(&app, &id).await, a, "show answers what create did");
    update_host_lease(&app, &a, t).await;

    delete_host_leases(&app, &id, &text(&c["id"]), &first[0]).await;
}

/// Deletes lease `a` and then lease `c`, both holding `host` in the future: the host cannot be
/// un-enrolled until neither holds it; a deleted lease is gone.
async fn delete_host_leases(app: &TestApp, a: &str, c: &str, host: &str) {
    let host = format!("{HOSTS}/{host}");
    assert_eq!(
        delete(app, &host).await,
        StatusCode::CONFLICT,
        "held in the future"
    );
    assert_eq!(
        delete(app, &format!("{LEASES}/{a}")).await,
        StatusCode::NO_CONTENT
    );
    let (status, body) = app.get(&format!("{LEASES}/{a}"), None).await;
    assert_eq!(
        (status, &body["error_code"]),
        (StatusCode::NOT_FOUND, &json!(404)),
        "{body}"
    );
    // The lifecycle record outlives the lease, for admins.
    assert_eq!(
        kinds(&records(app, a).await).last().map(String::as_str),
        Some("lease.delete")
    );
    assert_eq!(
        delete(app, &format!("{LEASES}/{a}")).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(lease_count(app).await, 2);
    assert_eq!(
        delete(app, &host).await,
        StatusCode::CONFLICT,
        "still held by {c}"
    );
    assert_eq!(
        delete(app, &format!("{LEASES}/{c}")).await,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        delete(app, &host).await,
        StatusCode::NO_CONTENT,
        "no longer held"
    );
}

// Re-admitting a lease sets its own holds aside; each reservation must still keep what its
// siblings hold, or a growing reservation would push a sibling off its hosts (and a started
// lease would then be refused as `held_hosts_unavailable`).
#[tokio::test]
async fn growing_one_reservation_of_a_running_lease_leaves_the_others_hosts_alone() {
    let app = TestApp::spawn().await;
    let ids = [
        enroll(&app, "g1", "az1", 8).await,
        enroll(&app, "g2", "az1", 8).await,
        enroll(&app, "g3", "az1", 8).await,
    ];
    let created = tokio::time::Instant::now();
    let body = lease_body(
        "two",
        "now",
        &minutes(tomorrow()),
        json!([whole_hosts(1, 1, "az1"), whole_hosts(1, 1, "az1")]),
    );
    let lease = create(&app, body).await;
    let id = text(&lease["id"]);
    let (first, second) = (held(&lease)[0].clone(), held(&lease)[1].clone());
    let free = ids
        .iter()
        .find(|h| **h != first && **h != second)
        .expect("one host is free")
        .clone();
    wait_for_status(&app, &id, "ACTIVE", created + Duration::from_millis(1500))
        .await
        .expect("ACTIVE within 1.5 s");
    let grow = json!({"reservations": [{"id": lease["reservations"][0]["id"], "max": 2}]});
    let (status, body) = put(&app, &id, grow).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the free host is there to grow onto: {body}"
    );
    let reservations = &body["lease"]["reservations"];
    let hosts = |r: &Value| held(&json!({"reservations": [r]}));
    let mut grown = hosts(&reservations[0]);
    grown.sort();
    let mut expected = vec![first, free];
    expected.sort();
    assert_eq!(grown, expected, "{body}");
    assert_eq!(hosts(&reservations[1]), [second], "{body}");
}

// ---------------------------------------------------------------------------------------------
// 2. Instance leases
// ---------------------------------------------------------------------------------------------

/// Two identical az1 hosts with 8 VCPUs each.
async fn two_hosts(app: &TestApp) -> (String, String) {
    (
        enroll(app, "i1", "az1", 8).await,
        enroll(app, "i2", "az1", 8).await,
    )
}

#[tokio::test]
async fn instance_reservations_echo_affinity_in_every_spelling() {
    let app = TestApp::spawn().await;
    two_hosts(&app).await;
    let t = tomorrow();
    let spellings = [
        (json!("False"), json!(false)),
        (json!(false), json!(false)),
        (json!("True"), json!(true)),
        (json!(true), json!(true)),
        (json!("None"), Value::Null),
        (Value::Null, Value::Null),
    ];
    for (given, echoed) in spellings {
        let body = lease_body(
            "vms",
            &minutes(t),
            &minutes(t + DAY),
            json!([instances(2, 2, given.clone())]),
        );
        let lease = create(&app, body).await;
        let r = &lease["reservations"][0];
        assert_eq!(r["resource_type"], "virtual:instance", "{r}");
        assert_eq!(r["affinity"], echoed, "{given}: {r}");
        assert_eq!(
            (&r["vcpus"], &r["memory_mb"], &r["disk_gb"], &r["amount"]),
            (&json!(2), &json!(1024), &json!(10), &json!(2))
        );
        assert!(
            r["flavor_id"].is_string() && r["aggregate_id"].is_string(),
            "{r}"
        );
        assert_eq!(
            r["server_group_id"].is_null(),
            echoed.is_null(),
            "{given}: {r}"
        );
        let hosts = held(&lease);
        match echoed {
            Value::Bool(false) => assert!(hosts.len() == 2 && hosts[0] != hosts[1], "{r}"),
            Value::Bool(true) => assert_eq!(r["allocations"][0]["slots"], 2, "{r}"),
            _ => {}
        }
        let id = text(&lease["id"]);
        assert_eq!(
            delete(&app, &format!("{LEASES}/{id}")).await,
            StatusCode::NO_CONTENT
        );
    }
    let (status, body) = app
        .call(
            Method::POST,
            LEASES,
            None,
            Some(lease_body(
                "vms",
                &minutes(t),
                &minutes(t + DAY),
                json!([instances(1, 1, json!("maybe"))]),
            )),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn anti_affinity_needs_distinct_hosts() {
    let app = TestApp::spawn().await;
    two_hosts(&app).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + DAY));
    let answer = refused(
        &app,
        lease_body(
            "spread",
            &start,
            &end,
            json!([instances(1, 3, json!(false))]),
        ),
    )
    .await;
    let shortfall = &answer["reservations"][0];
    assert_eq!(
        (
            &shortfall["index"],
            &shortfall["resource_type"],
            &shortfall["requested"],
            &shortfall["available"]
        ),
        (&json!(0), &json!("virtual:instance"), &json!(3), &json!(2)),
        "{answer}"
    );
    assert_eq!(answer["counter_offer"]["amounts"], json!([2]), "{answer}");
    let lease = create(
        &app,
        lease_body(
            "spread",
            &start,
            &end,
            json!([instances(1, 2, json!(false))]),
        ),
    )
    .await;
    let hosts = held(&lease);
    assert!(hosts.len() == 2 && hosts[0] != hosts[1], "{lease}");
    // The hosts still offer slots for packed instances.
    create(
        &app,
        lease_body(
            "packed",
            &start,
            &end,
            json!([instances(1, 8, Value::Null)]),
        ),
    )
    .await;
}

#[tokio::test]
async fn instance_and_host_reservations_see_each_other() {
    let app = TestApp::spawn().await;
    let (i1, i2) = two_hosts(&app).await;
    let t = tomorrow();
    // A host held whole offers no instance slots.
    let (start, end) = (minutes(t), minutes(t + DAY));
    let whole = create(
        &app,
        lease_body("whole", &start, &end, json!([the_host("i1")])),
    )
    .await;
    assert_eq!(held(&whole), [i1]);
    let answer = refused(
        &app,
        lease_body("vms", &start, &end, json!([instances(8, 2, Value::Null)])),
    )
    .await;
    assert_eq!(answer["reservations"][0]["available"], 1, "{answer}");
    let vms = create(
        &app,
        lease_body("vms", &start, &end, json!([instances(8, 1, Value::Null)])),
    )
    .await;
    assert_eq!(held(&vms), [i2]);
    // A host with instance slots reserved is not free as a whole.
    let (start, end) = (minutes(t + 2 * DAY), minutes(t + 3 * DAY));
    let vm = create(
        &app,
        lease_body("vm", &start, &end, json!([instances(1, 1, Value::Null)])),
    )
    .await;
    let slot_host = held(&vm)[0].clone();
    let answer = refused(
        &app,
        lease_body("both", &start, &end, json!([whole_hosts(2, 2, "az1")])),
    )
    .await;
    let shortfall = &answer["reservations"][0];
    assert_eq!(
        (
            &shortfall["resource_type"],
            &shortfall["requested"],
            &shortfall["available"],
            &shortfall["reason"]
        ),
        (
            &json!("physical:host"),
            &json!(2),
            &json!(1),
            &json!("not_enough_hosts")
        ),
        "{answer}"
    );
    let one = create(
        &app,
        lease_body("one", &start, &end, json!([whole_hosts(1, 2, "az1")])),
    )
    .await;
    let got = held(&one);
    assert!(got.len() == 1 && got[0] != slot_host, "{one}");
}

// ---------------------------------------------------------------------------------------------
// 3. Floating IPs
// ---------------------------------------------------------------------------------------------

/// Registers `172.24.4.{10,11,12}` on `net-ext`; returns their ids in that order.
async fn register_pool(app: &TestApp) -> Vec<String> {
    let mut ids = Vec::new();
    for last in [10, 11, 12] {
        let body = json!({"floating_network_id": "net-ext", "floating_ip_address": format!("172.24.4.{last}")});
        let (status, created) = app.call(Method::POST, FIPS, None, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let fip = &created["floatingip"];
        assert_eq!(fip["floating_network_id"], "net-ext");
        assert_eq!(
            fip["floating_ip_address"],
            json!(format!("172.24.4.{last}"))
        );
        assert_eq!(fip["reservable"], true);
        assert!(shaped(&fip["created_at"], RECORD_DATE), "{fip}");
        ids.push(text(&fip["id"]));
    }
    ids
}

fn addresses(amount: u32, required: &[&str]) -> Value {
    json!({"resource_type": "virtual:floatingip", "network_id": "net-ext", "amount": amount,
           "required_floatingips": required})
}

#[tokio::test]
async fn floating_ips_are_registered_reserved_and_protected_while_held() {
    let app = TestApp::spawn().await;
    let ids = register_pool(&app).await;
    check_pool(&app, &ids).await;
    let t = tomorrow();
    let (start, end) = (minutes(t), minutes(t + DAY));
    let body = lease_body(
        "fips",
        &start,
        &end,
        json!([addresses(2, &["172.24.4.11"])]),
    );
    let lease = create(&app, body).await;
    let r = &lease["reservations"][0];
    assert_eq!(
        (&r["resource_type"], &r["network_id"], &r["amount"]),
        (&json!("virtual:floatingip"), &json!("net-ext"), &json!(2))
    );
    assert_eq!(r["required_floatingips"], json!(["172.24.4.11"]));
    let taken: Vec<String> = r["floatingip_ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(text)
        .collect();
    assert!(taken.len() == 2 && taken.contains(&ids[1]), "{r}");
    let free = ids
        .iter()
        .find(|id| !taken.contains(id))
        .expect("one is free");
    refuse_addresses(&app, &lease, (&start, &end)).await;

    let held_path = format!("{FIPS}/{}", ids[1]);
    assert_eq!(delete(&app, &held_path).await, StatusCode::CONFLICT, "held");
    let free_path = format!("{FIPS}/{free}");
    assert_eq!(delete(&app, &free_path).await, StatusCode::NO_CONTENT);
    assert_eq!(app.get(&free_path, None).await.0, StatusCode::NOT_FOUND);
    let lease_path = format!("{LEASES}/{}", text(&lease["id"]));
    assert_eq!(delete(&app, &lease_path).await, StatusCode::NO_CONTENT);
    assert_eq!(
        delete(&app, &held_path).await,
        StatusCode::NO_CONTENT,
        "released"
    );
    let (_, list) = app.get(FIPS, None).await;
    assert_eq!(list["floatingips"].as_array().expect("list").len(), 1);
}

/// A duplicate address is refused; the pool is listed and shown.
async fn check_pool(app: &TestApp, ids: &[String]) {
    let duplicate = json!({"floating_network_id": "net-ext", "floating_ip_address": "172.24.4.10"});
    let (status, body) = app.call(Method::POST, FIPS, None, Some(duplicate)).await;
    assert_eq!(
        (status, &body["error_code"]),
        (StatusCode::CONFLICT, &json!(409)),
        "{body}"
    );
    let (_, list) = app.get(FIPS, None).await;
    assert_eq!(list["floatingips"].as_array().expect("list").len(), 3);
    let (status, shown) = app.get(&format!("{FIPS}/{}", ids[1]), None).await;
    assert_eq!(
        (status, &shown["floatingip"]["floating_ip_address"]),
        (StatusCode::OK, &json!("172.24.4.11"))
    );
}

/// While `lease` holds two of the three addresses over `(start, end)`: an address outside the
/// pool is a 400, and two more addresses do not fit until the lease ends.
async fn refuse_addresses(app: &TestApp, lease: &Value, (start, end): (&str, &str)) {
    let body = lease_body("x", start, end, json!([addresses(1, &["172.24.4.99"])]));
    let (status, answer) = app.call(Method::POST, LEASES, None, Some(body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "not in the pool: {answer}");
    let body = lease_body("more", start, end, json!([addresses(2, &[])]));
    let answer = refused(app, body).await;
    let shortfall = &answer["reservations"][0];
    assert_eq!(
        (&shortfall["available"], &shortfall["reason"]),
        (&json!(1), &json!("not_enough_floating_ips")),
        "{answer}"
    );
    assert_eq!(
        answer["counter_offer"]["earliest_start"], lease["end_date"],
        "{answer}"
    );
    assert_eq!(lease_count(app).await, 1);
}

// ---------------------------------------------------------------------------------------------
// 4. Dates
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn dates_are_read_in_every_accepted_form_and_answered_in_utc_microseconds() {
    let app = TestApp::spawn().await;
    let cases = [
        (
            "2091-01-01 12:00",
            "2091-01-02 12:00",
            "2091-01-01T12:00:00.000000",
            "2091-01-02T12:00:00.000000",
        ),
        (
            "2091-01-01 12:00:30",
            "2091-01-02 12:00:45",
            "2091-01-01T12:00:30.000000",
            "2091-01-02T12:00:45.000000",
        ),
        (
            "2091-01-01T12:00:00+02:00",
            "2091-01-02T00:00:00Z",
            "2091-01-01T10:00:00.000000",
            "2091-01-02T00:00:00.000000",
        ),
        (
            "2091-01-01T12:00:00.5-01:30",
            "2091-01-01T23:59:59.123456+00:00",
            "2091-01-01T13:30:00.500000",
            "2091-01-01T23:59:59.123456",
        ),
    ];
    for (start, end, start_out, end_out) in cases {
        let lease = create(&app, lease_body("dates", start, end, json!([]))).await;
        assert_eq!(
            (text(&lease["start_date"]), text(&lease["end_date"])),
            (start_out.to_owned(), end_out.to_owned()),
            "{start} .. {end}"
        );
    }
    let before = now_micros();
    let lease = create(
        &app,
        lease_body("now", "now", &minutes(tomorrow()), json!([])),
    )
    .await;
    let after = now_micros();
    let start = parse_lease_date(&text(&lease["start_date"]));
    assert!(shaped(&lease["start_date"], LEASE_DATE), "{lease}");
    assert!(
        (before..=after).contains(&start),
        "now is the time of the request: {lease}"
    );
}

// ---------------------------------------------------------------------------------------------
// 5. The lifecycle in real time
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn leases_start_and_end_on_time_and_record_their_lifecycle() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    enroll(&app, "h2", "az1", 8).await;
    let created = tokio::time::Instant::now();
    let long = create(
        &app,
        lease_body(
            "long",
            "now",
            &minutes(tomorrow()),
            json!([whole_hosts(1, 1, "az1")]),
        ),
    )
    .await;
    // The end is 1.5 to 2.5 seconds ahead (whole seconds).
    let brief_created = tokio::time::Instant::now();
    let end = rfc3339(now_micros() + 2_500_000);
    let brief = create(
        &app,
        lease_body("brief", "now", &end, json!([whole_hosts(1, 1, "az1")])),
    )
    .await;

    let id = text(&long["id"]);
    let active = wait_for_status(&app, &id, "ACTIVE", created + Duration::from_millis(1500))
        .await
        .expect("ACTIVE within 1.5 s");
    assert_eq!(active["reservations"][0]["status"], "active", "{active}");
    // A host with a current reservation cannot be un-enrolled.
    let host = held(&active)[0].clone();
    assert_eq!(
        delete(&app, &format!("{HOSTS}/{host}")).await,
        StatusCode::CONFLICT
    );

    let id = text(&brief["id"]);
    let ended = wait_for_status(
        &app,
        &id,
        "TERMINATED",
        brief_created + Duration::from_millis(3500),
    )
    .await
    .expect("TERMINATED within 3.5 s");
    assert_eq!(ended["reservations"][0]["status"], "deleted", "{ended}");
    assert!(
        ended["events"]
            .as_array()
            .expect("events")
            .iter()
            .all(|e| e["status"] == "DONE"),
        "{ended}"
    );
    let record = records(&app, &id).await;
    assert_eq!(
        kinds(&record),
        [
            "lease.create",
            "lease.event.start_lease",
            "lease.event.before_end_lease",
            "lease.event.end_lease"
        ]
    );
    assert!(
        record.iter().all(|r| shaped(&r["time"], LEASE_DATE)),
        "{record:?}"
    );
    for kind in ["lease.event.start_lease", "lease.event.end_lease"] {
        let late = lateness(&record, kind);
        assert!(
            (0..=SECOND).contains(&late),
            "{kind} fired {late} µs after it was due"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Counter-offers and the availability search
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_refusal_carries_a_counter_offer_and_availability_agrees() {
    let app = TestApp::spawn().await;
    let ids = enroll_mixed(&app).await;
    let t = tomorrow();
    let blocker = create(
        &app,
        lease_body(
            "blocker",
            &minutes(t),
            &minutes(t + DAY),
            json!([whole_hosts(2, 2, "az1")]),
        ),
    )
    .await;
    let wanted = lease_body(
        "late",
        &minutes(t + 12 * HOUR),
        &minutes(t + 36 * HOUR),
        json!([whole_hosts(2, 2, "az1")]),
    );
    let answer = refused(&app, wanted.clone()).await;
    let expected = json!([{"index": 0, "resource_type": "physical:host", "requested": 2,
                           "available": 1, "reason": "not_enough_hosts"}]);
    assert_eq!(answer["reservations"], expected, "{answer}");
    assert_eq!(answer["counter_offer"]["amounts"], json!([1]), "{answer}");
    assert_eq!(
        answer["counter_offer"]["earliest_start"], blocker["end_date"],
        "{answer}"
    );

    let (status, search) = app
        .call(Method::POST, AVAILABILITY, None, Some(wanted))
        .await;
    assert_eq!(status, StatusCode::OK, "{search}");
    assert_eq!(search["fits"], false, "{search}");
    assert_eq!(search["reservations"], expected, "{search}");
    assert_eq!(search["counter_offer"], answer["counter_offer"], "{search}");
    let zones = search["availability_zones"].as_array().expect("zones");
    let az1 = zones
        .iter()
        .find(|z| z["availability_zone"] == "az1")
        .expect("az1");
    assert_eq!(
        (&az1["hosts"], &az1["free_hosts"]),
        (&json!(4), &json!(2)),
        "{az1}"
    );
    assert_eq!(
        az1["free"]["VCPU"],
        8 + 2,
        "the free big host and the small one: {az1}"
    );
    let az2 = zones
        .iter()
        .find(|z| z["availability_zone"] == "az2")
        .expect("az2");
    assert_eq!(
        (&az2["hosts"], &az2["free_hosts"], &az2["free"]["VCPU"]),
        (&json!(1), &json!(1), &json!(8))
    );

    let fitting = lease_body(
        "fits",
        &minutes(t + 12 * HOUR),
        &minutes(t + 36 * HOUR),
        json!([whole_hosts(1, 1, "az1")]),
    );
    let (status, search) = app
        .call(Method::POST, AVAILABILITY, None, Some(fitting))
        .await;
    assert_eq!(
        (status, &search["fits"]),
        (StatusCode::OK, &json!(true)),
        "{search}"
    );
    assert!(
        search.get("counter_offer").is_none_or(Value::is_null),
        "{search}"
    );
    assert_eq!(lease_count(&app).await, 1, "the search admits nothing");
    counter_offer_horizon(&app, &ids[4], t).await;
}

/// A lease blocking past the 30-day horizon: no earliest start, unless the horizon is longer.
async fn counter_offer_horizon(app: &TestApp, az2_host: &str, t: i64) {
    let long = create(
        app,
        lease_body(
            "long",
            &minutes(t),
            &minutes(t + 35 * DAY),
            json!([whole_hosts(1, 1, "az2")]),
        ),
    )
    .await;
    assert_eq!(held(&long), [az2_host.to_owned()]);
    let mut wanted = lease_body(
        "az2",
        &minutes(t + HOUR),
        &minutes(t + DAY),
        json!([whole_hosts(1, 1, "az2")]),
    );
    let answer = refused(app, wanted.clone()).await;
    assert_eq!(
        answer["counter_offer"]["earliest_start"],
        Value::Null,
        "{answer}"
    );
    wanted["search_horizon_days"] = json!(40);
    let answer = refused(app, wanted).await;
    assert_eq!(
        answer["counter_offer"]["earliest_start"], long["end_date"],
        "{answer}"
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Visibility between projects
// ---------------------------------------------------------------------------------------------

const ADMIN: Who<'static> = Who {
    project: "admin",
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

async fn ids_listed(app: &TestApp, who: Who<'_>, query: &str) -> (StatusCode, Vec<String>) {
    let (status, body) = app
        .call_as(who, Method::GET, &format!("{LEASES}{query}"), None)
        .await;
    let ids = body["leases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| text(&l["id"]))
        .collect();
    (status, ids)
}

/// A host, a lease of p1 (`mine`) and one of p2 (`theirs`); returns their ids.
async fn two_projects_leases(app: &TestApp, t: i64) -> (String, String) {
    let body = json!({"name": "h1", "availability_zone": "az1", "vcpus": 8, "memory_mb": 4096});
    let (status, _) = app.call_as(ADMIN, Method::POST, HOSTS, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let fip = json!({"floating_network_id": "n", "floating_ip_address": "10.0.0.1"});
    let (status, _) = app.call_as(P1, Method::POST, FIPS, Some(fip)).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "floating IPs are registered by admins"
    );
    let (start, end) = (minutes(t), minutes(t + DAY));
    let body = lease_body("mine", &start, &end, json!([whole_hosts(1, 1, "az1")]));
    let (status, mine) = app.call_as(P1, Method::POST, LEASES, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{mine}");
    let owner = (&mine["lease"]["project_id"], &mine["lease"]["user_id"]);
    assert_eq!(owner, (&json!("p1"), &json!("u1")));
    let (start, end) = (minutes(t + 2 * DAY), minutes(t + 3 * DAY));
    let body = lease_body("theirs", &start, &end, json!([]));
    let (status, theirs) = app.call_as(P2, Method::POST, LEASES, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    (text(&mine["lease"]["id"]), text(&theirs["lease"]["id"]))
}

#[tokio::test]
async fn a_lease_is_visible_to_its_project_and_to_admins_only() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let t = tomorrow();
    let (id, other) = two_projects_leases(&app, t).await;
    let path = format!("{LEASES}/{id}");
    let attempts = [
        (Method::GET, path.clone(), None),
        (Method::GET, format!("{path}/events"), None),
        (Method::PUT, path.clone(), Some(json!({"name": "stolen"}))),
        (Method::DELETE, path.clone(), None),
    ];
    for (method, target, body) in attempts {
        let (status, answer) = app.call_as(P2, method.clone(), &target, body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {target}: {answer}");
    }
    let only = |id: &String| (StatusCode::OK, vec![id.clone()]);
    assert_eq!(ids_listed(&app, P2, "").await, only(&other));
    assert_eq!(ids_listed(&app, P1, "").await, only(&id));
    for query in ["?project_id=p1", "?project_id=p2"] {
        let (status, _) = ids_listed(&app, P2, query).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "a member filtering by project: {query}"
        );
    }
    let both = (StatusCode::OK, vec![id.clone(), other.clone()]);
    assert_eq!(ids_listed(&app, ADMIN, "").await, both);
    assert_eq!(ids_listed(&app, ADMIN, "?project_id=p1").await, only(&id));
    assert_eq!(ids_listed(&app, ADMIN, "?status=PENDING").await, both);
    let none = (StatusCode::OK, vec![]);
    assert_eq!(ids_listed(&app, ADMIN, "?status=ACTIVE").await, none);
    let (status, _) = ids_listed(&app, ADMIN, "?status=bogus").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, shown) = app.call_as(ADMIN, Method::GET, &path, None).await;
    assert_eq!(
        (status, &shown["lease"]["name"]),
        (StatusCode::OK, &json!("mine"))
    );
    // The lease survived the other project's attempts.
    let (_, shown) = app.call_as(P1, Method::GET, &path, None).await;
    assert_eq!(shown["lease"]["name"], "mine");
    readers_read_but_do_not_write(&app, &id, t).await;
    let (status, _) = app.call_as(P1, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

/// A `reader` of p1 sees p1's lease but may not create, update or delete leases.
async fn readers_read_but_do_not_write(app: &TestApp, id: &str, t: i64) {
    let reader = Who {
        project: "p1",
        user: "r1",
        roles: "reader",
    };
    let path = format!("{LEASES}/{id}");
    assert_eq!(
        ids_listed(app, reader, "").await,
        (StatusCode::OK, vec![id.to_owned()])
    );
    let (status, shown) = app.call_as(reader, Method::GET, &path, None).await;
    assert_eq!(
        (status, &shown["lease"]["name"]),
        (StatusCode::OK, &json!("mine"))
    );
    let body = lease_body(
        "read-only",
        &minutes(t + 5 * DAY),
        &minutes(t + 6 * DAY),
        json!([]),
    );
    let writes = [
        (Method::POST, LEASES.to_owned(), Some(body)),
        (Method::PUT, path.clone(), Some(json!({"name": "renamed"}))),
        (Method::DELETE, path.clone(), None),
    ];
    for (method, target, body) in writes {
        let (status, answer) = app.call_as(reader, method.clone(), &target, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {target}: {answer}");
    }
    let (_, shown) = app.call_as(P1, Method::GET, &path, None).await;
    assert_eq!(shown["lease"]["name"], "mine");
    assert_eq!(
        ids_listed(app, ADMIN, "").await.1.len(),
        2,
        "the reader created nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Bad input
// ---------------------------------------------------------------------------------------------

/// Lease requests that must each be refused with 400, with what makes them bad.
fn bad_requests(t: i64) -> Vec<(&'static str, Value)> {
    let (start, end) = (minutes(t), minutes(t + DAY));
    let ok = lease_body("ok", &start, &end, json!([whole_hosts(1, 1, "az1")]));
    let with = |key: &str, value: Value| {
        let mut body = ok.clone();
        body[key] = value;
        body
    };
    let without = |key: &str| {
        let mut body = ok.clone();
        body.as_object_mut().expect("object").remove(key);
        body
    };
    let reserving = |reservation: Value| with("reservations", json!([reservation]));
    let vms = |key: &str, value: Value| {
        let mut r = instances(1, 1, Value::Null);
        r[key] = value;
        reserving(r)
    };
    vec![
        ("missing name", without("name")),
        ("missing start_date", without("start_date")),
        ("missing end_date", without("end_date")),
        (
            "unparseable date",
            with("start_date", json!("tomorrow at noon")),
        ),
        (
            "start in the past",
            with("start_date", json!("2001-01-01 00:00")),
        ),
        ("end not after start", with("end_date", json!(start))),
        (
            "before_end_date outside the window",
            with("before_end_date", json!(minutes(t + 2 * DAY))),
        ),
        (
            "unknown resource_type",
            reserving(json!({"resource_type": "physical:gpu", "min": 1, "max": 1})),
        ),
        (
            "min > max",
            reserving(json!({"resource_type": "physical:host", "min": 3, "max": 2})),
        ),
        ("zero amount", vms("amount", json!(0))),
        ("negative amount", vms("amount", json!(-1))),
        (
            "overflowing amount",
            vms(
                "amount",
                serde_json::from_str("99999999999999999999").expect("number"),
            ),
        ),
        (
            "overflowing amount as text",
            vms("amount", json!("99999999999999999999")),
        ),
        ("zero vcpus", vms("vcpus", json!(0))),
        ("affinity maybe", vms("affinity", json!("maybe"))),
        (
            "malformed filter",
            vms("resource_properties", json!(r#"[">=", "$vcpus""#)),
        ),
    ]
}

#[tokio::test]
async fn bad_lease_requests_are_400_and_admit_nothing() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    for (what, body) in bad_requests(t) {
        let (status, answer) = app.call(Method::POST, LEASES, None, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {answer}");
        assert_eq!(answer["error_code"], 400, "{what}: {answer}");
        assert!(
            answer["error_message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }
    let unknown = json!({"resource_type": "physical:host", "min": 1, "max": 1,
                         "resource_properties": r#"["==", "$colour", "red"]"#});
    let body = lease_body("ok", &minutes(t), &minutes(t + DAY), json!([unknown]));
    let (status, answer) = app.call(Method::POST, LEASES, None, Some(body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("colour")),
        "the message names the property: {answer}"
    );
    assert_eq!(
        lease_count(&app).await,
        0,
        "refused requests admitted nothing"
    );
    // The same search bodies are refused alike (the search takes no name and no before-end
    // date), and a good body is admitted.
    let searchable = bad_requests(t)
        .into_iter()
        .filter(|(what, _)| !what.contains("name") && !what.contains("before_end"));
    for (what, body) in searchable {
        let (status, answer) = app.call(Method::POST, AVAILABILITY, None, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {answer}");
    }
    create(
        &app,
        lease_body(
            "ok",
            &minutes(t),
            &minutes(t + DAY),
            json!([whole_hosts(1, 1, "az1")]),
        ),
    )
    .await;
}

#[tokio::test]
async fn bad_lease_updates_are_refused_and_change_nothing() {
    let app = TestApp::spawn().await;
    enroll(&app, "h1", "az1", 8).await;
    let t = tomorrow();
    let pending = create(
        &app,
        lease_body("pending", &minutes(t), &minutes(t + DAY), json!([])),
    )
    .await;
    let id = text(&pending["id"]);
    let stranger =
        json!({"reservations": [{"id": uuid::Uuid::from_u128(42).to_string(), "amount": 2}]});
    let (status, body) = put(&app, &id, stranger).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a reservation not in the lease: {body}"
    );
    let (status, body) = put(&app, &id, json!({"before_end_date": minutes(t + 2 * DAY)})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = put(&app, &id, json!({"end_date": minutes(t - HOUR)})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "end before start: {body}");
    assert_eq!(
        show(&app, &id).await,
        pending,
        "refused updates changed nothing"
    );
    let missing = uuid::Uuid::from_u128(43);
    assert_eq!(
        put(&app, &missing.to_string(), json!({"name": "x"}))
            .await
            .0,
        StatusCode::NOT_FOUND
    );

    // A running instance reservation may not change its size; an ended lease may only be renamed.
    let created = tokio::time::Instant::now();
    let end = rfc3339(now_micros() + 2_500_000);
    let running = create(
        &app,
        lease_body(
            "running",
            "now",
            &end,
            json!([instances(1, 1, Value::Null)]),
        ),
    )
    .await;
    let id = text(&running["id"]);
    let reservation = text(&running["reservations"][0]["id"]);
    wait_for_status(&app, &id, "ACTIVE", created + Duration::from_millis(1500))
        .await
        .expect("ACTIVE within 1.5 s");
    let resize = json!({"reservations": [{"id": reservation, "vcpus": 2}]});
    let (status, body) = put(&app, &id, resize).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    wait_for_status(
        &app,
        &id,
        "TERMINATED",
        created + Duration::from_millis(3500),
    )
    .await
    .expect("TERMINATED within 3.5 s");
    let (status, body) = put(&app, &id, json!({"end_date": minutes(tomorrow())})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = put(&app, &id, json!({"name": "over"})).await;
    assert_eq!(
        (status, &body["lease"]["name"]),
        (StatusCode::OK, &json!("over")),
        "{body}"
    );
}

// ---------------------------------------------------------------------------------------------
// 9. Admission races
// ---------------------------------------------------------------------------------------------

/// `clients` concurrent requests for one whole host each over pairwise overlapping windows,
/// spread over `apps`. Returns the admitted leases and the refusal bodies.
pub(crate) async fn race_for_hosts(
    apps: &[&TestApp],
    clients: u32,
    t: i64,
) -> (Vec<Value>, Vec<Value>) {
    let tasks: Vec<_> = (0..clients)
        .map(|n| {
            let app = apps[n as usize % apps.len()];
            let (client, url) = (app.client.clone(), format!("{}{LEASES}", app.base));
            let shift = i64::from(n) * MINUTE;
            let reservation = json!({"resource_type": "physical:host", "min": 1, "max": 1});
            let body = lease_body(
                &format!("racer-{n}"),
                &minutes(t + shift),
                &minutes(t + DAY + shift),
                json!([reservation]),
            );
            tokio::spawn(async move {
                crate::support::parse(client.post(url).json(&body).send().await.expect("send"))
                    .await
            })
        })
        .collect();
    let (mut admitted, mut refused) = (Vec::new(), Vec::new());
    for task in tasks {
        match task.await.expect("client") {
            (StatusCode::CREATED, body) => admitted.push(body["lease"].clone()),
            (StatusCode::CONFLICT, body) => refused.push(body),
            (status, body) => panic!("unexpected {status}: {body}"),
        }
    }
    (admitted, refused)
}

/// Exactly `capacity` leases were admitted, on distinct hosts; every refusal is a counter-offer
/// naming the earliest end among them.
pub(crate) fn check_race(admitted: &[Value], refused: &[Value], capacity: usize) {
    assert_eq!(
        admitted.len(),
        capacity,
        "exactly the capacity is admitted: {admitted:?}"
    );
    let hosts: BTreeSet<String> = admitted.iter().flat_map(held).collect();
    assert_eq!(hosts.len(), capacity, "on distinct hosts: {admitted:?}");
    let first_end = admitted
        .iter()
        .map(|l| text(&l["end_date"]))
        .min()
        .expect("admitted");
    for body in refused {
        assert_eq!(body["error_code"], 409, "{body}");
        assert_eq!(body["reservations"][0]["available"], 0, "{body}");
        assert_eq!(
            body["reservations"][0]["reason"], "not_enough_hosts",
            "{body}"
        );
        assert_eq!(body["counter_offer"]["amounts"], json!([0]), "{body}");
        assert_eq!(
            body["counter_offer"]["earliest_start"],
            json!(first_end),
            "{body}"
        );
    }
}

#[tokio::test]
async fn racing_clients_on_sqlite_get_exactly_the_free_hosts() {
    let app = TestApp::spawn().await;
    for n in 0..4 {
        enroll(&app, &format!("r{n}"), "az1", 8).await;
    }
    let (admitted, refused) = race_for_hosts(&[&app], 32, tomorrow()).await;
    assert_eq!(refused.len(), 28);
    check_race(&admitted, &refused, 4);
    assert_eq!(lease_count(&app).await, 4);
}
