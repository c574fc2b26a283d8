//! `berth-load attack`: other users' writes and `/healthz` while attackers loop the most
//! expensive requests the limits allow.
//!
//! Setup: H Blazar hosts (as `create-leases` enrolls them) and one Placement tree of a root
//! with W one-VCPU children. Then, for `--seconds`, at once:
//! - `--attackers` clients loop, in turn, the three worst requests: a lease of 64 impossible
//!   `virtual:instance` reservations (amount 10,000 each, `search_horizon_days` 366: refused
//!   with a counter-offer), the same body on `POST /reservation/v1/availability`, and
//!   `GET /placement/allocation_candidates` with 64 isolated `resourcesN=VCPU:1` groups (the
//!   search over the wide tree runs into its bounds);
//! - `--victims` clients create small leases (201 expected) and as many PUT allocations for
//!   new consumers on H plain Placement providers (204 expected);
//! - one prober GETs `/healthz` every 10 ms.
//!
//! Every loop is bounded by `--requests` per class and by the phase's end (and `--max-seconds`);
//! the target must be a loopback address. Figures: p50/p99 per class.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};

use crate::client::{Target, allocation_target, uuid_for};
use crate::get::timed;
use crate::leases::{self, HOST_VCPUS, origin};
use crate::pool;
use crate::stats::{Sample, Summary};

/// Reservations in the attack lease (the most a lease may hold).
const ATTACK_RESERVATIONS: usize = 64;
/// Instances per attack reservation (the most one may ask for).
const ATTACK_AMOUNT: u64 = 10_000;
/// Request groups in the attack candidates request (the most one may name).
const ATTACK_GROUPS: usize = 64;
/// Namespace of the victims' consumer uuids.
const CONSUMER_NAMESPACE: u64 = 0xa77a_c000_0000_0000;
/// Pause of the prober between two `/healthz`.
const PROBE_EVERY: Duration = Duration::from_millis(10);

/// What one run does.
pub(crate) struct Options {
    pub(crate) hosts: usize,
    pub(crate) width: usize,
    pub(crate) attackers: usize,
    pub(crate) victims: usize,
    pub(crate) seconds: u64,
    pub(crate) requests: usize,
}

/// The attack lease (or availability) body.
fn attack_body(start: i64) -> Value {
    let reservation = json!({"resource_type": "virtual:instance", "vcpus": 64,
        "memory_mb": 1024, "disk_gb": 10, "amount": ATTACK_AMOUNT, "affinity": null});
    json!({
        "name": "attack",
        "start_date": leases::rfc3339(start),
        "end_date": leases::rfc3339(start + 30 * leases::DAY_SECONDS),
        "reservations": vec![reservation; ATTACK_RESERVATIONS],
        "search_horizon_days": 366,
        "events": [],
    })
}

/// The attack candidates path (below the server's origin).
fn attack_candidates() -> String {
    let groups: Vec<String> = (1..=ATTACK_GROUPS)
        .map(|n| format!("resources{n}=VCPU:1"))
        .collect();
    format!(
        "/placement/allocation_candidates?group_policy=isolate&{}",
        groups.join("&")
    )
}

/// Creates the wide tree (a root with `width` one-VCPU children) unless it exists.
async fn wide_tree(target: &Target, base: &str, width: usize) -> anyhow::Result<()> {
    let client = &target.client;
    let root = uuid_for(0x7ee0_0000_0000_0000, 0);
    let url = format!("{base}/placement/resource_providers");
    let made = client
        .post(&url)
        .json(&json!({"name": "attack-root", "uuid": root}))
        .send()
        .await?;
    match made.status().as_u16() {
        200 | 201 => {}
        409 => return Ok(()),
        status => bail!("create the wide tree's root: status {status}"),
    }
    for child in 0..width {
        target.check_deadline("the wide tree")?;
        let uuid = uuid_for(0x7ee0_0000_0000_0000, child as u64 + 1);
        let body = json!({"name": format!("attack-child-{child:04}"), "uuid": uuid,
                          "parent_provider_uuid": root});
        let status = client.post(&url).json(&body).send().await?.status();
        if !status.is_success() {
            bail!("create child {child}: {status}");
        }
        let inventory = json!({"resource_provider_generation": 0,
                               "inventories": {"VCPU": {"total": 1}}});
        let status = client
            .put(format!("{url}/{uuid}/inventories"))
            .json(&inventory)
            .send()
            .await?
            .status();
        if !status.is_success() {
            bail!("set child {child}'s inventory: {status}");
        }
    }
    Ok(())
}

/// Creates `count` plain Placement providers with room for every allocation of the run (not
/// Blazar hosts, so that leases never fence them), unless they exist; returns their uuids.
async fn allocation_targets(
    target: &Target,
    base: &str,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    let client = &target.client;
    let url = format!("{base}/placement/resource_providers");
    let mut uuids = Vec::with_capacity(count);
    for index in 0..count {
        target.check_deadline("the allocation targets")?;
        let uuid = uuid_for(0xa110_0000_0000_0000, index as u64).to_string();
        let name = format!("attack-target-{index:04}");
        allocation_target(client, &url, &uuid, &name, (1_000_000, 100_000_000)).await?;
        uuids.push(uuid);
    }
    Ok(uuids)
}

/// Prints p50/p99 (and the rest of the summary) per class, as text or as one JSON object.
fn report(target: &Target, classes: &[Class], requests: usize, elapsed: Duration) {
    let mut report = serde_json::Map::new();
    for class in classes {
        let summary = Summary::new(
            requests,
            &class.samples.results,
            class.expected,
            elapsed,
            false,
        );
        match target.json {
            true => {
                report.insert(class.name.to_owned(), summary.to_json());
            }
            false => summary.print(class.name, false),
        }
    }
    if target.json {
        println!("{}", Value::Object(report));
    }
}

fn class(name: &'static str, expected: u16, samples: pool::Outcome<Sample>) -> Class {
    Class {
        name,
        expected,
        samples,
    }
}

/// One class of the run: its name, the status that counts as success, its samples.
struct Class {
    name: &'static str,
    expected: u16,
    samples: pool::Outcome<Sample>,
}

/// Runs the setup and the measured phase, and prints p50/p99 per class.
pub(crate) async fn run(target: &Target, options: &Options) -> anyhow::Result<()> {
    if options.hosts == 0 || options.victims == 0 {
        bail!("--hosts and --victims must be at least 1");
    }
    let base = origin(target)?;
    let now = leases::enroll(target, &base, options.hosts, 8).await?;
    wide_tree(target, &base, options.width).await?;
    let hosts = Arc::new(allocation_targets(target, &base, options.hosts).await?);
    let end = (Instant::now() + Duration::from_secs(options.seconds)).min(target.deadline);
    let start_at = (now / 3_600 + 1) * 3_600 + leases::DAY_SECONDS;
    let per_slot = options.hosts * HOST_VCPUS as usize / 2;
    let client = target.client.clone();
    let attack = Arc::new(attack_body(start_at));
    let leases_url = Arc::new(format!("{base}/reservation/v1/leases"));
    let availability_url = Arc::new(format!("{base}/reservation/v1/availability"));
    let candidates_url = Arc::new(format!("{base}{}", attack_candidates()));
    let attackers = {
        let (client, attack) = (client.clone(), Arc::clone(&attack));
        let (leases_url, availability_url) = (Arc::clone(&leases_url), availability_url);
        // `--attackers 0` measures the victims alone (the baseline).
        let attacks = options.requests * usize::from(options.attackers > 0);
        pool::run(attacks, options.attackers, end, move |i| {
            let request = match i % 3 {
                0 => client.post(leases_url.as_str()).json(attack.as_ref()),
                1 => client.post(availability_url.as_str()).json(attack.as_ref()),
                _ => client.get(candidates_url.as_str()),
            };
            timed(request)
        })
    };
    let lease_victims = {
        let (client, url) = (client.clone(), Arc::clone(&leases_url));
        pool::run(options.requests, options.victims, end, move |i| {
            let body = leases::lease_body("bench-lease", i, per_slot, start_at);
            timed(client.post(url.as_str()).json(&body))
        })
    };
    let allocation_victims = {
        let (client, base, hosts) = (client.clone(), base.clone(), Arc::clone(&hosts));
        pool::run(options.requests, options.victims, end, move |i| {
            let provider = &hosts[i % hosts.len()];
            let consumer = uuid_for(CONSUMER_NAMESPACE ^ now as u64, i as u64);
            let body = json!({
                "allocations": {provider: {"resources": {"VCPU": 1, "MEMORY_MB": 64}}},
                "project_id": "p", "user_id": "u", "consumer_generation": null,
                "consumer_type": "INSTANCE",
            });
            timed(
                client
                    .put(format!("{base}/placement/allocations/{consumer}"))
                    .json(&body),
            )
        })
    };
    let prober = {
        let (client, url) = (client.clone(), format!("{base}/healthz"));
        pool::run(options.requests, 1, end, move |_| {
            let request = client.get(url.as_str());
            async move {
                tokio::time::sleep(PROBE_EVERY).await;
                timed(request).await
            }
        })
    };
    let started = Instant::now();
    let (attackers, lease_victims, allocation_victims, prober) =
        tokio::join!(attackers, lease_victims, allocation_victims, prober);
    let elapsed = started.elapsed();
    let classes = [
        class("attack (lease, availability, candidates)", 409, attackers?),
        class("victim POST /reservation/v1/leases", 201, lease_victims?),
        class(
            "victim PUT /placement/allocations/{consumer}",
            204,
            allocation_victims?,
        ),
        class("GET /healthz", 200, prober?),
    ];
    report(target, &classes, options.requests, elapsed);
    Ok(())
}
