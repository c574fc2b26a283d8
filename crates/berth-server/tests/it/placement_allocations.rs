//! Placement: allocations, consumers, usages and the reshaper.

use crate::support::{TestApp, code, detail};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const C1: &str = "c0000000-0000-4000-8000-000000000001";
const C2: &str = "c0000000-0000-4000-8000-000000000002";
const C3: &str = "c0000000-0000-4000-8000-000000000003";

pub(crate) fn dict(rp: &str, resources: Value, generation: Value) -> Value {
    json!({"allocations": {rp: {"resources": resources}}, "project_id": "p1", "user_id": "u1",
           "consumer_generation": generation, "consumer_type": "INSTANCE"})
}

async fn put(app: &TestApp, consumer: &str, mv: &str, body: Value) -> (StatusCode, Value) {
    app.call(
        Method::PUT,
        &format!("/placement/allocations/{consumer}"),
        Some(mv),
        Some(body),
    )
    .await
}

async fn provider_with(app: &TestApp, name: &str, inventories: Value) -> String {
    let uuid = app.create_provider(name, None).await;
    let body = json!({"resource_provider_generation": 0, "inventories": inventories});
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("/placement/resource_providers/{uuid}/inventories"),
            Some("1.39"),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    uuid
}

#[tokio::test]
async fn consumers_write_and_read_by_microversion() {
    let app = TestApp::spawn().await;
    let rp = provider_with(
        &app,
        "cn1",
        json!({"VCPU": {"total": 8}, "MEMORY_MB": {"total": 4096, "step_size": 256}}),
    )
    .await;
    let (status, body) = put(
        &app,
        C1,
        "1.38",
        dict(&rp, json!({"VCPU": 2, "MEMORY_MB": 512}), Value::Null),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, shown) = app
        .get(&format!("/placement/allocations/{C1}"), Some("1.38"))
        .await;
    assert_eq!(
        shown["allocations"][&rp]["resources"],
        json!({"VCPU": 2, "MEMORY_MB": 512})
    );
    assert_eq!(
        shown["allocations"][&rp]["generation"], 2,
        "the provider generation moved"
    );
    assert_eq!(
        (shown["project_id"].clone(), shown["user_id"].clone()),
        (json!("p1"), json!("u1"))
    );
    assert_eq!(
        (
            shown["consumer_generation"].clone(),
            shown["consumer_type"].clone()
        ),
        (json!(1), json!("INSTANCE"))
    );
    let (_, old) = app
        .get(&format!("/placement/allocations/{C1}"), Some("1.11"))
        .await;
    assert!(old.get("project_id").is_none() && old.get("consumer_generation").is_none());

    let (status, body) = put(&app, C1, "1.38", dict(&rp, json!({"VCPU": 1}), json!(0))).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.concurrent_update"),
        "{body}"
    );
    let (status, body) = put(&app, C1, "1.38", dict(&rp, json!({"VCPU": 1}), Value::Null)).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.concurrent_update"),
        "{body}"
    );
    let (status, _) = put(&app, C1, "1.38", dict(&rp, json!({"VCPU": 3}), json!(1))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // The pre-1.12 list format, with the consumer's owner required from 1.8.
    let list =
        json!({"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}]});
    assert_eq!(
        put(&app, C2, "1.8", list.clone()).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(put(&app, C2, "1.7", list).await.0, StatusCode::NO_CONTENT);
    let (_, listed) = app
        .get(
            &format!("/placement/resource_providers/{rp}/allocations"),
            Some("1.28"),
        )
        .await;
    assert_eq!(listed["allocations"][C1]["resources"]["VCPU"], 3);
    assert_eq!(listed["allocations"][C2]["resources"]["VCPU"], 1);
    assert_eq!(listed["allocations"][C1]["consumer_generation"], 2);
    let (_, usages) = app
        .get(
            &format!("/placement/resource_providers/{rp}/usages"),
            Some("1.39"),
        )
        .await;
    assert_eq!(
        usages["usages"],
        json!({"VCPU": 4, "MEMORY_MB": 0}),
        "the rewrite released the memory"
    );

    let (_, flat) = app
        .get("/placement/usages?project_id=p1", Some("1.9"))
        .await;
    assert_eq!(flat["usages"], json!({"VCPU": 3}));
    let (_, old) = app
        .get(
            "/placement/usages?project_id=00000000-0000-0000-0000-000000000000",
            Some("1.9"),
        )
        .await;
    assert_eq!(
        old["usages"],
        json!({"VCPU": 1}),
        "pre-1.8 consumers belong to the incomplete-consumer project"
    );
    let (_, grouped) = app
        .get("/placement/usages?project_id=p1&user_id=u1", Some("1.38"))
        .await;
    assert_eq!(
        grouped["usages"],
        json!({"INSTANCE": {"VCPU": 3, "consumer_count": 1}})
    );
    assert_eq!(
        app.get("/placement/usages", Some("1.9")).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.get("/placement/usages?project_id=p1", Some("1.8"))
            .await
            .0,
        StatusCode::NOT_FOUND
    );

    // Providers and inventories in use are protected, with Placement's codes.
    let (status, body) = app
        .call(
            Method::DELETE,
            &format!("/placement/resource_providers/{rp}"),
            Some("1.39"),
            None,
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.resource_provider.inuse")
    );
    let (status, body) = app
        .call(
            Method::DELETE,
            &format!("/placement/resource_providers/{rp}/inventories/VCPU"),
            Some("1.39"),
            None,
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.concurrent_update")
    );
    let generation = app.generation(&rp).await;
    let body = json!({"resource_provider_generation": generation, "inventories": {"MEMORY_MB": {"total": 4096}}});
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("/placement/resource_providers/{rp}/inventories"),
            Some("1.39"),
            Some(body),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.inventory.inuse")
    );

    assert_eq!(
        app.call(
            Method::DELETE,
            &format!("/placement/allocations/{C1}"),
            Some("1.39"),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            &format!("/placement/allocations/{C1}"),
            Some("1.39"),
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (status, body) = app
        .get(&format!("/placement/allocations/{C1}"), Some("1.39"))
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({"allocations": {}})));
}

#[tokio::test]
async fn bad_allocations_are_refused_with_placement_codes() {
    let app = TestApp::spawn().await;
    let rp = provider_with(&app, "cn1", json!({"VCPU": {"total": 4, "max_unit": 2}, "MEMORY_MB": {"total": 1024, "step_size": 256}})).await;
    let missing = "99999999-0000-4000-8000-000000000000";
    let cases = [
        (
            dict(&rp, json!({"VCPU": 3}), Value::Null),
            StatusCode::CONFLICT,
            "placement.undefined_code",
        ),
        (
            dict(&rp, json!({"MEMORY_MB": 100}), Value::Null),
            StatusCode::CONFLICT,
            "placement.undefined_code",
        ),
        (
            dict(&rp, json!({"DISK_GB": 1}), Value::Null),
            StatusCode::CONFLICT,
            "placement.undefined_code",
        ),
        (
            dict(missing, json!({"VCPU": 1}), Value::Null),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            dict(&rp, json!({"VCPU": 0}), Value::Null),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            dict(&rp, json!({"VCPU": -1}), Value::Null),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            dict(&rp, json!({"VCPU": "1"}), Value::Null),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            dict("nope", json!({"VCPU": 1}), Value::Null),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            json!({"allocations": {}, "project_id": "p", "user_id": "u", "consumer_type": "X"}),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
    ];
    for (body, status, want) in cases {
        let (got, response) = put(&app, C1, "1.38", body.clone()).await;
        assert_eq!((got, code(&response)), (status, want), "{body}: {response}");
    }
    let (status, body) = put(&app, C1, "1.37", dict(&rp, json!({"VCPU": 1}), Value::Null)).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "consumer_type arrives in 1.38: {body}"
    );
    assert_eq!(
        put(&app, C1, "1.38", dict(&rp, json!({"VCPU": 2}), Value::Null))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        put(&app, C2, "1.38", dict(&rp, json!({"VCPU": 2}), Value::Null))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let (status, body) = put(&app, C3, "1.38", dict(&rp, json!({"VCPU": 1}), Value::Null)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(detail(&body).contains("exceed the capacity"), "{body}");
}

#[tokio::test]
async fn post_allocations_is_atomic_across_consumers() {
    let app = TestApp::spawn().await;
    let rp = provider_with(&app, "cn1", json!({"VCPU": {"total": 4}})).await;
    let batch = |a: u64, b: u64| {
        json!({
            C1: {"allocations": {&rp: {"resources": {"VCPU": a}}}, "project_id": "p", "user_id": "u", "consumer_generation": null, "consumer_type": "INSTANCE"},
            C2: {"allocations": {&rp: {"resources": {"VCPU": b}}}, "project_id": "p", "user_id": "u", "consumer_generation": null, "consumer_type": "MIGRATION"},
        })
    };
    let (status, _) = app
        .call(
            Method::POST,
            "/placement/allocations",
            Some("1.12"),
            Some(batch(1, 1)),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "POST arrives in 1.13");
    let (status, body) = app
        .call(
            Method::POST,
            "/placement/allocations",
            Some("1.38"),
            Some(batch(3, 2)),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (_, usages) = app
        .get(
            &format!("/placement/resource_providers/{rp}/usages"),
            Some("1.39"),
        )
        .await;
    assert_eq!(usages["usages"]["VCPU"], 0, "nothing was written");
    let (status, body) = app
        .call(
            Method::POST,
            "/placement/allocations",
            Some("1.38"),
            Some(batch(2, 2)),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, grouped) = app
        .get(
            "/placement/usages?project_id=p&consumer_type=MIGRATION",
            Some("1.38"),
        )
        .await;
    assert_eq!(
        grouped["usages"],
        json!({"MIGRATION": {"VCPU": 2, "consumer_count": 1}})
    );
    // An empty allocation set removes that consumer.
    let clear = json!({C2: {"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "MIGRATION"}});
    assert_eq!(
        app.call(
            Method::POST,
            "/placement/allocations",
            Some("1.38"),
            Some(clear)
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    let (_, usages) = app
        .get(
            &format!("/placement/resource_providers/{rp}/usages"),
            Some("1.39"),
        )
        .await;
    assert_eq!(usages["usages"]["VCPU"], 2);
}

#[tokio::test]
async fn reshaper_moves_inventory_and_allocations_together() {
    let app = TestApp::spawn().await;
    let root = provider_with(&app, "cn1", json!({"VCPU": {"total": 8}})).await;
    let numa = app.create_provider("cn1-numa0", Some(&root)).await;
    assert_eq!(
        put(
            &app,
            C1,
            "1.38",
            dict(&root, json!({"VCPU": 4}), Value::Null)
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    let root_generation = app.generation(&root).await;
    let body = json!({
        "inventories": {
            &root: {"resource_provider_generation": root_generation, "inventories": {}},
            &numa: {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        },
        "allocations": {C1: {"allocations": {&numa: {"resources": {"VCPU": 4}}}, "project_id": "p1", "user_id": "u1", "consumer_generation": 1, "consumer_type": "INSTANCE"}},
    });
    assert_eq!(
        app.call(
            Method::POST,
            "/placement/reshaper",
            Some("1.29"),
            Some(body.clone())
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (status, response) = app
        .call(
            Method::POST,
            "/placement/reshaper",
            Some("1.38"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{response}");
    let (_, shown) = app
        .get(&format!("/placement/allocations/{C1}"), Some("1.38"))
        .await;
    assert_eq!(shown["allocations"][&numa]["resources"]["VCPU"], 4);
    assert_eq!(shown["consumer_generation"], 2);
    let (status, response) = app
        .call(
            Method::POST,
            "/placement/reshaper",
            Some("1.38"),
            Some(body),
        )
        .await;
    assert_eq!(
        (status, code(&response)),
        (StatusCode::CONFLICT, "placement.concurrent_update"),
        "stale generations"
    );
    let unknown = json!({"inventories": {"99999999-0000-4000-8000-000000000000": {"resource_provider_generation": 0, "inventories": {}}}, "allocations": {}});
    let (status, response) = app
        .call(
            Method::POST,
            "/placement/reshaper",
            Some("1.38"),
            Some(unknown),
        )
        .await;
    assert_eq!(
        (status, code(&response)),
        (
            StatusCode::BAD_REQUEST,
            "placement.resource_provider.not_found"
        )
    );
}

#[tokio::test]
async fn racing_clients_never_over_commit_the_last_units() {
    let app = TestApp::spawn().await;
    race_for_the_last_units(&[&app]).await;
}

/// 64 allocations of one VCPU each for new consumers, sent at once to `apps` in turn, for a
/// provider of 10 VCPUs (made on the first): exactly 10 are admitted, and every one of `apps`
/// reads 10 used.
pub(crate) async fn race_for_the_last_units(apps: &[&TestApp]) {
    let rp = apps[0].create_provider("cn1", None).await;
    apps[0].set_inventory(&rp, 10, 1024).await;
    let tasks: Vec<_> = (0..64usize)
        .map(|n| {
            let app = apps[n % apps.len()];
            let client = app.client.clone();
            let url = format!(
                "{}/placement/allocations/{}",
                app.base,
                uuid::Uuid::from_u128(0xc000 + n as u128)
            );
            let body = dict(&rp, json!({"VCPU": 1}), Value::Null);
            tokio::spawn(async move {
                client
                    .put(url)
                    .header("OpenStack-API-Version", "placement 1.38")
                    .json(&body)
                    .send()
                    .await
                    .expect("send")
                    .status()
            })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        match task.await.expect("task") {
            StatusCode::NO_CONTENT => admitted += 1,
            StatusCode::CONFLICT => {}
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(admitted, 10, "exactly the capacity is admitted");
    for app in apps {
        let (_, usages) = app
            .get(
                &format!("/placement/resource_providers/{rp}/usages"),
                Some("1.39"),
            )
            .await;
        assert_eq!(usages["usages"]["VCPU"], 10);
    }
}
