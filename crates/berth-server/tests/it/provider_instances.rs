//! Instances on a provider cloud's capacity: a second berth acts as the remote cloud's
//! Placement, a Keystone stand-in issues the tokens, and berth, which reads the cloud only when
//! something asks it to (its interval is an hour here, so what it knows of the cloud is exactly
//! what the test made it read), places Promise instances there. Each is written into the
//! remote Placement as Nova's scheduler would write it and removed there when destroyed or
//! when its reservation ends; berth's own instances are not counted twice when it reads the
//! cloud again; an instance the cloud refuses (its capacity taken there outside berth) or cannot
//! take (the cloud is down) is not created and the cloud is read at once; a cloud whose capacity
//! is held is removed only by force.

use crate::blazar_leases::{rfc3339, tomorrow};
use crate::provider_clouds::{PATIENCE, inventory, until, until_vcpu};
use crate::provider_sync::{
    DAY, FakeKeystone, berth_reading_every, register_cloud, remote_berth, start_keystone,
};
use crate::support::{TestApp, free_port};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The remote consumer `consumer`'s allocations, as the remote Placement shows them.
async fn remote_allocations(remote: &TestApp, consumer: &str) -> Value {
    let (status, body) = remote
        .get(&format!("/placement/allocations/{consumer}"), Some("1.39"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// An allocation of `vcpus` VCPU on the remote `node`, by consumer `n`, whom berth does not
/// know.
async fn take_remotely(remote: &TestApp, node: &str, vcpus: u64, n: u128) -> String {
    let consumer = Uuid::from_u128(0x0_7a4e_0000 + n).to_string();
    let (status, body) = remote
        .call(
            Method::PUT,
            &format!("/placement/allocations/{consumer}"),
            Some("1.39"),
            Some(
                json!({"allocations": {node: {"resources": {"VCPU": vcpus}}},
                        "project_id": "other", "user_id": "other",
                        "consumer_generation": null, "consumer_type": "INSTANCE"}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    consumer
}

async fn create_instance(app: &TestApp, name: &str, extra: Value) -> (StatusCode, Value) {
    let mut body = json!({"name": name, "flavor": "m1.remote", "image": "cirros"});
    for (key, value) in extra.as_object().expect("members") {
        body[key] = value.clone();
    }
    app.post("/promise/create-instance", body).await
}

/// `DELETE /promise/providers/{id}`, without force.
async fn remove_cloud(app: &TestApp, id: &str) -> (StatusCode, Value) {
    app.call(
        Method::DELETE,
        &format!("/promise/providers/{id}"),
        None,
        None,
    )
    .await
}

/// The VCPU berth's consumers use on `provider`.
async fn used(app: &TestApp, provider: &str) -> u64 {
    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{provider}/usages"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["usages"]["VCPU"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_on_a_provider_cloud_are_written_into_its_placement() {
    // The remote cloud: one compute node of 8 VCPU.
    let listen = format!("127.0.0.1:{}", free_port());
    let remote = remote_berth(&listen, None).await;
    let node = remote.create_provider("cn-remote", None).await;
    remote.set_inventory(&node, 8, 16384).await;
    let keystone = start_keystone(FakeKeystone {
        placement: format!("{}/placement", remote.base),
        issued: Arc::new(AtomicUsize::new(0)),
    })
    .await;
    let dir = tempfile::tempdir().expect("dir");
    // Read only when something wakes the reads (registration, a refused allocation).
    let app = berth_reading_every(dir.path(), 3600).await;
    let (status, body) = app
        .post(
            "/promise/flavors",
            json!({"id": "remote", "name": "m1.remote", "vcpus": 2, "ram": 1024, "disk": 0}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Registered, and read at once although the interval is an hour.
    let id = register_cloud(&app, &keystone).await;
    until(&app, &id, "imported", |p| p["sync"]["providers"] == 1).await;
    let cloud = Uuid::parse_str(&id).expect("uuid");
    let local = Uuid::new_v5(&cloud, Uuid::parse_str(&node).expect("uuid").as_bytes()).to_string();
    assert_eq!(inventory(&app, &local, "VCPU").await, (8, 0));

    // An instance on the cloud: placed on the imported node, written into the remote
    // Placement with the project and user berth works as there.
    let (status, made) = create_instance(&app, "vm-1", json!({"provider-id": id})).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let first = made["instance-id"].as_str().expect("id").to_owned();
    assert_eq!(made["instance"]["host"], local.as_str(), "{made}");
    let held = remote_allocations(&remote, &first).await;
    assert_eq!(held["allocations"][&node]["resources"]["VCPU"], 2, "{held}");
    assert_eq!(held["project_id"], "p-promise", "{held}");
    assert_eq!(held["user_id"], "u-promise", "{held}");
    assert_eq!(used(&app, &local).await, 2);

    // Capacity taken outside berth: berth has not read the cloud since, so it still offers 6
    // VCPU and places the next instance there; the cloud refuses it, nothing is created, and
    // berth reads the cloud at once: the 5 taken there count as taken here, the 2 of berth's
    // own instance are counted once, as its allocation.
    take_remotely(&remote, &node, 5, 1).await;
    let (status, refused) = create_instance(&app, "vm-2", json!({"provider-id": id})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "provider_cloud_refused", "{refused}");
    assert_eq!(refused["status"], "rejected", "{refused}");
    assert!(
        refused["message"].as_str().is_some_and(|m| m.contains(&id)),
        "{refused}"
    );
    let (_, listed) = app.get("/promise/instances", None).await;
    assert_eq!(
        listed["instances"].as_array().map(Vec::len),
        Some(1),
        "the refused instance is not kept: {listed}"
    );
    until_vcpu(&app, &local, (8, 5)).await;
    assert_eq!(used(&app, &local).await, 2);
    // Now berth knows: the next one is refused here, without asking the cloud.
    let (status, refused) = create_instance(&app, "vm-3", json!({"provider-id": id})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_ne!(refused["code"], "provider_cloud_refused", "{refused}");

    // Destroyed: gone from the remote Placement too.
    let (status, body) = app
        .post("/promise/destroy-instance", json!({"instance-id": first}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let held = remote_allocations(&remote, &first).await;
    assert_eq!(held["allocations"], json!({}), "{held}");

    // An unknown provider-id is 404; one that is no id, 400.
    let nil = Uuid::nil().to_string();
    let (status, body) = create_instance(&app, "vm-4", json!({"provider-id": nil})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = create_instance(&app, "vm-4", json!({"provider-id": "nope"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // A reservation on the cloud, and an instance drawing on it: written remotely; when the
    // reservation ends, berth removes the allocation from the cloud by itself.
    let start = tomorrow();
    let (status, reserved) = app
        .post(
            "/promise/create-reservation",
            json!({"zone": "RegionOne", "provider-id": id, "start": rfc3339(start),
                   "end": rfc3339(start + DAY),
                   "capacity": {"cores": "2", "ram": "1024", "instances": "1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{reserved}");
    assert_eq!(
        reserved["reservation"]["providerIds"],
        json!([id]),
        "whose capacity it holds: {reserved}"
    );
    let reservation = reserved["reservation-id"].as_str().expect("id").to_owned();
    let (status, updated) = app
        .post(
            "/promise/update-reservation",
            json!({"reservation-id": reservation, "start": "now"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    let started = Instant::now();
    let drawn = loop {
        let (status, made) = create_instance(
            &app,
            "vm-reserved",
            json!({"reservation-id": reservation, "source": format!("ResourceProvider:{id}")}),
        )
        .await;
        if status == StatusCode::OK {
            break made["instance-id"].as_str().expect("id").to_owned();
        }
        assert!(started.elapsed() < PATIENCE, "never active: {made}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let held = remote_allocations(&remote, &drawn).await;
    assert_eq!(held["allocations"][&node]["resources"]["VCPU"], 2, "{held}");

    // A cloud whose capacity is held is removed only by force.
    let (status, refused) = remove_cloud(&app, &id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "provider_cloud_in_use", "{refused}");

    // The reservation cancelled: its instance's allocation leaves the cloud (at the next read,
    // which a refusal wakes: the remote cloud is full again for berth's next instance).
    let (status, body) = app
        .post(
            "/promise/cancel-reservation",
            json!({"reservation-id": reservation}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    take_remotely(&remote, &node, 1, 2).await;
    let (status, refused) = create_instance(&app, "vm-5", json!({"provider-id": id})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "provider_cloud_refused", "{refused}");
    let started = Instant::now();
    while remote_allocations(&remote, &drawn).await["allocations"] != json!({}) {
        assert!(
            started.elapsed() < PATIENCE,
            "the ended instance stays remote"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The cloud down: berth, not knowing yet, places an instance, cannot write it there, and
    // does not create it; reading the cloud at once, it marks it unknown.
    until_vcpu(&app, &local, (8, 6)).await;
    // The cloud's health is a notification too: a subscription to its capacity (providerId)
    // hears its total fall to nothing when it cannot be reached.
    let (status, made) = app
        .post(
            "/promise/capacity/compute/subscribe",
            json!({"zoneId": "RegionOne", "computeResourceTypeId": "numCpuCores",
                   "providerId": id,
                   "threshold": {"capacity_info": "total", "condition": "lt", "value": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let watching = made["capacityChangeSubscriptionId"]
        .as_str()
        .expect("id")
        .to_owned();
    let (kept, _database) = remote.stop().await;
    let (status, refused) = create_instance(&app, "vm-6", json!({"provider-id": id})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "provider_cloud_unreachable", "{refused}");
    until(&app, &id, "unknown", |p| p["sync"]["state"] == "unknown").await;
    let heard = crate::provider_capacity::until_notified(&app, &watching).await;
    assert_eq!(heard[0]["capacityInformation"]["total"], 0, "{heard:?}");
    assert_eq!(heard[0]["providerId"], id.as_str(), "{heard:?}");
    let (_, listed) = app.get("/promise/instances", None).await;
    let live = listed["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .filter(|i| i["status"] == "active")
        .count();
    assert_eq!(live, 0, "{listed}");

    // Nothing holds it any more: removed without force, and its providers with it.
    let (status, body) = remove_cloud(&app, &id).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{local}"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    drop(kept);
}
