//! Placement: inventories, usages and generations.

use crate::support::{TestApp, code};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn put_all(
    app: &TestApp,
    uuid: &str,
    mv: &str,
    generation: u64,
    inventories: Value,
) -> (StatusCode, Value) {
    let body = json!({"resource_provider_generation": generation, "inventories": inventories});
    app.call(
        Method::PUT,
        &format!("/placement/resource_providers/{uuid}/inventories"),
        Some(mv),
        Some(body),
    )
    .await
}

#[tokio::test]
async fn inventories_take_defaults_and_bump_the_generation() {
    let app = TestApp::spawn().await;
    let uuid = app.create_provider("cn1", None).await;
    let (status, body) = put_all(&app, &uuid, "1.39", 0, json!({"VCPU": {"total": 8, "allocation_ratio": 4.0}, "MEMORY_MB": {"total": 16384, "step_size": 256}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resource_provider_generation"], 1);
    assert_eq!(
        body["inventories"]["VCPU"],
        json!({"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 2147483647, "step_size": 1, "allocation_ratio": 4.0})
    );
    let (status, body) = put_all(&app, &uuid, "1.39", 0, json!({"VCPU": {"total": 16}})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.concurrent_update")
    );

    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{uuid}/usages"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["usages"],
        json!({"MEMORY_MB": 0, "VCPU": 0}),
        "every class has a usage entry"
    );
    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{uuid}/allocations"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["allocations"], json!({}));
}

#[tokio::test]
async fn bad_inventories_are_refused_whole() {
    let app = TestApp::spawn().await;
    let uuid = app.create_provider("cn1", None).await;
    assert_eq!(
        put_all(&app, &uuid, "1.39", 0, json!({"VCPU": {"total": 4}}))
            .await
            .0,
        StatusCode::OK
    );
    let cases = [
        json!({"VCPU": {"total": 4, "reserved": 5}}),
        json!({"VCPU": {"total": 4, "min_unit": 3, "max_unit": 2}}),
        json!({"VCPU": {"total": 4, "step_size": 0}}),
        json!({"VCPU": {"total": 0}}),
        json!({"VCPU": {"total": -1}}),
        json!({"VCPU": {"total": 2147483648_i64}}),
        json!({"VCPU": {"total": "8"}}),
        json!({"VCPU": {"total": 8, "colour": 1}}),
        json!({"VCPU": {"total": 8, "allocation_ratio": 0}}),
        json!({"CUSTOM_NOPE": {"total": 8}}),
        json!({"lower_case": {"total": 8}}),
        json!({"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8, "reserved": 9}}),
    ];
    for inventories in cases {
        let (status, body) = put_all(&app, &uuid, "1.39", 1, inventories.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{inventories}: {body}");
    }
    let (status, body) = put_all(
        &app,
        &uuid,
        "1.25",
        1,
        json!({"VCPU": {"total": 4, "reserved": 4}}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "reserved == total needs 1.26: {body}"
    );
    let (_, body) = app
        .get(
            &format!("/placement/resource_providers/{uuid}/inventories"),
            Some("1.39"),
        )
        .await;
    assert_eq!(body["resource_provider_generation"], 1, "no partial write");
    assert_eq!(
        body["inventories"],
        json!({"VCPU": {"total": 4, "reserved": 0, "min_unit": 1, "max_unit": 2147483647, "step_size": 1, "allocation_ratio": 1.0}})
    );
    let (status, _) = put_all(
        &app,
        &uuid,
        "1.26",
        1,
        json!({"VCPU": {"total": 4, "reserved": 4}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn single_inventory_routes() {
    let app = TestApp::spawn().await;
    let uuid = app.create_provider("cn1", None).await;
    let base = format!("/placement/resource_providers/{uuid}/inventories");
    let response = app
        .request(Method::POST, &base, Some("1.39"))
        .json(&json!({"resource_class": "DISK_GB", "total": 100, "reserved": 10}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(
        response.headers()["location"]
            .to_str()
            .expect("ascii")
            .ends_with(&format!("{base}/DISK_GB"))
    );
    let (status, _) = app
        .call(
            Method::POST,
            &base,
            Some("1.39"),
            Some(json!({"resource_class": "DISK_GB", "total": 5})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);

    let (status, body) = app.get(&format!("{base}/DISK_GB"), Some("1.39")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (body["total"].as_u64(), body["reserved"].as_u64()),
        (Some(100), Some(10))
    );
    let generation = body["resource_provider_generation"]
        .as_u64()
        .expect("generation");
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("{base}/DISK_GB"),
            Some("1.39"),
            Some(json!({"resource_provider_generation": generation, "total": 200})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["total"], 200);
    let (status, _) = app
        .call(
            Method::PUT,
            &format!("{base}/VCPU"),
            Some("1.39"),
            Some(json!({"resource_provider_generation": generation + 1, "total": 2})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "updating an absent record is a 400 in Placement"
    );
    let (status, _) = app.get(&format!("{base}/VCPU"), Some("1.39")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .call(Method::DELETE, &format!("{base}/VCPU"), Some("1.39"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("{base}/DISK_GB"),
            Some("1.39"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    app.set_inventory(&uuid, 8, 1024).await;
    let (status, _) = app.call(Method::DELETE, &base, Some("1.4"), None).await;
    assert_eq!(
        status,
        StatusCode::METHOD_NOT_ALLOWED,
        "deleting all inventories needs 1.5"
    );
    let (status, _) = app.call(Method::DELETE, &base, Some("1.5"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, body) = app.get(&base, Some("1.39")).await;
    assert_eq!(body["inventories"], json!({}));
}
