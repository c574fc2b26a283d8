//! `berth-sim`: runs the deterministic simulator of berth's write path.
//!
//! `berth-sim --seed N` replays one run bit for bit; `--seeds K` runs K seeds from N;
//! `--minutes M` runs seeds from N until M minutes have passed; `--jobs J` runs J seeds at once,
//! each on its own thread (by default one per core). Exits 1 when a seed fails, printing the
//! lowest failing seed found and the command that replays it.

use berth_sim::store::Durability;
use berth_sim::{Config, Defect as Planted, Failure, Report, run};
use clap::{Parser, ValueEnum};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Parser)]
#[command(about = "Deterministic simulation of berth's write path with crashes")]
struct Args {
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many seeds to run, from `--seed` on.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Run seeds from `--seed` on until this many minutes have passed (instead of `--seeds`).
    #[arg(long)]
    minutes: Option<u64>,
    /// Steps per seed.
    #[arg(long, default_value_t = 1_000)]
    steps: usize,
    /// How the simulated disk keeps commits.
    #[arg(long, value_enum, default_value_t = Disk::Synced)]
    disk: Disk,
    /// Plant a defect in the simulated store (a negative control: it must be caught).
    #[arg(long, value_enum)]
    defect: Option<Defect>,
    /// Print every write and what it was told, to standard error.
    #[arg(long)]
    trace: bool,
    /// Seeds run at once, each on a thread of its own [default: the available cores].
    #[arg(long)]
    jobs: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Disk {
    /// Every commit synced before its answer.
    Synced,
    /// Answered before synced: a crash loses what was not synced (must be caught).
    Unsynced,
}

#[derive(Clone, Copy, ValueEnum)]
enum Defect {
    /// Recovery drops the last commit.
    LoseLastCommit,
    /// Allocations are not checked against capacity (needs `--features planted`).
    SkipCapacityCheck,
    /// Consumer generations are not checked (needs `--features planted`).
    SkipGenerationCheck,
    /// A batch answers before it commits (needs `--features planted`).
    AnswerBeforeCommit,
    /// A restarted berth forgets which lease events fired (needs `--features planted`).
    RefireAfterRecovery,
    /// Floating IPs given without looking at the leases holding them (needs `--features planted`).
    SkipFloatingIpCheck,
    /// A node claim that ends leaves its allocation on the node (needs `--features planted`).
    ClaimKeepsNode,
}

impl Args {
    fn config(&self, seed: u64) -> Config {
        Config {
            seed,
            steps: self.steps,
            durability: match self.disk {
                Disk::Synced => Durability::Synced,
                Disk::Unsynced => Durability::Unsynced,
            },
            defect: self.defect.map(|defect| match defect {
                Defect::LoseLastCommit => Planted::LoseLastCommit,
                Defect::SkipCapacityCheck => Planted::SkipCapacityCheck,
                Defect::SkipGenerationCheck => Planted::SkipGenerationCheck,
                Defect::AnswerBeforeCommit => Planted::AnswerBeforeCommit,
                Defect::RefireAfterRecovery => Planted::RefireAfterRecovery,
                Defect::SkipFloatingIpCheck => Planted::SkipFloatingIpCheck,
                Defect::ClaimKeepsNode => Planted::ClaimKeepsNode,
            }),
            trace: self.trace,
        }
    }
}

/// What the workers found together.
#[derive(Default)]
struct Tally {
    report: Report,
    seeds: u64,
    /// The lowest failing seed and what broke.
    failure: Option<Failure>,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let started = std::time::Instant::now();
    let deadline = args
        .minutes
        .map(|m| started + std::time::Duration::from_secs(m * 60));
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let next = AtomicU64::new(args.seed);
    let stop = AtomicBool::new(false);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                // Each worker takes the next seed until the count or the time is reached, or a
                // seed failed.
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    let done = match deadline {
                        Some(deadline) => std::time::Instant::now() >= deadline,
                        None => seed >= args.seed.saturating_add(args.seeds),
                    };
                    if done {
                        break;
                    }
                    let outcome = run(&args.config(seed));
                    let mut tally = tally.lock().expect("invariant: never poisoned");
                    match outcome {
                        Ok(report) => {
                            tally.report.writes += report.writes;
                            tally.report.acked += report.acked;
                            tally.report.refused += report.refused;
                            tally.report.unanswered += report.unanswered;
                            tally.report.crashes += report.crashes;
                            tally.report.events += report.events;
                            tally.report.admissions += report.admissions;
                            tally.report.claims += report.claims;
                            tally.report.jumps_back += report.jumps_back;
                            tally.seeds += 1;
                        }
                        Err(failure) => {
                            stop.store(true, Ordering::Relaxed);
                            if tally.failure.as_ref().is_none_or(|f| f.seed > failure.seed) {
                                tally.failure = Some(failure);
                            }
                        }
                    }
                }
            });
        }
    });
    let tally = tally.into_inner().expect("invariant: never poisoned");
    if let Some(failure) = tally.failure {
        eprintln!("{failure}");
        eprintln!(
            "replay: berth-sim --seed {} --steps {}",
            failure.seed, args.steps
        );
        return std::process::ExitCode::FAILURE;
    }
    let total = tally.report;
    println!(
        "{} seeds from {} passed in {:.1} s ({jobs} jobs): {} writes ({} acknowledged, {} refused, {} unanswered), {} crashes, {} lifecycle events, {} node claims granted, {} backward clock jumps, {} admissions checked against the reference models",
        tally.seeds,
        args.seed,
        started.elapsed().as_secs_f64(),
        total.writes,
        total.acked,
        total.refused,
        total.unanswered,
        total.crashes,
        total.events,
        total.claims,
        total.jumps_back,
        total.admissions
    );
    std::process::ExitCode::SUCCESS
}
