//! The nemesis: faults on a schedule derived from the run's seed, one at a time, each healed
//! before the next. A replica killed (SIGKILL) and restarted; a replica paused (SIGSTOP) longer
//! than the store's lock and connection timeouts (10 s) and resumed; PostgreSQL restarted; a
//! replica cut off from PostgreSQL (its proxy drops every connection and refuses new ones) and
//! healed; a replica restarted with its clock moved ahead or behind (`--clock-offset-seconds`,
//! [`CLOCK_OFFSET_MAX_SECONDS`] at most) for a while, then restarted on the true time.

use crate::history::Recorder;
use crate::postgres::Cluster;
use crate::proxy::Proxy;
use crate::replica::Replica;
use crate::workload::Rng;
use anyhow::Result;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long a paused replica stays paused: longer than PostgreSQL's `lock_timeout` and the
/// pool's acquire timeout berth sets (10 s each).
pub const PAUSE: Duration = Duration::from_millis(11_500);

/// The largest clock offset the nemesis gives a replica, either way.
pub const CLOCK_OFFSET_MAX_SECONDS: u64 = 600;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// SIGKILL a replica, restart it after a while.
    Kill,
    /// SIGSTOP a replica for [`PAUSE`], then SIGCONT.
    Pause,
    /// Restart PostgreSQL.
    RestartPostgres,
    /// Cut a replica off from PostgreSQL for a while.
    Partition,
    /// Restart a replica with its clock moved (10 s to [`CLOCK_OFFSET_MAX_SECONDS`] ahead or
    /// behind) for a while, then restart it on the true time.
    ClockOffset,
}

/// One fault that happened.
#[derive(Debug, Clone)]
pub struct Injected {
    /// What.
    pub fault: Fault,
    /// Which replica (none for PostgreSQL).
    pub replica: Option<usize>,
    /// When it began and was healed, since the run began.
    pub from: Duration,
    /// When it was healed.
    pub to: Duration,
}

/// What the nemesis acts on.
pub struct Targets<'a> {
    /// The replicas (locked while restarted).
    pub replicas: &'a [Mutex<Replica>],
    /// Each replica's link to PostgreSQL.
    pub proxies: &'a [Proxy],
    /// PostgreSQL.
    pub cluster: &'a Cluster,
    /// The faults it may inject.
    pub faults: &'a [Fault],
}

/// Injects faults from `seed` until `until` (on the history's clock), healing each; returns what
/// it did. A fault that could not be healed (a replica that did not come back) is an error.
pub async fn run(
    targets: &Targets<'_>,
    seed: u64,
    clock: &Recorder,
    until: Duration,
) -> Result<Vec<Injected>> {
    let mut rng = Rng::new(seed ^ 0x4E45_4D45_5349_5300);
    let mut done = Vec::new();
    let replicas = targets.replicas.len() as u64;
    tokio::time::sleep(Duration::from_millis(1_000 + rng.below(1_000))).await;
    while !targets.faults.is_empty() && clock.now() + Duration::from_secs(3) < until {
        let fault =
            targets.faults[usize::try_from(rng.below(targets.faults.len() as u64)).unwrap_or(0)];
        let replica = usize::try_from(rng.below(replicas)).unwrap_or(0);
        let hold = Duration::from_millis(1_000 + rng.below(3_000));
        let from = clock.now();
        let replica = match fault {
            Fault::Kill => {
                targets.replicas[replica].lock().await.kill();
                tokio::time::sleep(hold).await;
                targets.replicas[replica].lock().await.restart().await?;
                Some(replica)
            }
            Fault::Pause => {
                targets.replicas[replica].lock().await.pause();
                tokio::time::sleep(PAUSE).await;
                targets.replicas[replica].lock().await.resume();
                Some(replica)
            }
            Fault::RestartPostgres => {
                let cluster = targets.cluster;
                tokio::task::block_in_place(|| cluster.restart())?;
                None
            }
            Fault::Partition => {
                targets.proxies[replica].cut();
                tokio::time::sleep(hold).await;
                targets.proxies[replica].heal();
                Some(replica)
            }
            Fault::ClockOffset => {
                let seconds =
                    i64::try_from(10 + rng.below(CLOCK_OFFSET_MAX_SECONDS - 9)).unwrap_or(10);
                let offset = match rng.below(2) {
                    0 => seconds,
                    _ => -seconds,
                };
                moved_clock(&targets.replicas[replica], offset).await?;
                tokio::time::sleep(hold).await;
                moved_clock(&targets.replicas[replica], 0).await?;
                Some(replica)
            }
        };
        done.push(Injected {
            fault,
            replica,
            from,
            to: clock.now(),
        });
        tokio::time::sleep(Duration::from_millis(500 + rng.below(1_500))).await;
    }
    Ok(done)
}

/// Restarts `replica` with its clock `offset_seconds` from the true time (SIGKILL, then start).
async fn moved_clock(replica: &Mutex<Replica>, offset_seconds: i64) -> Result<()> {
    let mut replica = replica.lock().await;
    replica.kill();
    replica.clock_offset_seconds = offset_seconds;
    replica.restart().await
}
