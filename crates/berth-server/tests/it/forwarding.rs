//! Replicas over one PostgreSQL database forward their writes to the one that holds the
//! writer's term, decide them themselves when it is gone, and keep each caller's own address
//! for the writer to judge. Runs when `BERTH_TEST_POSTGRES_URL` is set.

use crate::placement_allocations::{dict, race_for_the_last_units};
use crate::postgres::{metric, metric_in, on_scratch_database, replica_forwarding};
use crate::support::{Options, TestApp};
use berth_server::auth::AuthMode;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

/// Waits (at most 10 s, polling every 20 ms) until `name` in `app`'s `/metrics` is `value`.
async fn until_metric(app: &TestApp, name: &str, value: u64) {
    for _ in 0..500 {
        if metric(app, name).await == value {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{name} never reached {value} at {}", app.base);
}

/// A provider `name` created at `app` as a replica would forward it, presenting `secret`.
async fn forwarded_to(app: &TestApp, secret: &str, name: &str) -> reqwest::Response {
    app.client
        .post(format!("{}/placement/resource_providers", app.base))
        .header("x-berth-forwarded", secret)
        .header("x-berth-forwarded-for", "10.1.2.3")
        .json(&json!({ "name": name }))
        .send()
        .await
        .expect("send")
}

/// Allocates one VCPU of `rp` at `app` to the consumer numbered `consumer`.
async fn allocate_one_vcpu(app: &TestApp, rp: &str, consumer: u128) -> StatusCode {
    let consumer = uuid::Uuid::from_u128(consumer);
    let (status, _) = app
        .call(
            reqwest::Method::PUT,
            &format!("/placement/allocations/{consumer}"),
            Some("1.38"),
            Some(dict(rp, json!({"VCPU": 1}), serde_json::Value::Null)),
        )
        .await;
    status
}

/// Allocates one VCPU each to `count` consumers numbered from `first` at `app`: the first
/// `capacity` are admitted, the rest refused.
async fn allocate_past_capacity(app: &TestApp, rp: &str, first: u128, count: u128, capacity: u128) {
    for n in 0..count {
        let expected = if n < capacity {
            StatusCode::NO_CONTENT
        } else {
            StatusCode::CONFLICT
        };
        assert_eq!(
            allocate_one_vcpu(app, rp, first + n).await,
            expected,
            "allocation {n}"
        );
    }
}

/// A replica over the database at `url`, forwarding its writes (the default).
async fn replica(url: &str) -> TestApp {
    replica_forwarding(url, true).await
}

/// Two replicas, one of them the writer, racing for the last units: the follower's writes are
/// forwarded and exactly the capacity is admitted.
#[tokio::test]
async fn two_forwarding_replicas_racing_for_the_last_units_admit_exactly_the_capacity() {
    let test = "two_forwarding_replicas_racing_for_the_last_units_admit_exactly_the_capacity";
    on_scratch_database(test, |url| async move {
        let writer = replica(&url).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = replica(&url).await;
        race_for_the_last_units(&[&follower, &writer]).await;
        // The provider, its inventory and the follower's 32 allocations.
        assert_eq!(metric(&follower, "berth_writes_forwarded_total").await, 34);
        let _ = writer.stop().await;
        let _ = follower.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_write_sent_to_any_replica_is_decided_by_the_writer_and_by_itself_when_the_writer_is_gone()
 {
    let test = "a_write_sent_to_any_replica_is_decided_by_the_writer_and_by_itself_when_the_writer_is_gone";
    on_scratch_database(test, |url| async move {
        let writer = replica(&url).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = replica(&url).await;
        assert_eq!(metric(&follower, "berth_writer_term_held").await, 0);

        // Writes sent to the follower are forwarded, answered as the writer answers them, and
        // read back at once from the follower.
        let rp = follower.create_provider("cn1", None).await;
        follower.set_inventory(&rp, 4, 1024).await;
        allocate_past_capacity(&follower, &rp, 0xf000, 6, 4).await;
        let (_, usages) = follower
            .get(
                &format!("/placement/resource_providers/{rp}/usages"),
                Some("1.39"),
            )
            .await;
        assert_eq!(
            usages["usages"]["VCPU"], 4,
            "the follower reads the writer's commits at once"
        );
        // Provider, inventory (a generation read, then a PUT) and six allocations.
        let forwarded = metric(&follower, "berth_writes_forwarded_total").await;
        assert_eq!(forwarded, 8, "every write went to the writer");
        assert_eq!(
            metric(&writer, "berth_writes_received_total").await,
            forwarded
        );
        assert_eq!(
            metric(&writer, "berth_writes_forwarded_total").await,
            0,
            "the writer forwards nothing"
        );
        // All of them over one link.
        assert_eq!(
            metric(&follower, "berth_forward_links_opened_total").await,
            1
        );
        assert_eq!(
            metric(&follower, "berth_writes_forwarded_over_http_total").await,
            0
        );

        // A query sent by POST is answered where it arrives.
        let (status, _) = follower.post("/promise/query-reservation", json!({})).await;
        assert_ne!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            metric(&follower, "berth_writes_forwarded_total").await,
            forwarded
        );

        // A request that presents a secret the replica does not hold is refused untouched.
        let forged = forwarded_to(&writer, "not-the-secret", "forged").await;
        assert_eq!(forged.status(), StatusCode::MISDIRECTED_REQUEST);
        assert!(forged.headers().contains_key("x-berth-not-writer"));
        let (_, providers) = writer
            .get("/placement/resource_providers?name=forged", Some("1.39"))
            .await;
        assert_eq!(
            providers["resource_providers"].as_array().map(Vec::len),
            Some(0)
        );

        // The writer stops: the follower decides its writes itself at once, then takes the term.
        let _ = writer.stop().await;
        let (status, _) = follower
            .call(
                reqwest::Method::DELETE,
                &format!("/placement/allocations/{}", uuid::Uuid::from_u128(0xf000)),
                None,
                None,
            )
            .await;
        assert_eq!(
            status,
            StatusCode::NO_CONTENT,
            "decided here while the writer is gone"
        );
        assert!(metric(&follower, "berth_writes_forward_fallbacks_total").await >= 1);
        until_metric(&follower, "berth_writer_term_held", 1).await;
        let (_, usages) = follower
            .get(
                &format!("/placement/resource_providers/{rp}/usages"),
                Some("1.39"),
            )
            .await;
        assert_eq!(usages["usages"]["VCPU"], 3);
        assert_eq!(
            metric(&follower, "berth_writes_forward_unknown_total").await,
            0
        );
        let _ = follower.stop().await;
    })
    .await;
}

/// A follower links to the writer before it forwards anything, and the writer sends each of
/// its commits over the link: the follower applies them without reading the replication log
/// (the log brings in any it misses), ends with the writer's catalog, and reloads nothing.
#[tokio::test]
async fn a_follower_applies_the_commits_the_writer_sends_over_the_link() {
    let test = "a_follower_applies_the_commits_the_writer_sends_over_the_link";
    on_scratch_database(test, |url| async move {
        let writer = replica(&url).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = replica(&url).await;
        until_metric(&follower, "berth_forward_links_opened_total", 1).await;
        for n in 0..10 {
            writer.create_provider(&format!("cn{n}"), None).await;
        }
        let stored = metric(&writer, "berth_catalog_stored_seq").await;
        until_metric(&follower, "berth_catalog_seq", stored).await;
        let text = follower.metrics_text().await;
        let sent = metric_in(&text, "berth_change_log_sent_applied_total");
        assert!(
            (1..=stored).contains(&sent),
            "the writer's commits came over the link: {sent}"
        );
        assert_eq!(metric_in(&text, "berth_change_log_applied_total"), stored);
        assert_eq!(metric_in(&text, "berth_catalog_reloads_total"), 0);
        assert_eq!(metric_in(&text, "berth_writes_forwarded_total"), 0);
        let (_, list) = follower
            .get("/placement/resource_providers", Some("1.39"))
            .await;
        assert_eq!(
            list["resource_providers"].as_array().map(Vec::len),
            Some(10)
        );
        // Fed by the link, the follower does not listen for the database's announcements; the
        // writer, fed by none, does.
        assert_eq!(metric_in(&text, "berth_replica_fed_by_link"), 1);
        assert_eq!(metric(&writer, "berth_replica_fed_by_link").await, 0);
        // The writer sends nothing to a replica that does not follow it over a link.
        let apart = replica_forwarding(&url, false).await;
        writer.create_provider("cn10", None).await;
        let stored = metric(&writer, "berth_catalog_stored_seq").await;
        until_metric(&apart, "berth_catalog_seq", stored).await;
        assert_eq!(
            metric(&apart, "berth_change_log_sent_applied_total").await,
            0
        );
        assert_eq!(metric(&apart, "berth_replica_fed_by_link").await, 0);
        // A commit no link brings (that replica decides its writes itself) still reaches the
        // follower, by its check of the stored sequence, without a read there.
        apart.create_provider("cn11", None).await;
        let stored = metric(&apart, "berth_catalog_stored_seq").await;
        until_metric(&follower, "berth_catalog_seq", stored).await;
        // The writer's next commit, past the one its link did not bring, is applied too.
        writer.create_provider("cn12", None).await;
        let stored = metric(&writer, "berth_catalog_stored_seq").await;
        until_metric(&follower, "berth_catalog_seq", stored).await;
        assert_eq!(metric(&follower, "berth_catalog_reloads_total").await, 0);
        for app in [writer, follower, apart] {
            let _ = app.stop().await;
        }
    })
    .await;
}

/// A forwarded write is answered under the writer's request id: the id in the answer's header
/// is the one its error body names (and the writer's log), not one the follower made up.
#[tokio::test]
async fn a_forwarded_write_is_answered_under_the_writers_request_id() {
    let test = "a_forwarded_write_is_answered_under_the_writers_request_id";
    on_scratch_database(test, |url| async move {
        let writer = replica(&url).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = replica(&url).await;
        let rp = follower.create_provider("cn1", None).await;
        follower.set_inventory(&rp, 1, 1024).await;
        let consumer = uuid::Uuid::from_u128(0xf1);
        let answer = follower
            .client
            .put(format!(
                "{}/placement/allocations/{consumer}",
                follower.base
            ))
            .header("openstack-api-version", "placement 1.38")
            .json(&dict(&rp, json!({"VCPU": 2}), serde_json::Value::Null))
            .send()
            .await
            .expect("send");
        assert_eq!(answer.status(), StatusCode::CONFLICT);
        let header = answer
            .headers()
            .get("x-openstack-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body: serde_json::Value = answer.json().await.expect("json");
        assert_eq!(
            header.as_deref(),
            body["errors"][0]["request_id"].as_str(),
            "{body}"
        );
        assert_eq!(metric(&follower, "berth_writes_forwarded_total").await, 3);
        // An answer made where the request arrives keeps that replica's own id.
        let answer = follower
            .client
            .get(format!(
                "{}/placement/resource_providers/{rp}",
                follower.base
            ))
            .header("openstack-api-version", "placement 1.39")
            .send()
            .await
            .expect("send");
        assert!(
            answer
                .headers()
                .get("x-openstack-request-id")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|id| id.starts_with("req-") && Some(id) != header.as_deref())
        );
        let _ = follower.stop().await;
        let _ = writer.stop().await;
    })
    .await;
}

/// The engines' writes (expanding the outbox, delivering notifications, firing lifecycle events)
/// are the term holder's: a replica standing by begins no write transaction of its own while the
/// writer takes the load, and each notification is posted once. When the writer is gone the
/// follower takes the term and its engines act at once.
#[tokio::test]
async fn engines_run_on_the_writer_and_a_follower_stands_by_until_the_writer_is_gone() {
    const RESERVATIONS: usize = 120;
    let test = "engines_run_on_the_writer_and_a_follower_stands_by_until_the_writer_is_gone";
    on_scratch_database(test, |url| async move {
        let with_loopback_callbacks = || Options {
            database: Some(url.clone()),
            callback_allow: vec![crate::support::LOOPBACK.to_owned()],
            ..Options::default()
        };
        let writer = TestApp::spawn_with(with_loopback_callbacks()).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = TestApp::spawn_with(with_loopback_callbacks()).await;
        until_metric(&follower, "berth_engines_standing_by", 1).await;
        assert_eq!(metric(&writer, "berth_engines_standing_by").await, 0);
        let (hook, received, server) = crate::notifications::receiver(0).await;
        let (status, _) = follower
            .post(
                "/promise/reservation/subscribe",
                json!({"inputFilter": "all", "callbackUri": hook}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        for host in ["cn1", "cn2"] {
            crate::blazar_leases::enroll(&follower, host, "az1", 1_024).await;
        }
        let began = metric(&follower, "berth_write_transactions_total").await;

        // Reservations made through both replicas by four clients at once for a while (so that
        // records keep arriving between the notifiers' passes): every write is the writer's,
        // and so is every notification (one per reservation, posted once).
        let create = || {
            json!({"startTime": crate::blazar_leases::rfc3339(
                       crate::blazar_leases::now_micros() + 3_600_000_000),
                   "computePoolReservation": {"numCpuCores": 1, "numVcInstances": 1,
                                              "virtualMemSize": 64}})
        };
        let client = |first: usize| {
            let (writer, follower) = (&writer, &follower);
            async move {
                for n in 0..RESERVATIONS / 4 {
                    let app = if (first + n).is_multiple_of(2) {
                        writer
                    } else {
                        follower
                    };
                    let (status, made) = app
                        .post("/promise/reservation/compute/create", create())
                        .await;
                    assert_eq!(status, StatusCode::CREATED, "{made}");
                }
            }
        };
        tokio::join!(client(0), client(1), client(2), client(3));
        crate::notifications::wait_until(&received, |got| got.len() >= RESERVATIONS).await;
        // Longer than several notifier passes of both replicas.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let got = received.got.lock().expect("lock").clone();
        assert_eq!(got.len(), RESERVATIONS, "each notification posted once");
        assert_eq!(
            metric(&follower, "berth_write_transactions_total").await,
            began,
            "the follower began no write transaction of its own"
        );
        assert_eq!(
            metric(&follower, "berth_change_log_applied_under_lock_total").await,
            0
        );

        // The writer stops: the follower takes the term, stops standing by, and notifies at once.
        let _ = writer.stop().await;
        until_metric(&follower, "berth_writer_term_held", 1).await;
        until_metric(&follower, "berth_engines_standing_by", 0).await;
        let (status, made) = follower
            .post("/promise/reservation/compute/create", create())
            .await;
        assert_eq!(status, StatusCode::CREATED, "{made}");
        crate::notifications::wait_until(&received, |got| got.len() > RESERVATIONS).await;
        assert!(metric(&follower, "berth_write_transactions_total").await > began);
        let _ = follower.stop().await;
        server.abort();
    })
    .await;
}

/// In `headers` mode the writer judges a forwarded request's identity headers by the address of
/// the caller who sent it to the follower, never by the follower's own address.
#[tokio::test]
async fn a_forwarded_request_is_trusted_as_its_caller_is_not_as_the_replica_that_forwarded_it() {
    let test =
        "a_forwarded_request_is_trusted_as_its_caller_is_not_as_the_replica_that_forwarded_it";
    on_scratch_database(test, |url| async move {
        // Both replicas believe identity headers from 127.0.0.1 alone, which is also where the
        // follower forwards from.
        let options = || Options {
            database: Some(url.clone()),
            auth: Some(AuthMode::Headers),
            trusted_proxies: vec!["127.0.0.1/32".to_owned()],
            ..Options::default()
        };
        let writer = TestApp::spawn_with(options()).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = TestApp::spawn_with(options()).await;
        let send = |from: &'static str, name: &'static str| {
            let client = reqwest::Client::builder()
                .local_address(from.parse::<std::net::IpAddr>().expect("ip"))
                .build()
                .expect("client");
            let url = format!("{}/placement/resource_providers", follower.base);
            async move {
                client
                    .post(url)
                    .header("OpenStack-API-Version", "placement 1.20")
                    .header("x-project-id", "admin")
                    .header("x-user-id", "admin")
                    .header("x-roles", "admin")
                    .json(&json!({"name": name}))
                    .send()
                    .await
                    .expect("send")
                    .status()
            }
        };
        assert_eq!(send("127.0.0.1", "trusted").await, StatusCode::OK);
        assert_eq!(
            send("127.0.0.2", "untrusted").await,
            StatusCode::UNAUTHORIZED,
            "a caller the replicas do not trust stays untrusted through the forward"
        );
        assert_eq!(metric(&follower, "berth_writes_forwarded_total").await, 2);
        let _ = follower.stop().await;
        let _ = writer.stop().await;
    })
    .await;
}

/// Placement served at the root of a follower's own listener keeps its root links when the
/// writer decides the request: the forward says where it was mounted.
#[tokio::test]
async fn a_write_forwarded_from_placement_at_the_root_is_answered_with_root_links() {
    let test = "a_write_forwarded_from_placement_at_the_root_is_answered_with_root_links";
    on_scratch_database(test, |url| async move {
        let writer = replica(&url).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let args = berth_server::config::ServeArgs {
            listen: Some("127.0.0.1:0".into()),
            placement_listen: Some("127.0.0.1:0".into()),
            database: Some(url.clone()),
            ..berth_server::config::ServeArgs::default()
        };
        let config = berth_server::config::Config::from_args(&args).expect("config");
        let follower = berth_server::start(&config).await.expect("start");
        let root = format!(
            "http://{}",
            follower.placement_addr().expect("Placement's listener")
        );
        let answer = reqwest::Client::new()
            .post(format!("{root}/resource_providers"))
            .header("OpenStack-API-Version", "placement 1.0")
            .json(&json!({"name": "at-the-root"}))
            .send()
            .await
            .expect("send");
        assert_eq!(answer.status(), StatusCode::CREATED);
        let location = answer.headers()["location"]
            .to_str()
            .expect("ascii")
            .to_owned();
        assert_eq!(
            location.rsplit_once('/').map(|(base, _)| base),
            Some(format!("{root}/resource_providers").as_str()),
            "the caller's host and a root link, not under /placement"
        );
        let metrics = reqwest::get(format!("http://{}/metrics", follower.addr()))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text");
        assert_eq!(metric_in(&metrics, "berth_writes_forwarded_total"), 1);
        follower.shutdown().await.expect("shutdown");
        let _ = writer.stop().await;
    })
    .await;
}

/// Whatever answers at the advertised address without being the writer (another service took
/// the port) never answers for berth: the follower decides the write itself.
#[tokio::test]
async fn an_answer_that_does_not_come_from_the_writer_is_dropped_and_the_write_decided_here() {
    let test = "an_answer_that_does_not_come_from_the_writer_is_dropped_and_the_write_decided_here";
    on_scratch_database(test, |url| async move {
        use berth_store::Store as _;
        // Something that is not berth, answering 200 to everything.
        let impostor = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let impostor_url = format!("http://{}", impostor.local_addr().expect("addr"));
        let app = axum::Router::new().fallback(|| async { "ok" });
        let serving = tokio::spawn(async move { axum::serve(impostor, app).await });
        // It holds the writer's term for a minute, as a stale or mistaken advertisement would.
        let store = berth_store_postgres::PostgresStore::connect(&url)
            .await
            .expect("store");
        let bid = berth_store::WriterBid {
            holder: "impostor",
            url: &impostor_url,
            secret: "s",
        };
        let term = store
            .writer_term(Some(bid), Duration::from_secs(60))
            .await
            .expect("bid");
        assert_eq!(term.map(|t| t.holder).as_deref(), Some("impostor"));
        let follower = replica(&url).await;
        let (status, body) = follower
            .call(
                reqwest::Method::POST,
                "/placement/resource_providers",
                Some("1.20"),
                Some(json!({"name": "decided-here"})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "berth's own answer: {body}");
        assert_eq!(body["name"], "decided-here");
        let (_, found) = follower
            .get(
                "/placement/resource_providers?name=decided-here",
                Some("1.39"),
            )
            .await;
        assert_eq!(
            found["resource_providers"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(metric(&follower, "berth_writes_forwarded_total").await, 0);
        assert_eq!(
            metric(&follower, "berth_writes_forward_fallbacks_total").await,
            1
        );
        let _ = follower.stop().await;
        store.close().await;
        serving.abort();
    })
    .await;
}

/// A berth that takes no forwarded writes (one over SQLite, which a replica's old address may
/// now reach) refuses a forwarded request untouched, whatever its secret, so that a replica's
/// write is never decided in another database; its own callers' writes go on as ever.
#[tokio::test]
async fn a_berth_without_replicas_refuses_forwarded_writes_untouched() {
    let app = TestApp::spawn().await;
    let forwarded = forwarded_to(&app, "any-secret", "forwarded").await;
    assert_eq!(forwarded.status(), StatusCode::MISDIRECTED_REQUEST);
    assert!(forwarded.headers().contains_key("x-berth-not-writer"));
    let (status, _) = app
        .post("/placement/resource_providers", json!({"name": "direct"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, providers) = app.get("/placement/resource_providers", Some("1.39")).await;
    let names: Vec<&str> = providers["resource_providers"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["direct"]);
}

/// A pass-through to `target` (set once it is known) that, as many proxies do, drops the
/// headers of one connection, `Upgrade` among them, so no link passes through it.
async fn proxy_without_upgrades() -> (
    String,
    std::sync::Arc<std::sync::OnceLock<String>>,
    tokio::task::JoinHandle<()>,
) {
    use axum::body::Body;
    use axum::extract::Request;
    use axum::response::Response;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let target = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let to = std::sync::Arc::clone(&target);
    let client = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |request: Request| {
        let (to, client) = (std::sync::Arc::clone(&to), client.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX).await.expect("body");
            let mut headers = parts.headers.clone();
            for hop in ["connection", "upgrade", "content-length", "keep-alive"] {
                headers.remove(hop);
            }
            let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
            let answer = client
                .request(parts.method, format!("{}{path}", to.get().expect("target")))
                .headers(headers)
                .body(body)
                .send()
                .await
                .expect("pass on");
            let mut response = Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                if name != "content-length" && name != "transfer-encoding" {
                    response = response.header(name, value);
                }
            }
            let body = answer.bytes().await.expect("answer");
            response.body(Body::from(body)).expect("response")
        }
    });
    let serving = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("proxy");
    });
    (url, target, serving)
}

/// A writer reached through a proxy that passes no upgrade takes no link: the follower
/// forwards each write as an HTTP exchange of its own, answered as the writer answers it.
#[tokio::test]
async fn a_writer_reached_through_a_proxy_that_passes_no_upgrade_takes_the_writes_over_http() {
    let test = "a_writer_reached_through_a_proxy_that_passes_no_upgrade_takes_the_writes_over_http";
    on_scratch_database(test, |url| async move {
        let (proxy_url, target, serving) = proxy_without_upgrades().await;
        let writer = TestApp::spawn_with(Options {
            database: Some(url.clone()),
            advertise_url: Some(proxy_url),
            ..Options::default()
        })
        .await;
        target.set(writer.base.clone()).expect("set once");
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = replica(&url).await;
        let rp = follower.create_provider("cn1", None).await;
        follower.set_inventory(&rp, 2, 1024).await;
        allocate_past_capacity(&follower, &rp, 0xe000, 3, 2).await;
        // Provider, inventory (a generation read, then a PUT) and three allocations.
        assert_eq!(metric(&follower, "berth_writes_forwarded_total").await, 5);
        assert_eq!(
            metric(&follower, "berth_writes_forwarded_over_http_total").await,
            5
        );
        assert_eq!(
            metric(&follower, "berth_forward_links_opened_total").await,
            0
        );
        // And the request for a link, which reached the writer as a plain `GET /` without its
        // `Upgrade` and was answered as one.
        assert_eq!(metric(&writer, "berth_writes_received_total").await, 6);
        let _ = follower.stop().await;
        let _ = writer.stop().await;
        serving.abort();
    })
    .await;
}

/// A writer that stops while writes stream over its link loses none and decides none twice:
/// each write is answered as decided (by the writer, or by the follower once the writer said
/// goodbye) or, at most, as of unknown outcome, and what the database holds is what was
/// answered.
#[tokio::test]
async fn a_writer_stopping_under_a_stream_of_forwarded_writes_answers_each_one_once() {
    let test = "a_writer_stopping_under_a_stream_of_forwarded_writes_answers_each_one_once";
    on_scratch_database(test, |url| async move {
        let writer = replica(&url).await;
        until_metric(&writer, "berth_writer_term_held", 1).await;
        let follower = std::sync::Arc::new(replica(&url).await);
        let rp = follower.create_provider("cn1", None).await;
        follower.set_inventory(&rp, 1000, 1024).await;
        // Sixteen clients write until four writes after the writer stopped (60 at most each,
        // within the 1,000 units).
        let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clients: Vec<_> = (0..16u128)
            .map(|client| {
                let follower = std::sync::Arc::clone(&follower);
                let stopped = std::sync::Arc::clone(&stopped);
                let rp = rp.clone();
                tokio::spawn(async move {
                    let mut statuses = Vec::new();
                    let mut after_stop = 0;
                    for n in 0..60u128 {
                        if stopped.load(std::sync::atomic::Ordering::SeqCst) {
                            after_stop += 1;
                            if after_stop > 4 {
                                break;
                            }
                        }
                        let consumer = 0xd000 + client * 100 + n;
                        statuses.push(allocate_one_vcpu(&follower, &rp, consumer).await);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    statuses
                })
            })
            .collect();
        // The writer stops once the stream runs through the link.
        for _ in 0..500 {
            if metric(&follower, "berth_writes_forwarded_total").await >= 20 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = writer.stop().await;
        stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut statuses = Vec::new();
        for client in clients {
            statuses.extend(client.await.expect("client"));
        }
        let done = statuses
            .iter()
            .filter(|s| **s == StatusCode::NO_CONTENT)
            .count();
        let unknown = statuses
            .iter()
            .filter(|s| **s == StatusCode::SERVICE_UNAVAILABLE)
            .count();
        assert_eq!(
            done + unknown,
            statuses.len(),
            "every write decided or of unknown outcome: {statuses:?}"
        );
        assert!(
            metric(&follower, "berth_writes_forwarded_total").await > 2,
            "some writes went to the writer before it stopped"
        );
        assert!(metric(&follower, "berth_writes_forward_fallbacks_total").await >= 1);
        eprintln!(
            "DEBUG done {done} unknown {unknown} forwarded {} fallbacks {}",
            metric(&follower, "berth_writes_forwarded_total").await,
            metric(&follower, "berth_writes_forward_fallbacks_total").await
        );
        let (_, usages) = follower
            .get(
                &format!("/placement/resource_providers/{rp}/usages"),
                Some("1.39"),
            )
            .await;
        let used = usages["usages"]["VCPU"].as_u64().expect("VCPU used") as usize;
        assert!(
            (done..=done + unknown).contains(&used),
            "{used} units used, {done} writes answered done and {unknown} unknown"
        );
        if let Ok(follower) = std::sync::Arc::try_unwrap(follower) {
            let _ = follower.stop().await;
        }
    })
    .await;
}
