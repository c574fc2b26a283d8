//! The server as a whole: discovery, health, metrics, OpenAPI, auth modes, restarts, demo data.

use crate::support::{Options, TestApp};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn discovery_health_metrics_and_openapi() {
    let app = TestApp::spawn().await;
    let (status, root) = app.get("/", None).await;
    assert_eq!(status, StatusCode::OK);
    let surfaces: Vec<&str> = root["surfaces"]
        .as_array()
        .expect("surfaces")
        .iter()
        .map(|s| s["path"].as_str().expect("path"))
        .collect();
    assert_eq!(
        surfaces,
        ["/placement", "/reservation/v1", "/promise", "/baremetal/v1"]
    );
    // Each surface's version discovery, where keystoneauth looks from a catalog entry.
    for (path, id) in [
        ("/placement", "v1.0"),
        ("/placement/", "v1.0"),
        ("/reservation", "v1.0"),
        ("/reservation/", "v1.0"),
        ("/baremetal", "v1"),
        ("/baremetal/", "v1"),
    ] {
        let (status, document) = app.get(path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(document["versions"][0]["id"], id, "{path}: {document}");
    }
    let (status, placement) = app.get("/placement", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(placement["versions"][0]["min_version"], "1.0");
    assert_eq!(placement["versions"][0]["max_version"], "1.39");
    for path in ["/baremetal/v1", "/baremetal/v1/"] {
        let (status, document) = app.get(path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(document["id"], "v1", "{path}: {document}");
    }
    let (status, health) = app.get("/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        health,
        json!({"live": true, "ready": true, "database": "sqlite"})
    );

    app.get("/placement/resource_providers", Some("1.39")).await;
    let metrics = app.metrics_text().await;
    assert!(metrics.contains("berth_http_requests_total"), "{metrics}");
    // One process over SQLite: current, no log kept, nothing applied, nothing reloaded.
    for line in [
        "berth_catalog_lag 0",
        "berth_change_log_applied_total 0",
        "berth_catalog_reloads_total 0",
        "berth_change_log_retained 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    assert!(
        metrics.contains("route=\"/placement/resource_providers\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("berth_http_request_duration_seconds_bucket"),
        "{metrics}"
    );

    let (status, spec) = app.get("/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    let paths = spec["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/placement/resource_providers", "post"),
        (
            "/placement/resource_providers/{uuid}/inventories/{resource_class}",
            "delete",
        ),
        ("/placement/resource_providers/{uuid}/aggregates", "put"),
        ("/placement/traits/{name}", "put"),
        ("/placement/resource_classes", "get"),
        ("/reservation/v1/os-hosts/{host_id}", "put"),
        ("/healthz", "get"),
    ] {
        assert!(
            paths.get(path).and_then(|item| item.get(method)).is_some(),
            "{method} {path} is documented"
        );
    }
}

/// Every `$ref` in `value`, recursively.
fn references(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                found.push(target.clone());
            }
            map.values().for_each(|v| references(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, found)),
        _ => {}
    }
}

/// The document describes a route's bodies with schemas generated from the wire types, and every
/// reference in it resolves to one of its components.
#[tokio::test]
async fn openapi_describes_bodies_with_schemas() {
    let app = TestApp::spawn().await;
    let (_, spec) = app.get("/openapi.json", None).await;
    let create = &spec["paths"]["/placement/resource_providers"]["post"];
    let request = create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .expect("a request schema");
    assert_eq!(request, "#/components/schemas/CreateResourceProvider");
    let schema = &spec["components"]["schemas"]["CreateResourceProvider"];
    assert_eq!(schema["required"], json!(["name"]));
    for field in ["name", "uuid", "parent_provider_uuid"] {
        assert!(
            schema["properties"].get(field).is_some(),
            "{field} in {schema}"
        );
    }
    assert_eq!(
        create["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ResourceProvider"
    );
    assert!(create["responses"]["201"].get("content").is_none());
    assert_eq!(
        create["responses"]["default"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/PlacementErrors"
    );
    let claim = &spec["paths"]["/baremetal/v1/reservations"]["post"]["responses"]["default"];
    assert_eq!(
        claim["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/IronicError"
    );
    let shown = &spec["components"]["schemas"]["ResourceProvider"]["properties"];
    for field in ["uuid", "name", "generation", "links"] {
        assert!(shown.get(field).is_some(), "{field} in {shown}");
    }
    let mut found = Vec::new();
    references(&spec, &mut found);
    assert!(!found.is_empty());
    for target in found {
        let name = target
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{target} points into the components"));
        assert!(
            spec["components"]["schemas"].get(name).is_some(),
            "{target} resolves"
        );
    }
}

/// Writes that take no body by design.
const BODYLESS_WRITES: &[&str] = &[
    "put /placement/resource_classes/{name}",
    "put /placement/traits/{name}",
    "post /promise/deliveries/{notification_id}/retry",
];

/// Every route documents its answers, and every route that takes a JSON body documents it.
#[tokio::test]
async fn openapi_describes_every_route() {
    let app = TestApp::spawn().await;
    let (_, spec) = app.get("/openapi.json", None).await;
    let mut undocumented = Vec::new();
    let mut bodiless = Vec::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("operations") {
            let route = format!("{method} {path}");
            let answers = operation["responses"].as_object().expect("responses");
            if !answers.keys().any(|status| status.starts_with(['2', '3'])) {
                undocumented.push(route.clone());
            }
            let takes_body = matches!(method.as_str(), "post" | "put" | "patch");
            if takes_body
                && operation.get("requestBody").is_none()
                && !BODYLESS_WRITES.contains(&route.as_str())
            {
                bodiless.push(route);
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "routes without documented answers: {undocumented:#?}"
    );
    assert!(
        bodiless.is_empty(),
        "request bodies not described: {bodiless:#?}"
    );
}

fn token_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("tokens.toml");
    let text = "[[tokens]]\ntoken = \"admin-secret\"\nproject_id = \"ops\"\nuser_id = \"root\"\nroles = [\"admin\"]\n\n\
                [[tokens]]\ntoken = \"member-secret\"\nproject_id = \"p1\"\nuser_id = \"alice\"\nroles = [\"member\"]\n";
    std::fs::write(&path, text).expect("write tokens");
    path
}

#[tokio::test]
async fn token_mode_authenticates_and_admin_policy_applies() {
    let dir = tempfile::tempdir().expect("dir");
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Token),
        tokens: Some(token_file(&dir)),
        ..Options::default()
    })
    .await;
    let (status, body) = app.get("/placement/resource_providers", Some("1.39")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body["errors"][0]["status"], 401,
        "Placement error format: {body}"
    );
    let send = |token: &'static str, method: Method, path: &'static str| {
        app.request(method, path, Some("1.39"))
            .header("x-auth-token", token)
            .json(&json!({"name": "cn1"}))
            .send()
    };
    assert_eq!(
        send("wrong", Method::GET, "/placement/resource_providers")
            .await
            .expect("send")
            .status(),
        StatusCode::UNAUTHORIZED
    );
    let forbidden = send(
        "member-secret",
        Method::POST,
        "/placement/resource_providers",
    )
    .await
    .expect("send");
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
    let body: serde_json::Value = forbidden.json().await.expect("json");
    assert_eq!(body["errors"][0]["status"], 403);
    let forbidden = send("member-secret", Method::GET, "/reservation/v1/os-hosts")
        .await
        .expect("send");
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
    let body: serde_json::Value = forbidden.json().await.expect("json");
    assert_eq!(body["error_code"], 403, "Blazar error format: {body}");
    assert_eq!(
        send(
            "admin-secret",
            Method::POST,
            "/placement/resource_providers"
        )
        .await
        .expect("send")
        .status(),
        StatusCode::OK
    );
    // Discovery and health need no token.
    assert_eq!(app.get("/placement/", None).await.0, StatusCode::OK);
    assert_eq!(app.get("/healthz", None).await.0, StatusCode::OK);
}

#[tokio::test]
async fn headers_mode_trusts_keystonemiddleware() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let get = |roles: &'static str| {
        app.request(Method::GET, "/placement/resource_providers", Some("1.39"))
            .header("x-project-id", "p1")
            .header("x-user-id", "u1")
            .header("x-roles", roles)
            .send()
    };
    assert_eq!(get("admin").await.expect("send").status(), StatusCode::OK);
    assert_eq!(
        get("reader,member").await.expect("send").status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.get("/placement/resource_providers", Some("1.39"))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn noauth_ignores_the_token_clients_send() {
    let app = TestApp::spawn().await;
    let response = app
        .request(Method::GET, "/reservation/v1/os-hosts", None)
        .header("x-auth-token", "notused")
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_restart_keeps_everything() {
    let app = TestApp::spawn().await;
    let uuid = app.create_provider("cn1", None).await;
    app.set_inventory(&uuid, 8, 1024).await;
    let (_, created) = app
        .call(
            Method::POST,
            "/reservation/v1/os-hosts",
            None,
            Some(json!({"name": "h1", "vcpus": 4, "gpu": true})),
        )
        .await;
    let (dir, database) = app.stop().await;
    let app = TestApp::spawn_with(Options {
        database: Some(database),
        ..Options::default()
    })
    .await;
    let (status, body) = app
        .get(
            &format!("/placement/resource_providers/{uuid}/inventories"),
            Some("1.39"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["inventories"]["VCPU"]["total"], 8);
    assert_eq!(body["resource_provider_generation"], 1);
    let id = created["host"]["id"].as_str().expect("id");
    let (status, host) = app
        .get(&format!("/reservation/v1/os-hosts/{id}"), None)
        .await;
    assert_eq!(
        (status, host["host"]["gpu"].clone()),
        (StatusCode::OK, json!(true))
    );
    drop(dir);
}

#[tokio::test]
async fn demo_inventory_is_seeded_once() {
    let app = TestApp::spawn_with(Options {
        demo: true,
        ..Options::default()
    })
    .await;
    let (_, hosts) = app.get("/reservation/v1/os-hosts", None).await;
    let hosts = hosts["hosts"].as_array().expect("hosts").clone();
    // Sixty compute hosts and eight bare-metal nodes (reservable like hosts).
    assert_eq!(hosts.len(), 68);
    let nodes = hosts
        .iter()
        .filter(|h| h["hypervisor_type"] == "ironic")
        .count();
    assert_eq!(nodes, 8);
    let zones: std::collections::BTreeSet<&str> = hosts
        .iter()
        .filter_map(|h| h["availability_zone"].as_str())
        .collect();
    assert_eq!(zones.len(), 3);
    let (_, providers) = app.get("/placement/resource_providers", Some("1.39")).await;
    let count = providers["resource_providers"]
        .as_array()
        .expect("providers")
        .len();
    let (_, nested) = app
        .get(
            "/placement/resource_providers?resources=PCPU:1",
            Some("1.39"),
        )
        .await;
    assert!(
        !nested["resource_providers"]
            .as_array()
            .expect("numa")
            .is_empty(),
        "NUMA children exist"
    );
    let (_, nodes) = app
        .get(
            "/placement/resource_providers?resources=CUSTOM_BAREMETAL_GOLD:1",
            Some("1.39"),
        )
        .await;
    assert_eq!(
        nodes["resource_providers"].as_array().expect("nodes").len(),
        8
    );
    let (dir, database) = app.stop().await;
    let again = TestApp::spawn_with(Options {
        database: Some(database),
        demo: true,
        ..Options::default()
    })
    .await;
    let (_, providers) = again
        .get("/placement/resource_providers", Some("1.39"))
        .await;
    assert_eq!(
        providers["resource_providers"]
            .as_array()
            .expect("providers")
            .len(),
        count,
        "a second --demo changes nothing"
    );
    drop(dir);
}
