//! The server over PostgreSQL: persistence across restarts and two replicas over one database.
//! Runs when `BERTH_TEST_POSTGRES_URL` is set; otherwise each test says loudly that it skipped.

use crate::baremetal::{CLAIMS, check_node_race, enroll_node, race_for_nodes};
use crate::blazar_leases::{
    LEASES, check_race, create, enroll, kinds, lateness, lease_body, now_micros, race_for_hosts,
    records, rfc3339, tomorrow, wait_for_status, whole_hosts,
};
use crate::support::{Options, TestApp};
use berth_store_postgres::scratch;
use reqwest::{Method, StatusCode};
use serde_json::json;

/// Runs `body` with the URL of a fresh database, dropping it afterwards even when `body` panics.
/// Without `BERTH_TEST_POSTGRES_URL`, prints a loud skip line naming `test` and returns.
pub(crate) async fn on_scratch_database<F, Fut>(test: &str, body: F)
where
    F: FnOnce(String) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Some(server) = scratch::server_url(test) else {
        return;
    };
    let (name, url) = scratch::create(&server).await;
    let outcome = tokio::spawn(body(url)).await;
    scratch::drop_all(&server, &[name]).await;
    outcome.expect("test body");
}

#[tokio::test]
async fn postgres_server_keeps_everything_across_a_restart() {
    on_scratch_database(
        "postgres_server_keeps_everything_across_a_restart",
        |url| async move {
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
        },
    )
    .await;
}

#[tokio::test]
async fn two_replicas_share_one_catalog_and_never_double_write() {
    on_scratch_database(
        "two_replicas_share_one_catalog_and_never_double_write",
        |url| async move {
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
        },
    )
    .await;
}

#[tokio::test]
async fn two_replicas_racing_for_the_last_units_admit_exactly_the_capacity() {
    let test = "two_replicas_racing_for_the_last_units_admit_exactly_the_capacity";
    on_scratch_database(test, |url| async move {
        let (first, second) = (replica(&url).await, replica(&url).await);
        crate::placement_allocations::race_for_the_last_units(&[&first, &second]).await;
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
}

/// The value of an unlabelled metric in `app`'s `/metrics`.
pub(crate) async fn metric(app: &TestApp, name: &str) -> u64 {
    metric_in(&app.metrics_text().await, name)
}

/// The value of an unlabelled metric in the Prometheus text `text`.
pub(crate) fn metric_in(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

/// A replica applies another's commits as they are announced, with no read of its own to make
/// it look, from the replication log and never by loading the catalog whole; `/metrics` shows it.
#[tokio::test]
async fn a_replica_follows_another_through_the_replication_log() {
    on_scratch_database(
        "a_replica_follows_another_through_the_replication_log",
        |url| async move {
            let (first, second) = (replica(&url).await, replica(&url).await);
            for n in 0..5 {
                let uuid = first.create_provider(&format!("cn{n}"), None).await;
                first.set_inventory(&uuid, 8, 1024).await;
            }
            let stored = metric(&first, "berth_catalog_stored_seq").await;
            assert_eq!(metric(&first, "berth_catalog_seq").await, stored);
            // Bounded: 500 polls of 10 ms.
            let mut followed = false;
            for _ in 0..500 {
                if metric(&second, "berth_catalog_seq").await == stored {
                    followed = true;
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert!(followed, "the second replica applied the commits by itself");
            assert_eq!(metric(&second, "berth_catalog_lag").await, 0);
            assert_eq!(
                metric(&second, "berth_change_log_applied_total").await,
                stored
            );
            assert_eq!(metric(&second, "berth_catalog_reloads_total").await, 0);
            assert_eq!(metric(&second, "berth_change_log_oldest_seq").await, 1);
            let (status, body) = second
                .get("/placement/resource_providers", Some("1.39"))
                .await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(body["resource_providers"].as_array().map(Vec::len), Some(5));
            let _ = first.stop().await;
            let _ = second.stop().await;
        },
    )
    .await;
}

/// A replica over the database at `url` that decides its own writes: the races between two of
/// them are the database's to serialize (forwarding to one writer is tested in `forwarding`).
pub(crate) async fn replica(url: &str) -> TestApp {
    replica_forwarding(url, false).await
}

/// A replica over the database at `url`, forwarding its writes to the writer or not.
pub(crate) async fn replica_forwarding(url: &str, forward_writes: bool) -> TestApp {
    TestApp::spawn_with(Options {
        database: Some(url.to_owned()),
        forward_writes: Some(forward_writes),
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn two_replicas_racing_for_hosts_admit_exactly_the_capacity() {
    let test = "two_replicas_racing_for_hosts_admit_exactly_the_capacity";
    on_scratch_database(test, |url| async move {
        let first = replica(&url).await;
        let second = replica(&url).await;
        for n in 0..4 {
            enroll(&first, &format!("r{n}"), "az1", 8).await;
        }
        let (admitted, refused) = race_for_hosts(&[&first, &second], 32, tomorrow()).await;
        assert_eq!(refused.len(), 28);
        check_race(&admitted, &refused, 4);
        for app in [&first, &second] {
            let (_, list) = app.get(LEASES, None).await;
            assert_eq!(list["leases"].as_array().expect("leases").len(), 4);
        }
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
}

#[tokio::test]
async fn two_replicas_racing_holds_waits_and_leases_never_over_commit() {
    let test = "two_replicas_racing_holds_waits_and_leases_never_over_commit";
    on_scratch_database(test, |url| async move {
        let first = replica(&url).await;
        let second = replica(&url).await;
        for n in 0..4 {
            enroll(&first, &format!("r{n}"), "az1", 8).await;
        }
        let holding =
            crate::holds::race_holds_waits_and_leases(&[&first, &second], 32, tomorrow()).await;
        crate::holds::check_no_over_commit(&holding, 4);
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
}

#[tokio::test]
async fn two_replicas_racing_for_the_last_of_a_share_never_exceed_its_cap() {
    let test = "two_replicas_racing_for_the_last_of_a_share_never_exceed_its_cap";
    on_scratch_database(test, |url| async move {
        let first = replica(&url).await;
        let second = replica(&url).await;
        crate::shares::race_for_the_last_of_a_share(&[&first, &second]).await;
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
}

#[tokio::test]
async fn two_replicas_racing_series_and_leases_never_over_commit() {
    let test = "two_replicas_racing_series_and_leases_never_over_commit";
    on_scratch_database(test, |url| async move {
        let first = replica(&url).await;
        let second = replica(&url).await;
        for n in 0..4 {
            enroll(&first, &format!("r{n}"), "az1", 8).await;
        }
        let t = tomorrow();
        let (series, singles) =
            crate::recurring::race_series_and_leases(&[&first, &second], t).await;
        for app in [&first, &second] {
            crate::recurring::check_series_race(app, t, series, singles).await;
        }
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
}

#[tokio::test]
async fn two_replicas_fire_each_lease_event_exactly_once() {
    let test = "two_replicas_fire_each_lease_event_exactly_once";
    on_scratch_database(test, |url| async move {
        let first = replica(&url).await;
        let second = replica(&url).await;
        enroll(&first, "h1", "az1", 8).await;
        enroll(&first, "h2", "az1", 8).await;
        // One lease written on each replica; each ends 1.5 to 2.5 seconds from now.
        let created = tokio::time::Instant::now();
        let end = rfc3339(now_micros() + 2_500_000);
        let mut ids = Vec::new();
        for app in [&first, &second] {
            let body = lease_body("brief", "now", &end, json!([whole_hosts(1, 1, "az1")]));
            ids.push(
                create(app, body).await["id"]
                    .as_str()
                    .expect("id")
                    .to_owned(),
            );
        }
        // Read from the replica that did not write it; both engines had their chance.
        for (id, reader) in ids.iter().zip([&second, &first]) {
            let deadline = created + std::time::Duration::from_millis(4000);
            let ended = wait_for_status(reader, id, "TERMINATED", deadline).await;
            assert!(ended.is_some(), "lease {id} ended within 4 s");
        }
        // One more poll of both engines: a second firing would show now.
        tokio::time::sleep(berth_app::LIFECYCLE_POLL + std::time::Duration::from_millis(200)).await;
        for id in &ids {
            let (from_first, from_second) = (records(&first, id).await, records(&second, id).await);
            assert_eq!(
                from_first, from_second,
                "one record, read from either replica"
            );
            let kinds = kinds(&from_first);
            for kind in ["lease.event.start_lease", "lease.event.end_lease"] {
                let fired = kinds.iter().filter(|k| *k == kind).count();
                assert_eq!(fired, 1, "{kind} fired exactly once: {kinds:?}");
                assert!(
                    lateness(&from_first, kind) <= 1_000_000,
                    "{kind} on time: {kinds:?}"
                );
            }
        }
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
}

#[tokio::test]
async fn both_backends_migrate_to_the_same_tables_and_columns() {
    on_scratch_database(
        "both_backends_migrate_to_the_same_tables_and_columns",
        |url| async move {
            let dir = tempfile::tempdir().expect("dir");
            let sqlite = berth_store_sqlite::SqliteStore::open(&dir.path().join("berth.db"))
                .await
                .expect("sqlite");
            let postgres = berth_store_postgres::PostgresStore::connect(&url)
                .await
                .expect("postgres");
            let lite = sqlite.schema_columns().await.expect("sqlite schema");
            let pg = postgres.schema_columns().await.expect("postgres schema");
            postgres.close().await;
            assert!(lite.len() > 40, "the schema was read: {lite:?}");
            assert_eq!(lite, pg, "one logical schema in both dialects");
        },
    )
    .await;
}

#[tokio::test]
async fn two_replicas_racing_for_ten_nodes_claim_each_once() {
    let test = "two_replicas_racing_for_ten_nodes_claim_each_once";
    on_scratch_database(test, |url| async move {
        let first = replica(&url).await;
        let second = replica(&url).await;
        let mut nodes = Vec::new();
        for n in 0..10 {
            nodes.push(enroll_node(&first, &format!("race-{n}"), "available").await);
        }
        let (won, conflicts) = race_for_nodes(&[&first, &second], &nodes).await;
        check_node_race(&won, conflicts, &nodes);
        for app in [&first, &second] {
            let (_, claims) = app.get(CLAIMS, None).await;
            assert_eq!(claims["reservations"].as_array().map(Vec::len), Some(10));
        }
        let _ = first.stop().await;
        let _ = second.stop().await;
    })
    .await;
}
