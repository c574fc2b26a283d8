//! `berth-load put-allocations`: R allocation writes for new consumers (microversion 1.38 body),
//! spread round-robin over the providers the server lists; counts 204 against other statuses.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;

use crate::client::{Target, uuid_for};
use crate::get::timed;
use crate::pool;
use crate::stats::Summary;

/// Namespace of consumer uuids (the seed is mixed in above it).
const CONSUMER_NAMESPACE: u64 = 0xc0_5e00_0000_0000;

/// The providers' uuids, sorted so that the spread is the same on every run.
async fn provider_uuids(target: &Target) -> anyhow::Result<Vec<String>> {
    let listing = target.get_json("/resource_providers").await?;
    let mut uuids: Vec<String> = listing["resource_providers"]
        .as_array()
        .context("no resource_providers in the listing")?
        .iter()
        .filter_map(|rp| rp["uuid"].as_str().map(str::to_owned))
        .collect();
    uuids.sort_unstable();
    if uuids.is_empty() {
        bail!("the server has no resource providers; run populate first");
    }
    Ok(uuids)
}

/// Sends the writes and prints the summary; fails unless every write answered 204.
pub(crate) async fn run(
    target: &Target,
    requests: usize,
    concurrency: usize,
    seed: u64,
) -> anyhow::Result<()> {
    let providers = Arc::new(provider_uuids(target).await?);
    let provider_count = providers.len();
    let client = target.client.clone();
    let base = target.base.clone();
    let namespace = CONSUMER_NAMESPACE ^ seed;
    let start = Instant::now();
    let outcome = pool::run(requests, concurrency, target.deadline, move |index| {
        let provider = &providers[index % providers.len()];
        let consumer = uuid_for(namespace, index as u64);
        let body = json!({
            "allocations": {provider: {"resources": {"VCPU": 1, "MEMORY_MB": 64}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": null,
            "consumer_type": "INSTANCE",
        });
        timed(
            client
                .put(format!("{base}/allocations/{consumer}"))
                .json(&body),
        )
    })
    .await?;
    let summary = Summary::new(
        requests,
        &outcome.results,
        204,
        start.elapsed(),
        outcome.cut_short,
    );
    summary.print(
        &format!(
            "PUT /allocations/{{consumer}} x{requests}, concurrency {concurrency}, {} providers",
            provider_count
        ),
        target.json,
    );
    if !target.json {
        println!("  writes/second {:.1}", summary.ok_per_second());
    }
    if summary.ok != summary.finished() {
        bail!("some allocation writes did not answer 204");
    }
    if summary.cut_short {
        bail!("--max-seconds reached before all writes finished");
    }
    Ok(())
}
