//! Blazar: `/reservation/v1/os-hosts`.

use crate::support::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::json;

const HOSTS: &str = "/reservation/v1/os-hosts";

#[tokio::test]
async fn hosts_are_enrolled_listed_updated_and_deleted() {
    let app = TestApp::spawn().await;
    let body = json!({"name": "compute-1", "vcpus": 16, "memory_mb": 65536, "local_gb": 500,
                      "availability_zone": "az1", "gpu": true, "rack": "r1", "cores": 16});
    let (status, created) = app.call(Method::POST, HOSTS, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let host = &created["host"];
    let id = host["id"].as_str().expect("id is a string").to_owned();
    assert!(id.chars().all(|c| c.is_ascii_digit()), "numeric id: {id}");
    assert_eq!(host["hypervisor_hostname"], "compute-1");
    assert_eq!(
        (
            host["vcpus"].as_u64(),
            host["memory_mb"].as_u64(),
            host["local_gb"].as_u64()
        ),
        (Some(16), Some(65536), Some(500))
    );
    assert_eq!(host["availability_zone"], "az1");
    assert_eq!(host["reservable"], true);
    assert_eq!(
        (
            host["gpu"].clone(),
            host["rack"].clone(),
            host["cores"].clone()
        ),
        (json!(true), json!("r1"), json!(16))
    );
    assert!(
        host["created_at"].as_str().is_some_and(|t| t.len() == 19),
        "YYYY-MM-DD HH:MM:SS"
    );

    let (status, list) = app.get(HOSTS, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["hosts"][0]["hypervisor_hostname"], "compute-1");
    let (status, shown) = app.get(&format!("{HOSTS}/{id}"), None).await;
    assert_eq!(
        (status, shown["host"]["id"].as_str()),
        (StatusCode::OK, Some(id.as_str()))
    );

    // The host is a root provider: Placement sees its inventory.
    let (_, providers) = app
        .get(
            "/placement/resource_providers?resources=VCPU:16",
            Some("1.39"),
        )
        .await;
    assert_eq!(providers["resource_providers"][0]["name"], "compute-1");

    let (status, updated) = app
        .call(
            Method::PUT,
            &format!("{HOSTS}/{id}"),
            None,
            Some(json!({"gpu": "false", "rack": null, "ssd": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["host"]["gpu"], "false");
    assert_eq!(updated["host"]["ssd"], true);
    assert!(
        updated["host"].get("rack").is_none(),
        "null removes a capability"
    );

    let (status, _) = app
        .call(Method::DELETE, &format!("{HOSTS}/{id}"), None, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = app.get(&format!("{HOSTS}/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error_code"], 404);
    assert!(
        body["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("not found"))
    );
}

#[tokio::test]
async fn an_existing_root_provider_is_adopted() {
    let app = TestApp::spawn().await;
    let uuid = app.create_provider("compute-9", None).await;
    app.set_inventory(&uuid, 32, 131072).await;
    let (status, created) = app
        .call(
            Method::POST,
            HOSTS,
            None,
            Some(json!({"name": "compute-9"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["host"]["vcpus"], 32);
    let (_, list) = app.get("/placement/resource_providers", Some("1.39")).await;
    assert_eq!(
        list["resource_providers"].as_array().expect("list").len(),
        1,
        "adopted, not duplicated"
    );
    let (status, body) = app
        .call(
            Method::POST,
            HOSTS,
            None,
            Some(json!({"name": "compute-9"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let child = app.create_provider("compute-9-numa0", Some(&uuid)).await;
    let id = created["host"]["id"].as_str().expect("id");
    let (status, body) = app
        .call(Method::DELETE, &format!("{HOSTS}/{id}"), None, None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, _) = app
        .call(
            Method::POST,
            HOSTS,
            None,
            Some(json!({"name": "compute-9-numa0"})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "nested providers are not hosts ({child})"
    );
}

#[tokio::test]
async fn bad_host_input_gets_blazar_errors() {
    let app = TestApp::spawn().await;
    let cases = [
        json!({}),
        json!({"name": ""}),
        json!({"name": 7}),
        json!({"name": "h", "vcpus": -1}),
        json!({"name": "h", "vcpus": "many"}),
        json!({"name": "h", "id": "5"}),
        json!({"name": "h", "reservable": "maybe"}),
        json!({"name": "h", "nested": {"a": 1}}),
        json!({"name": "h", "k".repeat(65): "v"}),
    ];
    for body in cases {
        let (status, response) = app
            .call(Method::POST, HOSTS, None, Some(body.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {response}");
        assert_eq!(response["error_code"], 400);
        assert!(
            response["error_message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    let (_, created) = app
        .call(Method::POST, HOSTS, None, Some(json!({"name": "h"})))
        .await;
    let id = created["host"]["id"].as_str().expect("id");
    let (status, _) = app
        .call(Method::PUT, &format!("{HOSTS}/{id}"), None, Some(json!({})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "No data to update");
    let (status, _) = app
        .call(
            Method::PUT,
            &format!("{HOSTS}/{id}"),
            None,
            Some(json!({"id": "9"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.get(&format!("{HOSTS}/compute-x"), None).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get(&format!("{HOSTS}/999"), None).await.0,
        StatusCode::NOT_FOUND
    );
    let (_, list) = app.get(HOSTS, None).await;
    assert_eq!(
        list["hosts"].as_array().expect("hosts").len(),
        1,
        "refused requests wrote nothing"
    );
}

#[tokio::test]
async fn properties_are_listed_and_can_be_made_private() {
    let app = TestApp::spawn().await;
    let body = json!({"name": "compute-1", "vcpus": 8, "availability_zone": "az1", "gpu": true, "rack": "r1"});
    let (status, _) = app.call(Method::POST, HOSTS, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let names = |body: &serde_json::Value| -> Vec<String> {
        body["resource_properties"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|p| p["property"].as_str().map(str::to_owned))
            .collect()
    };
    let (status, listed) = app.get(&format!("{HOSTS}/properties"), None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert!(
        names(&listed).contains(&"gpu".to_owned())
            && names(&listed).contains(&"availability_zone".to_owned())
    );
    let (status, detail) = app
        .get(&format!("{HOSTS}/properties?detail=true"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let rack = detail["resource_properties"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["property"] == "rack"))
        .cloned()
        .expect("rack is listed");
    assert_eq!(
        (rack["private"].clone(), rack["values"].clone()),
        (json!(false), json!(["r1"]))
    );

    let (status, patched) = app
        .call(
            Method::PATCH,
            &format!("{HOSTS}/properties/gpu"),
            None,
            Some(json!({"private": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["resource_property"]["private"], true);
    let (_, listed) = app.get(&format!("{HOSTS}/properties"), None).await;
    assert!(
        !names(&listed).contains(&"gpu".to_owned()),
        "private properties are hidden"
    );
    let (_, everything) = app
        .get(&format!("{HOSTS}/properties?all=true&detail=true"), None)
        .await;
    let gpu = everything["resource_properties"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["property"] == "gpu"))
        .cloned()
        .expect("all=true lists private properties");
    assert_eq!(gpu["private"], true);
    let (status, _) = app
        .call(
            Method::PATCH,
            &format!("{HOSTS}/properties/nonexistent"),
            None,
            Some(json!({"private": true})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .call(
            Method::PATCH,
            &format!("{HOSTS}/properties/gpu"),
            None,
            Some(json!({"private": "yes"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn hosts_leave_and_rejoin_the_freepool() {
    let app = TestApp::spawn().await;
    let body = json!({"name": "compute-1", "vcpus": 8, "reservable": false});
    let (status, created) = app.call(Method::POST, HOSTS, None, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["host"]["reservable"], false);
    let id = created["host"]["id"].as_str().expect("id").to_owned();
    let lease = json!({"name": "l", "start_date": "2040-01-01 10:00", "end_date": "2040-01-01 12:00",
                       "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1}]});
    let (status, _) = app
        .call(
            Method::POST,
            "/reservation/v1/leases",
            None,
            Some(lease.clone()),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a host outside the freepool is not reservable"
    );
    let (status, updated) = app
        .call(
            Method::PUT,
            &format!("{HOSTS}/{id}"),
            None,
            Some(json!({"reservable": "true"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["host"]["reservable"], true);
    let (status, admitted) = app
        .call(Method::POST, "/reservation/v1/leases", None, Some(lease))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{admitted}");
    let (status, _) = app
        .call(
            Method::PUT,
            &format!("{HOSTS}/{id}"),
            None,
            Some(json!({"reservable": 3})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
