//! Placement: versions, negotiation, and `/resource_providers`.

use crate::support::{TestApp, code, detail};
use reqwest::{Method, StatusCode};
use serde_json::json;

const A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

#[tokio::test]
async fn version_document_and_negotiation() {
    let app = TestApp::spawn().await;
    for path in ["/placement", "/placement/"] {
        let (status, body) = app.get(path, None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["versions"][0]["max_version"], "1.39");
        assert_eq!(body["versions"][0]["min_version"], "1.0");
    }
    let response = app
        .request(Method::GET, "/placement/resource_providers", None)
        .send()
        .await
        .expect("send");
    assert_eq!(response.headers()["openstack-api-version"], "placement 1.0");
    assert_eq!(response.headers()["vary"], "openstack-api-version");
    let response = app
        .request(Method::GET, "/placement/resource_providers", Some("latest"))
        .send()
        .await
        .expect("send");
    assert_eq!(
        response.headers()["openstack-api-version"],
        "placement 1.39"
    );
    assert!(response.headers().get("x-openstack-request-id").is_some());

    let (status, body) = app.get("/placement/resource_providers", Some("1.40")).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(body["errors"][0]["max_version"], "1.39");
    assert_eq!(body["errors"][0]["min_version"], "1.0");
    let (status, _) = app.get("/placement/resource_providers", Some("2.0")).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    let (status, body) = app
        .get("/placement/resource_providers", Some("one.two"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["errors"][0]["request_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("req-"))
    );
}

#[tokio::test]
async fn create_answers_by_microversion_with_an_absolute_location() {
    let app = TestApp::spawn().await;
    let response = app
        .request(Method::POST, "/placement/resource_providers", Some("1.19"))
        .json(&json!({"name": "cn-old"}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::CREATED);
    let location = response.headers()["location"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        location.starts_with(&format!("{}/placement/resource_providers/", app.base)),
        "{location}"
    );
    assert!(response.text().await.expect("body").is_empty());
    let path = location.trim_start_matches(&app.base).to_owned();
    let (status, body) = app.get(&path, Some("1.14")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["name"], "cn-old");
    assert_eq!(body["parent_provider_uuid"], serde_json::Value::Null);
    assert_eq!(body["root_provider_uuid"], body["uuid"]);

    let (status, body) = app
        .call(
            Method::POST,
            "/placement/resource_providers",
            Some("1.20"),
            Some(json!({"name": "cn-new", "uuid": "1111111122223333444455555555555a"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["uuid"], "11111111-2222-3333-4444-55555555555a",
        "dashless uuids are normalised"
    );
    assert_eq!(body["generation"], 0);
    let rels: Vec<&str> = body["links"]
        .as_array()
        .expect("links")
        .iter()
        .map(|l| l["rel"].as_str().expect("rel"))
        .collect();
    assert_eq!(
        rels,
        [
            "self",
            "inventories",
            "usages",
            "aggregates",
            "traits",
            "allocations"
        ]
    );
}

#[tokio::test]
async fn bad_provider_input_is_refused_without_a_write() {
    let app = TestApp::spawn().await;
    let existing = app.create_provider("cn1", None).await;
    let post = |body: serde_json::Value| {
        app.call(
            Method::POST,
            "/placement/resource_providers",
            Some("1.39"),
            Some(body),
        )
    };
    let cases = [
        (
            json!({"name": "cn1"}),
            StatusCode::CONFLICT,
            "placement.duplicate_name",
        ),
        (
            json!({"name": "other", "uuid": existing}),
            StatusCode::CONFLICT,
            "placement.duplicate_name",
        ),
        (
            json!({"name": "x", "uuid": "not-a-uuid"}),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            json!({"name": "x", "colour": "red"}),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            json!({"name": 42}),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            json!({"name": ""}),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            json!({"name": "n".repeat(201)}),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
        (
            json!({"name": "x", "parent_provider_uuid": A}),
            StatusCode::BAD_REQUEST,
            "placement.undefined_code",
        ),
    ];
    for (body, status, want_code) in cases {
        let (got, response) = post(body.clone()).await;
        assert_eq!(got, status, "{body} -> {response}");
        assert_eq!(code(&response), want_code, "{body}");
        assert!(!detail(&response).is_empty());
    }
    let (status, _) = app
        .call(
            Method::POST,
            "/placement/resource_providers",
            Some("1.13"),
            Some(json!({"name": "x", "parent_provider_uuid": existing})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "parents need 1.14");
    let malformed = app
        .request(Method::POST, "/placement/resource_providers", Some("1.39"))
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .expect("send");
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let untyped = app
        .request(Method::POST, "/placement/resource_providers", Some("1.39"))
        .header("content-type", "text/plain")
        .body("{\"name\": \"x\"}")
        .send()
        .await
        .expect("send");
    assert_eq!(untyped.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let huge = app
        .request(Method::POST, "/placement/resource_providers", Some("1.39"))
        .header("content-type", "application/json")
        .body(format!("{{\"name\": \"{}\"}}", "x".repeat(2 * 1024 * 1024)))
        .send()
        .await
        .expect("send");
    assert_eq!(huge.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let (_, list) = app.get("/placement/resource_providers", Some("1.39")).await;
    assert_eq!(
        list["resource_providers"].as_array().expect("list").len(),
        1,
        "nothing was written"
    );
}

#[tokio::test]
async fn trees_refuse_cycles_and_reparenting_is_gated() {
    let app = TestApp::spawn().await;
    let root = app.create_provider("cn1", None).await;
    let numa = app.create_provider("cn1-numa0", Some(&root)).await;
    let other = app.create_provider("cn2", None).await;
    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{numa}"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["root_provider_uuid"], root);
    assert_eq!(body["parent_provider_uuid"], root);
    let app = &app;
    let put = |uuid: String, mv: &'static str, body: serde_json::Value| {
        let path = format!("/placement/resource_providers/{uuid}");
        async move { app.call(Method::PUT, &path, Some(mv), Some(body)).await }
    };
    let (status, _) = put(
        root.clone(),
        "1.39",
        json!({"name": "cn1", "parent_provider_uuid": numa}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a cycle");
    let (status, _) = put(
        numa.clone(),
        "1.36",
        json!({"name": "cn1-numa0", "parent_provider_uuid": other}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "re-parenting needs 1.37");
    let (status, body) = put(
        numa.clone(),
        "1.37",
        json!({"name": "moved", "parent_provider_uuid": other}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["root_provider_uuid"], other);
    assert_eq!(body["name"], "moved");
    let (status, body) = put(root.clone(), "1.39", json!({"name": "cn2"})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "placement.duplicate_name")
    );

    let (status, body) = app
        .call(
            Method::DELETE,
            &format!("/placement/resource_providers/{other}"),
            Some("1.39"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        code(&body),
        "placement.resource_provider.cannot_delete_parent"
    );
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/placement/resource_providers/{numa}"),
            Some("1.39"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{numa}"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(detail(&body).contains("No resource provider with uuid"));
}

async fn names(app: &TestApp, query: &str, mv: &str) -> Vec<String> {
    let (status, body) = app
        .get(&format!("/placement/resource_providers?{query}"), Some(mv))
        .await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    let mut names: Vec<String> = body["resource_providers"]
        .as_array()
        .expect("list")
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn list_filters_follow_placement() {
    let app = TestApp::spawn().await;
    let mut uuids = Vec::new();
    for (idx, vcpus) in [8u64, 8, 8, 1].into_iter().enumerate() {
        let uuid = app.create_provider(&format!("cn{}", idx + 1), None).await;
        app.set_inventory(&uuid, vcpus, 4096).await;
        uuids.push(uuid);
    }
    for (uuid, aggregate) in [(&uuids[0], A), (&uuids[1], B)] {
        let generation = app.generation(uuid).await;
        let body = json!({"aggregates": [aggregate], "resource_provider_generation": generation});
        let path = format!("/placement/resource_providers/{uuid}/aggregates");
        assert_eq!(
            app.call(Method::PUT, &path, Some("1.39"), Some(body))
                .await
                .0,
            StatusCode::OK
        );
    }
    let generation = app.generation(&uuids[2]).await;
    let body = json!({"traits": ["HW_CPU_X86_AVX2"], "resource_provider_generation": generation});
    let path = format!("/placement/resource_providers/{}/traits", uuids[2]);
    assert_eq!(
        app.call(Method::PUT, &path, Some("1.39"), Some(body))
            .await
            .0,
        StatusCode::OK
    );
    let child = app.create_provider("cn3-numa", Some(&uuids[2])).await;

    assert_eq!(
        names(&app, "resources=VCPU:2,MEMORY_MB:2048", "1.39").await,
        ["cn1", "cn2", "cn3"]
    );
    assert_eq!(
        names(
            &app,
            &format!("resources=VCPU:2&member_of=!in:{A},{B}"),
            "1.39"
        )
        .await,
        ["cn3"]
    );
    assert_eq!(
        names(&app, &format!("member_of=!{A}"), "1.39").await,
        ["cn2", "cn3", "cn3-numa", "cn4"]
    );
    assert_eq!(
        names(&app, &format!("member_of=in:{A},{B}"), "1.3").await,
        ["cn1", "cn2"]
    );
    assert_eq!(
        names(&app, &format!("member_of={A}&member_of={B}"), "1.24").await,
        Vec::<String>::new()
    );
    assert_eq!(
        names(&app, "required=HW_CPU_X86_AVX2", "1.18").await,
        ["cn3"]
    );
    assert_eq!(
        names(&app, "required=!HW_CPU_X86_AVX2&resources=VCPU:1", "1.22").await,
        ["cn1", "cn2", "cn4"]
    );
    assert_eq!(
        names(&app, &format!("in_tree={child}"), "1.14").await,
        ["cn3", "cn3-numa"]
    );
    assert_eq!(
        names(&app, "in_tree=99999999-0000-4000-8000-000000000000", "1.14").await,
        Vec::<String>::new()
    );
    assert_eq!(names(&app, "name=cn2", "1.0").await, ["cn2"]);
    assert_eq!(
        names(&app, &format!("uuid={}", uuids[3]), "1.0").await,
        ["cn4"]
    );

    let refused = [
        (format!("member_of=!{A}"), "1.31"),
        (format!("member_of=in:{A},!{B}"), "1.39"),
        (format!("member_of={A},{B}"), "1.39"),
        (format!("member_of={A}&member_of={B}"), "1.23"),
        ("member_of=nonsense".to_owned(), "1.39"),
        ("resources=VCPU:2".to_owned(), "1.3"),
        ("resources=VCPU".to_owned(), "1.39"),
        ("resources=VCPU:0".to_owned(), "1.39"),
        ("resources=CUSTOM_NOPE:1".to_owned(), "1.39"),
        ("required=CUSTOM_NOPE".to_owned(), "1.39"),
        (
            "required=HW_CPU_X86_AVX2,!HW_CPU_X86_AVX2".to_owned(),
            "1.39",
        ),
        ("in_tree=bad".to_owned(), "1.39"),
        ("colour=red".to_owned(), "1.39"),
    ];
    for (query, mv) in refused {
        let (status, body) = app
            .get(&format!("/placement/resource_providers?{query}"), Some(mv))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query} at {mv}: {body}");
        assert!(!detail(&body).is_empty());
    }
}

#[tokio::test]
async fn methods_and_versions_gate_routes() {
    let app = TestApp::spawn().await;
    let uuid = app.create_provider("cn1", None).await;
    let response = app
        .request(Method::PATCH, "/placement/resource_providers", Some("1.39"))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let allow = response.headers()["allow"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    let body: serde_json::Value = response.json().await.expect("json body");
    assert_eq!(body["errors"][0]["status"], 405);
    let (status, _) = app
        .get(
            &format!("/placement/resource_providers/{uuid}/traits"),
            Some("1.5"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "traits arrive in 1.6");
    let (status, _) = app
        .get(
            &format!("/placement/resource_providers/{uuid}/aggregates"),
            Some("1.0"),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "aggregates arrive in 1.1");
    let (status, _) = app.get("/placement/resource_classes", Some("1.1")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = app.get("/placement/no_such_thing", Some("1.39")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["errors"][0]["status"], 404);
    let response = app
        .request(
            Method::GET,
            &format!("/placement/resource_providers/{uuid}"),
            Some("1.15"),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(response.headers()["cache-control"], "no-cache");
    assert!(response.headers().get("last-modified").is_some());
    let response = app
        .request(
            Method::GET,
            &format!("/placement/resource_providers/{uuid}"),
            Some("1.14"),
        )
        .send()
        .await
        .expect("send");
    assert!(response.headers().get("last-modified").is_none());
    let (_, body) = app
        .get(
            &format!("/placement/resource_providers/{uuid}"),
            Some("1.22"),
        )
        .await;
    assert!(body["errors"].is_null());
    let (_, body) = app
        .get("/placement/resource_providers?colour=1", Some("1.22"))
        .await;
    assert!(
        body["errors"][0].get("code").is_none(),
        "codes arrive in 1.23"
    );
}
