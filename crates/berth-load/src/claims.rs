//! `berth-load claim-nodes`: enrols N bare-metal nodes through `POST /baremetal/v1/nodes`, then
//! runs R rounds of node claims through `POST /baremetal/v1/reservations` with C clients.
//!
//! In each round every client claims until its view says every node is taken: each claim lists
//! K node uuids picked pseudo-randomly (a per-client SplitMix64, seeded by round and client)
//! among the nodes the view does not know to be taken, for a fresh instance uuid. With
//! `--view shared` (the default) all clients of a round share one view, as schedulers that read
//! one placement view do, so conflicts come from clients racing for the same nodes; with
//! `--view own` each client learns only from its own answers. A 201
//! is a claim; the nodes listed before the claimed one were taken (the server takes the first
//! eligible node of the list), so they leave the view with it. A 409 (`no_node_available`) is a
//! conflict: it says per listed node why it could not be taken, and every listed node leaves the
//! view. Each answer removes at least one node from the view, so a client sends at most N claims
//! per round. Only this claim phase is timed; then every claim of the round is released with
//! `DELETE /baremetal/v1/reservations/{uuid}` (with the same concurrency) so that the next round
//! starts with every node free.
//!
//! The run fails unless every claim answered 201 or 409, every 201 names a listed node, every
//! node was claimed exactly once in every round, and every release answered 204. It needs a fresh
//! server: the node names are fixed. `--url` may be the server's base or any URL on it; only its
//! origin is used.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::client::{Target, uuid_for};
use crate::leases::origin;
use crate::pool;
use crate::stats::{Sample, Summary};

/// Prefix of every node name this tool enrols.
const NODE_PREFIX: &str = "claim-node-";
/// Resource class of every enrolled node.
const RESOURCE_CLASS: &str = "baremetal-gold";
/// Namespace of the instance uuids (round, client and attempt are mixed in below it).
const INSTANCE_NAMESPACE: u64 = 0xc1a1_0000_0000_0001;
/// Most nodes one claim may list (the server's limit).
const CANDIDATES_MAX: usize = 1_000;
/// Enrolments in flight at once, at most.
const ENROL_CONCURRENCY: usize = 8;

/// What one run does.
pub(crate) struct Options {
    /// Nodes to enrol and claim in every round.
    pub(crate) nodes: usize,
    /// Claim rounds.
    pub(crate) rounds: usize,
    /// Claiming clients.
    pub(crate) concurrency: usize,
    /// Nodes listed per claim.
    pub(crate) candidates: usize,
    /// Whether the clients of a round share one view of the taken nodes.
    pub(crate) view: ViewKind,
}

/// Whose answers a client's view of the taken nodes learns from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ViewKind {
    /// Every client's: one view per round.
    Shared,
    /// Its own.
    Own,
}

impl Options {
    /// Checks the bounds the instance uuid layout and the server impose.
    fn check(&self) -> anyhow::Result<()> {
        if self.nodes == 0 || self.nodes >= 1 << 30 {
            bail!("--nodes must be from 1 to 2^30 - 1");
        }
        if self.rounds == 0 || self.rounds >= 1 << 16 {
            bail!("--rounds must be from 1 to 65535");
        }
        if self.concurrency == 0 || self.concurrency >= 1 << 16 {
            bail!("--concurrency must be from 1 to 65535");
        }
        if !(1..=CANDIDATES_MAX).contains(&self.candidates) {
            bail!("--candidates must be from 1 to {CANDIDATES_MAX}");
        }
        Ok(())
    }
}

/// SplitMix64: a small deterministic generator, good enough to pick candidates.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0), by multiply-shift.
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }
}

/// The nodes (by index) one client has not yet seen taken: removal and random picks in O(1).
pub(crate) struct View {
    items: Vec<usize>,
    /// Where each node sits in `items`, or `usize::MAX` once removed.
    slot: Vec<usize>,
}

impl View {
    /// Every node of `0..nodes`.
    pub(crate) fn full(nodes: usize) -> Self {
        Self {
            items: (0..nodes).collect(),
            slot: (0..nodes).collect(),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.items.swap(a, b);
        self.slot[self.items[a]] = a;
        self.slot[self.items[b]] = b;
    }

    /// Up to `count` distinct nodes of the view, uniformly at random (partial Fisher–Yates).
    pub(crate) fn pick(&mut self, rng: &mut Rng, count: usize) -> Vec<usize> {
        let count = count.min(self.items.len());
        for i in 0..count {
            let j = i + rng.below(self.items.len() - i);
            self.swap(i, j);
        }
        self.items[..count].to_vec()
    }

    /// Removes a node; false when it was not in the view.
    pub(crate) fn remove(&mut self, node: usize) -> bool {
        let Some(&at) = self.slot.get(node).filter(|&&at| at != usize::MAX) else {
            return false;
        };
        let last = self.items.len() - 1;
        self.swap(at, last);
        self.items.pop();
        self.slot[node] = usize::MAX;
        true
    }
}

/// What the server answered to one claim.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    /// 201: the node (by index) and the claim's uuid.
    Claimed { node: usize, claim: String },
    /// 409: why each listed node (by index) could not be taken.
    Refused(Vec<(usize, String)>),
}

/// Reads a claim's answer, checking it against the listed nodes; any status other than 201 or
/// 409, or an answer that does not match the list, is an error.
pub(crate) fn read_answer(
    status: u16,
    body: &str,
    listed: &[usize],
    index: &HashMap<String, usize>,
) -> anyhow::Result<Answer> {
    let node_of = |value: &Value| -> anyhow::Result<usize> {
        let uuid = value.as_str().context("node_uuid is not a string")?;
        let node = *index
            .get(uuid)
            .with_context(|| format!("unknown node {uuid}"))?;
        match listed.contains(&node) {
            true => Ok(node),
            false => bail!("node {uuid} was not listed"),
        }
    };
    let parse = || serde_json::from_str::<Value>(body).context("the body is not JSON");
    match status {
        201 => {
            let value = parse()?;
            let reservation = &value["reservation"];
            let node = node_of(&reservation["node_uuid"]).context("claim answered 201")?;
            let claim = reservation["uuid"].as_str().context("201 without a uuid")?;
            Ok(Answer::Claimed {
                node,
                claim: claim.to_owned(),
            })
        }
        409 => {
            let value = parse()?;
            let nodes = match (value["code"].as_str(), value["nodes"].as_array()) {
                (Some("no_node_available"), Some(nodes)) => nodes,
                _ => bail!("unexpected 409: {body}"),
            };
            let reasons = nodes
                .iter()
                .map(|n| {
                    let reason = n["reason"].as_str().context("a refusal without a reason")?;
                    Ok((node_of(&n["node_uuid"])?, reason.to_owned()))
                })
                .collect::<anyhow::Result<Vec<_>>>()
                .context("claim answered 409")?;
            if reasons.len() != listed.len() {
                bail!(
                    "409 gives {} reasons for {} nodes",
                    reasons.len(),
                    listed.len()
                );
            }
            Ok(Answer::Refused(reasons))
        }
        _ => bail!("claim answered {status}: {body}"),
    }
}

/// Checks that every node of `0..nodes` was claimed exactly once.
pub(crate) fn check_round(nodes: usize, claimed: &[usize]) -> anyhow::Result<()> {
    let mut seen = vec![false; nodes];
    for &node in claimed {
        if std::mem::replace(&mut seen[node], true) {
            bail!("node {NODE_PREFIX}{node:06} was claimed twice");
        }
    }
    if let Some(free) = seen.iter().position(|s| !s) {
        bail!(
            "{} claims for {nodes} nodes: {NODE_PREFIX}{free:06} was never claimed",
            claimed.len()
        );
    }
    Ok(())
}

/// The instance uuid of one claim: unique per round, client and attempt.
fn instance_uuid(round: usize, client: usize, attempt: usize) -> uuid::Uuid {
    let index = ((round as u64) << 46) | ((client as u64) << 30) | attempt as u64;
    uuid_for(INSTANCE_NAMESPACE, index)
}

/// Enrols nodes `0..nodes` (each must answer 201) and returns their uuids, in index order.
async fn enrol(target: &Target, base: &str, nodes: usize) -> anyhow::Result<Vec<String>> {
    let client = target.client.clone();
    let url = format!("{base}/baremetal/v1/nodes");
    let outcome = pool::run(nodes, ENROL_CONCURRENCY, target.deadline, move |index| {
        let body = json!({
            "name": format!("{NODE_PREFIX}{index:06}"),
            "resource_class": RESOURCE_CLASS,
            "provision_state": "available",
            "properties": {"cpus": 32},
        });
        let request = client.post(url.clone()).json(&body);
        async move {
            let response = request.send().await.context("enrol a node")?;
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            if status != 201 {
                bail!("enrol node {index}: status {status}: {text}");
            }
            let value: Value = serde_json::from_str(&text).context("enrol: body is not JSON")?;
            let uuid = value["uuid"].as_str().context("enrol: no uuid")?;
            Ok((index, uuid.to_owned()))
        }
    })
    .await?;
    if outcome.cut_short {
        bail!("--max-seconds reached while enrolling nodes");
    }
    let mut uuids = vec![String::new(); nodes];
    for result in outcome.results {
        let (index, uuid) = result?;
        uuids[index] = uuid;
    }
    Ok(uuids)
}

/// What every client of a round shares.
struct Shared {
    client: reqwest::Client,
    /// `POST` URL of claims.
    url: String,
    /// Node uuids by index, and back.
    uuids: Vec<String>,
    index: HashMap<String, usize>,
    candidates: usize,
    deadline: Instant,
    view: ViewKind,
}

/// What one client did in one round.
#[derive(Default)]
struct Tally {
    samples: Vec<Sample>,
    /// Claimed node (by index) and claim uuid.
    claims: Vec<(usize, String)>,
    conflicts: usize,
    /// Refusal reasons of the listed nodes in 409s, by reason.
    reasons: BTreeMap<String, usize>,
    cut_short: bool,
}

/// POSTs one claim and times it until the whole body has arrived; `None` at the deadline.
async fn post(shared: &Shared, body: &Value) -> anyhow::Result<Option<(Sample, String)>> {
    let start = Instant::now();
    let exchange = async {
        let response = shared
            .client
            .post(shared.url.as_str())
            .json(body)
            .send()
            .await?;
        let status = response.status().as_u16();
        Ok::<_, reqwest::Error>((status, response.text().await?))
    };
    let Ok(answer) = tokio::time::timeout_at(shared.deadline.into(), exchange).await else {
        return Ok(None);
    };
    let (status, text) = answer.context("claim request")?;
    let sample = Sample {
        latency: start.elapsed(),
        status,
        bytes: text.len(),
    };
    Ok(Some((sample, text)))
}

/// One client's round: claims until its view is empty (at most one claim per node).
async fn claimer(
    shared: Arc<Shared>,
    round_view: Arc<std::sync::Mutex<View>>,
    round: usize,
    id: usize,
) -> anyhow::Result<Tally> {
    let nodes = shared.uuids.len();
    let own = std::sync::Mutex::new(View::full(nodes));
    let view = match shared.view {
        ViewKind::Shared => &*round_view,
        ViewKind::Own => &own,
    };
    let mut rng = Rng::new(((round as u64) << 32) ^ id as u64);
    let mut tally = Tally::default();
    for attempt in 0..nodes {
        let listed = view
            .lock()
            .expect("the view lock is never poisoned")
            .pick(&mut rng, shared.candidates);
        if listed.is_empty() {
            break;
        }
        if Instant::now() >= shared.deadline {
            tally.cut_short = true;
            break;
        }
        let body = json!({
            "instance_uuid": instance_uuid(round, id, attempt),
            "node_uuid": listed.iter().map(|&i| &shared.uuids[i]).collect::<Vec<_>>(),
        });
        let Some((sample, text)) = post(&shared, &body).await? else {
            tally.cut_short = true;
            break;
        };
        let answer = read_answer(sample.status, &text, &listed, &shared.index)?;
        let mut view = view.lock().expect("the view lock is never poisoned");
        match answer {
            Answer::Claimed { node, claim } => {
                // The server takes the first eligible node: those listed before it are taken.
                for &taken in listed.iter().take_while(|&&i| i != node) {
                    view.remove(taken);
                }
                view.remove(node);
                tally.claims.push((node, claim));
            }
            Answer::Refused(reasons) => {
                tally.conflicts += 1;
                for (node, reason) in reasons {
                    view.remove(node);
                    *tally.reasons.entry(reason).or_default() += 1;
                }
            }
        }
        drop(view);
        tally.samples.push(sample);
    }
    Ok(tally)
}

/// The measured figures of one round, and the claims to release.
struct RoundResult {
    summary: Summary,
    claims: usize,
    conflicts: usize,
    reasons: BTreeMap<String, usize>,
    claim_uuids: Vec<String>,
}

impl RoundResult {
    fn to_json(&self, round: usize) -> Value {
        let mut object = self.summary.to_json();
        object["round"] = json!(round);
        object["claims"] = json!(self.claims);
        object["conflicts"] = json!(self.conflicts);
        object["refusal_reasons"] = json!(self.reasons);
        object
    }
}

/// Runs one round's claim phase with `concurrency` clients and checks it.
async fn claim_round(
    shared: &Arc<Shared>,
    round: usize,
    concurrency: usize,
) -> anyhow::Result<RoundResult> {
    let start = Instant::now();
    let mut clients = JoinSet::new();
    let view = Arc::new(std::sync::Mutex::new(View::full(shared.uuids.len())));
    for id in 0..concurrency {
        clients.spawn(claimer(Arc::clone(shared), Arc::clone(&view), round, id));
    }
    let mut tallies = Vec::with_capacity(concurrency);
    while let Some(joined) = clients.join_next().await {
        tallies.push(joined.context("a claiming client panicked")??);
    }
    let elapsed = start.elapsed();
    let mut all = Tally::default();
    for tally in tallies {
        all.samples.extend(tally.samples);
        all.claims.extend(tally.claims);
        all.conflicts += tally.conflicts;
        for (reason, count) in tally.reasons {
            *all.reasons.entry(reason).or_default() += count;
        }
        all.cut_short |= tally.cut_short;
    }
    if all.cut_short {
        bail!("--max-seconds reached during round {round}");
    }
    let claimed: Vec<usize> = all.claims.iter().map(|(node, _)| *node).collect();
    check_round(shared.uuids.len(), &claimed).with_context(|| format!("round {round}"))?;
    let requests = all.samples.len();
    Ok(RoundResult {
        summary: Summary::new(requests, &all.samples, 201, elapsed, false),
        claims: claimed.len(),
        conflicts: all.conflicts,
        reasons: all.reasons,
        claim_uuids: all.claims.into_iter().map(|(_, uuid)| uuid).collect(),
    })
}

/// Releases the claims of a round; each must answer 204. Returns how long it took.
async fn release(
    target: &Target,
    base: &str,
    claims: Vec<String>,
    concurrency: usize,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let client = target.client.clone();
    let url = format!("{base}/baremetal/v1/reservations");
    let total = claims.len();
    let claims = Arc::new(claims);
    let outcome = pool::run(total, concurrency, target.deadline, move |i| {
        let request = client.delete(format!("{url}/{}", claims[i]));
        async move {
            let response = request.send().await.context("release a claim")?;
            let status = response.status().as_u16();
            if status != 204 {
                let text = response.text().await.unwrap_or_default();
                bail!("release answered {status}: {text}");
            }
            Ok(())
        }
    })
    .await?;
    if outcome.cut_short {
        bail!("--max-seconds reached while releasing claims");
    }
    outcome
        .results
        .into_iter()
        .collect::<anyhow::Result<()>>()?;
    Ok(start.elapsed())
}

/// Prints one round as a line of text.
fn print_round(round: usize, result: &RoundResult, released: Duration) {
    let s = &result.summary;
    let reasons: Vec<String> = result
        .reasons
        .iter()
        .map(|(reason, count)| format!("{reason}:{count}"))
        .collect();
    println!(
        "  round {round}: claims {}, conflicts {} (refusals [{}]), {:.3} s, {:.1} claims/s; \
         latency ms median {:.3} p90 {:.3} p99 {:.3} max {:.3}; released in {:.3} s",
        result.claims,
        result.conflicts,
        reasons.join(" "),
        s.elapsed.as_secs_f64(),
        s.ok_per_second(),
        s.percentile_ms(50.0),
        s.percentile_ms(90.0),
        s.percentile_ms(99.0),
        s.percentile_ms(100.0),
        released.as_secs_f64(),
    );
}

/// Enrols the nodes, runs the rounds and prints the figures; fails on any wrong answer.
pub(crate) async fn run(target: &Target, options: &Options) -> anyhow::Result<()> {
    options.check()?;
    let base = origin(target)?;
    let enrolling = Instant::now();
    let uuids = enrol(target, &base, options.nodes).await?;
    let enrolled = enrolling.elapsed();
    let shared = Arc::new(Shared {
        client: target.client.clone(),
        url: format!("{base}/baremetal/v1/reservations"),
        index: uuids
            .iter()
            .enumerate()
            .map(|(i, u)| (u.clone(), i))
            .collect(),
        uuids,
        candidates: options.candidates,
        deadline: target.deadline,
        view: options.view,
    });
    if !target.json {
        println!(
            "POST /baremetal/v1/reservations: {} nodes (enrolled in {:.1} s), {} rounds, \
             {} clients, {} candidates per claim, {:?} view",
            options.nodes,
            enrolled.as_secs_f64(),
            options.rounds,
            options.concurrency,
            options.candidates,
            options.view
        );
    }
    let (mut claims, mut conflicts, mut seconds) = (0, 0, 0.0);
    let mut rounds = Vec::with_capacity(options.rounds);
    for round in 1..=options.rounds {
        let mut result = claim_round(&shared, round, options.concurrency).await?;
        let to_release = std::mem::take(&mut result.claim_uuids);
        let released = release(target, &base, to_release, options.concurrency).await?;
        if !target.json {
            print_round(round, &result, released);
        }
        claims += result.claims;
        conflicts += result.conflicts;
        seconds += result.summary.elapsed.as_secs_f64();
        let mut object = result.to_json(round);
        object["release_s"] = json!((released.as_secs_f64() * 1e3).round() / 1e3);
        rounds.push(object);
    }
    let per_second = if seconds > 0.0 {
        claims as f64 / seconds
    } else {
        0.0
    };
    if target.json {
        let object = json!({
            "nodes": options.nodes,
            "rounds": rounds,
            "concurrency": options.concurrency,
            "candidates": options.candidates,
            "view": format!("{:?}", options.view).to_lowercase(),
            "enrol_s": (enrolled.as_secs_f64() * 1e3).round() / 1e3,
            "claims": claims,
            "conflicts": conflicts,
            "claim_phase_s": (seconds * 1e3).round() / 1e3,
            "claims_per_s": (per_second * 1e3).round() / 1e3,
        });
        println!("{object}");
    } else {
        println!(
            "  overall: {claims} claims, {conflicts} conflicts in {seconds:.3} s of claim phases: \
             {per_second:.1} claims/s"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_are_distinct_members_of_the_view() {
        let mut view = View::full(50);
        let mut rng = Rng::new(7);
        for gone in [3, 17, 49, 0] {
            assert!(view.remove(gone));
            assert!(!view.remove(gone));
        }
        assert_eq!(view.len(), 46);
        for _ in 0..200 {
            let picked = view.pick(&mut rng, 8);
            assert_eq!(picked.len(), 8);
            let mut sorted = picked.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 8, "{picked:?}");
            assert!(picked.iter().all(|n| ![3, 17, 49, 0].contains(n)));
        }
        // Fewer nodes left than asked for: all of them.
        for node in 0..50 {
            view.remove(node);
        }
        assert_eq!(view.pick(&mut rng, 8), Vec::<usize>::new());
        assert!(!view.remove(99));
    }

    #[test]
    fn picks_are_deterministic_and_spread() {
        let run = |seed| {
            let mut view = View::full(1_000);
            let mut rng = Rng::new(seed);
            (0..100)
                .flat_map(|_| view.pick(&mut rng, 8))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        let mut hits = vec![0_u32; 10];
        for node in run(3) {
            hits[node / 100] += 1;
        }
        // 800 picks over ten buckets of 100 nodes: none far from 80.
        assert!(hits.iter().all(|&h| (40..=120).contains(&h)), "{hits:?}");
        let mut rng = Rng::new(0);
        assert!((0..1_000).all(|_| rng.below(3) < 3));
    }

    #[test]
    fn answers_are_read_against_the_list() {
        let index: HashMap<String, usize> = [
            ("a".to_owned(), 0),
            ("b".to_owned(), 1),
            ("c".to_owned(), 2),
        ]
        .into();
        let claimed = r#"{"reservation": {"uuid": "r1", "node_uuid": "b"}}"#;
        assert_eq!(
            read_answer(201, claimed, &[0, 1], &index).unwrap(),
            Answer::Claimed {
                node: 1,
                claim: "r1".to_owned()
            }
        );
        assert!(read_answer(201, claimed, &[0, 2], &index).is_err());
        let refused = r#"{"code": "no_node_available", "nodes": [
            {"node_uuid": "a", "reason": "claimed", "detail": "x"},
            {"node_uuid": "c", "reason": "claimed", "detail": "y"}]}"#;
        assert_eq!(
            read_answer(409, refused, &[0, 2], &index).unwrap(),
            Answer::Refused(vec![(0, "claimed".to_owned()), (2, "claimed".to_owned())])
        );
        assert!(read_answer(409, refused, &[0, 1, 2], &index).is_err());
        assert!(read_answer(409, r#"{"code": "node_in_use"}"#, &[0], &index).is_err());
        assert!(read_answer(503, "{}", &[0], &index).is_err());
    }

    #[test]
    fn rounds_claim_every_node_once() {
        assert!(check_round(3, &[2, 0, 1]).is_ok());
        assert!(check_round(3, &[2, 0]).is_err());
        assert!(check_round(3, &[2, 0, 1, 0]).is_err());
        assert_ne!(instance_uuid(1, 0, 5), instance_uuid(2, 0, 5));
        assert_ne!(instance_uuid(1, 0, 5), instance_uuid(1, 1, 5));
        assert_ne!(instance_uuid(1, 0, 5), instance_uuid(1, 0, 6));
    }
}
