//! The bare-metal API end to end: nodes enrolled, listed with filters, moved along explicit
//! provision-state transitions and deleted; claims that take the first eligible listed node
//! and say per node why the others were refused; expiry; deploying only with the caller's live
//! claim; a node reserved by a lease claimable only by the lease's project; every bad input
//! refused; and 64 clients racing for 10 nodes, of which exactly 10 win.

use crate::blazar_leases::{LEASES, lease_body, minutes, now_micros};
use crate::support::{Options, TestApp, Who};
use berth_server::auth::AuthMode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

pub(crate) const NODES: &str = "/baremetal/v1/nodes";
pub(crate) const CLAIMS: &str = "/baremetal/v1/reservations";
const ADMIN: Who<'static> = Who {
    project: "ops",
    user: "root",
    roles: "admin",
};
const ALICE: Who<'static> = Who {
    project: "alice",
    user: "a",
    roles: "member",
};
const BOB: Who<'static> = Who {
    project: "bob",
    user: "b",
    roles: "member",
};

fn instance(n: u128) -> String {
    uuid::Uuid::from_u128(0x1_0000 + n).to_string()
}

/// Enrols node `name` (class `baremetal-gold`) in `state`; returns its uuid.
pub(crate) async fn enroll_node(app: &TestApp, name: &str, state: &str) -> String {
    let body = json!({"name": name, "resource_class": "baremetal-gold", "provision_state": state,
                      "properties": {"cpus": 32, "memory_mb": 262_144, "cpu_arch": "x86_64"},
                      "traits": ["CUSTOM_GPU"]});
    let (status, node) = app.call(Method::POST, NODES, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    node["uuid"].as_str().expect("uuid").to_owned()
}

async fn claim(app: &TestApp, instance: &str, nodes: &[String]) -> (StatusCode, Value) {
    let body = json!({"instance_uuid": instance, "node_uuid": nodes});
    app.call(Method::POST, CLAIMS, None, Some(body)).await
}

async fn patch(app: &TestApp, node: &str, ops: Value) -> (StatusCode, Value) {
    app.call(Method::PATCH, &format!("{NODES}/{node}"), None, Some(ops))
        .await
}

fn state_op(state: &str) -> Value {
    json!([{"op": "replace", "path": "/provision_state", "value": state}])
}

async fn names(app: &TestApp, query: &str) -> Vec<String> {
    let (status, list) = app
        .call(Method::GET, &format!("{NODES}{query}"), None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["name"].as_str().expect("name").to_owned())
        .collect()
}

#[tokio::test]
async fn nodes_move_along_explicit_transitions_and_are_listed_by_filter() {
    let app = TestApp::spawn().await;
    let n0 = enroll_node(&app, "n0", "enroll").await;
    enroll_node(&app, "n1", "available").await;
    let (_, shown) = app
        .call(Method::GET, &format!("{NODES}/n0"), None, None)
        .await;
    assert_eq!(shown["uuid"], n0.as_str(), "a node is found by name too");
    assert_eq!(shown["provision_state"], "enroll");
    assert_eq!(shown["maintenance"], false);
    assert_eq!(shown["properties"]["cpus"], 32);
    assert_eq!(shown["traits"], json!(["CUSTOM_GPU"]));
    // Placement sees the node: one unit of its class.
    let (_, inventories) = app
        .get(
            &format!("/placement/resource_providers/{n0}/inventories"),
            Some("1.39"),
        )
        .await;
    assert_eq!(
        inventories["inventories"]["CUSTOM_BAREMETAL_GOLD"]["total"],
        1
    );
    // Explicit transitions only.
    for (to, expected) in [
        ("available", StatusCode::CONFLICT),
        ("active", StatusCode::CONFLICT),
        ("manageable", StatusCode::OK),
        ("available", StatusCode::OK),
        ("deploying", StatusCode::CONFLICT),
        ("flying", StatusCode::BAD_REQUEST),
    ] {
        let (status, body) = patch(&app, &n0, state_op(to)).await;
        assert_eq!(status, expected, "to {to}: {body}");
    }
    let (status, body) = patch(
        &app,
        "n1",
        json!([{"op": "replace", "path": "/maintenance", "value": true},
               {"op": "add", "path": "/maintenance_reason", "value": "fan"},
               {"op": "add", "path": "/properties/rack", "value": "r7"}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (
            body["maintenance"].clone(),
            body["maintenance_reason"].clone()
        ),
        (json!(true), json!("fan"))
    );
    assert_eq!(body["properties"]["rack"], "r7");
    assert_eq!(names(&app, "?maintenance=true").await, ["n1"]);
    assert_eq!(
        names(&app, "?provision_state=available&maintenance=false").await,
        ["n0"]
    );
    assert_eq!(
        names(&app, "?resource_class=baremetal-gold").await,
        ["n0", "n1"]
    );
    assert_eq!(
        names(&app, "?resource_class=other").await,
        Vec::<String>::new()
    );
    assert_eq!(names(&app, "?associated=true").await, Vec::<String>::new());
    for query in ["?provision_state=flying", "?maintenance=maybe"] {
        let (status, _) = app
            .call(Method::GET, &format!("{NODES}{query}"), None, None)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
    }
    for bad in [
        json!({"name": "x"}),
        json!({"name": "x", "resource_class": "gold", "colour": "red"}),
        json!({"name": "x", "resource_class": "gold", "provision_state": "active"}),
        json!({"name": "x", "resource_class": "gold", "properties": {"nested": {"a": 1}}}),
        json!({"name": "x", "resource_class": "gold", "uuid": "not-a-uuid"}),
    ] {
        let (status, body) = app.call(Method::POST, NODES, None, Some(bad.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, _) = app
        .call(
            Method::POST,
            NODES,
            None,
            Some(json!({"name": "n0", "resource_class": "gold"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "names are unique");
    let (status, _) = app
        .call(Method::DELETE, &format!("{NODES}/{n0}"), None, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app
        .call(Method::GET, &format!("{NODES}/{n0}"), None, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_claim_takes_the_first_eligible_node_and_a_refusal_says_why_for_each() {
    let app = TestApp::spawn().await;
    let maintained = enroll_node(&app, "m", "available").await;
    patch(
        &app,
        &maintained,
        json!([{"op": "replace", "path": "/maintenance", "value": true}]),
    )
    .await;
    let managed = enroll_node(&app, "g", "manageable").await;
    let taken = enroll_node(&app, "t", "available").await;
    let free = enroll_node(&app, "f", "available").await;
    let unknown = uuid::Uuid::from_u128(0xdead).to_string();
    let (status, first) = claim(&app, &instance(1), std::slice::from_ref(&taken)).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let listed = vec![
        unknown.clone(),
        maintained.clone(),
        managed.clone(),
        taken.clone(),
        free.clone(),
    ];
    let (status, made) = claim(&app, &instance(2), &listed).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        made["reservation"]["node_uuid"],
        free.as_str(),
        "the first eligible one"
    );
    assert_eq!(made["reservation"]["instance_uuid"], instance(2).as_str());
    for field in ["uuid", "created_at", "updated_at", "expires_at"] {
        assert!(made["reservation"][field].is_string(), "{field}: {made}");
    }
    let (status, refused) = claim(&app, &instance(3), &listed).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let reasons: Vec<(String, String)> = refused["nodes"]
        .as_array()
        .expect("per-node reasons")
        .iter()
        .map(|n| {
            (
                n["node_uuid"].as_str().unwrap_or("").to_owned(),
                n["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        (unknown, "not_found"),
        (maintained, "maintenance"),
        (managed, "provision_state"),
        (taken.clone(), "claimed"),
        (free.clone(), "claimed"),
    ]
    .into_iter()
    .map(|(n, r)| (n, r.to_owned()))
    .collect();
    assert_eq!(reasons, expected);
    // List, filter, show, release.
    let (_, list) = app
        .call(
            Method::GET,
            &format!("{CLAIMS}?node_uuid={free}"),
            None,
            None,
        )
        .await;
    assert_eq!(list["reservations"].as_array().map(Vec::len), Some(1));
    let id = made["reservation"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let (status, shown) = app
        .call(Method::GET, &format!("{CLAIMS}/{id}"), None, None)
        .await;
    assert_eq!(
        (status, shown["reservation"]["node_uuid"].clone()),
        (StatusCode::OK, json!(free))
    );
    let (status, _) = app
        .call(Method::DELETE, &format!("{CLAIMS}/{id}"), None, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for method in [Method::GET, Method::DELETE] {
        let (status, _) = app
            .call(method, &format!("{CLAIMS}/{id}"), None, None)
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (status, again) = claim(&app, &instance(3), &listed).await;
    assert_eq!(
        (status, again["reservation"]["node_uuid"].clone()),
        (StatusCode::CREATED, json!(free))
    );
    // Bad requests name the problem.
    for body in [
        json!({"instance_uuid": instance(9), "node_uuid": []}),
        json!({"instance_uuid": instance(9)}),
        json!({"instance_uuid": instance(9), "node_uuid": "not-a-list"}),
        json!({"instance_uuid": instance(9), "node_uuid": ["not-a-uuid"]}),
        json!({"instance_uuid": instance(9), "node_uuid": [&free, &free]}),
        json!({"node_uuid": [&free]}),
        json!({"instance_uuid": "nope", "node_uuid": [&free]}),
        json!({"instance_uuid": instance(9), "node_uuid": [&free], "ttl": 0}),
        json!({"instance_uuid": instance(9), "node_uuid": [&free], "extra": 1}),
    ] {
        let (status, answer) = app
            .call(Method::POST, CLAIMS, None, Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
    }
    // By class and traits.
    let (status, by_class) = app
        .call(
            Method::POST,
            CLAIMS,
            None,
            Some(json!({"instance_uuid": instance(10),
              "resource_class": "baremetal-gold", "traits": ["CUSTOM_GPU"]})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "every gold node is taken: {by_class}"
    );
}

#[tokio::test]
async fn an_expired_claim_frees_its_node_and_cannot_deploy() {
    let app = TestApp::spawn().await;
    let node = enroll_node(&app, "n", "available").await;
    let body = json!({"instance_uuid": instance(1), "node_uuid": [&node], "ttl": 1});
    let (status, made) = app.call(Method::POST, CLAIMS, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["reservation"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let mut gone = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, _) = app
            .call(Method::GET, &format!("{CLAIMS}/{id}"), None, None)
            .await;
        if status == StatusCode::NOT_FOUND {
            gone = true;
            break;
        }
    }
    assert!(gone, "the lifecycle engine released the claim");
    let (_, shown) = app
        .call(Method::GET, &format!("{NODES}/{node}"), None, None)
        .await;
    assert_eq!(shown["claim_uuid"], Value::Null);
    let (_, usages) = app
        .get(
            &format!("/placement/resource_providers/{node}/usages"),
            Some("1.39"),
        )
        .await;
    assert_eq!(
        usages["usages"]["CUSTOM_BAREMETAL_GOLD"], 0,
        "its allocation went with it"
    );
    let deploy = json!({"reservation_uuid": id, "instance_uuid": instance(1)});
    let (status, refused) = app
        .call(
            Method::POST,
            &format!("{NODES}/{node}/deploy"),
            None,
            Some(deploy),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    let (status, _) = claim(&app, &instance(2), std::slice::from_ref(&node)).await;
    assert_eq!(status, StatusCode::CREATED, "the node is free again");
}

#[tokio::test]
async fn deploying_needs_the_callers_live_claim() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    let body =
        json!({"name": "n", "resource_class": "baremetal-gold", "provision_state": "available"});
    let (status, node) = app.call_as(ADMIN, Method::POST, NODES, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{node}");
    let node = node["uuid"].as_str().expect("uuid").to_owned();
    let (status, _) = app
        .call_as(
            ALICE,
            Method::POST,
            NODES,
            Some(json!({"name": "m", "resource_class": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "enrolling is for admins");
    let claim_body = json!({"instance_uuid": instance(1), "node_uuid": [&node]});
    let (status, made) = app
        .call_as(ALICE, Method::POST, CLAIMS, Some(claim_body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let id = made["reservation"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let deploy_path = format!("{NODES}/{node}/deploy");
    let (_, bobs) = app.call_as(BOB, Method::GET, CLAIMS, None).await;
    assert_eq!(
        bobs["reservations"],
        json!([]),
        "a project sees its own claims"
    );
    let (status, _) = app
        .call_as(BOB, Method::DELETE, &format!("{CLAIMS}/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nor releases another's");
    for (who, body, expected) in [
        (
            BOB,
            json!({"reservation_uuid": id, "instance_uuid": instance(1)}),
            StatusCode::CONFLICT,
        ),
        (
            ALICE,
            json!({"reservation_uuid": instance(7), "instance_uuid": instance(1)}),
            StatusCode::CONFLICT,
        ),
        (
            ALICE,
            json!({"reservation_uuid": id, "instance_uuid": instance(2)}),
            StatusCode::CONFLICT,
        ),
        (
            ALICE,
            json!({"instance_uuid": instance(1)}),
            StatusCode::BAD_REQUEST,
        ),
        (
            ALICE,
            json!({"reservation_uuid": "x", "instance_uuid": instance(1)}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, answer) = app
            .call_as(who, Method::POST, &deploy_path, Some(body.clone()))
            .await;
        assert_eq!(status, expected, "{body}: {answer}");
    }
    let body = json!({"reservation_uuid": id, "instance_uuid": instance(1)});
    let (status, deployed) = app
        .call_as(ALICE, Method::POST, &deploy_path, Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{deployed}");
    assert_eq!(deployed["provision_state"], "active");
    assert_eq!(deployed["instance_uuid"], instance(1).as_str());
    assert_eq!(deployed["claim_uuid"], Value::Null, "the claim is used up");
    let (status, _) = app
        .call_as(ADMIN, Method::DELETE, &format!("{NODES}/{node}"), None)
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "an active node cannot be deleted"
    );
    let (status, _) = app
        .call_as(
            ADMIN,
            Method::PATCH,
            &format!("{NODES}/{node}"),
            Some(state_op("available")),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "a teardown cleans first");
    let (status, cleaned) = app
        .call_as(
            ADMIN,
            Method::PATCH,
            &format!("{NODES}/{node}"),
            Some(state_op("cleaning")),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{cleaned}");
    assert_eq!(cleaned["instance_uuid"], Value::Null);
}

#[tokio::test]
async fn a_node_reserved_by_a_lease_is_claimable_only_by_the_lease_project() {
    let app = TestApp::spawn_with(Options {
        auth: Some(AuthMode::Headers),
        ..Options::default()
    })
    .await;
    for name in ["n0", "n1"] {
        let body = json!({"name": name, "resource_class": "baremetal-gold", "provision_state": "available"});
        let (status, _) = app.call_as(ADMIN, Method::POST, NODES, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (_, list) = app.call_as(ALICE, Method::GET, NODES, None).await;
    let nodes: Vec<String> = list["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["uuid"].as_str().expect("uuid").to_owned())
        .collect();
    // Alice leases one gold node now (the filter names the resource class).
    let reservation = json!({"resource_type": "physical:host", "min": 1, "max": 1,
                             "resource_properties": r#"["==", "$resource_class", "baremetal-gold"]"#});
    let end = minutes(now_micros() + 3_600_000_000);
    let (status, lease) = app
        .call_as(
            ALICE,
            Method::POST,
            LEASES,
            Some(lease_body("metal", "now", &end, json!([reservation]))),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{lease}");
    let leased = lease["lease"]["reservations"][0]["allocations"][0]["provider_uuid"]
        .as_str()
        .expect("a node")
        .to_owned();
    assert_eq!(leased, nodes[0]);
    let id = lease["lease"]["id"].as_str().expect("id").to_owned();
    for _ in 0..100 {
        let (_, shown) = app
            .call_as(ALICE, Method::GET, &format!("{LEASES}/{id}"), None)
            .await;
        if shown["lease"]["status"] == "ACTIVE" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = json!({"instance_uuid": instance(1), "node_uuid": [&leased]});
    let (status, refused) = app.call_as(BOB, Method::POST, CLAIMS, Some(body)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["nodes"][0]["reason"], "reserved");
    let body = json!({"instance_uuid": instance(2), "node_uuid": [&leased, &nodes[1]]});
    let (status, made) = app.call_as(ALICE, Method::POST, CLAIMS, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        made["reservation"]["node_uuid"],
        leased.as_str(),
        "the lease's own node"
    );
}

/// 64 clients (spread over `apps`) each claim from the same list of ten nodes; returns the nodes
/// won and the number of 409s.
pub(crate) async fn race_for_nodes(apps: &[&TestApp], nodes: &[String]) -> (Vec<String>, usize) {
    let tasks: Vec<_> = (0..64u128)
        .map(|n| {
            let app = apps[n as usize % apps.len()];
            let (client, url) = (app.client.clone(), format!("{}{CLAIMS}", app.base));
            let body = json!({"instance_uuid": instance(n), "node_uuid": nodes});
            tokio::spawn(async move {
                crate::support::parse(client.post(url).json(&body).send().await.expect("send"))
                    .await
            })
        })
        .collect();
    let (mut won, mut conflicts) = (Vec::new(), 0);
    for task in tasks {
        match task.await.expect("client") {
            (StatusCode::CREATED, body) => {
                won.push(
                    body["reservation"]["node_uuid"]
                        .as_str()
                        .expect("node")
                        .to_owned(),
                );
            }
            (StatusCode::CONFLICT, body) => {
                assert_eq!(
                    body["nodes"].as_array().map(Vec::len),
                    Some(nodes.len()),
                    "{body}"
                );
                conflicts += 1;
            }
            (status, body) => panic!("unexpected {status}: {body}"),
        }
    }
    (won, conflicts)
}

/// Exactly the ten nodes were won, each once, and the other 54 clients got 409.
pub(crate) fn check_node_race(won: &[String], conflicts: usize, nodes: &[String]) {
    assert_eq!(won.len(), 10, "{won:?}");
    assert_eq!(conflicts, 54);
    let distinct: BTreeSet<&String> = won.iter().collect();
    assert_eq!(distinct.len(), 10, "no node claimed twice: {won:?}");
    assert_eq!(distinct, nodes.iter().collect(), "every node claimed");
}

#[tokio::test]
async fn sixty_four_clients_racing_for_ten_nodes_claim_each_once() {
    let app = TestApp::spawn().await;
    let mut nodes = Vec::new();
    for n in 0..10 {
        nodes.push(enroll_node(&app, &format!("race-{n}"), "available").await);
    }
    let (won, conflicts) = race_for_nodes(&[&app], &nodes).await;
    check_node_race(&won, conflicts, &nodes);
    let (_, claims) = app.call(Method::GET, CLAIMS, None, None).await;
    assert_eq!(claims["reservations"].as_array().map(Vec::len), Some(10));
}

#[tokio::test]
async fn capacity_queries_count_nodes_of_a_class() {
    let app = TestApp::spawn().await;
    let mut nodes = Vec::new();
    for n in 0..3 {
        nodes.push(enroll_node(&app, &format!("c{n}"), "available").await);
    }
    let (status, _) = claim(&app, &instance(1), &nodes).await;
    assert_eq!(status, StatusCode::CREATED);
    let path = "/promise/capacity/compute/query?computeResourceTypeId=CUSTOM_BAREMETAL_GOLD";
    let (status, answer) = app.call(Method::GET, path, None, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let figures = &answer["capacityInformation"];
    assert_eq!(
        (
            figures["total"].clone(),
            figures["allocated"].clone(),
            figures["available"].clone()
        ),
        (json!(3), json!(1), json!(2)),
        "{answer}"
    );
}

#[tokio::test]
async fn json_patch_is_accepted_under_its_own_media_type_and_errors_are_ironics() {
    let app = TestApp::spawn().await;
    let node = enroll_node(&app, "patch-media", "available").await;
    let response = app
        .request(Method::PATCH, &format!("{NODES}/{node}"), None)
        .header("content-type", "application/json-patch+json")
        .body(json!([{"op": "replace", "path": "/name", "value": "patched"}]).to_string())
        .send()
        .await
        .expect("patch");
    let status = response.status();
    let body: Value = response.json().await.expect("node");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], "patched");
    let response = app
        .request(Method::PATCH, &format!("{NODES}/{node}"), None)
        .header("content-type", "text/plain")
        .body("[]")
        .send()
        .await
        .expect("patch");
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // The bare-metal API answers errors in Ironic's envelope, never with Placement's codes.
    let (status, body) = app
        .call(
            Method::GET,
            &format!("{NODES}/{}", uuid::Uuid::from_u128(7)),
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let fault: Value =
        serde_json::from_str(body["error_message"].as_str().expect("Ironic's envelope"))
            .expect("a JSON-encoded fault");
    assert_eq!(fault["faultcode"], "Client", "{body}");
    assert!(!body.to_string().contains("placement."), "{body}");
}
