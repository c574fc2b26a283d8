//! `berth-load`: a small load generator for Placement-compatible servers (berth or OpenStack
//! Placement). It populates providers, times GETs and drives allocation writes, and on berth's
//! Blazar surface creates leases and on its bare-metal surface claims nodes, and times writes
//! and reads spread over several replicas of one database, and writes a large Blazar population
//! straight into a PostgreSQL database for them; always against loopback URLs and always
//! bounded by a request count and a `--max-seconds` deadline (the population by its size).
#![forbid(unsafe_code)]

mod allocations;
mod attack;
mod claims;
mod client;
mod get;
mod leases;
mod pool;
mod populate;
mod populate_store;
mod replicas;
mod stats;

use clap::{Parser, Subcommand};
use client::Common;

/// Command line of `berth-load`.
#[derive(Parser)]
#[command(
    name = "berth-load",
    about = "Load generator for Placement-compatible servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create providers with inventories and aggregates (idempotent growth to N).
    Populate {
        #[command(flatten)]
        common: Common,
        /// Number of providers the server should hold afterwards.
        #[arg(long)]
        providers: usize,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
    },
    /// Time R GETs of one path and check that each answers 200.
    Get {
        #[command(flatten)]
        common: Common,
        /// Path below the endpoint, with its query string.
        #[arg(long)]
        path: String,
        /// Measured requests.
        #[arg(long, default_value_t = 100)]
        requests: usize,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        /// Requests sent and checked before measuring.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
    },
    /// PUT allocations for R new consumers, round-robin over the server's providers.
    PutAllocations {
        #[command(flatten)]
        common: Common,
        /// Writes to send.
        #[arg(long, default_value_t = 1000)]
        requests: usize,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Seed of the consumer uuids; change it to write again on the same server.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Blazar: enroll H hosts, then POST R leases (one small instance reservation each).
    CreateLeases {
        #[command(flatten)]
        common: Common,
        /// Hosts to enroll first (already enrolled ones are kept).
        #[arg(long, default_value_t = 100)]
        hosts: usize,
        /// Leases to create.
        #[arg(long, default_value_t = 5000)]
        leases: usize,
        /// Requests in flight at once.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Moves every window later; change it to create again on the same server.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Sends each create with its own `Idempotency-Key` (`bench-<seed>-<index>`).
        #[arg(long)]
        keyed: bool,
    },
    /// Bounded work: victims' lease creates and allocation writes and `/healthz`, timed while
    /// attackers loop the most expensive requests the limits allow (see `attack.rs`).
    Attack {
        #[command(flatten)]
        common: Common,
        /// Hosts to enroll first (already enrolled ones are kept).
        #[arg(long, default_value_t = 100)]
        hosts: usize,
        /// Children of the wide tree the candidates attack searches.
        #[arg(long, default_value_t = 100)]
        width: usize,
        /// Attacking clients (0: the victims alone, for a baseline).
        #[arg(long, default_value_t = 8)]
        attackers: usize,
        /// Victim clients creating leases, and as many writing allocations.
        #[arg(long, default_value_t = 4)]
        victims: usize,
        /// Length of the measured phase, in seconds.
        #[arg(long, default_value_t = 30)]
        seconds: u64,
        /// Most requests per class.
        #[arg(long, default_value_t = 20_000)]
        requests: usize,
    },
    /// Bare metal: enrol N nodes, then R rounds in which C clients claim every node (K listed
    /// per claim) and the claims are released.
    ClaimNodes {
        #[command(flatten)]
        common: Common,
        /// Nodes to enrol (on a fresh server) and to claim in every round.
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        /// Claim rounds.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Claiming clients.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Nodes listed per claim.
        #[arg(long, default_value_t = 8)]
        candidates: usize,
        /// Which nodes a client picks its candidates among: those no client has seen taken
        /// (`shared`, as schedulers reading one placement view do) or those it has not seen
        /// taken itself (`own`).
        #[arg(long, value_enum, default_value_t = claims::ViewKind::Shared)]
        view: claims::ViewKind,
    },
    /// Write H Blazar hosts and N single-reservation leases straight into an empty PostgreSQL
    /// database (no server), for `replicas` at sizes HTTP population would take hours to reach.
    PopulateStore {
        /// The database, e.g. postgres://postgres@127.0.0.1:5432/berth (loopback addresses
        /// only).
        #[arg(long)]
        database: String,
        /// Hosts to enroll.
        #[arg(long, default_value_t = 10_000)]
        hosts: usize,
        /// Leases to write.
        #[arg(long, default_value_t = 1_000_000)]
        leases: usize,
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Several replicas over one PostgreSQL database: writes to one replica and round robin,
    /// how soon a write shows on another replica, and the first read there after it.
    Replicas {
        #[command(flatten)]
        args: replicas::ReplicaArgs,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli.command).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("berth-load: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Populate {
            common,
            providers,
            concurrency,
        } => {
            let target = client::Target::new(&common)?;
            populate::run(&target, providers, concurrency).await
        }
        Command::Get {
            common,
            path,
            requests,
            concurrency,
            warmup,
        } => {
            let target = client::Target::new(&common)?;
            get::run(&target, &path, requests, concurrency, warmup).await
        }
        Command::PutAllocations {
            common,
            requests,
            concurrency,
            seed,
        } => {
            let target = client::Target::new(&common)?;
            allocations::run(&target, requests, concurrency, seed).await
        }
        Command::CreateLeases {
            common,
            hosts,
            leases,
            concurrency,
            seed,
            keyed,
        } => {
            let target = client::Target::new(&common)?;
            leases::run(&target, hosts, leases, concurrency, seed, keyed).await
        }
        Command::Attack {
            common,
            hosts,
            width,
            attackers,
            victims,
            seconds,
            requests,
        } => {
            let target = client::Target::new(&common)?;
            let options = attack::Options {
                hosts,
                width,
                attackers,
                victims,
                seconds,
                requests,
            };
            attack::run(&target, &options).await
        }
        Command::ClaimNodes {
            common,
            nodes,
            rounds,
            concurrency,
            candidates,
            view,
        } => {
            let target = client::Target::new(&common)?;
            let options = claims::Options {
                nodes,
                rounds,
                concurrency,
                candidates,
                view,
            };
            claims::run(&target, &options).await
        }
        Command::PopulateStore {
            database,
            hosts,
            leases,
            json,
        } => populate_store::run(&database, hosts, leases, json).await,
        Command::Replicas { args } => replicas::run(&args).await,
    }
}
