//! The Promise interface end to end: Annex A of the specification walked over HTTP, capacity
//! figures agreeing with the Blazar surface, the claim deadline, priorities, the policy on both
//! surfaces, counter-offers that are admitted as offered, the RPC style, and bad input.

use crate::blazar_leases::{LEASES, enroll, lease_body, now_micros, rfc3339, tomorrow};
use crate::support::{Options, TestApp, Who};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;
const FLAVORS: &str = "/promise/flavors";
const POLICY: &str = "/promise/policy";
const ADMIN: Who<'static> = Who {
    project: "ops",
    user: "root",
    roles: "admin",
};
const MEMBER: Who<'static> = Who {
    project: "p1",
    user: "u1",
    roles: "member",
};

/// Two hosts of 16 VCPUs and 16 GiB in `az1`, one of 8 VCPUs in `az2`, and the flavor
/// `m1.small` (2 VCPUs, 2 GiB, 10 GB).
async fn world(app: &TestApp) {
    enroll(app, "cn1", "az1", 16).await;
    enroll(app, "cn2", "az1", 16).await;
    enroll(app, "cn3", "az2", 8).await;
    let (status, body) = app
        .post(
            FLAVORS,
            json!({"id": "small", "name": "m1.small", "vcpus": 2, "ram": 2048, "disk": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// The capacity information of VCPU in `az1` over `[start, end)`, with utilization.
async fn vcpus(app: &TestApp, start: i64, end: i64) -> Value {
    let body = json!({"zoneId": "az1", "computeResourceTypeId": "numCpuCores",
                      "showUtilization": true,
                      "timePeriod": {"startTime": rfc3339(start), "stopTime": rfc3339(end)}});
    // As the specification shows it: a JSON body on GET.
    let (status, answer) = app
        .call(
            Method::GET,
            "/promise/capacity/compute/query",
            None,
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

fn figure(answer: &Value, name: &str) -> i64 {
    answer["capacityInformation"][name]
        .as_i64()
        .unwrap_or_else(|| panic!("{name} in {answer}"))
}

/// Checks `total = reserved + allocated + available` at every step of a utilization series.
fn adds_up(answer: &Value) {
    let steps = answer["utilization"].as_array().expect("utilization");
    assert!(!steps.is_empty(), "{answer}");
    for step in steps {
        let f = |n: &str| step[n].as_i64().expect("figure");
        assert_eq!(
            f("total"),
            f("reserved") + f("allocated") + f("available"),
            "{step}"
        );
    }
}

async fn create_instance(app: &TestApp, reservation: &str, name: &str) -> (StatusCode, Value) {
    app.post(
        "/promise/create-instance",
        json!({"name": name, "flavor": "m1.small", "image": "cirros",
               "reservation-id": reservation}),
    )
    .await
}

async fn reservation(app: &TestApp, kind: &str, id: &str) -> Value {
    let (status, body) = app
        .call(
            Method::GET,
            &format!("/promise/reservation/{kind}/query"),
            None,
            Some(json!({"queryReservationFilter": [{"reservationId": id}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["queryResult"].clone()
}

async fn wait_for(app: &TestApp, kind: &str, id: &str, status: &str) -> Value {
    for _ in 0..100 {
        let found = reservation(app, kind, id).await;
        if found["reservationStatus"] == status {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("reservation {id} never became {status}");
}

#[tokio::test]
async fn annex_a_walks_through_capacity_reservation_update_allocation_and_cancel() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let start = tomorrow();
    let end = start + DAY;
    // Step 0: capacity before anything is reserved.
    let before = vcpus(&app, start, end).await;
    assert_eq!(figure(&before, "total"), 32);
    assert_eq!(figure(&before, "available"), 32);
    assert_eq!(figure(&before, "reserved"), 0);
    // Steps 1-3: a reservation for future use.
    let (status, created) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(start), "endTime": rfc3339(end), "zoneId": "az1",
               "computePoolReservation": {"numCpuCores": "8", "numVcInstances": "4",
                                          "virtualMemSize": "8192"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let data = &created["reservationData"];
    let id = data["reservationId"].as_str().expect("id").to_owned();
    assert_eq!(data["reservationStatus"], "initialized");
    assert_eq!(data["computePoolReserved"]["numCpuCores"], 8);
    assert_eq!(data["computePoolReserved"]["zoneId"], "az1");
    // Reserved over its window, and not outside it.
    let during = vcpus(&app, start, end).await;
    assert_eq!(figure(&during, "reserved"), 8);
    assert_eq!(figure(&during, "available"), 24);
    adds_up(&during);
    let earlier = vcpus(&app, start - 2 * HOUR, start - HOUR).await;
    assert_eq!(figure(&earlier, "reserved"), 0);
    let straddling = vcpus(&app, start - HOUR, start + HOUR).await;
    let steps = straddling["utilization"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{straddling}");
    assert_eq!(steps[0]["reserved"], 0);
    assert_eq!(steps[1]["reserved"], 8);
    assert_eq!(
        figure(&straddling, "available"),
        24,
        "the minimum over the window"
    );
    adds_up(&straddling);
    // A create-instance before the start is refused with the reason.
    let (status, early) = create_instance(&app, &id, "too-early").await;
    assert_eq!(status, StatusCode::CONFLICT, "{early}");
    assert_eq!(early["result"], "conflict");
    assert!(
        early["message"]
            .as_str()
            .is_some_and(|m| m.contains("not active")),
        "{early}"
    );
    // Step 4: startTime now; the lifecycle engine starts it.
    let (status, updated) = app
        .post(
            "/promise/reservation/compute/update",
            json!({"reservationId": id, "startTime": "now"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{updated}");
    wait_for(&app, "compute", &id, "active").await;
    // Step 5: allocate against it until it is full.
    let mut instances = Vec::new();
    for n in 0..4 {
        let (status, made) = create_instance(&app, &id, &format!("vm{n}")).await;
        assert_eq!(status, StatusCode::OK, "{made}");
        assert_eq!(made["result"], "ok");
        instances.push(made["instance-id"].as_str().expect("id").to_owned());
    }
    let (status, full) = create_instance(&app, &id, "one-too-many").await;
    assert_eq!(status, StatusCode::CONFLICT, "{full}");
    assert_eq!(full["status"], "rejected");
    let shown = reservation(&app, "compute", &id).await;
    assert_eq!(shown["remaining"]["instances"], 0);
    assert_eq!(shown["allocations"].as_array().map(Vec::len), Some(4));
    let now = now_micros();
    let busy = vcpus(&app, now, now + HOUR).await;
    assert_eq!(figure(&busy, "allocated"), 8);
    assert_eq!(figure(&busy, "reserved"), 0);
    adds_up(&busy);
    // The instances are placement allocations.
    let (status, usages) = app
        .get("/placement/usages?project_id=admin", Some("1.9"))
        .await;
    assert_eq!(status, StatusCode::OK, "{usages}");
    assert_eq!(usages["usages"]["VCPU"], 8, "{usages}");
    // Destroy one: its share is reserved again.
    let (status, destroyed) = app
        .post(
            "/promise/destroy-instance",
            json!({"instance-id": instances[0]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{destroyed}");
    let after_destroy = vcpus(&app, now, now + HOUR).await;
    assert_eq!(figure(&after_destroy, "allocated"), 6);
    assert_eq!(figure(&after_destroy, "reserved"), 2);
    // Cancel: capacity is back (its remaining instances go with it).
    for instance in &instances[1..] {
        let (status, _) = app
            .post(
                "/promise/destroy-instance",
                json!({"instance-id": instance}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, cancelled) = app
        .post("/promise/cancel-reservation", json!({"reservation-id": id}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["result"], "ok");
    let back = vcpus(&app, now, end).await;
    assert_eq!(figure(&back, "available"), 32);
    assert_eq!(figure(&back, "reserved"), 0);
    assert_eq!(figure(&back, "allocated"), 0);
    let (status, _) = app
        .call(
            Method::GET,
            "/promise/reservation/compute/query",
            None,
            Some(json!({"queryReservationFilter": [{"reservationId": id}]})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn blazar_and_promise_reservations_are_counted_together() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let start = tomorrow();
    let end = start + DAY;
    let blazar = lease_body(
        "blazar-side",
        &rfc3339(start),
        &rfc3339(end),
        json!([{"resource_type": "virtual:instance", "vcpus": 3, "memory_mb": 1024,
                "disk_gb": 10, "amount": 2, "affinity": null,
                "resource_properties": r#"["==", "$availability_zone", "az1"]"#}]),
    );
    let (status, lease) = app.post(LEASES, blazar).await;
    assert_eq!(status, StatusCode::CREATED, "{lease}");
    let (status, promise) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(start + HOUR), "endTime": rfc3339(end), "zoneId": "az1",
               "computePoolReservation": {"numCpuCores": 4, "numVcInstances": 2,
                                          "virtualMemSize": 2048}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{promise}");
    let answer = vcpus(&app, start, end).await;
    assert_eq!(
        figure(&answer, "reserved"),
        10,
        "6 from Blazar, 4 from Promise"
    );
    adds_up(&answer);
    let steps = answer["utilization"].as_array().expect("steps");
    assert_eq!(steps[0]["reserved"], 6);
    assert_eq!(steps[1]["reserved"], 10);
    // The Promise reservation is a lease on the Blazar surface too.
    let id = promise["reservationData"]["reservationId"]
        .as_str()
        .expect("id");
    let (status, seen) = app.get(&format!("{LEASES}/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{seen}");
    assert_eq!(
        seen["lease"]["reservations"][0]["resource_type"],
        "virtual:instance"
    );
    // And the Blazar lease shows up in a Promise query.
    let (status, all) = app
        .call(
            Method::POST,
            "/promise/reservation/compute/query",
            None,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(
        all["queryResult"].as_array().map(Vec::len),
        Some(2),
        "{all}"
    );
    // The RPC form: the same capacity, as vectors.
    let (status, rpc) = app
        .post(
            "/promise/query-capacity",
            json!({"capacity": "reserved", "zone": "az1",
               "window": {"start": rfc3339(start), "end": rfc3339(end)}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rpc}");
    assert_eq!(rpc["capacity"]["reserved"]["cores"], 10, "{rpc}");
    assert_eq!(rpc["collections"].as_array().map(Vec::len), Some(2));
    // Unknown zone: 404.
    let (status, _) = app
        .post(
            "/promise/capacity/compute/query",
            json!({"zoneId": "nowhere", "computeResourceTypeId": "numCpuCores"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // How many of a flavor fit over the window: (16 + 16 - 10) / 2, by host.
    let (status, fit) = app
        .call(
            Method::GET,
            &format!(
                "/promise/capacity/compute/query?zoneId=az1&flavorId=m1.small&timePeriod.startTime={}&timePeriod.stopTime={}",
                rfc3339(start),
                rfc3339(end)
            ),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{fit}");
    assert_eq!(fit["capacityInformation"]["available"], 11, "{fit}");
}

#[tokio::test]
async fn an_unclaimed_reservation_releases_what_it_did_not_allocate_at_its_expiry() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let now = now_micros();
    let expiry = rfc3339(now + 3_000_000);
    let create = |instances: u32| {
        json!({"endTime": rfc3339(now + DAY), "expiryTime": expiry.clone(), "zoneId": "az1",
               "computePoolReservation": {"numCpuCores": 2 * instances,
                                          "numVcInstances": instances,
                                          "virtualMemSize": 2048 * instances}})
    };
    let (status, used) = app
        .post("/promise/reservation/compute/create", create(3))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{used}");
    let used = used["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, idle) = app
        .post("/promise/reservation/compute/create", create(2))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{idle}");
    let idle = idle["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    wait_for(&app, "compute", &used, "active").await;
    let (status, made) = create_instance(&app, &used, "claimed").await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let reserved = figure(&vcpus(&app, now_micros(), now + HOUR).await, "reserved");
    assert_eq!(reserved, 2 * 2 + 2 * 2, "two slots unused in each");
    // After the deadline: the idle one has expired, the other keeps only its instance.
    let expired = wait_for(&app, "compute", &idle, "expired").await;
    assert_eq!(expired["remaining"]["instances"], 0, "{expired}");
    let kept = reservation(&app, "compute", &used).await;
    assert_eq!(kept["reservationStatus"], "active");
    assert_eq!(kept["remaining"]["instances"], 0, "{kept}");
    let after = vcpus(&app, now_micros(), now + HOUR).await;
    assert_eq!(figure(&after, "reserved"), 0, "{after}");
    assert_eq!(figure(&after, "allocated"), 2);
    // Exactly once: the lifecycle record holds one expiry per reservation.
    let (status, events) = app.get(&format!("{LEASES}/{used}/events"), None).await;
    assert_eq!(status, StatusCode::OK, "{events}");
    let records = crate::blazar_leases::records(&app, &used).await;
    let expiries = records
        .iter()
        .filter(|r| r["type"] == "reservation.expired")
        .count();
    assert_eq!(expiries, 1, "{records:?}");
    // Nothing more can be claimed from what was released.
    let (status, refused) = create_instance(&app, &used, "late").await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
}

#[tokio::test]
async fn a_higher_priority_request_displaces_a_lower_one_not_yet_started() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let start = tomorrow();
    let end = start + DAY;
    let pool = |cores: u32, priority: u32| {
        json!({"startTime": rfc3339(start), "endTime": rfc3339(end), "zoneId": "az1",
               "priority": priority,
               "computePoolReservation": {"numCpuCores": cores, "numVcInstances": cores / 2,
                                          "virtualMemSize": 1024 * cores}})
    };
    let (status, low) = app
        .post("/promise/reservation/compute/create", pool(24, 10))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{low}");
    let low = low["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, keep) = app
        .post("/promise/reservation/compute/create", pool(8, 80))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{keep}");
    // Equal priority cannot displace.
    let (status, same) = app
        .post("/promise/reservation/compute/create", pool(16, 10))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{same}");
    // With preemption off, a higher priority cannot either.
    let (status, _) = app
        .call(
            Method::PUT,
            POLICY,
            None,
            Some(json!({"reservation": {"preemption": false}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, off) = app
        .post("/promise/reservation/compute/create", pool(16, 90))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{off}");
    let (status, _) = app
        .call(Method::PUT, POLICY, None, Some(json!({"preemption": true})))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, high) = app
        .post("/promise/reservation/compute/create", pool(16, 90))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{high}");
    let high = high["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    let displaced = reservation(&app, "compute", &low).await;
    assert_eq!(displaced["reservationStatus"], "preempted", "{displaced}");
    assert!(
        displaced["statusReason"]
            .as_str()
            .is_some_and(|r| r.contains(&high)),
        "{displaced}"
    );
    // The higher-priority one that was not in the way stays.
    let kept_id = keep["reservationData"]["reservationId"]
        .as_str()
        .expect("id");
    assert_eq!(
        reservation(&app, "compute", kept_id).await["reservationStatus"],
        "initialized"
    );
    // Blazar sees the displaced lease terminated; the outbox recorded it.
    let (_, lease) = app.get(&format!("{LEASES}/{low}"), None).await;
    assert_eq!(lease["lease"]["status"], "TERMINATED", "{lease}");
    let records = crate::blazar_leases::records(&app, &low).await;
    assert!(
        records.iter().any(|r| r["type"] == "lease.preempted"),
        "{records:?}"
    );
    assert_eq!(figure(&vcpus(&app, start, end).await, "reserved"), 24);
}

#[tokio::test]
async fn the_policy_is_enforced_on_both_surfaces_and_names_the_limit() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let (status, _) = app
        .call_as(
            MEMBER,
            Method::PUT,
            POLICY,
            Some(json!({"max-duration": 24})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, set) = app
        .call_as(
            ADMIN,
            Method::PUT,
            POLICY,
            Some(
                json!({"reservation": {"max-duration": 30, "max-future-start-range": 2,
                                        "max-future-end-range": 3}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{set}");
    assert_eq!(set["reservation"]["max-duration"], 30);
    let (status, shown) = app.call_as(MEMBER, Method::GET, POLICY, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown, set);
    let host = json!({"name": "cn1", "availability_zone": "az1", "vcpus": 16,
                      "memory_mb": 16384, "local_gb": 100});
    let (status, _) = app
        .call_as(ADMIN, Method::POST, "/reservation/v1/os-hosts", Some(host))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let start = tomorrow();
    let cases = [
        (start, start + 2 * DAY, "max-duration"),
        (
            start + 2 * DAY + HOUR,
            start + 2 * DAY + 2 * HOUR,
            "max-future-start-range",
        ),
        (
            start + DAY - 2 * HOUR,
            start + 2 * DAY + 2 * HOUR,
            "max-future-end-range",
        ),
    ];
    for (from, to, limit) in cases {
        let promise = json!({"startTime": rfc3339(from), "endTime": rfc3339(to),
                             "computePoolReservation": {"numCpuCores": 1, "numVcInstances": 1,
                                                        "virtualMemSize": 512}});
        let (status, body) = app
            .call_as(
                MEMBER,
                Method::POST,
                "/promise/reservation/compute/create",
                Some(promise),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{limit}: {body}");
        assert!(
            body["detail"].as_str().is_some_and(|d| d.contains(limit)),
            "{body}"
        );
        assert_eq!(body["code"], "policy_violation");
        let blazar = lease_body(
            "too-long",
            &rfc3339(from),
            &rfc3339(to),
            json!([{"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 512,
                    "disk_gb": 0, "amount": 1, "affinity": null}]),
        );
        let (status, body) = app
            .call_as(MEMBER, Method::POST, LEASES, Some(blazar))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{limit}: {body}");
        assert!(
            body["error_message"]
                .as_str()
                .is_some_and(|d| d.contains(limit)),
            "{body}"
        );
    }
    // Within the policy, and with no endTime: it ends at the longest the policy allows.
    let (status, ok) = app
        .call_as(
            MEMBER,
            Method::POST,
            "/promise/reservation/compute/create",
            Some(json!({"startTime": rfc3339(start),
                        "computePoolReservation": {"numCpuCores": 1, "numVcInstances": 1,
                                                   "virtualMemSize": 512}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{ok}");
    assert_eq!(ok["reservationData"]["endTime"], rfc3339(start + 30 * HOUR));
    // A reservation of another project is not found.
    let id = ok["reservationData"]["reservationId"].as_str().expect("id");
    let other = Who {
        project: "p2",
        user: "u2",
        roles: "member",
    };
    let (status, _) = app
        .call_as(
            other,
            Method::POST,
            "/promise/cancel-reservation",
            Some(json!({"reservation-id": id})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .call_as(
            other,
            Method::DELETE,
            &format!("/promise/reservation/compute/{id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_counter_offer_of_a_refusal_is_admitted_as_offered() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let start = tomorrow();
    let end = start + 6 * HOUR;
    let pool = |instances: u64, from: &str, to: &str| {
        json!({"startTime": from, "endTime": to, "zoneId": "az1",
               "computePoolReservation": {"numCpuCores": 2 * instances,
                                          "numVcInstances": instances,
                                          "virtualMemSize": 1024 * instances}})
    };
    let (status, first) = app
        .post(
            "/promise/reservation/compute/create",
            pool(12, &rfc3339(start), &rfc3339(end)),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    // 16 more instances of 2 VCPUs do not fit beside 24 VCPUs of 32.
    let (status, refused) = app
        .post(
            "/promise/reservation/compute/create",
            pool(16, &rfc3339(start), &rfc3339(end)),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let offer = &refused["offer"];
    let most = offer["maxCapacity"]["computePoolReserved"].clone();
    assert_eq!(most["numVcInstances"], 4, "{refused}");
    let (status, admitted) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(start), "endTime": rfc3339(end), "zoneId": "az1",
               "computePoolReservation": most}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the most that fits: {admitted}"
    );
    // The earliest window of the same length where all of it fits, admitted as offered.
    let (status, again) = app
        .post(
            "/promise/reservation/compute/create",
            pool(16, &rfc3339(start), &rfc3339(end)),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    let window = &again["offer"]["earliestWindow"];
    let (from, to) = (
        window["startTime"].as_str().expect("start").to_owned(),
        window["endTime"].as_str().expect("end").to_owned(),
    );
    let (status, later) = app
        .post("/promise/reservation/compute/create", pool(16, &from, &to))
        .await;
    assert_eq!(status, StatusCode::CREATED, "the earliest window: {later}");
    // The RPC style carries the same offer.
    let (status, rpc) = app
        .post(
            "/promise/create-reservation",
            json!({"zone": "az1", "start": rfc3339(start), "end": rfc3339(end),
               "capacity": {"cores": "16", "ram": "4096", "instances": "8"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{rpc}");
    assert_eq!(rpc["result"], "conflict");
    assert_eq!(rpc["offer"]["capacity"]["instances"], 0, "{rpc}");
}

#[tokio::test]
async fn the_rpc_surface_reserves_queries_and_cancels() {
    let app = TestApp::spawn().await;
    world(&app).await;
    for (id, address) in [
        ("a", "192.0.2.10"),
        ("b", "192.0.2.11"),
        ("c", "192.0.2.12"),
    ] {
        let (status, body) = app
            .post(
                "/reservation/v1/floatingips",
                json!({"floating_network_id": "public", "floating_ip_address": address}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{id}: {body}");
    }
    let start = tomorrow();
    let end = start + DAY;
    let (status, made) = app
        .post(
            "/promise/create-reservation",
            json!({"zone": "az1", "start": rfc3339(start), "end": rfc3339(end),
               "capacity": {"cores": "5", "ram": "12288", "addresses": "2", "instances": "3"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["result"], "ok");
    let id = made["reservation-id"].as_str().expect("id").to_owned();
    assert_eq!(
        made["reservation"]["publicIps"].as_array().map(Vec::len),
        Some(2)
    );
    // Network capacity counts the addresses.
    let (status, net) = app
        .post(
            "/promise/capacity/network/query",
            json!({"networkResourceTypeId": "publicIps",
               "timePeriod": {"startTime": rfc3339(start), "stopTime": rfc3339(end)}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{net}");
    assert_eq!(net["capacityInformation"]["reserved"], 2);
    assert_eq!(net["capacityInformation"]["available"], 1);
    // query-reservation by window, inclusive and exclusive.
    let query = |from: i64, to: i64, scope: &str| {
        json!({"show-utilization": true,
               "window": {"start": rfc3339(from), "end": rfc3339(to), "scope": scope}})
    };
    let (_, inside) = app
        .post(
            "/promise/query-reservation",
            query(start - HOUR, end + HOUR, "exclusive"),
        )
        .await;
    assert_eq!(inside["reservations"], json!([id]), "{inside}");
    let util = inside["utilization"].as_array().expect("utilization");
    assert_eq!(
        util[0]["capacity"]["cores"], 5,
        "the pool's own cores: {inside}"
    );
    assert_eq!(util[0]["capacity"]["instances"], 3, "{inside}");
    assert_eq!(
        util[0]["capacity"]["ram"], 12_290,
        "its memory, rounded up to whole MB per core: {inside}"
    );
    assert_eq!(util[0]["capacity"]["addresses"], 2);
    let (_, partly) = app
        .post(
            "/promise/query-reservation",
            query(start + HOUR, end + HOUR, "exclusive"),
        )
        .await;
    assert_eq!(partly["reservations"], json!([]));
    let (_, overlap) = app
        .post(
            "/promise/query-reservation",
            query(start + HOUR, end + HOUR, "inclusive"),
        )
        .await;
    assert_eq!(overlap["reservations"], json!([id]));
    let (_, without) = app
        .post(
            "/promise/query-reservation",
            json!({"without": [format!("ResourceReservation:{id}")]}),
        )
        .await;
    assert_eq!(without["reservations"], json!([]));
    let (_, by_element) = app
        .post(
            "/promise/query-reservation",
            json!({"elements": {"some": ["192.0.2.10", "192.0.2.11", "192.0.2.12"]}}),
        )
        .await;
    assert_eq!(by_element["reservations"], json!([id]));
    // update-reservation changes amounts.
    let (status, updated) = app
        .post(
            "/promise/update-reservation",
            json!({"reservation-id": id,
               "capacity": {"cores": "1", "ram": "5120", "addresses": "1", "instances": "1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["reservation"]["capacity"]["addresses"], 1);
    let (status, cancelled) = app
        .post("/promise/cancel-reservation", json!({"reservation-id": id}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    let (status, again) = app
        .post("/promise/cancel-reservation", json!({"reservation-id": id}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{again}");
    assert_eq!(again["result"], "error");
}

#[tokio::test]
async fn flavors_are_an_admin_catalogue() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let flavor = json!({"flavor": {"id": "f1", "name": "m1.large", "vcpus": 4, "ram": 8192,
                                   "disk": 40, "cpu_architecture": "x86_64",
                                   "extra_specs": {"hw:cpu_policy": "dedicated"}}});
    let (status, _) = app
        .call_as(MEMBER, Method::POST, FLAVORS, Some(flavor.clone()))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, made) = app
        .call_as(ADMIN, Method::POST, FLAVORS, Some(flavor.clone()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["flavor"]["extra_specs"]["hw:cpu_policy"], "dedicated");
    let (status, _) = app
        .call_as(ADMIN, Method::POST, FLAVORS, Some(flavor))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, listed) = app.call_as(MEMBER, Method::GET, FLAVORS, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["flavors"].as_array().map(Vec::len), Some(1));
    let (status, by_name) = app
        .call_as(MEMBER, Method::GET, "/promise/flavors/m1.large", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(by_name["flavor"]["id"], "f1");
    for bad in [
        json!({"name": "x", "vcpus": -1, "ram": 1}),
        json!({"name": "x", "vcpus": "two", "ram": 1}),
        json!({"name": "x", "ram": 1}),
        json!({"name": "x", "vcpus": 1, "ram": 1, "colour": "red"}),
    ] {
        let (status, body) = app.call_as(ADMIN, Method::POST, FLAVORS, Some(bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let (status, body) = app
        .call_as(
            MEMBER,
            Method::POST,
            "/promise/increase-capacity",
            Some(json!({"source": "Zone:az1", "capacity": {"cores": 1}})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "capacity is the operator's: {body}"
    );
    let (status, _) = app
        .call_as(ADMIN, Method::DELETE, "/promise/flavors/f1", None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app
        .call_as(MEMBER, Method::GET, "/promise/flavors/f1", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_promise_input_is_refused_with_the_reason() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let start = tomorrow();
    let window = json!({"startTime": rfc3339(start), "endTime": rfc3339(start + HOUR)});
    let with = |extra: Value| {
        let mut body = window.clone();
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    let pool = json!({"numCpuCores": 2, "numVcInstances": 1, "virtualMemSize": 512});
    let cases = [
        (
            "/promise/reservation/compute/create",
            with(json!({})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/reservation/compute/create",
            with(json!({"computePoolReservation": {"numCpuCores": -2}})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/reservation/compute/create",
            with(json!({"computePoolReservation": {"numCpuCores": "many"}})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(start), "endTime": rfc3339(start - HOUR),
                "computePoolReservation": pool}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/reservation/compute/create",
            with(json!({"expiryTime": rfc3339(start + 2 * HOUR), "computePoolReservation": pool})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/reservation/compute/create",
            with(json!({"zoneId": "nowhere", "computePoolReservation": pool})),
            StatusCode::NOT_FOUND,
        ),
        (
            "/promise/reservation/compute/create",
            with(json!({"virtualizationContainerReservation": [
             {"containerId": "c1", "containerFlavor": {"flavorId": "m9.huge"}}]})),
            StatusCode::NOT_FOUND,
        ),
        (
            "/promise/reservation/compute/create",
            with(json!({"networkReservation": {"numPublicIps": 1}})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/reservation/gpu/create",
            with(json!({"computePoolReservation": pool})),
            StatusCode::NOT_FOUND,
        ),
        (
            "/promise/reservation/compute/create",
            with(json!({"priority": 101, "computePoolReservation": pool})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/capacity/compute/query",
            json!({}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/capacity/compute/query",
            json!({"computeResourceTypeId": "gpus"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/capacity/compute/query",
            json!({"computeResourceTypeId": "numCpuCores", "flavorId": "m9.huge"}),
            StatusCode::NOT_FOUND,
        ),
        (
            "/promise/reservation/compute/update",
            json!({"reservationId": "6a4d2b8e-1c1f-4a43-9a59-5b8e1f0c3d21", "startTime": "now"}),
            StatusCode::NOT_FOUND,
        ),
        (
            "/promise/create-instance",
            json!({"name": "vm", "flavor": "m9.huge"}),
            StatusCode::NOT_FOUND,
        ),
        (
            "/promise/create-instance",
            json!({"name": "vm", "flavor": "m1.small",
                "reservation-id": "6a4d2b8e-1c1f-4a43-9a59-5b8e1f0c3d21"}),
            StatusCode::NOT_FOUND,
        ),
        (
            "/promise/create-reservation",
            json!({"capacity": {"cores": "1", "gpus": "1"}}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/promise/create-reservation",
            json!({"start": rfc3339(start)}),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (path, body, expected) in cases {
        let (status, answer) = app.post(path, body.clone()).await;
        assert_eq!(status, expected, "{path} {body}: {answer}");
    }
    // An instance after its reservation ended is refused: an immediate reservation that ends
    // a second after it starts.
    let now = now_micros();
    let (status, brief) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"endTime": rfc3339(now + 2_000_000), "zoneId": "az1",
               "computePoolReservation": pool}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{brief}");
    let id = brief["reservationData"]["reservationId"]
        .as_str()
        .expect("id");
    wait_for(&app, "compute", id, "terminated").await;
    let (status, late) = create_instance(&app, id, "late").await;
    assert_eq!(status, StatusCode::CONFLICT, "{late}");
    assert!(
        late["message"]
            .as_str()
            .is_some_and(|m| m.contains("ended")),
        "{late}"
    );
}

#[tokio::test]
async fn planned_capacity_changes_move_the_total_and_guard_reservations() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let start = tomorrow();
    let end = start + DAY;
    let pool_in = |zone: &str, cores: u32, from: i64, to: i64| {
        json!({"startTime": rfc3339(from), "endTime": rfc3339(to), "zoneId": zone,
               "computePoolReservation": {"numCpuCores": cores, "numVcInstances": cores / 2,
                                          "virtualMemSize": 512 * cores}})
    };
    // az2 has one host of 8 VCPUs: 16 do not fit until capacity is added for the window.
    let (status, _) = app
        .post(
            "/promise/reservation/compute/create",
            pool_in("az2", 16, start, end),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, grown) = app
        .post(
            "/promise/increase-capacity",
            json!({"source": "Zone:az2", "start": rfc3339(start), "end": rfc3339(end),
               "capacity": {"cores": "8", "ram": "8192", "instances": "4"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{grown}");
    assert_eq!(grown["result"], "ok");
    assert_eq!(grown["ignored"], json!(["instances"]));
    let grown_id = grown["pool-id"].as_str().expect("pool id").to_owned();
    let (status, admitted) = app
        .post(
            "/promise/reservation/compute/create",
            pool_in("az2", 16, start, end),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{admitted}");
    // Only over the window the capacity is planned for.
    let (status, _) = app
        .post(
            "/promise/reservation/compute/create",
            pool_in("az2", 16, start, end + HOUR),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let zone2 = |from: i64, to: i64| {
        json!({"zoneId": "az2", "computeResourceTypeId": "numCpuCores", "showUtilization": true,
               "timePeriod": {"startTime": rfc3339(from), "stopTime": rfc3339(to)}})
    };
    let (_, answer) = app
        .post("/promise/capacity/compute/query", zone2(start - HOUR, end))
        .await;
    let steps = answer["utilization"].as_array().expect("steps");
    assert_eq!(steps[0]["total"], 8, "{answer}");
    assert_eq!(steps[1]["total"], 16, "{answer}");
    assert_eq!(steps[1]["reserved"], 16, "{answer}");
    adds_up(&answer);
    // query-capacity names the pool in force first, as the specification's example does, then
    // the reservation; in another zone, or outside the window, neither.
    let query = |zone: &str, from: i64, to: i64| json!({"zone": zone, "window": {"start": rfc3339(from), "end": rfc3339(to)}});
    let (status, vector) = app
        .post("/promise/query-capacity", query("az2", start, end))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{vector}");
    let reservation = admitted["reservationData"]["reservationId"]
        .as_str()
        .expect("id");
    assert_eq!(
        vector["collections"],
        json!([
            format!("ResourcePool:{grown_id}"),
            format!("ResourceReservation:{reservation}")
        ]),
        "{vector}"
    );
    let (_, elsewhere) = app
        .post("/promise/query-capacity", query("az1", start, end))
        .await;
    assert_eq!(elsewhere["collections"], json!([]), "{elsewhere}");
    let (_, later) = app
        .post("/promise/query-capacity", query("az2", end, end + HOUR))
        .await;
    assert_eq!(later["collections"], json!([]), "{later}");
    // A decrease under the Blazar lease on cn1 is refused and names it; forced, it degrades it.
    let lease = lease_body(
        "on-cn1",
        &rfc3339(start),
        &rfc3339(end),
        json!([{"resource_type": "physical:host", "min": 1, "max": 1,
                "resource_properties": r#"["==", "$hypervisor_hostname", "cn1"]"#}]),
    );
    let (status, lease) = app.post(LEASES, lease).await;
    assert_eq!(status, StatusCode::CREATED, "{lease}");
    let lease_id = lease["lease"]["id"].as_str().expect("id").to_owned();
    let decrease = |force: bool| {
        json!({"source": "cn1", "start": rfc3339(start + HOUR), "end": rfc3339(start + 2 * HOUR),
               "capacity": {"cores": 4}, "force": force})
    };
    let (status, refused) = app
        .post("/promise/decrease-capacity", decrease(false))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["affected"], json!([lease_id]), "{refused}");
    assert_eq!(refused["result"], "conflict");
    let (status, forced) = app.post("/promise/decrease-capacity", decrease(true)).await;
    assert_eq!(status, StatusCode::OK, "{forced}");
    assert_eq!(forced["affected"], json!([lease_id]));
    let (_, seen) = app.get(&format!("{LEASES}/{lease_id}"), None).await;
    assert_eq!(seen["lease"]["degraded"], true, "{seen}");
    // A decrease where nothing is held is simply made; capacity shows it.
    let (status, maintenance) = app
        .post(
            "/promise/decrease-capacity",
            json!({"source": "ResourceProvider:cn2", "start": rfc3339(end + HOUR),
               "end": rfc3339(end + 2 * HOUR), "capacity": {"cores": 16}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{maintenance}");
    let during = vcpus(&app, end + HOUR, end + 2 * HOUR).await;
    assert_eq!(figure(&during, "total"), 16, "{during}");
    // Withdrawing a pool takes its capacity back; unknown sources and pools are 404.
    let (status, pools) = app.get("/promise/pools", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pools["pools"].as_array().map(Vec::len), Some(3));
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/promise/pools/{grown_id}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, after) = app
        .post("/promise/capacity/compute/query", zone2(start, end))
        .await;
    assert_eq!(after["capacityInformation"]["total"], 8, "{after}");
    for (source, expected) in [
        ("Zone:nowhere", StatusCode::NOT_FOUND),
        (
            "ResourcePool:6a4d2b8e-1c1f-4a43-9a59-5b8e1f0c3d21",
            StatusCode::NOT_FOUND,
        ),
        ("no-such-host", StatusCode::NOT_FOUND),
    ] {
        let (status, body) = app
            .post(
                "/promise/increase-capacity",
                json!({"source": source, "capacity": {"cores": 1}}),
            )
            .await;
        assert_eq!(status, expected, "{source}: {body}");
    }
    let (status, _) = app
        .post(
            "/promise/increase-capacity",
            json!({"source": "cn1", "capacity": {"cores": 1, "gpus": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn storage_pools_are_reserved_and_counted_in_gigabytes() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let start = tomorrow();
    let end = start + DAY;
    let period = json!({"startTime": rfc3339(start), "stopTime": rfc3339(end)});
    let (status, made) = app
        .post(
            "/promise/reservation/storage/create",
            json!({"startTime": rfc3339(start), "endTime": rfc3339(end), "zoneId": "az1",
               "storagePoolReservation": {"storageSize": "60", "numSnapshots": "3",
                                          "numVolumes": "2"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let data = &made["reservationData"];
    assert_eq!(data["storagePoolReserved"]["storageSize"], 60);
    assert_eq!(data["storagePoolReserved"]["numSnapshots"], 3);
    let (status, storage) = app
        .post(
            "/promise/capacity/storage/query",
            json!({"zoneId": "az1", "storageResourceTypeId": "storageSize", "timePeriod": period}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{storage}");
    assert_eq!(storage["capacityInformation"]["total"], 200);
    assert_eq!(storage["capacityInformation"]["reserved"], 60);
    // How many 50 GB volumes still fit over the window beside the 60 GB (hosts of 100 GB).
    let (status, volumes) = app
        .post(
            "/promise/capacity/storage/query",
            json!({"zoneId": "az1", "storageResourceTypeId": "volumes",
               "resourceCriteria": {"typeOfStorage": "volume", "sizeOfStorage": 50},
               "attributeSelector": "available", "timePeriod": period}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{volumes}");
    assert_eq!(volumes["capacityInformation"], json!({"available": 2}));
    // The storage query lists it; the compute query does not.
    let (_, listed) = app
        .post("/promise/reservation/storage/query", json!({}))
        .await;
    assert_eq!(listed["queryResult"].as_array().map(Vec::len), Some(1));
    let (_, compute) = app
        .post("/promise/reservation/compute/query", json!({}))
        .await;
    assert_eq!(compute["queryResult"], json!([]));
    let id = data["reservationId"].as_str().expect("id");
    let (status, gone) = app
        .call(
            Method::DELETE,
            &format!("/promise/reservation/storage/{id}"),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    assert_eq!(gone["reservationId"], id);
}

#[tokio::test]
async fn unreserved_instances_have_the_lowest_priority() {
    let app = TestApp::spawn().await;
    world(&app).await;
    // az2 is one host of 8 VCPUs; an instance without a reservation takes 2 of them.
    let (status, made) = app
        .post(
            "/promise/create-instance",
            json!({"name": "best-effort", "flavor": "m1.small", "zone": "az2"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let instance = made["instance-id"].as_str().expect("id").to_owned();
    assert_eq!(made["instance"]["priority"], "low");
    // A reservation of the whole host is admitted all the same, starting shortly.
    let start = now_micros() + 2_000_000;
    let (status, reserved) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(start), "endTime": rfc3339(start + HOUR), "zoneId": "az2",
               "computePoolReservation": {"numCpuCores": 8, "numVcInstances": 4,
                                          "virtualMemSize": 8192}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{reserved}");
    let id = reserved["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    // Meanwhile no more unreserved instances fit beside what the reservation will need.
    let (status, refused) = app
        .post(
            "/promise/create-instance",
            json!({"name": "no-room", "flavor": "m1.small", "zone": "az2"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    // When it starts, the best-effort instance is withdrawn and the reservation is whole.
    wait_for(&app, "compute", &id, "active").await;
    let (status, listed) = app.get("/promise/instances", None).await;
    assert_eq!(status, StatusCode::OK);
    let seen = listed["instances"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["instance-id"] == instance.as_str()))
        .cloned()
        .expect("listed");
    assert_eq!(seen["status"], "deleted", "{listed}");
    for n in 0..4 {
        let (status, made) = create_instance(&app, &id, &format!("vm{n}")).await;
        assert_eq!(status, StatusCode::OK, "{made}");
    }
}

/// A reservation cannot be backdated: a start in the past is refused, never admitted as if it
/// had always been held.
#[tokio::test]
async fn a_backdated_reservation_is_refused() {
    let app = TestApp::spawn().await;
    let (status, body) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": "2000-01-01T00:00:00Z", "endTime": "2099-01-01T00:00:00Z",
                   "computePoolReservation": {"numCpuCores": 1, "numVcInstances": 1,
                                              "virtualMemSize": 512}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("in the past"), "{body}");
}

#[tokio::test]
async fn an_oversized_body_is_413_and_errors_carry_no_placement_code() {
    let app = TestApp::spawn().await;
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let response = app
        .request(Method::POST, "/promise/capacity/compute/query", None)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: serde_json::Value = response.json().await.expect("problem");
    assert_eq!(body["code"], "payload_too_large", "{body}");
}

/// A compute pool reserves its sums: instances of any flavors draw on it while their cores,
/// memory and count fit in it, the one after is refused with what the pool has left, and a
/// request beside it is offered exactly what is free.
#[tokio::test]
async fn a_pool_admits_any_mix_of_instances_whose_sums_fit() {
    let app = TestApp::spawn().await;
    enroll(&app, "big", "az9", 64).await;
    for (id, vcpus) in [("c10", 10), ("c5", 5)] {
        let (status, body) = app
            .post(
                FLAVORS,
                json!({"id": id, "name": id, "vcpus": vcpus, "ram": 512, "disk": 0}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let end = now_micros() + DAY;
    let (status, created) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": "now", "endTime": rfc3339(end), "zoneId": "az9",
               "computePoolReservation": {"numCpuCores": 20, "numVcInstances": 3,
                                          "virtualMemSize": 4000}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["reservationData"]["reservationId"]
        .as_str()
        .expect("id")
        .to_owned();
    wait_for(&app, "compute", &id, "active").await;
    let instance = |name: &'static str, flavor: &'static str| json!({"name": name, "flavor": flavor, "reservation-id": id});
    for (name, flavor) in [("ten", "c10"), ("five", "c5"), ("five-more", "c5")] {
        let (status, made) = app
            .post("/promise/create-instance", instance(name, flavor))
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {made}");
    }
    let (status, fourth) = app
        .post("/promise/create-instance", instance("one-too-many", "c5"))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{fourth}");
    assert_eq!(fourth["status"], "rejected");
    assert_eq!(
        fourth["room"],
        json!({"numVcInstances": 0, "numCpuCores": 0, "virtualMemSize": 2464}),
        "{fourth}"
    );
    // The pool takes 20 of the host's 64 cores: a request for 60 is offered the 44 left.
    let (status, refused) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": "now", "endTime": rfc3339(end), "zoneId": "az9",
               "computePoolReservation": {"numCpuCores": 60, "numVcInstances": 6,
                                          "virtualMemSize": 6000}}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let most = &refused["offer"]["maxCapacity"]["computePoolReserved"];
    assert_eq!(most["numCpuCores"], 44, "{refused}");
    assert_eq!(most["numVcInstances"], 4, "{refused}");
    assert_eq!(most["virtualMemSize"], 4400, "{refused}");
}

/// The figures of a counted capacity (`vcInstances`, `volumes`) in `zone` over `[start, end)`,
/// asked as the specification's examples ask, without a flavor or criteria.
async fn counted(
    app: &TestApp,
    kind: &str,
    type_id: &str,
    zone: Option<&str>,
    start: i64,
    end: i64,
) -> Value {
    let mut body = json!({format!("{kind}ResourceTypeId"): type_id,
                          "timePeriod": {"startTime": rfc3339(start), "stopTime": rfc3339(end)}});
    if let Some(zone) = zone {
        body["zoneId"] = json!(zone);
    }
    let (status, answer) = app
        .call(
            Method::GET,
            &format!("/promise/capacity/{kind}/query"),
            None,
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["capacityInformation"].clone()
}

/// Instances and volumes are counted capacities: each host takes up to its instance limit (50
/// unless its `max_instances` says otherwise) and each storage provider up to its volume limit;
/// reservations hold their `numVcInstances` and `numVolumes`, instances are allocated; and they
/// can be subscribed to without a flavor.
#[tokio::test]
async fn instances_and_volumes_are_counted_capacity() {
    let app = TestApp::spawn().await;
    world(&app).await;
    let (status, hosts) = app.get("/reservation/v1/os-hosts", None).await;
    assert_eq!(status, StatusCode::OK, "{hosts}");
    let cn2 = hosts["hosts"]
        .as_array()
        .and_then(|all| all.iter().find(|h| h["hypervisor_hostname"] == "cn2"))
        .map(|h| h["id"].as_str().expect("id").to_owned())
        .expect("cn2");
    let (status, updated) = app
        .call(
            Method::PUT,
            &format!("/reservation/v1/os-hosts/{cn2}"),
            None,
            Some(json!({"max_instances": 10})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    let start = tomorrow();
    let end = start + DAY;
    let before = counted(&app, "compute", "vcInstances", Some("az1"), start, end).await;
    assert_eq!(
        before,
        json!({"total": 60, "reserved": 0, "allocated": 0, "available": 60})
    );
    let (status, pool) = app
        .post(
            "/promise/reservation/compute/create",
            json!({"startTime": rfc3339(start), "endTime": rfc3339(end), "zoneId": "az1",
               "computePoolReservation": {"numCpuCores": 4, "numVcInstances": 3,
                                          "virtualMemSize": 2048}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{pool}");
    let (status, made) = app
        .post(
            "/promise/create-instance",
            json!({"name": "now", "flavor": "m1.small", "zone": "az1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let during = counted(&app, "compute", "vcInstances", Some("az1"), start, end).await;
    assert_eq!(
        during,
        json!({"total": 60, "reserved": 3, "allocated": 1, "available": 56})
    );
    let now = now_micros();
    let today = counted(&app, "compute", "vcInstances", Some("az1"), now, now + HOUR).await;
    assert_eq!(today["reserved"], 0, "the pool starts tomorrow: {today}");

    // Volumes: three storage providers of 100 volumes each; a storage pool holds its volumes.
    let volumes = counted(&app, "storage", "volumes", None, start, end).await;
    assert_eq!(volumes["total"], 300, "{volumes}");
    let (status, storage) = app
        .post(
            "/promise/reservation/storage/create",
            json!({"startTime": rfc3339(start), "endTime": rfc3339(end), "zoneId": "az2",
               "storagePoolReservation": {"storageSize": 10, "numSnapshots": 3, "numVolumes": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{storage}");
    let volumes = counted(&app, "storage", "volumes", Some("az2"), start, end).await;
    assert_eq!(
        volumes,
        json!({"total": 100, "reserved": 2, "allocated": 0, "available": 98})
    );

    // Subscribed to as the specification's examples do: no flavor, no criteria.
    let (status, subscribed) = app
        .post(
            "/promise/capacity/compute/subscribe",
            json!({"zoneId": "az1", "computeResourceTypeId": "vcInstances",
                   "callbackUri": "https://nfvo.example.com/capacity",
                   "threshold": {"thresholdType": "absoluteValue",
                                 "threshold": {"capacity_info": "available",
                                               "condition": "lt", "value": 5}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{subscribed}");
}
