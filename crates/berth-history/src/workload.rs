//! The clients: the catalog they work on (a few small providers that consumers contend for, a
//! few hosts that leases contend for), and the operations each client picks at random and
//! records, over HTTP to a replica chosen at random.

use crate::history::{Action, Key, Observation, Outcome, Recorder};
use anyhow::{Context, Result, bail};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Placement's microversion the clients speak (consumer generations are checked from 1.28).
const PLACEMENT_VERSION: &str = "placement 1.39";
/// The path of Blazar's leases.
const LEASES: &str = "/reservation/v1/leases";
/// How long a client waits for an answer before it counts the operation as unknown.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(4);

/// The catalog the clients contend for.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Providers (each a [`Key::Provider`]).
    pub providers: u8,
    /// VCPU of each provider.
    pub capacity: u32,
    /// Consumers per provider.
    pub consumers: u8,
    /// Hosts (each a [`Key::Host`]).
    pub hosts: u8,
    /// One-hour slots a lease may hold, from 30 days ahead.
    pub slots: u8,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            providers: 3,
            capacity: 6,
            consumers: 5,
            hosts: 2,
            slots: 4,
        }
    }
}

/// The UUID of provider `p`.
pub fn provider_uuid(p: u8) -> uuid::Uuid {
    uuid::Uuid::from_u128(0xB1_5700_0000_4000_8000_0000_0000_0000 + u128::from(p))
}

/// The UUID of consumer `c` of provider `p` (each consumer allocates from one provider only).
pub fn consumer_uuid(p: u8, c: u8) -> uuid::Uuid {
    uuid::Uuid::from_u128(
        0xB1_5700_0000_4000_8000_0001_0000_0000 + (u128::from(p) << 8) + u128::from(c),
    )
}

/// The name of host `h`.
pub fn host_name(h: u8) -> String {
    format!("history-host-{h}")
}

/// The name of lease `n` on host `h`.
fn lease_name(h: u8, n: u32) -> String {
    format!("history-{h}-{n}")
}

/// The host and number of a lease named by [`lease_name`].
fn parse_lease_name(name: &str) -> Option<(u8, u32)> {
    let (h, n) = name.strip_prefix("history-")?.split_once('-')?;
    Some((h.parse().ok()?, n.parse().ok()?))
}

/// A small generator (xorshift), so that a run's choices follow from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number below `n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What the clients share: where to send, what they know of the leases made.
#[derive(Debug)]
pub struct Clients {
    /// The replicas' base URLs.
    pub bases: Vec<String>,
    /// The catalog.
    pub shape: Shape,
    /// The first slot's start, in RFC 3339.
    pub slot_zero: jiff::Timestamp,
    /// The history.
    pub recorder: Recorder,
    /// Lease ids by (host, number), of leases whose create was acknowledged.
    pub leases: Mutex<BTreeMap<(u8, u32), String>>,
    /// The next lease number.
    pub next_lease: std::sync::atomic::AtomicU32,
    http: reqwest::Client,
}

impl Clients {
    /// Clients of `bases` over `shape`, recording into `recorder`.
    pub fn new(bases: Vec<String>, shape: Shape, recorder: Recorder) -> Result<Clients> {
        #[allow(
            clippy::disallowed_methods,
            reason = "the harness is a client: its leases start a month after the real now"
        )]
        let now = jiff::Timestamp::now();
        let hour = now.as_second() / 3600 * 3600;
        let slot_zero = jiff::Timestamp::from_second(hour + 30 * 86_400)?;
        Ok(Clients {
            bases,
            shape,
            slot_zero,
            recorder,
            leases: Mutex::new(BTreeMap::new()),
            next_lease: std::sync::atomic::AtomicU32::new(0),
            http: reqwest::Client::builder().timeout(CLIENT_TIMEOUT).build()?,
        })
    }

    fn placement(
        &self,
        base: &str,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{base}/placement{path}"))
            .header("OpenStack-API-Version", PLACEMENT_VERSION)
    }
}

/// Creates the providers with their inventories and enrolls the hosts, through `base`.
pub async fn setup(clients: &Clients, base: &str) -> Result<()> {
    for p in 0..clients.shape.providers {
        let uuid = provider_uuid(p);
        let created = clients
            .placement(base, reqwest::Method::POST, "/resource_providers")
            .json(&json!({"name": format!("history-provider-{p}"), "uuid": uuid}))
            .send()
            .await?;
        if !created.status().is_success() {
            bail!("create provider {p}: {}", created.text().await?);
        }
        let inventory = json!({"resource_provider_generation": 0,
                               "inventories": {"VCPU": {"total": clients.shape.capacity}}});
        let set = clients
            .placement(
                base,
                reqwest::Method::PUT,
                &format!("/resource_providers/{uuid}/inventories"),
            )
            .json(&inventory)
            .send()
            .await?;
        if set.status() != StatusCode::OK {
            bail!("set the inventory of provider {p}: {}", set.text().await?);
        }
    }
    for h in 0..clients.shape.hosts {
        let host = json!({"name": host_name(h), "vcpus": 8, "memory_mb": 16_384, "local_gb": 100});
        let enrolled = clients
            .http
            .post(format!("{base}/reservation/v1/os-hosts"))
            .json(&host)
            .send()
            .await?;
        if enrolled.status() != StatusCode::CREATED {
            bail!("enroll host {h}: {}", enrolled.text().await?);
        }
    }
    Ok(())
}

/// What an HTTP exchange came to: its status and body, or `None` (no answer that tells).
async fn answer(sent: reqwest::Result<reqwest::Response>) -> Option<(StatusCode, Value)> {
    let response = sent.ok()?;
    let status = response.status();
    if status.is_server_error() {
        return None;
    }
    let text = response.text().await.ok()?;
    Some((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// A write's outcome from its answer: 2xx ok, 409 refused, 404 not found, anything else (no
/// answer, 5xx) unknown.
fn write_outcome(answer: Option<&(StatusCode, Value)>) -> Outcome {
    match answer.map(|(status, _)| *status) {
        Some(status) if status.is_success() => Outcome::Ok,
        Some(StatusCode::CONFLICT) => Outcome::Refused,
        Some(StatusCode::NOT_FOUND) => Outcome::NotFound,
        _ => Outcome::Unknown,
    }
}

/// The VCPU of a Placement allocation entry `{"resources": {"VCPU": n}}`.
fn vcpu(entry: &Value) -> Option<u32> {
    u32::try_from(entry["resources"]["VCPU"].as_u64()?).ok()
}

/// Reads consumer `c` of provider `p`: its VCPU there and its generation.
async fn read_consumer(clients: &Clients, base: &str, p: u8, c: u8) -> Option<Observation> {
    let path = format!("/allocations/{}", consumer_uuid(p, c));
    let (status, body) = answer(
        clients
            .placement(base, reqwest::Method::GET, &path)
            .send()
            .await,
    )
    .await?;
    if status != StatusCode::OK {
        return None;
    }
    let allocations = body["allocations"].as_object()?;
    if allocations.is_empty() {
        return Some(Observation::Consumer(None));
    }
    let units = vcpu(allocations.get(&provider_uuid(p).to_string())?)?;
    let generation = body["consumer_generation"].as_u64()?;
    Some(Observation::Consumer(Some((units, generation))))
}

/// Reads and records consumer `c` of provider `p`.
pub async fn read_consumer_recorded(
    clients: &Clients,
    client: usize,
    base: &str,
    p: u8,
    c: u8,
) -> Option<Observation> {
    let invoked = clients.recorder.now();
    let seen = read_consumer(clients, base, p, c).await;
    let outcome = seen.clone().map_or(Outcome::Unknown, Outcome::Read);
    clients.recorder.record(
        client,
        Key::Provider(p),
        Action::ReadConsumer { consumer: c },
        invoked,
        outcome,
    );
    seen
}

/// Reads provider `p`'s allocations.
async fn read_provider(clients: &Clients, base: &str, p: u8) -> Option<Observation> {
    let path = format!("/resource_providers/{}/allocations", provider_uuid(p));
    let (status, body) = answer(
        clients
            .placement(base, reqwest::Method::GET, &path)
            .send()
            .await,
    )
    .await?;
    if status != StatusCode::OK {
        return None;
    }
    let mut seen = BTreeMap::new();
    for c in 0..clients.shape.consumers {
        if let Some(entry) = body["allocations"].get(consumer_uuid(p, c).to_string()) {
            seen.insert(c, vcpu(entry)?);
        }
    }
    Some(Observation::Provider(seen))
}

/// Reads provider `p`'s VCPU usage.
async fn read_usage(clients: &Clients, base: &str, p: u8) -> Option<Observation> {
    let path = format!("/resource_providers/{}/usages", provider_uuid(p));
    let (status, body) = answer(
        clients
            .placement(base, reqwest::Method::GET, &path)
            .send()
            .await,
    )
    .await?;
    if status != StatusCode::OK {
        return None;
    }
    Some(Observation::Usage(
        u32::try_from(body["usages"]["VCPU"].as_u64().unwrap_or(0)).ok()?,
    ))
}

/// Lists the leases, host by host (only the harness's).
async fn read_leases(clients: &Clients, base: &str) -> Option<BTreeMap<u8, BTreeSet<u32>>> {
    let (status, body) = answer(clients.http.get(format!("{base}{LEASES}")).send().await).await?;
    if status != StatusCode::OK {
        return None;
    }
    let mut by_host: BTreeMap<u8, BTreeSet<u32>> = (0..clients.shape.hosts)
        .map(|h| (h, BTreeSet::new()))
        .collect();
    for lease in body["leases"].as_array()? {
        if let Some((h, n)) = lease["name"].as_str().and_then(parse_lease_name) {
            by_host.entry(h).or_default().insert(n);
        }
    }
    Some(by_host)
}

/// Reads and records every provider (allocations and usage), every consumer and every host's
/// leases through `base`: the final state, after the faults.
pub async fn read_everything(clients: &Clients, client: usize, base: &str) -> Result<()> {
    for p in 0..clients.shape.providers {
        let invoked = clients.recorder.now();
        let seen = read_provider(clients, base, p)
            .await
            .context("read a provider's allocations")?;
        clients.recorder.record(
            client,
            Key::Provider(p),
            Action::ReadProvider,
            invoked,
            Outcome::Read(seen),
        );
        let invoked = clients.recorder.now();
        let seen = read_usage(clients, base, p)
            .await
            .context("read a provider's usage")?;
        clients.recorder.record(
            client,
            Key::Provider(p),
            Action::ReadUsage,
            invoked,
            Outcome::Read(seen),
        );
        for c in 0..clients.shape.consumers {
            read_consumer_recorded(clients, client, base, p, c)
                .await
                .context("read a consumer")?;
        }
    }
    let invoked = clients.recorder.now();
    let leases = read_leases(clients, base)
        .await
        .context("list the leases")?;
    for (h, names) in leases {
        clients.recorder.record(
            client,
            Key::Host(h),
            Action::ReadLeases,
            invoked,
            Outcome::Read(Observation::Leases(names)),
        );
    }
    Ok(())
}

/// Sets consumer `c` of provider `p` to `units` VCPU (0: removes it) with `generation`.
async fn put(
    clients: &Clients,
    client: usize,
    base: &str,
    p: u8,
    c: u8,
    generation: Option<u64>,
    units: u32,
) {
    let allocations = match units {
        0 => json!({}),
        _ => json!({provider_uuid(p).to_string(): {"resources": {"VCPU": units}}}),
    };
    let body = json!({"allocations": allocations, "project_id": "history", "user_id": "history",
                      "consumer_generation": generation, "consumer_type": "INSTANCE"});
    let path = format!("/allocations/{}", consumer_uuid(p, c));
    let invoked = clients.recorder.now();
    let answered = answer(
        clients
            .placement(base, reqwest::Method::PUT, &path)
            .json(&body)
            .send()
            .await,
    )
    .await;
    let action = Action::Put {
        consumer: c,
        generation,
        units,
    };
    clients.recorder.record(
        client,
        Key::Provider(p),
        action,
        invoked,
        write_outcome(answered.as_ref()),
    );
}

/// One client's operation on provider `p`.
async fn on_provider(clients: &Clients, client: usize, base: &str, p: u8, rng: &mut Rng) {
    let c = u8::try_from(rng.below(u64::from(clients.shape.consumers))).unwrap_or(0);
    match rng.below(10) {
        // Read, then write with the generation seen: the clients race on generations.
        0..=5 => {
            let Some(Observation::Consumer(seen)) =
                read_consumer_recorded(clients, client, base, p, c).await
            else {
                return;
            };
            let units = u32::try_from(1 + rng.below(3)).unwrap_or(1);
            match seen {
                None => put(clients, client, base, p, c, None, units).await,
                Some((_, generation)) if rng.below(3) == 0 => {
                    put(clients, client, base, p, c, Some(generation), 0).await
                }
                Some((_, generation)) => {
                    put(clients, client, base, p, c, Some(generation), units).await
                }
            }
        }
        6 => {
            let path = format!("/allocations/{}", consumer_uuid(p, c));
            let invoked = clients.recorder.now();
            let answered = answer(
                clients
                    .placement(base, reqwest::Method::DELETE, &path)
                    .send()
                    .await,
            )
            .await;
            clients.recorder.record(
                client,
                Key::Provider(p),
                Action::Delete { consumer: c },
                invoked,
                write_outcome(answered.as_ref()),
            );
        }
        7 | 8 => {
            let invoked = clients.recorder.now();
            let seen = read_provider(clients, base, p).await;
            clients.recorder.record(
                client,
                Key::Provider(p),
                Action::ReadProvider,
                invoked,
                seen.map_or(Outcome::Unknown, Outcome::Read),
            );
        }
        _ => {
            let invoked = clients.recorder.now();
            let seen = read_usage(clients, base, p).await;
            clients.recorder.record(
                client,
                Key::Provider(p),
                Action::ReadUsage,
                invoked,
                seen.map_or(Outcome::Unknown, Outcome::Read),
            );
        }
    }
}

/// Creates a lease of one or two hours on host `h`.
async fn create_lease(clients: &Clients, client: usize, base: &str, h: u8, rng: &mut Rng) {
    let n = clients
        .next_lease
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let first = u8::try_from(rng.below(u64::from(clients.shape.slots))).unwrap_or(0);
    let hours = if first + 1 < clients.shape.slots && rng.below(2) == 0 {
        2
    } else {
        1
    };
    let slots = ((1_u16 << hours) - 1) as u8;
    let slots = slots << first;
    let start = clients.slot_zero + jiff::SignedDuration::from_hours(i64::from(first));
    let end = start + jiff::SignedDuration::from_hours(hours);
    let body = json!({"name": lease_name(h, n),
        "start_date": start.strftime("%Y-%m-%d %H:%M").to_string(),
        "end_date": end.strftime("%Y-%m-%d %H:%M").to_string(),
        "reservations": [{"resource_type": "physical:host", "min": 1, "max": 1,
            "resource_properties": format!(r#"["==", "$hypervisor_hostname", "{}"]"#, host_name(h))}],
        "events": []});
    let invoked = clients.recorder.now();
    let answered = answer(
        clients
            .http
            .post(format!("{base}{LEASES}"))
            .json(&body)
            .send()
            .await,
    )
    .await;
    let outcome = write_outcome(answered.as_ref());
    if outcome == Outcome::Ok
        && let Some(id) = answered
            .as_ref()
            .and_then(|(_, body)| body["lease"]["id"].as_str())
    {
        clients
            .leases
            .lock()
            .expect("the leases lock")
            .insert((h, n), id.to_owned());
    }
    clients.recorder.record(
        client,
        Key::Host(h),
        Action::CreateLease { name: n, slots },
        invoked,
        outcome,
    );
}

/// Deletes one of the leases on host `h` whose create was acknowledged.
async fn delete_lease(clients: &Clients, client: usize, base: &str, h: u8, rng: &mut Rng) {
    let known: Vec<(u32, String)> = clients
        .leases
        .lock()
        .expect("the leases lock")
        .iter()
        .filter(|((host, _), _)| *host == h)
        .map(|((_, n), id)| (*n, id.clone()))
        .collect();
    if known.is_empty() {
        return;
    }
    let (n, id) = &known[usize::try_from(rng.below(known.len() as u64)).unwrap_or(0)];
    let invoked = clients.recorder.now();
    let answered = answer(
        clients
            .http
            .delete(format!("{base}{LEASES}/{id}"))
            .send()
            .await,
    )
    .await;
    clients.recorder.record(
        client,
        Key::Host(h),
        Action::DeleteLease { name: *n },
        invoked,
        write_outcome(answered.as_ref()),
    );
}

/// One client's operation on host `h`: create a lease of one or two hours on it, delete one,
/// or list them.
async fn on_host(clients: &Clients, client: usize, base: &str, h: u8, rng: &mut Rng) {
    match rng.below(5) {
        0 | 1 => create_lease(clients, client, base, h, rng).await,
        2 => delete_lease(clients, client, base, h, rng).await,
        _ => {
            let invoked = clients.recorder.now();
            if let Some(by_host) = read_leases(clients, base).await {
                for (host, names) in by_host {
                    clients.recorder.record(
                        client,
                        Key::Host(host),
                        Action::ReadLeases,
                        invoked,
                        Outcome::Read(Observation::Leases(names)),
                    );
                }
            }
        }
    }
}

/// The mean pause between two operations of a client unless told: each pause is 10 to 50 ms.
pub const PAUSE_DEFAULT: Duration = Duration::from_millis(30);

/// Client `client`: operations until `until` (since the run began), each to a replica chosen
/// at random, with a pause of a third of `pause` to five thirds of it between them.
pub async fn client(
    clients: Arc<Clients>,
    client: usize,
    seed: u64,
    until: Duration,
    pause: Duration,
) {
    let least = pause / 3;
    let spread = u64::try_from((pause * 4 / 3).as_micros())
        .unwrap_or(u64::MAX)
        .max(1);
    let mut rng = Rng::new(seed);
    while clients.recorder.now() < until {
        let base =
            &clients.bases[usize::try_from(rng.below(clients.bases.len() as u64)).unwrap_or(0)];
        let keys = u64::from(clients.shape.providers) + u64::from(clients.shape.hosts);
        let key = rng.below(keys + u64::from(clients.shape.providers));
        match u8::try_from(key % keys).unwrap_or(0) {
            p if p < clients.shape.providers => {
                on_provider(&clients, client, base, p, &mut rng).await
            }
            h => {
                on_host(
                    &clients,
                    client,
                    base,
                    h - clients.shape.providers,
                    &mut rng,
                )
                .await
            }
        }
        tokio::time::sleep(least + Duration::from_micros(rng.below(spread))).await;
    }
}
