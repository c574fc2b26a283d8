//! Capacity per provider: two provider clouds (each a remote berth behind its own Keystone
//! stand-in, with a compute node of 8 and of 16 VCPU) and a local host of 4 VCPU, all in
//! RegionOne. Promise's `query-capacity` and the ETSI query answer the sum and, in `providers`,
//! what each holds; `provider-id` (or `source`, or `providerId`) restricts them to one provider,
//! `local` to berth's own; a reservation on one cloud moves only that cloud's reserved figure;
//! and a capacity subscription naming a provider fires only for a change of that provider.

use crate::blazar_leases::{enroll, rfc3339, tomorrow};
use crate::provider_clouds::{PATIENCE, until, until_vcpu};
use crate::provider_sync::{
    DAY, FakeKeystone, local_berth, register_cloud, remote_berth, start_keystone,
};
use crate::support::{TestApp, free_port};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A provider cloud: its remote berth, the compute node there, and its id and that node's
/// uuid here.
struct Cloud {
    remote: TestApp,
    node: String,
    id: String,
    local: String,
}

/// Starts a remote berth with one compute node of `vcpus` VCPU and its Keystone stand-in, and
/// registers that cloud with `app`.
async fn cloud(app: &TestApp, name: &str, vcpus: u64) -> Cloud {
    let listen = format!("127.0.0.1:{}", free_port());
    let remote = remote_berth(&listen, None).await;
    let node = remote.create_provider(name, None).await;
    remote.set_inventory(&node, vcpus, 16384).await;
    let keystone = start_keystone(FakeKeystone {
        placement: format!("{}/placement", remote.base),
        issued: Arc::new(AtomicUsize::new(0)),
    })
    .await;
    let id = register_cloud(app, &keystone).await;
    let cloud = Uuid::parse_str(&id).expect("uuid");
    let local = Uuid::new_v5(&cloud, Uuid::parse_str(&node).expect("uuid").as_bytes());
    Cloud {
        remote,
        node,
        id,
        local: local.to_string(),
    }
}

/// `query-capacity` of RegionOne tomorrow, the figure `figure`, with `extra` members.
async fn query(app: &TestApp, figure: &str, extra: Value) -> (StatusCode, Value) {
    let start = tomorrow();
    let mut body = json!({"capacity": figure, "zone": "RegionOne", "show-utilization": false,
                          "window": {"start": rfc3339(start), "end": rfc3339(start + DAY)}});
    for (name, value) in extra.as_object().expect("members") {
        body[name] = value.clone();
    }
    app.post("/promise/query-capacity", body).await
}

/// The cores of `figure` of a `query-capacity` answer that succeeded, in all and per provider.
fn cores(answer: &Value, figure: &str) -> (i64, Vec<(String, i64)>) {
    let of = |capacity: &Value| {
        capacity[figure]["cores"]
            .as_i64()
            .unwrap_or_else(|| panic!("no {figure} cores: {answer}"))
    };
    let providers = answer["providers"]
        .as_array()
        .unwrap_or_else(|| panic!("no providers: {answer}"))
        .iter()
        .map(|p| {
            let id = p["provider-id"].as_str().expect("provider-id").to_owned();
            (id, of(&p["capacity"]))
        })
        .collect();
    (of(&answer["capacity"]), providers)
}

/// The cores of `figure` `query-capacity` answers with `extra` members.
async fn cores_of(app: &TestApp, figure: &str, extra: Value) -> (i64, Vec<(String, i64)>) {
    let (status, answer) = query(app, figure, extra).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["result"], "ok", "{answer}");
    cores(&answer, figure)
}

/// The local host's own capacity and each cloud's, berth's own first, then by id.
fn expected(figures: [(&str, i64); 3]) -> Vec<(String, i64)> {
    let mut clouds: Vec<(String, i64)> = figures[1..]
        .iter()
        .map(|(id, n)| ((*id).to_owned(), *n))
        .collect();
    clouds.sort();
    let mut all = vec![("local".to_owned(), figures[0].1)];
    all.extend(clouds);
    all
}

/// The capacity notifications of subscription `id` in the feed.
pub(crate) async fn notified(app: &TestApp, id: &str) -> Vec<Value> {
    let (status, feed) = app.get("/promise/notifications?limit=1000", None).await;
    assert_eq!(status, StatusCode::OK, "{feed}");
    feed["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .map(|entry| entry["notification"].clone())
        .filter(|n| {
            n["notificationType"] == "CapacityChange"
                && n["notificationId"]
                    .as_str()
                    .is_some_and(|nid| nid.starts_with(id))
        })
        .collect()
}

/// Waits until subscription `id` has a capacity notification in the feed; they all.
pub(crate) async fn until_notified(app: &TestApp, id: &str) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let got = notified(app, id).await;
        if !got.is_empty() {
            return got;
        }
        assert!(started.elapsed() < PATIENCE, "{id} never notified");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A feed-only subscription to RegionOne's total cores over `more_than`, of `provider` when
/// given; its id.
async fn subscribe(app: &TestApp, provider: Option<&str>, more_than: i64) -> String {
    let mut body = json!({"zoneId": "RegionOne", "computeResourceTypeId": "numCpuCores",
                          "threshold": {"threshold": {"capacity_info": "total",
                                                      "condition": "gt", "value": more_than}}});
    if let Some(provider) = provider {
        body["providerId"] = json!(provider);
    }
    let (status, made) = app.post("/promise/capacity/compute/subscribe", body).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        made["subscription"]["providerId"],
        provider.map_or(Value::Null, |p| json!(p)),
        "{made}"
    );
    made["capacityChangeSubscriptionId"]
        .as_str()
        .expect("id")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_queries_and_subscriptions_answer_per_provider() {
    let dir = tempfile::tempdir().expect("dir");
    let app = local_berth(dir.path()).await;
    let one = cloud(&app, "cn-one", 8).await;
    let two = cloud(&app, "cn-two", 16).await;
    for cloud in [&one, &two] {
        until(&app, &cloud.id, "imported", |p| {
            p["sync"]["state"] == "ok" && p["sync"]["providers"] == 1
        })
        .await;
    }
    until_vcpu(&app, &one.local, (8, 0)).await;
    until_vcpu(&app, &two.local, (16, 0)).await;
    enroll(&app, "local-1", "RegionOne", 4).await;

    // Without a provider: the sum, and each provider's own figures.
    let all = expected([("local", 4), (&one.id, 8), (&two.id, 16)]);
    assert_eq!(cores_of(&app, "total", json!({})).await, (28, all));
    // With one, only its own.
    let only = |id: &str, n: i64| (n, vec![(id.to_owned(), n)]);
    let total = |provider: Value| cores_of(&app, "total", provider);
    assert_eq!(
        total(json!({"provider-id": one.id})).await,
        only(&one.id, 8)
    );
    let prefixed = format!("ResourceProvider:{}", two.id);
    assert_eq!(
        total(json!({ "provider-id": prefixed })).await,
        only(&two.id, 16)
    );
    assert_eq!(
        total(json!({"provider-id": "local"})).await,
        only("local", 4)
    );
    let source = format!("ResourceProvider:{}", one.id);
    assert_eq!(total(json!({ "source": source })).await, only(&one.id, 8));
    // An unknown provider is not found; a provider id that is none is a bad request.
    let nil = Uuid::nil().to_string();
    let (status, refused) = query(&app, "total", json!({"provider-id": nil})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert_eq!(refused["result"], "error", "{refused}");
    let (status, refused) = query(&app, "total", json!({"provider-id": "cloud-9"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["result"], "error", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("provider-id")),
        "{refused}"
    );

    // A reservation on cloud one moves only its reserved figure.
    let start = tomorrow();
    let (status, made) = app
        .post(
            "/promise/create-reservation",
            json!({"zone": "RegionOne", "start": rfc3339(start), "end": rfc3339(start + DAY),
                   "provider-id": one.id,
                   "capacity": {"cores": "2", "ram": "1024", "instances": "1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let reserved = expected([("local", 0), (&one.id, 2), (&two.id, 0)]);
    assert_eq!(cores_of(&app, "reserved", json!({})).await, (2, reserved));

    // The ETSI query: providerId, and providers.
    let (status, etsi) = app
        .post(
            "/promise/capacity/compute/query",
            json!({"zoneId": "RegionOne", "computeResourceTypeId": "numCpuCores",
                   "providerId": one.id, "attributeSelector": "total,reserved",
                   "timePeriod": {"startTime": rfc3339(start), "stopTime": rfc3339(start + DAY)}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{etsi}");
    assert_eq!(
        etsi["capacityInformation"],
        json!({"total": 8, "reserved": 2})
    );
    assert_eq!(
        etsi["providers"],
        json!([{"providerId": one.id, "capacityInformation": {"total": 8, "reserved": 2},
                "held": 0}])
    );
    let (status, etsi) = app
        .get(
            "/promise/capacity/compute/query?zoneId=RegionOne&computeResourceTypeId=numCpuCores&providerId=local",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{etsi}");
    assert_eq!(etsi["capacityInformation"]["total"], 4, "{etsi}");
    assert_eq!(etsi["providers"][0]["providerId"], "local", "{etsi}");
    let (status, etsi) = app
        .get(
            &format!("/promise/capacity/compute/query?zoneId=RegionOne&computeResourceTypeId=numCpuCores&providerId={nil}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{etsi}");

    // A subscription to cloud two's capacity fires for a change there only: cloud one growing
    // to 24 crosses the threshold of every provider's (4 + 24 + 16 = 44 > 40) and not cloud
    // two's (16), evaluated over the same catalog.
    let watched = subscribe(&app, Some(&two.id), 20).await;
    let everyone = subscribe(&app, None, 40).await;
    one.remote.set_inventory(&one.node, 24, 16384).await;
    until_vcpu(&app, &one.local, (24, 0)).await;
    let crossed = until_notified(&app, &everyone).await;
    assert_eq!(
        crossed[0]["capacityInformation"]["total"], 44,
        "{crossed:?}"
    );
    assert!(crossed[0].get("providerId").is_none(), "{crossed:?}");
    assert_eq!(notified(&app, &watched).await, Vec::<Value>::new());
    two.remote.set_inventory(&two.node, 32, 16384).await;
    until_vcpu(&app, &two.local, (32, 0)).await;
    let crossed = until_notified(&app, &watched).await;
    assert_eq!(crossed.len(), 1, "{crossed:?}");
    assert_eq!(crossed[0]["providerId"], two.id.as_str(), "{crossed:?}");
    assert_eq!(
        crossed[0]["capacityInformation"]["total"], 32,
        "{crossed:?}"
    );
    assert_eq!(crossed[0]["crossing"], "entered", "{crossed:?}");
    let (status, shown) = app
        .get(&format!("/promise/subscriptions/{watched}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["subscription"]["providerId"], two.id.as_str());
    let (status, refused) = app
        .post(
            "/promise/capacity/compute/subscribe",
            json!({"zoneId": "RegionOne", "computeResourceTypeId": "numCpuCores",
                   "providerId": nil,
                   "threshold": {"capacity_info": "total", "condition": "gt", "value": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    drop((one, two));
}
