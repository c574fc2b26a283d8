//! Notification delivery throughput to a local receiver.
//!
//! A berth server is started in-process on `127.0.0.1:0` over a temporary SQLite database, with
//! a receiver (axum, same process, `127.0.0.1:0`, allowed with `--callback-allow`) that answers
//! 200 to every POST and counts them. One reservation subscription (`inputFilter: "all"`, with a secret, so every
//! notification is signed) is made; then N Promise reservations are created over HTTP (16
//! clients), each one outbox entry and so one notification. The figure is N divided by the time
//! from the first creation to the last notification received: expansion of the outbox, the
//! durable delivery records, the signed POSTs (at most 16 in flight) and the durable record of
//! each outcome, end to end. Creation alone is timed too.
//!
//! Run: `cargo bench -p berth-server --bench notifications` (`-- --test`: 200 notifications).

use axum::extract::State;
use berth_server::config::{Config, ServeArgs};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Concurrent clients creating reservations.
const CLIENTS: usize = 16;
/// Longest the benchmark waits for the last notification.
const DEADLINE: Duration = Duration::from_secs(300);

async fn count(State(received): State<Arc<AtomicUsize>>) -> &'static str {
    received.fetch_add(1, Ordering::Relaxed);
    "ok"
}

async fn run(n: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ServeArgs {
        listen: Some("127.0.0.1:0".to_owned()),
        database: Some(format!(
            "sqlite://{}",
            dir.path().join("berth.db").display()
        )),
        // The receiver listens on loopback, which callbacks may not reach by default.
        callback_allow: vec!["127.0.0.0/8".to_owned()],
        ..ServeArgs::default()
    };
    let config = Config::from_args(&args).expect("configuration");
    let running = berth_server::start(&config).await.expect("server starts");
    let base = format!("http://{}", running.addr());
    let received = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let hook = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(count))
        .with_state(Arc::clone(&received));
    let receiver = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        client.post(format!("{base}{path}")).json(&body).send()
    };
    let made = post(
        "/promise/reservation/subscribe",
        json!({"inputFilter": "all", "callbackUri": hook, "authentication": {"secret": "bench"}}),
    )
    .await
    .expect("subscribe");
    assert!(made.status().is_success());
    let host = json!({"name": "cn1", "vcpus": 100_000, "memory_mb": 100_000_000, "local_gb": 100});
    assert!(
        post("/reservation/v1/os-hosts", host)
            .await
            .expect("host")
            .status()
            .is_success()
    );
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (client, base, next) = (client.clone(), base.clone(), Arc::clone(&next));
        clients.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n {
                let body = json!({"startTime": "2035-01-01T00:00:00Z", "endTime": "2035-01-02T00:00:00Z",
                                  "computePoolReservation": {"numCpuCores": 1, "numVcInstances": 1,
                                                             "virtualMemSize": 64}});
                let answer = client
                    .post(format!("{base}/promise/reservation/compute/create"))
                    .json(&body)
                    .send()
                    .await
                    .expect("create");
                assert!(answer.status().is_success(), "{}", answer.status());
            }
        });
    }
    while clients.join_next().await.is_some() {}
    let created = started.elapsed();
    while received.load(Ordering::Relaxed) < n {
        assert!(
            started.elapsed() < DEADLINE,
            "notifications did not all arrive in time"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let delivered = started.elapsed();
    eprintln!(
        "notifications: {n} reservations created in {:.2} s ({:.0}/s); {n} notifications delivered \
         {:.2} s after the first creation: {:.0} notifications/s end to end",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        delivered.as_secs_f64(),
        n as f64 / delivered.as_secs_f64(),
    );
    receiver.abort();
    running.shutdown().await.expect("shutdown");
}

fn main() {
    let smoke = std::env::args().any(|arg| arg == "--test");
    let sizes: &[usize] = if smoke { &[200] } else { &[2_000, 10_000] };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for &n in sizes {
        runtime.block_on(run(n));
    }
}
