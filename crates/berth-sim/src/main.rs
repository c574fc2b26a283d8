//! `berth-sim`: runs the deterministic simulator of berth's write path.
//!
//! `berth-sim --seed N` replays one run bit for bit; `--seeds K` runs K seeds from N;
//! `--minutes M` runs seeds from N until M minutes have passed. Exits 1 at the first failing seed,
//! printing it.

use berth_sim::store::Durability;
use berth_sim::{Config, Defect as Planted, Report, run};
use clap::{Parser, ValueEnum};

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
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let started = std::time::Instant::now();
    let deadline = args
        .minutes
        .map(|m| started + std::time::Duration::from_secs(m * 60));
    let mut total = Report::default();
    let mut seeds = 0u64;
    let mut seed = args.seed;
    loop {
        let done = match deadline {
            Some(deadline) => std::time::Instant::now() >= deadline,
            None => seeds >= args.seeds,
        };
        if done {
            break;
        }
        let config = Config {
            seed,
            steps: args.steps,
            durability: match args.disk {
                Disk::Synced => Durability::Synced,
                Disk::Unsynced => Durability::Unsynced,
            },
            defect: args.defect.map(|defect| match defect {
                Defect::LoseLastCommit => Planted::LoseLastCommit,
                Defect::SkipCapacityCheck => Planted::SkipCapacityCheck,
                Defect::SkipGenerationCheck => Planted::SkipGenerationCheck,
                Defect::AnswerBeforeCommit => Planted::AnswerBeforeCommit,
                Defect::RefireAfterRecovery => Planted::RefireAfterRecovery,
            }),
            trace: args.trace,
        };
        match run(&config) {
            Ok(report) => {
                total.writes += report.writes;
                total.acked += report.acked;
                total.refused += report.refused;
                total.unanswered += report.unanswered;
                total.crashes += report.crashes;
                total.events += report.events;
            }
            Err(failure) => {
                eprintln!("{failure}");
                eprintln!("replay: berth-sim --seed {seed} --steps {}", args.steps);
                return std::process::ExitCode::FAILURE;
            }
        }
        seeds += 1;
        seed += 1;
    }
    println!(
        "{seeds} seeds from {} passed in {:.1} s: {} writes ({} acknowledged, {} refused, {} unanswered), {} crashes, {} lifecycle events",
        args.seed,
        started.elapsed().as_secs_f64(),
        total.writes,
        total.acked,
        total.refused,
        total.unanswered,
        total.crashes,
        total.events
    );
    std::process::ExitCode::SUCCESS
}
