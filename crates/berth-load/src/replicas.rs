//! `berth-load replicas`: writes and reads spread over several berth replicas that share one
//! PostgreSQL database, on a server already populated with Blazar hosts (and leases), for
//! instance by `create-leases`.
//!
//! The writes are of two kinds: lease creates (`POST /reservation/v1/leases`, one small
//! instance reservation each, as `create-leases` sends; 201 expected) and allocation writes for
//! new consumers (`PUT /placement/allocations/{consumer}`, as `put-allocations` sends; 204
//! expected) on a few plain Placement providers the tool creates on the first replica, so that no
//! lease ever fences them. Four scenarios, in this order:
//! - **one writer**: C clients send every write to the first replica, the others idle;
//! - **round robin**: C clients send write `n` to replica `n mod R`;
//! - **visibility**: one client writes on replica `i` and then reads the object on replica
//!   `i + 1` (`GET /reservation/v1/leases/{id}`, 200 once there, or
//!   `GET /placement/allocations/{consumer}` until it lists a provider), again every
//!   millisecond until it shows: the time from the write's answer to the answer of the first read
//!   that shows it;
//! - **read after a foreign write**: one client writes (an allocation) on replica `i`, then times
//!   one read of one provider (`GET /placement/resource_providers?uuid=...`) on replica `i + 1`,
//!   and a second one just after it for comparison.
//!
//! With one URL, "the next replica" is the same one: nothing is foreign, and the tool says so.
//! Lease windows start two days after the server's clock (the `Date` header of its first
//! answer) and take at most a quarter of the hosts' VCPUs per two-hour slot, so they fit beside
//! `create-leases`'s; `--seed` moves them later and changes the consumers, for another run on the
//! same database. Every loop is bounded by a count, by `--scenario-seconds` per scenario and by
//! `--max-seconds`; every URL must be a loopback address.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::client::{Common, Target, allocation_target, uuid_for};
use crate::leases::{
    self, DAY_SECONDS, HOST_VCPUS, SLOT_SECONDS, origin, parse_http_date, rfc3339,
};
use crate::pool;
use crate::stats::{Sample, Summary};

/// Namespace of the consumer uuids (the seed is mixed in).
const CONSUMER_NAMESPACE: u64 = 0x4e91_c000_0000_0000;
/// Namespace of the allocation target providers' uuids.
const TARGET_NAMESPACE: u64 = 0x4e91_7a00_0000_0000;
/// Plain Placement providers the allocation writes go to.
const TARGETS: usize = 16;
/// Pause between two reads of the visibility poll.
const POLL_PAUSE: Duration = Duration::from_millis(1);
/// Longest a visibility sample polls before it counts as never seen.
const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(10);

/// Command line of `berth-load replicas`.
#[derive(Args)]
pub(crate) struct ReplicaArgs {
    /// Base URL of each replica, e.g. http://127.0.0.1:8778 (repeat, or a comma list; loopback
    /// addresses only). The first one is "replica 1".
    #[arg(long = "url", value_delimiter = ',', required = true)]
    pub(crate) urls: Vec<String>,
    /// Hard deadline for the whole run, in seconds.
    #[arg(long, default_value_t = 600)]
    pub(crate) max_seconds: u64,
    /// Longest each scenario runs, in seconds; one cut short reports what it finished.
    #[arg(long, default_value_t = 120)]
    pub(crate) scenario_seconds: u64,
    /// Print the result as one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Concurrent clients of the write scenarios.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: usize,
    /// Writes of each kind in each write scenario.
    #[arg(long, default_value_t = 2000)]
    pub(crate) requests: usize,
    /// Samples of each kind in the visibility and read-after-write scenarios.
    #[arg(long, default_value_t = 200)]
    pub(crate) samples: usize,
    /// Moves the lease windows and changes the consumers; change it to run again on the same
    /// database.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// The process id of each replica, in the order of `--url` (repeat, or a comma list): the
    /// write scenarios then report the CPU time each replica and PostgreSQL spent on them.
    #[arg(long = "pid", value_delimiter = ',')]
    pub(crate) pids: Vec<u32>,
}

/// CPU time (user and system, in milliseconds) of processes on this machine, read from
/// `/proc`: each replica's, and PostgreSQL's (every process named `postgres`).
#[derive(Clone, Debug, Default)]
struct Cpu {
    replicas: Vec<u64>,
    postgres: u64,
}

/// Clock ticks per second of `/proc/*/stat` (Linux's `USER_HZ`, 100 on every architecture it
/// exposes to user space).
const USER_HZ: u64 = 100;

impl Cpu {
    /// Now, for the processes `pids`.
    fn read(pids: &[u32]) -> Cpu {
        let replicas = pids
            .iter()
            .map(|pid| cpu_millis(&format!("/proc/{pid}/stat")).map_or(0, |(_, ms)| ms))
            .collect();
        let mut postgres = 0;
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let path = entry.path().join("stat");
                if let Some(("postgres", ms)) = cpu_millis(&path.to_string_lossy())
                    .as_ref()
                    .map(|(name, ms)| (name.as_str(), *ms))
                {
                    postgres += ms;
                }
            }
        }
        Cpu { replicas, postgres }
    }

    /// What was spent between `self` and `later`.
    fn spent_until(&self, later: &Cpu) -> Cpu {
        Cpu {
            replicas: later
                .replicas
                .iter()
                .zip(&self.replicas)
                .map(|(after, before)| after.saturating_sub(*before))
                .collect(),
            postgres: later.postgres.saturating_sub(self.postgres),
        }
    }

    fn to_json(&self) -> Value {
        json!({"replicas_ms": self.replicas, "postgres_ms": self.postgres})
    }
}

/// The command name and CPU time (user + system, ms) in a `/proc/PID/stat` file.
fn cpu_millis(path: &str) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let name = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?.to_owned();
    // The fields after the name: state is the first; utime and stime are the 12th and 13th.
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split(' ');
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((name, (utime + stime) * 1_000 / USER_HZ))
}

/// What is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `POST /reservation/v1/leases`.
    Lease,
    /// `PUT /placement/allocations/{consumer}`.
    Allocation,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Lease => "lease creates",
            Kind::Allocation => "allocation writes",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Lease => "lease_creates",
            Kind::Allocation => "allocation_writes",
        }
    }

    fn expected(self) -> u16 {
        match self {
            Kind::Lease => 201,
            Kind::Allocation => 204,
        }
    }
}

/// One replica: its origin and a client.
struct Replica {
    origin: String,
    client: reqwest::Client,
}

/// What the scenarios share: the replicas, the lease windows, the allocation targets and the
/// counters that keep every lease and consumer new.
struct Bench {
    replicas: Vec<Replica>,
    per_slot: usize,
    first_start: i64,
    targets: Vec<String>,
    consumer_namespace: u64,
    next_lease: AtomicUsize,
    next_consumer: AtomicU64,
    deadline: Instant,
}

/// A finished write: its sample and, when it succeeded, the id of what it made.
struct Written {
    sample: Sample,
    id: Option<String>,
}

impl Bench {
    /// The body of the next lease.
    fn next_lease_body(&self) -> Value {
        let index = self.next_lease.fetch_add(1, Ordering::Relaxed);
        leases::lease_body("replicas-lease", index, self.per_slot, self.first_start)
    }

    /// Writes one new object of `kind` on `replica` and times it.
    async fn write(&self, replica: usize, kind: Kind) -> Written {
        let Replica { origin, client } = &self.replicas[replica];
        let (request, id) = match kind {
            Kind::Lease => (
                client
                    .post(format!("{origin}/reservation/v1/leases"))
                    .json(&self.next_lease_body()),
                None,
            ),
            Kind::Allocation => {
                let index = self.next_consumer.fetch_add(1, Ordering::Relaxed);
                let consumer = uuid_for(self.consumer_namespace, index).to_string();
                let provider = &self.targets[index as usize % self.targets.len()];
                let body = json!({
                    "allocations": {provider: {"resources": {"VCPU": 1, "MEMORY_MB": 64}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": null,
                    "consumer_type": "INSTANCE",
                });
                (
                    client
                        .put(format!("{origin}/placement/allocations/{consumer}"))
                        .json(&body),
                    Some(consumer),
                )
            }
        };
        let (sample, body) = send(request).await;
        let id = match (sample.status == kind.expected(), kind) {
            (false, _) => None,
            (true, Kind::Allocation) => id,
            (true, Kind::Lease) => serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["lease"]["id"].as_str().map(str::to_owned)),
        };
        Written { sample, id }
    }

    /// Reads the object `id` of `kind` on `replica`; true when the answer shows it.
    async fn shows(&self, replica: usize, kind: Kind, id: &str) -> (Sample, bool) {
        let Replica { origin, client } = &self.replicas[replica];
        let url = match kind {
            Kind::Lease => format!("{origin}/reservation/v1/leases/{id}"),
            Kind::Allocation => format!("{origin}/placement/allocations/{id}"),
        };
        let (sample, body) = send(client.get(url)).await;
        let seen = match (sample.status, kind) {
            (200, Kind::Lease) => true,
            (200, Kind::Allocation) => serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["allocations"].as_object().map(|a| !a.is_empty()))
                .unwrap_or(false),
            _ => false,
        };
        (sample, seen)
    }

    /// The database's catalog sequence, as replica 1's `/metrics` shows it (one per commit of
    /// any replica), or `None` when it does not answer it.
    async fn stored_seq(&self) -> Option<u64> {
        let Replica { origin, client } = &self.replicas[0];
        let text = client
            .get(format!("{origin}/metrics"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix("berth_catalog_stored_seq "))
            .and_then(|value| value.trim().parse().ok())
    }

    /// One cheap read on `replica` that goes through the catalog: one provider by uuid.
    async fn probe(&self, replica: usize) -> Sample {
        let Replica { origin, client } = &self.replicas[replica];
        let url = format!(
            "{origin}/placement/resource_providers?uuid={}",
            self.targets[0]
        );
        send(client.get(url)).await.0
    }

    /// The replica after `replica`, round the ring.
    fn next(&self, replica: usize) -> usize {
        (replica + 1) % self.replicas.len()
    }

    /// The end of a scenario that starts now.
    fn scenario_deadline(&self, seconds: u64) -> Instant {
        (Instant::now() + Duration::from_secs(seconds)).min(self.deadline)
    }
}

/// Sends one request and times it until the whole body has arrived; returns the body too.
async fn send(request: reqwest::RequestBuilder) -> (Sample, Vec<u8>) {
    let start = Instant::now();
    let (status, body) = match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.bytes().await {
                Ok(body) => (status, body.to_vec()),
                Err(_) => (0, Vec::new()),
            }
        }
        Err(_) => (0, Vec::new()),
    };
    let sample = Sample {
        latency: start.elapsed(),
        status,
        bytes: body.len(),
    };
    (sample, body)
}

/// The figures of a run, printed as text as they come and kept for the JSON object.
struct Report {
    json: bool,
    object: serde_json::Map<String, Value>,
    /// Something answered what it must not, or a visibility sample never saw its object.
    failures: Vec<String>,
}

impl Report {
    /// Prints a summary (text mode) and notes unexpected answers.
    fn summary(&mut self, title: &str, summary: &Summary) {
        if !self.json {
            summary.print(title, false);
        }
        if summary.ok != summary.finished() {
            self.failures.push(format!(
                "{title}: {} of {} answered otherwise",
                summary.finished() - summary.ok,
                summary.finished()
            ));
        }
    }

    /// Prints a line of text (text mode only).
    fn line(&self, text: &str) {
        if !self.json {
            println!("{text}");
        }
    }
}

/// Creates the plain providers the allocation writes go to (kept when they exist) on the first
/// replica; returns their uuids.
async fn allocation_targets(bench: &Bench) -> anyhow::Result<Vec<String>> {
    let Replica { origin, client } = &bench.replicas[0];
    let url = format!("{origin}/placement/resource_providers");
    let mut uuids = Vec::with_capacity(TARGETS);
    for index in 0..TARGETS {
        if Instant::now() >= bench.deadline {
            bail!("--max-seconds reached while creating the allocation targets");
        }
        let uuid = uuid_for(TARGET_NAMESPACE, index as u64).to_string();
        let name = format!("replicas-target-{index:02}");
        allocation_target(client, &url, &uuid, &name, (10_000_000, 1_000_000_000)).await?;
        uuids.push(uuid);
    }
    Ok(uuids)
}

/// The number of Blazar hosts and the server's clock (epoch seconds), from the first replica.
async fn hosts_and_clock(replica: &Replica) -> anyhow::Result<(usize, i64)> {
    let response = replica
        .client
        .get(format!("{}/reservation/v1/os-hosts", replica.origin))
        .send()
        .await
        .context("list the hosts")?;
    let status = response.status();
    let now = response
        .headers()
        .get(reqwest::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_http_date)
        .context("the server's answer carries no Date header")?;
    let body = response.text().await?;
    if !status.is_success() {
        bail!("GET /reservation/v1/os-hosts: {status}: {body}");
    }
    let listing: Value = serde_json::from_str(&body).context("the hosts listing is not JSON")?;
    let hosts = listing["hosts"].as_array().map_or(0, Vec::len);
    if hosts == 0 {
        bail!("the server has no Blazar hosts; populate it first (create-leases)");
    }
    Ok((hosts, now))
}

/// Checks that every replica answers `/healthz`; returns each one's database kind.
async fn databases(replicas: &[Replica]) -> anyhow::Result<Vec<String>> {
    let mut kinds = Vec::with_capacity(replicas.len());
    for (index, Replica { origin, client }) in replicas.iter().enumerate() {
        let health: Value = client
            .get(format!("{origin}/healthz"))
            .send()
            .await
            .with_context(|| format!("reach replica {}", index + 1))?
            .json()
            .await
            .with_context(|| format!("replica {}'s /healthz", index + 1))?;
        kinds.push(health["database"].as_str().unwrap_or("unknown").to_owned());
    }
    Ok(kinds)
}

/// C clients send `requests` writes of `kind`, write `n` to replica 1, or with `round_robin`
/// to replica `n % R`: the summary of every write, and of those each replica took.
async fn writes(
    bench: &Arc<Bench>,
    kind: Kind,
    requests: usize,
    concurrency: usize,
    deadline: Instant,
    round_robin: bool,
) -> anyhow::Result<(Summary, Vec<Summary>)> {
    let count = bench.replicas.len();
    let shared = Arc::clone(bench);
    let start = Instant::now();
    let outcome = pool::run(requests, concurrency, deadline, move |index| {
        let bench = Arc::clone(&shared);
        let replica = if round_robin { index % count } else { 0 };
        async move { (replica, bench.write(replica, kind).await.sample) }
    })
    .await?;
    let elapsed = start.elapsed();
    let mut taken: Vec<Vec<Sample>> = (0..count).map(|_| Vec::new()).collect();
    for (replica, sample) in outcome.results {
        taken[replica].push(sample);
    }
    let summary = |planned: usize, samples: &[Sample]| {
        Summary::new(
            planned,
            samples,
            kind.expected(),
            elapsed,
            outcome.cut_short,
        )
    };
    let by_replica: Vec<Summary> = taken.iter().map(|s| summary(s.len(), s)).collect();
    let every: Vec<Sample> = taken.into_iter().flatten().collect();
    Ok((summary(requests, &every), by_replica))
}

/// The visibility scenario for one kind: the summaries of the visibility times and of the
/// writes, and the most reads one sample needed.
async fn visibility(
    bench: &Bench,
    kind: Kind,
    samples: usize,
    deadline: Instant,
) -> (Summary, Summary, usize) {
    let mut seen_after = Vec::with_capacity(samples);
    let mut written = Vec::with_capacity(samples);
    let mut most_reads = 0;
    let mut cut_short = false;
    let start = Instant::now();
    for sample in 0..samples {
        if Instant::now() >= deadline {
            cut_short = true;
            break;
        }
        let writer = sample % bench.replicas.len();
        let reader = bench.next(writer);
        let Written { sample: write, id } = bench.write(writer, kind).await;
        let ok = write.status == kind.expected();
        written.push(write);
        let Some(id) = id.filter(|_| ok) else {
            continue;
        };
        let answered = Instant::now();
        let give_up = (answered + VISIBILITY_TIMEOUT).min(deadline);
        let mut reads = 0;
        let (status, bytes) = loop {
            let (read, seen) = bench.shows(reader, kind, &id).await;
            reads += 1;
            if seen {
                break (200, read.bytes);
            }
            if Instant::now() >= give_up {
                cut_short |= Instant::now() >= deadline;
                break (0, read.bytes);
            }
            tokio::time::sleep(POLL_PAUSE).await;
        };
        most_reads = most_reads.max(reads);
        seen_after.push(Sample {
            latency: answered.elapsed(),
            status,
            bytes,
        });
    }
    let elapsed = start.elapsed();
    (
        Summary::new(samples, &seen_after, 200, elapsed, cut_short),
        Summary::new(samples, &written, kind.expected(), elapsed, cut_short),
        most_reads,
    )
}

/// The read-after-a-foreign-write scenario: summaries of the first read, the second read and
/// the writes.
async fn read_after_write(
    bench: &Bench,
    samples: usize,
    deadline: Instant,
) -> (Summary, Summary, Summary) {
    let mut first = Vec::with_capacity(samples);
    let mut second = Vec::with_capacity(samples);
    let mut written = Vec::with_capacity(samples);
    let mut cut_short = false;
    let start = Instant::now();
    for sample in 0..samples {
        if Instant::now() >= deadline {
            cut_short = true;
            break;
        }
        let writer = sample % bench.replicas.len();
        let reader = bench.next(writer);
        written.push(bench.write(writer, Kind::Allocation).await.sample);
        first.push(bench.probe(reader).await);
        second.push(bench.probe(reader).await);
    }
    let elapsed = start.elapsed();
    (
        Summary::new(samples, &first, 200, elapsed, cut_short),
        Summary::new(samples, &second, 200, elapsed, cut_short),
        Summary::new(
            samples,
            &written,
            Kind::Allocation.expected(),
            elapsed,
            cut_short,
        ),
    )
}

/// Checks the replicas, counts the hosts, places the lease windows, creates the allocation
/// targets and prints what the run is about to measure.
async fn setup(args: &ReplicaArgs) -> anyhow::Result<(Arc<Bench>, Report)> {
    if args.urls.is_empty() {
        bail!("give at least one --url");
    }
    let mut replicas = Vec::with_capacity(args.urls.len());
    let mut deadline = None;
    for url in &args.urls {
        let target = Target::new(&Common {
            url: url.trim().to_owned(),
            max_seconds: args.max_seconds,
            json: args.json,
        })?;
        deadline.get_or_insert(target.deadline);
        replicas.push(Replica {
            origin: origin(&target)?,
            client: target.client,
        });
    }
    let deadline = deadline.context("no replica")?;
    let count = replicas.len();
    let kinds = databases(&replicas).await?;
    if count > 1 && kinds.iter().any(|k| k != "postgres") {
        bail!(
            "replicas must share one PostgreSQL database; their /healthz say {}",
            kinds.join(", ")
        );
    }
    let (hosts, now) = hosts_and_clock(&replicas[0]).await?;
    // A quarter of the hosts' VCPUs per slot, so the windows fit beside create-leases's half.
    let per_slot = (hosts * HOST_VCPUS as usize / 4).max(1);
    let planned = 2 * args.requests + args.samples;
    let slots = planned.div_ceil(per_slot) as i64;
    let first_start =
        (now / 3_600 + 1) * 3_600 + 2 * DAY_SECONDS + args.seed as i64 * slots * SLOT_SECONDS;
    let mut bench = Bench {
        replicas,
        per_slot,
        first_start,
        targets: Vec::new(),
        consumer_namespace: CONSUMER_NAMESPACE ^ args.seed,
        next_lease: AtomicUsize::new(0),
        next_consumer: AtomicU64::new(0),
        deadline,
    };
    bench.targets = allocation_targets(&bench).await?;
    let bench = Arc::new(bench);

    let mut report = Report {
        json: args.json,
        object: serde_json::Map::new(),
        failures: Vec::new(),
    };
    report.object.insert("replicas".into(), json!(count));
    report.object.insert("hosts".into(), json!(hosts));
    report.object.insert("databases".into(), json!(kinds));
    // With one replica the "foreign" scenarios write and read on the same one.
    report
        .object
        .insert("foreign_is_same_replica".into(), json!(count == 1));
    report.line(&format!(
        "{count} replica(s) over {} ({}), {hosts} hosts; leases from {}, {} clients, {} writes \
         of each kind per write scenario, {} samples per sample scenario, at most {} s each",
        kinds[0],
        args.urls.join(", "),
        rfc3339(first_start),
        args.concurrency,
        args.requests,
        args.samples,
        args.scenario_seconds
    ));
    if count == 1 {
        report.line(
            "ONE replica: the round-robin writes all go to it, and the \"foreign\" writes and \
             reads below are on the same replica (nothing to reload: a baseline, not a \
             replica figure).",
        );
    }
    Ok((bench, report))
}

/// The one-writer and round-robin scenarios, each kind in turn.
async fn write_scenarios(
    bench: &Arc<Bench>,
    args: &ReplicaArgs,
    report: &mut Report,
) -> anyhow::Result<()> {
    for round_robin in [false, true] {
        let (key, what) = match round_robin {
            false => ("one_writer", "one writer (replica 1), others idle"),
            true => ("round_robin", "round robin over every replica"),
        };
        let mut object = serde_json::Map::new();
        for kind in [Kind::Lease, Kind::Allocation] {
            let before = Cpu::read(&args.pids);
            let seq_before = bench.stored_seq().await;
            let (summary, by_replica) = writes(
                bench,
                kind,
                args.requests,
                args.concurrency,
                bench.scenario_deadline(args.scenario_seconds),
                round_robin,
            )
            .await?;
            let spent = before.spent_until(&Cpu::read(&args.pids));
            let commits = match (seq_before, bench.stored_seq().await) {
                (Some(before), Some(after)) => Some(after.saturating_sub(before)),
                _ => None,
            };
            report.summary(
                &format!(
                    "{what}: {} x{}, concurrency {}",
                    kind.name(),
                    args.requests,
                    args.concurrency
                ),
                &summary,
            );
            let mut entry = summary.to_json();
            if round_robin && by_replica.len() > 1 {
                // Where a round-robin write went: the writer's own, or a follower that forwards
                // it (replica 1 is the writer unless the replicas were started otherwise).
                let medians: Vec<String> = by_replica
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        format!(
                            "replica {} {:.3} / {:.3}",
                            i + 1,
                            s.percentile_ms(50.0),
                            s.percentile_ms(99.0)
                        )
                    })
                    .collect();
                report.line(&format!(
                    "  latency ms by replica (median / p99): {}",
                    medians.join(", ")
                ));
                entry["by_replica"] = by_replica.iter().map(Summary::to_json).collect();
            }
            if let Some(commits) = commits {
                // Every replica's commits, the scenario's and any engine's (few, at this pace).
                let per_commit = summary.ok as f64 / commits.max(1) as f64;
                report.line(&format!(
                    "  commits: {commits} ({per_commit:.1} writes per commit)"
                ));
                entry["commits"] = json!(commits);
            }
            if !args.pids.is_empty() {
                report.line(&format!(
                    "  CPU: replicas {:?} ms, PostgreSQL {} ms",
                    spent.replicas, spent.postgres
                ));
                entry["cpu"] = spent.to_json();
            }
            object.insert(kind.key().into(), entry);
        }
        report.object.insert(key.into(), Value::Object(object));
    }
    Ok(())
}

/// The visibility scenario (each kind) and the read after a foreign write.
async fn sample_scenarios(bench: &Bench, args: &ReplicaArgs, report: &mut Report) {
    let mut object = serde_json::Map::new();
    for kind in [Kind::Lease, Kind::Allocation] {
        let scenario_deadline = bench.scenario_deadline(args.scenario_seconds);
        let (seen, written, most_reads) =
            visibility(bench, kind, args.samples, scenario_deadline).await;
        report.summary(
            &format!(
                "visibility of {} on the next replica: from the write's answer to the first \
                 read that shows it, x{}",
                kind.name(),
                args.samples
            ),
            &seen,
        );
        report.line(&format!("  most reads one sample needed: {most_reads}"));
        report.summary(
            &format!("  (the {} of the visibility samples)", kind.name()),
            &written,
        );
        let mut entry = seen.to_json();
        entry["most_reads"] = json!(most_reads);
        entry["writes"] = written.to_json();
        object.insert(kind.key().into(), entry);
    }
    report
        .object
        .insert("visibility".into(), Value::Object(object));

    let (first, second, written) = read_after_write(
        bench,
        args.samples,
        bench.scenario_deadline(args.scenario_seconds),
    )
    .await;
    report.summary(
        &format!(
            "read after a foreign write: GET /placement/resource_providers?uuid=... on the next \
             replica right after an allocation write, x{}",
            args.samples
        ),
        &first,
    );
    report.summary("  the second read, just after the first", &second);
    report.summary("  the allocation writes before them", &written);
    report.object.insert(
        "read_after_foreign_write".into(),
        json!({
            "first_read": first.to_json(),
            "second_read": second.to_json(),
            "writes": written.to_json(),
        }),
    );
}

/// Runs the four scenarios and prints their figures; fails when an answer was not the expected
/// one, a write never showed on another replica, or `--max-seconds` ran out.
pub(crate) async fn run(args: &ReplicaArgs) -> anyhow::Result<()> {
    if !args.pids.is_empty() && args.pids.len() != args.urls.len() {
        bail!("give one --pid per --url, in the same order");
    }
    let (bench, mut report) = setup(args).await?;
    write_scenarios(&bench, args, &mut report).await?;
    sample_scenarios(&bench, args, &mut report).await;
    if args.json {
        println!("{}", Value::Object(report.object));
    }
    if !report.failures.is_empty() {
        bail!("{}", report.failures.join("; "));
    }
    if Instant::now() >= bench.deadline {
        bail!("--max-seconds reached before every scenario finished");
    }
    Ok(())
}
