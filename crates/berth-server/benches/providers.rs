//! Placement provider benchmarks over real HTTP on loopback.
//!
//! A berth server is started in-process on `127.0.0.1:0` with a temporary SQLite database and is
//! driven with a keep-alive `reqwest` client, so every figure includes HTTP parsing, routing,
//! the store round trip that checks the catalog is current, filtering and JSON serialization.
//!
//! * `providers_query/*`: `GET /placement/resource_providers?resources=VCPU:2,MEMORY_MB:2048&
//!   member_of=!in:A,B` at 1.39 over 1,000 and 5,000 providers, plus two diagnostic variants at
//!   5,000 that return nothing: one that still runs the full filter (`filter_only`) and one that
//!   rejects every provider on its name (`name_miss`, the fixed cost of a request).
//! * `providers_create/*`: `POST /placement/resource_providers`, sequential over one keep-alive
//!   connection and from 8 concurrent clients; each iteration is one creation.
//!
//! Population is done through the same HTTP API and its duration is printed to stderr.
//!
//! Run: `cargo bench -p berth-server --bench providers` (smoke: `... -- --test`).

use berth_server::Running;
use berth_server::config::{Config, ServeArgs};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tempfile::TempDir;
use tokio::runtime::Runtime;

/// The microversion every request is sent at.
const MICROVERSION: &str = "placement 1.39";
/// Provider counts the query is measured at.
const SIZES: [usize; 2] = [1_000, 5_000];
/// Concurrent requests while populating.
const POPULATE_CONCURRENCY: usize = 8;
/// Requests timed once, outside criterion, to split the query's time into server work and transfer.
const DIAGNOSTIC_REQUESTS: usize = 30;
/// Concurrent clients in the concurrent creation benchmark.
const CREATE_CLIENTS: u64 = 8;
/// Aggregate A (fenced off by the query).
const AGGREGATE_A: &str = "a0000000-0000-4000-8000-00000000000a";
/// Aggregate B (fenced off by the query).
const AGGREGATE_B: &str = "b0000000-0000-4000-8000-00000000000b";

/// What provider `index` looks like: one in ten is in A, one in ten in B, one in ten too small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    InA,
    InB,
    Small,
    Plain,
}

impl Shape {
    fn of(index: usize) -> Shape {
        match index % 10 {
            0 => Shape::InA,
            1 => Shape::InB,
            2 => Shape::Small,
            _ => Shape::Plain,
        }
    }

    /// Whether the benchmarked query returns this provider.
    fn matches(self) -> bool {
        self == Shape::Plain
    }
}

fn query_url(base: &str, resources: &str, extra: &str) -> String {
    format!(
        "{base}/placement/resource_providers?resources={resources}&member_of=!in:{AGGREGATE_A},{AGGREGATE_B}{extra}"
    )
}

/// A keep-alive client that speaks placement 1.39; `max_idle` bounds its pooled connections.
fn client(max_idle: usize) -> reqwest::Client {
    let mut headers = HeaderMap::new();
    headers.insert(
        "OpenStack-API-Version",
        HeaderValue::from_static(MICROVERSION),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .no_proxy()
        .pool_max_idle_per_host(max_idle)
        .tcp_nodelay(true)
        .build()
        .expect("building the HTTP client")
}

/// A server on loopback over a fresh SQLite file, and a client for it.
struct Fixture {
    running: Option<Running>,
    base: String,
    client: reqwest::Client,
    providers: usize,
    _dir: TempDir,
}

impl Fixture {
    async fn start() -> Fixture {
        let dir = tempfile::tempdir().expect("temporary directory");
        let args = ServeArgs {
            listen: Some("127.0.0.1:0".to_owned()),
            database: Some(format!(
                "sqlite://{}",
                dir.path().join("berth.db").display()
            )),
            ..ServeArgs::default()
        };
        let config = Config::from_args(&args).expect("configuration");
        let running = berth_server::start(&config).await.expect("server starts");
        let addr = running.addr();
        assert!(
            addr.ip().is_loopback(),
            "the benchmark server stays on loopback"
        );
        Fixture {
            running: Some(running),
            base: format!("http://{addr}"),
            client: client(POPULATE_CONCURRENCY),
            providers: 0,
            _dir: dir,
        }
    }

    /// Grows the population to `target` providers over HTTP, then checks the query once.
    async fn grow_to(&mut self, target: usize) {
        if self.providers >= target {
            return;
        }
        let started = Instant::now();
        let from = self.providers;
        let next = Arc::new(AtomicU64::new(from as u64));
        let mut workers = Vec::new();
        for _ in 0..POPULATE_CONCURRENCY {
            let next = Arc::clone(&next);
            let client = self.client.clone();
            let base = self.base.clone();
            workers.push(tokio::spawn(async move {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if index >= target {
                        break;
                    }
                    add_provider(&client, &base, index).await;
                }
            }));
        }
        for worker in workers {
            worker.await.expect("population worker");
        }
        self.providers = target;
        let elapsed = started.elapsed();
        let requests = (from..target)
            .map(|i| {
                if matches!(Shape::of(i), Shape::InA | Shape::InB) {
                    3
                } else {
                    2
                }
            })
            .sum::<usize>();
        eprintln!(
            "populated providers {from}..{target} over HTTP in {:.2} s ({:.0} providers/s, {requests} requests, {:.0} requests/s, {POPULATE_CONCURRENCY} concurrent)",
            elapsed.as_secs_f64(),
            (target - from) as f64 / elapsed.as_secs_f64(),
            requests as f64 / elapsed.as_secs_f64(),
        );
        self.check(target).await;
    }

    /// Asserts the benchmarked query answers 200 with the expected providers.
    async fn check(&self, total: usize) {
        let expected = (0..total).filter(|&i| Shape::of(i).matches()).count();
        let body = get_json(&self.client, &self.query_url()).await;
        let found = body["resource_providers"]
            .as_array()
            .expect("resource_providers is a list");
        assert_eq!(found.len(), expected, "providers matching at {total}");
        assert!(found.iter().all(|p| {
            p["name"]
                .as_str()
                .and_then(|n| n.strip_prefix("bench-host-"))
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|i| Shape::of(i).matches())
        }));
        for url in [self.filter_only_url(), self.name_miss_url()] {
            let body = get_json(&self.client, &url).await;
            assert_eq!(body["resource_providers"], json!([]), "{url}");
        }
        // Where the time goes: axum serializes the whole body before it sends the headers, so
        // the time to the headers is the server's work and the rest is the transfer.
        let mut headers_after = Vec::new();
        let mut body_after = Vec::new();
        let mut size = 0;
        for _ in 0..DIAGNOSTIC_REQUESTS {
            let started = Instant::now();
            let response = self
                .client
                .get(self.query_url())
                .send()
                .await
                .expect("query");
            headers_after.push(started.elapsed());
            size = response.bytes().await.expect("body").len();
            body_after.push(started.elapsed());
        }
        eprintln!(
            "query at {total} providers: {expected} providers, {size} bytes of JSON; median of {DIAGNOSTIC_REQUESTS}: headers after {:.2} ms, body complete after {:.2} ms",
            median_ms(&mut headers_after),
            median_ms(&mut body_after),
        );
    }

    fn query_url(&self) -> String {
        query_url(&self.base, "VCPU:2,MEMORY_MB:2048", "")
    }

    /// The same filter work, an empty answer: every provider that passes the aggregate, VCPU
    /// and MEMORY_MB tests fails on DISK_GB, which is checked last.
    fn filter_only_url(&self) -> String {
        query_url(&self.base, "VCPU:2,MEMORY_MB:2048,DISK_GB:1000000", "")
    }

    /// An empty answer with almost no filter work: the name test rejects every provider first.
    fn name_miss_url(&self) -> String {
        query_url(&self.base, "VCPU:2,MEMORY_MB:2048", "&name=nonexistent")
    }

    async fn shutdown(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("clean shutdown");
        }
    }
}

fn median_ms(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    let response = client.get(url).send().await.expect("GET");
    let status = response.status();
    let body: Value = response.json().await.expect("JSON body");
    assert_eq!(status, 200, "GET {url}: {body}");
    body
}

async fn send_json(request: reqwest::RequestBuilder, what: &str) -> Value {
    let response = request.send().await.expect(what);
    let status = response.status();
    let body: Value = response.json().await.expect("JSON body");
    assert_eq!(status, 200, "{what}: {body}");
    body
}

fn generation(body: &Value) -> u64 {
    body.get("resource_provider_generation")
        .or_else(|| body.get("generation"))
        .and_then(Value::as_u64)
        .expect("a generation")
}

/// Creates provider `index` with its inventory and, for one in five, an aggregate.
async fn add_provider(client: &reqwest::Client, base: &str, index: usize) {
    let shape = Shape::of(index);
    let created = send_json(
        client
            .post(format!("{base}/placement/resource_providers"))
            .json(&json!({ "name": format!("bench-host-{index:05}") })),
        "create provider",
    )
    .await;
    let uuid = created["uuid"].as_str().expect("uuid").to_owned();
    let vcpu = match shape {
        Shape::Small => json!({"total": 1, "allocation_ratio": 1.0}),
        _ => json!({"total": 32, "allocation_ratio": 4.0}),
    };
    let provider = format!("{base}/placement/resource_providers/{uuid}");
    let inventories = send_json(
        client.put(format!("{provider}/inventories")).json(&json!({
            "resource_provider_generation": generation(&created),
            "inventories": {
                "VCPU": vcpu,
                "MEMORY_MB": {"total": 131_072},
                "DISK_GB": {"total": 1000},
            },
        })),
        "set inventories",
    )
    .await;
    let aggregate = match shape {
        Shape::InA => AGGREGATE_A,
        Shape::InB => AGGREGATE_B,
        Shape::Small | Shape::Plain => return,
    };
    send_json(
        client.put(format!("{provider}/aggregates")).json(&json!({
            "aggregates": [aggregate],
            "resource_provider_generation": generation(&inventories),
        })),
        "set aggregates",
    )
    .await;
}

/// One GET, body read in full; the status is checked so that errors cannot pass for speed.
async fn fetch(client: &reqwest::Client, url: &str) -> usize {
    let response = client.get(url).send().await.expect("GET");
    assert!(response.status().is_success(), "GET {url}");
    response.bytes().await.expect("body").len()
}

/// A fresh provider name for the creation benchmarks.
fn fresh_name(counter: &AtomicU64) -> String {
    format!("created-{:08}", counter.fetch_add(1, Ordering::Relaxed))
}

async fn create(client: &reqwest::Client, url: &str, name: String) {
    let response = client
        .post(url)
        .json(&json!({ "name": name }))
        .send()
        .await
        .expect("POST");
    assert!(response.status().is_success(), "POST {url}");
    black_box(response.bytes().await.expect("body"));
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn bench_query(c: &mut Criterion) {
    let rt = runtime();
    let mut fixture = rt.block_on(Fixture::start());
    let mut group = c.benchmark_group("providers_query");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    for size in SIZES {
        group.bench_function(format!("{size}"), |b| {
            rt.block_on(fixture.grow_to(size));
            let url = fixture.query_url();
            let client = &fixture.client;
            b.to_async(&rt).iter(|| fetch(client, &url));
        });
    }
    let size = SIZES[SIZES.len() - 1];
    group.bench_function(format!("{size}_filter_only"), |b| {
        rt.block_on(fixture.grow_to(size));
        let url = fixture.filter_only_url();
        let client = &fixture.client;
        b.to_async(&rt).iter(|| fetch(client, &url));
    });
    group.bench_function(format!("{size}_name_miss"), |b| {
        rt.block_on(fixture.grow_to(size));
        let url = fixture.name_miss_url();
        let client = &fixture.client;
        b.to_async(&rt).iter(|| fetch(client, &url));
    });
    group.finish();
    rt.block_on(fixture.shutdown());
}

fn bench_create(c: &mut Criterion) {
    let rt = runtime();
    let fixture = rt.block_on(Fixture::start());
    let url = format!("{}/placement/resource_providers", fixture.base);
    let counter = Arc::new(AtomicU64::new(0));
    let mut group = c.benchmark_group("providers_create");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(1));

    // One client that keeps one connection: every creation waits for the previous one.
    let sequential = client(1);
    group.bench_function("sequential", |b| {
        b.to_async(&rt)
            .iter(|| create(&sequential, &url, fresh_name(&counter)));
    });

    // Eight clients, one connection each; a batch of `iters` creations is split among them and
    // timed from the first request to the last answer.
    let clients: Vec<reqwest::Client> = (0..CREATE_CLIENTS).map(|_| client(1)).collect();
    group.bench_function(format!("concurrent_{CREATE_CLIENTS}"), |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let clients = clients.clone();
            let url = url.clone();
            let counter = Arc::clone(&counter);
            async move {
                let started = Instant::now();
                let mut tasks = Vec::new();
                for (k, client) in (0..CREATE_CLIENTS).zip(clients) {
                    let share = iters / CREATE_CLIENTS + u64::from(k < iters % CREATE_CLIENTS);
                    let url = url.clone();
                    let counter = Arc::clone(&counter);
                    tasks.push(tokio::spawn(async move {
                        for _ in 0..share {
                            create(&client, &url, fresh_name(&counter)).await;
                        }
                    }));
                }
                for task in tasks {
                    task.await.expect("creation task");
                }
                started.elapsed()
            }
        });
    });
    group.finish();
    eprintln!(
        "created {} providers in the creation benchmarks",
        counter.load(Ordering::Relaxed)
    );
    rt.block_on(fixture.shutdown());
}

criterion_group!(benches, bench_query, bench_create);
criterion_main!(benches);
