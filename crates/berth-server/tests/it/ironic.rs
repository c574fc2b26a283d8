//! The bare-metal API in Ironic's dialect, end to end: every error in Ironic's envelope; the
//! microversion headers, `latest`, 406 and 400; the version roots; allocations (the first
//! eligible node of a class with its traits and among its candidates, `error` when none fits,
//! listing with filters and pages, show by uuid or name, JSON Patch of name and extra, delete,
//! a node's allocation, backfilling a deployed node) and every bad input; 32 clients racing
//! for the last eligible node, of which exactly one wins; and who may do what to allocations.

use crate::baremetal::{CLAIMS, NODES};
use crate::support::{Options, TestApp, Who};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const ALLOCATIONS: &str = "/baremetal/v1/allocations";
const VERSION: &str = "x-openstack-ironic-api-version";
const MINIMUM: &str = "x-openstack-ironic-api-minimum-version";
const MAXIMUM: &str = "x-openstack-ironic-api-maximum-version";

const ADMIN: Who<'static> = Who {
    project: "ops",
    user: "root",
    roles: "admin",
};
const P1: Who<'static> = Who {
    project: "p1",
    user: "alice",
    roles: "member",
};
const P2: Who<'static> = Who {
    project: "p2",
    user: "mallory",
    roles: "member",
};
const READER: Who<'static> = Who {
    project: "p1",
    user: "rita",
    roles: "reader",
};
const NO_ROLE: Who<'static> = Who {
    project: "p1",
    user: "nemo",
    roles: "",
};

/// A request at Ironic microversion `version` (`None`: no header), as `who` (`None`: no
/// identity headers); returns status, headers and body.
async fn send(
    app: &TestApp,
    who: Option<Who<'_>>,
    version: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let mut builder = app.request(method, path, None);
    if let Some(version) = version {
        builder = builder.header("X-OpenStack-Ironic-API-Version", version);
    }
    if let Some(who) = who {
        builder = builder
            .header("x-project-id", who.project)
            .header("x-user-id", who.user)
            .header("x-roles", who.roles);
    }
    if let Some(body) = body {
        builder = builder.json(&body);
    }
    let response = builder.send().await.expect("send");
    let headers = response.headers().clone();
    let (status, body) = crate::support::parse(response).await;
    (status, headers, body)
}

/// A request at the highest version, as `who`.
async fn call(
    app: &TestApp,
    who: Option<Who<'_>>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (status, _, body) = send(app, who, Some("latest"), method, path, body).await;
    (status, body)
}

/// Ironic's fault, decoded from its envelope: exactly `error_message`, a JSON-encoded string.
fn fault(body: &Value) -> Value {
    let text = body["error_message"]
        .as_str()
        .unwrap_or_else(|| panic!("an Ironic error body: {body}"));
    serde_json::from_str(text).expect("error_message is JSON")
}

async fn enroll(
    app: &TestApp,
    who: Option<Who<'_>>,
    name: &str,
    class: &str,
    traits: &[&str],
) -> String {
    let body = json!({"name": name, "resource_class": class, "provision_state": "available",
                      "traits": traits, "driver": "fake-hardware"});
    let (status, node) = call(app, who, Method::POST, NODES, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    node["uuid"].as_str().expect("uuid").to_owned()
}

#[tokio::test]
async fn errors_answer_in_ironics_envelope() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let missing = format!("{NODES}/{}", uuid::Uuid::from_u128(7));
    let cases = [
        (
            None,
            Method::GET,
            missing.clone(),
            None,
            StatusCode::UNAUTHORIZED,
        ),
        (
            Some(P1),
            Method::POST,
            NODES.to_owned(),
            Some(json!({})),
            StatusCode::FORBIDDEN,
        ),
        (
            Some(ADMIN),
            Method::GET,
            missing,
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Some(ADMIN),
            Method::PUT,
            NODES.to_owned(),
            Some(json!({})),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Some(ADMIN),
            Method::POST,
            NODES.to_owned(),
            Some(json!({"name": "x"})),
            StatusCode::BAD_REQUEST,
        ),
        (
            Some(ADMIN),
            Method::GET,
            format!("{ALLOCATIONS}/nothing"),
            None,
            StatusCode::NOT_FOUND,
        ),
    ];
    for (who, method, path, body, expected) in cases {
        let mut builder = app
            .request(method.clone(), &path, None)
            .header("X-OpenStack-Ironic-API-Version", "latest");
        if let Some(who) = who {
            builder = builder
                .header("x-project-id", who.project)
                .header("x-user-id", who.user)
                .header("x-roles", who.roles);
        }
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        let response = builder.send().await.expect("send");
        assert_eq!(response.status(), expected, "{method} {path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{method} {path}: never problem+json"
        );
        let text = response.text().await.expect("body");
        assert!(!text.contains("placement."), "{text}");
        let body: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            body.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["error_message".to_owned()]),
            "{text}"
        );
        let fault = fault(&body);
        assert_eq!(fault["faultcode"], "Client", "{fault}");
        assert_eq!(fault["debuginfo"], Value::Null, "{fault}");
        assert!(
            fault["faultstring"].as_str().is_some_and(|s| !s.is_empty()),
            "{fault}"
        );
    }
    let (_, _, body) = send(
        &app,
        Some(ADMIN),
        Some("latest"),
        Method::GET,
        &format!("{ALLOCATIONS}/nothing"),
        None,
    )
    .await;
    assert_eq!(
        fault(&body)["faultstring"],
        "Allocation nothing could not be found."
    );
    // A node claim's refusal keeps saying why, per node, beside the envelope.
    let node = enroll(&app, Some(ADMIN), "busy", "gold", &[]).await;
    let claim = json!({"instance_uuid": uuid::Uuid::from_u128(1), "node_uuid": [&node]});
    let (status, _) = call(&app, Some(P1), Method::POST, CLAIMS, Some(claim)).await;
    assert_eq!(status, StatusCode::CREATED);
    let again = json!({"instance_uuid": uuid::Uuid::from_u128(2), "node_uuid": [&node]});
    let (status, refused) = call(&app, Some(P1), Method::POST, CLAIMS, Some(again)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["nodes"][0]["reason"], "claimed", "{refused}");
    assert!(
        fault(&refused)["faultstring"]
            .as_str()
            .is_some_and(|s| s.contains("claimed"))
    );
}

#[tokio::test]
async fn versions_are_negotiated_as_ironic_does() {
    let app = TestApp::spawn().await;
    let with_openstack_header = app
        .request(Method::GET, NODES, None)
        .header("OpenStack-API-Version", "compute 2.1, baremetal 1.58")
        .send()
        .await
        .expect("send");
    assert_eq!(with_openstack_header.headers()[VERSION], "1.58");
    for (asked, status, negotiated) in [
        (None, StatusCode::OK, Some("1.1")),
        (Some("1.1"), StatusCode::OK, Some("1.1")),
        (Some("1.52"), StatusCode::OK, Some("1.52")),
        (Some("latest"), StatusCode::OK, Some("1.60")),
        (Some("1.60"), StatusCode::OK, Some("1.60")),
        (Some("1.61"), StatusCode::NOT_ACCEPTABLE, None),
        (Some("1.115"), StatusCode::NOT_ACCEPTABLE, None),
        (Some("1.0"), StatusCode::NOT_ACCEPTABLE, None),
        (Some("2.1"), StatusCode::NOT_ACCEPTABLE, None),
        (Some("one"), StatusCode::BAD_REQUEST, None),
        (Some("1"), StatusCode::BAD_REQUEST, None),
    ] {
        for path in [NODES, "/baremetal/", "/baremetal/v1"] {
            let (got, headers, body) = send(&app, None, asked, Method::GET, path, None).await;
            assert_eq!(got, status, "{asked:?} {path}: {body}");
            assert_eq!(headers[MINIMUM], "1.1", "{asked:?} {path}");
            assert_eq!(headers[MAXIMUM], "1.60", "{asked:?} {path}");
            assert_eq!(
                headers.get(VERSION).and_then(|v| v.to_str().ok()),
                negotiated,
                "{asked:?} {path}"
            );
            if !status.is_success() {
                let fault = fault(&body);
                assert_eq!(fault["faultcode"], "Client");
                assert!(
                    fault["faultstring"]
                        .as_str()
                        .is_some_and(|s| s.contains(asked.unwrap_or_default())),
                    "{fault}"
                );
            }
        }
    }
    // The roots, from which ironicclient and keystoneauth negotiate.
    let (_, _, root) = send(&app, None, None, Method::GET, "/baremetal/", None).await;
    for version in [&root["versions"][0], &root["default_version"]] {
        assert_eq!(
            (
                &version["id"],
                &version["status"],
                &version["min_version"],
                &version["version"]
            ),
            (
                &json!("v1"),
                &json!("CURRENT"),
                &json!("1.1"),
                &json!("1.60")
            ),
            "{root}"
        );
        assert_eq!(version["links"][0]["href"], "/baremetal/v1/", "{root}");
    }
    let (_, _, v1) = send(&app, None, None, Method::GET, "/baremetal/v1", None).await;
    assert_eq!(v1["id"], "v1");
    assert_eq!(v1["version"]["min_version"], "1.1", "{v1}");
    assert_eq!(v1["version"]["version"], "1.60", "{v1}");
    assert_eq!(v1["version"]["status"], "CURRENT", "{v1}");
    // Allocations exist from 1.52 on.
    for (asked, status) in [
        (None, StatusCode::NOT_FOUND),
        (Some("1.51"), StatusCode::NOT_FOUND),
        (Some("1.52"), StatusCode::OK),
    ] {
        let (got, _, body) = send(&app, None, asked, Method::GET, ALLOCATIONS, None).await;
        assert_eq!(got, status, "{asked:?}: {body}");
    }
}

#[tokio::test]
async fn an_allocation_takes_the_first_eligible_node_and_is_listed_changed_and_deleted() {
    let app = TestApp::spawn().await;
    let silver = enroll(&app, None, "silver-0", "silver", &["CUSTOM_GPU"]).await;
    let plain = enroll(&app, None, "gold-plain", "gold", &[]).await;
    let maintained = enroll(&app, None, "gold-maintained", "gold", &["CUSTOM_GPU"]).await;
    let (status, _, _) = send(
        &app,
        None,
        Some("latest"),
        Method::PUT,
        &format!("{NODES}/{maintained}/maintenance"),
        Some(json!({"reason": "fan"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let gpu = enroll(&app, None, "gold-gpu", "gold", &["CUSTOM_GPU"]).await;
    let gpu2 = enroll(&app, None, "gold-gpu-2", "gold", &["CUSTOM_GPU"]).await;
    let body = json!({"resource_class": "gold", "traits": ["CUSTOM_GPU"], "name": "first",
                      "extra": {"purpose": "ci"}});
    let (status, made) = call(&app, None, Method::POST, ALLOCATIONS, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        made["node_uuid"],
        gpu.as_str(),
        "the first eligible node: {made}"
    );
    assert_eq!(made["state"], "active");
    assert_eq!(made["last_error"], Value::Null);
    assert_eq!(made["name"], "first");
    assert_eq!(made["resource_class"], "gold");
    assert_eq!(made["traits"], json!(["CUSTOM_GPU"]));
    assert_eq!(made["candidate_nodes"], json!([]));
    assert_eq!(made["extra"], json!({"purpose": "ci"}));
    assert!(made["created_at"].is_string(), "{made}");
    assert_eq!(made["updated_at"], Value::Null);
    let first = made["uuid"].as_str().expect("uuid").to_owned();
    let (_, headers, _) = send(
        &app,
        None,
        Some("latest"),
        Method::POST,
        ALLOCATIONS,
        Some(json!({"resource_class": "silver", "name": "located"})),
    )
    .await;
    let location = headers["location"].to_str().expect("ascii").to_owned();
    let (status, located) = call(&app, None, Method::GET, &location, None).await;
    assert_eq!(
        (status, &located["name"]),
        (StatusCode::OK, &json!("located"))
    );
    let (status, _) = call(&app, None, Method::DELETE, &location, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(made["links"][0]["href"], format!("{ALLOCATIONS}/{first}"));
    let (_, node) = call(&app, None, Method::GET, &format!("{NODES}/{gpu}"), None).await;
    assert_eq!(node["allocation_uuid"], first.as_str(), "{node}");
    assert_eq!(node["claimed"], true);
    // Among candidates, named or by uuid; a given uuid is kept.
    let mine = uuid::Uuid::from_u128(0xA110C).to_string();
    let body = json!({"resource_class": "gold", "candidate_nodes": ["gold-plain", &gpu2],
                      "uuid": &mine, "owner": "p9"});
    let (status, second) = call(&app, None, Method::POST, ALLOCATIONS, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    assert_eq!(
        (&second["uuid"], &second["node_uuid"], &second["owner"]),
        (&json!(mine), &json!(plain), &json!("p9"))
    );
    assert_eq!(second["candidate_nodes"], json!([plain, gpu2]));
    // Nothing left that fits: `error`, with why, and nothing kept.
    let body = json!({"resource_class": "gold", "traits": ["CUSTOM_GPU"],
                      "candidate_nodes": [&maintained, &gpu]});
    let (status, failed) = call(&app, None, Method::POST, ALLOCATIONS, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{failed}");
    assert_eq!(failed["state"], "error");
    assert_eq!(failed["node_uuid"], Value::Null);
    let why = failed["last_error"].as_str().expect("last_error");
    assert!(why.starts_with("No available nodes"), "{why}");
    assert!(
        why.contains("maintenance") && why.contains(&format!("held by allocation {first}")),
        "{why}"
    );
    let (status, _) = call(
        &app,
        None,
        Method::GET,
        &format!("{ALLOCATIONS}/{}", failed["uuid"].as_str().expect("uuid")),
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a failed allocation is not kept"
    );
    let (_, silver_left) = call(
        &app,
        None,
        Method::POST,
        ALLOCATIONS,
        Some(json!({"resource_class": "bronze"})),
    )
    .await;
    assert_eq!(silver_left["state"], "error", "{silver_left}");
    // Show by uuid and by name, and a node's allocation.
    for ident in [first.as_str(), "first"] {
        let (status, shown) = call(
            &app,
            None,
            Method::GET,
            &format!("{ALLOCATIONS}/{ident}"),
            None,
        )
        .await;
        assert_eq!(
            (status, &shown["uuid"]),
            (StatusCode::OK, &json!(first)),
            "{ident}"
        );
    }
    let (status, shown) = call(
        &app,
        None,
        Method::GET,
        &format!("{ALLOCATIONS}/first?fields=uuid,node_uuid"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown, json!({"uuid": first, "node_uuid": gpu}));
    for node in [gpu.as_str(), "gold-gpu"] {
        let (status, of_node) = call(
            &app,
            None,
            Method::GET,
            &format!("{NODES}/{node}/allocation"),
            None,
        )
        .await;
        assert_eq!(
            (status, &of_node["uuid"]),
            (StatusCode::OK, &json!(first)),
            "{of_node}"
        );
    }
    let (status, _) = call(
        &app,
        None,
        Method::GET,
        &format!("{NODES}/{silver}/allocation"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Listing: filters, fields, pages.
    let listed = |query: &'static str| {
        let app = &app;
        async move {
            let (status, list) = call(
                app,
                None,
                Method::GET,
                &format!("{ALLOCATIONS}{query}"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{query}: {list}");
            let uuids: Vec<String> = list["allocations"]
                .as_array()
                .expect("allocations")
                .iter()
                .map(|a| a["uuid"].as_str().expect("uuid").to_owned())
                .collect();
            (uuids, list)
        }
    };
    let mut both = vec![first.clone(), mine.clone()];
    both.sort();
    assert_eq!(listed("").await.0, both);
    assert_eq!(
        listed("?node=gold-plain").await.0,
        std::slice::from_ref(&mine)
    );
    assert_eq!(listed("?resource_class=gold&state=active").await.0, both);
    assert_eq!(listed("?state=error").await.0, Vec::<String>::new());
    assert_eq!(listed("?owner=p9").await.0, std::slice::from_ref(&mine));
    // python-ironicclient lists with filters at the collection's path with a slash.
    assert_eq!(
        listed("/?node=gold-plain").await.0,
        std::slice::from_ref(&mine)
    );
    assert_eq!(
        listed("?resource_class=silver").await.0,
        Vec::<String>::new()
    );
    let (page, list) = listed("?limit=1").await;
    assert_eq!(page, both[..1]);
    let next = list["next"].as_str().expect("a full page links the next");
    assert!(next.contains(&format!("marker={}", both[0])), "{next}");
    let (status, rest) = call(&app, None, Method::GET, next, None).await;
    assert_eq!(status, StatusCode::OK, "{rest}");
    assert_eq!(rest["allocations"][0]["uuid"], both[1].as_str(), "{rest}");
    let (_, trimmed) = listed("?fields=uuid,state").await;
    assert_eq!(
        trimmed["allocations"][0],
        json!({"uuid": both[0], "state": "active"})
    );
    for bad in [
        "?limit=0",
        "?limit=x",
        "?marker=nope",
        "?state=flying",
        "?fields=colour",
        "?colour=red",
        "?sort_key=name",
    ] {
        let (status, body) = call(
            &app,
            None,
            Method::GET,
            &format!("{ALLOCATIONS}{bad}"),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    // JSON Patch of the name and extra; nothing else changes.
    let ops = json!([{"op": "replace", "path": "/name", "value": "renamed"},
                     {"op": "add", "path": "/extra/owner_note", "value": "kept"},
                     {"op": "remove", "path": "/extra/purpose"}]);
    let (status, patched) = call(
        &app,
        None,
        Method::PATCH,
        &format!("{ALLOCATIONS}/first"),
        Some(ops),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["name"], "renamed");
    assert_eq!(patched["extra"], json!({"owner_note": "kept"}));
    assert!(patched["updated_at"].is_string(), "{patched}");
    for ops in [
        json!([{"op": "replace", "path": "/node_uuid", "value": &silver}]),
        json!([{"op": "replace", "path": "/name", "value": "not valid"}]),
        json!([{"op": "remove", "path": "/extra/absent"}]),
        json!([{"op": "move", "path": "/name"}]),
        json!({"name": "x"}),
    ] {
        let (status, body) = call(
            &app,
            None,
            Method::PATCH,
            &format!("{ALLOCATIONS}/renamed"),
            Some(ops.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{ops}: {body}");
    }
    let ops = json!([{"op": "replace", "path": "/name", "value": "renamed"}]);
    let (status, _) = call(
        &app,
        None,
        Method::PATCH,
        &format!("{ALLOCATIONS}/{mine}"),
        Some(ops),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "names are unique");
    // Delete: the node is free again; by the node too.
    let (status, _) = call(
        &app,
        None,
        Method::DELETE,
        &format!("{ALLOCATIONS}/renamed"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for method in [Method::GET, Method::DELETE, Method::PATCH] {
        let (status, _) = call(
            &app,
            None,
            method.clone(),
            &format!("{ALLOCATIONS}/{first}"),
            Some(json!([])),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method}");
    }
    let (_, node) = call(&app, None, Method::GET, &format!("{NODES}/{gpu}"), None).await;
    assert_eq!(
        (&node["allocation_uuid"], &node["claimed"]),
        (&Value::Null, &json!(false))
    );
    let (status, _) = call(
        &app,
        None,
        Method::DELETE,
        &format!("{NODES}/gold-plain/allocation"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = call(
        &app,
        None,
        Method::DELETE,
        &format!("{NODES}/gold-plain/allocation"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (again, _) = listed("").await;
    assert!(again.is_empty(), "{again:?}");
    let (status, retaken) = call(
        &app,
        None,
        Method::POST,
        ALLOCATIONS,
        Some(json!({"resource_class": "gold"})),
    )
    .await;
    assert_eq!(
        (status, &retaken["node_uuid"]),
        (StatusCode::CREATED, &json!(plain)),
        "{retaken}"
    );
}

#[tokio::test]
async fn bad_allocations_are_refused_as_ironic_refuses_them() {
    let app = TestApp::spawn().await;
    let node = enroll(&app, None, "n0", "gold", &[]).await;
    let (status, made) = call(
        &app,
        None,
        Method::POST,
        ALLOCATIONS,
        Some(json!({"resource_class": "gold", "name": "taken", "uuid": uuid::Uuid::from_u128(5)})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    for (body, expected) in [
        (
            json!({"resource_class": "gold", "colour": "red"}),
            StatusCode::BAD_REQUEST,
        ),
        (json!({}), StatusCode::BAD_REQUEST),
        (json!({"resource_class": 7}), StatusCode::BAD_REQUEST),
        (
            json!({"resource_class": "gold", "uuid": "not-a-uuid"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"resource_class": "gold", "name": "has space"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"resource_class": "gold", "name": uuid::Uuid::from_u128(9)}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"resource_class": "gold", "candidate_nodes": ["nowhere"]}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"resource_class": "gold", "candidate_nodes": "n0"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"resource_class": "gold", "traits": ["lower-case"]}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"resource_class": "gold", "extra": [1]}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"node": "n0", "candidate_nodes": ["n0"]}),
            StatusCode::BAD_REQUEST,
        ),
        (json!({"node": "nowhere"}), StatusCode::BAD_REQUEST),
        (json!({"node": &node}), StatusCode::CONFLICT),
        (
            json!({"resource_class": "gold", "name": "taken"}),
            StatusCode::CONFLICT,
        ),
        (
            json!({"resource_class": "gold", "uuid": uuid::Uuid::from_u128(5)}),
            StatusCode::CONFLICT,
        ),
    ] {
        let (status, answer) =
            call(&app, None, Method::POST, ALLOCATIONS, Some(body.clone())).await;
        assert_eq!(status, expected, "{body}: {answer}");
        assert!(answer["error_message"].is_string(), "{body}: {answer}");
    }
    let (status, _) = call(
        &app,
        None,
        Method::GET,
        &format!("{ALLOCATIONS}/{}", uuid::Uuid::from_u128(6)),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_allocation_is_backfilled_for_a_deployed_node() {
    let app = TestApp::spawn().await;
    let deployed = enroll(&app, None, "deployed", "gold", &["CUSTOM_GPU"]).await;
    let idle = enroll(&app, None, "idle", "gold", &[]).await;
    let instance = uuid::Uuid::from_u128(0x1D);
    let (status, claim) = call(
        &app,
        None,
        Method::POST,
        CLAIMS,
        Some(json!({"instance_uuid": instance, "node_uuid": [&deployed]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{claim}");
    let deploy =
        json!({"reservation_uuid": claim["reservation"]["uuid"], "instance_uuid": instance});
    let (status, node) = call(
        &app,
        None,
        Method::POST,
        &format!("{NODES}/{deployed}/deploy"),
        Some(deploy),
    )
    .await;
    assert_eq!(
        (status, &node["provision_state"]),
        (StatusCode::OK, &json!("active")),
        "{node}"
    );
    for (body, expected) in [
        (json!({"node": "idle"}), StatusCode::BAD_REQUEST),
        (
            json!({"node": "deployed", "resource_class": "silver"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"node": "deployed", "traits": ["CUSTOM_FPGA"]}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, answer) =
            call(&app, None, Method::POST, ALLOCATIONS, Some(body.clone())).await;
        assert_eq!(status, expected, "{body}: {answer}");
    }
    let body = json!({"node": "deployed", "traits": ["CUSTOM_GPU"], "name": "backfilled"});
    let (status, made) = call(&app, None, Method::POST, ALLOCATIONS, Some(body.clone())).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        (&made["state"], &made["node_uuid"], &made["resource_class"]),
        (&json!("active"), &json!(deployed), &json!("gold"))
    );
    let (status, again) = call(
        &app,
        None,
        Method::POST,
        ALLOCATIONS,
        Some(json!({"node": &deployed})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "one allocation a node: {again}"
    );
    // Deleting it leaves the deployed instance where it is.
    let (status, _) = call(
        &app,
        None,
        Method::DELETE,
        &format!("{ALLOCATIONS}/backfilled"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, node) = call(&app, None, Method::GET, &format!("{NODES}/deployed"), None).await;
    assert_eq!(
        (
            &node["provision_state"],
            &node["instance_uuid"],
            &node["allocation_uuid"]
        ),
        (&json!("active"), &json!(instance), &Value::Null)
    );
    // A teardown ends an allocation with the instance (Ironic's `deleted` action).
    let (status, _) = call(
        &app,
        None,
        Method::POST,
        ALLOCATIONS,
        Some(json!({"node": "deployed"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, _) = send(
        &app,
        None,
        Some("latest"),
        Method::PUT,
        &format!("{NODES}/deployed/states/provision"),
        Some(json!({"target": "deleted"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, node) = call(&app, None, Method::GET, &format!("{NODES}/deployed"), None).await;
    assert_eq!(
        (
            &node["provision_state"],
            &node["instance_uuid"],
            &node["allocation_uuid"]
        ),
        (&json!("available"), &Value::Null, &Value::Null),
        "{node}"
    );
    let (_, list) = call(&app, None, Method::GET, ALLOCATIONS, None).await;
    assert_eq!(list["allocations"], json!([]));
    assert!(!idle.is_empty());
}

#[tokio::test]
async fn thirty_two_clients_racing_for_the_last_eligible_node_allocate_it_once() {
    let app = TestApp::spawn().await;
    enroll(&app, None, "other-class", "silver", &[]).await;
    let last = enroll(&app, None, "last", "gold", &[]).await;
    let base = app.base.clone();
    let client = app.client.clone();
    let mut tasks = Vec::new();
    for n in 0..32 {
        let (base, client) = (base.clone(), client.clone());
        tasks.push(tokio::spawn(async move {
            let response = client
                .post(format!("{base}{ALLOCATIONS}"))
                .header("X-OpenStack-Ironic-API-Version", "1.60")
                .json(&json!({"resource_class": "gold", "name": format!("racer-{n}")}))
                .send()
                .await
                .expect("send");
            let status = response.status();
            let body: Value = response.json().await.expect("body");
            (status, body)
        }));
    }
    let mut active = Vec::new();
    let mut failed = 0;
    for task in tasks {
        let (status, body) = task.await.expect("task");
        assert_eq!(status, StatusCode::CREATED, "{body}");
        match body["state"].as_str() {
            Some("active") => active.push(body),
            Some("error") => failed += 1,
            _ => panic!("{body}"),
        }
    }
    assert_eq!(active.len(), 1, "exactly one wins: {active:?}");
    assert_eq!(failed, 31);
    assert_eq!(active[0]["node_uuid"], last.as_str());
    let (_, list) = call(&app, None, Method::GET, ALLOCATIONS, None).await;
    assert_eq!(list["allocations"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn allocations_answer_each_role_and_project_as_ironic_owners() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    for n in 0..4 {
        enroll(&app, Some(ADMIN), &format!("n{n}"), "gold", &[]).await;
    }
    let create = |who| {
        call(
            &app,
            who,
            Method::POST,
            ALLOCATIONS,
            Some(json!({"resource_class": "gold"})),
        )
    };
    let (status, p1s) = create(Some(P1)).await;
    assert_eq!(status, StatusCode::CREATED, "{p1s}");
    assert_eq!(p1s["owner"], "p1", "a member's allocation is its project's");
    let p1s = p1s["uuid"].as_str().expect("uuid").to_owned();
    let p1_node = "n0";
    for (who, expected) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some(NO_ROLE), StatusCode::FORBIDDEN),
        (Some(READER), StatusCode::FORBIDDEN),
    ] {
        let (status, body) = create(who).await;
        assert_eq!(status, expected, "create as {who:?}: {body}");
    }
    let (status, _) = call(
        &app,
        Some(P2),
        Method::POST,
        ALLOCATIONS,
        Some(json!({"resource_class": "gold", "owner": "p1"})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a member names no other owner"
    );
    let (status, p2s) = create(Some(P2)).await;
    assert_eq!(status, StatusCode::CREATED, "{p2s}");
    let (status, admins) = call(
        &app,
        Some(ADMIN),
        Method::POST,
        ALLOCATIONS,
        Some(json!({"resource_class": "gold", "owner": "p7"})),
    )
    .await;
    assert_eq!(
        (status, &admins["owner"]),
        (StatusCode::CREATED, &json!("p7"))
    );
    // Reads: own project's (reader included); admins every project's, filtered by owner.
    let list = |who| call(&app, who, Method::GET, ALLOCATIONS, None);
    let owners = |list: &Value| -> Vec<String> {
        let mut owners: Vec<String> = list["allocations"]
            .as_array()
            .expect("allocations")
            .iter()
            .map(|a| a["owner"].as_str().unwrap_or("").to_owned())
            .collect();
        owners.sort();
        owners
    };
    for (who, expected) in [
        (P1, vec!["p1"]),
        (READER, vec!["p1"]),
        (P2, vec!["p2"]),
        (ADMIN, vec!["p1", "p2", "p7"]),
    ] {
        let (status, body) = list(Some(who)).await;
        assert_eq!(status, StatusCode::OK, "{who:?}");
        assert_eq!(owners(&body), expected, "{who:?}");
    }
    let (_, filtered) = call(
        &app,
        Some(ADMIN),
        Method::GET,
        &format!("{ALLOCATIONS}?owner=p2"),
        None,
    )
    .await;
    assert_eq!(owners(&filtered), ["p2"]);
    let (_, sneaky) = call(
        &app,
        Some(P2),
        Method::GET,
        &format!("{ALLOCATIONS}?owner=p1"),
        None,
    )
    .await;
    assert_eq!(
        owners(&sneaky),
        Vec::<String>::new(),
        "another project's are never listed"
    );
    for (who, expected) in [
        (None, StatusCode::UNAUTHORIZED),
        (Some(NO_ROLE), StatusCode::FORBIDDEN),
    ] {
        let (status, _) = list(who).await;
        assert_eq!(status, expected, "{who:?}");
    }
    // One allocation: another project finds nothing, whatever it tries.
    let one = format!("{ALLOCATIONS}/{p1s}");
    let of_node = format!("{NODES}/{p1_node}/allocation");
    let patch = json!([{"op": "add", "path": "/extra/x", "value": 1}]);
    for (method, path, body) in [
        (Method::GET, one.clone(), None),
        (Method::PATCH, one.clone(), Some(patch.clone())),
        (Method::DELETE, one.clone(), None),
        (Method::GET, of_node.clone(), None),
        (Method::DELETE, of_node.clone(), None),
    ] {
        let (status, body_seen) = call(&app, Some(P2), method.clone(), &path, body.clone()).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{method} {path} as p2: {body_seen}"
        );
        assert!(!body_seen.to_string().contains(&p1s) || path.contains(&p1s));
        let (status, _) = call(&app, None, method.clone(), &path, body.clone()).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{method} {path} anonymous"
        );
        let (status, _) = call(&app, Some(NO_ROLE), method.clone(), &path, body.clone()).await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{method} {path} with no role"
        );
    }
    for path in [&one, &of_node] {
        let (status, shown) = call(&app, Some(READER), Method::GET, path, None).await;
        assert_eq!(
            (status, &shown["uuid"]),
            (StatusCode::OK, &json!(p1s)),
            "{path}"
        );
        let (status, _) = call(&app, Some(ADMIN), Method::GET, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path} as admin");
    }
    for (method, body) in [(Method::PATCH, Some(patch.clone())), (Method::DELETE, None)] {
        let (status, _) = call(&app, Some(READER), method.clone(), &one, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} as a reader");
    }
    let (status, patched) = call(&app, Some(P1), Method::PATCH, &one, Some(patch)).await;
    assert_eq!(
        (status, &patched["extra"]),
        (StatusCode::OK, &json!({"x": 1})),
        "{patched}"
    );
    let (status, _) = call(&app, Some(P1), Method::DELETE, &of_node, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "the owner deletes by node");
    let (status, _) = call(
        &app,
        Some(ADMIN),
        Method::DELETE,
        &format!("{ALLOCATIONS}/{}", p2s["uuid"].as_str().expect("uuid")),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "an admin deletes any");
}
