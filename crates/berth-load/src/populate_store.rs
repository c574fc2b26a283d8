//! `berth-load populate-store`: writes H Blazar hosts and N single-reservation leases straight
//! into an empty PostgreSQL database (`berth_app::synthetic`, through the store's own
//! `begin_write` / `persist` / `commit`), far faster than creating them over HTTP; the database
//! is then served by `berth serve --database URL` and loaded by `replicas`. The hosts are
//! `cn00000...` in ten zones with 64 VCPUs each; the leases (project `project`) have windows over
//! 2027, so the windows `replicas` writes, days after the server's clock, find the capacity free.
//! The database must be on a loopback address, and hold no catalog yet.

use std::time::Instant;

use anyhow::{Context, bail};
use berth_store::Store;
use berth_store_postgres::PostgresStore;
use serde_json::json;

use crate::client::is_loopback;

/// Connects to `database`, checks that it is empty, writes the population and prints how long
/// it took.
pub(crate) async fn run(
    database: &str,
    hosts: usize,
    leases: usize,
    json: bool,
) -> anyhow::Result<()> {
    if hosts == 0 {
        bail!("--hosts must be at least 1");
    }
    let url = reqwest::Url::parse(database).context("parse --database")?;
    if !matches!(url.scheme(), "postgres" | "postgresql")
        || !is_loopback(url.host_str().unwrap_or_default())
    {
        bail!("--database must be a postgres:// URL on a loopback address");
    }
    let started = Instant::now();
    // The population is written in a few large commits: the replication log keeps only the
    // last, so a replica never reads the others back.
    let store = PostgresStore::connect(database)
        .await
        .context("connect to --database")?
        .with_change_log_retained(1);
    if store.catalog_seq().await? != 0 {
        bail!("--database already holds a catalog; use a fresh database");
    }
    let written = berth_app::synthetic::write(&store, hosts, leases).await?;
    store.close().await;
    let elapsed = started.elapsed().as_secs_f64();
    if json {
        println!(
            "{}",
            json!({
                "hosts": hosts,
                "leases": leases,
                "hosts_s": written.hosts.as_secs_f64(),
                "leases_s": written.leases.as_secs_f64(),
                "elapsed_s": elapsed,
            })
        );
    } else {
        println!(
            "populate-store: {hosts} hosts in {:.1} s, {leases} leases in {:.1} s ({elapsed:.1} s \
             in all)",
            written.hosts.as_secs_f64(),
            written.leases.as_secs_f64()
        );
    }
    Ok(())
}
