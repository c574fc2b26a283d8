//! `berth-load populate`: grows a server to N providers named `bench-rp-NNNNNN`, each with VCPU,
//! MEMORY_MB and DISK_GB inventory. Aggregate A holds the first 30% of the N providers and
//! aggregate B the 20% window that starts at 15%; when a server already holds a smaller
//! population made by this tool, only the missing providers are created and the aggregates of
//! existing ones are moved to match the new N.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::client::{Target, uuid_for};
use crate::pool;

/// Namespace of provider uuids.
const PROVIDER_NAMESPACE: u64 = 0xbe27_0000_0000_0001;
/// Prefix of every provider name this tool creates.
const NAME_PREFIX: &str = "bench-rp-";
/// Aggregate A: the first 30% of the providers.
pub(crate) const AGGREGATE_A: &str = "aaaaaaaa-0000-4000-8000-000000000001";
/// Aggregate B: the 20% window starting at 15%.
pub(crate) const AGGREGATE_B: &str = "bbbbbbbb-0000-4000-8000-000000000002";

/// The aggregates provider `index` belongs to in a population of `total`.
pub(crate) fn aggregates_of(index: usize, total: usize) -> Vec<&'static str> {
    let mut out = Vec::new();
    if index < total * 30 / 100 {
        out.push(AGGREGATE_A);
    }
    if (total * 15 / 100..total * 35 / 100).contains(&index) {
        out.push(AGGREGATE_B);
    }
    out
}

/// One unit of population work.
enum Job {
    /// Create provider `index` with inventory and aggregates.
    Create(usize),
    /// Replace the aggregates of existing provider `index`, whose generation is given.
    Regroup(usize, u64),
}

/// The generations of the providers this tool made earlier, by index; they must be 0..count.
async fn existing(target: &Target) -> anyhow::Result<Vec<u64>> {
    let listing = target.get_json("/resource_providers").await?;
    let mut found = Vec::new();
    let mut others = 0_usize;
    for rp in listing["resource_providers"]
        .as_array()
        .context("no resource_providers in the listing")?
    {
        let name = rp["name"].as_str().unwrap_or_default();
        let Some(index) = name
            .strip_prefix(NAME_PREFIX)
            .and_then(|n| n.parse::<usize>().ok())
        else {
            others += 1;
            continue;
        };
        let uuid = rp["uuid"].as_str().unwrap_or_default();
        if uuid != uuid_for(PROVIDER_NAMESPACE, index as u64).to_string() {
            bail!("provider {name} has an unexpected uuid {uuid}");
        }
        found.push((index, rp["generation"].as_u64().context("no generation")?));
    }
    if others > 0 {
        eprintln!(
            "berth-load: note: the server also holds {others} providers not made by populate"
        );
    }
    found.sort_unstable();
    if found.iter().enumerate().any(|(i, (index, _))| i != *index) {
        bail!("the existing bench-rp-* providers are not numbered 0..count; use a fresh server");
    }
    Ok(found
        .into_iter()
        .map(|(_, generation)| generation)
        .collect())
}

/// Sends one JSON request and checks its status; returns the parsed body (null when empty).
async fn send(
    request: reqwest::RequestBuilder,
    what: &str,
    expected: &[u16],
) -> anyhow::Result<Value> {
    let response = request.send().await.with_context(|| what.to_owned())?;
    let status = response.status().as_u16();
    let body = response.text().await.with_context(|| what.to_owned())?;
    if !expected.contains(&status) {
        bail!("{what}: status {status}: {body}");
    }
    match body.trim().is_empty() {
        true => Ok(Value::Null),
        false => serde_json::from_str(&body).with_context(|| format!("{what}: body is not JSON")),
    }
}

/// Creates provider `index` with its inventory and aggregates in a population of `total`.
async fn create(
    client: &reqwest::Client,
    base: &str,
    index: usize,
    total: usize,
) -> anyhow::Result<()> {
    let uuid = uuid_for(PROVIDER_NAMESPACE, index as u64).to_string();
    let name = format!("{NAME_PREFIX}{index:06}");
    send(
        client
            .post(format!("{base}/resource_providers"))
            .json(&json!({"name": name, "uuid": uuid})),
        &format!("create {name}"),
        &[200, 201],
    )
    .await?;
    let inventory = json!({
        "resource_provider_generation": 0,
        "inventories": {
            "VCPU": {"total": 64, "reserved": 2, "allocation_ratio": 4.0},
            "MEMORY_MB": {"total": 262_144, "reserved": 4_096},
            "DISK_GB": {"total": 2_000},
        },
    });
    let answer = send(
        client
            .put(format!("{base}/resource_providers/{uuid}/inventories"))
            .json(&inventory),
        &format!("inventories of {name}"),
        &[200],
    )
    .await?;
    let aggregates = aggregates_of(index, total);
    if aggregates.is_empty() {
        return Ok(());
    }
    let generation = answer["resource_provider_generation"]
        .as_u64()
        .context("no generation after the inventory write")?;
    regroup(client, base, index, total, generation).await
}

/// Sets the aggregates of provider `index` to those it has in a population of `total`.
async fn regroup(
    client: &reqwest::Client,
    base: &str,
    index: usize,
    total: usize,
    generation: u64,
) -> anyhow::Result<()> {
    let uuid = uuid_for(PROVIDER_NAMESPACE, index as u64);
    let body = json!({
        "aggregates": aggregates_of(index, total),
        "resource_provider_generation": generation,
    });
    send(
        client
            .put(format!("{base}/resource_providers/{uuid}/aggregates"))
            .json(&body),
        &format!("aggregates of {NAME_PREFIX}{index:06}"),
        &[200],
    )
    .await?;
    Ok(())
}

/// Grows the server to `total` providers and prints what it did.
pub(crate) async fn run(target: &Target, total: usize, concurrency: usize) -> anyhow::Result<()> {
    let start = Instant::now();
    let generations = existing(target).await?;
    let before = generations.len();
    if before > total {
        bail!("the server already holds {before} providers, more than {total}");
    }
    let mut jobs: Vec<Job> = generations
        .iter()
        .enumerate()
        .filter(|(index, _)| aggregates_of(*index, before) != aggregates_of(*index, total))
        .map(|(index, generation)| Job::Regroup(index, *generation))
        .collect();
    let regrouped = jobs.len();
    jobs.extend((before..total).map(Job::Create));
    let jobs = Arc::new(jobs);
    let client = target.client.clone();
    let base = Arc::new(target.base.clone());
    let count = jobs.len();
    let outcome = pool::run(count, concurrency, target.deadline, move |i| {
        let (jobs, client, base) = (Arc::clone(&jobs), client.clone(), Arc::clone(&base));
        async move {
            match jobs[i] {
                Job::Create(index) => create(&client, &base, index, total).await,
                Job::Regroup(index, generation) => {
                    regroup(&client, &base, index, total, generation).await
                }
            }
        }
    })
    .await?;
    let done = outcome.results.len();
    let failures: Vec<anyhow::Error> = outcome
        .results
        .into_iter()
        .filter_map(Result::err)
        .collect();
    if let Some(first) = failures.into_iter().next() {
        return Err(first.context(format!("populate failed after {done} of {count} jobs")));
    }
    if outcome.cut_short {
        bail!("--max-seconds reached after {done} of {count} jobs");
    }
    let elapsed = start.elapsed().as_secs_f64();
    if target.json {
        println!(
            "{}",
            json!({"providers": total, "created": total - before, "regrouped": regrouped, "elapsed_s": elapsed})
        );
    } else {
        println!(
            "populate: {total} providers ({} created, aggregates moved on {regrouped}) in {elapsed:.1} s",
            total - before
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_windows() {
        let members = |agg: &str, total: usize| {
            (0..total)
                .filter(|i| aggregates_of(*i, total).contains(&agg))
                .count()
        };
        assert_eq!(members(AGGREGATE_A, 1_000), 300);
        assert_eq!(members(AGGREGATE_B, 1_000), 200);
        assert_eq!(aggregates_of(0, 1_000), vec![AGGREGATE_A]);
        assert_eq!(aggregates_of(200, 1_000), vec![AGGREGATE_A, AGGREGATE_B]);
        assert_eq!(aggregates_of(320, 1_000), vec![AGGREGATE_B]);
        assert!(aggregates_of(350, 1_000).is_empty());
    }

    #[test]
    fn provider_uuids_are_stable_version_4() {
        let uuid = uuid_for(PROVIDER_NAMESPACE, 7);
        assert_eq!(uuid, uuid_for(PROVIDER_NAMESPACE, 7));
        assert_eq!(uuid.get_version_num(), 4);
        assert_ne!(uuid, uuid_for(PROVIDER_NAMESPACE, 8));
    }
}
