//! Failures and maintenance end to end: ten hosts, leases spread over them, one host goes down.
//! Future leases are healed onto free hosts that pass their filters, one that cannot be healed
//! is degraded with the right `missing_resources`, the running one is flagged and left in
//! place until an admin reallocates it, subscribers are notified, and when the host comes back
//! the flags clear.

use crate::blazar_leases::{LEASES, create, lease_body, minutes, now_micros};
use crate::notifications::{Got, of_type, receiver, wait_until};
use crate::support::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;

const HOUR: i64 = 3_600_000_000;

/// Enrolls host `name` (8 VCPUs) with a GPU or not; returns its id.
async fn enroll(app: &TestApp, name: &str, gpu: bool) -> String {
    let body = json!({"name": name, "availability_zone": "az1", "vcpus": 8,
                      "memory_mb": 16384, "local_gb": 100, "gpu": gpu});
    let (status, created) = app
        .call(Method::POST, "/reservation/v1/os-hosts", None, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["host"]["id"].as_str().expect("id").to_owned()
}

async fn lease(app: &TestApp, id: &str) -> Value {
    let (status, body) = app
        .call(Method::GET, &format!("{LEASES}/{id}"), None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["lease"].clone()
}

/// The host ids a lease's first reservation holds.
fn held(lease: &Value) -> Vec<String> {
    lease["reservations"][0]["allocations"]
        .as_array()
        .expect("allocations")
        .iter()
        .map(|a| a["host_id"].as_str().expect("host id").to_owned())
        .collect()
}

fn gpu_hosts(amount: u32) -> Value {
    json!({"resource_type": "physical:host", "min": amount, "max": amount,
           "resource_properties": r#"["==", "$gpu", true]"#})
}

async fn set_status(app: &TestApp, host: &str, body: Value) -> (StatusCode, Value) {
    app.call(
        Method::PUT,
        &format!("/reservation/v1/os-hosts/{host}/status"),
        None,
        Some(body),
    )
    .await
}

fn changes_of<'a>(got: &'a [Got], lease: &str, kind: &str) -> Vec<&'a Value> {
    got.iter()
        .map(|(body, _)| body)
        .filter(|b| b["reservationId"] == lease && b["changeType"] == kind)
        .collect()
}

#[tokio::test]
async fn a_host_down_heals_degrades_flags_and_notifies_and_its_return_clears_the_flags() {
    let app = TestApp::spawn_allowing_loopback().await;
    let mut hosts = Vec::new();
    for idx in 0..10 {
        hosts.push(enroll(&app, &format!("h{idx}"), idx < 4).await);
    }
    let (url, received, server) = receiver(0).await;
    let (status, body) = app
        .call(
            Method::POST,
            "/promise/reservation/subscribe",
            None,
            Some(json!({"inputFilter": "all", "callbackUri": url})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Ten hosts of 8 cores: 80 in total; losing one host crosses below 75.
    let (status, body) = app
        .call(
            Method::POST,
            "/promise/capacity/compute/subscribe",
            None,
            Some(
                json!({"zoneId": "az1", "computeResourceTypeId": "numCpuCores",
                        "callbackUri": url,
                        "threshold": {"thresholdType": "absoluteValue",
                                      "threshold": {"capacity_info": "total",
                                                    "condition": "lt", "value": 75}}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let now = now_micros();
    let at = |hours: i64| minutes(now + hours * HOUR);
    // Running now: two instances, packed onto h0.
    let running = create(
        &app,
        lease_body(
            "running",
            "now",
            &at(1),
            json!([{"resource_type": "virtual:instance", "vcpus": 2, "memory_mb": 1024,
                    "disk_gb": 10, "amount": 2, "affinity": null}]),
        ),
    )
    .await;
    // Later: one GPU host (h0), then four GPU hosts (h0 to h3, every one there is), then three
    // anti-affine instances on hosts without a GPU (not on h0).
    let single = create(
        &app,
        lease_body("single", &at(2), &at(3), json!([gpu_hosts(1)])),
    )
    .await;
    let all_gpus = create(
        &app,
        lease_body("all-gpus", &at(4), &at(5), json!([gpu_hosts(4)])),
    )
    .await;
    let spread = create(
        &app,
        lease_body(
            "spread",
            &at(4),
            &at(5),
            json!([{"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 512,
                    "disk_gb": 1, "amount": 3, "affinity": false,
                    "resource_properties": r#"["==", "$gpu", false]"#}]),
        ),
    )
    .await;
    let id = |lease: &Value| lease["id"].as_str().expect("id").to_owned();
    let (running, single, all_gpus, spread) =
        (id(&running), id(&single), id(&all_gpus), id(&spread));
    assert_eq!(held(&lease(&app, &single).await), [hosts[0].clone()]);
    assert_eq!(held(&lease(&app, &all_gpus).await), hosts[..4].to_vec());
    let spread_hosts = held(&lease(&app, &spread).await);
    assert!(!spread_hosts.contains(&hosts[0]));
    for _ in 0..100 {
        if lease(&app, &running).await["status"] == "ACTIVE" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(lease(&app, &running).await["status"], "ACTIVE");
    assert_eq!(held(&lease(&app, &running).await), [hosts[0].clone()]);

    // h0 goes down.
    let (status, body) = set_status(
        &app,
        &hosts[0],
        json!({"status": "down", "reason": "PSU failed"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["host"]["status"], "down");
    assert_eq!(body["host"]["status_reason"], "PSU failed");
    assert_eq!(body["leases"]["healed"], json!([single]));
    assert_eq!(body["leases"]["degraded"], json!([all_gpus]));
    assert_eq!(body["leases"]["flagged"], json!([running]));

    // The single GPU host moved to the next GPU host, the filter still holds.
    let healed = lease(&app, &single).await;
    assert_eq!(held(&healed), [hosts[1].clone()]);
    assert_eq!(healed["degraded"], false);
    assert_eq!(healed["reservations"][0]["resources_changed"], true);
    assert_eq!(healed["reservations"][0]["missing_resources"], false);
    // Four GPU hosts cannot be had any more: three are, one is missing (on h0).
    let short = lease(&app, &all_gpus).await;
    assert_eq!(short["degraded"], true);
    let missing = &short["reservations"][0]["missing_resources"];
    assert_eq!(missing["amount"], 1, "{missing}");
    assert_eq!(missing["unit"], "hosts");
    assert_eq!(missing["hosts"][0]["host_id"], hosts[0].as_str());
    assert_eq!(missing["hosts"][0]["status"], "down");
    // The Promise surface shows the same failure.
    let (status, promise) = app
        .call(
            Method::POST,
            "/promise/reservation/compute/query",
            None,
            Some(json!({"queryReservationFilter": [{"reservationId": all_gpus}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{promise}");
    let data = &promise["queryResult"];
    assert_eq!(data["degraded"], true, "{data}");
    let reservation = short["reservations"][0]["id"].as_str().expect("id");
    assert_eq!(data["missingResources"][reservation]["amount"], 1, "{data}");
    // The running lease is flagged, not moved: its two instances on h0 are missing.
    let flagged = lease(&app, &running).await;
    assert_eq!(flagged["degraded"], true);
    assert_eq!(held(&flagged), [hosts[0].clone()]);
    let missing = &flagged["reservations"][0]["missing_resources"];
    assert_eq!(missing["amount"], 2, "{missing}");
    assert_eq!(missing["unit"], "instances");
    assert_eq!(missing["resources"]["VCPU"], 4);
    // The lease on other hosts is untouched.
    let untouched = lease(&app, &spread).await;
    assert_eq!(held(&untouched), spread_hosts);
    assert_eq!(untouched["degraded"], false);
    assert_eq!(untouched["reservations"][0]["resources_changed"], false);
    // A new lease is never given the host that is down.
    let fresh = create(
        &app,
        lease_body("fresh", &at(2), &at(3), json!([gpu_hosts(1)])),
    )
    .await;
    assert_eq!(held(&fresh), [hosts[2].clone()]);
    // Subscribers hear of every lease touched.
    wait_until(&received, |got| {
        changes_of(got, &running, "lease.degraded").len() == 1
            && changes_of(got, &all_gpus, "lease.degraded").len() == 1
            && changes_of(got, &single, "lease.healed").len() == 1
    })
    .await;
    {
        let got = received.got.lock().expect("lock");
        let failure = changes_of(&got, &all_gpus, "lease.degraded")[0];
        assert_eq!(failure["notificationType"], "Failure");
        let data = &failure["changedReservationData"];
        assert_eq!(data["status"], "down");
        assert_eq!(data["reason"], "PSU failed");
        let reservation = short["reservations"][0]["id"].as_str().expect("id");
        assert_eq!(
            data["missing_resources"][reservation]["amount"], 1,
            "{data}"
        );
        assert_eq!(
            changes_of(&got, &single, "lease.healed")[0]["notificationType"],
            "ReservationChange"
        );
        assert!(changes_of(&got, &spread, "lease.degraded").is_empty());
    }
    // Capacity subscribers hear that the zone lost a host's cores.
    wait_until(&received, |got| !of_type(got, "CapacityChange").is_empty()).await;
    {
        let got = received.got.lock().expect("lock");
        let crossing = of_type(&got, "CapacityChange")[0];
        assert_eq!(crossing["crossing"], "entered");
        assert_eq!(crossing["capacityInformation"]["total"], 72, "{crossing}");
    }

    // The admin moves the running lease off h0.
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("/reservation/v1/os-hosts/{}/allocation", hosts[0]),
            None,
            Some(json!({"lease_id": running})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let moved = lease(&app, &running).await;
    assert!(!held(&moved).contains(&hosts[0]), "{moved}");
    assert_eq!(moved["degraded"], false);
    assert_eq!(moved["reservations"][0]["resources_changed"], true);
    assert_eq!(moved["reservations"][0]["missing_resources"], false);

    // h0 comes back: what was missing on it is whole again.
    let (status, body) = set_status(&app, &hosts[0], json!({"status": "up"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["host"]["status"], "up");
    assert!(body["host"].get("status_reason").is_none(), "{body}");
    assert_eq!(body["leases"]["restored"], json!([all_gpus]));
    let back = lease(&app, &all_gpus).await;
    assert_eq!(back["degraded"], false);
    assert_eq!(back["reservations"][0]["missing_resources"], false);
    assert_eq!(held(&back), hosts[..4].to_vec());
    wait_until(&received, |got| {
        changes_of(got, &all_gpus, "lease.restored").len() == 1
            && of_type(got, "CapacityChange").len() == 2
    })
    .await;
    assert_eq!(
        of_type(&received.got.lock().expect("lock"), "CapacityChange")[1]["crossing"],
        "left"
    );
    server.abort();
}

#[tokio::test]
async fn provider_status_on_the_placement_surface_and_bad_requests() {
    let app = TestApp::spawn().await;
    let host = enroll(&app, "h0", true).await;
    let (_, list) = app
        .call(
            Method::GET,
            "/placement/resource_providers?name=h0",
            None,
            None,
        )
        .await;
    let uuid = list["resource_providers"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let path = format!("/placement/resource_providers/{uuid}/status");
    let (status, body) = app.call(Method::GET, &path, None, None).await;
    assert_eq!(
        (status, body["status"].clone()),
        (StatusCode::OK, json!("up"))
    );
    let (status, body) = app
        .call(
            Method::PUT,
            &path,
            None,
            Some(json!({"status": "maintenance", "reason": "firmware"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "maintenance");
    assert_eq!(body["reason"], "firmware");
    assert!(body["since"].is_string());
    let (_, shown) = app
        .call(
            Method::GET,
            &format!("/reservation/v1/os-hosts/{host}"),
            None,
            None,
        )
        .await;
    assert_eq!(shown["host"]["status"], "maintenance");
    // A host in maintenance is not given to a lease.
    let now = now_micros();
    let (status, refused) = app
        .call(
            Method::POST,
            LEASES,
            None,
            Some(lease_body(
                "l",
                &minutes(now + HOUR),
                &minutes(now + 2 * HOUR),
                json!([gpu_hosts(1)]),
            )),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");

    for (body, expected) in [
        (json!({"status": "broken"}), StatusCode::BAD_REQUEST),
        (json!({"reason": "no status"}), StatusCode::BAD_REQUEST),
        (
            json!({"status": "down", "colour": "red"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"status": "down", "reason": "x".repeat(300)}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, answer) = app.call(Method::PUT, &path, None, Some(body.clone())).await;
        assert_eq!(status, expected, "{body}: {answer}");
        let (status, answer) = set_status(&app, &host, body.clone()).await;
        assert_eq!(status, expected, "{body}: {answer}");
    }
    let unknown = "/placement/resource_providers/4e8e5957-649f-477b-9e5b-f1f75b21c03c/status";
    let (status, _) = app.call(Method::GET, unknown, None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = set_status(&app, "999", json!({"status": "down"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let reallocate = format!("/reservation/v1/os-hosts/{host}/allocation");
    for body in [json!({}), json!({"lease_id": uuid, "reservation_id": uuid})] {
        let (status, answer) = app.call(Method::PUT, &reallocate, None, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    }
    let (status, answer) = app
        .call(
            Method::PUT,
            &reallocate,
            None,
            Some(json!({"lease_id": uuid})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "an unknown lease: {answer}");
}

/// A host's inventory shrinks under what a lease holds on it (Placement accepts what a host
/// reports): the lease is marked degraded, with the reason and a `lease.degraded` record, and a
/// shrink that leaves every reservation whole changes nothing.
#[tokio::test]
async fn an_inventory_shrunk_under_a_lease_degrades_it() {
    let app = TestApp::spawn().await;
    enroll(&app, "cn1", false).await;
    let (_, providers) = app
        .get("/placement/resource_providers?name=cn1", Some("1.39"))
        .await;
    let provider = providers["resource_providers"][0]["uuid"]
        .as_str()
        .expect("the host's provider")
        .to_owned();
    let start = now_micros() + 24 * HOUR;
    let created = create(
        &app,
        lease_body(
            "slots",
            &minutes(start),
            &minutes(start + HOUR),
            json!([{"resource_type": "virtual:instance", "vcpus": 2, "memory_mb": 1024,
                    "disk_gb": 10, "amount": 3, "affinity": null}]),
        ),
    )
    .await;
    let id = created["id"].as_str().expect("id").to_owned();
    let url = format!("/placement/resource_providers/{provider}/inventories");
    // Sets the host's VCPU total (its other inventories as enrolled); answers the new generation.
    let set_vcpus = |vcpus: u64, generation: u64| {
        let body = json!({"resource_provider_generation": generation, "inventories": {
            "VCPU": {"total": vcpus}, "MEMORY_MB": {"total": 16384}, "DISK_GB": {"total": 100}}});
        let (app, url) = (&app, &url);
        async move {
            let (status, set) = app.call(Method::PUT, url, Some("1.39"), Some(body)).await;
            assert_eq!(status, StatusCode::OK, "{set}");
            set["resource_provider_generation"]
                .as_u64()
                .expect("generation")
        }
    };
    let (_, before) = app.get(&url, Some("1.39")).await;
    let generation = before["resource_provider_generation"]
        .as_u64()
        .expect("generation");
    // 6 VCPUs still hold the lease's 3 slots of 2: nothing changes.
    let generation = set_vcpus(6, generation).await;
    assert_eq!(lease(&app, &id).await["degraded"], false);
    // 4 do not.
    set_vcpus(4, generation).await;
    let short = lease(&app, &id).await;
    assert_eq!(short["degraded"], true, "{short}");
    let (status, records) = app
        .call(Method::GET, &format!("{LEASES}/{id}/events"), None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{records}");
    assert!(
        records.to_string().contains("lease.degraded"),
        "a lease.degraded record: {records}"
    );
}
