//! The command-line client: `berth host|provider|lease|reservation|availability|capacity|
//! flavor|node|claim|subscription|notification|provider-cloud|usage|budget ...` and `berth completions`.
//!
//! It is a client of berth's HTTP API and nothing else: every command is one or a few requests
//! to a running server (`--url`, `BERTH_URL`), with `X-Auth-Token` when a token is given
//! (`--token`, `BERTH_TOKEN`). It never opens the store and makes no decision of its own; what
//! berth refuses is printed with berth's reason and counter-offer.
//!
//! Exit codes: 0 success; 1 berth refused the request (or answered with an error); 2 a usage
//! error or berth could not be reached.
//!
//! The `berth` binary parses the command line (its own `serve` and `healthcheck` beside these
//! commands) and hands a client command to [`run`]. The crate root declares the modules and
//! dispatches; what the commands share lives in `connection`, `error`, `client`, `output`,
//! `refusal`, `args` and `time`.
#![forbid(unsafe_code)]

mod args;
pub mod availability;
pub mod budgets;
pub mod capacity;
mod client;
pub mod clouds;
mod connection;
mod error;
mod filter;
pub mod hosts;
pub mod leases;
pub mod nodes;
mod output;
mod progress;
pub mod providers;
mod refusal;
pub mod reservations;
pub mod subscriptions;
mod time;
pub mod usage;

pub use connection::Connection;
pub use output::Format;

use clap::Subcommand;
use connection::Ctx;
use error::CliError;
use std::process::ExitCode;

/// The client's commands.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Hosts (Blazar): enrol, list, show, update, delete.
    Host(hosts::HostCommand),
    /// Resource providers (Placement): list, show, create, update, delete.
    Provider(providers::ProviderCommand),
    /// Leases (Blazar): create (and wait for the start), list, show, update, delete, events.
    Lease(leases::LeaseCommand),
    /// The reservations of leases: list, show, update.
    Reservation(reservations::ReservationCommand),
    /// When a number of hosts (or instances) are free together for a while.
    Availability(availability::AvailabilityArgs),
    /// Capacity over a window (Promise): total, reserved, allocated, available.
    Capacity(capacity::CapacityCommand),
    /// Flavors (Promise): list, show, create, delete.
    Flavor(capacity::FlavorCommand),
    /// Bare-metal nodes: enrol, list, show, update, delete, claim, deploy.
    Node(nodes::NodeCommand),
    /// Bare-metal node claims: create, list, show, delete (release).
    Claim(nodes::ClaimCommand),
    /// Notification subscriptions (Promise): create, list, show, delete.
    Subscription(subscriptions::SubscriptionCommand),
    /// The notification feed (Promise): list.
    Notification(subscriptions::NotificationCommand),
    /// OpenStack clouds registered with berth (Promise's add-provider): add, list, show, remove.
    ProviderCloud(clouds::ProviderCloudCommand),
    /// Usage by project and resource class over a period: reserved, consumed, lent, idle, on
    /// demand and preemptible unit-hours.
    Usage(usage::UsageArgs),
    /// Budgets of resource-hours per period: list, show, set, delete.
    Budget(budgets::BudgetCommand),
    /// Prints a shell completion script (for example `berth completions bash > /etc/bash_completion.d/berth`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Runs a client command and says how it ended. `berth_command` is the whole command line the
/// binary parses, which `berth completions` describes.
pub async fn run(
    command: ClientCommand,
    berth_command: impl FnOnce() -> clap::Command,
) -> ExitCode {
    let format = match &command {
        ClientCommand::Host(c) => c.connection.output,
        ClientCommand::Provider(c) => c.connection.output,
        ClientCommand::Lease(c) => c.connection.output,
        ClientCommand::Reservation(c) => c.connection.output,
        ClientCommand::Availability(c) => c.connection.output,
        ClientCommand::Capacity(c) => c.connection.output,
        ClientCommand::Flavor(c) => c.connection.output,
        ClientCommand::Node(c) => c.connection.output,
        ClientCommand::Claim(c) => c.connection.output,
        ClientCommand::Subscription(c) => c.connection.output,
        ClientCommand::Notification(c) => c.connection.output,
        ClientCommand::ProviderCloud(c) => c.connection.output,
        ClientCommand::Usage(c) => c.connection.output,
        ClientCommand::Budget(c) => c.connection.output,
        ClientCommand::Completions { .. } => Format::Table,
    };
    match dispatch(command, berth_command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            refusal::report(&error, format);
            ExitCode::from(error.exit_code())
        }
    }
}

async fn dispatch(
    command: ClientCommand,
    berth_command: impl FnOnce() -> clap::Command,
) -> Result<(), CliError> {
    match command {
        ClientCommand::Host(c) => hosts::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Provider(c) => providers::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Lease(c) => leases::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Reservation(c) => reservations::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Availability(c) => availability::run(&Ctx::new(&c.connection)?, &c).await,
        ClientCommand::Capacity(c) => capacity::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Flavor(c) => capacity::run_flavor(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Node(c) => nodes::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Claim(c) => nodes::run_claim(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Subscription(c) => {
            subscriptions::run(&Ctx::new(&c.connection)?, c.verb).await
        }
        ClientCommand::Notification(c) => {
            subscriptions::run_notification(&Ctx::new(&c.connection)?, c.verb).await
        }
        ClientCommand::ProviderCloud(c) => clouds::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Usage(c) => usage::run(&Ctx::new(&c.connection)?, &c).await,
        ClientCommand::Budget(c) => budgets::run(&Ctx::new(&c.connection)?, c.verb).await,
        ClientCommand::Completions { shell } => {
            let mut command = berth_command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "berth", &mut script);
            output::print(&String::from_utf8_lossy(&script));
            Ok(())
        }
    }
}
