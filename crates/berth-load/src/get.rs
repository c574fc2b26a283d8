//! `berth-load get`: warm-up GETs, then R timed GETs of one path; every answer must be 200.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::bail;

use crate::client::Target;
use crate::pool;
use crate::stats::{Sample, Summary};

/// Sends one request and times it until the whole body has arrived.
pub(crate) async fn timed(request: reqwest::RequestBuilder) -> Sample {
    let start = Instant::now();
    let (status, bytes) = match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.bytes().await {
                Ok(body) => (status, body.len()),
                Err(_) => (0, 0),
            }
        }
        Err(_) => (0, 0),
    };
    Sample {
        latency: start.elapsed(),
        status,
        bytes,
    }
}

async fn phase(
    target: &Target,
    path: &str,
    requests: usize,
    concurrency: usize,
) -> anyhow::Result<Summary> {
    let client = target.client.clone();
    let url = target.url(path);
    let start = Instant::now();
    let outcome = pool::run(requests, concurrency, target.deadline, move |_| {
        timed(client.get(url.clone()))
    })
    .await?;
    Ok(Summary::new(
        requests,
        &outcome.results,
        200,
        start.elapsed(),
        outcome.cut_short,
    ))
}

/// Lengths of the top-level arrays of a JSON object (how many candidates an answer held).
fn array_lengths(body: &serde_json::Value) -> BTreeMap<String, usize> {
    body.as_object()
        .map(|object| {
            object
                .iter()
                .filter_map(|(key, value)| value.as_array().map(|a| (key.clone(), a.len())))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the warm-up and the measured phase and prints the measured one.
pub(crate) async fn run(
    target: &Target,
    path: &str,
    requests: usize,
    concurrency: usize,
    warmup: usize,
) -> anyhow::Result<()> {
    if warmup > 0 {
        let warm = phase(target, path, warmup, concurrency).await?;
        if warm.ok != warm.finished() || warm.cut_short {
            warm.print(&format!("GET {path} (warm-up)"), target.json);
            bail!("warm-up of GET {path} did not answer 200 every time");
        }
    }
    let summary = phase(target, path, requests, concurrency).await?;
    let arrays = array_lengths(&target.get_json(path).await?);
    if target.json {
        let mut object = summary.to_json();
        object["top_level_arrays"] = serde_json::json!(arrays);
        println!("{object}");
    } else {
        summary.print(
            &format!("GET {path} x{requests}, concurrency {concurrency}"),
            false,
        );
        let listed: Vec<String> = arrays.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(
            "  top-level arrays of one more answer: {}",
            listed.join(", ")
        );
    }
    if summary.ok != summary.finished() {
        bail!("GET {path}: some answers were not 200");
    }
    if summary.cut_short {
        bail!("GET {path}: --max-seconds reached before all requests finished");
    }
    Ok(())
}
