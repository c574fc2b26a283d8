//! Where berth is, who is asking and how answers are printed: the flags every resource accepts,
//! and what a command runs with.

use crate::client::Client;
use crate::error::CliError;
use crate::output::Format;
use clap::Args;

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

/// What a command needs: a client of berth and the output format.
pub(crate) struct Ctx {
    pub(crate) client: Client,
    pub(crate) format: Format,
}

impl Ctx {
    pub(crate) fn new(connection: &Connection) -> Result<Ctx, CliError> {
        Ok(Ctx {
            client: Client::new(&connection.url, connection.token.as_deref())?,
            format: connection.output,
        })
    }
}
