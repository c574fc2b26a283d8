//! `berth-history`: runs fault campaigns against the `berth` binary (one to three replicas over
//! a private PostgreSQL cluster, clients and a nemesis) and checks every run's history. Exits 1
//! when a run finds an anomaly or a history too large to check (or, with `--expect-anomaly`,
//! when none of the runs finds one).

use berth_history::nemesis::Fault;
use berth_history::run::{Config, campaign};
use berth_history::workload::Shape;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Histories of berth replicas under faults, checked for linearizability")]
struct Args {
    /// The `berth` binary to run.
    #[arg(long)]
    berth: PathBuf,
    /// The first run's seed (run i uses seed + i).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs.
    #[arg(long, default_value_t = 1)]
    runs: u64,
    /// Seconds of clients and faults per run.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Replicas (1 to 3).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=3))]
    replicas: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// The faults the nemesis injects [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    faults: Vec<FaultArg>,
    /// Start the replicas with this planted defect (a `berth` built with
    /// `--features berth-server/planted-defects`): `skip-generation-check`,
    /// `skip-capacity-check`, `answer-before-commit`.
    #[arg(long)]
    planted: Option<String>,
    /// A negative control: succeed only when a run finds an anomaly (stopping there).
    #[arg(long)]
    expect_anomaly: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum FaultArg {
    Kill,
    Pause,
    RestartPostgres,
    Partition,
    ClockOffset,
    None,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let faults = match args.faults.as_slice() {
        [] => vec![
            Fault::Kill,
            Fault::Pause,
            Fault::RestartPostgres,
            Fault::Partition,
            Fault::ClockOffset,
        ],
        chosen => chosen
            .iter()
            .filter_map(|f| match f {
                FaultArg::Kill => Some(Fault::Kill),
                FaultArg::Pause => Some(Fault::Pause),
                FaultArg::RestartPostgres => Some(Fault::RestartPostgres),
                FaultArg::Partition => Some(Fault::Partition),
                FaultArg::ClockOffset => Some(Fault::ClockOffset),
                FaultArg::None => None,
            })
            .collect(),
    };
    let config = Config {
        berth: args.berth,
        replicas: usize::try_from(args.replicas).unwrap_or(3),
        clients: args.clients,
        length: Duration::from_secs(args.seconds),
        faults,
        planted: args.planted,
        shape: Shape::default(),
    };
    let reports = match campaign(&config, args.runs, args.seed, args.expect_anomaly).await {
        Ok(reports) => reports,
        Err(error) => {
            eprintln!("berth-history: {error:#}");
            return std::process::ExitCode::from(2);
        }
    };
    let anomalous = reports.iter().filter(|r| r.anomalous()).count();
    let unchecked = reports
        .iter()
        .filter(|r| !r.check.unchecked().is_empty())
        .count();
    let operations: usize = reports
        .iter()
        .flat_map(|r| r.check.keys.values().map(|(_, n, _)| n))
        .sum();
    let faults: usize = reports.iter().map(|r| r.faults.len()).sum();
    println!(
        "berth-history: {} runs, {operations} operations, {faults} faults, {anomalous} runs with anomalies, {unchecked} runs with a history too large to check",
        reports.len()
    );
    let passed = match args.expect_anomaly {
        true => anomalous > 0,
        false => anomalous == 0 && unchecked == 0,
    };
    match passed {
        true => std::process::ExitCode::SUCCESS,
        false => std::process::ExitCode::FAILURE,
    }
}
