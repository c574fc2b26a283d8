//! One fault run, and a campaign of them: a database of its own in the private cluster, one to
//! three replicas behind their proxies, the clients and the nemesis for the run's length, then
//! the final state read through a fresh replica and the whole history checked.

use crate::checker::{self, Report};
use crate::history::{Action, Counts, Key, Observation, Op, Outcome, Recorder, counts};
use crate::nemesis::{self, Fault, Injected, Targets};
use crate::postgres::Cluster;
use crate::proxy::Proxy;
use crate::replica::Replica;
use crate::workload::{self, Clients, Shape};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long the harness waits after the run, every fault healed, before it reads the final
/// state: longer than a client's timeout, so that writes still in flight have been answered.
pub const SETTLE: Duration = Duration::from_secs(5);

/// A run's settings. `BERTH_HISTORY_DUMP`, when set, names a directory each run's history is
/// written to (one operation a line, then the faults injected), and where each run's replicas
/// keep their files and logs (`BERTH_HISTORY_LOG` sets their log filter, `warn` by default).
#[derive(Debug, Clone)]
pub struct Config {
    /// The `berth` binary.
    pub berth: PathBuf,
    /// Replicas (1 to 3).
    pub replicas: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// How long the clients and the nemesis run.
    pub length: Duration,
    /// The faults the nemesis may inject.
    pub faults: Vec<Fault>,
    /// The planted defect the replicas are started with (`BERTH_PLANTED_DEFECT`).
    pub planted: Option<String>,
    /// The catalog.
    pub shape: Shape,
    /// A client's mean pause between two operations (each pause is drawn from a third of it to
    /// five thirds): what bounds a run's operations, whatever the machine's speed.
    pub pause: Duration,
}

/// What a run found.
#[derive(Debug)]
pub struct RunReport {
    /// Its seed.
    pub seed: u64,
    /// The outcomes of its operations.
    pub counts: Counts,
    /// The faults injected.
    pub faults: Vec<Injected>,
    /// The checker's verdicts.
    pub check: Report,
    /// Violations of the capacity invariant in the final state.
    pub final_violations: Vec<String>,
    /// How long it took, setup and check included.
    pub took: Duration,
}

impl RunReport {
    /// Whether the run found anything wrong (an anomaly, or a final state over capacity).
    pub fn anomalous(&self) -> bool {
        !self.check.anomalies().is_empty() || !self.final_violations.is_empty()
    }

    /// One line saying what happened.
    pub fn summary(&self) -> String {
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for injected in &self.faults {
            *by_kind.entry(format!("{:?}", injected.fault)).or_default() += 1;
        }
        let faults: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k}×{n}")).collect();
        let ops: usize = self.check.keys.values().map(|(_, n, _)| n).sum();
        let steps = self
            .check
            .keys
            .values()
            .map(|(_, _, s)| *s)
            .max()
            .unwrap_or(0);
        format!(
            "seed {}: {} operations checked over {} keys (at most {} search steps a key; {} writes ok, {} refused, {} unknown; {} reads, {} unanswered), faults [{}], {} anomalies, {} keys unchecked, {} final-state violations, {:.0} s",
            self.seed,
            ops,
            self.check.keys.len(),
            steps,
            self.counts.ok,
            self.counts.refused,
            self.counts.unknown,
            self.counts.reads,
            self.counts.unanswered_reads,
            faults.join(" "),
            self.check.anomalies().len(),
            self.check.unchecked().len(),
            self.final_violations.len(),
            self.took.as_secs_f64()
        )
    }
}

/// Violations of invariant (1) in the final reads of client `reader`: a provider used beyond its
/// capacity, or two leases holding a host at one hour.
fn final_violations(ops: &[Op], reader: usize, capacity: u32) -> Vec<String> {
    let slots: BTreeMap<(Key, u32), u8> = ops
        .iter()
        .filter_map(|op| match op.action {
            Action::CreateLease { name, slots } => Some(((op.key, name), slots)),
            _ => None,
        })
        .collect();
    let mut violations = Vec::new();
    for op in ops.iter().filter(|op| op.client == reader) {
        match &op.outcome {
            Outcome::Read(Observation::Usage(used)) if *used > capacity => {
                violations.push(format!("{:?} uses {used} VCPU of {capacity}", op.key));
            }
            Outcome::Read(Observation::Leases(names)) => {
                let mut held = 0_u8;
                for name in names {
                    let these = slots.get(&(op.key, *name)).copied().unwrap_or(0);
                    if held & these != 0 {
                        violations.push(format!(
                            "{:?} is held twice at one hour (lease {name})",
                            op.key
                        ));
                    }
                    held |= these;
                }
            }
            _ => {}
        }
    }
    violations
}

/// Runs the clients and the nemesis against the replicas until `config.length` has passed.
async fn exercise(
    config: &Config,
    clients: &Arc<Clients>,
    targets: &Targets<'_>,
    seed: u64,
) -> Result<Vec<Injected>> {
    let tasks: Vec<_> = (0..config.clients)
        .map(|client| {
            let seed = seed.wrapping_mul(31).wrapping_add(client as u64 + 1);
            tokio::spawn(workload::client(
                Arc::clone(clients),
                client,
                seed,
                config.length,
                config.pause,
            ))
        })
        .collect();
    let injected = nemesis::run(targets, seed, &clients.recorder, config.length).await;
    for task in tasks {
        task.await.context("a client")?;
    }
    injected
}

/// One run with `seed` over database `database` of `cluster`.
pub async fn run(
    cluster: &Cluster,
    config: &Config,
    database: &str,
    seed: u64,
) -> Result<RunReport> {
    let began = std::time::Instant::now();
    cluster.create_database(database)?;
    let dump = std::env::var_os("BERTH_HISTORY_DUMP").map(PathBuf::from);
    // Kept in the dump directory when there is one, removed with the run otherwise.
    let prefix = format!("berth-{database}-{seed}-");
    let dirs = tempfile::Builder::new()
        .prefix(&prefix)
        .disable_cleanup(dump.is_some())
        .tempdir_in(dump.clone().unwrap_or_else(std::env::temp_dir))?;
    let mut proxies = Vec::new();
    let mut replicas = Vec::new();
    for index in 0..config.replicas {
        let proxy = Proxy::start(cluster.port).await?;
        let url = Cluster::url(database, proxy.port);
        let dir = dirs.path().join(format!("replica-{index}"));
        replicas.push(Mutex::new(
            Replica::start(&config.berth, &dir, url, config.planted.clone()).await?,
        ));
        proxies.push(proxy);
    }
    let mut bases = Vec::new();
    for replica in &replicas {
        bases.push(replica.lock().await.base());
    }
    let recorder = Recorder::new();
    let clients = Arc::new(Clients::new(bases.clone(), config.shape, recorder.clone())?);
    workload::setup(&clients, &bases[0]).await?;
    let targets = Targets {
        replicas: &replicas,
        proxies: &proxies,
        cluster,
        faults: &config.faults,
    };
    let faults = exercise(config, &clients, &targets, seed).await?;
    tokio::time::sleep(SETTLE).await;
    // The final state, through a replica that loads the catalog from the database afresh.
    let fresh = Replica::start(
        &config.berth,
        &dirs.path().join("fresh"),
        Cluster::url(database, cluster.port),
        None,
    )
    .await?;
    let reader = config.clients;
    workload::read_everything(&clients, reader, &fresh.base()).await?;
    drop(fresh);
    drop(replicas);
    drop(proxies);
    let ops = recorder.ops();
    if let Some(dump) = &dump {
        let lines: Vec<String> = ops
            .iter()
            .map(|op| format!("{op:?}"))
            .chain(faults.iter().map(|injected| format!("{injected:?}")))
            .collect();
        std::fs::write(
            dump.join(format!("{database}-{seed}.txt")),
            lines.join("\n"),
        )?;
    }
    let check = tokio::task::spawn_blocking({
        let ops = ops.clone();
        let capacity = config.shape.capacity;
        move || checker::check(&ops, capacity)
    })
    .await?;
    Ok(RunReport {
        seed,
        counts: counts(&ops),
        faults,
        check,
        final_violations: final_violations(&ops, reader, config.shape.capacity),
        took: began.elapsed(),
    })
}

/// Runs `runs` runs from `seed` on one private cluster, each over a database of its own,
/// printing each run's summary; stops at the first anomalous run when `stop_at_anomaly`.
pub async fn campaign(
    config: &Config,
    runs: u64,
    seed: u64,
    stop_at_anomaly: bool,
) -> Result<Vec<RunReport>> {
    let cluster = tokio::task::block_in_place(Cluster::start)?;
    let mut reports = Vec::new();
    for index in 0..runs {
        let report = run(&cluster, config, &format!("history_{index}"), seed + index).await?;
        println!(
            "berth-history: run {}/{runs}, {}",
            index + 1,
            report.summary()
        );
        for (key, op) in report.check.anomalies() {
            println!("berth-history:   ANOMALY on {key:?}: no linearization gets past {op:?}");
        }
        for violation in &report.final_violations {
            println!("berth-history:   FINAL STATE: {violation}");
        }
        let anomalous = report.anomalous();
        reports.push(report);
        if anomalous && stop_at_anomaly {
            break;
        }
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn op(client: usize, key: Key, action: Action, outcome: Outcome) -> Op {
        Op {
            client,
            key,
            action,
            invoked: Duration::ZERO,
            completed: Some(Duration::from_millis(1)),
            outcome,
        }
    }

    #[test]
    fn the_final_reads_are_checked_against_the_capacity_invariant() {
        let host = Key::Host(0);
        let created = |name, slots| op(0, host, Action::CreateLease { name, slots }, Outcome::Ok);
        let listed = |names: &[u32]| {
            let names: BTreeSet<u32> = names.iter().copied().collect();
            op(
                9,
                host,
                Action::ReadLeases,
                Outcome::Read(Observation::Leases(names)),
            )
        };
        let usage = |used| {
            op(
                9,
                Key::Provider(0),
                Action::ReadUsage,
                Outcome::Read(Observation::Usage(used)),
            )
        };
        let fine = [
            created(1, 0b0011),
            created(2, 0b1100),
            listed(&[1, 2]),
            usage(6),
        ];
        assert!(final_violations(&fine, 9, 6).is_empty());
        let wrong = [
            created(1, 0b0011),
            created(2, 0b0110),
            listed(&[1, 2]),
            usage(7),
        ];
        assert_eq!(final_violations(&wrong, 9, 6).len(), 2);
        // Only the reader's final reads count.
        let during = [op(
            3,
            Key::Provider(0),
            Action::ReadUsage,
            Outcome::Read(Observation::Usage(7)),
        )];
        assert!(final_violations(&during, 9, 6).is_empty());
    }
}
