//! A crash campaign: the `berth` binary killed with SIGKILL at random moments while eight
//! clients write (Placement allocations, Blazar leases, Promise reservations, node claims and
//! their release), restarted, and checked after every restart: every acknowledged allocation,
//! lease and Promise reservation is there, a create whose answer was lost, retried with its
//! `Idempotency-Key`, answers with the one object it made (or makes it), no lease exists twice,
//! a released claim stays released, and no provider is used beyond its capacity. After most
//! kills the leases acknowledged since the last are read back by id; every hundredth kill the
//! whole listing is read and then everything acknowledged is deleted (and checked to stay gone a
//! hundred kills later), so that a kill costs the same at the ten-thousandth kill as at the
//! first. On SQLite always, and on PostgreSQL when `BERTH_TEST_POSTGRES_URL` is set (otherwise
//! that test says loudly that it skipped). `BERTH_CRASH_KILLS` sets the number of kills per
//! backend (100 by default; `BERTH_CRASH_KILLS=10000` is the long campaign of
//! docs/robustness.md).
//!
//! Then power cuts on SQLite: the data directory on a filesystem that drops what was not synced
//! (`berth_powercut`, over FUSE), cut after every kill. With `--sqlite-synchronous full` nothing
//! answered may be lost (`BERTH_POWER_CUTS` cuts, 30 by default); with `off` (the negative
//! control) the campaign must see answered writes lost within 10 cuts; with `normal` (the
//! default) the last commits may be lost, but the database must never be unreadable and nothing
//! may be doubled. Where FUSE cannot be mounted these say loudly that they skipped (a failure
//! under `CI=true`).

use crate::baremetal::{CLAIMS, NODES};
use crate::blazar_leases::{LEASES, lease_body, now_micros, rfc3339};
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
/// The zone of the host the leases and Promise reservations take.
const ZONE: &str = "crash-zone";
/// Bare-metal nodes for the claims: more than the writers can hold at once, with a claim each
/// whose answer or release was lost.
const NODE_COUNT: usize = 3 * WRITERS;

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
        Server::try_start(dir, database, &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts `berth serve` over `dir` (and `database`, when given) with `extra` flags, and
    /// waits until it answers; an error when it exits or does not answer.
    ///
    /// berth listens on a port it chooses (`127.0.0.1:0`) and the address is read from its own
    /// log: a port picked here and handed to it could be taken meanwhile by another campaign's
    /// berth, which would then answer in its place (as it once did, two campaigns running at
    /// once over thousands of restarts).
    async fn try_start(
        dir: &std::path::Path,
        database: Option<&str>,
        extra: &[&str],
    ) -> Result<Server, String> {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_berth"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .env("BERTH_LOG_FORMAT", "json")
            .env("BERTH_LOG", "warn,berth_server=info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if let Some(database) = database {
            command.args(["--database", database]);
        }
        command.args(extra);
        let mut child = command.spawn().expect("spawn berth");
        let serving = serving_address(child.stderr.take().expect("piped stderr"));
        let mut server = Server {
            child,
            base: String::new(),
        };
        let client = reqwest::Client::new();
        for _ in 0..600 {
            if server.base.is_empty()
                && let Ok(addr) = serving.try_recv()
            {
                server.base = format!("http://{addr}");
            }
            if !server.base.is_empty() {
                let ready = client.get(format!("{}/healthz", server.base)).send().await;
                if ready.is_ok_and(|r| r.status().is_success()) {
                    return Ok(server);
                }
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("berth exited at start ({status})"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err("berth did not become ready".into())
    }

    /// SIGKILL, and wait for it to be gone.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address a starting berth says it serves at, read from its JSON log on a thread that
/// then reads the rest of the log until berth is gone (so that berth never blocks on a full
/// pipe).
fn serving_address(log: std::process::ChildStderr) -> std::sync::mpsc::Receiver<String> {
    let (found, serving) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        let mut found = Some(found);
        for line in std::io::BufReader::new(log).lines() {
            let Ok(line) = line else { break };
            let Some(sender) = found.as_ref() else {
                continue;
            };
            let Ok(entry) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if entry["fields"]["message"] == "berth is serving"
                && let Some(addr) = entry["fields"]["addr"].as_str()
            {
                let _ = sender.send(addr.to_owned());
                found = None;
            }
        }
    });
    serving
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
    /// Leases acknowledged since the last check: their names.
    fresh: Vec<String>,
    /// Promise reservations acknowledged: their number to their id.
    promises: BTreeMap<u64, String>,
    /// Promise reservation creates that got no answer: their numbers.
    unanswered_promises: BTreeSet<u64>,
    /// Promise reservations acknowledged since the last check: their numbers.
    fresh_promises: Vec<u64>,
    /// The bare-metal nodes every claim may take.
    nodes: Vec<String>,
    /// Node claims acknowledged and not yet released.
    claims_held: BTreeSet<String>,
    /// Node claims whose release was acknowledged since the last check.
    claims_released: Vec<String>,
    /// Node claim creates that got no answer: their numbers.
    unanswered_claims: BTreeSet<u64>,
    /// Node claims acknowledged, in all.
    claims_acknowledged: usize,
    /// Leases and Promise reservations deleted since the last whole listing: their ids.
    deleted_leases: Vec<String>,
    /// Consumers whose allocations were deleted since the last whole listing.
    deleted_consumers: Vec<String>,
    /// Acknowledged allocations, leases and Promise reservations a check deleted, in all.
    cleared: Cleared,
    /// Writes that got no answer.
    lost_answers: usize,
}

/// What the checks deleted, in all.
#[derive(Default)]
struct Cleared {
    allocations: usize,
    leases: usize,
    promises: usize,
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

/// Makes the provider, the host and the nodes the writers use; answers the nodes' ids.
async fn setup(client: &reqwest::Client, base: &str) -> Vec<String> {
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
                      "local_gb": 1_000_000, "availability_zone": ZONE});
    let enrolled = client
        .post(format!("{base}/reservation/v1/os-hosts"))
        .json(&host)
        .send()
        .await
        .expect("enrol the host");
    assert_eq!(enrolled.status(), StatusCode::CREATED);
    let mut nodes = Vec::with_capacity(NODE_COUNT);
    for i in 0..NODE_COUNT {
        let node = json!({"name": format!("crash-node-{i}"), "resource_class": "baremetal-crash",
                          "provision_state": "available"});
        let made = client
            .post(format!("{base}{NODES}"))
            .json(&node)
            .send()
            .await
            .expect("enrol a node");
        assert_eq!(made.status(), StatusCode::CREATED);
        let made: Value = made.json().await.expect("json");
        nodes.push(made["uuid"].as_str().expect("a uuid").to_owned());
    }
    nodes
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

/// Sends lease `name` with its name as its key: its id, a refusal, or `None` without an answer.
async fn create_lease(
    client: &reqwest::Client,
    base: &str,
    name: &str,
    index: u64,
) -> Option<Result<String, String>> {
    let made = Made {
        status: StatusCode::CREATED,
        id: "/lease/id",
    };
    let url = format!("{base}{LEASES}");
    create_with_key(client, &url, name, &lease(name, index), made).await
}

/// One writer: allocations, Blazar leases, Promise reservations and node claims (each claim
/// released once it is acknowledged), in turn, until the server dies.
async fn writer(base: String, next: Arc<AtomicU64>, told: Arc<tokio::sync::Mutex<Told>>) {
    let client = reqwest::Client::new();
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let answered = match n % 4 {
            0 => write_allocation(&client, &base, n, &told).await,
            1 => write_lease(&client, &base, n, &told).await,
            2 => write_promise(&client, &base, n, &told).await,
            _ => write_claim(&client, &base, n, &told).await,
        };
        if !answered {
            told.lock().await.lost_answers += 1;
            return;
        }
    }
}

/// An allocation of one VCPU for a new consumer; `false` when it got no answer.
async fn write_allocation(
    client: &reqwest::Client,
    base: &str,
    n: u64,
    told: &tokio::sync::Mutex<Told>,
) -> bool {
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
    match sent.map(|r| r.status()) {
        Ok(StatusCode::NO_CONTENT) => told.lock().await.consumers.push(consumer.to_string()),
        Ok(other) => panic!("an allocation answered {other}"),
        Err(_) => return false,
    }
    true
}

/// A Blazar lease, with its name as its key; `false` when it got no answer.
async fn write_lease(
    client: &reqwest::Client,
    base: &str,
    n: u64,
    told: &tokio::sync::Mutex<Told>,
) -> bool {
    let name = format!("crash-{n}");
    let answer = create_lease(client, base, &name, n).await;
    let mut told = told.lock().await;
    match answer {
        Some(Ok(id)) => {
            told.fresh.push(name.clone());
            told.leases.insert(name, id);
            true
        }
        Some(Err(refused)) => panic!("a lease create answered {refused}"),
        None => {
            told.unanswered.insert(name);
            false
        }
    }
}

/// A Promise reservation (the RPC), with its key; `false` when it got no answer.
async fn write_promise(
    client: &reqwest::Client,
    base: &str,
    n: u64,
    told: &tokio::sync::Mutex<Told>,
) -> bool {
    let answer = create_promise(client, base, n).await;
    let mut told = told.lock().await;
    match answer {
        Some(Ok(id)) => {
            told.fresh_promises.push(n);
            told.promises.insert(n, id);
            true
        }
        Some(Err(refused)) => panic!("a Promise reservation answered {refused}"),
        None => {
            told.unanswered_promises.insert(n);
            false
        }
    }
}

/// Sends Promise reservation `n` with its key: its id, a refusal, or `None` without an answer.
async fn create_promise(
    client: &reqwest::Client,
    base: &str,
    n: u64,
) -> Option<Result<String, String>> {
    let start = now_micros() / DAY * DAY + 60 * DAY + i64::try_from(n).expect("small") * 60_000_000;
    let body = json!({"zone": ZONE, "start": rfc3339(start), "end": rfc3339(start + 3_600_000_000),
                      "capacity": {"cores": 1}});
    let url = format!("{base}/promise/create-reservation");
    let made = Made {
        status: StatusCode::OK,
        id: "/reservation-id",
    };
    create_with_key(client, &url, &format!("promise-{n}"), &body, made).await
}

/// What a create answers when it made its object: its status, and where its id is.
struct Made {
    status: StatusCode,
    id: &'static str,
}

/// Sends a create with `key` as its `Idempotency-Key`: the id of what it made, a refusal, or
/// `None` without an answer.
async fn create_with_key(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &Value,
    made: Made,
) -> Option<Result<String, String>> {
    let sent = client
        .post(url)
        .header("Idempotency-Key", format!("\"{key}\""))
        .json(body)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    let status = sent.status();
    let body: Value = sent.json().await.ok()?;
    Some(
        match (status, body.pointer(made.id).and_then(Value::as_str)) {
            (status, Some(id)) if status == made.status => Ok(id.to_owned()),
            _ => Err(format!("{status}: {body}")),
        },
    )
}

/// A node claim, with its key, released once acknowledged; `false` when either got no answer.
async fn write_claim(
    client: &reqwest::Client,
    base: &str,
    n: u64,
    told: &tokio::sync::Mutex<Told>,
) -> bool {
    let nodes = told.lock().await.nodes.clone();
    let claim = match create_claim(client, base, n, &nodes).await {
        Some(Ok(claim)) => claim,
        Some(Err(refused)) => panic!("a node claim answered {refused}"),
        None => {
            told.lock().await.unanswered_claims.insert(n);
            return false;
        }
    };
    {
        let mut told = told.lock().await;
        told.claims_acknowledged += 1;
        told.claims_held.insert(claim.clone());
    }
    let released = client
        .delete(format!("{base}{CLAIMS}/{claim}"))
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    let mut told = told.lock().await;
    match released.map(|r| r.status()) {
        Ok(StatusCode::NO_CONTENT) => {
            told.claims_held.remove(&claim);
            told.claims_released.push(claim);
            true
        }
        Ok(other) => panic!("releasing a node claim answered {other}"),
        Err(_) => false,
    }
}

/// Sends node claim `n` (any of `nodes`) with its key: the claim's id, a refusal, or `None`
/// without an answer.
async fn create_claim(
    client: &reqwest::Client,
    base: &str,
    n: u64,
    nodes: &[String],
) -> Option<Result<String, String>> {
    let instance = uuid::Uuid::from_u128(0xC1A1_0000_0000_0000_0000 + u128::from(n));
    let body = json!({"instance_uuid": instance.to_string(), "node_uuid": nodes});
    let made = Made {
        status: StatusCode::CREATED,
        id: "/reservation/uuid",
    };
    create_with_key(
        client,
        &format!("{base}{CLAIMS}"),
        &format!("claim-{n}"),
        &body,
        made,
    )
    .await
}

/// What a check after a restart found.
#[derive(Debug, Default)]
struct Findings {
    /// Acknowledged writes that are gone (forgotten by the clients' record, so that each is
    /// reported once).
    lost: Vec<String>,
    /// Anything else wrong: a lease twice or changed, a retry refused, usage beyond capacity.
    broken: Vec<String>,
}

impl Findings {
    fn is_clean(&self) -> bool {
        self.lost.is_empty() && self.broken.is_empty()
    }
}

/// How a check reads the leases back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leases {
    /// Each lease acknowledged since the last check, by its id: a check whose cost does not
    /// grow with the campaign.
    Fresh,
    /// The whole listing: every acknowledged lease, and no name twice.
    All,
}

/// A whole listing every this many kills (and at the end); the others read only what is new.
const LIST_ALL_EVERY: usize = 100;

/// After a restart: every acknowledged write is there (the leases and Promise reservations made
/// since the last check read by id, or all of them in the whole listing), every create that got
/// no answer, retried with its key, answers with one object, no lease name exists twice (in a
/// whole listing), and usage is within capacity.
async fn check(
    client: &reqwest::Client,
    base: &str,
    told: &mut Told,
    from_consumer: usize,
    leases: Leases,
) -> Findings {
    let mut findings = Findings::default();
    let mut kept = told.consumers[..from_consumer].to_vec();
    for consumer in &told.consumers[from_consumer..] {
        match holds(client, base, consumer).await {
            true => kept.push(consumer.clone()),
            false => findings
                .lost
                .push(format!("acknowledged allocation {consumer}")),
        }
    }
    told.consumers = kept;
    for name in std::mem::take(&mut told.unanswered) {
        let index: u64 = name["crash-".len()..].parse().expect("numbered");
        match create_lease(client, base, &name, index).await {
            Some(Ok(id)) => {
                told.fresh.push(name.clone());
                told.leases.insert(name, id);
            }
            other => findings
                .broken
                .push(format!("the retry of {name} answered {other:?}")),
        }
    }
    retry_promises(client, base, told, &mut findings).await;
    check_claims(client, base, told, &mut findings).await;
    let fresh = std::mem::take(&mut told.fresh);
    let fresh_promises = std::mem::take(&mut told.fresh_promises);
    match leases {
        Leases::Fresh => {
            check_fresh(client, base, told, &fresh, &mut findings).await;
            check_fresh_promises(client, base, told, &fresh_promises, &mut findings).await;
        }
        Leases::All => {
            check_all(client, base, told, &mut findings).await;
            check_deleted_consumers(client, base, told, &mut findings).await;
        }
    }
    check_usage(client, base, told, &mut findings).await;
    findings
}

/// Lease `id` (a Blazar lease or a Promise reservation) as `GET` shows it, or `None` when it is
/// not there.
async fn read_lease(client: &reqwest::Client, base: &str, id: &str) -> Option<Value> {
    let found = client
        .get(format!("{base}{LEASES}/{id}"))
        .send()
        .await
        .expect("read a lease");
    match found.status() {
        StatusCode::OK => Some(found.json().await.expect("json")),
        StatusCode::NOT_FOUND => None,
        other => panic!("reading lease {id} answered {other}"),
    }
}

/// Each Promise reservation acknowledged since the last check is there.
async fn check_fresh_promises(
    client: &reqwest::Client,
    base: &str,
    told: &mut Told,
    fresh: &[u64],
    findings: &mut Findings,
) {
    for n in fresh {
        let Some(id) = told.promises.get(n).cloned() else {
            continue;
        };
        if read_lease(client, base, &id).await.is_none() {
            told.promises.remove(n);
            findings
                .lost
                .push(format!("acknowledged Promise reservation {n} ({id})"));
        }
    }
}

/// Every Promise reservation create that got no answer, retried with its key, answers with
/// one reservation (the first, or made now).
async fn retry_promises(
    client: &reqwest::Client,
    base: &str,
    told: &mut Told,
    findings: &mut Findings,
) {
    for n in std::mem::take(&mut told.unanswered_promises) {
        match create_promise(client, base, n).await {
            Some(Ok(id)) => {
                told.fresh_promises.push(n);
                told.promises.insert(n, id);
            }
            other => findings.broken.push(format!(
                "the retry of Promise reservation {n} answered {other:?}"
            )),
        }
    }
}

/// Node claims: a claim create that got no answer, retried with its key, answers with one
/// claim, which is then released; a claim whose release got no answer is there or gone, and
/// released now if there; a claim whose release was acknowledged stays gone.
async fn check_claims(
    client: &reqwest::Client,
    base: &str,
    told: &mut Told,
    findings: &mut Findings,
) {
    for n in std::mem::take(&mut told.unanswered_claims) {
        match create_claim(client, base, n, &told.nodes).await {
            Some(Ok(claim)) => {
                told.claims_acknowledged += 1;
                told.claims_held.insert(claim);
            }
            other => findings
                .broken
                .push(format!("the retry of node claim {n} answered {other:?}")),
        }
    }
    for claim in std::mem::take(&mut told.claims_released) {
        let found = client
            .get(format!("{base}{CLAIMS}/{claim}"))
            .send()
            .await
            .expect("read a claim");
        match found.status() {
            StatusCode::NOT_FOUND => {}
            StatusCode::OK => {
                // Its acknowledged release is lost: released again, so that the node is free.
                findings
                    .lost
                    .push(format!("the acknowledged release of claim {claim}"));
                told.claims_held.insert(claim);
            }
            other => findings
                .broken
                .push(format!("reading claim {claim} answered {other}")),
        }
    }
    for claim in std::mem::take(&mut told.claims_held) {
        let released = client
            .delete(format!("{base}{CLAIMS}/{claim}"))
            .send()
            .await
            .expect("release a claim");
        match released.status() {
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND => {}
            other => findings
                .broken
                .push(format!("releasing claim {claim} answered {other}")),
        }
    }
}

/// Each lease acknowledged since the last check is there, by the id its client was told.
async fn check_fresh(
    client: &reqwest::Client,
    base: &str,
    told: &mut Told,
    fresh: &[String],
    findings: &mut Findings,
) {
    for name in fresh {
        let Some(id) = told.leases.get(name).cloned() else {
            continue;
        };
        match read_lease(client, base, &id).await {
            Some(body) if body["lease"]["name"] != name.as_str() => findings
                .broken
                .push(format!("acknowledged lease {id} is now {body}, not {name}")),
            Some(_) => {}
            None => {
                told.leases.remove(name);
                findings
                    .lost
                    .push(format!("acknowledged lease {name} ({id})"));
            }
        }
    }
}

/// The whole listing holds every acknowledged lease with the id its client was told, no name
/// twice, and exactly the Promise reservations acknowledged (each retry resolved to one).
async fn check_all(client: &reqwest::Client, base: &str, told: &mut Told, findings: &mut Findings) {
    let listed: Value = client
        .get(format!("{base}{LEASES}"))
        .send()
        .await
        .expect("list leases")
        .json()
        .await
        .expect("json");
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut promises = BTreeSet::new();
    for lease in listed["leases"].as_array().expect("leases") {
        let name = lease["name"].as_str().expect("a name").to_owned();
        let id = lease["id"].as_str().expect("an id").to_owned();
        if !name.starts_with("crash-") {
            promises.insert(id);
            continue;
        }
        if seen.insert(name.clone(), id).is_some() {
            findings.broken.push(format!("lease {name} exists twice"));
        }
    }
    told.leases.retain(|name, id| match seen.get(name) {
        Some(found) if found == id => true,
        Some(found) => {
            findings.broken.push(format!(
                "acknowledged lease {name} is {found}, but its client was told {id}"
            ));
            true
        }
        None => {
            findings
                .lost
                .push(format!("acknowledged lease {name} ({id})"));
            false
        }
    });
    for id in std::mem::take(&mut told.deleted_leases) {
        if seen.values().any(|found| *found == id) || promises.contains(&id) {
            findings.broken.push(format!("deleted lease {id} is back"));
        }
    }
    told.promises.retain(|n, id| {
        let there = promises.contains(id);
        if !there {
            findings
                .lost
                .push(format!("acknowledged Promise reservation {n} ({id})"));
        }
        there
    });
    if promises.len() != told.promises.len() {
        findings.broken.push(format!(
            "{} Promise reservations exist, {} were acknowledged",
            promises.len(),
            told.promises.len()
        ));
    }
}

/// Whether `consumer` holds an allocation on the provider.
async fn holds(client: &reqwest::Client, base: &str, consumer: &str) -> bool {
    let found: Value = client
        .get(format!("{base}/placement/allocations/{consumer}"))
        .header("OpenStack-API-Version", "placement 1.39")
        .send()
        .await
        .expect("read an allocation")
        .json()
        .await
        .expect("json");
    found["allocations"].get(PROVIDER).is_some()
}

/// The allocations deleted since the last whole listing are still gone.
async fn check_deleted_consumers(
    client: &reqwest::Client,
    base: &str,
    told: &mut Told,
    findings: &mut Findings,
) {
    for consumer in std::mem::take(&mut told.deleted_consumers) {
        if holds(client, base, &consumer).await {
            findings
                .broken
                .push(format!("deleted allocation {consumer} is back"));
        }
    }
}

/// Deletes every acknowledged allocation, lease and Promise reservation (each checked just
/// before), so that the catalog, and with it each restart, stays as small at the
/// ten-thousandth kill as at the first; the next whole listing checks they stay gone.
async fn clear(client: &reqwest::Client, base: &str, told: &mut Told) {
    told.cleared.leases += told.leases.len();
    told.cleared.promises += told.promises.len();
    told.cleared.allocations += told.consumers.len();
    let leases = std::mem::take(&mut told.leases).into_values();
    let promises = std::mem::take(&mut told.promises).into_values();
    for id in leases.chain(promises) {
        let deleted = client
            .delete(format!("{base}{LEASES}/{id}"))
            .send()
            .await
            .expect("delete a lease");
        assert_eq!(
            deleted.status(),
            StatusCode::NO_CONTENT,
            "deleting lease {id}"
        );
        told.deleted_leases.push(id);
    }
    for consumer in std::mem::take(&mut told.consumers) {
        let deleted = client
            .delete(format!("{base}/placement/allocations/{consumer}"))
            .header("OpenStack-API-Version", "placement 1.39")
            .send()
            .await
            .expect("delete an allocation");
        assert_eq!(
            deleted.status(),
            StatusCode::NO_CONTENT,
            "deleting {consumer}"
        );
        told.deleted_consumers.push(consumer);
    }
}

/// The provider's usage covers every acknowledged allocation, within its capacity.
async fn check_usage(client: &reqwest::Client, base: &str, told: &Told, findings: &mut Findings) {
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
    if used < told.consumers.len() as u64 {
        findings.broken.push(format!(
            "{used} VCPU used, fewer than the {} allocations acknowledged: {usages}",
            told.consumers.len()
        ));
    }
    if used > 1_000_000 {
        findings
            .broken
            .push(format!("{used} VCPU used beyond capacity"));
    }
}

/// Starts the writers against `base`, and lets them write for `least` plus up to 180 ms.
async fn write_for_a_while(
    base: &str,
    next: &Arc<AtomicU64>,
    told: &Arc<tokio::sync::Mutex<Told>>,
    rng: &mut Rng,
    least: Duration,
) -> Vec<tokio::task::JoinHandle<()>> {
    let writers = (0..WRITERS)
        .map(|_| tokio::spawn(writer(base.to_owned(), Arc::clone(next), Arc::clone(told))))
        .collect();
    tokio::time::sleep(least + Duration::from_millis(rng.below(180))).await;
    writers
}

/// The checks' client. It keeps no connection between requests: a restarted berth may listen
/// on the port its killed predecessor had, and a connection kept from that one would fail the
/// next request sent to the new one.
fn check_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("a client")
}

/// Kills berth `kills` times at random moments under eight writers, checking after each restart.
async fn campaign(database: Option<&str>, kills: usize, seed: u64) -> String {
    let dir = tempfile::tempdir().expect("a data directory");
    let client = check_client();
    let mut server = Server::start(dir.path(), database).await;
    let nodes = setup(&client, &server.base).await;
    let told = Arc::new(tokio::sync::Mutex::new(Told {
        nodes,
        ..Told::default()
    }));
    let next = Arc::new(AtomicU64::new(0));
    let mut rng = Rng(seed);
    let started = std::time::Instant::now();
    // The acknowledged allocations checked so far (each is checked after the kill that follows).
    let mut checked = 0;
    for kill in 1..=kills {
        let least = Duration::from_millis(20);
        let writers = write_for_a_while(&server.base, &next, &told, &mut rng, least).await;
        server.kill();
        for writer in writers {
            writer.await.expect("a writer does not panic");
        }
        server = Server::start(dir.path(), database).await;
        let mut told = told.lock().await;
        let leases = match kill.is_multiple_of(LIST_ALL_EVERY) {
            true => Leases::All,
            false => Leases::Fresh,
        };
        let findings = check(&client, &server.base, &mut told, checked, leases).await;
        assert!(findings.is_clean(), "after kill {kill}: {findings:?}");
        if leases == Leases::All {
            clear(&client, &server.base, &mut told).await;
            // What autovacuum does on a server that runs it: a kill's restart and checks then
            // cost the same at the 10,000th kill as at the first.
            if let Some(url) = database {
                scratch::vacuum(url).await;
            }
            println!(
                "crash campaign, {}: {kill} kills, every check clean, {:.0} s",
                match database {
                    Some(_) => "PostgreSQL",
                    None => "SQLite",
                },
                started.elapsed().as_secs_f64()
            );
        }
        checked = told.consumers.len();
    }
    let mut told = told.lock().await;
    let findings = check(&client, &server.base, &mut told, 0, Leases::All).await;
    assert!(findings.is_clean(), "at the end: {findings:?}");
    format!(
        "{kills} kills in {:.0} s: {} allocations, {} leases, {} Promise reservations and {} node claims acknowledged, {} of them deleted again, {} answers lost, none of them lost, doubled or back after its deletion",
        started.elapsed().as_secs_f64(),
        told.consumers.len() + told.cleared.allocations,
        told.leases.len() + told.cleared.leases,
        told.promises.len() + told.cleared.promises,
        told.claims_acknowledged,
        told.cleared.allocations + told.cleared.leases + told.cleared.promises,
        told.lost_answers
    )
}

/// Power cuts: berth on SQLite over a filesystem that keeps what is written in memory until it
/// is synced (`berth_powercut`), with `--sqlite-synchronous` at `synchronous`. Each round, the
/// writers write for 20 to 200 ms, berth is killed, everything not synced is dropped and the
/// filesystem mounted again, as after a power loss, and berth is started again and checked.
/// Runs `cuts` rounds, or until the first finding when `stop_at_loss`.
struct PowerCuts {
    /// Rounds run.
    cuts: usize,
    /// The round after which acknowledged writes were first missing, if any.
    first_loss: Option<usize>,
    /// Acknowledged writes missing after a cut, in all.
    lost: usize,
    /// Rounds after which berth did not start (its database unreadable).
    unreadable: usize,
    /// Everything else found (a lease twice, usage beyond capacity).
    broken: Vec<String>,
    summary: String,
}

/// Mounts the power-cut filesystem over `backing` at `at`, or `None` after a loud skip line
/// where FUSE cannot be mounted (a failure under `CI=true`).
fn power_cut_disk(
    backing: &std::path::Path,
    at: &std::path::Path,
) -> Option<berth_powercut::Mounted> {
    match berth_powercut::mount(backing, at) {
        Ok(disk) => Some(disk),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("FUSE cannot be mounted here and CI needs the power-cut campaign: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: the power-cut campaign needs FUSE, which cannot be mounted: {e}");
            None
        }
    }
}

async fn power_cut_campaign(
    synchronous: &str,
    cuts: usize,
    seed: u64,
    stop_at_loss: bool,
) -> Option<PowerCuts> {
    let backing = tempfile::tempdir().expect("a backing directory");
    let at = tempfile::tempdir().expect("a mount point");
    let mut disk = power_cut_disk(backing.path(), at.path())?;
    let data = at.path().join("data");
    let client = check_client();
    // The provider and host the writers write to are made durable first, by a berth that syncs
    // every commit: a loss the campaign reports is then one of the writers' own.
    let mut server = Server::try_start(&data, None, &["--sqlite-synchronous", "full"])
        .await
        .expect("berth starts on the filesystem");
    let nodes = setup(&client, &server.base).await;
    server.kill();
    let flags = ["--sqlite-synchronous", synchronous];
    server = Server::try_start(&data, None, &flags)
        .await
        .expect("berth starts again on the filesystem");
    let told = Arc::new(tokio::sync::Mutex::new(Told {
        nodes,
        ..Told::default()
    }));
    let next = Arc::new(AtomicU64::new(0));
    let mut rng = Rng(seed);
    let started = std::time::Instant::now();
    let mut checked = 0;
    let mut report = PowerCuts {
        cuts: 0,
        first_loss: None,
        lost: 0,
        unreadable: 0,
        broken: Vec::new(),
        summary: String::new(),
    };
    let mut dropped_pages = 0;
    for cut in 1..=cuts {
        let writers = write_for_a_while(&server.base, &next, &told, &mut rng, POWER_ON).await;
        server.kill();
        for writer in writers {
            writer.await.expect("a writer does not panic");
        }
        dropped_pages += disk.power_cut().pages;
        disk = berth_powercut::mount(backing.path(), at.path()).expect("mount again");
        report.cuts = cut;
        server = match Server::try_start(&data, None, &flags).await {
            Ok(server) => server,
            Err(e) => {
                report.unreadable += 1;
                report.first_loss.get_or_insert(cut);
                report.broken.push(format!("after cut {cut}: {e}"));
                break;
            }
        };
        let mut told = told.lock().await;
        let findings = check(&client, &server.base, &mut told, checked, Leases::All).await;
        checked = told.consumers.len();
        if !findings.lost.is_empty() {
            report.first_loss.get_or_insert(cut);
            report.lost += findings.lost.len();
        }
        report.broken.extend(
            findings
                .broken
                .iter()
                .map(|b| format!("after cut {cut}: {b}")),
        );
        if stop_at_loss && report.first_loss.is_some() {
            break;
        }
    }
    server.kill();
    drop(disk);
    let told = told.lock().await;
    report.summary = format!(
        "synchronous={synchronous}: {} power cuts in {:.0} s ({dropped_pages} unsynced pages dropped): {} allocations, {} leases, {} Promise reservations and {} node claims acknowledged and kept, {} answers lost, {} acknowledged writes lost, {} restarts on an unreadable database, first loss after cut {:?}",
        report.cuts,
        started.elapsed().as_secs_f64(),
        told.consumers.len(),
        told.leases.len(),
        told.promises.len(),
        told.claims_acknowledged,
        told.lost_answers,
        report.lost,
        report.unreadable,
        report.first_loss,
    );
    Some(report)
}

/// The least time the writers write between power cuts. Longer than between kills: each
/// commit waits for a sync through the filesystem.
const POWER_ON: Duration = Duration::from_millis(500);

/// The number of power cuts of the campaign with `synchronous=full`: `BERTH_POWER_CUTS`, or 30.
fn power_cuts() -> usize {
    std::env::var("BERTH_POWER_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cuts_lose_nothing_answered_with_synchronous_full() {
    let Some(report) = power_cut_campaign("full", power_cuts(), 0x5EED_0003, false).await else {
        return;
    };
    println!("power-cut campaign, SQLite: {}", report.summary);
    assert_eq!(
        report.first_loss, None,
        "{}: {:?}",
        report.summary, report.broken
    );
    assert!(report.broken.is_empty(), "{:?}", report.broken);
}

/// The negative control: with nothing synced, a power cut must lose answered writes (or the
/// database), and the campaign must see it within 10 cuts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cuts_are_seen_to_lose_writes_with_synchronous_off() {
    let Some(report) = power_cut_campaign("off", 10, 0x5EED_0004, true).await else {
        return;
    };
    println!("power-cut control, SQLite: {}", report.summary);
    assert!(
        report.first_loss.is_some(),
        "with nothing synced, 10 power cuts lost nothing: the campaign cannot see a loss ({})",
        report.summary
    );
}

/// berth's default: a power cut may lose the last commits (SQLite's documented behaviour of
/// `synchronous=NORMAL` in WAL mode) but never corrupts the database or doubles anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cuts_never_corrupt_with_synchronous_normal() {
    let Some(report) = power_cut_campaign("normal", 10, 0x5EED_0005, false).await else {
        return;
    };
    println!("power-cut campaign, SQLite: {}", report.summary);
    assert_eq!(report.unreadable, 0, "{}", report.summary);
    assert!(report.broken.is_empty(), "{:?}", report.broken);
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
