//! The HTTP side: one reqwest client with the Placement headers, the loopback-only target check,
//! the run deadline and the deterministic uuids the tool uses.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use reqwest::header::{ACCEPT, HeaderMap, HeaderValue};
use uuid::Uuid;

/// Longest any single request may take before it counts as failed.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Options every subcommand takes.
#[derive(Args, Clone)]
pub(crate) struct Common {
    /// Placement endpoint, e.g. http://127.0.0.1:8778/placement; for `create-leases` and
    /// `claim-nodes`, the server's base URL, e.g. http://127.0.0.1:8778 (loopback addresses
    /// only).
    #[arg(long)]
    pub(crate) url: String,
    /// Hard deadline for the whole run, in seconds.
    #[arg(long, default_value_t = 120)]
    pub(crate) max_seconds: u64,
    /// Print the result as one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Whether a URL's host is a loopback address (127.0.0.0/8, ::1 or localhost).
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Microversion sent with every request.
pub(crate) const MICROVERSION: &str = "placement 1.39";

/// One server to load: its endpoint, a client, the deadline and the output format.
pub(crate) struct Target {
    /// Endpoint without a trailing slash.
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
    pub(crate) deadline: Instant,
    pub(crate) json: bool,
}

impl Target {
    /// Checks the URL names a loopback host and builds the client.
    pub(crate) fn new(common: &Common) -> anyhow::Result<Self> {
        let url = reqwest::Url::parse(&common.url).context("parse --url")?;
        if url.scheme() != "http" {
            bail!("--url must be plain http, got {}", url.scheme());
        }
        if !is_loopback(url.host_str().unwrap_or_default()) {
            bail!("--url must name a loopback address (127.0.0.0/8, ::1 or localhost)");
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            "OpenStack-API-Version",
            HeaderValue::from_static(MICROVERSION),
        );
        headers.insert("X-Auth-Token", HeaderValue::from_static("admin"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .build()
            .context("build the HTTP client")?;
        Ok(Self {
            base: common.url.trim_end_matches('/').to_owned(),
            client,
            deadline: Instant::now() + Duration::from_secs(common.max_seconds),
            json: common.json,
        })
    }

    /// Full URL of a path below the endpoint.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base, path.trim_start_matches('/'))
    }

    /// Fails when the run's deadline has passed.
    pub(crate) fn check_deadline(&self, what: &str) -> anyhow::Result<()> {
        if Instant::now() >= self.deadline {
            bail!("--max-seconds reached during {what}");
        }
        Ok(())
    }

    /// GETs a path, checks 200 and parses the JSON body.
    pub(crate) async fn get_json(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        self.check_deadline(path)?;
        let response = self.client.get(self.url(path)).send().await?;
        let status = response.status();
        let body = response.text().await?;
        if status != reqwest::StatusCode::OK {
            bail!("GET {path}: {status}: {body}");
        }
        serde_json::from_str(&body).with_context(|| format!("GET {path}: body is not JSON"))
    }
}

/// A valid version-4 uuid derived from a namespace and an index, the same on every run.
pub(crate) fn uuid_for(namespace: u64, index: u64) -> Uuid {
    let bits = (u128::from(namespace) << 64) | u128::from(index);
    uuid::Builder::from_random_bytes(bits.to_be_bytes()).into_uuid()
}

/// Creates the plain Placement provider `uuid` (not a Blazar host, so no lease fences it) named
/// `name`, with `vcpus` VCPU and `memory_mb` MEMORY_MB, at `providers` (the
/// `/placement/resource_providers` URL); one that exists already (409) is kept as it is.
pub(crate) async fn allocation_target(
    client: &reqwest::Client,
    providers: &str,
    uuid: &str,
    name: &str,
    (vcpus, memory_mb): (u64, u64),
) -> anyhow::Result<()> {
    let body = serde_json::json!({"name": name, "uuid": uuid});
    let status = client.post(providers).json(&body).send().await?.status();
    if status.as_u16() == 409 {
        return Ok(());
    }
    if !status.is_success() {
        anyhow::bail!("create allocation target {name}: {status}");
    }
    let inventory = serde_json::json!({"resource_provider_generation": 0, "inventories": {
        "VCPU": {"total": vcpus}, "MEMORY_MB": {"total": memory_mb}}});
    let status = client
        .put(format!("{providers}/{uuid}/inventories"))
        .json(&inventory)
        .send()
        .await?
        .status();
    if !status.is_success() {
        anyhow::bail!("set allocation target {name}'s inventory: {status}");
    }
    Ok(())
}
