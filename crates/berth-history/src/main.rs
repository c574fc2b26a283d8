//! `berth-history`: runs fault campaigns against the `berth` binary (one to three replicas over
//! a private PostgreSQL cluster, clients and a nemesis) and checks every run's history. Exits 1
//! when a run finds an anomaly or a history too large to check (or, with `--expect-anomaly`,
//! when none of the runs finds one).

use berth_history::nemesis::Fault;
use berth_history::run::{Config, campaign};
use berth_history::workload::{PAUSE_DEFAULT, Shape};
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
    /// A client's mean pause between two operations, in milliseconds (each pause is drawn from
    /// a third of it to five thirds): a larger one keeps a long run's history checkable on a
    /// fast machine.
    #[arg(long, default_value_t = PAUSE_DEFAULT.as_millis() as u64)]
    pause_ms: u64,
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
        pause: Duration::from_millis(args.pause_ms),
    };
    // Stopped by a signal, the campaign is dropped: its replicas are killed and its private
    // PostgreSQL stopped, as at its end.
    let outcome = tokio::select! {
        outcome = campaign(&config, args.runs, args.seed, args.expect_anomaly) => outcome,
        signal = stopped() => {
            eprintln!("berth-history: stopped by {signal}; the runs so far are not reported");
            return std::process::ExitCode::from(130);
        }
    };
    let reports = match outcome {
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

/// Waits for SIGINT or SIGTERM and names it (never, when neither can be watched).
async fn stopped() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut interrupt), Ok(mut terminate)) => tokio::select! {
            _ = interrupt.recv() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        },
        _ => std::future::pending().await,
    }
}
