//! The command-line client: `berth host|provider|lease|reservation|availability|capacity|
//! flavor|node|claim|subscription|notification ...` and `berth completions`.
//!
//! It is a client of berth's HTTP API and nothing else: every command is one or a few requests
//! to a running server (`--url`, `BERTH_URL`), with `X-Auth-Token` when a token is given
//! (`--token`, `BERTH_TOKEN`). It never opens the store and makes no decision of its own; what
//! berth refuses is printed with berth's reason and counter-offer.
//!
//! Exit codes: 0 success; 1 berth refused the request (or answered with an error); 2 a usage
//! error or berth could not be reached.

mod args;
pub mod availability;
pub mod capacity;
mod client;
mod filter;
pub mod hosts;
pub mod leases;
pub mod nodes;
mod output;
mod progress;
pub mod providers;
pub mod reservations;
pub mod subscriptions;
mod time;

pub use output::Format;

use clap::{Args, Subcommand};
use client::Client;
use serde_json::Value;
use std::process::ExitCode;

/// Where berth is, who is asking, and how answers are printed (accepted anywhere after the
/// resource name).
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Base URL of berth.
    #[arg(
        long,
        global = true,
        help_heading = "Connection and output",
        env = "BERTH_URL",
        default_value = "http://127.0.0.1:8778"
    )]
    pub url: String,
    /// Token sent as `X-Auth-Token`.
    #[arg(
        long,
        global = true,
        help_heading = "Connection and output",
        env = "BERTH_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Output format: aligned tables for people, berth's JSON as JSON or YAML for scripts.
    #[arg(
        long,
        short = 'o',
        global = true,
        help_heading = "Connection and output",
        value_enum,
        default_value_t = Format::Table
    )]
    pub output: Format,
}

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
    /// Prints a shell completion script (for example `berth completions bash > /etc/bash_completion.d/berth`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Why a command did not succeed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CliError {
    /// The command line is wrong (exit 2).
    Usage(String),
    /// berth could not be reached (exit 2).
    Connection(String),
    /// berth answered with an error status (exit 1).
    Refused {
        /// The HTTP status.
        status: u16,
        /// berth's answer.
        body: Value,
    },
    /// The command ran but did not get what it wanted (exit 1).
    Failed(String),
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Connection(_) => 2,
            CliError::Refused { .. } | CliError::Failed(_) => 1,
        }
    }
}

/// What a command needs: a client of berth and the output format.
pub(crate) struct Ctx {
    pub(crate) client: Client,
    pub(crate) format: Format,
}

impl Ctx {
    fn new(connection: &Connection) -> Result<Ctx, CliError> {
        Ok(Ctx {
            client: Client::new(&connection.url, connection.token.as_deref())?,
            format: connection.output,
        })
    }
}

/// Runs a client command and says how it ended.
pub async fn run(command: ClientCommand) -> ExitCode {
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
        ClientCommand::Completions { .. } => Format::Table,
    };
    match dispatch(command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            report(&error, format);
            ExitCode::from(error.exit_code())
        }
    }
}

async fn dispatch(command: ClientCommand) -> Result<(), CliError> {
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
        ClientCommand::Completions { shell } => {
            let mut command = <crate::config::Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "berth", &mut script);
            output::print(&String::from_utf8_lossy(&script));
            Ok(())
        }
    }
}

/// Prints why a command failed on standard error (and, for scripts asking for JSON or YAML,
/// berth's error body on standard output).
fn report(error: &CliError, format: Format) {
    match error {
        CliError::Usage(message) => eprintln!("berth: {message}"),
        CliError::Connection(message) => eprintln!("berth: {message}"),
        CliError::Failed(message) => eprintln!("berth: {message}"),
        CliError::Refused { status, body } => {
            if format != Format::Table
                && let Ok(text) = output::structured(format, body)
            {
                output::print(&text);
            }
            eprint!("{}", refusal_text(*status, body));
        }
    }
}

/// berth's reason for an error answer, from any surface's error format.
fn reason(body: &Value) -> String {
    let candidates = [
        body.get("error_message"),
        body.pointer("/errors/0/detail"),
        body.get("detail"),
        body.get("message"),
        body.as_str().map(|_| body),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map_or_else(
            || "no reason given".to_owned(),
            |text| text.trim().to_owned(),
        )
}

/// The text printed for an error answer: the status and reason, then what berth added (why
/// each reservation or node could not be had, and the counter-offer).
fn refusal_text(status: u16, body: &Value) -> String {
    let title = match status {
        400 => "bad request",
        401 => "not authenticated",
        403 => "forbidden",
        404 => "not found",
        409 => "refused",
        413 => "request too large",
        s if s >= 500 => "server error",
        _ => "refused",
    };
    let mut reason = reason(body);
    // Blazar's message repeats the shortfalls listed below it.
    if body["reservations"].is_array()
        && let Some(at) = reason.find("; reservation ")
    {
        reason.truncate(at);
    }
    let mut out = format!("berth: {title} ({status}): {reason}\n");
    for shortfall in body["reservations"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  reservation {} ({}): {} requested, {} available{}\n",
            output::get(shortfall, "index"),
            output::get(shortfall, "resource_type"),
            output::get(shortfall, "requested"),
            output::get(shortfall, "available"),
            shortfall["reason"]
                .as_str()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
        ));
    }
    if let Some(offer) = body.get("counter_offer").filter(|o| o.is_object()) {
        out.push_str(&counter_offer_text(offer));
    }
    for node in body["nodes"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  node {}: {} ({})\n",
            output::get(node, "node_uuid"),
            output::get(node, "reason"),
            output::get(node, "detail"),
        ));
    }
    for key in ["affected", "offer"] {
        if let Some(extra) = body.get(key).filter(|v| !v.is_null()) {
            out.push_str(&format!("  {key}: {extra}\n"));
        }
    }
    out
}

/// The counter-offer of a refused lease or availability search, in words.
pub(crate) fn counter_offer_text(offer: &Value) -> String {
    let mut out = String::new();
    if let Some(amounts) = offer["amounts"].as_array().filter(|a| !a.is_empty()) {
        let amounts: Vec<String> = amounts
            .iter()
            .enumerate()
            .map(|(i, n)| format!("reservation {i}: {n}"))
            .collect();
        out.push_str(&format!(
            "  counter-offer: the most that fits in this window is {}\n",
            amounts.join(", ")
        ));
    }
    match offer["earliest_start"].as_str() {
        Some(start) => {
            let when = time::parse_server_time(start)
                .map(|at| format!(" ({})", time::relative(at)))
                .unwrap_or_default();
            out.push_str(&format!(
                "  counter-offer: all of it fits for the same duration from {} UTC{when}\n",
                time::show(start)
            ));
        }
        None => {
            out.push_str("  counter-offer: no start within the search horizon fits all of it\n")
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reasons_come_from_every_error_format() {
        assert_eq!(
            reason(&json!({"error_message": "Lease x could not be found"})),
            "Lease x could not be found"
        );
        assert_eq!(
            reason(&json!({"errors": [{"detail": "No such provider"}]})),
            "No such provider"
        );
        assert_eq!(reason(&json!({"detail": "bad", "message": "worse"})), "bad");
        assert_eq!(reason(&json!("plain text")), "plain text");
        assert_eq!(reason(&json!(null)), "no reason given");
    }

    #[test]
    fn a_refused_lease_shows_its_counter_offer() {
        let body = json!({
            "error_message": "Not enough resources available for the requested window",
            "reservations": [{"index": 0, "resource_type": "physical:host", "requested": 3,
                              "available": 1, "reason": "not_enough_hosts"}],
            "counter_offer": {"amounts": [1], "earliest_start": "2030-01-02T10:00:00.000000"},
        });
        let text = refusal_text(409, &body);
        assert!(
            text.starts_with("berth: refused (409): Not enough resources"),
            "{text}"
        );
        assert!(
            text.contains(
                "reservation 0 (physical:host): 3 requested, 1 available (not_enough_hosts)"
            ),
            "{text}"
        );
        assert!(
            text.contains("the most that fits in this window is reservation 0: 1"),
            "{text}"
        );
        assert!(text.contains("from 2030-01-02 10:00:00 UTC"), "{text}");
        let none = counter_offer_text(&json!({"amounts": [0], "earliest_start": null}));
        assert!(
            none.contains("no start within the search horizon"),
            "{none}"
        );
    }
}
