//! A crash campaign: the `berth` binary killed with SIGKILL at random moments while eight
//! clients write, restarted, and checked after every restart: every acknowledged allocation and
//! lease is there, a lease create whose answer was lost, retried with its `Idempotency-Key`,
//! answers with the one lease it made (or makes it), no lease exists twice, and no provider is
//! used beyond its capacity. On SQLite always, and on PostgreSQL when `BERTH_TEST_POSTGRES_URL`
//! is set (otherwise that test says loudly that it skipped). `BERTH_CRASH_KILLS` sets the number
//! of kills per backend (100 by default; `BERTH_CRASH_KILLS=10000` is the long campaign of
//! docs/robustness.md).

use crate::blazar_leases::{LEASES, lease_body, now_micros, rfc3339};
use crate::support::free_port;
use berth_store_postgres::scratch;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const KILLS_DEFAULT: usize = 100;
const WRITERS: usize = 8;
const DAY: i64 = 86_400_000_000;
/// The provider the allocations go to: large enough never to refuse one.
const PROVIDER: &str = "c4a5e000-0000-4000-8000-000000000001";

fn kills() -> usize {
    std::env::var("BERTH_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(KILLS_DEFAULT)
}

/// A `berth` process, killed (SIGKILL) and reaped when dropped.
struct Server {
    child: std::process::Child,
    base: String,
}

impl Server {
    /// Starts `berth serve` over `dir` (and `database`, when given) and waits until it answers.
    async fn start(dir: &std::path::Path, database: Option<&str>) -> Server {
        let port = free_port();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_berth"));
        command
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if let Some(database) = database {
            command.args(["--database", database]);
        }
        let server = Server {
            child: command.spawn().expect("spawn berth"),
            base: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        for _ in 0..600 {
            let ready = client.get(format!("{}/healthz", server.base)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("berth did not become ready");
    }

    /// SIGKILL, and wait for it to be gone.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What the clients were told.
#[derive(Default)]
struct Told {
    /// Consumers whose allocation was acknowledged.
    consumers: Vec<String>,
    /// Leases acknowledged: name to id.
    leases: BTreeMap<String, String>,
    /// Lease creates that got no answer: their names.
    unanswered: BTreeSet<String>,
    /// Writes that got no answer.
    lost_answers: usize,
}

/// A small deterministic generator (xorshift), so a campaign's kill times replay.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

async fn setup(client: &reqwest::Client, base: &str) {
    let provider = json!({"name": "crash-target", "uuid": PROVIDER});
    let created = client
        .post(format!("{base}/placement/resource_providers"))
        .header("OpenStack-API-Version", "placement 1.39")
        .json(&provider)
        .send()
        .await
        .expect("create the provider");
    assert!(created.status().is_success(), "{created:?}");
    let inventories = json!({"resource_provider_generation": 0,
                             "inventories": {"VCPU": {"total": 1_000_000}}});
    let set = client
        .put(format!(
            "{base}/placement/resource_providers/{PROVIDER}/inventories"
        ))
        .header("OpenStack-API-Version", "placement 1.39")
        .json(&inventories)
        .send()
        .await
        .expect("set its inventory");
    assert_eq!(set.status(), StatusCode::OK);
    let host = json!({"name": "crash-host", "vcpus": 1_000_000, "memory_mb": 1_000_000_000,
                      "local_gb": 1_000_000});
    let enrolled = client
        .post(format!("{base}/reservation/v1/os-hosts"))
        .json(&host)
        .send()
        .await
        .expect("enrol the host");
    assert_eq!(enrolled.status(), StatusCode::CREATED);
}

/// The body of lease `name`: one small instance slot a month out.
fn lease(name: &str, index: u64) -> Value {
    let start =
        now_micros() / DAY * DAY + 30 * DAY + i64::try_from(index).expect("small") * 60_000_000;
    lease_body(
        name,
        &rfc3339(start),
        &rfc3339(start + 3_600_000_000),
        json!([{"resource_type": "virtual:instance", "vcpus": 1, "memory_mb": 1,
                "disk_gb": 0, "amount": 1, "affinity": null}]),
    )
}

async fn create_lease(
    client: &reqwest::Client,
    base: &str,
    name: &str,
    index: u64,
) -> Option<(StatusCode, Value)> {
    let sent = client
        .post(format!("{base}{LEASES}"))
        .header("Idempotency-Key", format!("\"{name}\""))
        .json(&lease(name, index))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    let status = sent.status();
    Some((status, sent.json().await.ok()?))
}

/// One writer: allocations and leases, one after the other, until the server dies.
async fn writer(base: String, next: Arc<AtomicU64>, told: Arc<tokio::sync::Mutex<Told>>) {
    let client = reqwest::Client::new();
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n.is_multiple_of(2) {
            let consumer = uuid::Uuid::from_u128(0xC4A5_0000_0000_0000_0000 + u128::from(n));
            let body = json!({"allocations": {PROVIDER: {"resources": {"VCPU": 1}}},
                              "project_id": "p", "user_id": "u",
                              "consumer_generation": null, "consumer_type": "INSTANCE"});
            let sent = client
                .put(format!("{base}/placement/allocations/{consumer}"))
                .header("OpenStack-API-Version", "placement 1.39")
                .json(&body)
                .timeout(Duration::from_secs(10))
                .send()
                .await;
            let mut told = told.lock().await;
            match sent.map(|r| r.status()) {
                Ok(StatusCode::NO_CONTENT) => told.consumers.push(consumer.to_string()),
                Ok(other) => panic!("an allocation answered {other}"),
                Err(_) => {
                    told.lost_answers += 1;
                    return;
                }
            }
        } else {
            let name = format!("crash-{n}");
            let answer = create_lease(&client, &base, &name, n).await;
            let mut told = told.lock().await;
            match answer {
                Some((StatusCode::CREATED, body)) => {
                    let id = body["lease"]["id"].as_str().expect("an id").to_owned();
                    told.leases.insert(name, id);
                }
                Some((status, body)) => panic!("a lease create answered {status}: {body}"),
                None => {
                    told.lost_answers += 1;
                    told.unanswered.insert(name);
                    return;
                }
            }
        }
    }
}

/// After a restart: every acknowledged write is there, every unanswered lease create retried
/// with its key answers with at most one lease, no lease name exists twice, and usage is within
/// capacity.
async fn check(client: &reqwest::Client, base: &str, told: &mut Told, from_consumer: usize) {
    for consumer in &told.consumers[from_consumer..] {
        let found: Value = client
            .get(format!("{base}/placement/allocations/{consumer}"))
            .header("OpenStack-API-Version", "placement 1.39")
            .send()
            .await
            .expect("read an allocation")
            .json()
            .await
            .expect("json");
        assert!(
            found["allocations"].get(PROVIDER).is_some(),
            "acknowledged allocation {consumer} is lost: {found}"
        );
    }
    for name in std::mem::take(&mut told.unanswered) {
        let index: u64 = name["crash-".len()..].parse().expect("numbered");
        let (status, body) = create_lease(client, base, &name, index)
            .await
            .expect("a retry is answered");
        assert_eq!(status, StatusCode::CREATED, "the retry of {name}: {body}");
        let id = body["lease"]["id"].as_str().expect("an id").to_owned();
        told.leases.insert(name, id);
    }
    let listed: Value = client
        .get(format!("{base}{LEASES}"))
        .send()
        .await
        .expect("list leases")
        .json()
        .await
        .expect("json");
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for lease in listed["leases"].as_array().expect("leases") {
        let name = lease["name"].as_str().expect("a name").to_owned();
        let id = lease["id"].as_str().expect("an id").to_owned();
        assert!(
            seen.insert(name.clone(), id).is_none(),
            "lease {name} exists twice"
        );
    }
    for (name, id) in &told.leases {
        assert_eq!(
            seen.get(name),
            Some(id),
            "acknowledged lease {name} ({id}) is lost or changed"
        );
    }
    let usages: Value = client
        .get(format!(
            "{base}/placement/resource_providers/{PROVIDER}/usages"
        ))
        .header("OpenStack-API-Version", "placement 1.39")
        .send()
        .await
        .expect("usages")
        .json()
        .await
        .expect("json");
    let used = usages["usages"]["VCPU"].as_u64().unwrap_or(0);
    assert!(used >= told.consumers.len() as u64, "{used} used: {usages}");
    assert!(used <= 1_000_000, "{used} used beyond capacity");
}

/// Kills berth `kills` times at random moments under eight writers, checking after each restart.
async fn campaign(database: Option<&str>, kills: usize, seed: u64) -> String {
    let dir = tempfile::tempdir().expect("a data directory");
    let client = reqwest::Client::new();
    let mut server = Server::start(dir.path(), database).await;
    setup(&client, &server.base).await;
    let told = Arc::new(tokio::sync::Mutex::new(Told::default()));
    let next = Arc::new(AtomicU64::new(0));
    let mut rng = Rng(seed);
    let started = std::time::Instant::now();
    // The acknowledged allocations checked so far (each is checked after the kill that follows).
    let mut checked = 0;
    for _ in 0..kills {
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                tokio::spawn(writer(
                    server.base.clone(),
                    Arc::clone(&next),
                    Arc::clone(&told),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20 + rng.below(180))).await;
        server.kill();
        for writer in writers {
            writer.await.expect("a writer does not panic");
        }
        server = Server::start(dir.path(), database).await;
        let mut told = told.lock().await;
        check(&client, &server.base, &mut told, checked).await;
        checked = told.consumers.len();
    }
    let mut told = told.lock().await;
    check(&client, &server.base, &mut told, 0).await;
    format!(
        "{kills} kills in {:.0} s: {} allocations and {} leases acknowledged, {} answers lost, none of them lost or doubled",
        started.elapsed().as_secs_f64(),
        told.consumers.len(),
        told.leases.len(),
        told.lost_answers
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_campaign_on_sqlite_loses_and_doubles_nothing() {
    let summary = campaign(None, kills(), 0x5EED_0001).await;
    println!("crash campaign, SQLite: {summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_campaign_on_postgres_loses_and_doubles_nothing() {
    let test = "sigkill_campaign_on_postgres_loses_and_doubles_nothing";
    let Some(server) = scratch::server_url(test) else {
        return;
    };
    let (name, url) = scratch::create(&server).await;
    let outcome =
        tokio::spawn(async move { campaign(Some(&url), kills(), 0x5EED_0002).await }).await;
    scratch::drop_all(&server, &[name]).await;
    println!(
        "crash campaign, PostgreSQL: {}",
        outcome.expect("the campaign")
    );
}
