//! The `berth` binary: parses the command line and runs the server, a health check, or a
//! client command against a running server.
#![forbid(unsafe_code)]

use berth_server::config::{Cli, Command, Config};
use clap::{CommandFactory as _, Parser};
use tracing_subscriber::EnvFilter;

/// jemalloc, with the options `.cargo/config.toml` builds in: berth keeps its whole catalog in
/// memory, and the system allocator held on to what the start-up's decoding threads freed
/// (docs/benchmarks.md, "Memory of a replica").
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn init_tracing() {
    let filter = EnvFilter::try_from_env("BERTH_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=warn"));
    let json = std::env::var("BERTH_LOG_FORMAT").is_ok_and(|v| v == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match json {
        true => builder.json().init(),
        false => builder.init(),
    }
}

/// The runtime's worker threads: `TOKIO_WORKER_THREADS` if set, otherwise twice the cores (at
/// least four). berth's requests are short and use the CPU; with more workers than cores the
/// operating system time-slices them, so a short request (a health check) is taken up within a
/// slice instead of waiting for busy workers' tasks to yield (docs/benchmarks.md, "Bounded work
/// under attack").
fn worker_threads() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
            (2 * cores).max(4)
        })
}

fn main() -> std::process::ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run()),
        Err(error) => {
            eprintln!("berth: cannot start the runtime: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Plants the defect `BERTH_PLANTED_DEFECT` names (`skip-capacity-check`,
/// `skip-generation-check`, `answer-before-commit`), in a build with the feature
/// `planted-defects` only: the fault harness's negative controls.
#[cfg(feature = "planted-defects")]
fn plant_from_env() {
    use berth_core::planted::{Defect, plant};
    let defect = match std::env::var("BERTH_PLANTED_DEFECT").as_deref() {
        Ok("skip-capacity-check") => Some(Defect::SkipCapacityCheck),
        Ok("skip-generation-check") => Some(Defect::SkipGenerationCheck),
        Ok("answer-before-commit") => Some(Defect::AnswerBeforeCommit),
        _ => None,
    };
    if let Some(defect) = defect {
        eprintln!("berth: the defect {defect:?} is planted (a negative control)");
    }
    plant(defect);
}

async fn run() -> std::process::ExitCode {
    #[cfg(feature = "planted-defects")]
    plant_from_env();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            let config = match Config::from_args(&args) {
                Ok(config) => config,
                Err(error) => {
                    eprintln!("berth: {error:#}");
                    return std::process::ExitCode::from(2);
                }
            };
            if args.print_config {
                print!("{}", config.describe());
                return std::process::ExitCode::SUCCESS;
            }
            init_tracing();
            match berth_server::serve(&config).await {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("berth: {error:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        Command::Healthcheck { url } => healthcheck(&url).await,
        Command::Client(command) => berth_cli::run(command, Cli::command).await,
    }
}

/// Asks `/healthz` over plain HTTP/1.1 and exits 0 when the server is ready.
async fn healthcheck(url: &str) -> std::process::ExitCode {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = url.trim_start_matches("http://").trim_end_matches('/');
    let Ok(mut stream) = tokio::net::TcpStream::connect(authority).await else {
        eprintln!("berth: cannot connect to {authority}");
        return std::process::ExitCode::FAILURE;
    };
    let request =
        format!("GET /healthz HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    let mut response = String::new();
    if stream.write_all(request.as_bytes()).await.is_err()
        || stream.read_to_string(&mut response).await.is_err()
    {
        eprintln!("berth: no answer from {authority}");
        return std::process::ExitCode::FAILURE;
    }
    match response.starts_with("HTTP/1.1 200") {
        true => std::process::ExitCode::SUCCESS,
        false => {
            eprintln!(
                "berth: {}",
                response.lines().next().unwrap_or("no status line")
            );
            std::process::ExitCode::FAILURE
        }
    }
}
