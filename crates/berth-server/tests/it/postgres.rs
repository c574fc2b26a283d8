//! The server over PostgreSQL: persistence across restarts and two replicas over one database.
//! Runs when `BERTH_TEST_POSTGRES_URL` is set; otherwise each test says loudly that it skipped.

use crate::support::{Options, TestApp};
use berth_store_postgres::scratch;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn postgres_server_keeps_everything_across_a_restart() {
    let Some(server) = scratch::server_url("postgres_server_keeps_everything_across_a_restart")
    else {
        return;
    };
    let (name, url) = scratch::create(&server).await;
    let outcome = tokio::spawn(async move {
        let app = TestApp::spawn_with(Options {
            database: Some(url.clone()),
            ..Options::default()
        })
        .await;
        let (status, health) = app.get("/healthz", None).await;
        assert_eq!(
            (status, health["database"].as_str()),
            (StatusCode::OK, Some("postgres"))
        );
        let uuid = app.create_provider("cn1", None).await;
        app.set_inventory(&uuid, 8, 1024).await;
        let _ = app.stop().await;
        let app = TestApp::spawn_with(Options {
            database: Some(url),
            ..Options::default()
        })
        .await;
        let (_, body) = app
            .get(
                &format!("/placement/resource_providers/{uuid}/inventories"),
                Some("1.39"),
            )
            .await;
        assert_eq!(body["inventories"]["MEMORY_MB"]["total"], 1024);
        let _ = app.stop().await;
    })
    .await;
    scratch::drop_all(&server, &[name]).await;
    outcome.expect("test body");
}

#[tokio::test]
async fn two_replicas_share_one_catalog_and_never_double_write() {
    let Some(server) = scratch::server_url("two_replicas_share_one_catalog_and_never_double_write")
    else {
        return;
    };
    let (name, url) = scratch::create(&server).await;
    let outcome = tokio::spawn(async move {
        let first = TestApp::spawn_with(Options {
            database: Some(url.clone()),
            ..Options::default()
        })
        .await;
        let second = TestApp::spawn_with(Options {
            database: Some(url),
            ..Options::default()
        })
        .await;
        let uuid = first.create_provider("cn1", None).await;
        let (status, body) = second
            .get(
                &format!("/placement/resource_providers/{uuid}"),
                Some("1.39"),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::OK,
            "a write on one replica is read on the other: {body}"
        );

        // Both replicas race to write the same generation: exactly one wins.
        let body =
            json!({"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}});
        let path = format!("/placement/resource_providers/{uuid}/inventories");
        let (a, b) = tokio::join!(
            first.call(Method::PUT, &path, Some("1.39"), Some(body.clone())),
            second.call(Method::PUT, &path, Some("1.39"), Some(body)),
        );
        let mut statuses = [a.0, b.0];
        statuses.sort();
        assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT]);

        // Both race to create the same name, many times over: one provider per name.
        for round in 0..10 {
            let name = format!("race-{round}");
            let body = json!({ "name": name });
            let path = "/placement/resource_providers";
            let (a, b) = tokio::join!(
                first.call(Method::POST, path, Some("1.39"), Some(body.clone())),
                second.call(Method::POST, path, Some("1.39"), Some(body)),
            );
            let mut statuses = [a.0, b.0];
            statuses.sort();
            assert_eq!(
                statuses,
                [StatusCode::OK, StatusCode::CONFLICT],
                "round {round}"
            );
        }
        let (_, list) = second
            .get("/placement/resource_providers", Some("1.39"))
            .await;
        assert_eq!(
            list["resource_providers"].as_array().expect("list").len(),
            11
        );
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
    scratch::drop_all(&server, &[name]).await;
    outcome.expect("test body");
}
