//! Placement: traits, resource classes and aggregates.

use crate::support::{TestApp, code};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn traits_catalogue_and_provider_traits() {
    let app = TestApp::spawn().await;
    let (status, body) = app.get("/placement/traits", Some("1.6")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["traits"].as_array().expect("traits").len() >= 377);
    assert_eq!(
        app.call(
            Method::PUT,
            "/placement/traits/CUSTOM_FAST",
            Some("1.6"),
            None
        )
        .await
        .0,
        StatusCode::CREATED
    );
    assert_eq!(
        app.call(
            Method::PUT,
            "/placement/traits/CUSTOM_FAST",
            Some("1.6"),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.call(Method::PUT, "/placement/traits/FAST", Some("1.6"), None)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.call(
            Method::PUT,
            "/placement/traits/CUSTOM_fast",
            Some("1.6"),
            None
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.get("/placement/traits/CUSTOM_FAST", Some("1.6"))
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/placement/traits/CUSTOM_SLOW", Some("1.6"))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (_, body) = app
        .get("/placement/traits?name=startswith:CUSTOM_", Some("1.6"))
        .await;
    assert_eq!(body["traits"], json!(["CUSTOM_FAST"]));
    let (_, body) = app
        .get(
            "/placement/traits?name=in:CUSTOM_FAST,HW_CPU_X86_AVX2",
            Some("1.6"),
        )
        .await;
    assert_eq!(body["traits"], json!(["CUSTOM_FAST", "HW_CPU_X86_AVX2"]));
    assert_eq!(
        app.get("/placement/traits?name=CUSTOM_FAST", Some("1.6"))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );

    let uuid = app.create_provider("cn1", None).await;
    let path = format!("/placement/resource_providers/{uuid}/traits");
    let (status, body) = app.call(Method::PUT, &path, Some("1.6"), Some(json!({"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX2"], "resource_provider_generation": 0}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["resource_provider_generation"], 1);
    let (status, body) = app
        .call(
            Method::PUT,
            &path,
            Some("1.39"),
            Some(json!({"traits": [], "resource_provider_generation": 0})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.concurrent_update")
    );
    let (status, _) = app
        .call(
            Method::PUT,
            &path,
            Some("1.6"),
            Some(json!({"traits": ["CUSTOM_NOPE"], "resource_provider_generation": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, body) = app
        .get("/placement/traits?associated=true", Some("1.6"))
        .await;
    assert_eq!(body["traits"], json!(["CUSTOM_FAST", "HW_CPU_X86_AVX2"]));
    assert_eq!(
        app.call(
            Method::DELETE,
            "/placement/traits/CUSTOM_FAST",
            Some("1.6"),
            None
        )
        .await
        .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            "/placement/traits/HW_CPU_X86_AVX2",
            Some("1.6"),
            None
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.call(Method::DELETE, &path, Some("1.6"), None).await.0,
        StatusCode::NO_CONTENT
    );
    let (_, body) = app.get(&path, Some("1.6")).await;
    assert_eq!(body["traits"], json!([]));
    assert_eq!(
        app.call(
            Method::DELETE,
            "/placement/traits/CUSTOM_FAST",
            Some("1.6"),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            "/placement/traits/CUSTOM_FAST",
            Some("1.6"),
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn resource_classes() {
    let app = TestApp::spawn().await;
    let (status, body) = app.get("/placement/resource_classes", Some("1.2")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["resource_classes"].as_array().expect("classes").len(),
        21
    );
    let create = |name: &str| {
        app.call(
            Method::POST,
            "/placement/resource_classes",
            Some("1.2"),
            Some(json!({"name": name})),
        )
    };
    assert_eq!(create("CUSTOM_GOLD").await.0, StatusCode::CREATED);
    assert_eq!(create("CUSTOM_GOLD").await.0, StatusCode::CONFLICT);
    assert_eq!(create("GOLD").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(create("CUSTOM_gold").await.0, StatusCode::BAD_REQUEST);
    let (status, body) = app
        .get("/placement/resource_classes/CUSTOM_GOLD", Some("1.2"))
        .await;
    assert_eq!(
        (status, body["name"].as_str()),
        (StatusCode::OK, Some("CUSTOM_GOLD"))
    );
    assert_eq!(
        app.get("/placement/resource_classes/CUSTOM_NONE", Some("1.2"))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.call(
            Method::PUT,
            "/placement/resource_classes/CUSTOM_SILVER",
            Some("1.7"),
            None
        )
        .await
        .0,
        StatusCode::CREATED
    );
    assert_eq!(
        app.call(
            Method::PUT,
            "/placement/resource_classes/CUSTOM_SILVER",
            Some("1.7"),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.call(
            Method::PUT,
            "/placement/resource_classes/VCPU",
            Some("1.7"),
            None
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );

    let uuid = app.create_provider("cn1", None).await;
    let body =
        json!({"resource_provider_generation": 0, "inventories": {"CUSTOM_GOLD": {"total": 1}}});
    let path = format!("/placement/resource_providers/{uuid}/inventories");
    assert_eq!(
        app.call(Method::PUT, &path, Some("1.39"), Some(body))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            "/placement/resource_classes/CUSTOM_GOLD",
            Some("1.2"),
            None
        )
        .await
        .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            "/placement/resource_classes/VCPU",
            Some("1.2"),
            None
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.call(
            Method::DELETE,
            "/placement/resource_classes/CUSTOM_SILVER",
            Some("1.2"),
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn aggregates_by_microversion() {
    let app = TestApp::spawn().await;
    let uuid = app.create_provider("cn1", None).await;
    let path = format!("/placement/resource_providers/{uuid}/aggregates");
    let agg = "aaaaaaaa-0000-4000-8000-000000000001";
    let (status, body) = app
        .call(Method::PUT, &path, Some("1.1"), Some(json!([agg])))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"aggregates": [agg]}));
    let (status, body) = app.get(&path, Some("1.19")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["resource_provider_generation"], 1);
    let (status, body) = app
        .call(
            Method::PUT,
            &path,
            Some("1.23"),
            Some(json!({"aggregates": [], "resource_provider_generation": 0})),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.concurrent_update")
    );
    let (status, _) = app
        .call(Method::PUT, &path, Some("1.19"), Some(json!([agg])))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "1.19 needs the generation");
    let (status, _) = app
        .call(
            Method::PUT,
            &path,
            Some("1.19"),
            Some(json!({"aggregates": ["nope"], "resource_provider_generation": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = app
        .call(
            Method::PUT,
            &path,
            Some("1.19"),
            Some(json!({"aggregates": [], "resource_provider_generation": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["aggregates"], json!([]));
}
